"""Helpers shared by the GPU checks (tests/gpu) and the benchmarks (bench/run.py).

- `load(variant)`: the kernels of one variant as Python callables. With `TILEC_PREBUILT=DIR` set
  (the GPU machine, where the compiler's dependencies are absent) the generated file is
  `DIR/<variant>.cu`, written by tests/gpu/prebuild.py; otherwise tilec compiles the example here
  (for `TILEC_GPU_ARCH` when set: HIP for an AMD GPU). Either way `tilec.runtime` builds it with
  nvcc or hipcc (cached by content hash) and loads it.
- Guarded buffers: a tensor placed in the middle of a larger allocation whose margins hold a
  poison bit pattern, so a write past either end of the tensor is caught afterwards; outputs are
  poisoned inside as well (NaN for floats), so an element the kernel never wrote is caught.
- `compare`: relative-norm and elementwise error against a reference, NaN count, guard check.

Imports only the standard library at module level (torch inside functions).
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import math
import os
import sys
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
if os.path.join(ROOT, "src") not in sys.path:
    sys.path.insert(0, os.path.join(ROOT, "src"))

from variants import BY_NAME, MANIFEST  # noqa: E402

PREBUILT_ENV = "TILEC_PREBUILT"
# On an AMD GPU (bench/amd_check.sh): the gfx target every portable variant is built for instead
# of its CUDA arch; the variants pinned to a CUDA-only arch (sm_90a) are then not built.
ARCH_ENV = "TILEC_GPU_ARCH"
# "cuda" for real runs; test_harness_cpu.py dry-runs the cases on the CPU with torch stand-ins
DEVICE = os.environ.get("TILEC_GPU_TEST_DEVICE", "cuda")


def sync() -> None:
    import torch

    if DEVICE == "cuda":
        torch.cuda.synchronize()


class NotBuilt(Exception):
    """The variant's .cu is not there (prebuild failed, or was not run)."""


# ---------------------------------------------------------------- loading

RESULTS: list[tuple[str, str, str]] = []  # (case id, PASS/FAIL/ERROR, detail), for pytest's summary


def gpu_available() -> str | None:
    """None if the GPU checks can run here, else why not."""
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "no CUDA GPU"
    if not prebuilt_dir():
        try:
            import tilec.driver  # noqa: F401
        except ImportError as e:
            return f"tilec's compiler cannot be imported ({e}) and TILEC_PREBUILT is not set"
    return None


def prebuilt_dir() -> str | None:
    d = os.environ.get(PREBUILT_ENV)
    return d or None


def manifest() -> dict:
    d = prebuilt_dir()
    if not d:
        return {}
    try:
        with open(os.path.join(d, MANIFEST)) as f:
            return json.load(f)
    except OSError:
        return {}


def cu_text(name: str) -> str:
    """The generated CUDA of variant `name`."""
    v = BY_NAME[name]
    d = prebuilt_dir()
    if d:
        path = os.path.join(d, f"{name}.cu")
        if not os.path.exists(path):
            entry = manifest().get(name)
            why = (entry or {}).get("error") or "not in the prebuilt folder (run tests/gpu/prebuild.py)"
            raise NotBuilt(f"{name}: no {path}: {why.strip()[:2000]}")
        with open(path, encoding="utf-8") as f:
            return f.read()
    arch = os.environ.get(ARCH_ENV) or v.arch
    if arch != v.arch and v.arch != "sm_80":
        raise NotBuilt(f"{name}: pinned to {v.arch}, not built for {arch}")
    from tilec import driver

    # as `tilec build` writes it: a default over the target's limits takes its nearest fitting point
    result = driver.build(v.path, dict(v.defines), arch, cache=False)
    includes = [os.path.join(ROOT, h) for h in v.includes]
    return driver.with_includes(result, includes, os.path.join(ROOT, f"{name}.cu")).text


_modules: dict[str, Any] = {}


def load(name: str) -> Any:
    """tilec.runtime.Module of variant `name` (cached per process)."""
    if name not in _modules:
        from tilec import runtime

        text, flags, headers = _build_input(name)
        _modules[name] = runtime.compile_source(text, extra_flags=flags, name=name, headers=headers)
    return _modules[name]


def _build_input(name: str) -> tuple[str, tuple[str, ...], str]:
    """Variant `name`'s generated text, with the flags and header texts its --include headers
    need (found from the prebuilt folder, or the checkout when built here)."""
    from tilec import runtime

    text = cu_text(name)
    return (text, *runtime.user_headers(text, prebuilt_dir() or ROOT))


def build_all(names: list[str], jobs: int = 16) -> dict[str, str | None]:
    """Build the shared libraries of many variants in parallel (nvcc runs in subprocesses), so
    that later `load` calls hit the cache. Returns {name: error or None}."""
    from tilec import runtime

    arch = runtime.gpu_arch()

    def one(name: str) -> str | None:
        try:
            text, flags, headers = _build_input(name)
            runtime.build_shared(text, arch, flags, name=name, headers=headers)
            return None
        except NotBuilt as e:
            return f"not built: {e}"
        except Exception as e:  # noqa: BLE001
            return f"{type(e).__name__}: {e}"

    with cf.ThreadPoolExecutor(max(1, jobs)) as pool:
        return dict(zip(names, pool.map(one, names), strict=True))


