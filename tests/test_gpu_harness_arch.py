"""tests/gpu/harness.py with TILEC_GPU_ARCH (bench/amd_check.sh on an AMD GPU): the portable variants
are built for the gfx target as `tilec build` writes them, the ones pinned to sm_90a are not."""

from __future__ import annotations

import pathlib
import shutil
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "gpu"))

import harness  # noqa: E402  (stdlib only at module level)
from variants import VARIANTS  # noqa: E402


@pytest.fixture
def on_gfx90a(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(harness.ARCH_ENV, "gfx90a")
    monkeypatch.delenv(harness.PREBUILT_ENV, raising=False)


def test_portable_variants_are_built_as_hip_and_pinned_ones_are_not(on_gfx90a: None) -> None:
    text = harness.cu_text("gemm")  # examples/gemm.tile: over 64 KB of LDS as it is, fitted
    assert "hip/hip_runtime.h" in text and "__builtin_amdgcn_mfma" in text
    with pytest.raises(harness.NotBuilt, match="pinned to sm_90a"):
        harness.cu_text("gemm-sm90a")


def test_the_amd_script_runs_the_gpu_checks_for_the_gpus_arch() -> None:
    script = (ROOT / "bench" / "amd_check.sh").read_text()
    assert "TILEC_GPU_ARCH" in script and "runtime.gpu_arch()" in script and "tests/gpu/run_all.py" in script


@pytest.mark.toolchain
@pytest.mark.skipif(shutil.which("hipcc") is None, reason="hipcc not found (apt-get install hipcc)")
def test_every_portable_variant_builds_with_hipcc_for_gfx90a(on_gfx90a: None, tmp_path: pathlib.Path) -> None:
    from tilec import toolchain

    portable = [v.name for v in VARIANTS if v.arch == "sm_80" and v.folder == "examples" and not v.bench]

    def build(name: str) -> str:
        src = tmp_path / f"{name}.hip"
        src.write_text(sources[name])
        return toolchain.compile_hsaco(str(src), str(tmp_path / f"{name}.hsaco"), "gfx90a", werror=True)

    sources = {name: harness.cu_text(name) for name in portable}  # tilec here, in this process
    assert all("hip/hip_runtime.h" in t for t in sources.values())
    with ThreadPoolExecutor(4) as pool:  # hipcc in parallel
        outputs = dict(zip(portable, pool.map(build, portable), strict=True))
    assert {n: o for n, o in outputs.items() if o} == {}
