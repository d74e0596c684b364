"""tilec kernels next to torch, same process, same GPU, same inputs.

    TILEC_PREBUILT=.gpu PYTHONPATH=src python bench/run.py [--quick] [--only softmax,gemm]

For each workload: random inputs (seeded; several input sets in rotation when one set would fit in
L2), torch's time, then each tilec variant of the workload (tests/gpu/variants.py) - first checked
against torch's output on the same inputs (a wrong kernel gets no timing), then timed. Times are
medians over many timed batches after warm-up, measured with CUDA events; the torch operation is
timed before and after the tilec variants and the two medians are averaged (their spread is shown:
a ratio within it is noise). Each workload runs in its own worker process, so a crashing kernel
cannot take the rest down. The markdown table comes last; JSON goes to $OUT/bench.json if OUT is set.

Workloads (full / --quick):
  add        elementwise add fp16, 2^28 / 2^24 elements       vs torch.add(a, b, out=c)
  softmax    row softmax fp16, 16384x8192 / 4096x8192         vs torch.softmax(x, -1)
  rmsnorm    RMSNorm fp16 with weight, 16384x8192 / 4096x8192 vs F.rms_norm (composed if absent)
  gemm       fp16 GEMM, fp32 accumulation, 8192^3 / 4096^3    vs torch.matmul (cuBLAS)
  gemm-fp8   fp8 e4m3 C = A B^T, fp32 accumulation, fp16 out, 8192^3 / 4096^3
                                                               vs torch._scaled_mm (cuBLASLt, unit scales)
  gemm-int8  int8 C = A B^T, int32 out, 8192^3 / 4096^3       vs torch._int_mm (cuBLASLt)
  fa, fa-causal  attention fwd fp16, B4 H32 S4096 D128 / B1 H16 S2048 D128
                                                               vs SDPA with the FLASH_ATTENTION backend
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "gpu"))
sys.path.insert(0, os.path.join(ROOT, "src"))

MARK = "@@tilec-bench "

# workload -> tilec variants to try (tests/gpu/variants.py), best correct one is reported
CANDIDATES = {
    "add": ["elementwise_add", "elementwise_add-bench"],
    "softmax": ["softmax", "softmax-bench", "softmax-bench-t256"],
    "rmsnorm": ["rmsnorm", "rmsnorm-bench", "rmsnorm-bench-t256", "rmsnorm-bench-t1024", "rmsnorm-bench-m2"],
    "gemm": [
        "gemm",
        "gemm-bench-128x128",
        "gemm-bench-s4",
        "gemm-bench-k32",
        "gemm-sm90a",
        "gemm-sm90a-128x128",
        "gemm-sm90a-k32",
    ],  # fmt: skip
    "gemm-bf16": ["gemm_bf16-sm90a"],
    "gemm-fp8": ["gemm_fp8-bench-sm90a", "gemm_fp8-bench-sm90a-128x256", "gemm_fp8-bench-sm90a-128x256-k64"],
    "gemm-int8": ["gemm_int8-sm90a", "gemm_int8-bench-sm90a-128x256", "gemm_int8-bench-sm90a-128x256-k64"],
    "fa": [
        "flash_attention",
        "flash_attention-bench-n32",
        "flash_attention-bench-s1",
        "flash_attention-sm90a",
        "flash_attention-bench-sm90a-t256",
        "flash_attention-bench-sm90a-n128",
    ],
    "fa-causal": [
        "flash_attention-causal",
        "flash_attention-causal-bench-s1",
        "flash_attention-causal-sm90a",
        "flash_attention-causal-bench-sm90a-t256",
        "flash_attention-causal-bench-sm90a-n128",
    ],
    "fa-cudnn": ["flash_attention-sm90a", "flash_attention-bench-sm90a-t256", "flash_attention-bench-sm90a-n128"],
    "fa-causal-cudnn": [
        "flash_attention-causal-sm90a",
        "flash_attention-causal-bench-sm90a-t256",
        "flash_attention-causal-bench-sm90a-n128",
    ],
    "fa-d64": [
        "flash_attention-sm90a-overlap",
        "flash_attention-d64-bench-sm90a-n64",
        "flash_attention-d64-bench-sm90a-m192",
    ],
    "fa-d64-cudnn": [
        "flash_attention-sm90a-overlap",
        "flash_attention-d64-bench-sm90a-n64",
        "flash_attention-d64-bench-sm90a-m192",
    ],
    "fa-d64-causal-cudnn": [
        "flash_attention-causal-sm90a-overlap",
        "flash_attention-d64-causal-bench-sm90a-n64",
        "flash_attention-d64-causal-bench-sm90a-m192",
    ],
    "fa-d256": ["flash_attention-d256-bench-sm90a", "flash_attention-d256-bench-sm90a-n32"],
    "fa-d256-cudnn": [
        "flash_attention-d256-bench-sm90a",
        "flash_attention-d256-bench-sm90a-n32",
        "flash_attention-d256-bench-sm90a-n80",
    ],
    "fa-d256-causal-cudnn": [
        "flash_attention-d256-causal-bench-sm90a",
        "flash_attention-d256-causal-bench-sm90a-n32",
        "flash_attention-d256-causal-bench-sm90a-n80",
    ],
    "gqa-causal-cudnn": ["gqa_attention-sm90a", "gqa_attention-bench-sm90a-n64"],
    "gqa-causal-cudnn-gqa": ["gqa_attention-sm90a", "gqa_attention-bench-sm90a-n64"],
}
TOL = 1e-2  # relative error norm of fp16 outputs against torch's


# ---------------------------------------------------------------- timing


def bench(calls, budget_s: float = 1.5, min_reps: int = 5, max_reps: int = 200) -> dict:
    """Median milliseconds per call. `calls` is a list of closures, one per input set, used in
    rotation. Batches of back-to-back calls are timed between CUDA events; short calls are batched
    so that a batch lasts about a millisecond (the launch overhead stays hidden)."""
    import torch

    n = len(calls)
    # warm-up, and a first estimate
    for i in range(max(3, n)):
        calls[i % n]()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for i in range(max(3, n)):
        calls[i % n]()
    e.record()
    torch.cuda.synchronize()
    est = s.elapsed_time(e) / max(3, n)
    inner = max(1, min(100, math.ceil(1.0 / max(est, 1e-3))))
    reps = int(max(min_reps, min(max_reps, budget_s * 1000 / max(est * inner, 1e-3))))
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    k = 0
    for s, e in events:
        s.record()
        for _ in range(inner):
            calls[k % n]()
            k += 1
        e.record()
    torch.cuda.synchronize()
    times = sorted(s.elapsed_time(e) / inner for s, e in events)
    return {"ms": statistics.median(times), "min": times[0], "reps": reps, "inner": inner, "sets": n}


GRAPH_BELOW_MS = 0.2  # calls shorter than this are also timed as a CUDA graph (graph_ms)


def graph_ms(calls, reps: int = 30) -> float | None:
    """Median milliseconds per call with the host out of the way: the calls (in rotation, at least
    20 of them) captured into one CUDA graph, each replay timed between CUDA events. Back-to-back
    launches of a kernel of a few microseconds measure the caller's per-call host cost as much as
    the kernel; this measures the kernel. None if a call cannot be captured."""
    import torch

    n = max(20, len(calls))
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    try:
        with torch.cuda.stream(side):
            for c in calls:  # warm-up outside the capture (lazy loading, attributes)
                c()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for i in range(n):
                calls[i % len(calls)]()
    except RuntimeError:
        torch.cuda.synchronize()
        return None
    graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        graph.replay()
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e) / n)
    return statistics.median(times)


def timed(calls, budget_s: float = 1.5) -> dict:
    """bench(calls), plus graph_ms when the calls are short enough for the host cost to show."""
    t = bench(calls, budget_s)
    if t["ms"] < GRAPH_BELOW_MS:
        g = graph_ms(calls)
        if g is not None:
            t["graph_ms"] = g
    return t


def n_sets(bytes_in: int) -> int:
    """Input sets to rotate so that repeated calls do not run out of L2."""
    import torch

    l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 50 << 20) or (50 << 20)
    return 1 if bytes_in > 2 * l2 else min(8, math.ceil(4 * l2 / max(bytes_in, 1)))


def rel_err(out, ref) -> float:
    import torch

    o, r = out.double(), ref.double()
    if not bool(torch.isfinite(o).all()):
        return math.inf
    return ((o - r).norm() / r.norm().clamp_min(1e-30)).item()


# ---------------------------------------------------------------- workloads
#
# Each returns a dict: sets (list of per-set argument tuples), torch (fn(set) -> output), torch_name,
# tilec (fn(mod, set, out)), out (fn() -> fresh poisoned output), units ("GB/s" or "TFLOP/s") and
# amount (bytes or flops per call), shape (text).


def w_add(quick: bool):
    import torch

    N = 1 << (24 if quick else 28)
    ns = n_sets(2 * N * 2)
    sets = [
        (torch.randn(N, device="cuda", dtype=torch.float16), torch.randn(N, device="cuda", dtype=torch.float16))
        for _ in range(ns)
    ]
    c_torch = torch.empty(N, device="cuda", dtype=torch.float16)
    return dict(
        shape=f"N=2^{N.bit_length() - 1} fp16",
        sets=sets,
        units="GB/s",
        amount=3 * N * 2,
        torch_name="torch.add(out=)",
        torch=lambda a, b: torch.add(a, b, out=c_torch),
        out=lambda: torch.full((N,), math.nan, device="cuda", dtype=torch.float16),
        tilec=lambda mod, a, b, out: mod.elementwise_add(a, b, out),
    )


def _rows(quick: bool):
    return (4096 if quick else 16384), 8192


def w_softmax(quick: bool):
    import torch

    M, N = _rows(quick)
    sets = [(torch.randn(M, N, device="cuda", dtype=torch.float16) * 4,) for _ in range(n_sets(M * N * 2))]
    return dict(
        shape=f"{M}x{N} fp16",
        sets=sets,
        units="GB/s",
        amount=2 * M * N * 2,
        torch_name="torch.softmax",
        torch=lambda x: torch.softmax(x, dim=-1),
        out=lambda: torch.full((M, N), math.nan, device="cuda", dtype=torch.float16),
        tilec=lambda mod, x, out: mod.softmax(x, out),
    )


def w_rmsnorm(quick: bool):
    import torch
    import torch.nn.functional as F

    M, N = _rows(quick)
    eps = 1e-6
    w = torch.randn(N, device="cuda", dtype=torch.float16) + 1
    sets = [(torch.randn(M, N, device="cuda", dtype=torch.float16),) for _ in range(n_sets(M * N * 2))]
    if hasattr(F, "rms_norm"):
        name, fn = "F.rms_norm", (lambda x: F.rms_norm(x, (N,), w, eps))
    else:
        name = "composed (x * rsqrt(mean(x^2) + eps) * w)"

        def fn(x):
            xf = x.float()
            return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * w

    return dict(
        shape=f"{M}x{N} fp16",
        sets=sets,
        units="GB/s",
        amount=2 * M * N * 2 + N * 2,
        torch_name=name,
        torch=fn,
        out=lambda: torch.full((M, N), math.nan, device="cuda", dtype=torch.float16),
        tilec=lambda mod, x, out: mod.rmsnorm(x, w, out, eps),
    )


def w_gemm(quick: bool, dtype_name: str = "float16"):
    import torch

    dtype = getattr(torch, dtype_name)
    M = N = K = 4096 if quick else 8192
    sets = [
        (torch.randn(M, K, device="cuda", dtype=dtype), torch.randn(K, N, device="cuda", dtype=dtype))
        for _ in range(n_sets((M * K + K * N) * 2))
    ]
    c_torch = torch.empty(M, N, device="cuda", dtype=dtype)
    return dict(
        shape=f"{M}x{N}x{K} {'fp16' if dtype_name == 'float16' else 'bf16'}",
        sets=sets,
        units="TFLOP/s",
        amount=2 * M * N * K,
        torch_name="torch.matmul (cuBLAS)",
        torch=lambda a, b: torch.matmul(a, b, out=c_torch),
        out=lambda: torch.full((M, N), math.nan, device="cuda", dtype=dtype),
        tilec=lambda mod, a, b, out: mod.gemm(a, b, out),
    )


def w_gemm_fp8(quick: bool):
    import torch

    M = N = K = 4096 if quick else 8192
    e4m3 = torch.float8_e4m3fn
    sets = [
        (torch.randn(M, K, device="cuda").to(e4m3), torch.randn(N, K, device="cuda").to(e4m3))
        for _ in range(n_sets(M * K + N * K))
    ]
    one = torch.tensor(1.0, device="cuda")

    def scaled_mm(a, b_nk):
        # B column-major, as cuBLASLt's fp8 GEMM takes it; fast accumulation, as tilec's kernel
        # accumulates every k step in the wgmma's own accumulator
        out = torch._scaled_mm(a, b_nk.t(), scale_a=one, scale_b=one, out_dtype=torch.float16, use_fast_accum=True)
        return out[0] if isinstance(out, tuple) else out  # torch < 2.4 also returned amax

    return dict(
        shape=f"{M}x{N}x{K} fp8 e4m3 -> fp16",
        sets=sets,
        units="TFLOP/s",
        amount=2 * M * N * K,
        torch_name="torch._scaled_mm (cuBLASLt)",
        torch=scaled_mm,
        out=lambda: torch.full((M, N), math.nan, device="cuda", dtype=torch.float16),
        tilec=lambda mod, a, b, out: mod.gemm_int8(a, b, out),
    )


def w_gemm_int8(quick: bool):
    import torch

    M = N = K = 4096 if quick else 8192

    def rand8(rows: int) -> torch.Tensor:
        return torch.randint(-128, 128, (rows, K), device="cuda", dtype=torch.int8)

    sets = [(rand8(M), rand8(N)) for _ in range(n_sets(M * K + N * K))]
    return dict(
        shape=f"{M}x{N}x{K} int8 -> int32",
        sets=sets,
        units="TFLOP/s",  # integer operations per second, counted alike
        amount=2 * M * N * K,
        torch_name="torch._int_mm (cuBLASLt)",
        torch=lambda a, b_nk: torch._int_mm(a, b_nk.t()),
        out=lambda: torch.full((M, N), -(2**31), device="cuda", dtype=torch.int32),
        tilec=lambda mod, a, b, out: mod.gemm_int8(a, b, out),
    )


def _w_fa(quick: bool, causal: bool, backend: str = "FLASH_ATTENTION", D: int = 128):
    """Attention of head dimension `D` against SDPA's `backend`: FlashAttention-2 (FLASH_ATTENTION)
    or cuDNN's fused attention (CUDNN_ATTENTION, the faster on Hopper)."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    B, H, S = (1, 16, 2048) if quick else (4, 32, 4096)
    shape = (B, H, S, D)
    sets = [
        tuple(torch.randn(shape, device="cuda", dtype=torch.float16) for _ in range(3))
        for _ in range(n_sets(3 * B * H * S * D * 2))
    ]

    def sdpa(q, k, v):
        with sdpa_kernel(getattr(SDPBackend, backend)):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    return dict(
        shape=f"B{B} H{H} S{S} D{D}{' causal' if causal else ''}",
        sets=sets,
        units="TFLOP/s",
        amount=4 * B * H * S * S * D // (2 if causal else 1),
        torch_name="SDPA flash backend" if backend == "FLASH_ATTENTION" else "SDPA cuDNN backend",
        torch=sdpa,
        out=lambda: torch.full(shape, math.nan, device="cuda", dtype=torch.float16),
        tilec=lambda mod, q, k, v, out: mod.flash_attention(q, k, v, out),
    )


