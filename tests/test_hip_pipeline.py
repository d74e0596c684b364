"""Pipelined loops on gfx90a (no asynchronous copy into LDS): the next stage's copies are staged
through registers, their global loads issued before this stage's MFMAs and their LDS stores after
them, before the barrier that publishes the stage (lower/pipelined.py's `_staged`)."""

from __future__ import annotations

import pathlib

from tilec.driver import compile_file

ROOT = pathlib.Path(__file__).resolve().parent.parent
CODEGEN = ROOT / "tests" / "golden" / "codegen"


def _steady_loop(name: str) -> str:
    """The text of the steady-state loop of the first pipelined loop of a golden input on gfx90a."""
    text = compile_file(str(CODEGEN / f"{name}.tile"), {}, "gfx90a")
    start = text.index("  for (int k = 0;")
    return text[start : text.index("\n  }\n", start)]


def test_the_gemm_main_loop_loads_the_next_stage_before_its_mfmas() -> None:
    loop = _steady_loop("gemm_pipelined")
    mfmas = [i for i in range(len(loop)) if loop.startswith("tilec_mfma_32x32x8_f16(", i)]
    first_load, last_load = loop.index("A_s_next[g0"), loop.index("B_s_next[g0")
    stores = loop.index("(registers -> LDS)")
    barrier = loop.index("__syncthreads();")
    assert len(mfmas) == 4  # four k steps of 8 in a 32-deep tile
    assert mfmas[0] < first_load < mfmas[1] < last_load < mfmas[2] < stores < barrier < mfmas[3]
    assert "A_s[write_stage]" in loop[stores:barrier] and "A_s[write_stage]" not in loop[:stores]


def test_other_pipelined_loops_store_the_next_stage_after_the_consumers() -> None:
    loop = _steady_loop("attention_step")
    k_load, v_load = loop.index("K_s_next[g0"), loop.index("V_s_next[g0")
    mfmas = [i for i in range(len(loop)) if loop.startswith("tilec_mfma_", i)]
    stores = loop.index("(registers -> LDS)")
    # K's loads go out at the top, V's after Q K^T (its then_issue), both stored after P V
    assert loop.index("__syncthreads();") < k_load < mfmas[0] < v_load < mfmas[-1] < stores
    assert "__syncthreads();" not in loop[stores:]


def test_cuda_keeps_its_asynchronous_copies() -> None:
    text = compile_file(str(CODEGEN / "gemm_pipelined.tile"), {}, "sm_80")
    assert "cp.async" in text and "_next[" not in text
