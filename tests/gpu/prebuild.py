"""Generate the `.cu` of every variant (tests/gpu/variants.py) for the GPU machine.

    PYTHONPATH=src python tests/gpu/prebuild.py --out .gpu [--nvcc] [--only gemm,softmax]

Runs here, where the compiler and its dependencies are installed; the GPU machine has none of them,
only torch and nvcc. Writes `<out>/<variant>.cu` for each variant and `<out>/manifest.json` with, per
variant, the example, the defines, the arch, whether it compiled and the error if not (so the GPU
run can say why a file is missing). A variant that fails to compile does not stop the others; the
exit status is 1 if any failed.

`--nvcc` also compiles each generated file with nvcc here (`-arch=sm_90a`, `-Xptxas -v`) in parallel,
records nvcc errors in the manifest, and prints registers / spills / shared memory per kernel:
catches toolchain errors before any device time is spent.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "src"))

from variants import MANIFEST, ROOT, VARIANTS, Variant  # noqa: E402


def generate(v: Variant, out: str) -> tuple[str | None, str | None, float]:
    """(cuda text, error, seconds): the text as `tilec build -o out` writes it (its --include
    headers relative to out's folder)."""
    from tilec import driver
    from tilec.diagnostics import CompileError

    t0 = time.perf_counter()
    try:
        text = driver.compile_file(v.path, dict(v.defines), arch=v.arch)
        headers = [os.path.join(ROOT, h) for h in v.includes]
        text = driver.with_includes(driver.Result(text, ()), headers, out).text
        return text, None, time.perf_counter() - t0
    except CompileError as e:
        return None, _render(e), time.perf_counter() - t0
    except Exception as e:  # noqa: BLE001 - an internal error is reported per variant
        import traceback

        return None, f"internal error: {type(e).__name__}: {e}\n{traceback.format_exc()}", time.perf_counter() - t0


def _render(e: Exception) -> str:
    try:
        from tilec.diagnostics import render

        diags = getattr(e, "diagnostics", None)
        if diags is not None:
            return "\n".join(render(d) for d in diags)
    except Exception:  # noqa: BLE001
        pass
    return str(e)


def nvcc_check(cu: str, arch: str = "sm_90a") -> tuple[bool, str, str]:
    """Compile to an object with ptxas info; (ok, error text, resource summary)."""
    num = arch.removeprefix("sm_")
    cmd = [
        "nvcc",
        "-c",
        "-O3",
        "-std=c++17",
        "-gencode",
        f"arch=compute_{num},code=sm_{num}",
        "-Xptxas",
        "-v",
        "-o",
        os.devnull,
        cu,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    out = proc.stdout + proc.stderr
    if proc.returncode != 0:
        return False, out[-4000:], ""
    summary = []
    for line in out.splitlines():
        m = re.search(r"Function properties for (\w+)", line)
        if m:
            summary.append(m.group(1))
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m and summary:
            summary[-1] += f" stack={m.group(1)} spill_st={m.group(2)} spill_ld={m.group(3)}"
        m = re.search(r"Used (\d+) registers.*?(\d+) bytes smem", line)
        if m and summary:
            summary[-1] += f" regs={m.group(1)} smem={m.group(2)}"
        elif (m := re.search(r"Used (\d+) registers", line)) and summary:
            summary[-1] += f" regs={m.group(1)}"
    warnings = [ln for ln in out.splitlines() if "warning" in ln.lower()]
    return True, "\n".join(warnings), "; ".join(summary)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=".gpu", help="folder for the .cu files (default .gpu, git-ignored)")
    ap.add_argument("--only", default="", help="comma-separated variant or example names")
    ap.add_argument("--nvcc", action="store_true", help="also compile each file with nvcc here")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    args = ap.parse_args()

    only = {s for s in args.only.split(",") if s}
    chosen = [v for v in VARIANTS if not only or v.name in only or v.example in only]
    os.makedirs(args.out, exist_ok=True)
    manifest_path = os.path.join(args.out, MANIFEST)
    manifest: dict[str, dict] = {}
    if only and os.path.exists(manifest_path):  # a partial rebuild keeps the other entries
        with open(manifest_path) as f:
            manifest = json.load(f)

    failed = []
    for v in chosen:
        cu = os.path.join(args.out, f"{v.name}.cu")
        text, err, secs = generate(v, cu)
        entry = {
            "example": v.example,
            "defines": v.defines,
            "arch": v.arch,
            "ok": err is None,
            "seconds": round(secs, 3),
        }
        if err is None:
            tmp = cu + ".tmp"
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(tmp, cu)
        else:
            entry["error"] = err
            failed.append(v.name)
            if os.path.exists(cu):
                os.unlink(cu)  # never leave a stale file to be tested
        manifest[v.name] = entry
        status = "ok " if err is None else "ERR"
        print(f"{status} {v.name:34s} {secs:6.2f}s  {v.describe()}", flush=True)
        if err:  # the manifest keeps it all; the console gets the head, and a traceback's tail
            lines = err.strip().splitlines()
            shown = lines[:1] + lines[-6:] if err.startswith("internal error") and len(lines) > 8 else lines[:40]
            print("    " + "\n    ".join(shown), flush=True)

    if args.nvcc:
        built = [v for v in chosen if manifest[v.name]["ok"]]
        print(f"\nnvcc -arch=sm_90a on {len(built)} files ({args.jobs} jobs)", flush=True)
        with cf.ThreadPoolExecutor(args.jobs) as pool:
            futs = {v.name: pool.submit(nvcc_check, os.path.join(args.out, f"{v.name}.cu")) for v in built}
            for name, fut in futs.items():
                ok, text, summary = fut.result()
                manifest[name]["nvcc_ok"] = ok
                if not ok:
                    manifest[name]["nvcc_error"] = text
                    failed.append(name)
                    print(f"NVCC-ERR {name}\n    " + text.strip().replace("\n", "\n    ")[:3000], flush=True)
                else:
                    manifest[name]["resources"] = summary
                    print(f"nvcc ok  {name:34s} {summary}" + (f"\n    {text}" if text else ""), flush=True)

    with open(manifest_path + ".tmp", "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
    os.replace(manifest_path + ".tmp", manifest_path)
    print(f"\n{len(chosen) - len(set(failed))}/{len(chosen)} variants built into {args.out}/", flush=True)
    if failed:
        print("failed: " + ", ".join(sorted(set(failed))), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
