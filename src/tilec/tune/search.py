"""`tilec tune`'s search: enumerate, prune, rank by the model, compile the best, optionally measure.

    tune(Request("examples/gemm.tile", {}, "sm_90a", None, [{"M": 8192, "N": 8192, "K": 8192}]))
  -> [ShapeResult(shape, ranked=(Candidate(block_K=32 ...), ...), contenders=1, pruned=(...))]

Per shape every point of space.points is elaborated with the shape's dimensions fixed and
analysed (space.analyse), then pruned against the others (space.prune_relative) and ranked by the
modelled time. The contenders go through the whole pipeline as `tilec build --tuned` will compile
them (dimensions symbolic, lowering and barriers included), in parallel over `jobs` processes; a
point that fails there is pruned with its error and the next one is compiled in its place. The
contenders are the best `top`, and with a `band` every point the model puts within that fraction
of its best (at most MAX_CONTENDERS): points it cannot tell apart are all measured.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace

from tilec import driver, tir
from tilec.diagnostics import CompileError, Diagnostic
from tilec.source import SourceFile, Span
from tilec.tune import space
from tilec.tune.peaks import GPU, gpu_for_arch
from tilec.tune.space import Candidate, Point


@dataclass(frozen=True, slots=True)
class Request:
    path: str
    defines: Mapping[str, str]  # -D: fixed params (and anything else the build takes)
    arch: str
    gpu: str | None  # a peaks.GPUS key; None: the arch's
    shapes: Sequence[Mapping[str, int]]
    top: int = 4  # how many of the best go through the whole pipeline (at least)
    jobs: int = 1  # processes for that
    band: float = 0.0  # and every point modelled within (1 + band) x the best's time (module docstring)


BAND = 0.15  # tilec tune --measure's default band: points within 15% of the model's best are measured too
# Contenders at most, however flat the model's ranking: measuring each costs a compile and a timing.
MAX_CONTENDERS = 16


@dataclass(frozen=True, slots=True)
class ShapeResult:
    shape: Mapping[str, int]
    ranked: tuple[Candidate, ...]  # compiled and modelled, best first
    contenders: int  # the first this many of `ranked` went through the whole pipeline: what is measured
    pruned: tuple[Candidate, ...]  # in enumeration order, each with its reason

    @property
    def best(self) -> Candidate | None:
        return self.ranked[0] if self.ranked else None

    @property
    def default(self) -> Candidate | None:
        return next((c for c in (*self.ranked, *self.pruned) if c.default), None)


# ---------------------------------------------------------------- shapes on the command line


def parse_shape(text: str, dims: Sequence[str]) -> dict[str, tuple[int, int]]:
    """`M=1..16384,N=8192,K=8192` -> {"M": (1, 16384), "N": (8192, 8192), ...}: every symbolic
    dimension of the kernels once, each a positive int or a range LO..HI of them (buckets.py);
    errors point into the option's text."""
    line = f"--shape {text}"
    source, at = SourceFile("<command line>", line), len("--shape ")
    shape: dict[str, tuple[int, int]] = {}
    for item in text.split(","):
        span = Span(source, at, at + max(1, len(item)))
        at += len(item) + 1
        name, eq, value = item.partition("=")
        name = name.strip()
        if not eq or not name:
            raise _located(span, f"--shape: expected NAME=SIZE, not '{item}'", "write --shape M=8192,N=8192")
        if name not in dims:
            raise _located(span, f"--shape: no symbolic dimension is named '{name}'", _dims_hint(dims))
        shape[name] = _size_range(name, value, span)
    missing = [d for d in dims if d not in shape]
    if missing:
        end = Span(source, len(line), len(line) + 1)
        raise _located(end, f"--shape gives no size for {', '.join(missing)}", _dims_hint(dims))
    return shape


def _size_range(name: str, value: str, span: Span) -> tuple[int, int]:
    """`8192` -> (8192, 8192); `1..16384` -> (1, 16384)."""
    lo, dots, hi = value.partition("..")
    ends = (lo, hi) if dots else (value, value)
    if not all(e.strip().isdigit() and int(e) >= 1 for e in ends):
        what = "a positive integer or a range LO..HI" if dots else "a positive integer"
        raise _located(span, f"--shape: the size of {name} must be {what}, not '{value}'")
    if int(ends[0]) > int(ends[1]):
        raise _located(span, f"--shape: the range of {name} is empty ({value})", "write LO..HI with LO <= HI")
    return int(ends[0]), int(ends[1])


