"""Staging tiles (infer_layouts._place_staging): a shared tile that a fragment is copied into and
only copies touch gets conflict-free padded rows where that spares its copies wavefronts, and the
`unpad_staging` pass takes the pad back where it would cost the kernel shared memory it needs."""

from __future__ import annotations

import pathlib

import pytest

from tilec import thread_ir as T
from tilec.elaborate import elaborate_file
from tilec.pipeline import Unit, run_passes

GEMM = """kernel k(A: Tensor((M, K), float16), B: Tensor((K, N), float16), C: Tensor((M, N), float16),
           D: Tensor((4096, 64), float16)):
    with Kernel(ceildiv(N, 64), ceildiv(M, 64), threads=128) as (bx, by):
        A_s = alloc_shared((64, 32), float16)
        B_s = alloc_shared((32, 64), float16)
        X = alloc_shared(({rows}, 64), float16)
        acc = alloc_fragment((64, 64), float32)
        C_s = alloc_shared((64, 64), float16)
        copy(D[0, 0], X)
        clear(acc)
        for k in {loop}:
            copy(A[by * 64, k * 32], A_s)
            copy(B[k * 32, bx * 64], B_s)
            gemm(A_s, B_s, acc)
        {epilogue}
        copy(X, D[0, 0])
"""
STAGED = "copy(acc, C_s)\n        copy(C_s, C[by * 64, bx * 64])"
SERIAL = "range(ceildiv(K, 32))"


def build(tmp_path: pathlib.Path, arch: str, rows: int = 8, epilogue: str = STAGED, loop: str = SERIAL) -> Unit:
    path = tmp_path / "k.tile"
    path.write_text(GEMM.format(rows=rows, epilogue=epilogue, loop=loop))
    (unit,) = run_passes(elaborate_file(str(path), {}), arch)
    return unit


def c_s(unit: Unit) -> tuple[int, ...]:
    """The dimensions C_s is declared with in the kernel's code."""
    assert unit.lowered is not None
    (view,) = (v for v in unit.lowered.body if isinstance(v, T.SharedView) and v.name == "C_s")
    return view.dims


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_an_accumulator_staged_through_shared_memory_gets_conflict_free_rows(tmp_path: pathlib.Path, arch: str) -> None:
    # mma.sync and wgmma alike: a warp stores 4 bytes at the same columns of 8 rows of 128 bytes
    unit = build(tmp_path, arch)
    assert unit.layouts is not None and [b.name for b in unit.layouts.staging] == ["C_s"]
    assert c_s(unit) == (64, 72)  # 9 chunks of 16 bytes: the 8 rows in 8 bank groups


COPIED = """kernel k(A: Tensor((M, 64), float32), C: Tensor((M, 64), float16)):
    with Kernel(ceildiv(M, 64), threads=128) as bx:
        x = alloc_fragment((64, 64), float32)
        C_s = alloc_shared((64, 64), float16)
        copy(A[bx * 64, 0], x)
        copy(x, C_s)
        copy(C_s, C[bx * 64, 0])
"""


def test_a_fragment_whose_lanes_walk_a_row_leaves_the_tile_row_major(tmp_path: pathlib.Path) -> None:
    # the default layout stores 16-byte vectors along a row: row-major is conflict-free already
    path = tmp_path / "copied.tile"
    path.write_text(COPIED)
    (unit,) = run_passes(elaborate_file(str(path), {}), "sm_80")
    assert c_s(unit) == (64, 64)
    assert c_s(build(tmp_path, "gfx942")) == (64, 64)  # CDNA's MFMA accumulator: 32 lanes a row


def test_a_tile_read_element_by_element_is_no_staging_tile(tmp_path: pathlib.Path) -> None:
    read = "for i, j in Parallel(64, 64):\n            C[by * 64 + i, bx * 64 + j] = C_s[i, j]"
    epilogue = f"copy(acc, C_s)\n        {read}"
    assert c_s(build(tmp_path, "sm_80", epilogue=epilogue)) == (64, 64)


def test_the_pad_gives_way_where_the_kernel_would_not_fit(tmp_path: pathlib.Path) -> None:
    # sm_80 allows 166912 bytes: A_s 5120 + B_s 4096 + X + C_s 8192 (9216 padded)
    fits = build(tmp_path, "sm_80", rows=(166912 - 5120 - 4096 - 9216) // 128)
    assert c_s(fits) == (64, 72)
    tight = build(tmp_path, "sm_80", rows=(166912 - 5120 - 4096 - 8192) // 128)
    assert c_s(tight) == (64, 64) and tight.lowered is not None
    assert tight.lowered.dynamic_smem == 166912  # neither over the limit nor packed by lifetime
    assert tight.layouts is not None and not tight.layouts.staging


def test_the_pad_gives_way_to_a_second_block_of_a_warp_role_kernel(tmp_path: pathlib.Path) -> None:
    # two blocks of a warp-role kernel fit sm_90a's shared memory at 115712 bytes each at most
    pipelined = "Pipelined(ceildiv(K, 32), num_stages=3)"
    roomy = build(tmp_path, "sm_90a", rows=632, loop=pipelined)  # 114736 bytes padded: two blocks
    assert roomy.lowered is not None and roomy.lowered.min_blocks == 2 and c_s(roomy) == (64, 72)
    two = build(tmp_path, "sm_90a", rows=640, loop=pipelined)  # 114736 bytes, 115760 padded
    assert two.lowered is not None and two.lowered.min_blocks == 2 and c_s(two) == (64, 64)
    one = build(tmp_path, "sm_90a", rows=648, loop=pipelined)  # one block either way: padded
    assert one.lowered is not None and one.lowered.min_blocks == 1 and c_s(one) == (64, 72)
