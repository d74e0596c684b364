"""hipcc: every example and every golden compiles with -Werror for gfx90a and for gfx942, and the
GEMMs' main loops assemble to v_mfma instructions with no scratch (spill) use. Skipped without
hipcc (Debian's ROCm 5.2: `apt-get install hipcc libamdhip64-dev rocm-device-libs`; .ci/run
installs it). That hipcc's LLVM 15 predates the gfx942 name (it rejects the target ID) but knows
gfx940, the first CDNA3 target, whose instructions gfx942 has (MFMA, the 8-bit k-deep forms, fp8):
gfx942 output is compiled for gfx940 there (`gfx942_arch`), for gfx942 by a newer hipcc."""

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
GOLDENS_942 = sorted((ROOT / "tests" / "golden" / "codegen" / "gfx942").glob("*.hip"))
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
    fitted = {"gemm", "flash_attention", "mla_decode", "dequant_gemm_mxfp4"}
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


def test_what_gfx90a_lacks_is_a_diagnostic(monkeypatch: pytest.MonkeyPatch) -> None:
    from tilec.driver import compile_file

    monkeypatch.chdir(ROOT)
    with pytest.raises(CompileError, match=re.escape("gfx90a allows 65536")):
        compile_file("tests/golden/codegen/shared_packed.tile", {}, "gfx90a")  # 128 KB live at once


def _compiles_for(arch: str, work: pathlib.Path) -> bool:
    """hipcc compiles a kernel for `arch` (a file: hipcc's wrapper sets up ROCm's paths for a named source only)."""
    src = work / f"probe_{arch}.hip"
    src.write_text("#include <hip/hip_runtime.h>\n__global__ void k(int* p) { p[threadIdx.x] = 1; }\n")
    cmd = ["hipcc", "--genco", f"--offload-arch={arch}", str(src), "-o", str(work / f"probe_{arch}.hsaco")]
    return subprocess.run(cmd, capture_output=True, env={**os.environ, "HIP_PLATFORM": "amd"}).returncode == 0


@pytest.fixture(scope="module")
def gfx942_arch(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The --offload-arch that compiles gfx942 output here: gfx942, or gfx940 (same instructions)."""
    if shutil.which("hipcc") is None:
        pytest.skip("hipcc not found (apt-get install hipcc)")
    work = tmp_path_factory.mktemp("probe")
    found = next((a for a in ("gfx942", "gfx940") if _compiles_for(a, work)), None)
    if found is None:
        pytest.skip("this hipcc compiles neither gfx942 nor gfx940")
    return found


def _hipcc(src: pathlib.Path, out: pathlib.Path, arch: str, *flags: str) -> str:
    cmd = ["hipcc", f"--offload-arch={arch}", "-O3", "-std=c++17", "-Werror", *flags, "-o", str(out), str(src)]
    run = subprocess.run(cmd, env={**os.environ, "HIP_PLATFORM": "amd"}, capture_output=True, text=True)
    return run.stderr if run.returncode else ""


@pytest.mark.toolchain
@needs_hipcc
def test_every_gfx942_golden_compiles_with_hipcc(tmp_path: pathlib.Path, gfx942_arch: str) -> None:
    def one(g: pathlib.Path) -> str:
        return _hipcc(g, tmp_path / f"{g.stem}.hsaco", gfx942_arch, "--genco")

    assert len(GOLDENS_942) >= len(GOLDENS)
    with ThreadPoolExecutor(4) as pool:
        outputs = dict(zip(GOLDENS_942, pool.map(one, GOLDENS_942), strict=True))
    assert {g.name: o for g, o in outputs.items() if o} == {}


@pytest.mark.toolchain
@needs_hipcc
@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_every_example_compiles_for_gfx942(example: pathlib.Path, tmp_path: pathlib.Path, gfx942_arch: str) -> None:
    from tilec.driver import build

    src = tmp_path / f"{example.stem}.hip"
    src.write_text(build(str(example), {}, "gfx942", cache=False).text)
    assert _hipcc(src, tmp_path / f"{example.stem}.hsaco", gfx942_arch, "--genco") == ""


@pytest.mark.toolchain
@needs_hipcc
@pytest.mark.parametrize(
    ("golden", "mfma"),
    [("gemm_int8", "v_mfma_i32_32x32x16_i8"), ("gemm_fp8_fnuz", "v_mfma_f32_32x32x16_fp8_fp8")],
)
def test_gfx942_8bit_gemms_assemble_to_their_mfma(
    golden: str, mfma: str, tmp_path: pathlib.Path, gfx942_arch: str
) -> None:
    """gfx942's k-deep 8-bit forms, eight K elements a lane, with no spills and no scratch access.
    (The fp8 kernel reserves a 16-byte private segment that no instruction touches.)"""
    src = ROOT / "tests" / "golden" / "codegen" / "gfx942" / f"{golden}.hip"
    asm = tmp_path / f"{golden}.s"
    assert _hipcc(src, asm, gfx942_arch, "--cuda-device-only", "-S", "-Wno-unused-command-line-argument") == ""
    text = asm.read_text()
    assert re.search(rf"\b{mfma}\b", text) and "v_mfma_i32_32x32x8" not in text
    assert re.findall(r"\.vgpr_spill_count:\s+(\d+)", text) == ["0"]
    assert not re.search(r"^\s+(scratch|buffer)_(load|store)", text, re.M)


def test_gfx942_picks_its_8bit_forms_and_leaves_ocp_fp8_to_simt() -> None:
    from tilec.driver import compile_file

    int8 = compile_file(str(ROOT / "examples" / "gemm_int8.tile"), {}, "gfx942")
    assert "tilec_mfma_32x32x16_i8(&" in int8 and "#include <hip/hip_runtime.h>" in int8
    defines = {"dtype": "float8_e4m3", "accum_dtype": "float32", "out_dtype": "float16"}
    ocp = compile_file(str(ROOT / "examples" / "gemm_int8.tile"), defines, "gfx942")
    assert "tilec_mfma" not in ocp and "typedef tilec_fp8<4, 3, 7, 0x7E, false> tilec_fp8_e4m3;" in ocp


@pytest.mark.toolchain
@needs_hipcc
def test_the_runtime_builds_a_hip_file_with_hipcc(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # hipcc -shared and the ctypes launchers of the ABI line; no ROCm GPU here to launch them
    from tilec import runtime

    monkeypatch.setenv("TILEC_CACHE", str(tmp_path))
    source = (ROOT / "tests" / "golden" / "codegen" / "gfx90a" / "gemm_mma.hip").read_text()
    module = runtime.Module(runtime.build_shared(source, "gfx90a", name="gemm_mma"), runtime.parse_abi(source))
    assert list(module.kernels) == ["gemm_simt"] and str(tmp_path) in runtime.cache_dir()
