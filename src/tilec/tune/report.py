"""`tilec tune`'s text: the ranking per shape, the choice, and with `--explain` every pruned point.

    tilec tune: examples/gemm.tile for sm_90a, modelled on H200 SXM 141GB (132 SMs)
    recommendation from the cost model alone: nothing was measured (--measure times them on a GPU)

    shape M=8192 N=8192 K=8192: 12 configurations, 3 pruned, 9 ranked
    rank  configuration            model ms  TFLOP/s  DRAM GB/s  blocks  blocks/SM  waves  bound
    1     block_M=128 block_K=64   1.402     784      ...

Pure functions of the search's results (deterministic: goldens hold this text).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tilec.tune.peaks import GPU
from tilec.tune.search import ShapeResult
from tilec.tune.space import Candidate

SHOWN = 10  # ranked rows shown per shape without --explain

COLUMNS = ("rank", "configuration", "model ms", "TFLOP/s", "DRAM GB/s", "blocks", "blocks/SM", "waves", "bound")


def header(path: str, arch: str, gpu: GPU, measured: bool) -> str:
    head = f"tilec tune: {path} for {arch}, modelled on {gpu.name} ({gpu.sms} SMs)\n"
    if measured:
        return head + "measured: the best of the model's ranking timed on the GPU (measured ms)\n"
    return head + "recommendation from the cost model alone: nothing was measured (--measure times them on a GPU)\n"


def shape_text(
    r: ShapeResult,
    explain: bool,
    measured: Mapping[str, float] | None = None,
    bucket: Mapping[str, tuple[int, int]] | None = None,
) -> str:
    """The ranking of one shape (`bucket`: the sizes its choice serves), the choice, and
    (explain) the pruned points with their reasons."""
    total = len(r.ranked) + len(r.pruned)
    serves = f" (bucket {' '.join(f'{k}={lo}..{hi}' for k, (lo, hi) in bucket.items())})" if bucket else ""
    lines = [
        f"\nshape {_shape(r.shape)}{serves}: {total} configurations, {len(r.pruned)} pruned, {len(r.ranked)} ranked"
    ]
    shown = r.ranked if explain else r.ranked[:SHOWN]
    rows = [_row(i + 1, c, measured) for i, c in enumerate(shown)]
    cols = COLUMNS if measured is None else (*COLUMNS, "measured ms")
    lines += _table(cols, rows)
    if len(shown) < len(r.ranked):
        lines.append(f"... {len(r.ranked) - len(shown)} more (--explain lists every one)")
    lines += _choice(r)
    if explain and r.pruned:
        lines.append("pruned:")
        lines += [f"  {c.label}{' (default)' if c.default else ''}: {c.pruned}" for c in r.pruned]
    elif r.pruned:
        lines.append(f"{len(r.pruned)} pruned (--explain says why)")
    return "\n".join(lines) + "\n"


def _choice(r: ShapeResult) -> list[str]:
    best, default = r.best, r.default
    if best is None:
        return ["no configuration survives: see the pruned points (--explain)"]
    line = f"choice: {best.label}"
    if default is not None and default.pruned is None and default is not best:
        line += f"  ({default.seconds / best.seconds:.2f}x the default {default.label} by the model)"
    elif default is best:
        line += "  (the default)"
    return [line]


def _row(rank: int, c: Candidate, measured: Mapping[str, float] | None) -> tuple[str, ...]:
    main = max(c.kernels, key=lambda k: k.estimate.seconds)
    est, secs = main.estimate, c.seconds
    flops = sum(k.estimate.flops for k in c.kernels)
    dram = sum(k.estimate.dram_bytes for k in c.kernels)
    label = c.label + (" *" if c.default else "")
    row = (
        str(rank), label, f"{secs * 1e3:.3f}", f"{flops / secs / 1e12:.0f}", f"{dram / secs / 1e9:.0f}",
        str(main.work.blocks), str(est.occupancy), f"{est.waves:.2f}", est.bound,
    )  # fmt: skip
    if measured is None:
        return row
    ms = measured.get(c.label)
    return (*row, f"{ms * 1e3:.3f}" if ms is not None else "-")


def _table(cols: Sequence[str], rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(x) for x in col) for col in zip(cols, *rows)]
    return ["  ".join(x.ljust(w) for x, w in zip(line, widths)).rstrip() for line in (tuple(cols), *rows)]


def _shape(shape: Mapping[str, int]) -> str:
    return " ".join(f"{k}={v}" for k, v in shape.items())


def footer(out: str | None) -> str:
    return (
        f"\nwrote {out} (tilec build --tuned {out} applies it; * marks the default build)\n"
        if out
        else ("\n* marks the default build; -o FILE.tune.json writes the choice for tilec build --tuned\n")
    )
