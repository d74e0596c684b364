"""The GEMM table: tilec's sm_90a GEMMs against cuBLAS over the shapes a user meets, one process
per cell, every cell checked before it is timed.

    TILEC_PREBUILT=.gpu PYTHONPATH=src python3 bench/gemm_table.py [--quick] [--only square-4096,tn]
        [--tilelang .tilelang/tilelang-site312.tar.xz]

Cells (full sizes; --quick in brackets), all fp16 in and out, fp32 accumulation:
  square-S   C = A @ B, S^3 for S = 1024 .. 16384 [1024 .. 4096]       vs torch.matmul
  ragged     4095 x 8191 x 1000                                      vs torch.matmul
  tn         A stored (K, M), 8192^3 [4096^3]                         vs torch.matmul(a.t(), b)
  nt         B stored (N, K), 8192^3 [4096^3]                         vs torch.matmul(a, b.t())
  bmm-bias   8 batches of 2048^3 [4 of 1024^3], bias (N,) added       vs torch.baddbmm(bias, a, b)
  skinny-M   M = 16, 64, 128 rows x 8192 x 8192 [x 4096 x 4096]       vs torch.matmul; GB/s against the
             copy bandwidth measured in the same run (torch copy of 1 GiB, bytes read + written)
  tilelang-S TileLang's GEMM example (128x256x64, 3 stages, 256 threads, panel 10) at 4096^3 and
             8192^3, beside examples/gemm.tile's sm_90a build and cuBLAS; skipped with a message when
             the TileLang archive of /work/shared/anchors/pack-tilelang.sh is absent or not importable

The tilec kernels are the prebuilt variants of tests/gpu/variants.py (`harness.load`). In each cell
the output is poisoned with NaN, the kernel runs once on the first input set and is compared with
torch's result on the same inputs (relative error norm at most 1e-2, every element written); only
then is it timed, with run.py's `bench()`: CUDA events around batches of back-to-back calls, median
of many batches after warm-up, input sets rotated where one set would fit in L2. cuBLAS is timed
before and after the tilec builds of the cell and the two medians are averaged. A call shorter
than 0.2 ms is also timed as a CUDA graph of 20 calls (run.py's `graph_ms`): back-to-back launches
from Python measure the caller's host cost per call as much as a kernel of a few microseconds, the
graph measures the kernel. The table shows both; a cell is flagged by the lower of the two.

The table's ratio is a speed ratio, cuBLAS time / tilec time (above 1.0x: tilec is faster). A cell
below 1.0x is flagged, and the "facts" column says what the script knows about it: the code path
the generated file takes for these shapes (wgmma with TMA warp roles, or the cp.async build the
launcher falls back to when a row is not 16-byte aligned, or no warp roles at all), the number of
blocks against the number of SMs, and for the memory-bound cells the fraction of the copy bandwidth.
These are facts about the build and the launch, not a profile.
Logs: the table is printed last; JSON goes to $OUT/gemm_table.json when OUT is set.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from run import n_sets, rate, rel_err, timed  # noqa: E402  (run.py puts tests/gpu and src on the path)

MARK = "@@gemm-table "
TOL = 1e-2
TILELANG_ARCHIVE = os.path.join(ROOT, ".tilelang", "tilelang-site312.tar.xz")
TILELANG_UNPACKED = "/tmp/tilec-tilelang"  # where the archive is unpacked on the GPU machine


@dataclass(frozen=True)
class Cell:
    """One row group of the table: a GEMM form at one shape and the tilec builds timed on it."""

    name: str
    form: str  # "nn", "tn", "nt", "bmm_bias"
    M: int
    N: int
    K: int
    variants: tuple[str, ...]
    batch: int = 1
    memory_bound: bool = False
    tilelang: bool = False

    @property
    def shape(self) -> str:
        b = f"{self.batch} x " if self.batch > 1 else ""
        return f"{b}{self.M}x{self.N}x{self.K}"

    @property
    def flops(self) -> int:
        return 2 * self.batch * self.M * self.N * self.K

    @property
    def bytes(self) -> int:
        """Each input read once and the output written once (fp16)."""
        b = self.batch
        bias = self.N if self.form == "bmm_bias" else 0
        return 2 * (b * self.M * self.K + b * self.K * self.N + b * self.M * self.N + bias)


def cells(quick: bool) -> list[Cell]:
    big = 4096 if quick else 8192
    squares = (1024, 2048, 4096) if quick else (1024, 2048, 4096, 8192, 16384)
    # TileLang first: its rows answer a bar of their own and should not be the ones --total skips
    out = [Cell(f"tilelang-{s}", "nn", s, s, s, ("gemm-sm90a", "gemm-sm90a-p10"), tilelang=True) for s in (4096, 8192)]
    out += [Cell(f"square-{s}", "nn", s, s, s, ("gemm-sm90a",)) for s in squares]
    out.append(Cell("ragged", "nn", 4095, 8191, 1000, ("gemm-sm90a",)))
    out.append(Cell("tn", "tn", big, big, big, ("gemm_tn-sm90a",)))
    out.append(Cell("nt", "nt", big, big, big, ("gemm_nt-sm90a",)))
    b, s = (4, 1024) if quick else (8, 2048)
    out.append(Cell("bmm-bias", "bmm_bias", s, s, s, ("bmm_bias-sm90a",), batch=b))
    wide = 4096 if quick else 8192
    for m in (16, 64, 128):
        out.append(
            Cell(
                f"skinny-{m}",
                "nn",
                m,
                wide,
                wide,
                ("gemm-sm90a", "gemm-sm90a-skinny", "gemm-sm90a-skinny-n64"),
                memory_bound=True,
            )
        )
    return out


# ---------------------------------------------------------------- inputs and calls


def make_set(c: Cell):
    """One input set of cell `c`: (a, b) or (a, b, bias), as the tilec kernel takes them."""
    import torch

    def r(*shape):
        return torch.randn(*shape, device="cuda", dtype=torch.float16)

    if c.form == "tn":
        return (r(c.K, c.M), r(c.K, c.N))
    if c.form == "nt":
        return (r(c.M, c.K), r(c.N, c.K))
    if c.form == "bmm_bias":
        return (r(c.batch, c.M, c.K), r(c.batch, c.K, c.N), r(c.N))
    return (r(c.M, c.K), r(c.K, c.N))


def out_shape(c: Cell) -> tuple[int, ...]:
    return (c.batch, c.M, c.N) if c.form == "bmm_bias" else (c.M, c.N)


def cublas_call(c: Cell, out):
    """(name, fn(*set)) of the cuBLAS call a torch user makes for this form, writing into `out`."""
    import torch

    if c.form == "tn":
        return "torch.matmul(a.t(), b)", lambda a, b: torch.matmul(a.t(), b, out=out)
    if c.form == "nt":
        return "torch.matmul(a, b.t())", lambda a, b: torch.matmul(a, b.t(), out=out)
    if c.form == "bmm_bias":
        return "torch.baddbmm(bias, a, b)", lambda a, b, bias: torch.baddbmm(bias, a, b, out=out)
    return "torch.matmul", lambda a, b: torch.matmul(a, b, out=out)


def tilec_call(c: Cell, mod):
    kernel = {"nn": "gemm", "tn": "gemm_tn", "nt": "gemm_nt", "bmm_bias": "bmm_bias"}[c.form]
    fn = getattr(mod, kernel)
    return lambda *args: fn(*args)


def poisoned(c: Cell):
    import torch

    return torch.full(out_shape(c), math.nan, device="cuda", dtype=torch.float16)


# ---------------------------------------------------------------- what the build does here


def tile_params(variant: str) -> dict[str, int]:
    """block_M / block_N of a variant: its -D values over the params of its .tile file."""
    from variants import BY_NAME

    v = BY_NAME[variant]
    with open(v.path, encoding="utf-8") as f:
        params = dict(re.findall(r"^param (block_[MN])\s*=\s*(\d+)", f.read(), re.M))
    params.update({k: v2 for k, v2 in v.defines.items() if k in ("block_M", "block_N")})
    return {k: int(x) for k, x in params.items()}


def row_widths(c: Cell) -> dict[str, int]:
    """Elements per row of each tensor the kernel reads or writes with tiles."""
    a = c.M if c.form == "tn" else c.K
    b = c.K if c.form == "nt" else c.N
    return {"A": a, "B": b, "C": c.N}


def code_path(c: Cell, variant: str) -> str:
    """The code path the variant's generated file takes at this cell's shapes."""
    from harness import cu_text

    text = cu_text(variant)
    if "setmaxnreg_dec" not in text:
        return ("wgmma" if "wgmma" in text else "mma.sync") + ", cp.async pipeline: no warp roles"
    unaligned = [t for t, w in row_widths(c).items() if w * 2 % 16]
    if unaligned and "_fallback_kernel" in text:
        return f"cp.async + wgmma fallback build: rows of {', '.join(unaligned)} not 16-byte aligned"
    return "wgmma + TMA warp roles"


def blocks(c: Cell, variant: str) -> int:
    p = tile_params(variant)
    return math.ceil(c.N / p["block_N"]) * math.ceil(c.M / p["block_M"]) * c.batch


# ---------------------------------------------------------------- worker


def emit(rec: dict) -> None:
    print(MARK + json.dumps(rec), flush=True)


def worker_copy(budget: float) -> int:
    """The copy bandwidth: a torch copy of 1 GiB of fp16, bytes read + written."""
    import torch

    n = 1 << 29
    src = torch.randn(n, device="cuda", dtype=torch.float16)
    dst = torch.empty_like(src)
    t = timed([lambda: dst.copy_(src)], budget)
    emit({"kind": "copy", "bytes": 2 * 2 * n, **t})
    return 0


def time_checked(fn, sets, outs, ref, budget: float) -> dict:
    """Run `fn(*set, out)` once on set 0 into a poisoned output, compare with `ref`; time it if right."""
    import torch

    fn(*sets[0], outs[0])
    torch.cuda.synchronize()
    err = rel_err(outs[0], ref)
    rec = {"rel_err": err}
    if not err <= TOL:
        return {**rec, "status": f"WRONG (rel err {err:.2e} > {TOL:.0e} vs cuBLAS): not timed"}
    calls = [lambda s=s, o=o: fn(*s, o) for s, o in zip(sets, outs, strict=True)]
    return {**rec, "status": "ok", **timed(calls, budget)}


def worker_cell(name: str, quick: bool, budget: float) -> int:
    import torch
    from harness import load

    c = next(x for x in cells(quick) if x.name == name)
    torch.manual_seed(0)
    sets = [make_set(c) for _ in range(n_sets(c.bytes))]
    torch_out = torch.empty(out_shape(c), device="cuda", dtype=torch.float16)
    cname, cfn = cublas_call(c, torch_out)
    ref = cfn(*sets[0]).clone()
    cublas = [lambda s=s: cfn(*s) for s in sets]
    emit({"kind": "cublas", "cell": name, "name": cname, "run": 1, **timed(cublas, budget)})
    for v in c.variants:
        rec = {"kind": "tilec", "cell": name, "variant": v}
        try:
            call = tilec_call(c, load(v))
            rec.update(path=code_path(c, v), blocks=blocks(c, v))
            rec.update(time_checked(call, sets, [poisoned(c) for _ in sets], ref, budget))
        except Exception as e:  # noqa: BLE001
            rec["status"] = f"ERROR {type(e).__name__}: {str(e)[:400]}"
            emit(rec)
            try:
                torch.cuda.synchronize()
            except Exception:  # noqa: BLE001 - a sticky CUDA error: this worker is done
                return 3
            continue
        emit(rec)
    if c.tilelang:
        emit({"kind": "tilelang", "cell": name, **tilelang_record(c, sets, ref, budget)})
    emit({"kind": "cublas", "cell": name, "name": cname, "run": 2, **timed(cublas, budget)})
    return 0


# ---------------------------------------------------------------- TileLang


def tilelang_site(path: str) -> str | None:
    """A folder to put on sys.path for TileLang: `path` itself, or the archive unpacked once."""
    if os.path.isdir(path):
        return path
    if not os.path.isfile(path):
        return None
    site = os.path.join(TILELANG_UNPACKED, "site312")
    if not os.path.isdir(os.path.join(site, "tilelang")):
        os.makedirs(TILELANG_UNPACKED, exist_ok=True)
        with tarfile.open(path) as tf:
            tf.extractall(TILELANG_UNPACKED, filter="data")
    return site


def tilelang_gemm_program(M: int, N: int, K: int):
    """TileLang's GEMM example as anchors.py (tl-gemm) times it: a 128x256 block tile, 64-deep k
    tiles in 3 stages, 256 threads, blocks in panels of 10."""
    import tilelang.language as T

    bm, bn, bk, stages, threads = 128, 256, 64, 3, 256

    @T.prim_func
    def gemm(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            a_tile = T.alloc_shared((bm, bk), T.float16)
            b_tile = T.alloc_shared((bk, bn), T.float16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            T.use_swizzle(10)
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=stages):
                T.copy(A[by * bm, k * bk], a_tile)
                T.copy(B[k * bk, bx * bn], b_tile)
                T.gemm(a_tile, b_tile, acc)
            T.copy(acc, C[by * bm, bx * bn])

    return gemm


def tilelang_record(c: Cell, sets, ref, budget: float) -> dict:
    """TileLang's example compiled (timed) and run like the tilec builds; a dict for the record."""
    try:
        import tilelang
    except Exception as e:  # noqa: BLE001
        return {"status": f"skipped: TileLang does not import here ({type(e).__name__}: {str(e)[:200]})"}
    try:
        t0 = time.perf_counter()
        kern = tilelang.compile(tilelang_gemm_program(c.M, c.N, c.K), target="cuda")
        compile_s = time.perf_counter() - t0
        rec = {"version": getattr(tilelang, "__version__", "?"), "compile_s": compile_s}
        return {**rec, **time_checked(kern, sets, [poisoned(c) for _ in sets], ref, budget)}
    except Exception as e:  # noqa: BLE001
        return {"status": f"ERROR {type(e).__name__}: {str(e)[:400]}"}


