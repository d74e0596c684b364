"""On the GPU machine: time every prebuilt candidate of bench/tune_prebuild.py and print the table.

    PYTHONPATH=src python3 bench/tune_all.py --dir .tune [--only gemm] [--json $OUT/tune.json]

Imports only the standard library, torch and tilec.runtime (through tilec.tune.measure, whose
runner is what `tilec tune --measure` uses): the compiler is not on the GPU machine. All files
are first built with nvcc in parallel (the .so cache of tilec.runtime), then timed on every
visible GPU (measure.Pool), each checked against the default configuration first. Per program:

    best         the fastest candidate of all (exhaustive measurement)
    --measure    the fastest of the model's contenders (what `tilec tune --measure` times and chooses:
                 its top 4 and every point modelled within 15% of its best, at most 16)
    model        the model's first (what `tilec tune` without --measure chooses)

Also per program: what `tilec tune --measure` costs on the GPU machine (the contenders built by
nvcc and timed, from a cold build cache: "measure s"), and the tuned speed against what it should
be compared with: memory-bound programs in GB/s (every tensor's bytes once) against the copy
bandwidth measured in the same run (torch's copy of 1 GiB, read + written), the others against
their torch operation on the same inputs (`_peer_calls`: cuBLAS, cuDNN through SDPA), as a speed ratio
(torch's time / tilec's).

Done (issue 16) when --measure is within 3% of the best for every program and the model within
15% for at least 80% of them; the last lines say whether it is.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src"))

from tilec.tune import measure  # noqa: E402 - stdlib only, torch inside the runner

RunnerFor = Callable[[str, Mapping[str, int], str], measure.Runner]  # (reference source, shape, arch)


def read(folder: str, rel: str) -> str:
    with open(os.path.join(folder, rel), encoding="utf-8") as f:
        return f.read()


def nvcc_all(sources: Sequence[str], arch: str, jobs: int) -> None:
    """Build every source into tilec.runtime's cache, `jobs` nvcc at a time (errors come later, per job)."""
    from tilec import runtime

    def one(src: str) -> None:
        try:
            runtime.build_shared(src, arch)
        except RuntimeError:
            pass  # the job's own compile reports it

    with ThreadPoolExecutor(max(1, jobs)) as pool:
        list(pool.map(one, sources))


def sources(entry: Mapping, folder: str, labels: Sequence[str]) -> list[str]:
    return [read(folder, c["cu"]) for c in entry["candidates"] if c["cu"] and c["label"] in labels]


def time_jobs(entry: Mapping, folder: str, labels: Sequence[str], gpus: Sequence[int], runner_for: RunnerFor):
    """label -> measured seconds of those of `labels` that were built and passed their check."""
    built = {c["label"]: c["cu"] for c in entry["candidates"] if c["cu"]}
    jobs = [measure.Job(label, read(folder, built[label])) for label in labels if label in built]
    if not jobs:
        return {}
    runner = runner_for(read(folder, entry["reference"]), entry["shape"], entry["arch"])
    timings = measure.Pool(gpus, runner).run(jobs)
    for t in timings:
        if t.error:
            print(f"  {entry['name']}: {t.label} failed: {t.error.splitlines()[0][:200]}", flush=True)
    return {t.label: t.seconds for t in timings if t.seconds is not None}


def summarize(entry: Mapping, timed: Mapping[str, float]) -> dict:
    """The best, the --measure choice and the model's choice with their ratios to the best."""
    if not timed:
        return {"name": entry["name"], "timed": 0}
    best = min(timed, key=lambda k: timed[k])
    top = [c for c in entry["model_top"] if c in timed]
    chosen = min(top, key=lambda k: timed[k]) if top else None
    model = entry["model_choice"]
    default = next((c["label"] for c in entry["candidates"] if c["default"]), None)
    return {
        "default": default, "default_ratio": timed[default] / timed[best] if default in timed else None,
        "name": entry["name"], "timed": len(timed), "best": best, "best_s": timed[best],
        "measure": chosen, "measure_ratio": timed[chosen] / timed[best] if chosen else None,
        "model": model, "model_ratio": timed[model] / timed[best] if model in timed else None,
        "seconds": dict(sorted(timed.items(), key=lambda kv: kv[1])),  # every candidate, fastest first
    }  # fmt: skip


