"""A float32 division by a value a row of a Parallel loop shares (`o[i, j] / l[i]`) is a
multiplication by its reciprocal, which nvcc computes once per row of the unrolled loop; a divisor
of its own per element stays a division."""

from __future__ import annotations

import pytest

from tilec.driver import compile_file

ROWS = """kernel k(X: Tensor((64, 64), float32), L: Tensor((64, 64), float32), Y: Tensor((64, 64), float32)):
    with Kernel(1, threads=128) as bx:
        x = alloc_fragment((64, 64), float32)
        d = alloc_fragment((64, 64), float32)
        s = alloc_fragment((64,), float32)
        copy(X[0, 0], x)
        copy(L[0, 0], d)
        reduce_sum(x, s, dim=1)
        for i, j in Parallel(64, 64):
            x[i, j] = {value}
        copy(x, Y[0, 0])
"""


def build(tmp_path, value: str, arch: str) -> str:  # noqa: ANN001
    src = tmp_path / "k.tile"
    src.write_text(ROWS.format(value=value))
    return compile_file(str(src), {}, arch)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_a_row_divisor_becomes_a_reciprocal(tmp_path, arch: str) -> None:  # noqa: ANN001
    text = build(tmp_path, "x[i, j] / s[i]", arch)
    assert " * (1.0f / s[" in text and "] / s[" not in text


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_a_divisor_per_element_stays_a_division(tmp_path, arch: str) -> None:  # noqa: ANN001
    text = build(tmp_path, "x[i, j] / d[i, j]", arch)
    assert "] / d[" in text and "(1.0f / d[" not in text


PER_ELEMENT = """kernel k(X: Tensor((64, 64), float32), L: Tensor((64, 64), float32), Y: Tensor((64, 64), float32)):
    with Kernel(1, threads=128) as bx:
        x = alloc_fragment((64, 64), float32)
        L_s = alloc_shared((64, 64), float32)
        copy(X[0, 0], x)
        copy(L[0, 0], L_s)
        for i, j in Parallel(64, 64):
            t = x[i, j] + 1.0
            x[i, j] = x[i, j] / t + x[i, j] / L[i, j] + x[i, j] / L_s[i, j] + x[i, j] / (j + 1.0)
        copy(x, Y[0, 0])
"""


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_divisors_of_their_own_per_element_stay_divisions(tmp_path, arch: str) -> None:  # noqa: ANN001
    """A let, a global or shared read and an expression of the indices are C names or
    expressions by the time the division is lowered, whatever the element: no reciprocal."""
    src = tmp_path / "k.tile"
    src.write_text(PER_ELEMENT)
    text = compile_file(str(src), {}, arch)
    assert "(1.0f /" not in text and " / t" in text