# ---------------------------------------------------------------- parent


def run_worker(args: list[str], timeout: float, env: dict | None = None) -> tuple[list[dict], str]:
    cmd = [sys.executable, "-u", os.path.abspath(__file__), *args]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False, env=env)
        out, rc = proc.stdout + proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        rc = "timeout"
    recs = [json.loads(ln[len(MARK) :]) for ln in out.splitlines() if ln.startswith(MARK)]
    tail = "\n".join(ln for ln in out.splitlines() if not ln.startswith(MARK))[-1500:]
    if rc != 0:
        recs.append({"kind": "error", "status": f"worker exit {rc}", "tail": tail})
    return recs, tail


def summarize(c: Cell, recs: list[dict], copy_gbs: float | None) -> list[dict]:
    """The table's rows of one cell: one per tilec build, and one for TileLang if it ran."""
    runs = [r for r in recs if r["kind"] == "cublas"]
    if not runs:
        note = "; ".join(r.get("status", "") + " " + r.get("tail", "")[-300:] for r in recs) or "no result"
        return [{"cell": c.name, "shape": c.shape, "note": note}]
    cub_ms = statistics.mean(r["ms"] for r in runs)
    spread = max(r["ms"] for r in runs) / min(r["ms"] for r in runs) - 1
    base = {"cell": c.name, "shape": c.shape, "cublas_name": runs[0]["name"], "cublas_ms": cub_ms, "spread": spread}
    graphs = [r["graph_ms"] for r in runs if "graph_ms" in r]
    if graphs:
        base["cublas_graph_ms"] = statistics.mean(graphs)
    base.update(rates(c, cub_ms, copy_gbs, "cublas"))
    rows = []
    for r in recs:
        if r["kind"] not in ("tilec", "tilelang"):
            continue
        row = {**base, "build": r.get("variant", f"TileLang {r.get('version', '')}".strip()), "kind": r["kind"]}
        row.update({k: r[k] for k in ("status", "path", "blocks", "rel_err", "compile_s") if k in r})
        if r.get("status") == "ok":
            row.update(ms=r["ms"], ratio=cub_ms / r["ms"], **rates(c, r["ms"], copy_gbs, "tilec"))
            if "graph_ms" in r and "cublas_graph_ms" in base:
                row.update(graph_ms=r["graph_ms"], graph_ratio=base["cublas_graph_ms"] / r["graph_ms"])
        rows.append(row)
    return rows


