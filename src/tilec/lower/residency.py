"""L2 residency of what a block reads twice: the bytes of global memory each block of a kernel
reads in one statement of its body and again in a later one (a split row norm's two passes over
its row), which the launcher keeps within a share of L2 by capping the blocks resident on a
multiprocessor (emit.py: the padded shared memory of the `l2_resident` helper).

    for k in Serial(n): copy(A[bx, k * w], A_shared) ...        # first pass over row bx
    ...
    for k in Serial(n): copy(A[bx, (n - 1 - k) * w], A_shared)  # second pass: reread_bytes = n * w * 4

Each of the first pass's reads counts once per iteration of the loops around it in that
statement whose variable its starts name; a read under an `if` or in a `while` is not counted
(it may not happen). A tensor counts when the first read's starts name every block index of a
grid dimension wider than one (the part it reads is the block's own, not one all blocks share
and L2 holds once anyway), and its later read has the same starts in every dimension whose start
names a block index (or a let, which may). Measured on an H100 (TileLang's rms_norm, 8192
float32 columns: 32 KB a block read twice): the split-K kernel took 256 us at the 12 blocks per
multiprocessor its registers allowed, 192 us capped at 3 (a quarter of L2 for the resident rows),
201 at 4, 226 at 6, 250 at 8."""

from __future__ import annotations

from collections.abc import Iterator

from tilec import tir, tir_walk
from tilec.simplify import const, simplify


def reread_bytes(kernel: tir.Kernel) -> int:
    """Bytes of global memory each block of `kernel` reads in one top-level statement of its
    body and again in a later one (see the module docstring); 0 when none is known."""
    first: dict[tir.Buffer, tuple[int, tir.Region, int]] = {}  # tensor -> (statement, region, bytes)
    total = 0
    counted: set[tir.Buffer] = set()
    wide = _wide_block_vars(kernel)
    for at, top in enumerate(kernel.body):
        for region, trips in _global_reads(top, 1):
            seen = first.get(region.buffer)
            if seen is None:
                nbytes = _bytes(region, trips)
                if nbytes is not None and wide <= _names(region):
                    first[region.buffer] = (at, region, nbytes)
            elif (
                seen[0] < at
                and trips is not None
                and region.buffer not in counted
                and _same_block_part(seen[1], region)
            ):
                counted.add(region.buffer)
                total += seen[2]
    return total


def _global_reads(
    s: tir.Stmt, trips: int | None, loops: tuple[tuple[tir.Var, int | None], ...] = ()
) -> Iterator[tuple[tir.Region, int | None]]:
    """Each copy out of a global tensor in `s`, with the times it runs: the trip counts of the
    loops around it whose variable its starts name (None where one is not a constant, or the
    copy sits under an `if` or in a `while`)."""
    if isinstance(s, tir.Copy):
        if s.src.buffer.scope == "global":
            names = _names(s.src)
            for var, count in loops:
                if var in names:
                    trips = None if trips is None or count is None else trips * count
            yield s.src, trips
        return
    inner = loops
    if isinstance(s, tir.For):
        count = const(simplify(tir.BinOp("-", s.stop, s.start, s.stop.dtype)))
        inner = (*loops, (s.var, None if count is None or const(s.step) != 1 else max(count, 0)))
    elif isinstance(s, (tir.While, tir.If)):
        trips = None
    for body in tir_walk.bodies(s):
        for x in body:
            yield from _global_reads(x, trips, inner)


def _names(region: tir.Region) -> set[tir.Var]:
    return {v for e in region.starts for v in tir_walk.variables(e)}


def _wide_block_vars(kernel: tir.Kernel) -> set[tir.Var]:
    """The block indices of `kernel` whose grid dimension may be wider than one."""
    return {v for v, extent in zip(kernel.block_vars, kernel.grid) if const(extent) != 1}


def _bytes(region: tir.Region, trips: int | None) -> int | None:
    extents = [const(e) for e in region.extents]
    if trips is None or any(e is None for e in extents) or region.buffer.dtype.bits < 8:
        return None
    elements = trips
    for e in extents:
        elements *= e  # type: ignore[operator]
    return elements * region.buffer.dtype.bytes


def _same_block_part(a: tir.Region, b: tir.Region) -> bool:
    """Whether `a` and `b` start alike in every dimension where either start may depend on the
    block (names a block index or a let)."""
    for x, y in zip(a.starts, b.starts, strict=True):
        names = tir_walk.variables(x) | tir_walk.variables(y)
        if any(v.kind in ("block", "let") for v in names) and x != y:
            return False
    return True
