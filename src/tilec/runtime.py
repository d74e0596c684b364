"""Load a tilec-generated `.cu` (or `.hip`) as Python callables taking torch tensors.

    mod = tilec.runtime.load("build/gemm.cu")        # nvcc -shared, cached by content hash
    mod.gemm(A, B, C)                                 # dims M, N, K inferred from the shapes
    mod = tilec.runtime.load("build/gemm.hip")       # hipcc -shared, on a ROCm build of torch

A file's target family is read from its text: a file that includes a target's always-included
header (`hip/hip_runtime.h`: gfx90a, gfx942) is built by that target's compiler, with the flags
of its record (targets.compiler_flags, "shared"); the arch is the current GPU's unless given.

This module imports only the standard library (torch is imported inside the
functions that need it) and, from tilec, the target registry (targets.py, which
is standard library only too): it runs on the GPU machine, where lark, click,
rich and TVM are absent. It reads the ABI line every generated file carries on line 2

    // tilec-abi: {"kernels": [{"name": "gemm", "tensors": [{"name": "A", "dtype": "float16",
    //             "shape": ["M", "K"]}, ...], "scalars": [...], "dims": ["M", "N", "K"]}]}

(a tensor declared with `strides=` has `"strides"` too, bound from `tensor.stride()`
and checked; it may be a view, the others must be contiguous) and calls the
`extern "C" int NAME(tensors..., scalars..., dims..., stream)` launcher through
ctypes on torch's current stream (ROCm's torch names HIP devices and streams
"cuda" too). Shared libraries are cached in `$TILEC_CACHE/so` (default
~/.cache/tilec/so) under a hash of the source, the compiler's flags and its version.
"""

from __future__ import annotations

import ast
import ctypes
import hashlib
import json
import math
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from typing import Any

from tilec.targets import ARCHES, TARGETS, compiler_flags, target_of_capability

ABI_PREFIX = "// tilec-abi:"

# tile dtype -> (torch dtype attribute, ctypes type for a scalar argument).
# Scalars of 16/8-bit float types travel as their bit patterns: a 2-byte
# struct (the target's float16) is passed like an unsigned short in the C ABI.
DTYPES: dict[str, tuple[str, Any]] = {
    "float16": ("float16", ctypes.c_uint16),
    "bfloat16": ("bfloat16", ctypes.c_uint16),
    "float32": ("float32", ctypes.c_float),
    "float64": ("float64", ctypes.c_double),
    "float8_e4m3": ("float8_e4m3fn", ctypes.c_uint8),
    "float8_e5m2": ("float8_e5m2", ctypes.c_uint8),
    "float8_e4m3fnuz": ("float8_e4m3fnuz", ctypes.c_uint8),
    "float8_e5m2fnuz": ("float8_e5m2fnuz", ctypes.c_uint8),
    "int8": ("int8", ctypes.c_int8),
    "int16": ("int16", ctypes.c_int16),
    "int32": ("int32", ctypes.c_int32),
    "int64": ("int64", ctypes.c_int64),
    "uint8": ("uint8", ctypes.c_uint8),
    "uint16": ("uint16", ctypes.c_uint16),
    "uint32": ("uint32", ctypes.c_uint32),
    "uint64": ("uint64", ctypes.c_uint64),
    "bool": ("bool", ctypes.c_bool),
    # sub-byte types: a tensor of them is passed packed, two elements to a byte along its last
    # dimension (the even element in the low nibble), as a uint8 or int8 tensor half as wide
    "int4": ("uint8", ctypes.c_uint8),
    "uint4": ("uint8", ctypes.c_uint8),
    "float4_e2m1": ("uint8", ctypes.c_uint8),
}
PACKED = ("int4", "uint4", "float4_e2m1")
PACKED_TORCH = ("uint8", "int8")  # the torch dtypes a packed tensor may have


