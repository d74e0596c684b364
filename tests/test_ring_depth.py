"""The ring a GEMM main loop runs by warp roles on sm_90a (plan_pipeline.ring_depth) and the
epilogue that leaves it room (sm90.bulk_store a column block at a time, layout.column_blocks)."""

from __future__ import annotations

import pathlib

import pytest

from test_layout import owners
from tilec import layout as L
from tilec import tir, tir_walk
from tilec.driver import compile_file
from tilec.elaborate import elaborate_file
from tilec.passes.plan_pipeline import ring_stages
from tilec.pipeline import run_passes

ROOT = pathlib.Path(__file__).resolve().parent.parent
GEMM = ROOT / "examples" / "gemm.tile"
ATTENTION = ROOT / "examples" / "flash_attention.tile"


def main_loop(path: pathlib.Path, defines: dict[str, str] | None = None, arch: str = "sm_90a") -> tir.For:
    (u,) = run_passes(elaborate_file(str(path), defines or {}), arch)
    (loop,) = [s for s in tir_walk.stmts(u.kernel.body) if isinstance(s, tir.For) and s.kind == "pipelined"]
    return loop


def test_a_gemm_ring_is_deepened_where_shared_memory_has_room() -> None:
    # 128x256x64 tiles, num_stages=3: 4 stages of 48 KB and a 32 KB staging tile fit 227 KB
    loop = main_loop(GEMM)
    assert loop.num_stages == 3 and loop.ring == 4 and ring_stages(loop) == 4


@pytest.mark.parametrize(
    ("defines", "ring"),
    [
        ({"num_stages": "4", "block_K": "32"}, 4),  # asked for 4 already
        ({"block_M": "64", "block_N": "128", "threads": "128"}, 3),  # fits the multiprocessor twice as asked
    ],
)
def test_a_ring_stays_as_asked_where_deepening_would_not_pay(defines: dict[str, str], ring: int) -> None:
    loop = main_loop(GEMM, defines)
    assert loop.ring == 0 and ring_stages(loop) == ring


def test_attention_rings_stay_as_asked() -> None:
    loop = main_loop(ATTENTION)
    assert loop.warp_specialized and loop.ring == 0


def test_sm80_keeps_num_stages() -> None:
    assert main_loop(GEMM, arch="sm_80").ring == 0


def test_the_deepened_gemm_fits_and_stores_a_column_block_at_a_time() -> None:
    cu = compile_file(str(GEMM), arch="sm_90a")
    assert "const int smem_bytes = 230400;" in cu  # 4 x 48 KB ring, barriers, 2 x 16 KB staging
    assert "tilec_bulk_wait_read<1>();" in cu  # a half is written again once its last store read it
    assert "tilec_tma_store_2d(C_map, &C_stage[g1_1 % 2 * 8192], bx * 256 + g1_1 * 64, by * 128);" in cu


def wgmma_accumulator() -> L.Fragment:
    """The 128x256 wgmma accumulator of two warp groups, as infer_layouts gives examples/gemm.tile."""
    P = L.Part
    threads = (P(4, 1, 2), P(8, 0, 1), P(4, 0, 16), P(1, 1, 256), P(2, 0, 64))
    return L.Fragment((128, 256), threads, (P(1, 0, 64), P(32, 1, 8), P(2, 0, 8), P(2, 1, 1)))


@pytest.mark.parametrize("width", [16, 32, 64, 128])
def test_column_blocks_keep_every_element_in_its_register(width: int) -> None:
    frag = wgmma_accumulator()
    split = L.column_blocks(frag, width)
    assert split is not None
    assert L.merged(split.local_parts) == L.merged(frag.local_parts)
    assert owners(split) == owners(frag)  # same (thread, register) -> element
    top = split.local_parts[0]
    assert (top.extent, top.dim, top.stride) == (256 // width, 1, width)
    for (_, slot), (_, col) in owners(split).items():  # the top digit is the column block
        assert slot // (split.local_size // top.extent) == col // width


def test_column_blocks_refuse_a_layout_whose_first_digit_steps_rows() -> None:
    P = L.Part
    frag = L.Fragment((64, 64), (P(32, 1, 2), P(4, 0, 16)), (P(16, 0, 1), P(2, 1, 1)))
    assert L.column_blocks(frag, 32) is None


def test_an_odd_number_of_column_blocks_is_staged_whole() -> None:
    # halves taken in turn must alternate across a persistent block's tiles too: with 3 blocks the
    # next tile's block 0 would rewrite the half the last store may still be reading
    frag = wgmma_accumulator()
    three = L.Fragment(
        (128, 192), frag.thread_parts, tuple(L.Part(24, 1, 8) if p.extent == 32 else p for p in frag.local_parts)
    )
    assert L.staged_columns(three, 2) == (192, None)
    assert L.staged_columns(frag, 2)[0] == 128  # fp16: 4 blocks of 64, two staged
    assert L.staged_columns(frag, 4)[0] == 64  # fp32: 8 blocks of 32, two staged
    two = L.Fragment(
        (128, 128), frag.thread_parts, tuple(L.Part(16, 1, 8) if p.extent == 32 else p for p in frag.local_parts)
    )
    assert L.staged_columns(two, 2) == (128, None)  # 2 blocks: the whole tile
    cu = compile_file(str(GEMM), arch="sm_90a", defines={"block_N": "192"})
    assert "tilec_bulk_wait_read<1>" not in cu and "tilec_bulk_wait_read<0>" in cu


def test_the_ring_counts_the_staging_the_epilogue_takes() -> None:
    # 64x256 on two warp groups side by side: the fragment's first digit does not step column
    # blocks, so the whole tile is staged; the ring is deepened only as far as that leaves room
    frag_first_rows = L.Fragment((64, 64), (L.Part(32, 1, 2),), (L.Part(2, 0, 32), L.Part(32, 0, 1), L.Part(2, 1, 1)))
    assert L.staged_columns(frag_first_rows, 8) == (64, None)  # 8-byte elements: 4 blocks of 16
    cu = compile_file(str(GEMM), arch="sm_90a", defines={"block_M": "64", "threads": "256"})
    smem = int(cu.split("const int smem_bytes = ")[-1].split(";")[0])
    assert smem <= 232448 and "tilec_tma_store_2d" in cu
