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


# ---------------------------------------------------------------- the call path, with a stand-in torch


class _FakeTensor:
    def __init__(self, shape, dtype="float16", device=0, contiguous=True, ptr=0x1000):
        self.shape, self.dtype, self._device, self._contiguous, self._ptr = tuple(shape), dtype, device, contiguous, ptr
        self.is_cuda = device is not None
        self.device = f"cuda:{device}" if self.is_cuda else "cpu"

    def get_device(self) -> int:
        return self._device if self._device is not None else -1

    def is_contiguous(self) -> bool:
        return self._contiguous

    def data_ptr(self) -> int:
        return self._ptr


class _FakeTorch:
    """What Kernel.__call__ uses of torch: Tensor, dtypes, the current device and its raw stream."""

    Tensor = _FakeTensor
    float16, float32 = "float16", "float32"

    def __init__(self) -> None:
        self.current = 0
        self.switches: list[int] = []
        fake = self

        class _Device:
            def __init__(self, index: int) -> None:
                self.index = index

            def __enter__(self) -> None:
                fake.switches.append(self.index)
                self.saved, fake.current = fake.current, self.index

            def __exit__(self, *exc: object) -> None:
                fake.current = self.saved

        self.cuda = type("cuda", (), {"current_device": staticmethod(lambda: fake.current), "device": _Device})
        self._C = type("_C", (), {"_cuda_getCurrentRawStream": staticmethod(lambda i: 0xA0 + i)})


@pytest.fixture
def fake_torch(monkeypatch: pytest.MonkeyPatch) -> _FakeTorch:
    torch = _FakeTorch()
    monkeypatch.setitem(sys.modules, "torch", torch)
    return torch


def _recording_kernel(abi: dict) -> tuple[runtime.Kernel, list]:
    calls: list = []

    def launcher(*args: object) -> int:
        calls.append((args, sys.modules["torch"].current))
        return 0

    lib = type("lib", (), {abi["name"]: staticmethod(launcher)})
    return runtime.Kernel(lib, abi), calls


GEMM_ABI = {
    "name": "gemm",
    "tensors": [
        {"name": "A", "dtype": "float16", "shape": ["M", "K"]},
        {"name": "B", "dtype": "float16", "shape": ["K", "N"]},
        {"name": "C", "dtype": "float16", "shape": ["M", "N"]},
    ],
    "scalars": [{"name": "alpha", "dtype": "float32"}],
    "dims": ["M", "K", "N"],
}


def test_call_passes_pointers_scalars_dims_and_the_current_stream(fake_torch: _FakeTorch) -> None:
    kernel, calls = _recording_kernel(GEMM_ABI)
    a, b, c = _FakeTensor((3, 5), ptr=16), _FakeTensor((5, 7), ptr=32), _FakeTensor((3, 7), ptr=48)
    kernel(a, b, c, 2.0)
    kernel(a, b, c, 2.0)  # the remembered dims
    (args, device), again = calls
    assert args[:3] == (16, 32, 48) and args[3].value == 2.0 and args[4:] == (3, 5, 7, 0xA0)
    assert device == 0 and again[0][4:] == args[4:] and fake_torch.switches == []


def test_call_switches_to_the_tensors_device_only_when_needed(fake_torch: _FakeTorch) -> None:
    kernel, calls = _recording_kernel(GEMM_ABI)
    on1 = [_FakeTensor(s, device=1) for s in ((3, 5), (5, 7), (3, 7))]
    kernel(*on1, 1.0)
    assert fake_torch.switches == [1] and calls[0][1] == 1 and calls[0][0][-1] == 0xA1
    assert fake_torch.current == 0  # restored


def test_call_remembers_dims_per_shape(fake_torch: _FakeTorch) -> None:
    kernel, calls = _recording_kernel(GEMM_ABI)
    kernel(_FakeTensor((3, 5)), _FakeTensor((5, 7)), _FakeTensor((3, 7)), 1.0)
    kernel(_FakeTensor((4, 5)), _FakeTensor((5, 7)), _FakeTensor((4, 7)), 1.0)
    assert [c[0][4:7] for c in calls] == [(3, 5, 7), (4, 5, 7)]
    with pytest.raises(ValueError, match="M = 4"):  # a mismatch is still found with a memo warm
        kernel(_FakeTensor((4, 5)), _FakeTensor((5, 7)), _FakeTensor((3, 7)), 1.0)


@pytest.mark.parametrize(
    "tensors, exc, message",
    [
        ([_FakeTensor((3, 5), dtype="float32"), _FakeTensor((5, 7)), _FakeTensor((3, 7))], TypeError, "dtype"),
        ([_FakeTensor((3, 5), device=None), _FakeTensor((5, 7)), _FakeTensor((3, 7))], ValueError, "CUDA device"),
        ([_FakeTensor((3, 5)), _FakeTensor((5, 7), device=1), _FakeTensor((3, 7))], ValueError, "earlier tensors"),
        ([_FakeTensor((3, 5)), _FakeTensor((5, 7), contiguous=False), _FakeTensor((3, 7))], ValueError, "contiguous"),
        ([[1, 2], _FakeTensor((5, 7)), _FakeTensor((3, 7))], TypeError, "torch.Tensor"),
    ],
)
def test_call_refuses_bad_tensors_before_launch(fake_torch: _FakeTorch, tensors: list, exc: type, message: str) -> None:
    kernel, calls = _recording_kernel(GEMM_ABI)
    with pytest.raises(exc, match=message):
        kernel(*tensors, 1.0)
    assert calls == []