def _dtype_ok(spec: Mapping, want: Any, t: Any) -> bool:
    if spec["dtype"] in PACKED:
        return str(t.dtype).removeprefix("torch.") in PACKED_TORCH
    return t.dtype == want


def logical_shape(spec: Mapping, shape: Sequence[int]) -> tuple[int, ...]:
    """The shape the ABI names for tensor argument `spec` given a tensor of `shape`: a packed
    tensor's last dimension counts elements, two to each of its bytes."""
    shape = tuple(shape)
    if spec["dtype"] in PACKED and shape:
        return (*shape[:-1], 2 * shape[-1])
    return shape


CUDA_ERRORS = {
    1: "cudaErrorInvalidValue",
    2: "cudaErrorMemoryAllocation",
    3: "cudaErrorInitializationError",
    9: "cudaErrorInvalidConfiguration",
    35: "cudaErrorInsufficientDriver",
    98: "cudaErrorInvalidDeviceFunction",
    100: "cudaErrorNoDevice",
    101: "cudaErrorInvalidDevice",
    200: "cudaErrorInvalidKernelImage",
    209: "cudaErrorNoKernelImageForDevice",
    222: "cudaErrorUnsupportedPtxVersion",
    400: "cudaErrorInvalidResourceHandle",
    700: "cudaErrorIllegalAddress",
    701: "cudaErrorLaunchOutOfResources",
    710: "cudaErrorAssert",
    715: "cudaErrorIllegalInstruction",
    716: "cudaErrorMisalignedAddress",
    719: "cudaErrorLaunchFailure",
    720: "cudaErrorCooperativeLaunchTooLarge",
    912: "cudaErrorInvalidClusterSize",
    999: "cudaErrorUnknown",
}


# ---------------------------------------------------------------- ABI


def parse_abi(text: str) -> dict:
    """The JSON of the `// tilec-abi:` line (line 2 of a generated file)."""
    for line in text.splitlines()[:5]:
        if line.startswith(ABI_PREFIX):
            abi = json.loads(line[len(ABI_PREFIX) :])
            if not isinstance(abi, dict) or not isinstance(abi.get("kernels"), list):
                raise ValueError("malformed tilec-abi line: no 'kernels' list")
            return abi
    raise ValueError("not a tilec-generated file: no '// tilec-abi:' line near the top")


INDEX_LIMIT = 2**31 - 1  # the generated kernels index with 32-bit ints (the launcher refuses more too)


def _check_index_range(name: str, specs: Sequence[Mapping], tensors: Sequence[Any]) -> None:
    """ValueError for a tensor of more than INDEX_LIMIT elements, or one declared with strides whose
    farthest element lies past that offset, which the launcher would refuse (and whose dims a C int
    could not even carry)."""
    for spec, t in zip(specs, tensors, strict=True):
        count = math.prod(t.shape)
        if count > INDEX_LIMIT:
            raise ValueError(
                f"{name}: tensor '{spec['name']}' has {count} elements; tilec's kernels index tensors "
                f"with 32-bit integers, so at most 2^31 - 1 = {INDEX_LIMIT} (split the call)"
            )
        if "strides" not in spec or count == 0:
            continue
        reach = sum((n - 1) * s for n, s in zip(t.shape, t.stride(), strict=True))
        if reach > INDEX_LIMIT:
            raise ValueError(
                f"{name}: tensor '{spec['name']}' reaches element {reach} by its strides {tuple(t.stride())}; "
                f"tilec's kernels index tensors with 32-bit integers, so at most 2^31 - 1 = {INDEX_LIMIT}"
            )


