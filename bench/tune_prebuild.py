"""Build every candidate of the tuning programs for the GPU machine: `bench/tune_all.py` times them.

    PYTHONPATH=src python bench/tune_prebuild.py --out .tune [--only swiglu,gemm] [-j 2]

Runs here, where the compiler is installed (the GPU machine has only torch, nvcc and
tilec.runtime). Per program of PROGRAMS, at its shape on sm_90a: the model's ranking (what
`tilec tune` recommends, its contenders being what `tilec tune --measure` would time), and every
point of the candidate sets compiled through the whole pipeline into `<out>/<program>/<n>.cu`.
`<out>/manifest.json` lists per program the shape, the default configuration's file (the
reference every candidate is checked against), the model's choice and contenders ("model_top"), and per candidate
its -D values, its file (or the compile error) and the model's verdict (rank or pruning reason).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MANIFEST = "manifest.json"
ARCH = "sm_90a"
TOP = 4  # tilec tune's default --top


@dataclass(frozen=True, slots=True)
class Program:
    name: str
    path: str  # relative to the checkout
    shape: Mapping[str, int]
    # how tune_all reports the tuned speed: "memory" (bandwidth against the copy bandwidth of the
    # same run), or the torch operation it is timed against (bench/tune_all.py's `_peer_calls`), or "" (none)
    against: str = "memory"


# Programs written as a user first would (bench/programs/): issue 16's table.
USER_PROGRAMS = (
    Program("swiglu", "bench/programs/tune/swiglu.tile", {"M": 4096, "N": 8192}),
    Program("row_lse", "bench/programs/tune/row_lse.tile", {"M": 4096, "N": 8192}),
    Program("bmm_bias", "bench/programs/bmm_bias.tile", {"Batch": 8, "M": 2048, "N": 2048, "K": 2048}, "baddbmm"),
    Program("attention", "bench/programs/tune/attention.tile", {"B": 4, "H": 32, "S": 4096}, "sdpa"),
    Program("linear", "bench/programs/tune/linear.tile", {"M": 4096, "N": 8192, "K": 8192}, "linear"),
)

# Every example, at a shape it is meant for.
EXAMPLES = (
    Program("gemm", "examples/gemm.tile", {"M": 8192, "N": 8192, "K": 8192}, "matmul"),
    Program("gemm_relu", "examples/gemm_relu.tile", {"M": 8192, "N": 8192, "K": 8192}, "matmul_relu"),
    Program("gemm_int8", "examples/gemm_int8.tile", {"M": 8192, "N": 8192, "K": 8192}, "int_mm"),
    Program("gemm_splitk", "examples/gemm_splitk.tile", {"M": 2048, "N": 2048, "K": 8192}, "matmul"),
    Program(
        "dequant_gemm", "examples/dequant_gemm.tile", {"M": 4096, "N": 8192, "K": 8192, "K_packed": 4096}, "dequant"
    ),
    Program("flash_attention", "examples/flash_attention.tile", {"B": 4, "H": 32, "S": 4096}, "sdpa"),
    Program("mla_decode", "examples/mla_decode.tile", {"B": 32, "H": 128, "S": 8192}, ""),
    Program("softmax", "examples/softmax.tile", {"M": 16384, "N": 8192}),
    Program("rmsnorm", "examples/rmsnorm.tile", {"M": 16384, "N": 8192}),
    Program("layernorm", "examples/layernorm.tile", {"M": 16384, "N": 8192}),
    Program("elementwise_add", "examples/elementwise_add.tile", {"N": 1 << 28}),
    Program("conv1d_halo", "examples/conv1d_halo.tile", {"B": 8, "L": 8192, "C": 1024}),
    Program("stencil", "examples/stencil.tile", {"H": 8192, "W": 8192}),
)

PROGRAMS = USER_PROGRAMS + EXAMPLES


def compile_one(path: str, defines: Mapping[str, str], arch: str) -> tuple[str | None, str | None]:
    """(CUDA text, None) or (None, the first diagnostic)."""
    from tilec import driver
    from tilec.diagnostics import CompileError

    try:
        return driver.compile_file(path, dict(defines), arch), None
    except CompileError as e:
        return None, e.diagnostics[0].message


def model_ranking(p: Program, path: str, arch: str) -> tuple[list[str], int, dict[str, str]]:
    """(the ranked labels, best first; how many of them `tilec tune --measure` would time, its
    contenders; label -> why the model pruned it)."""
    from tilec import driver
    from tilec.tune import search

    base = driver.elaborate(path, {}, arch)
    r = search.tune(search.Request(path, {}, arch, None, [dict(p.shape)], top=TOP, band=search.BAND), base)[0]
    return [c.label for c in r.ranked], r.contenders, {c.label: c.pruned or "" for c in r.pruned}


def candidates(path: str, arch: str) -> list[tuple[dict[str, str], bool]]:
    """Every point of the file's candidate sets (-D values, whether it is the default build's)."""
    from tilec import driver
    from tilec.tune import space

    sets = driver.elaborate(path, {}, arch).candidate_sets
    return [(dict(point), default) for point, default in space.points(sets, {})]


def label(defines: Mapping[str, str]) -> str:
    """As tilec tune prints a configuration (space.Candidate.label)."""
    return " ".join(f"{k}={v}" for k, v in defines.items()) or "(no candidate sets)"


def build_program(p: Program, root: str, out: str, arch: str, jobs: int) -> dict:
    """Write the program's candidates under `out`; its manifest entry."""
    path = os.path.join(root, p.path)
    ranked, contenders, pruned = model_ranking(p, path, arch)
    points = candidates(path, arch)
    folder = os.path.join(out, p.name)
    os.makedirs(folder, exist_ok=True)
    args = ([path] * len(points), [d for d, _ in points], [arch] * len(points))
    if jobs <= 1:
        built = list(map(compile_one, *args))
    else:
        with ProcessPoolExecutor(jobs) as pool:
            built = list(pool.map(compile_one, *args))
    entries = [_entry(p.name, folder, i, d, default, built[i], ranked, pruned) for i, (d, default) in enumerate(points)]
    reference = next(e["cu"] for e in entries if e["default"])
    return {
        "name": p.name, "source": p.path, "arch": arch, "shape": dict(p.shape), "reference": reference,
        "against": p.against,
        "model_choice": ranked[0] if ranked else None, "model_top": ranked[:contenders], "candidates": entries,
    }  # fmt: skip


