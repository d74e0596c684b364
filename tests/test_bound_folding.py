"""Bound tests lowering proves away: a loop counter below a constant trip count, a block index
below its grid extent (a row kernel's `bx + 1 <= M` in a grid of M blocks), a let bounded by
them; and a loop whose copies then test only kernel-wide flags, run in two versions."""

from __future__ import annotations

import pathlib

from tilec import tir
from tilec.elaborate import elaborate_file
from tilec.lower.cexpr import upper_bound
from tilec.pipeline import compile_program

I32 = tir.IntImm(0).dtype


def _compile(text: str, tmp_path: pathlib.Path) -> str:
    path = tmp_path / "k.tile"
    path.write_text(text)
    return compile_program(elaborate_file(str(path), {}))


ROW_KERNEL = """
kernel scale_rows(A: Tensor((M, 8192), float32), B: Tensor((M, 8192), float32)):
    with Kernel(ceildiv(M, ROWS), threads=128) as bx:
        A_shared = alloc_shared((ROWS, 512), float32)
        for k in Serial(16):
            copy(A[bx * ROWS, (15 - k) * 512], A_shared)
            for i, j in Parallel(ROWS, 512):
                A_shared[i, j] *= 2.0
            copy(A_shared, B[bx * ROWS, (15 - k) * 512])
"""


def test_a_grid_of_m_blocks_proves_each_row_inside(tmp_path: pathlib.Path) -> None:
    text = _compile(ROW_KERNEL.replace("ROWS", "1"), tmp_path)
    fast = text.split("if (A_vec4 && B_vec4) {", 1)[1].split("} else {", 1)[0]
    assert "bx + 1 <= M" not in text and "bx < M" not in fast
    assert "0 <=" not in fast  # (15 - k) * 512 is at least 0 for k < 16: the counter's bound


def test_a_ragged_last_tile_keeps_its_test(tmp_path: pathlib.Path) -> None:
    text = _compile(ROW_KERNEL.replace("ROWS", "4"), tmp_path)
    assert "bx * 4 + 4 <= M" in text


def test_a_loop_of_flag_tests_alone_runs_in_two_versions(tmp_path: pathlib.Path) -> None:
    text = _compile(ROW_KERNEL.replace("ROWS", "1"), tmp_path)
    fast, slow = text.split("if (A_vec4 && B_vec4) {", 1)[1].split("} else {", 1)
    assert "for (int k = 0; k < 16; ++k)" in fast and "if (A_vec4" not in fast.split("for (int k")[1][:2000]
    assert "for (int k = 0; k < 16; ++k)" in slow


def test_upper_bound_of_a_linear_form_with_a_falling_term() -> None:
    k = tir.Var("k", I32, "thread")
    e = tir.BinOp("-", tir.IntImm(7680), tir.BinOp("*", k, tir.IntImm(512), I32), I32)
    assert upper_bound(e, {k: 15}) == 7680
    assert upper_bound(tir.BinOp("+", e, tir.Var("M", I32, "thread"), I32), {k: 15}) is None