def infer_dims(
    kernel: Mapping,
    shapes: Sequence[Sequence[int]],
    given: Mapping[str, int] | None = None,
    strides: Sequence[Sequence[int] | None] | None = None,
) -> list[int]:
    """Values of the kernel's symbolic dims, in ABI order, from the tensor
    shapes and, for tensors the ABI gives strides, their `strides` (torch's
    `stride()`, in elements), plus explicitly `given` ones; raises ValueError on
    a mismatch. A dimension written as an expression (`M // 64`) is checked
    once the names in it are bound (each appears alone in some tensor). The
    stride of a dimension of extent 1 (or of an empty tensor) is not checked:
    it never moves; it binds a name only if nothing else does."""
    name = kernel["name"]
    bound: dict[str, int] = dict(given or {})
    origin: dict[str, str] = {d: "keyword argument" for d in bound}
    later: list[tuple[str, str, int]] = []
    specs = kernel["tensors"]
    for tensor, shape in zip(specs, shapes, strict=True):
        expected = tensor["shape"]
        if len(shape) != len(expected):
            raise ValueError(
                f"{name}: tensor '{tensor['name']}' must have {len(expected)} dimensions "
                f"({_shape_str(expected)}), got {len(shape)} ({_shape_str(shape)})"
            )
        for axis, (want, got) in enumerate(zip(expected, shape, strict=True)):
            _bind_dim(name, f"{tensor['name']}.shape[{axis}]", want, int(got), bound, origin, later)
    idle: list[tuple[str, int | str, int]] = []  # strides that never move: extent 1, an empty tensor
    for tensor, shape, steps in zip(specs, shapes, strides or [None] * len(specs), strict=True):
        if "strides" not in tensor or steps is None:
            continue
        for axis, (want, got, extent) in enumerate(zip(tensor["strides"], steps, shape, strict=True)):
            where = f"{tensor['name']}.stride({axis})"
            if extent == 1 or 0 in shape:
                idle.append((where, want, int(got)))
            else:
                _bind_dim(name, where, want, int(got), bound, origin, later)
    for where, want, got in idle:
        if isinstance(want, str) and want.isidentifier() and want not in bound:
            bound[want], origin[want] = got, where
    missing = [d for d in kernel.get("dims", []) if d not in bound]
    if missing:
        raise ValueError(f"{name}: cannot infer {', '.join(missing)} from the tensor shapes; pass them as keywords")
    for where, text, got in later:
        want = dim_value(text, bound)
        if want != got:
            raise ValueError(f"{name}: {where} must be {text} = {want}, got {got}")
    for d in kernel.get("dims", []):
        if not -(2**31) <= bound[d] < 2**31:
            raise ValueError(f"{name}: {d} = {bound[d]} does not fit in int32")
    return [bound[d] for d in kernel.get("dims", [])]


def _bind_dim(
    kernel: str,
    where: str,
    want: int | str,
    got: int,
    bound: dict[str, int],
    origin: dict[str, str],
    later: list[tuple[str, str, int]],
) -> None:
    """One shape or stride entry of the ABI (`want`: an int, a name, or an expression, kept in
    `later` until its names are bound) against the tensor's value `got`."""
    if isinstance(want, int):
        if want != got:
            raise ValueError(f"{kernel}: {where} must be {want}, got {got}")
    elif not want.isidentifier():
        later.append((where, want, got))
    elif want in bound:
        if bound[want] != got:
            raise ValueError(f"{kernel}: {where} = {got} but {want} = {bound[want]} from {origin[want]}")
    else:
        bound[want], origin[want] = got, where


def dim_value(text: str, dims: Mapping[str, int]) -> int:
    """The value of a dimension expression of the ABI (`M // 64`, `min(K, 8)`):
    + - * // % with C's rounding toward zero, min and max, over `dims`."""
    return _dim_eval(ast.parse(text, mode="eval").body, dims, text)


def _dim_eval(node: ast.expr, dims: Mapping[str, int], text: str) -> int:
    match node:
        case ast.Constant(int() as value):
            return value
        case ast.Name(id) if id in dims:
            return dims[id]
        case ast.UnaryOp(ast.USub(), a):
            return -_dim_eval(a, dims, text)
        case ast.BinOp(a, op, b):
            return _c_binop(op, _dim_eval(a, dims, text), _dim_eval(b, dims, text), text)
        case ast.Call(ast.Name("min" | "max" as func), args) if args:
            return (min if func == "min" else max)(_dim_eval(x, dims, text) for x in args)
    raise ValueError(f"malformed dimension '{text}' in the tilec-abi line")