def rates(c: Cell, ms: float, copy_gbs: float | None, who: str) -> dict:
    out = {f"{who}_tflops": rate(c.flops, ms, "TFLOP/s")}
    if c.memory_bound:
        gbs = rate(c.bytes, ms, "GB/s")
        out[f"{who}_gbs"] = gbs
        if copy_gbs:
            out[f"{who}_copy_frac"] = gbs / copy_gbs
    return out


def facts(row: dict, c: Cell, sms: int) -> str:
    """What the script knows about a row: its code path, the grid against the SMs, bandwidth."""
    parts = [row.get("path", "")] if row.get("kind") == "tilec" else []
    if row.get("blocks") and row["blocks"] < sms:
        parts.append(f"{row['blocks']} blocks for {sms} SMs")
    if c.memory_bound and "tilec_copy_frac" in row:
        parts.append(
            f"{100 * row['tilec_copy_frac']:.0f}% of copy bandwidth (cuBLAS {100 * row['cublas_copy_frac']:.0f}%)"
        )
    if row.get("compile_s") is not None:
        parts.append(f"TileLang compile {row['compile_s']:.1f} s")
    return "; ".join(p for p in parts if p)


def fmt_rate(row: dict, who: str, c: Cell) -> str:
    if f"{who}_tflops" not in row:
        return ""
    s = f"{row[f'{who}_tflops']:.1f} TFLOP/s"
    if c.memory_bound:
        s = f"{row[f'{who}_gbs']:.0f} GB/s ({s})"
    return s


