"""Shared memory packed by lifetime: a pass over the Thread IR (pipeline.py runs it right after
lowering) that lets a shared tile take the bytes of tiles dead before it is born.

    Q_shared = alloc_shared([64, 64], float16)      Q_shared  8192 B at 0      (lines 12-20)
    O_shared = alloc_shared([64, 64], float16)  ->  O_shared  8192 B at 0      (lines 22-23: Q is dead)
    copy(Q[..], Q_shared)          # line 12
    for k in Pipelined(...): ...   # lines 14-20, reads Q_shared
    copy(acc_o, O_shared)          # line 22
    copy(O_shared, Output[..])     # line 23

Lifetimes (`shared_lifetimes`, on the Tile IR, which lowering records on each user tile's
T.SharedView) number the statements in program order (pre-order: a loop or branch before its
bodies, the then branch before the else): a tile is live from the first statement using it to the
last. A tile used in a loop is live for all of the loop when the loop is pipelined (its stages are
filled iterations ahead), when the bounds read it, or when an iteration may read what an earlier
one left (not `_fresh`); a tile each iteration overwrites whole before reading it is live only
where it is used (gemm_persistent's wave loop: A and B, then C_shared). Tiles of the two branches
of an `if` may share bytes: one branch runs. Everything that is not a user tile (the reductions'
scratch row, a gemm's staged operand, mbarriers, a TMA store's staging tile) has no lifetime: it
is live for the whole kernel and shares nothing; so does the ring of a warp-role loop, which a
producer warp group fills asynchronously, ahead of the consumers and into the next tile's run
(the consumers' own tiles of such a kernel share bytes as anywhere else, their barriers ordering them).

The plan (`packed`) places the views in declaration order, each at the lowest offset that keeps
its alignment (16 bytes; a descriptor swizzle's 512 or 1024) and overlaps no view placed so far
whose lifetime meets its own. A kernel keeps its sequential offsets unless the plan saves bytes,
and by default (`PACKING = "over_limit"`) unless those offsets exceed the target's limit: packing
moves offsets and adds barriers, and the kernels that fit as they are keep the code they had
(docs/architecture.md, "Shared memory"). Views that share bytes are one storage for barrier
placement (sync.py reads `aliases`), so a barrier separates the last accesses of a dead tile from
the first writes of the one taking its bytes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Literal

from tilec import thread_ir as T
from tilec import tir, tir_walk
from tilec.simplify import const

Packing = Literal["always", "over_limit"]
PACKING: Packing = "over_limit"  # pack only kernels whose sequential offsets exceed the target's limit


# ---------------------------------------------------------------- lifetimes (Tile IR)


def shared_lifetimes(kernel: tir.Kernel) -> dict[tir.Buffer, T.Lifetime]:
    """The lifetime of every shared tile the kernel body uses, but a warp-role loop's ring tiles:
    its producer fills them ahead of the consumers, into the next tile's run too, so they keep
    bytes of their own (the consumers' tiles, ordered by their own barriers, may share)."""
    ring = {
        c.dst.buffer
        for s in tir_walk.stmts(kernel.body)
        if isinstance(s, tir.For) and s.warp_specialized
        for c in s.body
        if isinstance(c, tir.Copy) and c.pipeline == "producer"
    }
    order = _Order()
    order.block(kernel.body)
    out = {}
    for buf, at in order.uses.items():
        first, last = min(at), max(at)
        for loop, (lo, hi) in order.loops:
            if any(lo <= p <= hi for p in at) and _whole_loop(loop, buf):
                first, last = min(first, lo), max(last, hi)
        if buf not in ring:
            out[buf] = T.Lifetime(first, last, order.lines(first, last))
    return out


@dataclass
class _Order:
    """The kernel body's statements in program order (pre-order: a loop or branch before its
    bodies, the then branch before the else), where each one uses the shared tiles, and the
    positions each loop spans."""

    stmts: list[tir.Stmt] = field(default_factory=list)
    uses: dict[tir.Buffer, list[int]] = field(default_factory=dict)
    loops: list[tuple[tir.For | tir.While, tuple[int, int]]] = field(default_factory=list)

    def block(self, body: tuple[tir.Stmt, ...]) -> None:
        for s in body:
            at = len(self.stmts)
            self.stmts.append(s)
            inner = tir_walk.bodies(s) if isinstance(s, (tir.For, tir.While, tir.If)) else ()
            for buf in _own_uses(s) if inner else _uses(s):
                self.uses.setdefault(buf, []).append(at)
            for b in inner:
                self.block(b)
            if isinstance(s, (tir.For, tir.While)):
                self.loops.append((s, (at, len(self.stmts) - 1)))

    def lines(self, first: int, last: int) -> tuple[int, int]:
        """The source lines statements `first` to `last` span."""
        ends = [x.span.file.position(max(x.span.start, x.span.end - 1))[0] for x in self.stmts[first : last + 1]]
        return self.stmts[first].span.line, max(ends)


def _whole_loop(loop: tir.For | tir.While, buf: tir.Buffer) -> bool:
    """Whether `buf`, used in `loop`, is live for all of it: a pipelined loop's tiles (its stages
    are filled iterations ahead), and a tile whose value an iteration may read from an earlier one
    (not `_fresh` in the body) or that the bounds (a while loop's condition) read."""
    return (
        (isinstance(loop, tir.For) and loop.kind == "pipelined") or buf in _own_uses(loop) or not _fresh(loop.body, buf)
    )


def _fresh(body: tuple[tir.Stmt, ...], buf: tir.Buffer) -> bool:
    """Every read of `buf` in `body` comes after a write of all of it in the same run of `body`:
    the first statement using it overwrites it whole (a copy or fill of the whole tile), or it is
    the only one and a loop or branch whose bodies are each fresh."""
    at = [s for s in body if buf in _uses(s)]
    if not at or _overwrites(at[0], buf):
        return True
    if len(at) > 1 or buf in _own_uses(at[0]):
        return False
    match at[0]:
        case tir.For(body=inner) | tir.While(body=inner):
            return _fresh(inner, buf)
        case tir.If(then=then, orelse=orelse):
            return _fresh(then, buf) and _fresh(orelse, buf)
        case _:
            return False


def _overwrites(s: tir.Stmt, buf: tir.Buffer) -> bool:
    """`s` writes every element of `buf` and reads none (a copy into it, or a fill, of it whole;
    copies fill what lies outside their source with zeros)."""
    match s:
        case tir.Copy(dst=dst) | tir.Fill(dst=dst):
            reads = [r.buffer for r in tir_walk.regions(s) if r is not dst]
            reads += [ld.buffer for e in tir_walk.stmt_exprs(s) for ld in tir_walk.loads(e)]
            return dst.buffer == buf and _whole(dst) and buf not in reads
        case _:
            return False


def _whole(r: tir.Region) -> bool:
    """The region is its whole buffer."""
    starts = all(const(x) == 0 for x in r.starts)
    return starts and tuple(const(x) for x in r.extents) == r.buffer.const_shape


def _uses(s: tir.Stmt) -> set[tir.Buffer]:
    """The shared tiles `s` and the statements inside it name: operands, destinations, loads
    (what sync.shared_reads_writes records, read and written alike)."""
    uses: set[tir.Buffer] = set()
    for x in tir_walk.stmts((s,)):
        uses |= _own_uses(x)
    return uses


def _own_uses(s: tir.Stmt) -> set[tir.Buffer]:
    """The shared tiles `s` itself names, not the statements of its bodies (a loop's bounds, a
    branch's condition)."""
    bufs = [r.buffer for r in tir_walk.regions(s)] + list(tir_walk.written(s))
    bufs += [ld.buffer for e in tir_walk.stmt_exprs(s) for ld in tir_walk.loads(e)]
    return {b for b in bufs if b.scope == "shared"}


def peak_bytes(kernel: tir.Kernel, tiles: list[tir.Buffer]) -> int:
    """The most bytes of `tiles` (as declared: no padding, one stage) live at once, a tile without
    a lifetime always: what any plan needs at least (elaboration checks it against the target)."""
    return sum(declared_bytes(b) for b in peak_tiles(kernel, tiles))


def peak_tiles(kernel: tir.Kernel, tiles: list[tir.Buffer]) -> list[tir.Buffer]:
    """The tiles live at the point where the most bytes of `tiles` are (the first such point):
    what an over-the-limit diagnostic lists."""
    lives = shared_lifetimes(kernel)
    points = sorted({live.first for live in lives.values()}) or [0]

    def live_at(p: int) -> list[tir.Buffer]:
        return [b for b in tiles if b not in lives or lives[b].first <= p <= lives[b].last]

    return max((live_at(p) for p in points), key=lambda live: sum(declared_bytes(b) for b in live))


def declared_bytes(buf: tir.Buffer) -> int:
    """The bytes of a shared tile as declared (no padding, one stage)."""
    return math.prod(buf.const_shape) * buf.dtype.bits // 8  # sub-byte tiles: two elements a byte


def disjoint(a: T.Lifetime | None, b: T.Lifetime | None) -> bool:
    """Two lifetimes that never meet (a view without one is live throughout)."""
    return a is not None and b is not None and (a.last < b.first or b.last < a.first)


# ---------------------------------------------------------------- the plan (Thread IR)


def plan_shared(kernel: T.Kernel, limit: int, packing: Packing = PACKING) -> T.Kernel:
    """`kernel` with its views packed by lifetime when that saves bytes (and, packing
    "over_limit", only when its sequential offsets exceed `limit`); a comment above each view
    that takes another's bytes says whose."""
    views = [s for s in kernel.body if isinstance(s, T.SharedView)]
    if packing == "over_limit" and kernel.dynamic_smem <= limit:
        return kernel
    offsets = packed(views)
    size = max((o + nbytes(v) for o, v in zip(offsets, views)), default=0)
    if size >= kernel.dynamic_smem:
        return kernel
    planned = {v.name: replace(v, offset=o) for v, o in zip(views, offsets)}
    notes = sharing_notes(list(planned.values()))
    body: list[T.Stmt] = []
    for s in kernel.body:
        if isinstance(s, T.SharedView):
            body += [T.Comment(n) for n in notes.get(s.name, ())]
            s = planned[s.name]
        body.append(s)
    return replace(kernel, body=tuple(body), dynamic_smem=size)


def packed(views: list[T.SharedView]) -> list[int]:
    """Each view's offset: the lowest multiple of its alignment overlapping no earlier view
    whose lifetime meets its own (first fit, in declaration order)."""
    placed: list[tuple[int, int, T.Lifetime | None]] = []
    for v in views:
        taken = sorted((lo, hi) for lo, hi, live in placed if not disjoint(live, v.live))
        offset = _first_fit(taken, nbytes(v), v.align)
        placed.append((offset, offset + nbytes(v), v.live))
    return [lo for lo, _, _ in placed]


def _first_fit(taken: list[tuple[int, int]], size: int, align: int) -> int:
    """The lowest multiple of `align` where `size` bytes miss every interval of `taken` (sorted)."""
    for start in [0] + [hi for _, hi in taken]:
        offset = -(-start // align) * align
        if all(offset + size <= lo or offset >= hi for lo, hi in taken):
            return offset
    raise AssertionError("unreachable: the end of the last interval is always free")


def sequential_bytes(views: list[T.SharedView]) -> int:
    """The bytes `views` span one after the other, each at its alignment (lowering's offsets)."""
    end = 0
    for v in views:
        end = -(-end // v.align) * v.align + nbytes(v)
    return end


def nbytes(v: T.SharedView) -> int:
    """The bytes a view spans."""
    return math.prod(v.dims) * v.dtype.bytes


def overlap(a: T.SharedView, b: T.SharedView) -> bool:
    """Two views sharing at least one byte."""
    return a.offset < b.offset + nbytes(b) and b.offset < a.offset + nbytes(a)


def aliases(body: tuple[T.Stmt, ...]) -> dict[str, frozenset[str]]:
    """Every view of `body` (its top level) by name, with the names of the views sharing bytes
    with it, itself included: one storage for barrier placement."""
    views = [s for s in body if isinstance(s, T.SharedView)]
    return {v.name: frozenset(w.name for w in views if w is v or overlap(v, w)) for v in views}


def sharing_notes(views: list[T.SharedView]) -> dict[str, list[str]]:
    """By view, a line per earlier view whose bytes it takes: `O_shared shares bytes with
    Q_shared (lifetimes lines 40-41, 25-38)`."""
    notes: dict[str, list[str]] = {}
    for i, v in enumerate(views):
        for w in views[:i]:
            if overlap(v, w) and v.live is not None and w.live is not None:
                lines = f"lines {_range(v.live)}, {_range(w.live)}"
                notes.setdefault(v.name, []).append(f"{v.name} shares bytes with {w.name} (lifetimes {lines})")
    return notes


def _range(live: T.Lifetime) -> str:
    a, b = live.lines
    return f"{a}-{b}" if b != a else str(a)
