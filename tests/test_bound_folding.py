"""Bound tests lowering proves away: a loop counter below a constant trip count, a block index
below its grid extent (a row kernel's `bx + 1 <= M` in a grid of M blocks), a let bounded by
them; and a loop whose copies then test only kernel-wide flags, run in two versions."""

from __future__ import annotations

import pathlib

from tilec import tir
from tilec.elaborate import elaborate_file
from tilec.lower.cexpr import max_value, upper_bound
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


def test_max_value_of_a_linear_form_with_a_falling_term() -> None:
    k = tir.Var("k", I32, "thread")
    e = tir.BinOp("-", tir.IntImm(7680), tir.BinOp("*", k, tir.IntImm(512), I32), I32)
    assert max_value(e, {k: 15}) == 7680 and upper_bound(e, {k: 15}) is None  # may be negative
    assert max_value(tir.BinOp("+", e, tir.Var("M", I32, "thread"), I32), {k: 15}) is None


# Found in review: a falling linear term's bound is no bound of a product or a quotient (either may
# be negative), and a loop or let lowered twice (a schedule's prologue, then its loop) keeps no
# bound from its first lowering.
PRODUCT = """
kernel prod(A: Tensor((64,), float32), B: Tensor((64,), float32)):
    with Kernel(1, threads=32) as bx:
        for k in serial(16):
            for j in serial(4):
                B[(1 - k) * (1 - j)] = A[(3 - k) * (3 - k)]
"""
QUOTIENT = """
kernel d(A: Tensor((5,), float32), B: Tensor((16,), float32)):
    with Kernel(1, threads=32) as bx:
        for k in serial(16):
            B[k] = A[(k - 17) // 4 + 5]
"""
SCHEDULED_LET = """
kernel sched(B: Tensor((128,), float32), C: Tensor((N,), float32)):
    with Kernel(1, threads=64) as bx:
        for k in Pipelined(ceildiv(N, 64), order=[0, 1], stage=[0, 1]):
            for i in Parallel(64):
                r = k * 64 + i
                B[r] = 1.0
            for i in Parallel(64):
                C[k * 64 + i] = 2.0
"""
SCHEDULED_LOOP = """
kernel sched2(B: Tensor((128,), float32), C: Tensor((N,), float32)):
    with Kernel(1, threads=64) as bx:
        for k in Pipelined(ceildiv(N, 64), order=[0, 1], stage=[0, 1]):
            for j in serial(k + 1):
                B[j] = 1.0
            for i in Parallel(64):
                C[k * 64 + i] = 2.0
"""


def test_a_product_of_falling_terms_keeps_its_upper_test(tmp_path: pathlib.Path) -> None:
    assert "(3 - k) * (3 - k) < 64" in _compile(PRODUCT, tmp_path)


def test_a_quotient_of_a_negative_value_keeps_its_upper_test(tmp_path: pathlib.Path) -> None:
    assert "(k - 17) / 4 + 5 < 5" in _compile(QUOTIENT, tmp_path)


def test_a_let_lowered_again_keeps_no_stale_bound(tmp_path: pathlib.Path) -> None:
    assert "if (r < 128)" in _compile(SCHEDULED_LET, tmp_path)


def test_a_loop_lowered_again_keeps_no_stale_bound(tmp_path: pathlib.Path) -> None:
    assert "if (j < 128)" in _compile(SCHEDULED_LOOP, tmp_path)