def _c_binop(op: ast.operator, a: int, b: int, text: str) -> int:
    match op:
        case ast.Add():
            return a + b
        case ast.Sub():
            return a - b
        case ast.Mult():
            return a * b
        case ast.FloorDiv() | ast.Mod() if b == 0:
            raise ValueError(f"dimension '{text}' divides by zero")
        case ast.FloorDiv():
            return _trunc_div(a, b)
        case ast.Mod():
            return a - b * _trunc_div(a, b)
    raise ValueError(f"malformed dimension '{text}' in the tilec-abi line")


def _trunc_div(a: int, b: int) -> int:
    """C's integer division: the quotient rounded toward zero."""
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _shape_str(shape: Sequence) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


# ---------------------------------------------------------------- building


def find_compiler(arch: str) -> str:
    """The compiler of `arch`'s record (nvcc, hipcc) from PATH, else from its toolkit's bin/
    (`$CUDA_HOME`, `$CUDA_PATH`, /usr/local/cuda; `$ROCM_PATH`, `$HIP_PATH`, /opt/rocm)."""
    c = _target(arch).compiler
    found = shutil.which(c.command)
    if found:
        return found
    for root in (*(os.environ.get(v) for v in c.homes), c.default_home):
        if root and os.access(os.path.join(root, "bin", c.command), os.X_OK):
            return os.path.join(root, "bin", c.command)
    raise RuntimeError(f"{c.command} not found: put its toolkit's bin/ on PATH or set {c.homes[0]}")


_compiler_versions: dict[str, str] = {}


def compiler_version(compiler: str) -> str:
    """`compiler --version` (part of the cache key)."""
    if compiler not in _compiler_versions:
        proc = subprocess.run([compiler, "--version"], capture_output=True, text=True, check=False)
        _compiler_versions[compiler] = proc.stdout.strip()
    return _compiler_versions[compiler]


def gpu_arch() -> str:
    """The registered target of the current GPU: its compute capability on CUDA ((9, 0) ->
    sm_90a), its gfx name on ROCm (`gcnArchName` "gfx90a:sramecc+:xnack-" -> gfx90a)."""
    import torch

    if getattr(torch.version, "hip", None):
        name = torch.cuda.get_device_properties(torch.cuda.current_device()).gcnArchName.split(":")[0]
        if name not in TARGETS:
            raise RuntimeError(f"no tilec target for the ROCm GPU {name} (targets: {', '.join(ARCHES)})")
        return name
    major, minor = torch.cuda.get_device_capability()
    target = target_of_capability(major, minor)
    if target is None:
        raise RuntimeError(f"no tilec target for compute capability {major}.{minor} (targets: {', '.join(ARCHES)})")
    return target.arch


def _target(arch: str):  # noqa: ANN202 - a targets.Target (not imported: runtime reads the registry only)
    if arch not in TARGETS:
        raise ValueError(f"unknown GPU architecture '{arch}' (expected one of {', '.join(ARCHES)})")
    return TARGETS[arch]


def nvcc_flags(arch: str, extra_flags: Sequence[str] = ()) -> list[str]:
    """The target record's flags for a shared library (nvcc's or hipcc's), then `extra_flags`."""
    return [*compiler_flags(_target(arch), "shared"), *extra_flags]


def file_arches(source: str) -> list[str]:
    """The targets `source` was generated for: those whose always-included header it includes
    (`#include <hip/hip_runtime.h>`: gfx90a, gfx942); every target when it includes none."""
    includes = set(re.findall(r"^#include <([^>]+)>", source, re.MULTILINE))
    found = [a for a, t in TARGETS.items() if t.header_rules.always in includes]
    return found or list(ARCHES)


