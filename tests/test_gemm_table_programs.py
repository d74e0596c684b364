"""The GEMM table's programs (bench/programs/*.tile, timed by bench/gemm_table.py): each builds for
sm_80 and sm_90a, and on sm_90a the code path is the one bench/README.md reports for it."""

from __future__ import annotations

import pathlib

import pytest

from tilec.driver import compile_file

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGRAMS = sorted((ROOT / "bench" / "programs").glob("*.tile"))

# whether the sm_90a build's main loop runs by warp roles (a TMA producer warp group)
WARP_ROLES = {
    "gemm_tn": True,
    "gemm_nt": True,
    "bmm_bias": True,  # producers from 3-D tensors: 3-D tensor maps, boxes one matrix deep
}


def test_every_program_is_listed() -> None:
    assert {p.stem for p in PROGRAMS} == set(WARP_ROLES)


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: p.stem)
def test_program_builds_for_sm80(path: pathlib.Path) -> None:
    assert f"{path.stem}_kernel" in compile_file(str(path), {}, arch="sm_80")


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: p.stem)
def test_program_sm90a_path(path: pathlib.Path) -> None:
    text = compile_file(str(path), {}, arch="sm_90a")
    assert "wgmma.mma_async" in text
    roles = "tilec_tma_load_2d(" in text and "tilec_setmaxnreg_dec<" in text
    assert roles == WARP_ROLES[path.stem]
