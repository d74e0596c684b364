"""Warp roles for loops of several products (plan_pipeline's products form: flash attention's
Q K^T, softmax, P V; TileLang's MLA decode), and the tensor maps that fold a tensor of any rank
into a batch of matrices (plan_pipeline.box_row_dim)."""

from __future__ import annotations

import pathlib

from tilec import tir, tir_walk
from tilec.driver import compile_file
from tilec.elaborate import elaborate_file
from tilec.passes.plan_pipeline import box_row_dim, producers, runs_products
from tilec.pipeline import run_passes

ROOT = pathlib.Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "corpus" / "tilelang"


def loops(path: pathlib.Path, arch: str = "sm_90a") -> list[tir.For]:
    out = []
    for u in run_passes(elaborate_file(str(path), {}), arch):
        out += [s for s in tir_walk.stmts(u.kernel.body) if isinstance(s, tir.For) and s.kind == "pipelined"]
    return out


def test_attention_loops_of_tilelangs_examples_run_by_warp_roles() -> None:
    for name in ("mha_fwd_bhsd", "mha_fwd_bshd", "gqa_fwd_bshd", "mla_decode"):
        (loop,) = loops(CORPUS / f"{name}.tile")
        assert loop.warp_specialized and runs_products(loop), name


def test_a_gemm_main_loop_keeps_the_gemm_form() -> None:
    (loop,) = loops(ROOT / "examples" / "gemm.tile")
    assert loop.warp_specialized and not runs_products(loop)


def test_sm80_has_no_warp_roles() -> None:
    (loop,) = loops(CORPUS / "mha_fwd_bhsd.tile", "sm_80")
    assert not loop.warp_specialized


def test_work_on_global_memory_between_the_products_keeps_the_cp_async_pipeline(tmp_path: pathlib.Path) -> None:
    # linear attention adds each chunk's output into O: its loop is no products form
    (loop,) = loops(CORPUS / "linear_attn_fwd.tile")
    assert not loop.warp_specialized


def test_mla_scores_tile_is_ordered_by_a_consumer_barrier_before_p_v() -> None:
    text = compile_file(str(CORPUS / "mla_decode.tile"), {}, arch="sm_90a")
    kernel = text[text.index("main_no_split_kernel(") :]
    store = kernel.index("copy(acc_s, S_shared)")
    product = kernel.index("gemm(S_shared, KV_shared, acc_o")
    between = kernel[store:product]
    assert 'bar.sync %0, %1;" ::"r"(1), "r"(256)' in between and "fence.proxy.async" in between


def test_attention_consumers_run_no_barrier_per_iteration() -> None:
    text = compile_file(str(CORPUS / "mha_fwd_bhsd.tile"), {}, arch="sm_90a")
    kernel = text[text.index("flashattn_kernel(") :]
    # its 128x128 tiles overlap the products (sm90 _consumers_overlapped): iteration 0 is peeled,
    # the loop from k = 1 and the last P V after it wait on the K ring (full_bar) and the V ring
    # (full_bar_1) only; the warp groups' turns use hardware barriers 2 and 3, never the
    # consumers' barrier 1
    loop = kernel[kernel.index("for (int k = 1;") : kernel.index("consumed +=")]
    assert "__syncthreads" not in loop and 'bar.sync %0, %1;" ::"r"(1)' not in loop
    assert loop.count("tilec_mbarrier_wait(&full_bar[") == 1 and loop.count("tilec_mbarrier_wait(&full_bar_1[") == 2
    assert "tilec_mbarrier_arrive(&empty_bar[" in loop and "tilec_mbarrier_arrive(&empty_bar_1[" in loop


def test_tensor_maps_fold_leading_dimensions_into_a_batch_and_unit_ones_into_the_columns() -> None:
    # K of (batch 8, seq_len 4096, heads 32, dim 128), tile K[bz, k * 64 : ..., by, :]: each batch
    # a matrix of seq_len x heads * dim, boxes of 64 columns x 64 rows
    text = compile_file(str(CORPUS / "mha_fwd_bshd.tile"), {}, arch="sm_90a")
    assert "tilec_tensor_map_3d(&K_map, K, 4096, 4096, 8, 64, 64, 2, 128)" in text
    (loop,) = loops(CORPUS / "mha_fwd_bshd.tile")
    producers = [c for c in loop.body if isinstance(c, tir.Copy) and c.pipeline == "producer"]
    assert [box_row_dim(c) for c in producers] == [1, 1]
    # K of (batch, heads, seq_len, dim), tile K[bz, by, k * 128 : ..., :]: batch * heads matrices
    (loop,) = loops(CORPUS / "mha_fwd_bhsd.tile")
    producers = [c for c in loop.body if isinstance(c, tir.Copy) and c.pipeline == "producer"]
    assert [box_row_dim(c) for c in producers] == [2, 2]