def w_gqa(quick: bool, enable_gqa: bool):
    """Causal grouped-query attention, 32 query heads over 8 key/value heads, D 128
    (bench/programs/attention/gqa_attention.tile), against SDPA's cuDNN backend: given K and V repeated to 32
    heads outside the timing (`enable_gqa` false), or given the 8 heads with enable_gqa=True."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    B, H, H_kv, S, D = (1, 16, 4, 2048, 128) if quick else (4, 32, 8, 4096, 128)
    q_shape, kv_shape = (B, H, S, D), (B, H_kv, S, D)

    def one_set():
        q, k, v = (torch.randn(s, device="cuda", dtype=torch.float16) for s in (q_shape, kv_shape, kv_shape))
        if enable_gqa:
            return q, k, v, k, v
        return q, k, v, k.repeat_interleave(H // H_kv, dim=1), v.repeat_interleave(H // H_kv, dim=1)

    heads_read = H + 2 * H_kv + (0 if enable_gqa else 2 * H)  # Q, K, V and (cuDNN's) K, V repeated
    sets = [one_set() for _ in range(n_sets(B * heads_read * S * D * 2))]

    def sdpa(q, k, v, k_sdpa, v_sdpa):
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return F.scaled_dot_product_attention(q, k_sdpa, v_sdpa, is_causal=True, enable_gqa=enable_gqa)

    return dict(
        shape=f"B{B} H{H} over {H_kv} S{S} D{D} causal",
        sets=sets,
        units="TFLOP/s",
        amount=4 * B * H * S * S * D // 2,
        torch_name="SDPA cuDNN backend, enable_gqa=True" if enable_gqa else "SDPA cuDNN backend, K/V repeated",
        torch=sdpa,
        out=lambda: torch.full(q_shape, math.nan, device="cuda", dtype=torch.float16),
        tilec=lambda mod, q, k, v, k_sdpa, v_sdpa, out: mod.gqa_attention(q, k, v, out),
    )


WORKLOADS = {
    "add": w_add,
    "softmax": w_softmax,
    "rmsnorm": w_rmsnorm,
    "gemm": w_gemm,
    "gemm-bf16": lambda quick: w_gemm(quick, "bfloat16"),
    "gemm-fp8": w_gemm_fp8,
    "gemm-int8": w_gemm_int8,
    "fa": lambda quick: _w_fa(quick, False),
    "fa-causal": lambda quick: _w_fa(quick, True),
    "fa-cudnn": lambda quick: _w_fa(quick, False, "CUDNN_ATTENTION"),
    "fa-causal-cudnn": lambda quick: _w_fa(quick, True, "CUDNN_ATTENTION"),
    "fa-d64": lambda quick: _w_fa(quick, False, D=64),
    "fa-d64-cudnn": lambda quick: _w_fa(quick, False, "CUDNN_ATTENTION", D=64),
    "fa-d64-causal-cudnn": lambda quick: _w_fa(quick, True, "CUDNN_ATTENTION", D=64),
    "fa-d256": lambda quick: _w_fa(quick, False, D=256),
    "fa-d256-cudnn": lambda quick: _w_fa(quick, False, "CUDNN_ATTENTION", D=256),
    "fa-d256-causal-cudnn": lambda quick: _w_fa(quick, True, "CUDNN_ATTENTION", D=256),
    "gqa-causal-cudnn": lambda quick: w_gqa(quick, False),
    "gqa-causal-cudnn-gqa": lambda quick: w_gqa(quick, True),
}


# ---------------------------------------------------------------- worker


def load_baseline(variant: str, baseline: str):
    """The previous build's module of `variant` (`<baseline>/<variant>.cu`), loaded under another name."""
    from tilec import runtime

    with open(os.path.join(baseline, f"{variant}.cu"), encoding="utf-8") as f:
        return runtime.compile_source(f.read(), name=f"{variant}-baseline")


