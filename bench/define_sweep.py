"""Every example built at -D values around its candidate sets, for sm_80, sm_90a and gfx90a: no
build may end in an internal error (exit 2). A value a target cannot take must be a diagnostic
(exit 1); the sweep found `-D block_N=80` of flash_attention.tile at sm_90a an internal error.

    .venv/bin/python bench/define_sweep.py [--per-target 40] [--jobs 2] [--seed 1]

Tile sizes (params named block*, and dim) take 16 .. 256, num_stages 1 .. 5, threads 64 .. 512;
each build sets a random subset of an example's such params. Prints each internal error, then
the count; exit status 1 if there was one.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TILEC = os.path.join(ROOT, ".venv", "bin", "tilec")
ARCHES = ("sm_80", "sm_90a", "gfx90a")
BLOCKS = (16, 32, 48, 64, 80, 96, 128, 160, 192, 256)


def values(name: str) -> tuple[int, ...] | None:
    low = name.lower()
    if "stage" in low:
        return (1, 2, 3, 4, 5)
    if low == "threads":
        return (64, 128, 192, 256, 384, 512)
    if low.startswith("block") or low == "dim":
        return BLOCKS
    return None


def jobs(per_target: int, rng: random.Random) -> list[tuple[str, str, tuple[tuple[str, int], ...]]]:
    out = set()
    for ex in sorted(f for f in os.listdir(os.path.join(ROOT, "examples")) if f.endswith(".tile")):
        text = open(os.path.join(ROOT, "examples", ex), encoding="utf-8").read()
        tunable = [(n, v) for n in re.findall(r"^param (\w+) =", text, re.M) if (v := values(n))]
        for arch in ARCHES:
            for _ in range(per_target):
                picked = {n: rng.choice(v) for n, v in tunable if rng.random() < 0.6}
                out.add((ex, arch, tuple(sorted(picked.items()))))
    return sorted(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--per-target", type=int, default=40, help="random -D sets per example and target")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    todo = jobs(args.per_target, random.Random(args.seed))
    print(f"{len(todo)} builds", flush=True)
    with tempfile.TemporaryDirectory() as out:

        def build(i_job):
            i, (ex, arch, defines) = i_job
            cmd = [TILEC, "build", os.path.join(ROOT, "examples", ex), "--arch", arch, "--no-cache"]
            cmd += ["-o", os.path.join(out, f"{i}.cu")] + [a for n, v in defines for a in ("-D", f"{n}={v}")]
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
            return ex, arch, defines, p.returncode, p.stderr

        bad = 0
        with ThreadPoolExecutor(args.jobs) as pool:
            for ex, arch, defines, rc, err in pool.map(build, enumerate(todo)):
                if rc not in (0, 1):
                    bad += 1
                    flags = " ".join(f"-D {n}={v}" for n, v in defines)
                    print(f"INTERNAL ERROR (exit {rc}): {ex} --arch {arch} {flags}\n{err[-800:]}", flush=True)
    print(f"{len(todo)} builds, {bad} internal errors", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
