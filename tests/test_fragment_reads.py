"""Reads of fragment elements the way TileLang programs write them: outside Parallel (the fragment
is then held whole by every thread) and, inside Parallel, at a constant 0 of an extent-1
dimension (the extent-1 loop variable's value)."""

from __future__ import annotations

import pytest

from tilec.diagnostics import CompileError
from tilec.driver import compile_file


def build(tmp_path, text: str, arch: str = "sm_80") -> str:  # noqa: ANN001
    src = tmp_path / "k.tile"
    src.write_text(text)
    return compile_file(str(src), {}, arch)


MASK = """kernel k(Mask: Tensor((4, 8), bool), X: Tensor((4, 8, 64), float32), Y: Tensor((4, 64), float32)):
    with Kernel(4, threads=64) as bx:
        mask = alloc_fragment((8,), bool)
        acc = alloc_fragment((64,), float32)
        x = alloc_fragment((64,), float32)
        copy(Mask[bx, 0], mask)
        clear(acc)
        for t in serial(8):
            if mask[t]:
                copy(X[bx, t, 0], x)
                for j in Parallel(64):
                    acc[j] += x[j]
        copy(acc, Y[bx, 0])
"""


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a", "gfx90a"])
def test_a_fragment_read_outside_parallel_is_held_whole_by_every_thread(tmp_path, arch: str) -> None:  # noqa: ANN001
    text = build(tmp_path, MASK, arch)
    assert "bool mask[8];" in text and "if (mask[t])" in text


def test_a_constant_zero_into_an_extent_1_dimension_is_the_loop_variable(tmp_path) -> None:  # noqa: ANN001
    text = build(
        tmp_path,
        """kernel ln(X: Tensor((M, 512), float32), Y: Tensor((M, 512), float32)):
    with Kernel(M, threads=128) as bx:
        x = alloc_fragment((1, 512), float32)
        s = alloc_fragment((1,), float32)
        copy(X[bx, 0], x)
        reduce_sum(x, s, dim=1)
        for i, j in Parallel(1, 512):
            x[i, j] = x[i, j] - s[0] / 512.0
        copy(x, Y[bx, 0])
""",
    )
    assert "- s[0] * (1.0f / 512.0f)" in text  # a divisor the row shares: its reciprocal (test_division.py)


def test_a_constant_index_elsewhere_is_still_an_error(tmp_path) -> None:  # noqa: ANN001
    with pytest.raises(CompileError, match="indexed by a computed index inside a Parallel loop"):
        build(
            tmp_path,
            """kernel k(X: Tensor((M, 64), float32), Y: Tensor((M, 64), float32)):
    with Kernel(ceildiv(M, 4), threads=128) as bx:
        x = alloc_fragment((4, 64), float32)
        s = alloc_fragment((4,), float32)
        copy(X[bx * 4, 0], x)
        reduce_sum(x, s, dim=1)
        for i, j in Parallel(4, 64):
            x[i, j] = x[i, j] - s[2]
        copy(x, Y[bx * 4, 0])
""",
        )
