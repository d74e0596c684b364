"""Clusters of two blocks for a GEMM main loop by warp roles on sm_90a (plan_pipeline.cluster_pairs):
the pair takes neighbouring tile rows, loads the tile of B they share once (each block every
other box, by TMA multicast into both), frees a stage once both blocks' consumers are done with
it, and launches as clusters (sm90._Pair, lower/kernel._cluster_walk). Off by default until it has
run on a GPU (plan_pipeline.CLUSTER_PAIRS); these tests turn it on."""

from __future__ import annotations

import pathlib

import pytest

from tilec import tir, tir_walk
from tilec.driver import compile_file
from tilec.elaborate import elaborate_file
from tilec.explain import explain_program, render_text
from tilec.passes import plan_pipeline
from tilec.pipeline import run_passes

ROOT = pathlib.Path(__file__).resolve().parent.parent
GEMM = ROOT / "examples" / "gemm.tile"


def _gemm(before: str = "clear(C_local)", trips: str = "ceildiv(K, block_K)", bias: str = "") -> str:
    """examples/gemm.tile's program with `before` in place of the accumulator's clear (one line or
    two, at the kernel body's indent), `trips` as the main loop's trip count, and `bias`, a
    parameter more."""
    before = "\n        ".join(before.splitlines())
    return f"""param block_M = 128
param block_N = 256
param block_K = 64
param dtype = float16

kernel gemm(A: Tensor((M, K), dtype), B: Tensor((K, N), dtype),{bias} C: Tensor((M, N), dtype)):
    with Kernel(ceildiv(N, block_N), ceildiv(M, block_M), threads=256) as (bx, by):
        A_shared = alloc_shared((block_M, block_K), dtype)
        B_shared = alloc_shared((block_K, block_N), dtype)
        C_local = alloc_fragment((block_M, block_N), float32)
        {before}
        for k in Pipelined({trips}, num_stages=3):
            copy(A[by * block_M, k * block_K], A_shared)
            copy(B[k * block_K, bx * block_N], B_shared)
            gemm(A_shared, B_shared, C_local)
        copy(C_local, C[by * block_M, bx * block_N])
"""


BIAS_BEFORE = _gemm(
    "for i, j in Parallel(block_M, block_N):\n    C_local[i, j] = Bias[by * block_M + i]",
    bias=" Bias: Tensor((M,), float32),",
)
TRIANGLE = _gemm(trips="by + 1")
ASSERT_BEFORE = _gemm('clear(C_local)\ndevice_assert(by * block_M < M, "row in range")')


@pytest.fixture(autouse=True)
def clusters_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """The clusters are off until measured on a GPU (plan_pipeline.CLUSTER_PAIRS): on for these tests."""
    monkeypatch.setattr(plan_pipeline, "CLUSTER_PAIRS", True)


def _loop(path: pathlib.Path, defines: dict[str, str] | None = None, arch: str = "sm_90a") -> tir.For:
    (u,) = run_passes(elaborate_file(str(path), defines or {}), arch)
    (loop,) = [s for s in tir_walk.stmts(u.kernel.body) if isinstance(s, tir.For) and s.kind == "pipelined"]
    return loop


def _written(tmp_path: pathlib.Path, text: str) -> pathlib.Path:
    path = tmp_path / "gemm.tile"
    path.write_text(text)
    return path


def test_the_example_gemm_runs_in_clusters_of_two() -> None:
    assert _loop(GEMM).cluster == 2


def test_clusters_are_off_until_measured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plan_pipeline, "CLUSTER_PAIRS", False)
    assert _loop(GEMM).cluster == 0
    assert "__cluster_dims__" not in compile_file(str(GEMM), arch="sm_90a")