def table(rows: Sequence[Mapping]) -> str:
    """The README's markdown table and the verdict on issue 16's criteria."""
    lines = [
        "| program | timed | default x best | best (exhaustive) | ms | --measure choice | x best | measure s "
        "| model choice | x best | tuned speed |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if not r["timed"]:
            lines.append(f"| {r['name']} | 0 | - | - | - | - | - | - | - | - | - |")
            continue
        lines.append(
            f"| {r['name']} | {r['timed']} | {_ratio(r.get('default_ratio'))} | {r['best']} | {r['best_s'] * 1e3:.3f} "
            f"| {r['measure']} | {_ratio(r['measure_ratio'])} | {r.get('measure_s', 0):.0f} | {r['model']} "
            f"| {_ratio(r['model_ratio'])} | {_speed(r)} |"
        )
    ok_measure = sum(1 for r in rows if (r.get("measure_ratio") or 9) <= 1.03)
    ok_model = sum(1 for r in rows if (r.get("model_ratio") or 9) <= 1.15)
    lines.append(f"\n--measure within 3% of the best: {ok_measure}/{len(rows)} (needed: all)")
    lines.append(f"model within 15% of the best: {ok_model}/{len(rows)} (needed: {math.ceil(0.8 * len(rows))})")
    bound = [r for r in rows if "copy_frac" in r]
    if bound:
        ok = sum(1 for r in bound if r["copy_frac"] >= 0.85)
        lines.append(f"memory-bound programs at 85% of the copy bandwidth or more: {ok}/{len(bound)} (needed: all)")
    return "\n".join(lines) + "\n"


def _speed(r: Mapping) -> str:
    if "copy_frac" in r:
        return f"{r['gbs']:.0f} GB/s, {100 * r['copy_frac']:.0f}% of copy"
    if "vs_peer" in r:
        return f"{r['vs_peer']:.2f}x {r['peer']}"
    return "-"


def _ratio(x: float | None) -> str:
    return f"{x:.3f}" if x is not None else "-"


def run(folder: str, only: set[str], gpus: Sequence[int], runner_for: RunnerFor, nvcc_jobs: int) -> list[dict]:
    """Time the manifest's programs (all, or `only`); one summary per program. The model's top is
    built and timed first, alone, as `tilec tune --measure` would (its wall time is the row's
    "measure_s"), then every other candidate."""
    with open(os.path.join(folder, "manifest.json"), encoding="utf-8") as f:
        manifest = json.load(f)
    rows = []
    for entry in manifest["programs"]:
        if only and entry["name"] not in only:
            continue
        top = entry["model_top"]
        rest = [c["label"] for c in entry["candidates"] if c["label"] not in top]
        start = time.perf_counter()
        if nvcc_jobs:
            nvcc_all(sources(entry, folder, top), entry["arch"], nvcc_jobs)
        timed = time_jobs(entry, folder, top, gpus, runner_for)
        measure_s = time.perf_counter() - start
        if nvcc_jobs:
            nvcc_all(sources(entry, folder, rest), entry["arch"], nvcc_jobs)
        timed |= time_jobs(entry, folder, rest, gpus, runner_for)
        rows.append(summarize(entry, timed) | {"measure_s": measure_s})
        print(f"{entry['name']}: { ({k: v for k, v in rows[-1].items() if k != 'seconds'}) }", flush=True)
    return rows


def _peer_calls(t: Mapping[str, Any]) -> dict[str, Callable[[], Callable[[], Any]]]:
    """For each `against` name of bench/tune_prebuild.py, what makes the torch operation it is timed
    against, on the program's own input tensors `t` (by name)."""
    import torch
    import torch.nn.functional as F

    def dequantized() -> Callable[[], Any]:  # cuBLAS on the weight already dequantized to fp16
        w = torch.randn(t["W_packed"].shape[0], t["A"].shape[1], device="cuda", dtype=torch.float16)
        return lambda: torch.matmul(t["A"], w.t())

    table: dict[str, Callable[[], Callable[[], Any]]] = {
        "matmul": lambda: lambda: torch.matmul(t["A"], t["B"]),
        "matmul_relu": lambda: lambda: torch.relu_(torch.matmul(t["A"], t["B"])),
        "linear": lambda: lambda: F.linear(t["X"], t["W"]),
        "int_mm": lambda: lambda: torch._int_mm(t["A"], t["B"].t()),
        "baddbmm": lambda: lambda: torch.baddbmm(t["Bias"], t["A"], t["B"]),
        "sdpa": lambda: lambda: F.scaled_dot_product_attention(t["Q"], t["K"], t["V"]),
        "dequant": dequantized,
    }
    return table


def against(rows: list[dict], folder: str) -> None:
    """Add to each row the tuned speed against its peer (module docstring): "gbs" and "copy_frac"
    for memory-bound programs, "peer_ms" and "vs_peer" (peer time / tilec time) for the others."""
    import torch

    from tilec import runtime

    copy_gbs = copy_bandwidth()
    with open(os.path.join(folder, "manifest.json"), encoding="utf-8") as f:
        entries = {e["name"]: e for e in json.load(f)["programs"]}
    for row in rows:
        entry = entries[row["name"]]
        if not row.get("timed") or not entry.get("against"):
            continue
        abi = runtime.parse_abi(read(folder, entry["reference"]))["kernels"]
        if entry["against"] == "memory":
            size = sum(_tensor_bytes(t, entry["shape"]) for k in abi for t in k["tensors"])
            row["gbs"] = size / row["best_s"] / 1e9
            row["copy_gbs"], row["copy_frac"] = copy_gbs, row["gbs"] / copy_gbs
        else:
            (kernel,) = abi
            args = measure.inputs(kernel, entry["shape"])
            t = {spec["name"]: x for spec, x in zip(kernel["tensors"], args, strict=False)}
            row["peer"] = entry["against"]
            row["peer_ms"] = measure.time_calls([_peer_calls(t)[entry["against"]]()]) * 1e3
            row["vs_peer"] = row["peer_ms"] / (row["best_s"] * 1e3)
        torch.cuda.empty_cache()


def _tensor_bytes(tensor: Mapping, shape: Mapping[str, int]) -> int:
    from tilec import runtime

    count = math.prod(shape[d] if isinstance(d, str) else d for d in tensor["shape"])
    return count * ctypes.sizeof(runtime.DTYPES[tensor["dtype"]][1])


def copy_bandwidth() -> float:
    """GB/s of a torch copy of 1 GiB of fp16, bytes read + written (timed as the candidates are)."""
    import torch

    n = 1 << 29
    src = torch.randn(n, device="cuda", dtype=torch.float16)
    dst = torch.empty_like(src)
    return 4 * n / measure.time_calls([lambda: dst.copy_(src)]) / 1e9


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default=".tune", help="bench/tune_prebuild.py's output")
    ap.add_argument("--only", default="", help="comma-separated program names")
    ap.add_argument("--json", help="also write the summaries (with every candidate's time) here")
    ap.add_argument("--rows", help="a --json file of an earlier run: report its timings against the peers again")
    ap.add_argument("--nvcc-jobs", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args(argv)
    gpus = measure.visible_gpus()
    if not gpus:
        print("tune_all: no GPU is visible", file=sys.stderr)
        return 2
    only = {s for s in args.only.split(",") if s}
    if args.rows:  # the timings of an earlier run: only the peers and the copy bandwidth are timed
        with open(args.rows, encoding="utf-8") as f:
            rows = [r for r in json.load(f) if not only or r["name"] in only]
    else:
        rows = run(args.dir, only, gpus, measure.gpu_runner, args.nvcc_jobs)
    against(rows, args.dir)
    print("\n" + table(rows))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
