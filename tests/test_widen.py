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