def test_the_clustered_gemm_multicasts_b_and_frees_stages_in_both_blocks() -> None:
    cu = compile_file(str(GEMM), arch="sm_90a")
    assert "__launch_bounds__(384, 1) __cluster_dims__(2, 1, 1)" in cu
    assert "const int cta_rank = static_cast<int>(blockIdx.x) % 2;" in cu
    assert "const int by = pair_row * 2 + cta_rank;" in cu
    # each block loads boxes rank and rank + 2 of B's four 64-column boxes, into both blocks
    assert cu.count("tilec_tma_load_2d_multicast(") == 2 + 1  # the two calls and the helper
    assert "bx * 256 + cta_rank * 64 + 128, k * 64," in cu
    assert "tilec_tma_load_2d(&A_shared[stage][0], A_map" in cu  # A stays each block's own
    assert "tilec_mbarrier_expect_tx(&full_bar[stage], 49152);" in cu  # its whole stage lands in each block
    # a stage is free once the 8 consumer warps of both blocks are done with it
    assert "tilec_mbarrier_init(&empty_bar[i_1], 16);" in cu
    assert cu.count("tilec_mbarrier_arrive_remote(&empty_bar[") == 2
    # neither block arrives on the other's barriers before they are set up, nor leaves early
    assert cu.count("tilec_cluster_sync();") == 2
    assert 'bar.sync %0, %1;" ::"r"(0)' not in cu
    # an odd number of tile rows: the second block of the last pair stores nothing
    assert "if (by < (M + 127) / 128) {" in cu
    assert "tilec_cluster_blocks(reinterpret_cast<const void*>(gemm_kernel), 384, smem_bytes," in cu
    assert "tilec_persistent_blocks(" not in cu


def test_the_pair_walk_halves_the_panels() -> None:
    cu = compile_file(str(GEMM), arch="sm_90a")  # use_swizzle(8): panels of 4 pair rows, the same 8 rows
    assert "const int panel_rows = min(4, ((M + 127) / 128 + 1) / 2 - panel * 4);" in cu
    assert "const int tiles = (N + 255) / 256 * (((M + 127) / 128 + 1) / 2);" in cu


def test_explain_names_the_clusters() -> None:
    text = render_text(explain_program(elaborate_file(str(GEMM), {}), "sm_90a"))
    assert "clusters of 2 blocks" in text
    assert "TMA multicast" in text


@pytest.mark.parametrize(
    ("defines", "clustered"),
    [
        ({"block_M": "64", "block_N": "128", "threads": "128"}, True),  # B: 2 boxes, one a block
        ({"block_N": "64", "block_M": "128", "threads": "128"}, True),  # B: 1 box of 64 rows, 32 a block
        ({"block_N": "192"}, False),  # B: 3 boxes, no halves
    ],
)
def test_a_shared_tile_loads_in_two_halves(defines: dict[str, str], clustered: bool) -> None:
    assert (_loop(GEMM, defines).cluster == 2) is clustered


def test_a_one_box_tile_is_loaded_half_its_rows_by_each_block() -> None:
    # C = A B^T: B's 256x64 tile is one box of 128-byte rows; each block loads 128 rows of it
    cu = compile_file(str(ROOT / "bench" / "programs" / "gemm_nt.tile"), arch="sm_90a")
    assert "tilec_tma_load_2d_multicast(&B_shared[stage][cta_rank * 8192], B_map," in cu
    assert "k * 64, bx * 256 + cta_rank * 128, 3);" in cu
    assert "tilec_tensor_map_2d(&B_map, B, K, N, 64, 128, 2, 128)" in cu  # boxes of 128 rows


def test_no_clusters_off_sm90a_or_for_attention() -> None:
    assert _loop(GEMM, arch="sm_80").cluster == 0
    assert _loop(ROOT / "examples" / "flash_attention.tile").cluster == 0


def test_no_clusters_for_a_batched_grid() -> None:
    assert _loop(ROOT / "bench" / "programs" / "bmm_bias.tile").cluster == 0


def test_the_template_of_the_refused_programs_runs_in_clusters(tmp_path: pathlib.Path) -> None:
    # so that each refusal below is the doing of the one line it changes
    assert _loop(_written(tmp_path, _gemm())).cluster == 2


def test_no_clusters_when_global_memory_is_read_before_the_loop(tmp_path: pathlib.Path) -> None:
    # the pair's second block may get a row past the grid's: nothing may touch memory by its index
    # outside the main loop's bulk copies and the epilogue the kernel skips for it
    assert _loop(_written(tmp_path, BIAS_BEFORE)).cluster == 0


def test_no_clusters_when_a_statement_outside_the_epilogue_reads_the_row(tmp_path: pathlib.Path) -> None:
    # the pair's second block past the grid's last row would trap in the assert (found in review)
    loop = _loop(_written(tmp_path, ASSERT_BEFORE))
    assert loop.warp_specialized and loop.cluster == 0


def test_no_clusters_when_the_trip_count_depends_on_the_row(tmp_path: pathlib.Path) -> None:
    # the pair's rings must take the same stages: a trip count read from by would part them
    loop = _loop(_written(tmp_path, TRIANGLE))
    assert loop.warp_specialized and loop.cluster == 0