def shared_command(arch: str, compiler: str, extra_flags: Sequence[str], out: str, src: str) -> list[str]:
    """The command line that builds the shared library `out` from the generated file `src`:
    gfx90a -> [hipcc, -shared, -fPIC, --offload-arch=gfx90a, -O3, -std=c++17, ..., -o, out, src]."""
    return [compiler, *nvcc_flags(arch, extra_flags), "-o", out, src]


def compiler_env(arch: str) -> dict[str, str]:
    """The environment the compiler runs in: this process's, plus the record's (hipcc: HIP_PLATFORM=amd)."""
    return {**os.environ, **_target(arch).compiler.env}


def cache_key(source: str, flags: Sequence[str], nvcc_ver: str) -> str:
    blob = json.dumps([source, list(flags), nvcc_ver], separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


def cache_dir() -> str:
    root = os.environ.get("TILEC_CACHE")
    if not root:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        root = os.path.join(base, "tilec")
    return os.path.join(root, "so")


def build_shared(
    source: str, arch: str, extra_flags: Sequence[str] = (), name: str = "kernel", headers: str = ""
) -> str:
    """Compile `source` to a cached shared library with `arch`'s compiler; returns its path.
    `headers`: the text of the user headers it includes (`--include`), part of the cache key."""
    if arch not in file_arches(source):
        raise ValueError(f"{name} was generated for {', '.join(file_arches(source))}, not {arch}")
    compiler = find_compiler(arch)
    flags = nvcc_flags(arch, extra_flags)
    key = cache_key(source + headers, flags, compiler_version(compiler))
    out = os.path.join(cache_dir(), f"{_safe(name)}-{key[:24]}.so")
    if os.path.exists(out):
        return out
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with tempfile.TemporaryDirectory(dir=os.path.dirname(out)) as tmp:
        suffix = _target(arch).compiler.source_suffix
        cu = os.path.join(tmp, f"{_safe(name)}{suffix}")
        with open(cu, "w", encoding="utf-8") as f:
            f.write(source)
        so = os.path.join(tmp, "out.so")
        command = shared_command(arch, compiler, extra_flags, so, cu)
        proc = subprocess.run(command, capture_output=True, text=True, check=False, env=compiler_env(arch))
        if proc.returncode != 0:
            tool = os.path.basename(compiler)
            raise RuntimeError(f"{tool} failed on {name}{suffix} (exit {proc.returncode}):\n{proc.stdout}{proc.stderr}")
        os.replace(so, out)
    return out


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name) or "kernel"


# ---------------------------------------------------------------- calling


def _current_stream(torch: Any, index: int) -> int:
    """The raw handle of device `index`'s current stream (torch's private fast accessor when it
    has one: the public one builds a Stream object per call)."""
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    return raw(index) if raw is not None else torch.cuda.current_stream(index).cuda_stream