def in_turns(builds: list[str]) -> list[str | None]:
    """The order to time `builds` in: once each for one build; for a build and its previous build,
    a timing thrown away (None: the first build's, a warm-up), then A B B A, so that a penalty on
    a pair's first timing and a drift of the GPU's clocks within the pair fall on both alike (a
    GEMM at its power limit, timed twice unchanged, came out up to 6% slower the first time)."""
    if len(builds) < 2:
        return list(builds)
    return [None, *builds, *builds[::-1]]


def mean_of_runs(runs: list[dict]) -> dict:
    """One build's timing from its runs (bench's dicts): the first run's fields, with `ms` the mean
    of the runs' medians, `min` the least of their minima and `ms_runs` each median."""
    if len(runs) == 1:
        return runs[0]
    ms = statistics.mean(r["ms"] for r in runs)
    return {**runs[0], "ms": ms, "min": min(r["min"] for r in runs), "ms_runs": [r["ms"] for r in runs]}


def worker(name: str, quick: bool, budget: float, baseline: str | None = None) -> int:
    import torch
    from harness import load

    def emit(rec):
        print(MARK + json.dumps(rec), flush=True)

    torch.manual_seed(0)
    w = WORKLOADS[name](quick)
    sets = w["sets"]
    torch_calls = [lambda s=s: w["torch"](*s) for s in sets]
    ref = w["torch"](*sets[0]).clone()
    t_before = bench(torch_calls, budget)
    emit(
        {
            "kind": "torch",
            "workload": name,
            "name": w["torch_name"],
            "shape": w["shape"],
            "units": w["units"],
            "amount": w["amount"],
            "run": 1,
            **t_before,
        }
    )

    kinds = ("tilec", "baseline") if baseline else ("tilec",)
    for variant in CANDIDATES[name]:
        ready: dict[str, tuple[dict, list]] = {}  # kind -> (its record, its calls), checked
        for kind in kinds:
            rec = {"kind": kind, "workload": name, "variant": variant}
            try:
                mod = load(variant) if kind == "tilec" else load_baseline(variant, baseline)
                out = w["out"]()
                w["tilec"](mod, *sets[0], out)
                torch.cuda.synchronize()
                err = rel_err(out, ref)
                rec["rel_err"] = err
                if not err <= TOL:
                    rec["status"] = f"WRONG (rel err {err:.2e} > {TOL:.0e} vs torch): not timed"
                    emit(rec)
                    continue
                outs = [w["out"]() for _ in sets]
                ready[kind] = (
                    rec,
                    [lambda s=s, o=o, m=mod: w["tilec"](m, *s, o) for s, o in zip(sets, outs, strict=True)],
                )
            except Exception as e:  # noqa: BLE001
                rec["status"] = f"ERROR {type(e).__name__}: {str(e)[:400]}"
                emit(rec)
                try:
                    torch.cuda.synchronize()
                except Exception:  # noqa: BLE001 - sticky CUDA error: stop this worker
                    for other, _ in ready.values():  # checked, never timed
                        emit({**other, "status": f"not timed: CUDA error in the {kind} build's check"})
                    return 3
        runs: dict[str, list[dict]] = {kind: [] for kind in ready}
        share = budget / 2 if len(ready) > 1 else budget  # four timings in the time of two
        timing = None
        try:
            for step in in_turns(list(ready)):
                timing = step
                t = bench(ready[step or next(iter(ready))][1], share)
                if step is not None:
                    runs[step].append(t)
        except Exception as e:  # noqa: BLE001
            failed = timing or next(iter(ready))
            for kind, (rec, _) in ready.items():
                status = f"ERROR while timing: {type(e).__name__}: {str(e)[:400]}"
                emit({**rec, "status": status if kind == failed else f"not timed: the {failed} build's timing failed"})
            try:
                torch.cuda.synchronize()
            except Exception:  # noqa: BLE001 - sticky CUDA error: stop this worker
                return 3
            continue
        for kind, (rec, _) in ready.items():
            rec.update(status="ok", **mean_of_runs(runs[kind]))
            emit(rec)

    t_after = bench(torch_calls, budget)
    emit(
        {
            "kind": "torch",
            "workload": name,
            "name": w["torch_name"],
            "shape": w["shape"],
            "units": w["units"],
            "amount": w["amount"],
            "run": 2,
            **t_after,
        }
    )
    return 0


