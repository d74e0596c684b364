"""hipcc (gfx90a): every example and every gfx90a golden compiles with -Werror, and the GEMM's
main loop assembles to v_mfma instructions with no scratch (spill) use. Skipped without hipcc
(Debian's ROCm 5.2: `apt-get install hipcc libamdhip64-dev rocm-device-libs`; .ci/run installs it).
That hipcc is too old for gfx942 (it rejects the target ID): gfx942 output is emitted, not compiled."""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

from tilec import toolchain
from tilec.diagnostics import CompileError

ROOT = pathlib.Path(__file__).resolve().parent.parent
GOLDENS = sorted((ROOT / "tests" / "golden" / "codegen" / "gfx90a").glob("*.hip"))
EXAMPLES = sorted((ROOT / "examples").glob("*.tile"))

needs_hipcc = pytest.mark.skipif(shutil.which("hipcc") is None, reason="hipcc not found (apt-get install hipcc)")


def _hsaco(src: pathlib.Path, out_dir: pathlib.Path) -> str:
    return toolchain.compile_hsaco(str(src), str(out_dir / f"{src.stem}.hsaco"), "gfx90a", werror=True)


@pytest.mark.toolchain
@needs_hipcc
def test_every_gfx90a_golden_compiles_with_hipcc(tmp_path: pathlib.Path) -> None:
    with ThreadPoolExecutor(4) as pool:
        outputs = dict(zip(GOLDENS, pool.map(lambda g: _hsaco(g, tmp_path), GOLDENS), strict=True))
    assert {g.name: o for g, o in outputs.items() if o} == {}


@pytest.mark.toolchain
@needs_hipcc
@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_every_example_compiles_with_hipcc(example: pathlib.Path, tmp_path: pathlib.Path) -> None:
    """As `tilec build --arch gfx90a` writes it: the examples whose default tiles (sized for sm_90a's
    227 KB) exceed gfx90a's 64 KB of LDS take the nearest point of their candidate sets that fits."""
    from tilec.driver import build

    src = tmp_path / f"{example.stem}.hip"
    result = build(str(example), {}, "gfx90a", cache=False)
    fitted = {"gemm", "flash_attention", "mla_decode"}
    assert [w.name for w in result.warnings if w.name == "config-fit"] == (
        ["config-fit"] if example.stem in fitted else []
    )
    src.write_text(result.text)
    assert _hsaco(src, tmp_path) == ""


@pytest.mark.toolchain
@needs_hipcc
def test_the_gemm_main_loop_is_mfma_without_scratch(tmp_path: pathlib.Path) -> None:
    golden = ROOT / "tests" / "golden" / "codegen" / "gfx90a" / "gemm_pipelined.hip"
    asm = tmp_path / "gemm_pipelined.s"
    cmd = [toolchain.find_compiler(toolchain.target_of("gfx90a")), "--offload-arch=gfx90a", "--cuda-device-only"]
    cmd += ["-S", "-O3", "-std=c++17", "-Wno-unused-command-line-argument", "-o", str(asm), str(golden)]
    subprocess.run(cmd, check=True, env={**os.environ, "HIP_PLATFORM": "amd"}, capture_output=True)
    text = asm.read_text()
    assert re.search(r"\bv_mfma_f32_32x32x8f16\b", text)
    assert re.findall(r"\.private_segment_fixed_size:\s+(\d+)", text) == ["0"]  # no scratch
    assert re.findall(r"\.vgpr_spill_count:\s+(\d+)", text) == ["0"]
    assert "scratch_store" not in text and "scratch_load" not in text


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("math_casts", "'Y' is float8_e4m3, which gfx90a does not support"),
        ("swizzle_print", "threads must be a positive multiple of 64"),
        ("gemm_warp_roles", "gfx90a allows 65536"),
    ],
)
def test_what_gfx90a_lacks_is_a_diagnostic(case: str, message: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from tilec.driver import compile_file

    monkeypatch.chdir(ROOT)
    with pytest.raises(CompileError, match=re.escape(message)):
        compile_file(f"tests/golden/codegen/{case}.tile", {}, "gfx90a")


def test_gfx942_output_is_emitted() -> None:
    from tilec.driver import compile_file

    text = compile_file(str(ROOT / "tests" / "golden" / "codegen" / "gemm_mma.tile"), {}, "gfx942")
    assert "tilec_mfma_32x32x8_f16" in text and "#include <hip/hip_runtime.h>" in text


@pytest.mark.toolchain
@needs_hipcc
def test_the_runtime_builds_a_hip_file_with_hipcc(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # hipcc -shared and the ctypes launchers of the ABI line; no ROCm GPU here to launch them
    from tilec import runtime

    monkeypatch.setenv("TILEC_CACHE", str(tmp_path))
    source = (ROOT / "tests" / "golden" / "codegen" / "gfx90a" / "gemm_mma.hip").read_text()
    module = runtime.Module(runtime.build_shared(source, "gfx90a", name="gemm_mma"), runtime.parse_abi(source))
    assert list(module.kernels) == ["gemm_simt"] and str(tmp_path) in runtime.cache_dir()
