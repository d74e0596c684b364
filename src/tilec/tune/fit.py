"""Fit a build's configuration to its target: the nearest point of the file's candidate sets that
compiles where the default configuration is over one of the target's limits.

    tilec build examples/gemm.tile --arch gfx90a
    examples/gemm.tile:11:1: warning: the default configuration is over gfx90a's shared memory:
    taking block_K=32 num_stages=2, the nearest point of the candidate sets that fits [-Wconfig-fit]

A file's candidate sets (`param block_K = 64 in (32, 64)`) are the configurations its author
calls valid; the default is tuned for one GPU (the H200's 227 KB of shared memory) and another
(gfx90a's 64 KB of LDS) may not hold it. Then `tilec build` (driver.build_many) tries the points in
order of distance from the default -- fewest params changed, then fewest made larger (a larger
tile or more stages needs more, not less), then the least change in log2 of each value, then the
order `tilec tune` enumerates them -- and builds the first that goes through the whole pipeline,
with this warning (under `-Werror` the warning is an error and nothing is built; `-D` fixes a
param, which is then not varied). Only errors that are all over limits (Diagnostic.limit) are
fitted: any other error is the program's, reported as it is.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from tilec import tir
from tilec.diagnostics import CompileError, Diagnostic, Note
from tilec.tune.space import Point, points

MAX_TRIES = 24  # points compiled at most before the original error stands


def nearest(
    path: str, defines: Mapping[str, str], arch: str, sets: Sequence[tir.CandidateSet]
) -> tuple[Point, tir.Program] | None:
    """The nearest point (and its elaborated program) whose build passes every pass, or None."""
    from tilec import driver
    from tilec.pipeline import run_passes

    for point in by_distance(sets, defines)[:MAX_TRIES]:
        try:
            program = driver.elaborate(path, {**defines, **dict(point)}, arch)
            run_passes(program, arch)
        except CompileError:
            continue
        return point, program
    return None


def by_distance(sets: Sequence[tir.CandidateSet], defines: Mapping[str, str]) -> list[Point]:
    """The points of `sets` not fixed by `defines`, nearest to the default first, the default left out."""
    default = {c.param: c.value for c in sets}
    others = [p for p, is_default in points(sets, defines) if not is_default]

    def distance(point: Point) -> tuple[int, int, float]:
        changed = [(default[k], v) for k, v in point if v != default[k]]
        growing = sum(1 for a, b in changed if _log_ratio(a, b) > 0)  # larger values need more, not less
        return len(changed), growing, sum(abs(_log_ratio(a, b)) for a, b in changed)

    return sorted(others, key=distance)  # stable: ties in enumeration order


def _log_ratio(a: str, b: str) -> float:
    """log2(b / a) of two numeric values; 1.0 (one step up) for others (a dtype)."""
    try:
        x, y = float(a), float(b)
    except ValueError:
        return 1.0
    return math.log2(y / x) if x > 0 and y > 0 else 1.0


def warning(
    path: str,
    arch: str,
    error: CompileError,
    point: Point,
    sets: Sequence[tir.CandidateSet],
    defines: Mapping[str, str],
) -> Diagnostic:
    """-Wconfig-fit at the first error's place, with a note at each changed param's candidates."""
    first = next(d for d in error.diagnostics if d.severity == "error")
    default = {c.param: c for c in sets}
    changed = [(k, v) for k, v in point if v != default[k].value]
    chosen = " ".join(f"{k}={v}" for k, v in changed)
    which = "the configuration given by -D" if set(defines) & set(default) else "the default configuration"
    notes = (Note(first.span, f"as written: {first.message}"),) + tuple(
        Note(default[k].span, f"'{k}' {default[k].value} -> {v}, a candidate of its set") for k, v in changed
    )
    pins = " ".join(f"-D {k}={v}" for k, v in changed)
    return Diagnostic(
        first.span,
        f"{which} is over {arch}'s {first.limit}: taking {chosen}, the nearest point of the candidate sets that fits",
        hint=f"choose with -D ({pins} builds this one quietly), or rank the points: "
        f"tilec tune {path} --arch {arch} --shape ...",
        notes=notes,
        severity="warning",
        name="config-fit",
    )
