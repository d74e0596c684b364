"""On the GPU machine: time every prebuilt candidate of bench/tune_prebuild.py and print the table.

    PYTHONPATH=src python3 bench/tune_all.py --dir .tune [--only gemm] [--json $OUT/tune.json]

Imports only the standard library, torch and tilec.runtime (through tilec.tune.measure, whose
runner is what `tilec tune --measure` uses): the compiler is not on the GPU machine. All files
are first built with nvcc in parallel (the .so cache of tilec.runtime), then timed on every
visible GPU (measure.Pool), each checked against the default configuration first. Per program:

    best         the fastest candidate of all (exhaustive measurement)
    --measure    the fastest of the model's top 4 (what `tilec tune --measure` chooses)
    model        the model's first (what `tilec tune` without --measure chooses)

Done (issue 16) when --measure is within 3% of the best for every program and the model within
15% for at least 80% of them; the last lines say whether it is.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

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


def time_program(entry: Mapping, folder: str, gpus: Sequence[int], runner_for: RunnerFor) -> dict[str, float]:
    """label -> measured seconds of every built candidate that passed its check."""
    jobs = [measure.Job(c["label"], read(folder, c["cu"])) for c in entry["candidates"] if c["cu"]]
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
    return {
        "name": entry["name"], "timed": len(timed), "best": best, "best_s": timed[best],
        "measure": chosen, "measure_ratio": timed[chosen] / timed[best] if chosen else None,
        "model": model, "model_ratio": timed[model] / timed[best] if model in timed else None,
        "seconds": dict(sorted(timed.items(), key=lambda kv: kv[1])),  # every candidate, fastest first
    }  # fmt: skip


def table(rows: Sequence[Mapping]) -> str:
    """The README's markdown table and the verdict on issue 16's criteria."""
    lines = [
        "| program | timed | best (exhaustive) | ms | --measure choice | x best | model choice | x best |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if not r["timed"]:
            lines.append(f"| {r['name']} | 0 | - | - | - | - | - | - |")
            continue
        lines.append(
            f"| {r['name']} | {r['timed']} | {r['best']} | {r['best_s'] * 1e3:.3f} | {r['measure']} | "
            f"{_ratio(r['measure_ratio'])} | {r['model']} | {_ratio(r['model_ratio'])} |"
        )
    ok_measure = sum(1 for r in rows if (r.get("measure_ratio") or 9) <= 1.03)
    ok_model = sum(1 for r in rows if (r.get("model_ratio") or 9) <= 1.15)
    lines.append(f"\n--measure within 3% of the best: {ok_measure}/{len(rows)} (needed: all)")
    lines.append(f"model within 15% of the best: {ok_model}/{len(rows)} (needed: {0.8 * len(rows):.0f})")
    return "\n".join(lines) + "\n"


def _ratio(x: float | None) -> str:
    return f"{x:.3f}" if x is not None else "-"


def run(folder: str, only: set[str], gpus: Sequence[int], runner_for: RunnerFor, nvcc_jobs: int) -> list[dict]:
    """Time the manifest's programs (all, or `only`); one summary per program."""
    with open(os.path.join(folder, "manifest.json"), encoding="utf-8") as f:
        manifest = json.load(f)
    rows = []
    for entry in manifest["programs"]:
        if only and entry["name"] not in only:
            continue
        if nvcc_jobs:
            nvcc_all([read(folder, c["cu"]) for c in entry["candidates"] if c["cu"]], entry["arch"], nvcc_jobs)
        rows.append(summarize(entry, time_program(entry, folder, gpus, runner_for)))
        print(f"{entry['name']}: {({k: v for k, v in rows[-1].items() if k != 'seconds'})}", flush=True)
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default=".tune", help="bench/tune_prebuild.py's output")
    ap.add_argument("--only", default="", help="comma-separated program names")
    ap.add_argument("--json", help="also write the summaries (with every candidate's time) here")
    ap.add_argument("--nvcc-jobs", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args(argv)
    gpus = measure.visible_gpus()
    if not gpus:
        print("tune_all: no GPU is visible", file=sys.stderr)
        return 2
    only = {s for s in args.only.split(",") if s}
    rows = run(args.dir, only, gpus, measure.gpu_runner, args.nvcc_jobs)
    print("\n" + table(rows))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
