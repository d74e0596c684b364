"""The current model's choices on the timings of an earlier bench/tune_all.py run, here (no GPU).

    PYTHONPATH=src python bench/tune_rerank.py TUNE.json [--only attention,mla_decode]

Every candidate of the run was timed, so what `tilec tune` (the model alone) and `tilec tune
--measure` (the fastest of its contenders) would choose now can be read off its JSON: a change to
the cost model is tried against measured times before the GPU confirms it in a fresh run. Points
the run did not time (a candidate set grown since) are left out of both choices.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Sequence

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "src"))
sys.path.insert(0, os.path.join(ROOT, "bench"))


def rerank(rows: Sequence[dict], only: set[str]) -> list[tuple[str, float, float, int]]:
    """(program, model x best, --measure x best, contenders) for each program of the run."""
    import tune_prebuild as tp

    from tilec import driver
    from tilec.tune import search

    timed = {r["name"]: r["seconds"] for r in rows if r.get("seconds")}
    out = []
    for p in tp.PROGRAMS:
        if p.name not in timed or (only and p.name not in only):
            continue
        path = os.path.join(ROOT, p.path)
        req = search.Request(path, {}, tp.ARCH, None, [dict(p.shape)], top=tp.TOP, band=search.BAND)
        (r,) = search.tune(req, driver.elaborate(path, {}, tp.ARCH))
        t, best = timed[p.name], min(timed[p.name].values())
        ranked = [c.label for c in r.ranked if c.label in t]
        contenders = [c.label for c in r.ranked[: r.contenders] if c.label in t]
        model = t[ranked[0]] / best if ranked else math.inf
        measured = min(t[c] for c in contenders) / best if contenders else math.inf
        out.append((p.name, model, measured, r.contenders))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json", help="bench/tune_all.py --json output")
    ap.add_argument("--only", default="", help="comma-separated program names")
    args = ap.parse_args(argv)
    with open(args.json, encoding="utf-8") as f:
        rows = json.load(f)
    results = rerank(rows, {s for s in args.only.split(",") if s})
    print("| program | model x best | --measure x best | contenders |\n|---|---|---|---|")
    for name, model, measured, n in results:
        print(f"| {name} | {model:.3f} | {measured:.3f} | {n} |")
    ok_model = sum(m <= 1.15 for _, m, _, _ in results)
    ok_measure = sum(m <= 1.03 for _, _, m, _ in results)
    print(f"\n--measure within 3%: {ok_measure}/{len(results)}; model within 15%: {ok_model}/{len(results)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
