"""Run every GPU check (cases.py), print a pass/fail table, exit 1 on any failure.

    TILEC_PREBUILT=.gpu PYTHONPATH=src python tests/gpu/run_all.py [--only gemm,softmax] [--sanitize [TOOL]]

Steps: build every variant's shared library with nvcc in parallel (cached by tilec.runtime), then
run the cases in a worker process. A case that crashes the worker, hangs past --timeout, or leaves
the CUDA context broken (an illegal address is sticky) is recorded as ERROR/TIMEOUT and a fresh
worker carries on with the next case, so one bad kernel cannot hide the others' results.
`--sanitize TOOL` runs the worker under `compute-sanitizer --tool TOOL` (memcheck when no TOOL is
given; racecheck, synccheck, initcheck): slow, so use it with --only. A case its report names FAILs.
The table is printed last; JSON results go to $OUT/gpu_checks.json when OUT is set.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import re
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

MARK = "@@tilec-case "


# ---------------------------------------------------------------- worker


def worker(ids: list[str]) -> int:
    import torch
    from cases import BY_ID
    from harness import NotBuilt, load, summarize

    for cid in ids:
        case = BY_ID[cid]
        print(MARK + json.dumps({"start": cid}), flush=True)
        t0 = time.perf_counter()
        rec = {"id": cid, "variant": case.variant, "label": case.label}
        broken = False
        try:
            mod = load(case.variant)
            res = case.run(mod)
            rec.update(
                status="PASS" if res["ok"] else "FAIL",
                detail=summarize(res),
                rel=res["rel"],
                bad=res["bad"],
                nan=res["nan"],
                guards=res["guards"],
            )
        except NotBuilt as e:
            rec.update(status="ERROR", detail=f"not built: {e}")
        except Exception as e:  # noqa: BLE001
            rec.update(status="ERROR", detail=f"{type(e).__name__}: {str(e)[:600]}")
            try:
                torch.cuda.synchronize()
                torch.zeros(1, device="cuda").add_(1).item()
            except Exception:  # noqa: BLE001 - sticky CUDA error: this process is done
                broken = True
        rec["seconds"] = round(time.perf_counter() - t0, 3)
        print(MARK + json.dumps({"result": rec}), flush=True)
        if broken:
            return 3
    return 0


# ---------------------------------------------------------------- parent


# compute-sanitizer's report lines: memcheck's "Invalid __global__ read", racecheck's "Race reported
# between ...", synccheck's "Barrier error detected", initcheck's "Uninitialized __global__ memory read"
_SANITIZER_REPORT = re.compile(r"^=+ .*(Invalid|Race reported|Barrier error|Uninitialized|Error: )")


def run_workers(ids: list[str], timeout: float, sanitize: str | None, log, total: float = 1e9) -> dict[str, dict]:
    results: dict[str, dict] = {}
    todo = list(ids)
    end = time.monotonic() + total
    while todo:
        if time.monotonic() > end - 5:
            for cid in todo:
                results[cid] = {"id": cid, "status": "SKIPPED", "detail": "out of time (--total)"}
            print(f"out of time: {len(todo)} cases not run", flush=True)
            break
        cmd = [sys.executable, "-u", os.path.abspath(__file__), "--worker", "\x1f".join(todo)]
        if sanitize:
            cmd = ["compute-sanitizer", "--tool", sanitize, "--error-exitcode", "99", "--print-limit", "20", *cmd]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
        lines: queue.Queue = queue.Queue()

        def pump(p=proc, q=lines):
            for line in p.stdout:
                q.put(line)
            q.put(None)

        threading.Thread(target=pump, daemon=True).start()
        current, tail = None, []
        deadline = min(time.monotonic() + timeout * 3, end)  # start-up: torch import
        while True:
            try:
                line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                line = "TIMEOUT"
            if line == "TIMEOUT" or (line is not None and time.monotonic() > deadline):
                proc.kill()  # the worker this function started
                proc.wait()
                if current:
                    results[current] = {
                        "id": current,
                        "status": "TIMEOUT",
                        "detail": f"no result after {timeout:.0f}s (hang?)",
                    }
                    print(f"TIMEOUT {current}", flush=True)
                    todo.remove(current)
                else:
                    for cid in todo:
                        results[cid] = {"id": cid, "status": "ERROR", "detail": "worker did not start"}
                    todo = []
                break
            if line is None:  # worker exited
                rc = proc.wait()
                if current:  # died inside a case
                    detail = "".join(tail[-15:]).strip()
                    results[current] = {
                        "id": current,
                        "status": "ERROR",
                        "detail": f"worker died (exit {rc}): {detail[-800:]}",
                    }
                    print(f"ERROR   {current}  worker died (exit {rc})", flush=True)
                    todo.remove(current)
                elif rc not in (0, 3) and todo:
                    detail = "".join(tail[-15:]).strip()
                    for cid in todo:
                        results[cid] = {"id": cid, "status": "ERROR", "detail": f"worker failed (exit {rc}): {detail}"}
                    todo = []
                elif rc == 99 and sanitize:
                    print("compute-sanitizer reported errors: see the log above", flush=True)
                break
            log.write(line)
            if line.startswith(MARK):
                msg = json.loads(line[len(MARK) :])
                if "start" in msg:
                    current, tail = msg["start"], []
                    deadline = min(time.monotonic() + timeout, end)
                else:
                    rec = msg["result"]
                    san = [t.strip() for t in tail if _SANITIZER_REPORT.match(t)]
                    if sanitize and san and rec["status"] == "PASS":
                        rec["status"] = "FAIL"
                    if san:
                        rec["detail"] = f"{sanitize}: {san[0]} ({len(san)} reports); " + rec["detail"]
                    results[rec["id"]] = rec
                    todo.remove(rec["id"])
                    current = None
                    print(f"{rec['status']:7s} {rec['id']}  {rec['detail'][:300]}", flush=True)
            else:
                tail.append(line)
                if sanitize or not line.startswith(" "):
                    sys.stdout.write("    | " + line)
    return results


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="", help="comma-separated variants, examples or case ids")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per case")
    ap.add_argument("--total", type=float, default=200.0, help="seconds for all cases; the rest are SKIPPED")
    ap.add_argument(
        "--sanitize",
        nargs="?",
        const="memcheck",
        default=None,
        choices=("memcheck", "racecheck", "synccheck", "initcheck"),
        help="run under compute-sanitizer with this tool (memcheck if none is named)",
    )
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 8, help="parallel nvcc builds")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.worker is not None:
        return worker([c for c in args.worker.split("\x1f") if c])

    import torch
    from cases import CASES
    from harness import build_all, prebuilt_dir
    from variants import BY_NAME

    if not torch.cuda.is_available():
        print("no CUDA GPU: nothing to run")
        return 0
    print(f"{torch.cuda.get_device_name()}  torch {torch.__version__}  prebuilt={prebuilt_dir()}", flush=True)
    only = {s for s in args.only.split(",") if s}
    cases = [c for c in CASES if not only or c.variant in only or BY_NAME[c.variant].example in only or c.id in only]
    variants = sorted({c.variant for c in cases})

    t0 = time.perf_counter()
    build_errors = build_all(variants, args.jobs)
    print(
        f"built {sum(e is None for e in build_errors.values())}/{len(variants)} variants with nvcc "
        f"in {time.perf_counter() - t0:.1f}s",
        flush=True,
    )
    results: dict[str, dict] = {}
    runnable = []
    for c in cases:
        err = build_errors.get(c.variant)
        if err:
            results[c.id] = {"id": c.id, "status": "ERROR", "detail": err[:1500]}
        else:
            runnable.append(c.id)
    for name, err in build_errors.items():
        if err:
            print(f"BUILD-ERROR {name}: {err[:1500]}", flush=True)

    out_dir = os.environ.get("OUT")
    log_path = os.path.join(out_dir, "gpu_checks.log") if out_dir else os.devnull
    t1 = time.perf_counter()
    with open(log_path, "w") as log:
        results.update(run_workers(runnable, args.timeout, args.sanitize, log, args.total - (t1 - t0)))
    print(f"ran {len(runnable)} cases in {time.perf_counter() - t1:.1f}s", flush=True)

    ordered = [results[c.id] for c in cases]
    if out_dir:
        with open(os.path.join(out_dir, "gpu_checks.json"), "w") as f:
            json.dump(ordered, f, indent=1)
    print_table(ordered)
    return 0 if all(r["status"] == "PASS" for r in ordered) else 1


def print_table(rows: list[dict]) -> None:
    """Per variant: passed/total and the first failure, then totals (markdown)."""
    by_variant: dict[str, list[dict]] = {}
    for r in rows:
        by_variant.setdefault(r["id"].split("[")[0], []).append(r)
    print("\n## tilec GPU checks\n")
    print("| variant | passed | status | first failure |")
    print("|---|---|---|---|")
    for name, rs in by_variant.items():
        n_ok = sum(r["status"] == "PASS" for r in rs)
        bad = [r for r in rs if r["status"] != "PASS"]
        first = ""
        if bad:
            b = bad[0]
            first = f"{b['id'][len(name) :]} {b['status']}: {b['detail'][:160]}".replace("|", "/").replace("\n", " ")
        print(f"| {name} | {n_ok}/{len(rs)} | {'PASS' if not bad else 'FAIL'} | {first} |")
    total = sum(r["status"] == "PASS" for r in rows)
    print(f"\n{total}/{len(rows)} cases passed, {len(by_variant)} variants", flush=True)


if __name__ == "__main__":
    sys.exit(main())