class Kernel:
    """One launcher: `kernel(*tensors, *scalars, **dims)`."""

    def __init__(self, lib: ctypes.CDLL, abi: Mapping):
        self.abi = abi
        self.name: str = abi["name"]
        self.tensors: list[dict] = list(abi.get("tensors", []))
        self.scalars: list[dict] = list(abi.get("scalars", []))
        self.dims: list[str] = list(abi.get("dims", []))
        self._fn = getattr(lib, self.name)
        self._fn.restype = ctypes.c_int
        self._fn.argtypes = (
            [ctypes.c_void_p] * len(self.tensors)
            + [DTYPES[s["dtype"]][1] for s in self.scalars]
            + [ctypes.c_int32] * len(self.dims)
            + [ctypes.c_void_p]
        )
        self._torch_dtypes: list | None = None  # the tensors' torch dtypes, at the first call
        self._dims_of: dict[tuple, list[int]] = {}  # inferred dims per (shapes, strides, keywords)
        self._strided = [i for i, t in enumerate(self.tensors) if "strides" in t]  # declared with strides=

    def __repr__(self) -> str:
        args = [t["name"] for t in self.tensors] + [s["name"] for s in self.scalars]
        return f"<tilec kernel {self.name}({', '.join(args)})>"

    def __call__(self, *args: Any, **dims: int) -> None:
        """Check the arguments, infer the dims, launch on the tensors' device's current stream.
        The repeated call is kept cheap (a few microseconds of Python): the dims are remembered
        per shape, and the device is switched only when it is not already the current one."""
        import torch

        n_t, n_s = len(self.tensors), len(self.scalars)
        if len(args) != n_t + n_s:
            raise TypeError(f"{self!r} takes {n_t} tensors and {n_s} scalars, got {len(args)} arguments")
        if dims and not dims.keys() <= set(self.dims):
            unknown = set(dims) - set(self.dims)
            raise TypeError(f"{self.name}: unknown dims {sorted(unknown)} (dims: {self.dims})")
        tensors, scalars = args[:n_t], args[n_t:]
        index = self._check_tensors(torch, tensors)
        dim_values = self._dims(tensors, dims)
        c_args: list[object] = [t.data_ptr() for t in tensors]
        c_args += [self._scalar(torch, s, v) for s, v in zip(self.scalars, scalars, strict=True)]
        c_args += dim_values
        if index == torch.cuda.current_device():
            status = self._fn(*c_args, _current_stream(torch, index))
        else:
            with torch.cuda.device(index):
                status = self._fn(*c_args, _current_stream(torch, index))
        if status != 0:
            raise RuntimeError(f"{self.name}: launch failed with {cuda_error_name(status)} ({status})")

    def _dims(self, tensors: Sequence[Any], given: Mapping[str, int]) -> list[int]:
        steps = tuple(tensors[i].stride() for i in self._strided)
        key = (tuple(t.shape for t in tensors), steps, tuple(sorted(given.items())))
        values = self._dims_of.get(key)
        if values is None:
            strides: list[Sequence[int] | None] = [None] * len(tensors)
            for i, s in zip(self._strided, steps, strict=True):
                strides[i] = s
            values = infer_dims(
                self.abi, [logical_shape(s, t.shape) for s, t in zip(self.tensors, tensors)], given, strides
            )
            _check_index_range(self.name, self.tensors, tensors)
            if len(self._dims_of) >= 256:  # a bounded memo: shapes that change every call
                self._dims_of.clear()
            self._dims_of[key] = values
        return values

    def _check_tensors(self, torch: Any, tensors: Sequence[Any]) -> int:
        """The tensors' CUDA device index (the current device when there are none)."""
        if self._torch_dtypes is None:
            self._torch_dtypes = [getattr(torch, DTYPES[spec["dtype"]][0]) for spec in self.tensors]
        index = None
        for spec, want, t in zip(self.tensors, self._torch_dtypes, tensors, strict=True):
            usable = isinstance(t, torch.Tensor) and _dtype_ok(spec, want, t) and t.is_cuda
            if usable and ("strides" in spec or t.is_contiguous()):  # strides: infer_dims checks them
                here = t.get_device()
                if index is None or here == index:
                    index = here
                    continue
            self._reject(torch, spec, want, t, index)
        return index if index is not None else torch.cuda.current_device()

    def _reject(self, torch: Any, spec: Mapping, want: Any, t: Any, index: int | None) -> None:
        """Raise the error that says what is wrong with tensor argument `t`."""
        what = f"{self.name}: argument '{spec['name']}'"
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{what} must be a torch.Tensor, got {type(t).__name__}")
        if spec["dtype"] in PACKED and str(t.dtype).removeprefix("torch.") not in PACKED_TORCH:
            raise TypeError(
                f"{what} is {spec['dtype']}: pass it packed, two elements a byte (the even one in the low "
                f"nibble), as a torch.uint8 or torch.int8 tensor; got {t.dtype}"
            )
        if t.dtype != want and spec["dtype"] not in PACKED:
            raise TypeError(f"{what} must have dtype {want} ({spec['dtype']}), got {t.dtype}")
        if not t.is_cuda:
            raise ValueError(f"{what} must be on a CUDA device, got {t.device}")
        if index is not None and t.get_device() != index:
            raise ValueError(f"{what} is on {t.device} but earlier tensors are on cuda:{index}")
        raise ValueError(
            f"{what} must be contiguous (call .contiguous(), or declare the tensor with strides=(...) to "
            "take a view as it is)"
        )

    def _scalar(self, torch: Any, spec: Mapping, value: Any) -> Any:
        dtype = spec["dtype"]
        ctype = DTYPES[dtype][1]
        if isinstance(value, torch.Tensor):
            value = value.item()
        if dtype == "bool":
            return ctype(bool(value))
        if dtype.startswith(("int", "uint")):
            if isinstance(value, float) or not isinstance(value, int):
                raise TypeError(f"{self.name}: scalar '{spec['name']}' ({dtype}) must be an int, got {value!r}")
            return ctype(value)
        if dtype in ("float32", "float64"):
            return ctype(float(value))
        bits = torch.tensor([float(value)], dtype=getattr(torch, DTYPES[dtype][0]))
        raw = bits.view(torch.int16 if ctype is ctypes.c_uint16 else torch.uint8).item()
        return ctype(raw & 0xFFFF)


