"""A kernel whose warp roles' fragments do not fit one consumer warp group's registers runs on two
(pipeline.py `_widened`): the tile ops distribute over the threads the kernel has."""

from __future__ import annotations

import pathlib

from tilec.driver import compile_file
from tilec.elaborate import elaborate_file
from tilec.pipeline import run_passes

ROOT = pathlib.Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "corpus" / "tilelang"


def threads(path: pathlib.Path, arch: str = "sm_90a", text: str | None = None) -> list[tuple[int, int]]:
    program = elaborate_file(str(path), {}, text=text) if text is not None else elaborate_file(str(path), {})
    return [(u.kernel.threads, u.kernel.threads_written) for u in run_passes(program, arch)]


def test_two_accumulators_of_128_registers_get_a_second_warp_group() -> None:
    assert threads(CORPUS / "gemm_fp8_2xacc.tile") == [(256, 128)]
    text = compile_file(str(CORPUS / "gemm_fp8_2xacc.tile"), {}, arch="sm_90a")
    assert "__launch_bounds__(384, 1)" in text and "tilec_setmaxnreg_inc<232>" in text
    assert "// 256 threads where the program says 128" in text


def test_the_attention_example_on_one_warp_group_gets_a_second() -> None:
    assert threads(ROOT / "examples" / "flash_attention.tile") == [(256, 128)]


def test_kernels_that_fit_or_have_no_warp_roles_keep_their_threads() -> None:
    assert threads(CORPUS / "gemm.tile") == [(128, 0)]  # 128x128 float32: 128 registers, room left
    assert threads(ROOT / "examples" / "flash_attention.tile", "sm_80") == [(128, 0)]


def test_a_program_that_reads_thread_indices_keeps_its_threads(tmp_path: pathlib.Path) -> None:
    source = (CORPUS / "gemm_fp8_2xacc.tile").read_text()
    marked = source.replace(
        "        clear(C_local)\n",
        "        clear(C_local)\n        t = thread_index()\n",
        1,
    )
    assert marked != source
    path = tmp_path / "k.tile"
    path.write_text(marked)
    assert threads(path) == [(128, 0)]


def _fp8_with(tmp_path: pathlib.Path, decls: str, body: str) -> pathlib.Path:
    """TileLang's FP8 GEMM with two accumulators (widened as written) plus `decls` after its
    allocations and `body` before its epilogue."""
    source = (CORPUS / "gemm_fp8_2xacc.tile").read_text()
    source = source.replace("        clear(C_local)\n", decls + "        clear(C_local)\n", 1)
    source = source.replace("        # TMA store\n", body + "        # TMA store\n", 1)
    path = tmp_path / "k.tile"
    path.write_text(source)
    return path


def test_per_thread_state_the_thread_count_changes_keeps_the_threads(tmp_path: pathlib.Path) -> None:
    # a local counted up in a Parallel loop: each thread runs its share, 2 at 128 threads, 1 at 256
    decls = "        L = alloc_local((1,), float32)\n"
    counted = "        L[0] = 0.0\n        for i in Parallel(256):\n            L[0] += 1.0\n        C[0, 0] = L[0]\n"
    assert threads(_fp8_with(tmp_path, decls, counted)) == [(128, 0)]
    # an element atomic of a local: one per thread
    atomic = "        L[0] = 1.0\n        atomic_add(C[0, 0], L[0])\n"
    assert threads(_fp8_with(tmp_path, decls, atomic)) == [(128, 0)]
    # the same atomic of a uniform value is the block's, by one thread: no matter
    assert threads(_fp8_with(tmp_path, "", "        atomic_add(C[0, 0], 1.0)\n")) == [(256, 128)]


def test_a_program_calling_device_code_of_its_own_keeps_its_threads(tmp_path: pathlib.Path) -> None:
    body = '        C[0, 0] = call_extern(float32, "my_scale", 1.0)\n'
    assert threads(_fp8_with(tmp_path, "", body)) == [(128, 0)]