def print_table(rows: list[dict], by_name: dict[str, Cell], copy_gbs: float | None, sms: int) -> None:
    print("\n## tilec GEMM table vs cuBLAS (median times, same process per cell)\n")
    if copy_gbs:
        print(f"copy bandwidth (torch copy of 1 GiB, read + write): {copy_gbs:.0f} GB/s; {sms} SMs\n")
    print(
        "| cell | shape | tilec build | tilec | cuBLAS call | cuBLAS | speed vs cuBLAS "
        "| kernel only (CUDA graph): tilec / cuBLAS us, speed | below 1.0x | facts |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        c = by_name[r["cell"]]
        if "cublas_ms" not in r:
            print(f"| {r['cell']} | {r['shape']} | | | | | | | | {r.get('note', '')[:300].replace('|', '/')} |")
            continue
        cub = f"{r['cublas_ms']:.3f} ms, {fmt_rate(r, 'cublas', c)} (±{100 * r['spread']:.1f}%)"
        if r.get("status") != "ok":
            status = str(r.get("status", "?")).replace("|", "/").replace("\n", " ")[:200]
            print(f"| {r['cell']} | {r['shape']} | {r['build']} | {status} | {r['cublas_name']} | {cub} | | | | |")
            continue
        tl = f"{r['ms']:.3f} ms, {fmt_rate(r, 'tilec', c)}"
        worst = min(r["ratio"], r.get("graph_ratio", r["ratio"]))  # flagged by the lower of the two
        flag = "**below**" if worst < 1.0 else ""
        if worst < 0.8:
            flag = "**below 0.8x**"
        graph = ""
        if "graph_ratio" in r:
            graph = f"{1000 * r['graph_ms']:.1f} / {1000 * r['cublas_graph_ms']:.1f}, **{r['graph_ratio']:.2f}x**"
        print(
            f"| {r['cell']} | {r['shape']} | {r['build']} | {tl} | {r['cublas_name']} | {cub} "
            f"| **{r['ratio']:.2f}x** | {graph} | {flag} | {facts(r, c, sms)} |"
        )
    tl_rows = [r for r in rows if r.get("kind") == "tilelang" and r.get("status") == "ok"]
    for t in tl_rows:
        mine = [r for r in rows if r["cell"] == t["cell"] and r.get("kind") == "tilec" and r.get("status") == "ok"]
        for r in mine:
            print(f"\n{t['cell']}: tilec {r['build']} / TileLang speed: **{t['ms'] / r['ms']:.2f}x**", end="")
    print()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smaller sizes")
    ap.add_argument("--only", default="", help="comma-separated cells (see the list above)")
    ap.add_argument("--budget", type=float, default=1.0, help="seconds of timed runs per measurement")
    ap.add_argument("--timeout", type=float, default=150.0, help="seconds per cell")
    ap.add_argument("--total", type=float, default=370.0, help="seconds for everything; later cells are skipped")
    ap.add_argument("--tilelang", default=TILELANG_ARCHIVE, help="TileLang archive or unpacked site folder")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--copy", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.copy:
        return worker_copy(args.budget)
    if args.worker:
        return worker_cell(args.worker, args.quick, args.budget)
    return parent(args)


def parent(args) -> int:
    import torch
    from harness import build_all, prebuilt_dir

    t0 = time.perf_counter()
    chosen = [c for c in cells(args.quick) if not args.only or c.name in args.only.split(",")]
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    print(f"{torch.cuda.get_device_name()}  torch {torch.__version__}  prebuilt={prebuilt_dir()}", flush=True)
    variants = sorted({v for c in chosen for v in c.variants})
    errors = build_all(variants)
    for v, e in errors.items():
        if e:
            print(f"  BUILD-ERROR {v}: {e[:600]}", flush=True)
    print(f"built {sum(e is None for e in errors.values())}/{len(variants)} variants", flush=True)
    flags = ["--budget", str(args.budget)] + (["--quick"] if args.quick else [])
    copy_recs, _ = run_worker(["--copy", *flags], args.timeout)
    copy = next((r for r in copy_recs if r["kind"] == "copy"), None)
    copy_gbs = rate(copy["bytes"], copy["ms"], "GB/s") if copy else None
    env = tilelang_env(args.tilelang) if any(c.tilelang for c in chosen) else None
    rows, everything = [], {"copy": copy_recs}
    for c in chosen:
        left = args.total - (time.perf_counter() - t0)
        if left < 20:
            rows.append({"cell": c.name, "shape": c.shape, "note": "skipped: out of time (--total)"})
            continue
        recs, tail = run_worker(["--worker", c.name, *flags], min(args.timeout, left - 5), env if c.tilelang else None)
        everything[c.name] = recs
        for r in recs:
            print(f"  [{c.name}] {json.dumps(r)[:400]}", flush=True)
        rows += summarize(c, recs, copy_gbs)
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "gemm_table.json"), "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "rows": rows, "records": everything}, f, indent=1)
    print_table(rows, {c.name: c for c in chosen}, copy_gbs, sms)
    bad = [r for r in rows if (r.get("kind") == "tilec" and r.get("status") != "ok") or "note" in r]
    return 1 if bad else 0


def tilelang_env(path: str) -> dict | None:
    """The workers' environment with TileLang's site folder on PYTHONPATH, or None (with a message)."""
    try:
        site = tilelang_site(path)
    except Exception as e:  # noqa: BLE001
        print(f"TileLang: cannot unpack {path}: {type(e).__name__}: {e}; TileLang rows skipped", flush=True)
        return None
    if site is None:
        print(f"TileLang: no archive or folder at {path} (make it with pack-tilelang.sh); TileLang rows skipped")
        return None
    env = dict(os.environ)
    env["PYTHONPATH"] = site + os.pathsep + env.get("PYTHONPATH", "")
    print(f"TileLang: site folder {site}", flush=True)
    return env


if __name__ == "__main__":
    sys.exit(main())
