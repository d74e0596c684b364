"""Byte-identical output across processes: two `tilec build` runs of every example
under different PYTHONHASHSEEDs (and without the cache) give the same bytes."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
EXAMPLES = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "examples").glob("*.tile"))


def build_all(out_dir: pathlib.Path, seed: str, arch: str) -> dict[str, bytes]:
    env = dict(os.environ, PYTHONHASHSEED=seed, TILEC_NO_CACHE="1")
    cmd = [sys.executable, "-m", "tilec", "build", *EXAMPLES, "--out-dir", str(out_dir), "--arch", arch, "--headers"]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return {p.name: p.read_bytes() for p in sorted(out_dir.iterdir())}


@pytest.mark.toolchain  # tilec as subprocesses
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_different_hash_seeds_same_bytes(arch: str, tmp_path: pathlib.Path) -> None:
    pytest.importorskip("tilec.elaborate")
    pytest.importorskip("tilec.pipeline")
    first = build_all(tmp_path / "one", "1", arch)
    second = build_all(tmp_path / "two", "12345", arch)
    assert len(first) == 2 * len(EXAMPLES)
    for name, data in first.items():
        assert data == second[name], f"{name} differs between PYTHONHASHSEED=1 and 12345"
