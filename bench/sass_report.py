"""Registers, spills and tensor-core instructions of prebuilt kernels, without a GPU.

    python3 bench/sass_report.py [--dir .gpu] [--arch sm_90a] [--only a,b] [--jobs 2]

For each `<dir>/<variant>.cu` whose manifest entry was generated for `--arch`, nvcc builds a cubin
for that arch (`-Xptxas -v`: registers and spill bytes per kernel) and cuobjdump lists its SASS,
from which the report counts wgmma (HGMMA for 16-bit types, IGMMA for int8, QGMMA for fp8),
mma.sync (HMMA, IMMA, QMMA) and the instructions of the longest loop. A warp-role kernel whose
products ran on mma.sync, or spills where it had none, shows here before it costs device time.
cuobjdump and nvdisasm are not in the CUDA toolkit of this machine; pip's `nvidia-cuda-cuobjdump`
and `nvidia-cuda-nvdisasm` wheels carry them (put their `bin/` on PATH). Standard library only.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

NVCC = os.environ.get("NVCC", "nvcc")
_PROPERTIES = re.compile(r"Function properties for (\w+)")
_SPILL = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")
_REGS = re.compile(r"Used (\d+) registers")
_FUNCTION = re.compile(r"\s+Function : (\w+)")
_INSTR = re.compile(r"\s+/\*([0-9a-f]{4,})\*/\s+(.*?);")


def ptxas_info(log: str) -> dict[str, dict]:
    """Per function: registers and spill stores/loads in bytes, from `-Xptxas -v` output (each
    function's lines follow its "Function properties for")."""
    out: dict[str, dict] = {}
    name = None
    for line in log.splitlines():
        if m := _PROPERTIES.search(line):
            name = m.group(1)
            out[name] = {}
        elif name and (m := _SPILL.search(line)):
            out[name].update(spill_stores=int(m.group(1)), spill_loads=int(m.group(2)))
        elif name and (m := _REGS.search(line)):
            out[name]["registers"] = int(m.group(1))
    return out


def sass_counts(sass: str) -> dict[str, dict]:
    """Per kernel: wgmma (HGMMA, IGMMA, QGMMA) and mma.sync (HMMA, IMMA, QMMA) counts and the
    instruction count of its longest loop: the span of its longest backward branch, which is the
    outermost loop (a persistent kernel's tile walk; its main loop is shorter)."""
    out: dict[str, dict] = {}
    name, instrs = None, []

    def close() -> None:
        if name is None:
            return
        ops = [text.split()[1] if text.startswith("@") else text.split()[0] for _, text in instrs]
        loop = 0
        for addr, text in instrs:
            if (m := re.search(r"\bBRA(?:\.\w+)*\s.*?(0x[0-9a-f]+)\s*$", text)) and int(m.group(1), 16) < addr:
                loop = max(loop, (addr - int(m.group(1), 16)) // 16 + 1)
        out[name] = {
            "wgmma": sum(op.startswith(("HGMMA", "IGMMA", "QGMMA")) for op in ops),
            "mma_sync": sum(op.startswith(("HMMA", "IMMA", "QMMA")) for op in ops),
            "instructions": len(ops),
            "longest_loop": loop,
        }

    for line in sass.splitlines():
        if m := _FUNCTION.match(line):
            close()
            name, instrs = m.group(1), []
        elif m := _INSTR.match(line):
            instrs.append((int(m.group(1), 16), m.group(2).strip()))
    close()
    return out


def report(path: str, arch: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        cubin = os.path.join(tmp, "k.cubin")
        build = subprocess.run(
            [NVCC, "-cubin", f"-arch={arch}", "-O3", "-std=c++17", "-Xptxas", "-v", path, "-o", cubin],
            capture_output=True,
            text=True,
        )
        if build.returncode != 0:
            return {"error": build.stderr.strip()[-400:]}
        kernels = ptxas_info(build.stderr)
        dump = subprocess.run(["cuobjdump", "--dump-sass", cubin], capture_output=True, text=True)
        if dump.returncode != 0:
            return {"error": "cuobjdump: " + dump.stderr.strip()[-400:]}
        for name, counts in sass_counts(dump.stdout).items():
            kernels.setdefault(name, {}).update(counts)
        return {"kernels": kernels}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default=".gpu", help="prebuilt folder (tests/gpu/prebuild.py --out)")
    ap.add_argument("--arch", default="sm_90a")
    ap.add_argument("--only", default="", help="comma-separated variants")
    ap.add_argument("--jobs", type=int, default=2, help="nvcc builds at once")
    ap.add_argument("--json", default="", help="also write the report here")
    args = ap.parse_args()
    if shutil.which("cuobjdump") is None:
        print("cuobjdump not found: pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm, put their bin/ on PATH")
        return 2
    with open(os.path.join(args.dir, "manifest.json"), encoding="utf-8") as f:
        manifest = json.load(f)
    only = {v for v in args.only.split(",") if v}
    wanted = (v for v, e in manifest.items() if e.get("ok") and e.get("arch") == args.arch)
    names = sorted(v for v in wanted if not only or v in only)
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        results = dict(zip(names, pool.map(lambda v: report(os.path.join(args.dir, f"{v}.cu"), args.arch), names)))
    print("| variant | kernel | registers | spills, stores / loads (B) | wgmma | mma.sync | instructions |", end="")
    print(" longest loop |")
    print("|---|---|---|---|---|---|---|---|")
    for v, r in results.items():
        if "error" in r:
            print(f"| {v} | BUILD ERROR | {r['error'][:120]} | | | | | |")
            continue
        for k, c in r["kernels"].items():
            spills = f"{c.get('spill_stores', 0)} / {c.get('spill_loads', 0)}"
            print(
                f"| {v} | {k} | {c.get('registers', '')} | {spills} | {c.get('wgmma', '')} | {c.get('mma_sync', '')} "
                f"| {c.get('instructions', '')} | {c.get('longest_loop', '')} |"
            )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=1)
    return 0 if all("error" not in r for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
