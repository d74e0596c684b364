"""The corpus GPU table (issue 15): every corpus program through tilec and TileLang, checked and timed.

    # here, where tilec is installed
    PYTHONPATH=src python bench/corpus_prebuild.py --out .corpus
    # on the GPU machine (bench/corpus_gpu.sh unpacks TileLang and runs this)
    PYTHONPATH=src:/tmp/tilec-tilelang/site312 python3 bench/corpus_gpu.py --dir .corpus [--only gemm,topk]

For each program of tests/corpus/tilelang/ that tilec compiles, SPECS below says: the problem sizes
(the timed case, and a ragged one where the TileLang program supports it), how inputs are made
(seeded, random, never zeros), the torch reference and tolerances, how tilec's launchers are called
(through tilec.runtime on the prebuilt `.corpus/NAME.cu`) and how TileLang's own kernel is built from
its example module (copied into `.corpus/tilelang/` by the prebuild) at the same configuration.
Outputs are poisoned (NaN, or zeros for buffers the kernels accumulate into atomically) inside
guard margins before each checked call. Both compilers' kernels then run in the same process on the
same inputs; their times (CUDA events around batches of back-to-back calls, median over rounds
that alternate tilec and TileLang, after warm-up) are compared. A program of several kernels (its
"parts": forward and backward, or two alternative kernels) is timed part by part; its row adds
them up.

Each program runs in a fresh worker process (a crash, hang or sticky CUDA error costs only that
program; a worker that dies inside one compiler's step is run again without it, so the other
compiler still gets its row). Workers compile concurrently (--jobs); all GPU work - inputs,
references, checks, timing - holds one lock file, so timings never overlap. Each program has
--timeout seconds (not counting the wait for the lock), the whole run --total seconds; programs
not started in time are listed as skipped.

Prints a markdown table last; JSON goes to $OUT/corpus.json when OUT is set.

Imports only the standard library at module level (tests/test_corpus_gpu_specs.py reads SPECS
without torch); torch, tilec.runtime and TileLang inside the functions that run on the GPU machine.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import importlib
import json
import math
import os
import queue
import statistics
import subprocess
import sys
import threading
import time
import types
from dataclasses import dataclass, field
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MANIFEST = "manifest.json"
MARK = "@@corpus "
LOCK_PATH = os.environ.get("CORPUS_GPU_LOCK", "/tmp/tilec-corpus-gpu.lock")
SLOWER_THAN = 1.25  # tilec/TileLang time above this: tilec runs below 0.8x TileLang's speed


# ---------------------------------------------------------------- the spec table


@dataclass(frozen=True)
class Case:
    """One problem size of a program: `dims` name the sizes, `build` the tilec build ("" is
    .corpus/NAME.cu, else .corpus/NAME--BUILD.cu), `timed` the case whose times make the row;
    `also_timed` cases are timed too and listed under the table, not in the row (MLA decode at
    the batch sizes issue 12 names)."""

    label: str
    dims: dict[str, int]
    build: str = ""
    timed: bool = False
    also_timed: bool = False


@dataclass
class Program:
    """How one corpus program is checked and timed. Subclasses give the torch parts."""

    name: str = ""  # the corpus file's stem
    source: str = ""  # TileLang's example, relative to its repository (the .tile header's # source:)
    builds: dict[str, dict[str, str]] = field(default_factory=lambda: {"": {}})  # build -> -D overrides
    cases: tuple[Case, ...] = ()
    parts: tuple[str, ...] = ("",)  # the kernels (or kernel chains) timed one by one
    load: str = "import"  # "import": run the example module; "defs": only its imports, defs, literals
    stubs: tuple[str, ...] = ()  # modules the example imports that are absent on the GPU machine
    how: str = ""  # how TileLang's kernel is built and called (for the report)
    no_ragged: str = ""  # why there is no ragged case

    # -- the example module's globals a case needs (set after it is loaded)
    def example_globals(self, case: Case) -> dict[str, Any]:
        return {}

    # -- TileLang: {part: kernel object(s)} for `case`; `ex` is the loaded example module
    def tl_compile(self, ex: Any, case: Case) -> dict[str, Any]:
        raise NotImplementedError

    # -- the inputs, {name: tensor}
    def inputs(self, case: Case, gen: Any) -> dict[str, Any]:
        raise NotImplementedError

    # -- {part: {output: expected tensor}}
    def expected(self, case: Case, x: dict[str, Any]) -> dict[str, dict[str, Any]]:
        raise NotImplementedError

    # -- {part: {output: (shape, torch dtype, "poison" | "zero")}}: the buffers a call writes
    def outputs(self, case: Case, x: dict[str, Any]) -> dict[str, dict[str, tuple]]:
        raise NotImplementedError

    # -- one tilec call of `part` (mods: {build: tilec.runtime.Module})
    def tilec(self, mod: Any, case: Case, part: str, x: dict, o: dict) -> None:
        raise NotImplementedError

    # -- one TileLang call of `part`; returns the outputs it returned ({} when it wrote into `o`)
    def tilelang(self, k: Any, case: Case, part: str, x: dict, o: dict) -> dict:
        raise NotImplementedError

    # -- (relative error norm, elementwise bound relative to rms(ref) + |ref|) per output
    def tolerance(self, out: str, dtype: Any) -> tuple[float, float]:
        return default_tolerance(dtype)

    # -- what a call of `case` taking `ms` achieves, for the also-timed list ("" if nothing to say)
    def rates(self, case: Case, ms: float) -> str:
        return ""


def default_tolerance(dtype: Any) -> tuple[float, float]:
    name = str(dtype).removeprefix("torch.")
    if name.startswith("float8"):
        return 5e-2, 0.13  # one e4m3 step is 6-12% of the value
    return {
        "float16": (1e-2, 2e-2),
        "bfloat16": (2e-2, 4e-2),
        "float32": (1e-4, 1e-3),
        "int32": (0.0, 0.0),
        "bool": (0.0, 0.0),
    }[name]


def _torch():
    import torch

    return torch


def _dev() -> str:
    return os.environ.get("CORPUS_GPU_DEVICE", "cuda")


def randn(gen, *shape, dtype=None, scale=1.0):
    torch = _torch()
    x = torch.randn(*shape, generator=gen, device=_dev(), dtype=torch.float32) * scale
    return x.to(dtype or torch.float16)


def uniform(gen, *shape, lo=-1.0, hi=1.0, dtype=None):
    torch = _torch()
    x = torch.rand(*shape, generator=gen, device=_dev(), dtype=torch.float32) * (hi - lo) + lo
    return x.to(dtype or torch.float32)


def first(r):
    return r[0] if isinstance(r, (list, tuple)) else r


def as_list(r) -> list:
    return list(r) if isinstance(r, (list, tuple)) else [r]


def save_tilelang_sources(name: str, label: str, kernels: dict[str, Any]) -> None:
    """TileLang's generated CUDA for each kernel, to $OUT/tilelang-src/ (read beside tilec's .cu)."""
    out_dir = os.environ.get("OUT")
    if not out_dir:
        return
    os.makedirs(os.path.join(out_dir, "tilelang-src"), exist_ok=True)
    for part, k in kernels.items():
        get = getattr(k, "get_kernel_source", None)
        if get is None:
            continue
        try:
            text = get()
        except Exception:  # noqa: BLE001 -- a kernel without source is only not saved
            continue
        stem = "-".join(x for x in (name, label, part) if x)
        with open(os.path.join(out_dir, "tilelang-src", stem + ".cu"), "w") as f:
            f.write(text)


def tl_kernel(obj: Any) -> Any:
    """The JIT object under an @autotune wrapper (its tuner is bypassed: every config value is given)."""
    return getattr(obj, "jit_impl", obj)


def attention_ref(q, k, v, scale: float, causal: bool = False, mask=None, chunk: int = 8):
    """softmax(q k^T * scale) v in float32, BHSD, in chunks of heads (memory stays bounded).
    `mask` (broadcastable to B, H, Sq, Sk, True = visible) and `causal` (aligned to the end of k)."""
    torch = _torch()
    B, H, Sq, _ = q.shape
    Sk = k.shape[2]
    out = torch.empty(B, H, Sq, v.shape[-1], device=q.device, dtype=torch.float32)
    for b in range(B):
        for h0 in range(0, H, chunk):
            hs = slice(h0, min(H, h0 + chunk))
            s = torch.matmul(q[b, hs].float(), k[b, hs].float().transpose(-1, -2)) * scale
            if causal:
                tri = torch.ones(Sq, Sk, dtype=torch.bool, device=q.device).tril(Sk - Sq)
                s = s.masked_fill(~tri, float("-inf"))
            if mask is not None:
                s = s.masked_fill(~mask[b, hs], float("-inf"))
            out[b, hs] = torch.matmul(torch.softmax(s, dim=-1), v[b, hs].float())
    return out


# ---- GEMMs: A (M, K) x B (K, N), fp16 -------------------------------------------------------------


class Gemm(Program):
    kernels: tuple[str, ...] = ("matmul",)  # the tilec launcher of each part
    relu = False
    out_dtype = "float16"

    def inputs(self, case, gen):
        d = case.dims
        return {"A": randn(gen, d["M"], d["K"]), "B": randn(gen, d["K"], d["N"])}

    def expected(self, case, x):
        torch = _torch()
        c = x["A"].float() @ x["B"].float()
        if self.relu:
            c = torch.relu(c)
        return {p: {"C": c} for p in self.parts}

    def outputs(self, case, x):
        torch = _torch()
        return {
            p: {"C": ((case.dims["M"], case.dims["N"]), getattr(torch, self.out_dtype), "poison")} for p in self.parts
        }

    def tilec(self, mod, case, part, x, o):
        getattr(mod, self.kernels[self.parts.index(part)])(x["A"], x["B"], o["C"])

    def tilelang(self, k, case, part, x, o):
        return {"C": first(k[part](x["A"], x["B"]))}


GEMM_MAIN = {"M": 4096, "N": 4096, "K": 4096}
GEMM_RAGGED = {"M": 999, "N": 1000, "K": 1000}  # past every tile edge; rows still 16-byte aligned


class GemmPlain(Gemm):
    def tl_compile(self, ex, case):
        d = case.dims
        return {"": ex.matmul.compile(M=d["M"], N=d["N"], K=d["K"], block_M=128, block_N=128, block_K=32)}


class Quickstart(GemmPlain):
    relu = True


class GemmPersistent(Gemm):
    kernels = ("matmul_non_persistent", "matmul_persistent")

    def tl_compile(self, ex, case):
        d = case.dims
        cfg = dict(M=d["M"], N=d["N"], K=d["K"], block_M=128, block_N=256, block_K=64, threads=256, num_stages=3)
        return {
            "non_persistent": ex.matmul_non_persistent.compile(**cfg),
            "persistent": ex.matmul_persistent.compile(**cfg, use_persistent_primitive=False),
        }


class GemmSplitK(Gemm):
    out_dtype = "float32"

    def outputs(self, case, x):
        torch = _torch()
        return {"": {"C": ((case.dims["M"], case.dims["N"]), torch.float32, "zero")}}  # atomic adds into C

    def tl_compile(self, ex, case):
        d = case.dims
        return {"": ex.matmul.compile(M=d["M"], N=d["N"], K=d["K"], block_M=128, block_N=128, block_K=32, split_k=4)}

    def tilelang(self, k, case, part, x, o):
        k[""](x["A"], x["B"], o["C"])
        return {}


class Gemv(Program):
    """C = B @ A with A (K,) and B (N, K): the example's two naive kernels, one thread per row and
    the split-K one on a 2-D thread block meeting in shared memory through atomic adds."""

    kernels = {"naive": "naive_gemv", "splitk": "naive_splitk_gemv"}
    blocks = {"naive": (128, 128), "splitk": (32, 32)}  # (BLOCK_N, BLOCK_K), as the corpus params

    def inputs(self, case, gen):
        d = case.dims
        return {"A": randn(gen, d["K"]), "B": randn(gen, d["N"], d["K"])}

    def expected(self, case, x):
        c = x["B"].float() @ x["A"].float()
        return {p: {"C": c} for p in self.parts}

    def outputs(self, case, x):
        return {p: {"C": ((case.dims["N"],), _torch().float16, "poison")} for p in self.parts}

    def tl_compile(self, ex, case):
        d = case.dims
        return {
            p: getattr(ex, f).compile(N=d["N"], K=d["K"], BLOCK_N=self.blocks[p][0], BLOCK_K=self.blocks[p][1])
            for p, f in self.kernels.items()
        }

    def tilec(self, mod, case, part, x, o):
        getattr(mod, self.kernels[part])(x["A"], x["B"], o["C"])

    def tilelang(self, k, case, part, x, o):
        return {"C": first(k[part](x["A"], x["B"]))}


class GemmFp8(Program):
    """C = A B^T with e4m3 operands; C in e4m3 (gemm_fp8) or float32 (the 2xAcc one)."""

    out_fp8 = True

    def inputs(self, case, gen):
        torch = _torch()
        d = case.dims
        if self.out_fp8:  # N(0, 0.25): |C| stays far below e4m3's 448
            a, b = randn(gen, d["M"], d["K"], scale=0.5), randn(gen, d["N"], d["K"], scale=0.5)
        else:  # the example's inputs: uniform in (-100, 100)
            a, b = uniform(gen, d["M"], d["K"], lo=-100, hi=100), uniform(gen, d["N"], d["K"], lo=-100, hi=100)
        return {"A": a.to(torch.float8_e4m3fn), "B": b.to(torch.float8_e4m3fn)}

    def expected(self, case, x):
        torch = _torch()
        c = x["A"].double() @ x["B"].double().T
        if self.out_fp8:
            c = c.float().to(torch.float8_e4m3fn)
        return {"": {"C": c}}

    def outputs(self, case, x):
        torch = _torch()
        dt = torch.float8_e4m3fn if self.out_fp8 else torch.float32
        return {"": {"C": ((case.dims["M"], case.dims["N"]), dt, "poison")}}

    def tolerance(self, out, dtype):
        return default_tolerance(dtype) if self.out_fp8 else (2e-3, 2e-2)  # fp8 tensor-core accumulation

    def tl_compile(self, ex, case):
        d = case.dims
        fp8 = ex.determine_fp8_type()
        return {"": ex.matmul.compile(M=d["M"], N=d["N"], K=d["K"], block_M=128, block_N=128, block_K=64, dtype=fp8)}

    def tilec(self, mod, case, part, x, o):
        mod.matmul(x["A"], x["B"], o["C"])

    def tilelang(self, k, case, part, x, o):
        return {"C": first(k[""](x["A"], x["B"]))}


class GemmFp8Acc(GemmFp8):
    out_fp8 = False


def pack_int4(t):
    """int8 values in [-8, 7], (..., K) -> the packed (..., K / 2) int8 bytes: element 2b in the low
    nibble of byte b, 2b + 1 in the high one (TileLang's pack_int4, the layout tilec's int4 reads)."""
    w = t.to(_torch().int16)
    return ((w[..., 0::2] & 0x0F) | ((w[..., 1::2] & 0x0F) << 4)).to(_torch().int8).contiguous()


class GemmInt4(Program):
    """C = A B^T with int4 operands (int32 out): both passed packed, two values a byte."""

    def inputs(self, case, gen):
        torch = _torch()
        d = case.dims
        a = torch.randint(-8, 8, (d["M"], d["K"]), generator=gen, device=_dev(), dtype=torch.int8)
        b = torch.randint(-8, 8, (d["N"], d["K"]), generator=gen, device=_dev(), dtype=torch.int8)
        return {"A_logical": a, "B_logical": b, "A": pack_int4(a), "B": pack_int4(b)}

    def expected(self, case, x):
        torch = _torch()
        c = x["A_logical"].double() @ x["B_logical"].double().T  # exact (|C| < 2^53); CUDA has no int64 matmul
        return {"": {"C": c.to(torch.int32)}}

    def outputs(self, case, x):
        torch = _torch()
        return {"": {"C": ((case.dims["M"], case.dims["N"]), torch.int32, "poison")}}

    def tl_compile(self, ex, case):
        import tilelang

        d = case.dims
        func = ex.matmul_nt_int4(d["M"], d["N"], d["K"], 128, 128, 64, threads=128)
        return {"": tilelang.compile(func, out_idx=-1)}

    def tilec(self, mod, case, part, x, o):
        mod.matmul_nt_int4(x["A"], x["B"], o["C"])

    def tilelang(self, k, case, part, x, o):
        return {"C": first(k[""](x["A"], x["B"]))}


def streamk_schedule(m: int, n: int, k: int, total_sm: int = 108, bm: int = 16, bn: int = 128, bk: int = 32) -> dict:
    """The host-side stream-K schedule the example computes at import (and the .tile's params)."""
    programs = total_sm
    iters_per_tile = -(-k // bk)
    total_tiles = -(-m // bm) * -(-n // bn)
    streamk_tiles = total_tiles % programs
    if total_tiles - streamk_tiles > programs:
        streamk_tiles += programs
    blocking_tiles = total_tiles - streamk_tiles
    streamk_iters = streamk_tiles * iters_per_tile
    return {
        "total_sm": total_sm,
        "streamk_programs": programs,
        "iters_per_tile": iters_per_tile,
        "streamk_tiles": streamk_tiles,
        "streamk_full_tiles": streamk_iters // programs,
        "streamk_partial_tiles": streamk_iters % programs,
        "sm_patition_factor": max(blocking_tiles // total_sm, 1),
    }


class GemmStreamK(Program):
    def example_globals(self, case):
        d = case.dims
        return streamk_schedule(d["M"], d["N"], d["K"])

    def inputs(self, case, gen):
        d = case.dims
        return {"A": uniform(gen, d["M"], d["K"], dtype=None).half(), "B": uniform(gen, d["N"], d["K"]).half()}

    def expected(self, case, x):
        return {"": {"C": x["A"].float() @ x["B"].float().T}}

    def outputs(self, case, x):
        torch = _torch()
        return {"": {"C": ((case.dims["M"], case.dims["N"]), torch.float32, "zero")}}  # partial tiles: atomic adds

    def tl_compile(self, ex, case):
        d = case.dims
        T = ex.T
        sched = self.example_globals(case)
        return {
            "": ex.tl_matmul_streamk.compile(
                M=d["M"],
                N=d["N"],
                K=d["K"],
                streamk_tiles=sched["streamk_tiles"],
                block_M=16,
                block_N=128,
                block_K=32,
                trans_A=False,
                trans_B=True,
                dtypeAB=T.float16,
                dtypeC=T.float32,
                accum_dtype=T.float32,
                num_stages=2,
                threads=64,
            )
        }

    def tilec(self, mod, case, part, x, o):
        mod.tl_matmul_streamk(x["A"], x["B"], o["C"])

    def tilelang(self, k, case, part, x, o):
        k[""](x["A"], x["B"], o["C"])
        return {}


class BlocksparseGemm(Program):
    def inputs(self, case, gen):
        torch = _torch()
        d = case.dims
        shape = (d["M"] // 128, d["N"] // 128, d["K"] // 32)
        mask = torch.rand(shape, generator=gen, device=_dev()) > 0.5
        return {"A": randn(gen, d["M"], d["K"]), "B": randn(gen, d["K"], d["N"]), "BlockMask": mask}

    def expected(self, case, x):
        torch = _torch()
        a, b, mask = x["A"].float(), x["B"].float(), x["BlockMask"]
        M, N = a.shape[0], b.shape[1]
        nm, nn, nk = mask.shape
        c = torch.zeros(M, N, device=a.device)
        for kk in range(nk):
            sel = mask[:, :, kk].float()[:, None, :, None].expand(nm, 128, nn, 128).reshape(M, N)
            c += (a[:, kk * 32 : (kk + 1) * 32] @ b[kk * 32 : (kk + 1) * 32]) * sel
        return {"": {"C": c}}

    def outputs(self, case, x):
        torch = _torch()
        return {"": {"C": ((case.dims["M"], case.dims["N"]), torch.float16, "poison")}}

    def tl_compile(self, ex, case):
        d = case.dims
        fn = tl_kernel(ex.blocksparse_matmul)
        cfg = dict(block_M=128, block_N=128, block_K=32, num_stages=2, thread_num=128, enable_rasteration=True)
        return {"": fn.compile(M=d["M"], N=d["N"], K=d["K"], **cfg)}

    def tilec(self, mod, case, part, x, o):
        mod.blocksparse_matmul(x["A"], x["B"], x["BlockMask"], o["C"])

    def tilelang(self, k, case, part, x, o):
        return {"C": first(k[""](x["A"], x["B"], x["BlockMask"]))}


# ---- element-wise, normalization, softmax, top-k, cast ---------------------------------------------


class ElementwiseAdd(Program):
    def inputs(self, case, gen):
        torch = _torch()
        d = case.dims
        return {
            "A": randn(gen, d["M"], d["N"], dtype=torch.float32),
            "B": randn(gen, d["M"], d["N"], dtype=torch.float32),
        }

    def expected(self, case, x):
        return {"": {"C": x["A"] + x["B"]}}

    def outputs(self, case, x):
        torch = _torch()
        return {"": {"C": ((case.dims["M"], case.dims["N"]), torch.float32, "poison")}}

    def tl_compile(self, ex, case):
        d, T = case.dims, ex.T
        cfg = dict(block_M=32, block_N=32, threads=128, in_dtype=T.float32, out_dtype=T.float32)
        return {"": ex.elementwise_add.compile(M=d["M"], N=d["N"], **cfg)}

    def tilec(self, mod, case, part, x, o):
        mod.elementwise_add(x["A"], x["B"], o["C"])

    def tilelang(self, k, case, part, x, o):
        return {"C": first(k[""](x["A"], x["B"]))}


class OnlineSoftmax(Program):
    def example_globals(self, case):
        return {"M": case.dims["M"], "N": case.dims["N"]}  # the example's kernel reads module globals M, N

    def inputs(self, case, gen):
        return {"X": randn(gen, case.dims["M"], case.dims["N"])}

    def expected(self, case, x):
        return {"": {"Y": _torch().softmax(x["X"].float(), dim=1)}}

    def outputs(self, case, x):
        return {"": {"Y": (tuple(x["X"].shape), _torch().float16, "poison")}}

    def tl_compile(self, ex, case):
        return {"": ex.softmax_kernel.compile()}

    def tilec(self, mod, case, part, x, o):
        mod.softmax_kernel(x["X"], o["Y"])

    def tilelang(self, k, case, part, x, o):
        return {"Y": first(k[""](x["X"]))}


class RmsNorm(Program):
    def inputs(self, case, gen):
        return {"A": randn(gen, case.dims["M"], case.dims["N"], dtype=_torch().float32)}

    def expected(self, case, x):
        a = x["A"].double()
        b = a * _torch().rsqrt(a.pow(2).mean(-1, keepdim=True) + 1e-12)
        return {p: {"B": b} for p in self.parts}

    def outputs(self, case, x):
        return {p: {"B": (tuple(x["A"].shape), _torch().float32, "poison")} for p in self.parts}

    def tl_compile(self, ex, case):
        d = case.dims
        return {
            "splitk": ex.rms_norm_splitk.compile(M=d["M"], N=d["N"], blk_m=1, blk_k=512),
            "oneshot": ex.rms_norm.compile(M=d["M"], N=d["N"], blk_m=1),
        }

    def tilec(self, mod, case, part, x, o):
        (mod.rms_norm_splitk if part == "splitk" else mod.rms_norm)(x["A"], o["B"])

    def tilelang(self, k, case, part, x, o):
        return {"B": first(k[part](x["A"]))}


class LayerNorm(Program):
    def inputs(self, case, gen):
        torch = _torch()
        N, D = case.dims["N"], case.dims["D"]
        bf = torch.bfloat16
        x = randn(gen, N, D, dtype=bf)
        xf = x.float()
        mean = xf.mean(1)
        rstd = torch.rsqrt((xf * xf).mean(1) - mean * mean + 1e-5)
        return {
            "X": x,
            "gamma": randn(gen, D, dtype=bf),
            "beta": randn(gen, D, dtype=bf),
            "DY": randn(gen, N, D, dtype=bf),
            "Mean": mean.contiguous(),  # the backward's saved statistics, the same for both compilers
            "Rstd": rstd.contiguous(),
        }

    def expected(self, case, x):
        xd, g, b, dy = x["X"].double(), x["gamma"].double(), x["beta"].double(), x["DY"].double()
        mean = xd.mean(1)
        rstd = 1.0 / ((xd * xd).mean(1) - mean * mean + 1e-5).sqrt()
        y = (xd - mean[:, None]) * rstd[:, None] * g + b
        m, r = x["Mean"].double()[:, None], x["Rstd"].double()[:, None]
        xhat = (xd - m) * r
        dxhat = dy * g
        c1 = (dxhat * xhat).mean(1, keepdim=True)
        c2 = dxhat.mean(1, keepdim=True)
        dx = r * (dxhat - c2 - xhat * c1)
        return {
            "fwd": {"Y": y, "Mean": mean, "Rstd": rstd},
            "bwd": {"DX": dx, "DGamma": (dy * xhat).sum(0), "DBeta": dy.sum(0)},
        }

    def outputs(self, case, x):
        torch = _torch()
        N, D = case.dims["N"], case.dims["D"]
        f32, bf = torch.float32, torch.bfloat16
        return {
            "fwd": {"Y": ((N, D), bf, "poison"), "Mean": ((N,), f32, "poison"), "Rstd": ((N,), f32, "poison")},
            "bwd": {"DX": ((N, D), bf, "poison"), "DGamma": ((D,), f32, "zero"), "DBeta": ((D,), f32, "zero")},
        }

    def tolerance(self, out, dtype):
        return (1e-3, 1e-3) if out in ("DGamma", "DBeta") else default_tolerance(dtype)

    def tl_compile(self, ex, case):
        N, D = case.dims["N"], case.dims["D"]
        return {
            "fwd": ex._layernorm_fwd(N, D, eps=1e-5, blk_m=1, threads=256, in_dtype="bfloat16", out_dtype="bfloat16"),
            "bwd": ex._layernorm_bwd(N, D, blk_m=32, threads=256, in_dtype="bfloat16"),
        }

    def tilec(self, mod, case, part, x, o):
        if part == "fwd":
            mod.layernorm_fwd(x["X"], x["gamma"], x["beta"], o["Y"], o["Mean"], o["Rstd"])
        else:
            mod.layernorm_bwd(x["DY"], x["X"], x["gamma"], x["Mean"], x["Rstd"], o["DX"], o["DGamma"], o["DBeta"])

    def tilelang(self, k, case, part, x, o):
        if part == "fwd":
            y, mean, rstd = as_list(k["fwd"](x["X"], x["gamma"], x["beta"]))
            return {"Y": y, "Mean": mean, "Rstd": rstd}
        dx = first(k["bwd"](x["DY"], x["X"], x["gamma"], x["Mean"], x["Rstd"], o["DGamma"], o["DBeta"]))
        return {"DX": dx}


class TopK(Program):
    def inputs(self, case, gen):
        torch = _torch()
        M, N = case.dims["M"], case.dims["N"]
        # distinct values in each row (a tie would make the index ambiguous), all in (0, 1)
        perm = torch.rand(M, N, generator=gen, device=_dev()).argsort(dim=1)
        return {"logits": ((perm.float() + 0.5) / N).contiguous()}

    def expected(self, case, x):
        gates, idx = x["logits"].topk(case.dims["topk"], dim=1)
        return {"": {"topk_gates": gates, "topk_indices": idx.int()}}

    def outputs(self, case, x):
        torch = _torch()
        M, t = case.dims["M"], case.dims["topk"]
        return {"": {"topk_gates": ((M, t), torch.float32, "poison"), "topk_indices": ((M, t), torch.int32, "poison")}}

    def tolerance(self, out, dtype):
        return 0.0, 0.0  # the same values, exactly

    def tl_compile(self, ex, case):
        d = case.dims
        return {"": tl_kernel(ex.tl_topk).compile(M=d["M"], N=d["N"], topk=d["topk"], blk_m=64, threads=128)}

    def tilec(self, mod, case, part, x, o):
        mod.tl_topk(x["logits"], o["topk_gates"], o["topk_indices"])

    def tilelang(self, k, case, part, x, o):
        g, i = as_list(k[""](x["logits"]))
        return {"topk_gates": g, "topk_indices": i}


class PerTokenCast(Program):
    def inputs(self, case, gen):
        return {"X": randn(gen, case.dims["M"], case.dims["N"], dtype=_torch().float32)}

    def expected(self, case, x):
        torch = _torch()
        X = x["X"]
        M, N = X.shape
        groups = -(-N // 128)
        padded = torch.nn.functional.pad(X, (0, groups * 128 - N)).view(M, groups, 128)
        amax = padded.abs().amax(dim=2).clamp(min=1e-4)
        s = amax / 448.0
        q = (padded / s[:, :, None]).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
        return {"": {"X_fp8": q.view(M, groups * 128)[:, :N].contiguous(), "X_amax": s}}

    def outputs(self, case, x):
        torch = _torch()
        M, N = case.dims["M"], case.dims["N"]
        return {
            "": {
                "X_fp8": ((M, N), torch.float8_e4m3fn, "poison"),
                "X_amax": ((M, -(-N // 128)), torch.float32, "poison"),
            }
        }

    def tolerance(self, out, dtype):
        return (1e-5, 1e-5) if out == "X_amax" else default_tolerance(dtype)

    def tl_compile(self, ex, case):
        return {"": ex.per_token_cast_to_fp8.compile(M=case.dims["M"], N=case.dims["N"], blk_m=8)}

    def tilec(self, mod, case, part, x, o):
        mod.per_token_cast_to_fp8(x["X"], o["X_fp8"], o["X_amax"])

    def tilelang(self, k, case, part, x, o):
        q, s = as_list(k[""](x["X"]))
        return {"X_fp8": q, "X_amax": s}


# ---- attention --------------------------------------------------------------------------------------


class Attention(Program):
    """Forward attention, fp16, one output `Output`; subclasses give layouts and the TileLang call."""

    layout = "bhsd"  # or "bshd"
    causal = False

    def shapes(self, case) -> tuple[tuple, tuple]:
        d = case.dims
        q = (d["batch"], d["heads"], d["seq_len"], d["dim"])
        kv = (d["batch"], d.get("heads_kv", d["heads"]), d.get("seq_kv", d["seq_len"]), d["dim"])
        if self.layout == "bshd":
            q, kv = (q[0], q[2], q[1], q[3]), (kv[0], kv[2], kv[1], kv[3])
        return q, kv

    def inputs(self, case, gen):
        q, kv = self.shapes(case)
        return {"Q": randn(gen, *q), "K": randn(gen, *kv), "V": randn(gen, *kv)}

    def bhsd(self, t):
        return t.transpose(1, 2) if self.layout == "bshd" else t

    def expected(self, case, x):
        q, k, v = (self.bhsd(x[n]) for n in "QKV")
        groups = q.shape[1] // k.shape[1]
        if groups > 1:
            k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
        causal = self.causal or bool(case.dims.get("causal"))
        o = attention_ref(q, k, v, case.dims["dim"] ** -0.5, causal=causal)
        return {"": {"Output": self.bhsd(o)}}

    def outputs(self, case, x):
        return {"": {"Output": (tuple(x["Q"].shape), _torch().float16, "poison")}}

    def tilec(self, mod, case, part, x, o):
        mod.flashattn(x["Q"], x["K"], x["V"], o["Output"])

    def tilelang(self, k, case, part, x, o):
        return {"Output": first(k[""](x["Q"], x["K"], x["V"]))}


class MhaFwdBhsd(Attention):
    def tl_compile(self, ex, case):
        d = case.dims
        fn = tl_kernel(ex.flashattn)
        cfg = dict(block_M=128, block_N=128, num_stages=2, threads=256)
        causal = bool(d.get("causal"))
        return {"": fn(d["batch"], d["heads"], d["seq_len"], d["seq_kv"], d["dim"], causal, **cfg)}


class MhaFwdBshd(Attention):
    layout = "bshd"

    def tl_compile(self, ex, case):
        d = case.dims
        fn = tl_kernel(ex.flashattn)
        cfg = dict(block_M=64, block_N=64, num_stages=1, threads=128)
        return {"": fn(d["batch"], d["heads"], d["seq_len"], d["dim"], False, **cfg)}


class GqaFwdBshd(Attention):
    layout = "bshd"

    def tl_compile(self, ex, case):
        d = case.dims
        fn = tl_kernel(ex.flashattn)
        cfg = dict(groups=d["heads"] // d["heads_kv"], block_M=64, block_N=64, num_stages=2, threads=128)
        return {"": fn(d["batch"], d["heads"], d["seq_len"], d["dim"], False, **cfg)}


class BlockSparseAttn(Attention):
    causal = True

    def inputs(self, case, gen):
        torch = _torch()
        x = super().inputs(case, gen)
        d = case.dims
        n = d["downsample_len"]
        mask = torch.rand(d["batch"], d["heads"], n, n, generator=gen, device=_dev()) > 0.5
        eye = torch.eye(n, dtype=torch.bool, device=_dev())
        mask = mask | eye  # every query block sees its own block: no row without keys
        mask[..., 0] = True
        x["BlockSparseMask"] = mask.tril().contiguous()
        return x

    def expected(self, case, x):
        blk = 64
        S = case.dims["seq_len"]
        full = x["BlockSparseMask"].repeat_interleave(blk, dim=2).repeat_interleave(blk, dim=3)[..., :S, :S]
        o = attention_ref(x["Q"], x["K"], x["V"], case.dims["dim"] ** -0.5, causal=True, mask=full)
        return {"": {"Output": o}}

    def tl_compile(self, ex, case):
        d = case.dims
        return {
            "": ex.blocksparse_flashattn(
                d["batch"], d["heads"], d["seq_len"], d["dim"], d["downsample_len"], is_causal=True
            )
        }

    def tilec(self, mod, case, part, x, o):
        mod.blocksparse_flashattn(x["Q"], x["K"], x["V"], x["BlockSparseMask"], o["Output"])

    def tilelang(self, k, case, part, x, o):
        return {"Output": first(k[""](x["Q"], x["K"], x["V"], x["BlockSparseMask"]))}


class MlaDecode(Program):
    def inputs(self, case, gen):
        d = case.dims
        B, H, S, D, P = d["batch"], d["heads"], d["seqlen_kv"], d["dim"], d["pe_dim"]
        return {
            "Q": randn(gen, B, H, D),
            "Q_pe": randn(gen, B, H, P),
            "KV": randn(gen, B, S, 1, D),
            "K_pe": randn(gen, B, S, 1, P),
        }

    def expected(self, case, x):
        torch = _torch()
        d = case.dims
        q = torch.cat([x["Q"], x["Q_pe"]], dim=-1).float()  # B, H, D + P
        key = torch.cat([x["KV"], x["K_pe"]], dim=-1)[:, :, 0].float()  # B, S, D + P
        p = torch.softmax(q @ key.transpose(1, 2) * (d["dim"] + d["pe_dim"]) ** -0.5, dim=-1)
        return {"": {"Output": p @ x["KV"][:, :, 0].float()}}

    def outputs(self, case, x):
        return {"": {"Output": (tuple(x["Q"].shape), _torch().float16, "poison")}}

    def tl_compile(self, ex, case):
        d = case.dims
        scale = (d["dim"] + d["pe_dim"]) ** -0.5
        kern = ex.flashattn(d["batch"], d["heads"], 1, d["seqlen_kv"], d["dim"], d["pe_dim"], 64, 64, 1, scale)
        return {"": kern}

    def tilec(self, mod, case, part, x, o):
        mod.main_no_split(x["Q"], x["Q_pe"], x["KV"], x["K_pe"], o["Output"])

    def tilelang(self, k, case, part, x, o):
        return {"Output": first(k[""](x["Q"], x["Q_pe"], x["KV"], x["K_pe"]))}

    def rates(self, case, ms):
        """Bytes: Q and the KV cache read once, O written; flops: Q K^T over dim + pe_dim and P V
        over dim, 2 per multiply-add. FlashMLA (H800) reports 3000 GB/s memory-bound and 660
        TFLOP/s compute-bound."""
        d = case.dims
        B, H, S, D, P = d["batch"], d["heads"], d["seqlen_kv"], d["dim"], d["pe_dim"]
        nbytes = 2 * (B * H * (D + P) + B * S * (D + P) + B * H * D)
        flops = 2 * B * H * S * (D + P + D)
        return f"{nbytes / ms / 1e6:.0f} GB/s, {flops / ms / 1e9:.0f} TFLOP/s"


LOG2E = 1.44269504


class MhaBwd(Program):
    """The example's autograd function, kernel by kernel: fwd (O, lse), prep (Delta), bwd (dQ
    accumulated in float32, dK, dV) followed by post (dQ to float16). Each part runs on the
    reference's values of its inputs, so a part is checked on its own."""

    def inputs(self, case, gen):
        torch = _torch()
        d = case.dims
        shape = (d["batch"], d["heads"], d["seq_len"], d["dim"])
        q, k, v, do = (randn(gen, *shape) for _ in range(4))
        qf, kf, vf = (t.float().requires_grad_() for t in (q, k, v))
        scale = d["dim"] ** -0.5
        s = torch.matmul(qf, kf.transpose(-1, -2)) * scale
        o = torch.matmul(torch.softmax(s, dim=-1), vf)
        o.backward(do.float())
        o16 = o.detach().half()
        ref = {
            "O": o.detach(),
            "lse": (torch.logsumexp(s.detach(), dim=-1) * LOG2E).contiguous(),
            "dQ": qf.grad,
            "dK": kf.grad,
            "dV": vf.grad,
        }
        delta = (o16.float() * do.float()).sum(-1).contiguous()
        self._ref = {**ref, "Delta": delta}
        return {"Q": q, "K": k, "V": v, "dO": do, "O16": o16, "lse": ref["lse"], "Delta": delta}

    def expected(self, case, x):
        r = self._ref
        return {
            "fwd": {"Output": r["O"], "lse": r["lse"]},
            "prep": {"Delta": r["Delta"]},
            "bwd": {"dQ_out": r["dQ"], "dK": r["dK"], "dV": r["dV"]},
        }

    def outputs(self, case, x):
        torch = _torch()
        shape = tuple(x["Q"].shape)
        f16, f32 = torch.float16, torch.float32
        return {
            "fwd": {"Output": (shape, f16, "poison"), "lse": (shape[:3], f32, "poison")},
            "prep": {"Delta": (shape[:3], f32, "poison")},
            "bwd": {
                "dQ": (shape, f32, "zero"),  # atomic adds
                "dQ_out": (shape, f16, "poison"),
                "dK": (shape, f16, "poison"),
                "dV": (shape, f16, "poison"),
            },
        }

    def tolerance(self, out, dtype):
        if out in ("dQ_out", "dK", "dV"):
            return 2e-2, 5e-2
        return default_tolerance(dtype)

    def tl_compile(self, ex, case):
        d = case.dims
        B, H, S, D = d["batch"], d["heads"], d["seq_len"], d["dim"]
        return {
            "fwd": ex.flashattn_fwd(B, H, S, D, False, 64, 64),
            "prep": ex.flashattn_bwd_preprocess(B, H, S, D),
            "bwd": (ex.flashattn_bwd(B, H, S, D, False, 64, 64), ex.flashattn_bwd_postprocess(B, H, S, D)),
        }

    def tilec(self, mod, case, part, x, o):
        if part == "fwd":
            mod.flash_fwd(x["Q"], x["K"], x["V"], o["Output"], o["lse"])
        elif part == "prep":
            mod.flash_bwd_prep(x["O16"], x["dO"], o["Delta"])
        else:
            mod.flash_bwd(x["Q"], x["K"], x["V"], x["dO"], x["lse"], x["Delta"], o["dQ"], o["dK"], o["dV"])
            mod.flash_bwd_post(o["dQ"], o["dQ_out"])

    def tilelang(self, k, case, part, x, o):
        if part == "fwd":
            out, lse = as_list(k["fwd"](x["Q"], x["K"], x["V"]))
            return {"Output": out, "lse": lse}
        if part == "prep":
            return {"Delta": first(k["prep"](x["O16"], x["dO"]))}
        bwd, post = k["bwd"]
        bwd(x["Q"], x["K"], x["V"], x["dO"], x["lse"], x["Delta"], o["dQ"], o["dK"], o["dV"])
        return {"dQ_out": first(post(o["dQ"]))}  # dQ itself is in TileLang's own layout: not compared


# ---- linear attention ---------------------------------------------------------------------------


class LinearAttn(Program):
    def inputs(self, case, gen):
        d = case.dims
        shape = (d["B"], d["S"], d["H"], d["DK"])
        q, k = randn(gen, *shape).float(), randn(gen, *shape).float()
        # the example l2-normalizes q and k ("qk norm is necessary for linear attn")
        q, k = (t / t.norm(dim=-1, keepdim=True) for t in (q, k))
        return {"Q": q.half(), "K": k.half(), "V": randn(gen, d["B"], d["S"], d["H"], d["DV"])}

    def expected(self, case, x):
        torch = _torch()
        scale = case.dims["DK"] ** -0.5
        q, k, v = (x[n].float().transpose(1, 2) for n in "QKV")  # B, H, S, D
        S = q.shape[2]
        tri = torch.ones(S, S, dtype=torch.bool, device=q.device).tril()
        o = torch.empty_like(v)
        for b in range(q.shape[0]):
            s = (q[b] * scale) @ k[b].transpose(-1, -2)
            o[b] = s.masked_fill(~tri, 0.0) @ v[b]
        state = k.transpose(-1, -2) @ v  # B, H, DK, DV
        return {"": {"O": o.transpose(1, 2), "final_state": state}}

    def outputs(self, case, x):
        torch = _torch()
        d = case.dims
        return {
            "": {
                "O": ((d["B"], d["S"], d["H"], d["DV"]), torch.float32, "zero"),  # atomic adds
                "final_state": ((d["B"], d["H"], d["DK"], d["DV"]), torch.float32, "poison"),
            }
        }

    def tolerance(self, out, dtype):
        return 2e-2, 5e-2  # q * scale, the scores and the state go through float16 tiles

    def tl_compile(self, ex, case):
        d = case.dims
        return {"": ex.tl_fused_chunk_fwd_kernel(d["B"], d["S"], d["H"], d["DK"], d["DV"])}

    def tilec(self, mod, case, part, x, o):
        mod.fused_chunk_linear_attn_fwd(x["Q"], x["K"], x["V"], o["O"], o["final_state"])

    def tilelang(self, k, case, part, x, o):
        return {"final_state": first(k[""](x["Q"], x["K"], x["V"], o["O"]))}


class Retention(Program):
    def inputs(self, case, gen):
        d = case.dims
        qk = (d["B"], d["S"], d["H"], d["DK"])
        return {"Q": randn(gen, *qk), "K": randn(gen, *qk), "V": randn(gen, d["B"], d["S"], d["H"], d["DV"])}

    def expected(self, case, x):
        torch = _torch()
        d = case.dims
        H, S, bk = d["H"], d["S"], 64
        scale = d["DK"] ** -0.5
        q, k, v = (x[n].float().transpose(1, 2) for n in "QKV")  # B, H, S, D
        q = (q * scale).half().float()  # the kernel keeps q * scale in a float16 tile
        heads = torch.arange(H, device=q.device, dtype=torch.float32)
        log_decay = torch.log2(1 - torch.exp2(-5.0 - heads))  # H
        t = torch.arange(S, device=q.device, dtype=torch.float32)
        dist = t[:, None] - t[None, :]
        decay = torch.exp2(dist[None] * log_decay[:, None, None]).masked_fill(dist[None] < 0, 0.0)  # H, S, S
        nk = d["DK"] // bk
        o = torch.empty(nk, *x["V"].shape, device=q.device)
        for i in range(nk):
            ks = slice(i * bk, (i + 1) * bk)
            for b in range(q.shape[0]):
                s = q[b, :, :, ks] @ k[b, :, :, ks].transpose(-1, -2) * decay
                o[i, b] = (s @ v[b]).transpose(0, 1)
        return {"": {"O": o}}

    def outputs(self, case, x):
        torch = _torch()
        d = case.dims
        return {"": {"O": ((d["DK"] // 64, d["B"], d["S"], d["H"], d["DV"]), torch.float16, "poison")}}

    def tolerance(self, out, dtype):
        return 2e-2, 5e-2  # scores, state and decayed values go through float16 tiles

    def tl_compile(self, ex, case):
        d = case.dims
        return {"": ex.chunk_retention_fwd_kernel(d["B"], d["S"], d["H"], d["DK"], d["DV"])}

    def tilec(self, mod, case, part, x, o):
        mod.chunk_retention_fwd(x["Q"], x["K"], x["V"], o["O"])

    def tilelang(self, k, case, part, x, o):
        return {"O": first(k[""](x["Q"], x["K"], x["V"]))}


# ---- the table: one spec per corpus program that tilec compiles ----------------------------------

_ATTN_RAGGED = "sequence length 1000: past the last 64/128-row tile, keys masked by the kernel"

SPECS: dict[str, Program] = {
    p.name: p
    for p in [
        BlockSparseAttn(
            name="block_sparse_attn",
            source="examples/blocksparse_attention/example_tilelang_block_sparse_attn.py",
            builds={"": {"batch": "4", "heads": "32", "seq_len": "2048", "downsample_len": "32"}},
            cases=(Case("main", dict(batch=4, heads=32, seq_len=2048, dim=64, downsample_len=32), timed=True),),
            how="blocksparse_flashattn(batch, heads, seq_len, dim, downsample_len, is_causal=True)(q, k, v, mask)",
            no_ragged="the block mask has one entry per 64-row block: the example builds it for whole blocks",
        ),
        BlocksparseGemm(
            name="blocksparse_gemm",
            source="examples/blocksparse_gemm/example_blocksparse_gemm.py",
            cases=(Case("main", dict(M=4096, N=4096, K=4096), timed=True),),
            how="blocksparse_matmul.jit_impl.compile(M, N, K, 128, 128, 32, 2 stages, 128 threads, "
            "rasterization on)(a, b, mask): the autotuner bypassed",
            no_ragged="the mask's shape is M // block_M, ...: whole tiles only",
        ),
        ElementwiseAdd(
            name="elementwise_add",
            source="examples/elementwise/example_elementwise_add.py",
            cases=(Case("main", dict(M=8192, N=8192), timed=True), Case("ragged", dict(M=999, N=1000))),
            how="elementwise_add.compile(M, N, block_M=32, block_N=32, threads=128, float32)(a, b)",
        ),
        GemmPlain(
            name="gemm",
            source="examples/gemm/example_gemm.py",
            cases=(Case("main", GEMM_MAIN, timed=True), Case("ragged", GEMM_RAGGED)),
            how="matmul.compile(M, N, K, block_M=128, block_N=128, block_K=32)(a, b)",
        ),
        GemmFp8(
            name="gemm_fp8",
            source="examples/gemm_fp8/example_tilelang_gemm_fp8.py",
            cases=(Case("main", GEMM_MAIN, timed=True), Case("ragged", dict(M=999, N=1008, K=1040))),
            how="matmul.compile(M, N, K, 128, 128, 64, dtype=determine_fp8_type())(a, b), e4m3 in and out",
        ),
        GemmFp8Acc(
            name="gemm_fp8_2xacc",
            source="examples/gemm_fp8/example_tilelang_gemm_fp8_2xAcc.py",
            cases=(
                Case("main", dict(M=2048, N=2048, K=8192), timed=True),
                Case("ragged", dict(M=999, N=1000, K=1040)),  # 17 k steps: the odd tail promotion
            ),
            how="matmul.compile(M, N, K, 128, 128, 64, dtype=determine_fp8_type())(a, b), float32 out",
        ),
        GemmInt4(
            name="gemm_int4",
            source="examples/gemm_int4/example_tilelang_gemm_int4.py",
            cases=(
                Case("main", GEMM_MAIN, timed=True),
                Case("ragged", dict(M=999, N=1000, K=1000)),  # K even (packed), not a multiple of 64
            ),
            how="tilelang.compile(matmul_nt_int4(M, N, K, 128, 128, 64, threads=128), out_idx=-1)(A, B), "
            "A and B packed by the example's pack_int4",
        ),
        GemmPersistent(
            name="gemm_persistent",
            source="examples/gemm/example_gemm_persistent.py",
            parts=("non_persistent", "persistent"),
            cases=(Case("main", GEMM_MAIN, timed=True), Case("ragged", GEMM_RAGGED)),
            how="matmul_non_persistent.compile(M, N, K, 128, 256, 64, threads=256, num_stages=3)(a, b) and "
            "matmul_persistent.compile(..., use_persistent_primitive=False)(a, b): the branch the corpus "
            "re-expresses (main() runs T.Persistent); sm_num = driver.get_num_sms() (132 on the H200, "
            "the .tile's param)",
        ),
        Gemv(
            name="gemv",
            source="examples/gemv/example_gemv.py",
            parts=("naive", "splitk"),
            cases=(Case("main", dict(N=1024, K=1024), timed=True),),
            how="naive_gemv.compile(N, K, BLOCK_N=128, BLOCK_K=128)(a, b) and "
            "naive_splitk_gemv.compile(N, K, BLOCK_N=32, BLOCK_K=32)(a, b)",
            no_ragged="the example's loops read past K and N when they are not multiples of the blocks "
            "(it has no guards); N and K are the .tile's params",
        ),
        GemmSplitK(
            name="gemm_splitk",
            source="examples/gemm_splitk/example_tilelang_gemm_splitk.py",
            cases=(
                Case("main", GEMM_MAIN, timed=True),
                Case("ragged", dict(M=999, N=1000, K=1024)),  # K // split_k must be whole k tiles
            ),
            how="matmul.compile(M, N, K, 128, 128, 32, split_k=4)(a, b, c) into a zeroed float32 c",
        ),
        GemmSplitK(
            name="gemm_splitk_vectorize_atomicadd",
            source="examples/gemm_splitk/example_tilelang_gemm_splitk_vectorize_atomicadd.py",
            cases=(Case("main", GEMM_MAIN, timed=True), Case("ragged", dict(M=999, N=1000, K=1024))),
            how="matmul.compile(M, N, K, 128, 128, 32, split_k=4)(a, b, c) into a zeroed float32 c",
        ),
        GemmStreamK(
            name="gemm_streamk",
            source="examples/gemm_streamk/example_tilelang_gemm_streamk.py",
            builds={"": {"m": "1024", "n": "2048", "k": "2048"}},
            cases=(Case("main", dict(M=1024, N=2048, K=2048), timed=True),),
            how="the module's schedule globals recomputed for 1024 x 2048 x 2048 on 108 programs (as the "
            "example does at import for 256 x 1024 x 512), then tl_matmul_streamk.compile(M, N, K, "
            "streamk_tiles, 16, 128, 32, trans_B=True, fp16/fp32/fp32, 2 stages, 64 threads)(a, b, c)",
            no_ragged="the stream-K schedule is computed on the host for one problem size",
        ),
        GqaFwdBshd(
            name="gqa_fwd_bshd",
            source="examples/flash_attention/example_gqa_fwd_bshd.py",
            builds={"": {}, "ragged": {"seq_len": "1000"}},
            cases=(
                Case("main", dict(batch=1, heads=64, heads_kv=4, seq_len=4096, dim=128), timed=True),
                Case("ragged", dict(batch=1, heads=64, heads_kv=4, seq_len=1000, dim=128), build="ragged"),
            ),
            how="flashattn.jit_impl(1, 64, S, 128, False, groups=16, block_M=64, block_N=64, num_stages=2, "
            "threads=128)(q, k, v): main()'s untuned config, the autotuner bypassed",
        ),
        LayerNorm(
            name="layernorm",
            source="examples/norm/layernorm.py",
            builds={"": {"N": "8192"}},
            parts=("fwd", "bwd"),
            cases=(Case("main", dict(N=8192, D=8192), timed=True),),
            how="_layernorm_fwd(N, D, eps=1e-5, blk_m=1, threads=256, bf16)(x, g, b) -> y, mean, rstd; "
            "_layernorm_bwd(N, D, blk_m=32, threads=256, bf16)(dy, x, g, mean, rstd, dgamma, dbeta) -> dx",
            no_ragged="the backward asserts N % 32 == 0 (and tilec's N, D are params)",
        ),
        LinearAttn(
            name="linear_attn_fwd",
            source="examples/linear_attention/example_linear_attn_fwd.py",
            stubs=("fla.ops.linear_attn", "fla.modules.l2norm", "einops"),
            cases=(Case("main", dict(B=8, S=1024, H=32, DK=128, DV=128), timed=True),),
            how="tl_fused_chunk_fwd_kernel(B, S, H, DK, DV)(q, k, v, o) -> final_state, o zeroed "
            "(fla and einops, imported for its comparison with FLA, stubbed)",
            no_ragged="the example asserts S % 64 == 0",
        ),
        MhaBwd(
            name="mha_bwd_bhsd",
            source="examples/flash_attention/example_mha_bwd_bhsd.py",
            parts=("fwd", "prep", "bwd"),
            cases=(Case("main", dict(batch=8, heads=32, seq_len=1024, dim=64), timed=True),),
            how="flashattn_fwd(B, H, S, D, False, 64, 64)(q, k, v) -> o, lse; "
            "flashattn_bwd_preprocess(B, H, S, D)(o, do) -> delta; flashattn_bwd(B, H, S, D, False, 64, 64)"
            "(q, k, v, do, lse, delta, dq, dk, dv) then flashattn_bwd_postprocess(B, H, S, D)(dq) -> dq",
            no_ragged="the backward's dQ atomic adds and lse copies cover whole 64-row blocks",
        ),
        MhaFwdBhsd(
            name="mha_fwd_bhsd",
            source="examples/flash_attention/example_mha_fwd_bhsd.py",
            builds={
                "": {"batch": "4", "heads": "32", "seq_q": "2048", "seq_kv": "2048"},
                "ragged": {"batch": "1", "heads": "4", "seq_q": "1000", "seq_kv": "1000"},
                "causal": {"batch": "4", "heads": "32", "seq_q": "2048", "seq_kv": "2048", "is_causal": "True"},
                "ragged-causal": {"batch": "1", "heads": "4", "seq_q": "1000", "seq_kv": "1000", "is_causal": "True"},
            },
            cases=(
                Case("main", dict(batch=4, heads=32, seq_len=2048, seq_kv=2048, dim=64), timed=True),
                Case("ragged", dict(batch=1, heads=4, seq_len=1000, seq_kv=1000, dim=64), build="ragged"),
                Case(
                    "causal",
                    dict(batch=4, heads=32, seq_len=2048, seq_kv=2048, dim=64, causal=1),
                    "causal",
                    also_timed=True,
                ),
                Case(
                    "ragged-causal",
                    dict(batch=1, heads=4, seq_len=1000, seq_kv=1000, dim=64, causal=1),
                    "ragged-causal",
                ),
            ),
            how="flashattn.jit_impl(B, H, Sq, Skv, 64, is_causal, block_M=128, block_N=128, num_stages=2, "
            "threads=256)(q, k, v): the config get_configs() returns, the autotuner bypassed; the causal "
            "case (also timed) is the same call with is_causal=True",
        ),
        MhaFwdBshd(
            name="mha_fwd_bshd",
            source="examples/flash_attention/example_mha_fwd_bshd.py",
            builds={"": {"batch": "2", "seq_len": "2048"}, "ragged": {"batch": "1", "heads": "4", "seq_len": "1000"}},
            cases=(
                Case("main", dict(batch=2, heads=32, seq_len=2048, dim=128), timed=True),
                Case("ragged", dict(batch=1, heads=4, seq_len=1000, dim=128), build="ragged"),
            ),
            how="flashattn.jit_impl(B, H, S, 128, False, block_M=64, block_N=64, num_stages=1, threads=128)"
            "(q, k, v): the config get_configs() returns, the autotuner bypassed",
        ),
        MlaDecode(
            name="mla_decode",
            source="examples/deepseek_mla/example_mla_decode.py",
            stubs=("einops",),
            builds={"": {"batch": "16"}, "b64": {"batch": "64"}, "b132": {"batch": "132", "seqlen_kv": "4096"}},
            cases=(
                Case("main", dict(batch=16, heads=128, seqlen_kv=8192, dim=512, pe_dim=64), timed=True),
                # issue 12's decode shapes (DeepSeek-V3: batch 64-132, 128 heads, KV 4096-8192)
                Case("b64", dict(batch=64, heads=128, seqlen_kv=8192, dim=512, pe_dim=64), "b64", also_timed=True),
                Case("b132", dict(batch=132, heads=128, seqlen_kv=4096, dim=512, pe_dim=64), "b132", also_timed=True),
            ),
            how="flashattn(16, 128, 1, 8192, 512, 64, 64, 64, num_split=1, softmax_scale)(q, q_pe, kv, k_pe): "
            "main_no_split (einops, used by its reference, stubbed)",
            no_ragged="the kernel does not mask keys past seqlen_kv",
        ),
        OnlineSoftmax(
            name="online_softmax",
            source="examples/online_softmax/online_softmax.py",
            load="defs",
            cases=(Case("main", dict(M=8192, N=8192), timed=True), Case("ragged", dict(M=1001, N=16384))),
            how="the module's defs only (its top level compiles and benchmarks 8192 x 8192), globals M, N "
            "set per size, then softmax_kernel.compile()(x)",
        ),
        PerTokenCast(
            name="per_token_cast_to_fp8",
            source="examples/cast/example_per_token_cast_to_fp8.py",
            cases=(Case("main", dict(M=8192, N=8192), timed=True), Case("ragged", dict(M=999, N=1008))),
            how="per_token_cast_to_fp8.compile(M, N, blk_m=8)(x) -> x_fp8, x_amax",
        ),
        Quickstart(
            name="quickstart",
            source="examples/quickstart.py",
            load="defs",
            cases=(Case("main", GEMM_MAIN, timed=True), Case("ragged", GEMM_RAGGED)),
            how="the module's defs only (its top level compiles and runs 1024^3), then "
            "matmul.compile(M, N, K, 128, 128, 32)(a, b)",
        ),
        Retention(
            name="retention_fwd",
            source="examples/linear_attention/example_retention_fwd.py",
            builds={"": {"B": "4", "S": "2048"}},
            cases=(Case("main", dict(B=4, S=2048, H=32, DK=128, DV=128), timed=True),),
            how="chunk_retention_fwd_kernel(B, S, H, DK, DV)(q, k, v) -> o (one partial output per DK block)",
            no_ragged="the example asserts S % 64 == 0",
        ),
        RmsNorm(
            name="rms_norm",
            source="examples/norm/rms_norm.py",
            parts=("splitk", "oneshot"),
            cases=(Case("main", dict(M=8192, N=8192), timed=True), Case("ragged", dict(M=1001, N=8192))),
            how="rms_norm_splitk.compile(M, N, blk_m=1, blk_k=512)(a) and rms_norm.compile(M, N, blk_m=1)(a)",
        ),
        TopK(
            name="topk",
            source="examples/topk/example_topk.py",
            cases=(
                Case("main", dict(M=131072, N=128, topk=6), timed=True),
                Case("ragged", dict(M=1000, N=128, topk=6)),
            ),
            how="tl_topk.jit_impl.compile(M, N=128, topk=6, blk_m=64, threads=128)(logits) -> gates, "
            "indices: main()'s blk_m, the autotuner bypassed",
        ),
    ]
}


def build_id(program: str, build: str) -> str:
    """The name of a tilec build in the prebuilt folder (its .cu is `<id>.cu`)."""
    return program if not build else f"{program}--{build}"


# ---------------------------------------------------------------- checking and timing


GUARD = 4096  # poisoned elements on each side of an output


def _poison(t) -> None:
    torch = _torch()
    if t.dtype.is_floating_point and t.element_size() == 1:
        t.view(torch.uint8).fill_(0x7F)  # e4m3fn NaN
    elif t.dtype.is_floating_point:
        t.fill_(float("nan"))
    elif t.dtype == torch.bool:
        t.fill_(True)
    else:
        t.fill_(-1515870811 if t.dtype == torch.int32 else -91)


class Buffer:
    """An output inside a larger allocation whose margins are poisoned: a write past either end shows."""

    def __init__(self, shape: tuple, dtype: Any, init: str):
        torch = _torch()
        n = math.prod(shape)
        self.n = n
        self.base = torch.empty(GUARD + n + GUARD, dtype=dtype, device=_dev())
        _poison(self.base)
        self.margin = self.base[:1].clone()
        self.tensor = self.base[GUARD : GUARD + n].view(shape)
        if init == "zero":
            self.tensor.zero_()

    def intact(self) -> bool:
        b = self.base.view(_int_view(self.base))
        m = self.margin.view(_int_view(self.margin))
        return bool((b[:GUARD] == m).all().item() and (b[GUARD + self.n :] == m).all().item())


def _int_view(t):
    torch = _torch()
    return {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]


def compare(got, want, rel_tol: float, elem_tol: float) -> dict:
    """{'ok', 'rel', 'bad', 'nonfinite', 'where'}: no NaN/inf where the reference is finite, relative
    error norm <= rel_tol, every element within elem_tol * (rms(want) + |want|)."""
    torch = _torch()
    if tuple(got.shape) != tuple(want.shape):
        return {"ok": False, "rel": math.inf, "bad": -1, "nonfinite": 0, "where": f"shape {tuple(got.shape)}"}
    g = got.detach().float().to(torch.float64)  # through float32: float8 converts to that
    w = want.detach().float().to(torch.float64) if want.dtype != torch.float64 else want.detach()
    finite = torch.isfinite(w)
    nonfinite = int((~torch.isfinite(g) & finite).sum().item())
    g = torch.where(finite, g, 0.0)
    w = torch.where(finite, w, 0.0)
    diff = (g - w).nan_to_num(nan=math.inf)
    wn = w.norm().item()
    rel = diff.norm().item() / wn if wn > 0 else diff.norm().item()
    rms = wn / math.sqrt(max(w.numel(), 1))
    bad_mask = ~(diff.abs() <= elem_tol * (rms + w.abs()))
    bad = int(bad_mask.sum().item())
    where = ""
    if bad:
        idx = int(bad_mask.flatten().nonzero()[0].item())
        coord = []
        for d in reversed(got.shape):
            coord.append(idx % d)
            idx //= d
        coord = tuple(reversed(coord))
        where = f"first bad at {coord}: got {g[coord].item():.5g}, want {w[coord].item():.5g}"
    ok = nonfinite == 0 and rel <= rel_tol and bad == 0
    return {"ok": ok, "rel": rel, "bad": bad, "nonfinite": nonfinite, "where": where, "numel": got.numel()}


def summary(res: dict) -> str:
    s = f"rel {res['rel']:.1e}"
    if res["nonfinite"]:
        s += f", {res['nonfinite']}/{res['numel']} NaN/unwritten"
    if res["bad"]:
        s += f", {res['bad']} bad ({res['where']})"
    if res.get("guards") is False:
        s += ", WROTE PAST THE OUTPUT (guard overwritten)"
    return s


def time_calls(fns: list, budget_s: float = 1.0) -> list[dict]:
    """Median ms per call of each zero-argument callable, measured in alternating rounds: each round
    times a batch of back-to-back calls of every fn between CUDA events (batches of about 1 ms, so
    that launch overhead stays hidden)."""
    torch = _torch()
    ests = []
    for f in fns:
        for _ in range(3):
            f()
        torch.cuda.synchronize()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(3):
            f()
        e.record()
        torch.cuda.synchronize()
        ests.append(max(s.elapsed_time(e) / 3, 1e-3))
    inner = [max(1, min(200, math.ceil(1.0 / est))) for est in ests]
    per_round = sum(est * n for est, n in zip(ests, inner))
    rounds = int(max(10, min(200, budget_s * 1000 / per_round)))
    events = [
        [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in fns]
        for _ in range(rounds)
    ]
    for r in range(rounds):
        for i, f in enumerate(fns):
            s, e = events[r][i]
            s.record()
            for _ in range(inner[i]):
                f()
            e.record()
    torch.cuda.synchronize()
    out = []
    for i in range(len(fns)):
        times = sorted(events[r][i][0].elapsed_time(events[r][i][1]) / inner[i] for r in range(rounds))
        out.append({"ms": statistics.median(times), "min": times[0], "rounds": rounds, "inner": inner[i]})
    return out


# ---------------------------------------------------------------- loading TileLang's example


def _stub_module(name: str) -> types.ModuleType:
    mod = types.ModuleType(name)
    mod.__path__ = []  # a package, so that submodules import

    def missing(attr: str):
        if attr.startswith("__"):
            raise AttributeError(attr)

        def absent(*a, **k):
            raise RuntimeError(f"{name}.{attr} is a stub on this machine (corpus_gpu.py)")

        return absent

    mod.__getattr__ = missing
    return mod


def install_stubs(names: tuple[str, ...]) -> list[str]:
    """Stub modules for those of `names` that do not import here; the names stubbed."""
    stubbed = []
    for name in names:
        try:
            importlib.import_module(name)
            continue
        except Exception:  # noqa: BLE001 - absent, or broken: either way the example only imports it
            pass
        parts = name.split(".")
        for i in range(1, len(parts) + 1):
            sub = ".".join(parts[:i])
            if sub not in sys.modules:
                sys.modules[sub] = _stub_module(sub)
                if i > 1:
                    setattr(sys.modules[".".join(parts[: i - 1])], parts[i - 1], sys.modules[sub])
        stubbed.append(name)
    return stubbed


def definitions_only(tree: ast.Module) -> ast.Module:
    """The module's imports, function and class definitions and literal assignments: what a jit
    function needs, without the top-level code that compiles and runs the example's demo."""

    def literal(node: ast.stmt) -> bool:
        if not isinstance(node, ast.Assign):
            return False
        try:
            ast.literal_eval(node.value)
            return True
        except ValueError:
            return False

    keep = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    tree.body = [n for n in tree.body if isinstance(n, keep) or literal(n)]
    return tree


_loaded = 0


def load_example(path: str, mode: str, stubs: tuple[str, ...], overrides: dict[str, Any]) -> types.ModuleType:
    """A fresh module of TileLang's example at `path` (a fresh one per case: a jit object caches its
    kernels by its arguments, not by the module globals the case sets)."""
    global _loaded
    _loaded += 1
    install_stubs(stubs)
    folder = os.path.dirname(os.path.abspath(path))
    if folder not in sys.path:
        sys.path.insert(0, folder)  # sibling imports
    with open(path, encoding="utf-8") as f:
        text = f.read()
    tree = ast.parse(text, filename=path)
    if mode == "defs":
        tree = definitions_only(tree)
    name = f"tilelang_example_{os.path.splitext(os.path.basename(path))[0]}_{_loaded}"
    mod = types.ModuleType(name)
    mod.__file__ = os.path.abspath(path)
    sys.modules[name] = mod  # inspect.getsource (TileLang's eager frontend) finds the file through it
    # dont_inherit: this file's `from __future__ import annotations` must not reach the example, whose
    # prim_func annotations (`Q: T.Tensor(q_shape, dtype)`) TileLang evaluates as objects, not strings
    code = compile(tree, mod.__file__, "exec", dont_inherit=True)
    exec(code, mod.__dict__)  # noqa: S102 - TileLang's own example
    for k, v in overrides.items():
        setattr(mod, k, v)
    return mod


# ---------------------------------------------------------------- worker


def emit(**rec) -> None:
    print(MARK + json.dumps(rec, default=str), flush=True)


@contextlib.contextmanager
def gpu_lock():
    import fcntl

    emit(event="lock-wait")
    with open(LOCK_PATH, "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        emit(event="lock-held")
        try:
            yield
        finally:
            _torch().cuda.synchronize()
            fcntl.flock(f, fcntl.LOCK_UN)
            emit(event="lock-free")


def _err(e: BaseException) -> str:
    return f"{type(e).__name__}: {str(e).strip()[:700]}"


def worker(name: str, folder: str, skip: set[str], budget: float) -> int:
    """Check and time one program; every step is reported as a JSON line (MARK) as it ends."""
    import torch

    from tilec import runtime

    prog = SPECS[name]
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    with open(os.path.join(folder, MANIFEST)) as f:
        manifest = json.load(f)["builds"]

    # tilec: the prebuilt files, built with nvcc (cached by tilec.runtime)
    mods: dict[str, Any] = {}
    tilec_error = "skipped: crashed in an earlier attempt" if "tilec" in skip else None
    if tilec_error is None:
        emit(event="phase", side="tilec", step="load")
        try:
            for b in sorted({c.build for c in prog.cases}):
                entry = manifest.get(build_id(name, b))
                if not entry or not entry.get("ok"):
                    raise RuntimeError(f"not prebuilt: {(entry or {}).get('error', 'no manifest entry')[:500]}")
                mods[b] = runtime.load(os.path.join(folder, entry["cu"]))
        except Exception as e:  # noqa: BLE001
            tilec_error = _err(e)
        emit(event="tilec-load", error=tilec_error)

    # TileLang: its example module, its kernels compiled at each case's configuration
    tl: dict[str, dict[str, Any]] = {}
    tl_error = "skipped: crashed in an earlier attempt" if "tilelang" in skip else None
    if tl_error is None:
        emit(event="phase", side="tilelang", step="compile")
        try:
            import tilelang

            src = os.path.join(folder, "tilelang", prog.source)
            for c in prog.cases:
                t0 = time.perf_counter()
                ex = load_example(src, prog.load, prog.stubs, prog.example_globals(c))
                tl[c.label] = prog.tl_compile(ex, c)
                emit(event="tilelang-compile", case=c.label, seconds=round(time.perf_counter() - t0, 2))
                save_tilelang_sources(prog.name, c.label, tl[c.label])
            emit(event="tilelang-version", version=getattr(tilelang, "__version__", "?"))
        except Exception as e:  # noqa: BLE001
            tl_error = _err(e)
            emit(event="tilelang-compile", error=tl_error)

    with gpu_lock():
        for c in prog.cases:
            gen = torch.Generator(device=_dev())
            gen.manual_seed(1234)
            emit(event="phase", side="torch", step=f"inputs {c.label}")
            x = prog.inputs(c, gen)
            want = prog.expected(c, x)
            specs = prog.outputs(c, x)
            torch.cuda.synchronize()
            calls: dict[str, dict[str, Any]] = {}
            for side in ("tilec", "tilelang"):
                if (side == "tilec" and tilec_error) or (side == "tilelang" and tl_error):
                    continue
                for part in prog.parts:
                    emit(event="phase", side=side, step=f"check {c.label} {part}")
                    rec = {"case": c.label, "part": part, "side": side}
                    try:
                        bufs = {k: Buffer(*v) for k, v in specs[part].items()}
                        o = {k: b.tensor for k, b in bufs.items()}
                        if side == "tilec":
                            prog.tilec(mods[c.build], c, part, x, o)
                            got = o
                        else:
                            got = {**o, **prog.tilelang(tl[c.label], c, part, x, o)}
                        torch.cuda.synchronize()
                        results = {}
                        for out, ref in want[part].items():
                            r = compare(got[out], ref, *prog.tolerance(out, got[out].dtype))
                            if out in bufs and got[out] is bufs[out].tensor:  # the call wrote into our buffer
                                r["guards"] = bufs[out].intact()
                                r["ok"] = r["ok"] and r["guards"]
                            results[out] = r
                        rec["ok"] = all(r["ok"] for r in results.values())
                        rec["detail"] = "; ".join(f"{k}: {summary(r)}" for k, r in results.items())
                        rec["outputs"] = {
                            k: {kk: r[kk] for kk in ("ok", "rel", "bad", "nonfinite")} for k, r in results.items()
                        }
                        calls.setdefault(side, {})[part] = (o, got)
                    except Exception as e:  # noqa: BLE001
                        rec["ok"] = False
                        rec["error"] = _err(e)
                        try:
                            torch.cuda.synchronize()
                            torch.zeros(1, device=_dev()).add_(1).item()
                        except Exception:  # noqa: BLE001 - a sticky CUDA error: this process is done
                            emit(event="check", **rec)
                            emit(event="sticky", side=side)
                            return 3
                    emit(event="check", **rec)
            # tilec against TileLang where both ran
            if "tilec" in calls and "tilelang" in calls:
                for part in prog.parts:
                    if part in calls["tilec"] and part in calls["tilelang"]:
                        a, b = calls["tilec"][part][1], calls["tilelang"][part][1]
                        rels = {}
                        for out in want[part]:
                            r = compare(a[out], b[out], math.inf, math.inf)
                            rels[out] = r["rel"]
                        emit(event="agree", case=c.label, part=part, rel=rels)
            if c.timed or c.also_timed:
                for part in prog.parts:
                    fns, sides = [], []
                    for side in ("tilec", "tilelang"):
                        if part not in calls.get(side, {}):
                            continue
                        o = calls[side][part][0]
                        if side == "tilec":
                            fns.append(lambda part=part, o=o, c=c, x=x: prog.tilec(mods[c.build], c, part, x, o))
                        else:
                            fns.append(lambda part=part, o=o, c=c, x=x: prog.tilelang(tl[c.label], c, part, x, o))
                        sides.append(side)
                    if not fns:
                        continue
                    emit(event="phase", side="+".join(sides), step=f"time {part}")
                    try:
                        for side, t in zip(sides, time_calls(fns, budget)):
                            emit(event="time", case=c.label, part=part, side=side, **t)
                    except Exception as e:  # noqa: BLE001
                        emit(event="time", part=part, side="+".join(sides), error=_err(e))
                        return 3
            x = want = calls = None  # free the case's tensors before the next one
            torch.cuda.empty_cache()
    return 0


# ---------------------------------------------------------------- parent


@dataclass
class Attempt:
    name: str
    skip: set[str]
    proc: Any = None
    lines: Any = None
    records: list = field(default_factory=list)
    tail: list = field(default_factory=list)
    side: str = ""  # the compiler whose step was running last
    started: float = 0.0
    waited: float = 0.0
    wait_since: float | None = None
    status: str = "running"


def start(a: Attempt, args) -> None:
    cmd = [sys.executable, "-u", os.path.abspath(__file__), "--dir", args.dir, "--worker", a.name]
    cmd += ["--budget", str(args.budget)] + (["--skip", ",".join(sorted(a.skip))] if a.skip else [])
    a.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
    a.lines = queue.Queue()

    def pump(p=a.proc, q=a.lines):
        for line in p.stdout:
            q.put(line)
        q.put(None)

    threading.Thread(target=pump, daemon=True).start()
    a.started = time.monotonic()


def drain(a: Attempt, log) -> bool:
    """Read what the worker printed; True once it has exited."""
    while True:
        try:
            line = a.lines.get_nowait()
        except queue.Empty:
            return False
        if line is None:
            a.proc.wait()
            return True
        log.write(f"[{a.name}] {line}")
        if not line.startswith(MARK):
            a.tail = (a.tail + [line])[-30:]
            continue
        rec = json.loads(line[len(MARK) :])
        ev = rec.get("event")
        if ev == "phase":
            a.side = rec["side"]
        elif ev == "lock-wait":
            a.wait_since = time.monotonic()
        elif ev == "lock-held" and a.wait_since is not None:
            a.waited += time.monotonic() - a.wait_since
            a.wait_since = None
        a.records.append(rec)
        if ev in ("check", "time", "tilec-load", "tilelang-compile", "agree"):
            shown = {k: v for k, v in rec.items() if k not in ("outputs",)}
            print(f"  [{a.name}] {json.dumps(shown, default=str)[:400]}", flush=True)


def run_all(names: list[str], args, log) -> dict[str, list[Attempt]]:
    attempts: dict[str, list[Attempt]] = {n: [] for n in names}
    todo = [Attempt(n, set()) for n in names]
    running: list[Attempt] = []
    end = time.monotonic() + args.total
    while todo or running:
        now = time.monotonic()
        while todo and len(running) < args.jobs and now < end - 30:
            a = todo.pop(0)
            start(a, args)
            attempts[a.name].append(a)
            running.append(a)
            print(f"start {a.name}" + (f" (without {', '.join(sorted(a.skip))})" if a.skip else ""), flush=True)
        if todo and now >= end - 30 and not running:
            break
        for a in list(running):
            done = drain(a, log)
            waiting = (now - a.wait_since) if a.wait_since is not None else 0.0
            used = now - a.started - a.waited - waiting
            if not done and (used > args.timeout or now > end):
                a.proc.kill()  # the worker this function started
                a.proc.wait()
                drain(a, log)
                a.status = "timeout" if used > args.timeout else "out of time"
                done = True
            elif done:
                rc = a.proc.returncode
                a.status = "ok" if rc == 0 else f"exit {rc}"
            if done:
                running.remove(a)
                print(f"end   {a.name}: {a.status} after {now - a.started:.0f}s ({a.waited:.0f}s waiting for the GPU)")
                if a.status != "ok" and a.side in ("tilec", "tilelang") and len(attempts[a.name]) < 2:
                    todo.append(Attempt(a.name, {a.side}))  # again, without the compiler that failed
        time.sleep(0.05)
    for a in todo:
        a.status = "skipped: out of time (--total)"
        attempts[a.name].append(a)
    return attempts


def summarize(name: str, attempts: list[Attempt]) -> dict:
    """The row of one program from its attempts' records."""
    prog = SPECS[name]
    row: dict[str, Any] = {"program": name, "attempts": [], "checks": [], "times": {}, "agree": [], "also": {}}
    timed_label = next(c.label for c in prog.cases if c.timed)
    errors = {"tilec": [], "tilelang": []}
    compile_s = 0.0
    for a in attempts:
        row["attempts"].append({"skip": sorted(a.skip), "status": a.status, "side": a.side})
        if a.status not in ("ok", "running"):
            tail = "".join(a.tail[-8:]).strip().replace("\n", " / ")[-500:]
            if a.side in errors:
                errors[a.side].append(f"{a.status} during its {a.side} step" + (f": {tail}" if tail else ""))
            elif a.status.startswith("skipped"):
                errors["tilec"].append(a.status)
            else:
                errors["tilec"].append(f"{a.status}: {tail}")
        for r in a.records:
            ev = r.get("event")
            if ev == "tilec-load" and r.get("error"):
                errors["tilec"].append(r["error"])
            elif ev == "tilelang-compile":
                if r.get("error"):
                    errors["tilelang"].append(r["error"])
                else:
                    compile_s += r.get("seconds", 0.0)
            elif ev == "tilelang-version":
                row["tilelang_version"] = r["version"]
            elif ev == "check":  # a later attempt's check of the same step replaces an earlier one
                row["checks"] = [
                    c for c in row["checks"] if (c["side"], c["case"], c["part"]) != (r["side"], r["case"], r["part"])
                ]
                row["checks"].append(r)
            elif ev == "time" and "ms" in r and r.get("case", timed_label) != timed_label:
                row["also"].setdefault(r["case"], {}).setdefault(r["side"], {})[r["part"]] = r
            elif ev == "time" and "ms" in r:
                row["times"].setdefault(r["side"], {})[r["part"]] = r
            elif ev == "time":
                errors["tilec"].append(f"timing: {r.get('error')}")
            elif ev == "agree":
                row["agree"].append(r)
    row["tilelang_compile_s"] = round(compile_s, 1)
    for side in ("tilec", "tilelang"):
        checks = [c for c in row["checks"] if c["side"] == side]
        n_expected = len(prog.cases) * len(prog.parts)
        ok = len(checks) == n_expected and all(c["ok"] for c in checks)
        row[f"{side}_ok"] = ok
        bad = [c for c in checks if not c["ok"]]
        msgs = list(dict.fromkeys(errors[side]))
        msgs += [f"{c['case']} {c['part']}".strip() + f": {c.get('error') or c.get('detail')}" for c in bad]
        if not checks and not msgs:
            msgs.append("not run")
        row[f"{side}_error"] = "; ".join(msgs)[:900]
        t = row["times"].get(side, {})
        row[f"{side}_ms"] = sum(v["ms"] for v in t.values()) if len(t) == len(prog.parts) else None
    if row["tilec_ms"] and row["tilelang_ms"]:
        row["ratio"] = row["tilec_ms"] / row["tilelang_ms"]
    return row


def note_of(row: dict) -> str:
    prog = SPECS[row["program"]]
    bits = []
    timed = next(c for c in prog.cases if c.timed)
    bits.append(", ".join(f"{k}={v}" for k, v in timed.dims.items()))
    if len(prog.parts) > 1 and row["times"].get("tilec") and row["times"].get("tilelang"):
        per = []
        for p in prog.parts:
            a, b = row["times"]["tilec"].get(p), row["times"]["tilelang"].get(p)
            if a and b:
                per.append(f"{p} {a['ms']:.3f}/{b['ms']:.3f}")
        bits.append("parts tilec/TileLang ms: " + ", ".join(per))
    if len(prog.cases) > 1:
        bits.append(
            "also checked: "
            + ", ".join(f"{c.label} " + "x".join(str(v) for v in c.dims.values()) for c in prog.cases if not c.timed)
        )
    else:
        bits.append(f"no ragged case: {prog.no_ragged}")
    for side in ("tilec", "tilelang"):
        if row[f"{side}_error"] and not row[f"{side}_ok"]:
            bits.append(f"{'tilec' if side == 'tilec' else 'TileLang'}: {row[f'{side}_error'][:300]}")
    agree = [
        f"{r['case']} {r['part']}".strip() + " " + ", ".join(f"{k} {v:.1e}" for k, v in r["rel"].items())
        for r in row["agree"]
    ]
    if agree:
        bits.append("tilec vs TileLang rel: " + "; ".join(agree))
    return "; ".join(bits).replace("|", "/").replace("\n", " ")


def print_also_timed(rows: list[dict]) -> None:
    """The cases timed beside a row's own (tilec and TileLang on the same program and inputs)."""
    lines = []
    for r in rows:
        prog = SPECS[r["program"]]
        for c in prog.cases:
            sides = r.get("also", {}).get(c.label)
            if not c.also_timed or not sides:
                continue
            ms = {s: sum(v["ms"] for v in sides[s].values()) for s in sides if len(sides[s]) == len(prog.parts)}
            a, b = ms.get("tilec"), ms.get("tilelang")
            cols = [f"{a:.3f}" if a else "-", f"{b:.3f}" if b else "-", f"{a / b:.2f}x" if a and b else "-"]
            dims = ", ".join(f"{k}={v}" for k, v in c.dims.items())
            rates = "; ".join(f"{n}: {prog.rates(c, t)}" for n, t in (("tilec", a), ("TileLang", b)) if t)
            lines.append(f"| {r['program']} | {c.label}: {dims} | " + " | ".join(cols) + f" | {rates} |")
    if lines:
        print("\nalso timed (same program, same inputs, same process):\n")
        print("| program | case | tilec ms | TileLang ms | tilec/TileLang time | achieved |")
        print("|---|---|---|---|---|---|")
        print("\n".join(lines))


def print_table(rows: list[dict], device: str) -> None:
    print(f"\n## corpus: tilec against TileLang ({device})\n")
    print("| program | correct (tilec) | TileLang correct | tilec ms | TileLang ms | tilec/TileLang time | note |")
    print("|---|---|---|---|---|---|---|")

    def ms(v):
        return f"{v:.3f}" if v else "-"

    for r in rows:
        ratio = f"{r['ratio']:.2f}x" if r.get("ratio") else "-"
        if r.get("ratio") and r["ratio"] > SLOWER_THAN:
            ratio = f"**{ratio}**"
        yes = {True: "yes", False: "**no**"}
        print(
            f"| {r['program']} | {yes[r['tilec_ok']]} | {yes[r['tilelang_ok']]} | {ms(r['tilec_ms'])} | "
            f"{ms(r['tilelang_ms'])} | {ratio} | {note_of(r)} |"
        )
    correct = [r for r in rows if r["tilec_ok"]]
    ratios = [r["ratio"] for r in correct if r.get("ratio") and r["tilelang_ok"]]
    print(
        f"\ntilec correct: {len(correct)}/{len(rows)} (bar: at least 22); TileLang correct: "
        f"{sum(r['tilelang_ok'] for r in rows)}/{len(rows)}"
    )
    if ratios:
        med = statistics.median(ratios)
        print(
            f"median tilec/TileLang time over the {len(ratios)} programs both got right: {med:.2f}x (bar: at most 1.0)"
        )
    print_also_timed(rows)
    slow = [r for r in correct if r.get("ratio") and r["ratio"] > SLOWER_THAN]
    if slow:
        print(f"\nslower than 0.8x TileLang's speed (tilec/TileLang time above {SLOWER_THAN}): each needs its reason")
        for r in slow:
            print(f"- {r['program']}: {r['ratio']:.2f}x")
    print(flush=True)


def parent(args) -> int:
    import torch

    from tilec import runtime

    t0 = time.monotonic()
    if not torch.cuda.is_available():
        print("no CUDA GPU: nothing to run")
        return 2
    device = torch.cuda.get_device_name()
    print(f"{device}  torch {torch.__version__}  corpus builds in {args.dir}", flush=True)
    with open(os.path.join(args.dir, MANIFEST)) as f:
        manifest = json.load(f)
    only = {s for s in args.only.split(",") if s}
    names = [n for n in SPECS if not only or n in only]
    missing = [p for p in manifest.get("programs", {}) if p not in SPECS]
    if missing:
        print(f"programs in the manifest without a spec here: {', '.join(missing)}")

    # every tilec build with nvcc, in parallel (tilec.runtime caches the shared libraries)
    arch = runtime.gpu_arch()
    builds = [(n, c.build) for n in names for c in SPECS[n].cases]
    builds = list(dict.fromkeys(builds))

    def nvcc(nb):
        entry = manifest["builds"].get(build_id(*nb))
        if not entry or not entry.get("ok"):
            return "not prebuilt"
        try:
            path = os.path.join(args.dir, entry["cu"])
            with open(path, encoding="utf-8") as f:
                runtime.build_shared(f.read(), arch, name=build_id(*nb))
            return None
        except Exception as e:  # noqa: BLE001
            return _err(e)

    import concurrent.futures as cf

    with cf.ThreadPoolExecutor(args.nvcc_jobs) as pool:
        errs = dict(zip(builds, pool.map(nvcc, builds)))
    for nb, e in errs.items():
        if e:
            print(f"  nvcc {build_id(*nb)}: {e[:800]}", flush=True)
    print(
        f"nvcc: {sum(e is None for e in errs.values())}/{len(errs)} builds in {time.monotonic() - t0:.0f}s", flush=True
    )

    out_dir = os.environ.get("OUT")
    log_path = os.path.join(out_dir, "corpus_workers.log") if out_dir else os.devnull
    args.total -= time.monotonic() - t0
    with open(log_path, "w") as log:
        attempts = run_all(names, args, log)
    rows = [summarize(n, attempts[n]) for n in names]
    if out_dir:
        with open(os.path.join(out_dir, "corpus.json"), "w") as f:
            json.dump({"device": device, "torch": torch.__version__, "rows": rows}, f, indent=1, default=str)
    print_table(rows, device)
    print(f"total {time.monotonic() - t0:.0f}s")
    return 0 if all(r["tilec_ok"] for r in rows) else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default=os.path.join(ROOT, ".corpus"), help="the prebuild's folder")
    ap.add_argument("--only", default="", help="comma-separated programs")
    ap.add_argument("--jobs", type=int, default=4, help="workers at once (they compile concurrently)")
    ap.add_argument("--nvcc-jobs", type=int, default=os.cpu_count() or 8)
    ap.add_argument("--timeout", type=float, default=150.0, help="seconds per program, not counting the GPU lock")
    ap.add_argument("--total", type=float, default=480.0, help="seconds for everything; later programs are skipped")
    ap.add_argument("--budget", type=float, default=0.6, help="seconds of timed runs per part")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--skip", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args.worker, args.dir, {s for s in args.skip.split(",") if s}, args.budget)
    return parent(args)


if __name__ == "__main__":
    sys.exit(main())