# ---------------------------------------------------------------- buffers

GUARD = 4096  # elements of margin on each side; a multiple of 256 keeps the tensor 16-byte aligned


def _poison_value(dtype: Any) -> float | int:
    import torch

    if dtype.is_floating_point:
        return float("nan")
    if dtype == torch.bool:
        return True
    return {torch.uint8: 0xA5, torch.int8: -91, torch.int16: -23131, torch.int32: -1515870811}.get(dtype, -1)


def _bits(t: Any) -> Any:
    import torch

    size = t.element_size()
    return t.view({1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[size])


class Guarded:
    """`tensor` (contiguous, shape as asked) inside `base`, with poisoned margins."""

    def __init__(self, shape: tuple[int, ...], dtype: Any, device: str | None = None):
        import torch

        n = math.prod(shape)
        self.n = n
        self.base = torch.empty(GUARD + n + GUARD, dtype=dtype, device=device or DEVICE)
        self.base.fill_(_poison_value(dtype))
        self.tensor = self.base[GUARD : GUARD + n].view(shape)
        self._poison_bits = _bits(self.base[:1].clone())

    def guards_intact(self) -> bool:
        b = _bits(self.base)
        p = self._poison_bits
        return bool((b[:GUARD] == p).all().item() and (b[GUARD + self.n :] == p).all().item())


def guarded_output(shape: tuple[int, ...], dtype: Any) -> Guarded:
    """An output buffer poisoned inside and out (NaN for float types)."""
    return Guarded(tuple(shape), dtype)


def guarded_input(t: Any) -> Guarded:
    """A copy of `t` with poisoned margins: a read past the end brings NaN into the result."""
    g = Guarded(tuple(t.shape), t.dtype, str(t.device))
    g.tensor.copy_(t)
    return g


def randn(shape: tuple[int, ...], dtype: Any, gen: Any, scale: float = 1.0, shift: float = 0.0) -> Any:
    import torch

    x = torch.randn(shape, generator=gen, device=DEVICE, dtype=torch.float32)
    return (x * scale + shift).to(dtype)


# ---------------------------------------------------------------- comparing

# relative tolerances by output dtype (relative norm, and elementwise against rms(ref) + |ref|)
TOLERANCE = {"float16": 1e-2, "bfloat16": 2e-2, "float32": 1e-4, "float64": 1e-10, "int32": 0.0}


def tol_for(t: Any) -> float:
    return TOLERANCE[str(t.dtype).removeprefix("torch.")]


def compare(out: Any, ref: Any, tol: float, guards: list[Guarded] = (), bound: Any = None) -> dict:
    """{'ok', 'rel', 'tol', 'bad', 'nan', 'guards', 'where'}; ok needs all of: no NaN/inf where the
    reference is finite, relative error norm <= tol, every element within tol * (rms(ref) + |ref|)
    (or within `bound`, a tensor of per-element limits, when given), guards intact."""
    import torch

    o = out.detach().to(torch.float64)
    r = ref.detach().to(torch.float64)
    finite = torch.isfinite(r)
    nonfinite = int((~torch.isfinite(o) & finite).sum().item())
    o = torch.where(finite, o, 0.0)
    r = torch.where(finite, r, 0.0)
    diff = (o - r).nan_to_num(nan=math.inf)
    ref_norm = r.norm().item()
    rel = diff.norm().item() / ref_norm if ref_norm > 0 else diff.norm().item()
    rms = ref_norm / math.sqrt(max(r.numel(), 1))
    limit = tol * (rms + r.abs()) if bound is None else bound.detach().to(torch.float64)
    bad_mask = ~(diff.abs() <= limit)
    bad = int(bad_mask.sum().item())
    where = ""
    if bad:
        idx = int(bad_mask.flatten().nonzero()[0].item())
        coord = []
        for d in reversed(out.shape):
            coord.append(idx % d)
            idx //= d
        coord = tuple(reversed(coord))
        where = f"first bad at {coord}: got {out[coord].item():.5g}, want {ref[coord].item():.5g}"
    guards_ok = all(g.guards_intact() for g in guards)
    ok = nonfinite == 0 and rel <= tol and bad == 0 and guards_ok
    return {
        "ok": ok,
        "rel": rel,
        "tol": tol,
        "bad": bad,
        "nan": nonfinite,
        "guards": guards_ok,
        "where": where,
        "numel": out.numel(),
    }


def summarize(res: dict) -> str:
    s = f"rel={res['rel']:.2e} (tol {res['tol']:.0e})"
    if res["nan"]:
        s += f" nan/unwritten={res['nan']}/{res['numel']}"
    if res["bad"]:
        s += f" bad={res['bad']}/{res['numel']}"
    if not res["guards"]:
        s += " WRITE-OUT-OF-BOUNDS (guard overwritten)"
    if res.get("where"):
        s += f" {res['where']}"
    return s
