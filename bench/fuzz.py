"""Mutation fuzzing of the whole compiler: `make fuzz` runs 10,000 mutants, the test suite a few.

    PYTHONPATH=src python bench/fuzz.py [--mutants 10000] [--jobs N] [--budget 10] [--memory 4]
                                        [--nvcc 300] [--out build/fuzz] [--seed tilec-fuzz]

Mutant i is example i mod 13 (examples/*.tile), mutated by `mutate` with a generator seeded
`{seed}:{i}` (lines and tokens deleted, duplicated, swapped, cut or replaced; names and numbers
swapped for others), and built as `tilec build` builds it for sm_80, sm_90a or gfx90a in turn:
elaborated, every pass, the emitter, clang-format. Each mutant ends as one of

    compiled     the build produced its text
    diagnostic   a CompileError whose diagnostics render (what a user should see)
    internal     any other exception (the traceback a user would see), or a crash of the build
    over budget  still running after --budget seconds, or past --memory GiB

The builds run in worker processes (`--jobs`, one per core by default), each under an address-space
limit; a worker that overruns the budget is killed and a fresh one goes on with the next mutant, so a
hang in C code is caught too. Then a sample of --nvcc compiled CUDA mutants (seeded) is built again
and compiled by nvcc into cubins: each must compile (an accepted program nvcc rejects is a tilec bug).
Every failure is written to --out (the mutant, its arch and what went wrong) to be reproduced with
`tilec build FILE --arch ARCH`. Exit status 0 only when no mutant is internal or over budget and
every sampled one compiled.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import queue
import random
import re
import subprocess
import sys
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = sorted(
    os.path.join("examples", f) for f in os.listdir(os.path.join(ROOT, "examples")) if f.endswith(".tile")
)
ARCHES = ("sm_80", "sm_90a", "gfx90a")
MARK = "@@fuzz "
OUTCOMES = ("compiled", "diagnostic", "internal", "over budget")

# ---------------------------------------------------------------- the mutator

TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\d+\.\d*|\d+|\*\*|//|[-+*/%<>=!]=?|[()\[\],:.]|\n[ ]*|\"[^\"\n]*\"")
SPARE = [
    "(", ")", ":", ",", "[", "]", "=", "0", "-1", "1e9", "2 ** 40", "float16", "x", "A", "for", "if",
    "Parallel(", "alloc_shared(", "copy", "gemm", "\n", "\n    ", "\n        ", "import", "macro", "'s'",
    "True", "/", "//", "not", "Kernel", "**", "1 << 70", "-",
]  # fmt: skip
NUMBERS = ["0", "1", "3", "33", "1024", "100000", "0.5", "-1"]
NAMES = ["float16", "int32", "copy", "gemm", "Parallel"]


def tokens(text: str) -> list[str]:
    """`text` cut into tokens and the text between them (joined, they give `text` back)."""
    out, pos = [], 0
    for m in TOKEN.finditer(text):
        if m.start() > pos:
            out.append(text[pos : m.start()])
        out.append(m.group())
        pos = m.end()
    out.append(text[pos:])
    return out


def mutate(text: str, rng: random.Random) -> str:
    """One mutant of `text`: a line edit (30%), a retargeting (keep the syntax, change the
    meaning), or one to three token edits."""
    if rng.random() < 0.3:
        lines = text.split("\n")
        _edit(lines, rng, lambda s: s[: rng.randrange(len(s) + 1)])  # or cut a line short
        return "\n".join(lines)
    toks = tokens(text)
    if rng.random() < 0.4:
        return _retarget(toks, rng)
    for _ in range(rng.randint(1, 3)):
        if not toks:
            break
        _edit(toks, rng, lambda _: rng.choice(SPARE))  # or replace a token
    return "".join(toks)


def _edit(items: list[str], rng: random.Random, replaced: Callable[[str], str]) -> None:
    """One edit of `items` at a random place: delete, duplicate another, swap with another, or
    replace by `replaced` of it."""
    i, j = rng.randrange(len(items)), rng.randrange(len(items))
    match rng.randrange(4):
        case 0:
            del items[i]
        case 1:
            items.insert(i, items[j])
        case 2:
            items[i], items[j] = items[j], items[i]
        case _:
            items[i] = replaced(items[i])


def _retarget(toks: list[str], rng: random.Random) -> str:
    """Names swapped for other names of the file (or built-ins), numbers for awkward ones."""
    names = [t for t in toks if t[:1].isalpha() or t[:1] == "_"] + NAMES
    for _ in range(rng.randint(1, 3)):
        i = rng.randrange(len(toks))
        tok = toks[i]
        if tok[:1].isalpha() or tok[:1] == "_":
            toks[i] = rng.choice(names)
        elif tok[:1].isdigit():
            toks[i] = rng.choice(NUMBERS)
    return "".join(toks)


@dataclass(frozen=True, slots=True)
class Mutant:
    index: int
    source: str  # the example it was made from, relative to the checkout
    arch: str
    text: str


def mutant(i: int, seed: str) -> Mutant:
    """Mutant `i` of the run seeded `seed` (the same in every process)."""
    source = EXAMPLES[i % len(EXAMPLES)]
    arch = ARCHES[(i // len(EXAMPLES)) % len(ARCHES)]
    return Mutant(i, source, arch, mutate(_example(source), random.Random(f"{seed}:{i}")))


@functools.cache
def _example(source: str) -> str:
    with open(os.path.join(ROOT, source), encoding="utf-8") as f:
        return f.read()


# ---------------------------------------------------------------- one build


def build(m: Mutant) -> tuple[str, str]:
    """(outcome, detail): the text on "compiled", the rendered diagnostics or the traceback."""
    from tilec import driver
    from tilec.diagnostics import CompileError, render_all
    from tilec.elaborate import elaborate_file

    try:
        program = elaborate_file(m.source, {}, text=m.text, arch=m.arch)
        return "compiled", driver.compile_program_text(program, m.arch)
    except CompileError as e:
        if not e.diagnostics:
            return "internal", "CompileError without diagnostics"
        return "diagnostic", render_all(e.diagnostics)
    except MemoryError:
        return "over budget", "MemoryError"
    except Exception:  # noqa: BLE001 - what is being looked for
        return "internal", traceback.format_exc()


def worker(start: int, stop: int, step: int, seed: str, memory_gib: float) -> int:
    """Build mutants start, start + step, ... < stop, writing a mark line before and a result line
    after each to the original stdout; whatever a build prints goes to stderr instead."""
    import resource

    limit = int(memory_gib * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    os.chdir(ROOT)
    marks = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # a build's own prints cannot run into a mark line
    sys.stdout = sys.stderr
    for i in range(start, stop, step):
        marks.write(MARK + json.dumps({"start": i}) + "\n")
        marks.flush()
        outcome, detail = build(mutant(i, seed))
        keep = detail if outcome in ("internal", "over budget") else ""
        marks.write(MARK + json.dumps({"done": i, "outcome": outcome, "detail": keep[-4000:]}) + "\n")
        marks.flush()
    return 0


# ---------------------------------------------------------------- the run


@dataclass
class Result:
    index: int
    outcome: str
    detail: str = ""
    seconds: float = 0.0


def run_lane(lane: int, lanes: int, n: int, seed: str, budget: float, memory: float) -> list[Result]:
    """Mutants lane, lane + lanes, ... < n through worker processes, restarting after an overrun."""
    results: list[Result] = []
    nxt = lane
    while nxt < n:
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", f"{nxt}:{n}:{lanes}", "--seed", seed]
        cmd += ["--memory", str(memory)]
        env = {**os.environ, "PYTHONPATH": os.path.join(ROOT, "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
        # its own session: killing the group takes a hung clang-format child with it
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env, start_new_session=True
        )
        lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=_pump, args=(proc, lines), daemon=True).start()
        current, started, began = None, time.monotonic(), False
        while True:
            wait = started + budget - time.monotonic() if current is not None else 120.0
            try:
                line = lines.get(timeout=max(0.0, wait))
            except queue.Empty:
                line = "overrun"
            if line == "overrun" or line is None:
                _kill(proc)
                if current is not None:  # it overran or crashed on `current`: record it, go on after it
                    if line == "overrun":
                        results.append(Result(current, "over budget", f"over {budget:g} s", time.monotonic() - started))
                    else:  # a crash a user would see (a signal, or an exit without a result)
                        why = f"the worker died (exit {proc.returncode})"
                        results.append(Result(current, "internal", why, time.monotonic() - started))
                    nxt = current + lanes
                elif not began and nxt < n:
                    raise RuntimeError(f"a fuzz worker ended before its first mutant: {' '.join(cmd)}")
                break
            msg = json.loads(line)
            if "start" in msg:
                current, started, began = msg["start"], time.monotonic(), True
            else:
                results.append(Result(msg["done"], msg["outcome"], msg["detail"], time.monotonic() - started))
                current, nxt = None, msg["done"] + lanes
    return results


def _kill(proc: subprocess.Popen) -> None:
    """Kill the worker and every process it started."""
    import signal

    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def _pump(proc: subprocess.Popen, lines: queue.Queue) -> None:
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith(MARK):
            lines.put(line[len(MARK) :])
    lines.put(None)


def run(n: int, jobs: int, seed: str, budget: float, memory: float) -> list[Result]:
    """All `n` mutants over `jobs` lanes, sorted by index."""
    out: list[list[Result]] = [[] for _ in range(jobs)]

    def lane(k: int) -> None:
        out[k] = run_lane(k, jobs, n, seed, budget, memory)

    threads = [threading.Thread(target=lane, args=(k,)) for k in range(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sorted((r for rs in out for r in rs), key=lambda r: r.index)


def nvcc_sample(results: Sequence[Result], count: int, seed: str, folder: str, jobs: int) -> list[tuple[int, str]]:
    """(index, nvcc's error) for each of a seeded sample of `count` compiled CUDA mutants that nvcc
    rejects; the sample is built again here (the build is deterministic)."""
    from concurrent.futures import ThreadPoolExecutor

    from tilec import toolchain

    cuda = [r.index for r in results if r.outcome == "compiled" and not mutant(r.index, seed).arch.startswith("gfx")]
    chosen = sorted(random.Random(f"{seed}:nvcc").sample(cuda, min(count, len(cuda))))
    os.makedirs(folder, exist_ok=True)

    def one(i: int) -> tuple[int, str] | None:
        m = mutant(i, seed)
        outcome, text = build(m)
        if outcome != "compiled":
            return i, f"the second build ended {outcome}: not deterministic"
        cu = os.path.join(folder, f"nvcc-{i}.cu")
        with open(cu, "w", encoding="utf-8") as f:
            f.write(text)
        try:
            toolchain.compile_cubin(cu, cu[:-3] + ".cubin", m.arch)
        except toolchain.ToolchainError as e:
            return i, str(e)
        os.unlink(cu)
        os.unlink(cu[:-3] + ".cubin")
        return None

    with ThreadPoolExecutor(jobs) as pool:
        failed = [f for f in pool.map(one, chosen) if f]
    print(f"nvcc: {len(chosen) - len(failed)}/{len(chosen)} sampled compiled mutants compiled", flush=True)
    return failed


def report(results: Sequence[Result], failed_nvcc: Sequence[tuple[int, str]], seed: str, folder: str) -> str:
    """The summary table; every internal, over-budget and nvcc failure written under `folder`."""
    counts = Counter(r.outcome for r in results)
    by_source = Counter((mutant(r.index, seed).source, r.outcome) for r in results)
    lines = ["| example | " + " | ".join(OUTCOMES) + " |", "|---|" + "---|" * len(OUTCOMES)]
    for src in EXAMPLES:
        lines.append(f"| {src} | " + " | ".join(str(by_source[src, o]) for o in OUTCOMES) + " |")
    lines.append("| all | " + " | ".join(f"**{counts[o]}**" for o in OUTCOMES) + " |")
    slowest = max(results, key=lambda r: r.seconds, default=None)
    if slowest:
        lines.append(f"\nslowest: mutant {slowest.index} ({slowest.outcome}), {slowest.seconds:.2f} s")
    bad = [(r.index, r.outcome, r.detail) for r in results if r.outcome in ("internal", "over budget")]
    bad += [(i, "nvcc", err) for i, err in failed_nvcc]
    if bad:
        os.makedirs(folder, exist_ok=True)
    for i, what, detail in bad:
        m = mutant(i, seed)
        stem = os.path.join(folder, f"{what.replace(' ', '_')}-{i}")
        with open(stem + ".tile", "w", encoding="utf-8") as f:
            f.write(m.text)
        with open(stem + ".txt", "w", encoding="utf-8") as f:
            f.write(f"mutant {i} of {m.source}, --arch {m.arch}: {what}\n\n{detail}\n")
        lines.append(f"{what}: {stem}.tile (--arch {m.arch})")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mutants", type=int, default=10000)
    ap.add_argument("--jobs", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--budget", type=float, default=10.0, help="seconds one build may take")
    ap.add_argument("--memory", type=float, default=4.0, help="GiB of address space one worker may use")
    ap.add_argument("--nvcc", type=int, default=300, help="compiled CUDA mutants to compile with nvcc")
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "fuzz"), help="folder for the failures")
    ap.add_argument("--seed", default="tilec-fuzz")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        start, stop, step = map(int, args.worker.split(":"))
        return worker(start, stop, step, args.seed, args.memory)
    os.chdir(ROOT)  # mutants import their examples' neighbours by relative paths
    t0 = time.monotonic()
    results = run(args.mutants, max(1, args.jobs), args.seed, args.budget, args.memory)
    print(f"{len(results)} mutants built in {time.monotonic() - t0:.0f} s on {args.jobs} workers", flush=True)
    failed = nvcc_sample(results, args.nvcc, args.seed, args.out, max(1, args.jobs)) if args.nvcc else []
    print(report(results, failed, args.seed, args.out), end="")
    counts = Counter(r.outcome for r in results)
    return 1 if counts["internal"] or counts["over budget"] or failed or len(results) != args.mutants else 0


if __name__ == "__main__":
    sys.path.insert(0, os.path.join(ROOT, "src"))
    sys.exit(main())