class Module:
    """A loaded `.cu`: one callable attribute per kernel (`mod.gemm(...)`)."""

    def __init__(self, so_path: str, abi: Mapping):
        self.path = so_path
        self.abi = abi
        self._lib = ctypes.CDLL(so_path)
        self.kernels: dict[str, Kernel] = {}
        for k in abi["kernels"]:
            self.kernels[k["name"]] = Kernel(self._lib, k)
            setattr(self, k["name"], self.kernels[k["name"]])

    def __repr__(self) -> str:
        return f"<tilec module {self.path}: {', '.join(self.kernels)}>"


def cuda_error_name(code: int) -> str:
    return CUDA_ERRORS.get(code, f"cudaError {code}")


def compile_source(
    source: str, arch: str | None = None, extra_flags: Sequence[str] = (), name: str = "kernel", headers: str = ""
) -> Module:
    """Build and load tilec-generated CUDA or HIP text (file_arches: the compiler it takes)."""
    abi = parse_abi(source)
    so = build_shared(source, arch or gpu_arch(), extra_flags, name, headers)
    return Module(so, abi)


def load(cu_path_or_source: str | os.PathLike, arch: str | None = None, extra_flags: Sequence[str] = ()) -> Module:
    """Build and load a generated `.cu` or `.hip` file (or its text)."""
    text = str(cu_path_or_source) if not isinstance(cu_path_or_source, os.PathLike) else None
    if text is not None and "\n" in text:
        return compile_source(text, arch, extra_flags)
    path = os.fspath(cu_path_or_source)
    with open(path, encoding="utf-8") as f:
        source = f.read()
    name = os.path.splitext(os.path.basename(path))[0]
    flags, headers = user_headers(source, os.path.dirname(os.path.abspath(path)))
    return compile_source(source, arch, (*extra_flags, *flags), name, headers)


def user_headers(source: str, folder: str) -> tuple[tuple[str, ...], str]:
    """(compiler flags, their texts) for the headers a generated file includes by quoted paths
    relative to its `folder` (`tilec build --include`), which the compiler, run on a copy
    elsewhere, must find there: `-I folder`, and their texts for the cache key (only of the
    headers the file includes itself: a change in one they include is not seen); ((), "") for a
    file without any."""
    paths = re.findall(r'^#include "([^"]+)"', source, flags=re.M)
    if not paths:
        return (), ""
    texts = []
    for p in paths:
        with open(os.path.join(folder, p), encoding="utf-8") as f:
            texts.append(f"// {p}\n{f.read()}")
    return ("-I", folder), "".join(texts)