# ---------------------------------------------------------------- parent


def run_worker(name: str, quick: bool, budget: float, timeout: float, baseline: str | None) -> list[dict]:
    cmd = [sys.executable, "-u", os.path.abspath(__file__), "--worker", name, "--budget", str(budget)]
    if quick:
        cmd.append("--quick")
    if baseline:
        cmd += ["--baseline", baseline]
    recs = []
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
        out, rc = proc.stdout + proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        rc = "timeout"
    for line in out.splitlines():
        if line.startswith(MARK):
            recs.append(json.loads(line[len(MARK) :]))
    if rc not in (0,):
        tail = "\n".join(ln for ln in out.splitlines() if not ln.startswith(MARK))[-1500:]
        recs.append({"kind": "error", "workload": name, "status": f"worker exit {rc}", "tail": tail})
        print(f"[{name}] worker exit {rc}:\n{tail}", flush=True)
    return recs


def rate(amount: float, ms: float, units: str) -> float:
    return amount / (ms * 1e-3) / (1e9 if units == "GB/s" else 1e12)


def report(name: str, recs: list[dict]) -> dict:
    torch_runs = [r for r in recs if r["kind"] == "torch"]
    tilec = [r for r in recs if r["kind"] == "tilec"]
    base = {r["variant"]: r for r in recs if r["kind"] == "baseline" and r.get("status") == "ok"}
    row = {"workload": name}
    if not torch_runs:
        row["note"] = "; ".join(r.get("status", "") for r in recs) or "no result"
        return row
    t0 = torch_runs[0]
    units, amount = t0["units"], t0["amount"]
    torch_ms = statistics.mean(r["ms"] for r in torch_runs)
    spread = (max(r["ms"] for r in torch_runs) / min(r["ms"] for r in torch_runs) - 1) if len(torch_runs) > 1 else 0
    row.update(
        shape=t0["shape"],
        torch_name=t0["name"],
        torch_ms=torch_ms,
        torch_spread=spread,
        units=units,
        torch_rate=rate(amount, torch_ms, units),
    )
    ok = [r for r in tilec if r.get("status") == "ok"]
    for r in tilec:
        line = f"  {name:10s} {r['variant']:30s} "
        if r.get("status") == "ok":
            line += (
                f"{r['ms']:9.3f} ms  {rate(amount, r['ms'], units):8.1f} {units}  "
                f"x{r['ms'] / torch_ms:.2f} of torch  (rel err {r['rel_err']:.1e}, {r['reps']}x{r['inner']} calls,"
                f" {r['sets']} input sets)"
            )
        else:
            line += r.get("status", "?")
        if r["variant"] in base:
            b = base[r["variant"]]
            b_rate = rate(amount, b["ms"], units)
            line += f"\n  {'':10s} {'  previous build':30s} {b['ms']:9.3f} ms  {b_rate:8.1f} {units}"
            if r.get("status") == "ok":
                line += f"  new/previous time x{r['ms'] / b['ms']:.3f}"
                if "ms_runs" in r and "ms_runs" in b:  # timed new, previous, previous, new
                    line += f"  (new {r['ms_runs'][0]:.3f}, {r['ms_runs'][1]:.3f}; previous "
                    line += f"{b['ms_runs'][0]:.3f}, {b['ms_runs'][1]:.3f})"
        print(line, flush=True)
    for r in recs:
        if r["kind"] == "baseline" and r.get("status") != "ok":
            print(f"  {name:10s} {r['variant'] + ' (previous build)':30s} {r.get('status', '?')}", flush=True)
    print(
        f"  {name:10s} {'torch: ' + t0['name']:30s} {torch_ms:9.3f} ms  {row['torch_rate']:8.1f} {units}  "
        "(runs " + ", ".join(f"{r['ms']:.3f}" for r in torch_runs) + " ms)",
        flush=True,
    )
    if ok:
        best = min(ok, key=lambda r: r["ms"])
        row.update(
            variant=best["variant"],
            tilec_ms=best["ms"],
            tilec_rate=rate(amount, best["ms"], units),
            ratio=best["ms"] / torch_ms,
            rel_err=best["rel_err"],
        )
        if best["variant"] in base:
            row["baseline_ms"] = base[best["variant"]]["ms"]
    else:
        row["note"] = "; ".join(f"{r['variant']}: {r.get('status', '?')}" for r in tilec) or "no tilec variant ran"
    return row


