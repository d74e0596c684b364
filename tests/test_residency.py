"""What a block reads twice (lower/residency.py) and the launcher that keeps it in L2."""

from __future__ import annotations

import pathlib

from tilec.driver import compile_file
from tilec.elaborate import elaborate_file
from tilec.lower.residency import reread_bytes

ROOT = pathlib.Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "corpus" / "tilelang"

HEAD = """param N = 1024
param w = 256

kernel two_pass(A: Tensor((M, N), float16), B: Tensor((M, N), float16)):
    with Kernel(M, threads=128) as bx:
        A_shared = alloc_shared((1, w), float16)
        acc = alloc_fragment((1, w), float32)
        clear(acc)
        for k in serial(N // w):
            copy(A[bx, k * w], A_shared)
            for i, j in Parallel(1, w):
                acc[i, j] += A_shared[i, j]
"""


def reread(tmp_path: pathlib.Path, second: str) -> int:
    path = tmp_path / "k.tile"
    path.write_text(HEAD + second)
    (kernel,) = elaborate_file(str(path), {}).kernels
    return reread_bytes(kernel)


def test_the_split_rms_norm_reads_its_row_twice() -> None:
    kernels = {k.name: reread_bytes(k) for k in elaborate_file(str(CORPUS / "rms_norm.tile"), {}).kernels}
    assert kernels == {"rms_norm_splitk": 8192 * 4, "rms_norm": 0}


def test_a_second_pass_over_the_same_row_counts_the_first_pass_bytes(tmp_path: pathlib.Path) -> None:
    second = """        for k in serial(N // w):
            copy(A[bx, (N // w - 1 - k) * w], A_shared)
            copy(A_shared, B[bx, k * w])
"""
    assert reread(tmp_path, second) == 1024 * 2


def test_another_blocks_row_or_an_unknown_trip_count_is_no_reread(tmp_path: pathlib.Path) -> None:
    neighbour = """        for k in serial(N // w):
            copy(A[bx + 1, k * w], A_shared)
            copy(A_shared, B[bx, k * w])
"""
    assert reread(tmp_path, neighbour) == 0
    once = """        copy(A_shared, B[bx, 0])
"""
    assert reread(tmp_path, once) == 0


def test_the_launcher_pads_shared_memory_at_run_time_and_opts_in() -> None:
    text = compile_file(str(CORPUS / "rms_norm.tile"), {}, arch="sm_90a")
    launcher = text[text.index('extern "C" int rms_norm_splitk(') :]
    launcher = launcher[: launcher.index("\n}")]
    assert "const int smem_bytes = tilec_l2_resident_smem(3072, 32768LL);" in launcher
    assert "cudaFuncAttributeMaxDynamicSharedMemorySize" in launcher
    one_shot = text[text.index('extern "C" int rms_norm(') :]
    assert "tilec_l2_resident_smem" not in one_shot[: one_shot.index("\n}")]


def test_hip_has_no_such_launcher() -> None:
    assert "l2_resident" not in compile_file(str(CORPUS / "rms_norm.tile"), {}, arch="gfx942")


def test_what_every_block_reads_or_what_an_if_reads_is_no_reread(tmp_path: pathlib.Path) -> None:
    second = """        for k in serial(N // w):
            copy(A[0, k * w], A_shared)
            copy(A_shared, B[bx, k * w])
"""
    shared_row = HEAD.replace("copy(A[bx, k * w], A_shared)", "copy(A[0, k * w], A_shared)") + second
    path = tmp_path / "shared.tile"
    path.write_text(shared_row)
    (kernel,) = elaborate_file(str(path), {}).kernels
    assert reread_bytes(kernel) == 0
    under_if = """        if bx == 7:
            for k in serial(N // w):
                copy(A[bx, k * w], A_shared)
                copy(A_shared, B[bx, k * w])
"""
    assert reread(tmp_path, under_if) == 0


def test_a_read_that_does_not_move_with_the_loop_counts_once(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "k.tile"
    path.write_text(
        HEAD.replace("copy(A[bx, k * w], A_shared)", "copy(A[bx, 0], A_shared)")
        + "        copy(A[bx, 0], A_shared)\n        copy(A_shared, B[bx, 0])\n"
    )
    (kernel,) = elaborate_file(str(path), {}).kernels
    assert reread_bytes(kernel) == 256 * 2