def test_call_refuses_a_tensor_too_large_for_32_bit_indices(fake_torch: _FakeTorch) -> None:
    kernel, calls = _recording_kernel(GEMM_ABI)
    m = 2**16 + 1  # A and C of (2^16 + 1) x 2^15 elements: past 2^31 - 1
    with pytest.raises(ValueError, match=r"tensor 'A' has 2147516416 elements; .* at most 2\^31 - 1"):
        kernel(_FakeTensor((m, 2**15)), _FakeTensor((2**15, 8)), _FakeTensor((m, 8)), 1.0)
    kernel(_FakeTensor((2**16, 2**15 - 1)), _FakeTensor((2**15 - 1, 8)), _FakeTensor((2**16, 8)), 1.0)  # 2^31 - 2^16
    assert len(calls) == 1


def test_call_refuses_unknown_dims_and_wrong_counts(fake_torch: _FakeTorch) -> None:
    kernel, calls = _recording_kernel(GEMM_ABI)
    a, b, c = _FakeTensor((3, 5)), _FakeTensor((5, 7)), _FakeTensor((3, 7))
    with pytest.raises(TypeError, match="unknown dims"):
        kernel(a, b, c, 1.0, Q=3)
    with pytest.raises(TypeError, match="takes 3 tensors and 1 scalars"):
        kernel(a, b, c)
    assert calls == []


# ---------------------------------------------------------------- tensors declared with strides=

KV_ABI = {
    "name": "attend",
    "tensors": [
        {"name": "K", "dtype": "float16", "shape": ["B", "S", "D"], "strides": ["sB", "sS", 1]},
        {"name": "V", "dtype": "float16", "shape": ["B", "S", "D"], "strides": ["sB", "sS", 1]},
        {"name": "O", "dtype": "float16", "shape": ["B", "D"], "strides": ["D * 2", 1]},
    ],
    "scalars": [],
    "dims": ["B", "S", "D", "sB", "sS"],
}


def test_infer_dims_binds_symbolic_strides() -> None:
    shapes = [(2, 5, 8), (2, 5, 8), (2, 8)]
    strides = [(400, 8, 1), (400, 8, 1), (16, 1)]
    assert runtime.infer_dims(KV_ABI, shapes, None, strides) == [2, 5, 8, 400, 8]


@pytest.mark.parametrize(
    "strides, message",
    [
        ([(400, 8, 1), (400, 16, 1), (16, 1)], r"V.stride\(1\) = 16 but sS = 8 from K.stride\(1\)"),
        ([(400, 8, 2), (400, 8, 1), (16, 1)], r"attend: K.stride\(2\) must be 1, got 2"),
        ([(400, 8, 1), (400, 8, 1), (8, 1)], r"attend: O.stride\(0\) must be D \* 2 = 16, got 8"),
    ],
)
def test_infer_dims_checks_strides(strides: list, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        runtime.infer_dims(KV_ABI, [(2, 5, 8), (2, 5, 8), (2, 8)], None, strides)


def test_infer_dims_ignores_the_stride_of_an_extent_one_dimension() -> None:
    """torch gives a dimension of extent 1 any stride (its index is always 0): not checked, and
    binding a name only where nothing else does; an empty tensor's strides are not checked either."""
    shapes = [(1, 5, 8), (1, 5, 8), (1, 8)]
    assert runtime.infer_dims(KV_ABI, shapes, None, [(400, 8, 1), (40, 8, 1), (3, 1)]) == [1, 5, 8, 400, 8]
    empty = [(2, 0, 8), (2, 0, 8), (2, 8)]
    assert runtime.infer_dims(KV_ABI, empty, None, [(400, 8, 3), (40, 8, 1), (16, 1)]) == [2, 0, 8, 400, 8]


class _StridedTensor(_FakeTensor):
    def __init__(self, shape, strides, **kw):
        super().__init__(shape, contiguous=False, **kw)
        self._strides = tuple(strides)

    def stride(self) -> tuple:
        return self._strides


def test_call_takes_views_for_tensors_declared_with_strides(fake_torch: _FakeTorch) -> None:
    kernel, calls = _recording_kernel(KV_ABI)
    k, v = _StridedTensor((2, 5, 8), (800, 16, 1)), _StridedTensor((2, 5, 8), (800, 16, 1))
    kernel(k, v, _StridedTensor((2, 8), (16, 1)))
    kernel(k, v, _StridedTensor((2, 8), (16, 1)))
    assert [c[0][3:8] for c in calls] == [(2, 5, 8, 800, 16)] * 2
    with pytest.raises(ValueError, match=r"sS = 16"):  # other strides, same shapes: checked again
        kernel(k, _StridedTensor((2, 5, 8), (800, 32, 1)), _StridedTensor((2, 8), (16, 1)))


def test_call_refuses_a_view_for_a_tensor_without_strides(fake_torch: _FakeTorch) -> None:
    kernel, calls = _recording_kernel(GEMM_ABI)
    with pytest.raises(ValueError, match=r"must be contiguous .*strides=\(\.\.\.\)"):
        kernel(_FakeTensor((3, 5)), _FakeTensor((5, 7)), _StridedTensor((3, 7), (14, 1)), 1.0)
    assert calls == []


def test_call_refuses_strides_reaching_past_32_bit_offsets(fake_torch: _FakeTorch) -> None:
    kernel, calls = _recording_kernel(KV_ABI)
    big = 2**30
    k = _StridedTensor((2, 5, 8), (big, 8, 1))  # reaches 2^30 + 39
    kernel(k, _StridedTensor((2, 5, 8), (big, 8, 1)), _StridedTensor((2, 8), (16, 1)))
    k3 = _StridedTensor((3, 5, 8), (big, 8, 1))
    with pytest.raises(ValueError, match=r"tensor 'K' reaches element 2147483687 by its strides"):
        kernel(k3, _StridedTensor((3, 5, 8), (big, 8, 1)), _StridedTensor((3, 8), (16, 1)))
    assert len(calls) == 1