def print_table(rows: list[dict]) -> None:
    print("\n## tilec vs torch (median times, same process)\n")
    print(
        "| workload | shape | torch op | torch ms | tilec variant | tilec ms | tilec/torch time | tilec rate "
        "| torch rate | torch run-to-run | previous build ms | new/previous time |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if "torch_ms" not in r:
            print(f"| {r['workload']} | | | | | | | | | {r.get('note', '')[:200]} | | |")
            continue
        u = r["units"]
        torch_part = f"| {r['workload']} | {r['shape']} | {r['torch_name']} | {r['torch_ms']:.3f} "
        tail = f"| {r['torch_rate']:.1f} {u} | {100 * r['torch_spread']:.1f}% |"
        if "baseline_ms" in r:
            tail += f" {r['baseline_ms']:.3f} | {r['tilec_ms'] / r['baseline_ms']:.3f} |"
        else:
            tail += " | |"
        if "tilec_ms" in r:
            print(
                torch_part + f"| {r['variant']} | {r['tilec_ms']:.3f} | **{r['ratio']:.2f}x** "
                f"| {r['tilec_rate']:.1f} {u} " + tail
            )
        else:
            note = r.get("note", "").replace("|", "/").replace("\n", " ")[:160]
            print(torch_part + f"| {note} | | | " + tail)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smaller sizes")
    ap.add_argument("--only", default="", help=f"comma-separated workloads of {', '.join(WORKLOADS)}")
    ap.add_argument("--budget", type=float, default=1.0, help="seconds of timed runs per measurement")
    ap.add_argument("--timeout", type=float, default=150.0, help="seconds per workload")
    ap.add_argument("--total", type=float, default=250.0, help="seconds for everything; later workloads are skipped")
    ap.add_argument(
        "--baseline",
        default=os.environ.get("TILEC_BASELINE") or None,
        help="folder of a previous build's .cu files (same variant names): timed beside each variant",
    )
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args.worker, args.quick, args.budget, args.baseline)

    import torch
    from harness import build_all, prebuilt_dir

    names = [n for n in WORKLOADS if not args.only or n in args.only.split(",")]
    print(
        f"{torch.cuda.get_device_name()}  torch {torch.__version__}  cuda {torch.version.cuda}  "
        f"prebuilt={prebuilt_dir()}  {'quick' if args.quick else 'full'} sizes",
        flush=True,
    )
    variants = sorted({v for n in names for v in CANDIDATES[n]})
    t0 = time.perf_counter()
    errors = build_all(variants)
    print(
        f"built {sum(e is None for e in errors.values())}/{len(variants)} variants in {time.perf_counter() - t0:.1f}s",
        flush=True,
    )
    for v, e in errors.items():
        if e:
            print(f"  BUILD-ERROR {v}: {e[:600]}", flush=True)

    rows, all_recs = [], []
    for name in names:
        t1 = time.perf_counter()
        left = args.total - (t1 - t0)
        if left < 20:
            print(f"[{name}] skipped: the --total budget of {args.total:.0f}s is spent", flush=True)
            rows.append({"workload": name, "note": "skipped: out of time (--total)"})
            all_recs.append({"kind": "error", "workload": name, "status": "skipped: out of time"})
            continue
        recs = run_worker(name, args.quick, args.budget, min(args.timeout, left - 5), args.baseline)
        all_recs += recs
        rows.append(report(name, recs))
        print(f"  ({name}: {time.perf_counter() - t1:.1f}s)", flush=True)

    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "bench.json"), "w") as f:
            json.dump(
                {
                    "device": torch.cuda.get_device_name(),
                    "torch": torch.__version__,
                    "quick": args.quick,
                    "rows": rows,
                    "records": all_recs,
                },
                f,
                indent=1,
            )
    print_table(rows)
    bad = [r for r in all_recs if r["kind"] == "error" or (r["kind"] != "torch" and r.get("status") != "ok")]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