def test_a_folded_index_that_may_lie_outside_its_dimension_reads_zeros(tmp_path: pathlib.Path) -> None:
    # A[bz // 4, bz % 4, ...] of a (2, 3, ...) tensor: bz % 4 == 3 is past the second dimension, where
    # the copy reads zeros; folded into the batch it would read A[bz // 4 + 1, 0]: the box goes
    # wholly outside the map instead (batch coordinate 6), which the hardware fills with zeros
    path = tmp_path / "k.tile"
    path.write_text(
        """kernel bmm(A: Tensor((2, 3, 256, 128), float16), B: Tensor((128, 256), float16),
            C: Tensor((2, 4, 256, 256), float32)):
    with Kernel(2, 2, 8, threads=128) as (bx, by, bz):
        A_s = alloc_shared([128, 64], float16)
        B_s = alloc_shared([64, 128], float16)
        C_f = alloc_fragment([128, 128], float32)
        clear(C_f)
        for k in Pipelined(2, num_stages=2):
            copy(A[bz // 4, bz % 4, by * 128, k * 64], A_s)
            copy(B[k * 64, bx * 128], B_s)
            gemm(A_s, B_s, C_f)
        copy(C_f, C[bz // 4, bz % 4, by * 128, bx * 128])
"""
    )
    text = " ".join(compile_file(str(path), {}, arch="sm_90a").split())
    assert "bz % 4 < 3 ? bz / 4 * 3 + bz % 4 : 6);" in text


def test_products_under_a_mask_keep_the_cp_async_pipeline(tmp_path: pathlib.Path) -> None:
    """Flash attention whose loop body is one `if` of a block mask (K and V copied first): the GEMM
    form alone runs by warp roles under a guard (plan_pipeline._consumer_form), as barrier
    placement finds no one code for consumers whose products' barriers sit under the `if`."""
    lines = (ROOT / "tests" / "golden" / "codegen" / "attention_warp_roles.tile").read_text().splitlines()
    first = next(i for i, line in enumerate(lines) if "for k in Pipelined" in line) + 1
    end = next(i for i in range(first, len(lines)) if not lines[i].startswith(" " * 12))
    body = ["            if Mask[k]:", *("    " + line for line in lines[first:end])]
    text = "\n".join([*lines[:first], *body, *lines[end:]]) + "\n"
    old = "O: Tensor((B, H, S, 64), float16)):"
    path = tmp_path / "masked.tile"
    path.write_text(text.replace(old, old[:-2] + ', Mask: Tensor((S,), "bool")):'))
    (found,) = loops(path)
    assert len(producers(found)) == 2 and all(c.guard is not None for c in producers(found))
    assert isinstance(found.body[-1], tir.If) and not found.warp_specialized
    compile_file(str(path), {}, arch="sm_90a")  # the cp.async pipeline with wgmma builds


def test_wide_d128_tiles_overlap_with_a_tight_producer_causal_loops_too() -> None:
    """128x128 tiles at D128 need more registers than the consumers' share beside a producer of 40:
    the producer gives up all but 24 (sm90 TIGHT_PRODUCER_REGISTERS) and the products overlap. A
    loop whose trip count depends on the block (causal: it stops at the diagonal) overlaps too,
    its peeled first iteration and the rotated loop run per tile of the persistent walk."""
    example = str(ROOT / "examples" / "flash_attention.tile")
    params = {"block_N": "128", "threads": "256"}
    wide = compile_file(example, params, arch="sm_90a")
    assert "for (int k = 1;" in wide
    assert "tilec_setmaxnreg_dec<24>" in wide and "tilec_setmaxnreg_inc<240>" in wide
    causal = compile_file(example, {**params, "is_causal": "True"}, arch="sm_90a")
    assert "for (int k = 1; k < loop_range;" in causal and "tilec_mbarrier_wait(&full_bar_1[" in causal
    assert "tilec_setmaxnreg_dec<24>" in causal
    # narrower key tiles keep their loop as written too, at any trip count
    assert "for (int k = 1;" not in compile_file(example, {"threads": "256"}, arch="sm_90a")


def test_d256_on_80_column_tiles_overlaps_and_wide_tiles_keep_the_general_allowance() -> None:
    """D256 on 128x80 key tiles (198 registers of fragments) overlaps with 40 registers beside them
    (sm90 OVERLAP_ADDRESS_REGISTERS, below 128 columns); TileLang's program at D128 on 128x160
    tiles (194) keeps the general 64 and its loop as written (overlapped it spilled); 64-column
    tiles stay below OVERLAP_MIN_COLUMNS."""
    example = str(ROOT / "examples" / "flash_attention.tile")
    d256 = {"dim": "256", "block_N": "80", "threads": "256"}
    assert "for (int k = 1;" in compile_file(example, d256, arch="sm_90a")
    assert "for (int k = 1;" not in compile_file(example, {**d256, "block_N": "64"}, arch="sm_90a")
    wide = {"dim": "128", "block_N": "160", "batch": "4", "heads": "32", "seq_q": "2048", "seq_kv": "2048"}
    assert "for (int k = 1;" not in compile_file(str(CORPUS / "mha_fwd_bhsd.tile"), wide, arch="sm_90a")