def _dims_hint(dims: Sequence[str]) -> str:
    return (
        f"the kernels' symbolic dimensions are {', '.join(dims)}" if dims else "the kernels have no symbolic dimensions"
    )


def _located(span: Span, message: str, hint: str | None = None) -> CompileError:
    return CompileError([Diagnostic(span, message, hint=hint)])


def dimensions(program: tir.Program) -> list[str]:
    """The symbolic dimensions of every kernel, in order of first appearance."""
    return list(dict.fromkeys(d.name for k in program.kernels for d in k.dims))


# ---------------------------------------------------------------- the search


def tune(req: Request, base: tir.Program) -> list[ShapeResult]:
    """Every shape of `req` searched (`base`: the default build, elaborated with `req.defines`)."""
    gpu = gpu_for_arch(req.arch, req.gpu)
    pts = space.points(base.candidate_sets, req.defines)
    compiled: dict[Point, str | None] = {}  # the whole pipeline's verdict, shared by the shapes
    return [_tune_shape(req, gpu, pts, shape, compiled) for shape in req.shapes]


def _tune_shape(
    req: Request, gpu: GPU, pts: list[tuple[Point, bool]], shape: Mapping[str, int], compiled: dict[Point, str | None]
) -> ShapeResult:
    cands = space.prune_relative([_analysed(req, gpu, p, d, shape) for p, d in pts])
    alive = sorted(
        (c for c in cands if c.pruned is None), key=lambda c: (c.seconds, not c.default)
    )  # ties: the default
    ranked, n = _compile_best(req, alive, compiled, contenders(alive, req.top, req.band))
    verdicts = {c.point: c for c in ranked}
    pruned = [c if c.pruned else replace(c, pruned=compiled[c.point]) for c in cands if c.point not in verdicts]
    return ShapeResult(shape, tuple(ranked), n, tuple(c for c in pruned if c.pruned))


def contenders(alive: Sequence[Candidate], top: int, band: float) -> int:
    """How many of `alive` (best first) to compile and measure: `top`, or all that the model puts
    within (1 + band) x the best's time, at most MAX_CONTENDERS (but never fewer than `top`)."""
    if not alive:
        return 0
    close = sum(1 for c in alive if c.seconds <= alive[0].seconds * (1 + band))
    return max(top, min(close, MAX_CONTENDERS))


def _analysed(req: Request, gpu: GPU, point: Point, default: bool, shape: Mapping[str, int]) -> Candidate:
    defines = {**req.defines, **dict(point), **{k: str(v) for k, v in shape.items()}}
    try:
        program = driver.elaborate(req.path, defines, req.arch)
    except CompileError as e:
        return Candidate(point, default, f"compile error: {e.diagnostics[0].message}")
    return space.analyse(program, point, default, req.arch, gpu)


def _compile_best(
    req: Request, alive: list[Candidate], compiled: dict[Point, str | None], wanted: int
) -> tuple[list[Candidate], int]:
    """The best `wanted` of `alive` that the whole pipeline compiles (verdicts into `compiled`), the
    rest of `alive` following, modelled but not compiled; and how many were compiled."""
    good: list[Candidate] = []
    queue = list(alive)
    while queue and len(good) < wanted:
        batch, queue = queue[: wanted - len(good)], queue[wanted - len(good) :]
        todo = [c.point for c in batch if c.point not in compiled]
        for point, verdict in zip(todo, _compile_all(req, todo), strict=True):
            compiled[point] = verdict
        good += [c for c in batch if compiled[c.point] is None]
    return good + queue, len(good)


def _compile_all(req: Request, todo: list[Point]) -> list[str | None]:
    args = [(req.path, {**req.defines, **dict(p)}, req.arch) for p in todo]
    if req.jobs <= 1 or len(todo) <= 1:
        return [compile_point(*a) for a in args]
    with ProcessPoolExecutor(min(req.jobs, len(todo))) as pool:
        return list(pool.map(compile_point, *zip(*args)))


def compile_point(path: str, defines: Mapping[str, str], arch: str) -> str | None:
    """None when `path` with `defines` goes through every pass; else why it does not."""
    from tilec.pipeline import run_passes

    try:
        run_passes(driver.elaborate(path, defines, arch), arch)
    except CompileError as e:
        return f"compile error: {e.diagnostics[0].message}"
    return None


def default_jobs() -> int:
    """Processes for compiling: the CPU cores this process may use."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
