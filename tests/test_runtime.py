"""tilec.runtime: ABI parsing, dims inference, the build cache, and (with a GPU) a real launch."""

from __future__ import annotations

import ctypes
import importlib.util
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from tilec import runtime

ROOT = pathlib.Path(__file__).resolve().parent.parent
SCALE_CU = pathlib.Path(__file__).parent / "data" / "scale.cu"
needs_nvcc = pytest.mark.skipif(
    shutil.which("nvcc") is None and not os.path.exists("/usr/local/cuda/bin/nvcc"), reason="nvcc not found"
)


@pytest.fixture(autouse=True)
def private_cache(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> pathlib.Path:
    monkeypatch.setenv("TILEC_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def scale_abi() -> dict:
    return runtime.parse_abi(SCALE_CU.read_text())["kernels"][0]


def test_parse_abi_reads_line_two() -> None:
    kernel = scale_abi()
    assert kernel["name"] == "scale"
    assert [t["name"] for t in kernel["tensors"]] == ["X", "Y"]
    assert kernel["tensors"][0]["shape"] == ["N", 4]
    assert [s["dtype"] for s in kernel["scalars"]] == ["float32", "float16"]
    assert kernel["dims"] == ["N"]


def test_parse_abi_rejects_files_without_it() -> None:
    with pytest.raises(ValueError, match="not a tilec-generated file"):
        runtime.parse_abi("// hello\nint x;\n")
    with pytest.raises(ValueError, match="malformed"):
        runtime.parse_abi('// x\n// tilec-abi: {"kernel": []}\n')


def test_infer_dims_from_shapes() -> None:
    assert runtime.infer_dims(scale_abi(), [(10, 4), (10, 4)]) == [10]


GEMM = {
    "name": "gemm",
    "tensors": [
        {"name": "A", "dtype": "float16", "shape": ["M", "K"]},
        {"name": "B", "dtype": "float16", "shape": ["K", "N"]},
        {"name": "C", "dtype": "float16", "shape": ["M", "N"]},
    ],
    "scalars": [],
    "dims": ["M", "N", "K"],
}


def test_infer_dims_in_abi_order() -> None:
    assert runtime.infer_dims(GEMM, [(3, 5), (5, 7), (3, 7)]) == [3, 7, 5]


@pytest.mark.parametrize(
    ("shapes", "message"),
    [
        ([(3, 5), (6, 7), (3, 7)], r"B.shape\[0\] = 6 but K = 5 from A.shape\[1\]"),
        ([(3, 5), (5, 7), (3, 8)], r"C.shape\[1\] = 8 but N = 7 from B.shape\[1\]"),
        ([(3, 5, 1), (5, 7), (3, 7)], r"'A' must have 2 dimensions"),
    ],
)
def test_infer_dims_mismatch(shapes: list, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        runtime.infer_dims(GEMM, shapes)


def test_infer_dims_fixed_dim_mismatch() -> None:
    with pytest.raises(ValueError, match=r"X.shape\[1\] must be 4, got 3"):
        runtime.infer_dims(scale_abi(), [(10, 3), (10, 3)])


def test_infer_dims_keyword_and_missing() -> None:
    abi = {"name": "k", "tensors": [{"name": "X", "dtype": "float32", "shape": ["N"]}], "dims": ["N", "S"]}
    with pytest.raises(ValueError, match="cannot infer S"):
        runtime.infer_dims(abi, [(8,)])
    assert runtime.infer_dims(abi, [(8,)], {"S": 3}) == [8, 3]
    with pytest.raises(ValueError, match="does not fit in int32"):
        runtime.infer_dims(abi, [(2**31,)], {"S": 3})


def test_infer_dims_checks_dimension_expressions() -> None:
    tensors = [{"name": "A", "shape": ["M", "K"]}, {"name": "Mask", "shape": ["M // 64", "(K + 31) // 32"]}]
    abi = {"name": "k", "tensors": tensors, "dims": ["M", "K"]}
    assert runtime.infer_dims(abi, [(128, 100), (2, 4)]) == [128, 100]
    with pytest.raises(ValueError, match=r"Mask.shape\[1\] must be \(K \+ 31\) // 32 = 4, got 3"):
        runtime.infer_dims(abi, [(128, 100), (2, 3)])


def test_dimension_expressions_follow_c() -> None:
    assert runtime.dim_value("-7 // 2", {}) == -3 and runtime.dim_value("-7 % 2", {}) == -1
    assert runtime.dim_value("min(N, 8) * max(N, 2) - N", {"N": 4}) == 12
    with pytest.raises(ValueError, match="malformed dimension"):
        runtime.dim_value("N ** 2", {"N": 4})


def test_cache_key_depends_on_source_flags_and_nvcc() -> None:
    base = runtime.cache_key("src", ["-O3"], "nvcc 13.0")
    assert base == runtime.cache_key("src", ["-O3"], "nvcc 13.0")
    assert base != runtime.cache_key("src2", ["-O3"], "nvcc 13.0")
    assert base != runtime.cache_key("src", ["-O2"], "nvcc 13.0")
    assert base != runtime.cache_key("src", ["-O3"], "nvcc 12.8")


def test_nvcc_flags_gencode() -> None:
    assert "arch=compute_90a,code=sm_90a" in runtime.nvcc_flags("sm_90a")
    flags = runtime.nvcc_flags("sm_80", ["-DX=1"])
    assert flags[:2] == ["-shared", "-Xcompiler"] and flags[-1] == "-DX=1"
    assert "arch=compute_80,code=sm_80" in flags


def test_a_hip_file_is_built_by_hipcc_with_the_same_contract() -> None:
    # no ROCm GPU here: the command line it builds, the compiler's environment, the arch check
    hip = (ROOT / "tests" / "golden" / "codegen" / "gfx90a" / "gemm_mma.hip").read_text()
    assert runtime.file_arches(hip) == ["gfx90a", "gfx942"]
    cmd = runtime.shared_command("gfx90a", "/opt/rocm/bin/hipcc", ["-DX=1"], "out.so", "gemm_mma.hip")
    assert cmd == ["/opt/rocm/bin/hipcc", "-shared", "-fPIC", "--offload-arch=gfx90a", "-O3", "-std=c++17"] + [
        "-DX=1",
        "-o",
        "out.so",
        "gemm_mma.hip",
    ]
    assert runtime.compiler_env("gfx90a")["HIP_PLATFORM"] == "amd"
    with pytest.raises(ValueError, match="generated for gfx90a, gfx942, not sm_80"):
        runtime.build_shared(hip, "sm_80", name="gemm_mma")
    cuda = (ROOT / "tests" / "golden" / "codegen" / "sm_80" / "gemm_mma.cu").read_text()
    assert "gfx90a" not in runtime.file_arches(cuda) and "sm_80" in runtime.file_arches(cuda)
    assert runtime.shared_command("sm_80", "nvcc", [], "o.so", "k.cu")[:3] == ["nvcc", "-shared", "-Xcompiler"]


@pytest.mark.toolchain
@needs_nvcc
def test_build_shared_is_cached_and_loads(private_cache: pathlib.Path) -> None:
    source = SCALE_CU.read_text()
    so = runtime.build_shared(source, "sm_80", name="scale")
    assert so.startswith(str(private_cache / "so")) and os.path.exists(so)
    mtime = os.stat(so).st_mtime_ns
    assert runtime.build_shared(source, "sm_80", name="scale") == so
    assert os.stat(so).st_mtime_ns == mtime
    assert runtime.build_shared(source, "sm_90a", name="scale") != so
    mod = runtime.Module(so, runtime.parse_abi(source))
    kernel = mod.scale
    assert kernel is mod.kernels["scale"]
    assert kernel._fn.argtypes == [
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_float,
        ctypes.c_uint16,
        ctypes.c_int32,
        ctypes.c_void_p,
    ]
    assert "scale(X, Y, alpha, bias)" in repr(kernel)
    assert len(list((private_cache / "so").glob("*.so"))) == 2  # no temporary files left behind


@pytest.mark.toolchain
@needs_nvcc
def test_build_shared_reports_nvcc_errors() -> None:
    source = SCALE_CU.read_text().replace("return (int)cudaGetLastError();", "return oops;")
    with pytest.raises(RuntimeError, match=r"nvcc failed on scale\.cu(.|\n)*oops"):
        runtime.build_shared(source, "sm_80", name="scale")


def test_imports_only_the_standard_library() -> None:
    code = (
        "import sys; before = set(sys.modules); import tilec.runtime; "
        "new = {m.split('.')[0] for m in set(sys.modules) - before}; "
        "print(sorted(new - set(sys.stdlib_module_names) - {'tilec'}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_works_as_a_single_copied_file(tmp_path: pathlib.Path) -> None:
    copy = tmp_path / "tilec_runtime.py"
    shutil.copy(runtime.__file__, copy)
    spec = importlib.util.spec_from_file_location("tilec_runtime", copy)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.infer_dims(GEMM, [(3, 5), (5, 7), (3, 7)]) == [3, 7, 5]


def _gpu_torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    return torch


def test_gpu_launch() -> None:
    torch = _gpu_torch()
    mod = runtime.load(SCALE_CU)
    x = torch.randn(100, 4, device="cuda")
    y = torch.full_like(x, float("nan"))
    mod.scale(x, y, 2.0, 0.5)
    torch.cuda.synchronize()
    torch.testing.assert_close(y, 2.0 * x + 0.5)
    with pytest.raises(TypeError, match="dtype"):
        mod.scale(x.double(), y, 2.0, 0.5)
    with pytest.raises(ValueError, match="contiguous"):
        mod.scale(x.t().contiguous().t(), y, 2.0, 0.5)
    with pytest.raises(ValueError, match="CUDA device"):
        mod.scale(x.cpu(), y, 2.0, 0.5)
    with pytest.raises(TypeError, match="takes 2 tensors and 2 scalars"):
        mod.scale(x, y, 2.0)
