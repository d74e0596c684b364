"""`tilec tune FILE.tile --shape M=8192,N=8192,K=8192 [-o FILE.tune.json] [--explain] [--measure]`.

    run(Options(...)) -> the report on stdout, the tune file written; raises CompileError for
    the user's mistakes (a bad --shape, a -D naming no param), which the CLI renders

The steps are search.tune (enumerate, prune, rank, compile the best), then with --measure the
contenders of each shape (the best `--top`, and every point modelled within `--band` of the best)
timed on every visible GPU (measure.Pool); without a GPU, or without
--measure, the model's ranking is the recommendation, and the text says so.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tilec import driver
from tilec.tune import buckets, measure, report, search, tunefile
from tilec.tune.peaks import ARCH_GPU, gpu_for_arch


@dataclass(frozen=True, slots=True)
class Options:
    path: str
    shapes: Sequence[str]  # the --shape texts
    defines: Mapping[str, str]
    arch: str
    gpu: str | None
    output: str | None
    explain: bool
    measure: bool
    top: int
    jobs: int
    band: float = search.BAND


def run(opts: Options) -> None:
    """Search, print, optionally measure, write the tune file."""
    base = driver.elaborate(opts.path, opts.defines, opts.arch)
    dims = search.dimensions(base)
    cut = [b for s in opts.shapes for b in buckets.expand(search.parse_shape(s, dims))]
    gpus = measure.visible_gpus() if opts.measure else []
    # what is timed goes through the whole pipeline first; the model alone needs only its choice to
    top, band = (opts.top, opts.band) if gpus else (1, 0.0)
    shapes = [b.shape for b in cut]
    req = search.Request(opts.path, opts.defines, opts.arch, opts.gpu, shapes, top, opts.jobs, band)
    results = search.tune(req, base)
    timings: list[dict[str, float] | None] = [_measure(req, r, gpus) if gpus else None for r in results]
    out = sys.stdout
    out.write(report.header(opts.path, opts.arch, gpu_for_arch(opts.arch, opts.gpu), bool(gpus)))
    if opts.measure and not gpus:
        out.write("--measure: no GPU is visible here, so nothing was timed\n")
    for b, r, t in zip(cut, results, timings, strict=True):
        out.write(report.shape_text(r, opts.explain, t, b.ranges))
    if opts.output:
        driver.write_atomic(opts.output, tunefile.dumps(_tune_file(opts, cut, results, timings)))
    out.write(report.footer(opts.output))
    out.flush()


def _measure(req: search.Request, r: search.ShapeResult, gpus: list[int]) -> dict[str, float]:
    """Time the contenders of one shape on `gpus`; label -> seconds of those that passed."""
    best = r.ranked[: r.contenders]
    ref = driver.compile_file(req.path, req.defines, req.arch)
    jobs = [
        measure.Job(c.label, driver.compile_file(req.path, {**req.defines, **dict(c.point)}, req.arch)) for c in best
    ]
    progress = measure.Progress(len(jobs), sys.stderr.isatty())
    try:
        timings = measure.Pool(gpus, measure.gpu_runner(ref, r.shape, req.arch)).run(jobs, progress.update)
    finally:
        progress.close()
    for t in timings:
        if t.error:
            sys.stderr.write(f"tilec tune: {t.label} failed on GPU {t.gpu}: {t.error}\n")
    return {t.label: t.seconds for t in timings if t.seconds is not None}


def _tune_file(
    opts: Options,
    cut: list[buckets.Bucket],
    results: list[search.ShapeResult],
    timings: list[dict[str, float] | None],
) -> tunefile.TuneFile:
    choices = []
    for b, r, t in zip(cut, results, timings, strict=True):
        best = _chosen(r, t)
        defines = dict(best.point) if best else {}
        choices.append(tunefile.Choice(dict(r.shape), defines, _seconds(best, t), b.ranges))
    gpu = opts.gpu or ARCH_GPU.get(opts.arch, "a100")
    basis = "measured" if any(timings) else "model"
    return tunefile.TuneFile(os.path.basename(opts.path), opts.arch, gpu, basis, tuple(choices))


def _chosen(r: search.ShapeResult, timed: dict[str, float] | None):
    """The measured best when there are timings, else the model's."""
    if timed:
        return min((c for c in r.ranked if c.label in timed), key=lambda c: timed[c.label])
    return r.best


def _seconds(best, timed: dict[str, float] | None) -> float:
    if best is None:
        return 0.0
    return timed[best.label] if timed and best.label in timed else round(best.seconds, 9)