def _entry(name, folder, i, defines, default, built, ranked, pruned) -> dict:
    text, error = built
    lab = label(defines)
    entry = {"label": lab, "defines": defines, "default": default, "cu": None, "error": error}
    entry |= {"model_rank": ranked.index(lab) + 1 if lab in ranked else None, "pruned": pruned.get(lab)}
    if text is not None:
        entry["cu"] = f"{name}/{i}.cu"
        with open(os.path.join(folder, f"{i}.cu"), "w", encoding="utf-8") as f:
            f.write(text)
    return entry


def prebuild(programs: Sequence[Program], root: str, out: str, arch: str = ARCH, jobs: int = 1) -> dict:
    """Build `programs` into `out` and write its manifest; the manifest."""
    os.makedirs(out, exist_ok=True)
    manifest = {"arch": arch, "programs": []}
    for p in programs:
        entry = build_program(p, root, out, arch, jobs)
        built = sum(c["cu"] is not None for c in entry["candidates"])
        print(f"{p.name}: {built}/{len(entry['candidates'])} candidates built, model choice {entry['model_choice']}")
        manifest["programs"].append(entry)
    with open(os.path.join(out, MANIFEST), "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=1)
    return manifest


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=".tune", help="folder for the .cu files and the manifest (git-ignored)")
    ap.add_argument("--only", default="", help="comma-separated program names")
    ap.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args(argv)
    only = {s for s in args.only.split(",") if s}
    chosen = [p for p in PROGRAMS if not only or p.name in only]
    prebuild(chosen, ROOT, args.out, ARCH, args.jobs)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, os.path.join(ROOT, "src"))
    sys.exit(main())
