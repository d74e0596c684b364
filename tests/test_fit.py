"""tune/fit.py: a build whose default configuration is over the target's limits takes the nearest
point of the file's candidate sets that fits (-Wconfig-fit); nothing else is fitted."""

from __future__ import annotations

import pathlib

import pytest

from tilec import driver, tir
from tilec.diagnostics import CompileError
from tilec.tune import fit

ROOT = pathlib.Path(__file__).resolve().parent.parent

PROGRAM = """
param block_K = 64 in (32, 64)
param num_stages = 3 in (1, 2, 3)
param threads = 256 in (128, 256)

kernel g(A: Tensor((M, K), float16), B: Tensor((K, N), float16), C: Tensor((M, N), float16)):
    with Kernel(ceildiv(N, 128), ceildiv(M, 128), threads=threads) as (bx, by):
        A_s = alloc_shared((128, block_K), float16)
        B_s = alloc_shared((block_K, 128), float16)
        acc = alloc_fragment((128, 128), float32)
        clear(acc)
        for k in Pipelined(ceildiv(K, block_K), num_stages=num_stages):
            copy(A[by * 128, k * block_K], A_s)
            copy(B[k * block_K, bx * 128], B_s)
            gemm(A_s, B_s, acc)
        copy(acc, C[by * 128, bx * 128])
"""


def _sets(*specs: tuple[str, str, tuple[str, ...]]) -> list[tir.CandidateSet]:
    return [tir.CandidateSet(param, value, candidates, None) for param, value, candidates in specs]  # type: ignore[arg-type]


def test_points_are_tried_fewest_changes_first_then_the_least_change() -> None:
    sets = _sets(("block_K", "64", ("32", "64")), ("num_stages", "3", ("1", "2", "3")))
    order = fit.by_distance(sets, {})
    assert order[:3] == [(("block_K", "64"), ("num_stages", "2")), (("block_K", "32"), ("num_stages", "3")),
                         (("block_K", "64"), ("num_stages", "1"))]  # fmt: skip
    assert (("block_K", "64"), ("num_stages", "3")) not in order  # the default itself is not retried
    assert fit.by_distance(sets, {"num_stages": "3"}) == [(("block_K", "32"),)]  # -D fixes a param


def test_a_build_over_the_limit_takes_the_nearest_point_that_fits(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "g.tile"
    path.write_text(PROGRAM)
    result = driver.build(str(path), {}, "gfx90a", cache=False)
    (w,) = [w for w in result.warnings if w.name == "config-fit"]
    assert w.message.startswith("the default configuration is over gfx90a's shared memory: taking block_K=32")
    assert w.notes[1].message == "'block_K' 64 -> 32, a candidate of its set" and "-D block_K=32" in (w.hint or "")
    assert "software pipeline, 3 stages" in result.text and "(K + 31) / 32" in result.text  # 32-wide K steps
    # -D pins both: nothing left to vary, so the pipeline keeps one LDS buffer per tile instead
    pinned = driver.build(str(path), {"block_K": "64", "num_stages": "3"}, "gfx90a", cache=False)
    assert [w.name for w in pinned.warnings] == ["single-buffer"] and "one buffer per tile" in pinned.text
    with pytest.raises(CompileError, match="shared memory"):  # over the LDS even with one buffer
        driver.build(str(path), {"block_K": "256", "num_stages": "3"}, "gfx90a", cache=False)
    assert not driver.build(str(path), {}, "sm_80", cache=False).warnings  # it fits there as it is


def test_only_limits_are_fitted(tmp_path: pathlib.Path) -> None:
    """An error of the program beside a limit error: nothing is fitted, both are reported."""
    path = tmp_path / "bad.tile"
    wide = PROGRAM.replace("alloc_shared((128, block_K), float16)", "alloc_shared((128, block_K * 8), float16)")
    path.write_text(wide.replace("clear(acc)", "clear(acc)\n        x = undefined_name"))
    with pytest.raises(CompileError) as e:
        driver.build(str(path), {}, "gfx90a", cache=False)
    messages = [d.message for d in e.value.diagnostics]
    assert any("undefined_name" in m for m in messages) and any(d.limit for d in e.value.diagnostics)


def test_werror_keeps_the_fit_an_error_and_writes_nothing(tmp_path: pathlib.Path) -> None:
    from click.testing import CliRunner

    from tilec import cli

    path, out = tmp_path / "g.tile", tmp_path / "g.hip"
    path.write_text(PROGRAM)
    result = CliRunner().invoke(cli.cli, ["build", str(path), "--arch", "gfx90a", "-o", str(out), "-Werror"])
    assert result.exit_code == 1 and "[-Werror=config-fit]" in result.output and not out.exists()
