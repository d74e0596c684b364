"""Barrier placement: a pass over the Thread IR (pipeline.py runs it after
lowering) that puts a `block` barrier (`__syncthreads()`) between a write of a
shared tile and a later read of it, or a read and a later overwrite.

    { copy(A[..], A_shared) }        access: writes A_shared
    __syncthreads();                 <- placed here: A_shared written, now read
    { gemm(A_shared, B_shared, C) }  access: reads A_shared, B_shared

The contract with lowering:

- Every tile op is one `T.Scope` whose `access` (T.SharedAccess) lists the
  shared tiles it reads and writes (`shared_reads_writes` below gives them from
  the Tile IR). The pass reads that record only: it never looks inside a Scope,
  and a Scope's own barriers (a cross-warp reduction's scratch, a staged gemm
  operand) are the op's business.
- Scalar statements outside Scopes (a store into a shared tile, a declaration
  reading one, a branch's condition, a loop's bounds) are ordered by their
  subscripts of the kernel's shared arrays (its SharedViews and `__shared__`
  declarations). Calls outside Scopes are not looked at: the only ones that
  reach shared memory are a GEMM main loop's fragment loads (ldmatrix), which
  read pipeline stages ordered by the pipeline's own wait + barrier (below).
- Asynchronous writes are complete only after their wait: a cp.async write
  (`async_writes`) once a `Barrier("async_wait", (n,))` retires its commit
  group (the groups committed by `async_commit`, oldest first, all but the n
  newest); a TMA write (`tx_writes`) once an `mbarrier_wait` on its
  `mbarrier` returns. A retired cp.async write is then like a plain write of
  this thread: visible to the block after the next `block` barrier. Reading or
  overwriting a tile whose asynchronous write is still in flight is an
  internal error: lowering places the waits, the pass only the barriers.
- Pipelines (lower/pipelined.py) decide where their own wait + barrier go (the
  schedule), as `Barrier` nodes the pass reads like any other: a `block`
  barrier retires all reads and writes before it, and `async_wait` retires the
  early copies' groups (counted through the prologue loop, whose iterations the
  pass walks). Their producers' writes (`stage_writes`) go to a stage that
  nothing reads before the pipeline's next wait + barrier, so the pass neither
  checks nor tracks them.
- Loops: a loop whose body touches shared memory starts with nothing pending
  (a barrier before it if anything is), and its body ends with nothing pending
  (a barrier at its end) unless the body begins with a `block` barrier, which
  orders one iteration's accesses against the next one's. A barrier placed
  before a statement goes above the comments heading it.
- Branches start from the same state and join with the union of theirs.
- Named Hopper slots: `mbarrier_init`, `mbarrier_arrive`, `mbarrier_expect_tx`,
  `named` (a barrier among some warps, not the block) and `fence_proxy_async`
  retire nothing the pass tracks; `mbarrier_wait` completes its barrier's TMA
  writes (visible to the threads that waited: all of them).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from itertools import zip_longest
from typing import assert_never

from tilec import thread_ir as T
from tilec import tir, tir_walk
from tilec.diagnostics import error
from tilec.simplify import const
from tilec.source import NO_SPAN, Span

BLOCK = T.Barrier("block")
_SIMULATED_ITERATIONS = 8  # iterations of a loop walked to count its cp.async groups


def place_barriers(kernel: T.Kernel) -> T.Kernel:
    """`kernel` with the `block` barriers its shared-memory accesses need."""
    placement = _Placement(_shared_arrays(kernel.body))
    return replace(kernel, body=tuple(placement.block(kernel.body, _State())))


# ---------------------------------------------------------------- the state


@dataclass
class _State:
    """Accesses not yet ordered by a barrier, at one point of the walk."""

    reads: set[str] = field(default_factory=set)  # since the last block barrier
    writes: set[str] = field(default_factory=set)  # since the last block barrier (retired cp.async too)
    uncommitted: set[str] = field(default_factory=set)  # cp.async writes of the open group
    groups: list[frozenset[str]] = field(default_factory=list)  # committed, in flight, oldest first
    tx: dict[T.Expr, frozenset[str]] = field(default_factory=dict)  # TMA writes by mbarrier, in flight

    def copy(self) -> _State:
        return _State(set(self.reads), set(self.writes), set(self.uncommitted), list(self.groups), dict(self.tx))

    def in_flight(self) -> set[str]:
        return self.uncommitted.union(*self.groups, *self.tx.values())

    def flush(self) -> list[T.Stmt]:
        """A block barrier if any read or write is pending."""
        if not (self.reads or self.writes):
            return []
        self.retire()
        return [BLOCK]

    def retire(self) -> None:
        self.reads, self.writes = set(), set()

    def become(self, other: _State) -> None:
        self.reads, self.writes, self.uncommitted = other.reads, other.writes, other.uncommitted
        self.groups, self.tx = other.groups, other.tx


def _join(a: _State, b: _State) -> _State:
    """What holds after either of two paths: pending on one of them is pending. Groups are
    aligned from the newest (a wait counts from there), each one the union of both."""
    empty: frozenset[str] = frozenset()
    groups = [x | y for x, y in zip_longest(reversed(a.groups), reversed(b.groups), fillvalue=empty)][::-1]
    tx = {bar: a.tx.get(bar, frozenset()) | b.tx.get(bar, frozenset()) for bar in (*a.tx, *b.tx)}
    return _State(a.reads | b.reads, a.writes | b.writes, a.uncommitted | b.uncommitted, groups, tx)


# ---------------------------------------------------------------- the walk


@dataclass(frozen=True)
class _Placement:
    """The walk over one kernel; `shared` names its shared arrays (scalar statements' accesses)."""

    shared: frozenset[str]

    def block(self, stmts: tuple[T.Stmt, ...], st: _State) -> list[T.Stmt]:
        out: list[T.Stmt] = []
        for s in stmts:
            before, code = self.stmt(s, st)
            if before:
                at = len(out)
                while at and isinstance(out[at - 1], T.Comment):  # the comments heading `s` stay on it
                    at -= 1
                out[at:at] = before
            out += code
        return out

    def stmt(self, s: T.Stmt, st: _State) -> tuple[list[T.Stmt], list[T.Stmt]]:
        """(barriers to place before `s`, `s` rewritten); updates `st` past `s`."""
        match s:
            case T.Scope(access=access, span=span):
                return _access(access, st, span), [s]
            case T.Loop():
                return self.loop(s, st)
            case T.IfThen(cond, then, orelse):
                before = _access(self.scalar_access(s), st, NO_SPAN)
                other = st.copy()
                then_code = self.block(then, st)
                else_code = self.block(orelse, other)
                st.become(_join(st, other))
                return before, [T.IfThen(cond, tuple(then_code), tuple(else_code))]
            case T.Barrier():
                _barrier(s, st)
                return [], [s]
            case T.Decl() | T.Assign():
                return _access(self.scalar_access(s), st, NO_SPAN), [s]
            case T.SharedView() | T.Call() | T.Comment():
                return [], [s]
            case _:
                assert_never(s)

    def loop(self, s: T.Loop, st: _State) -> tuple[list[T.Stmt], list[T.Stmt]]:
        """The loop rule (module docstring). A loop issuing asynchronous copies is walked as many
        times as it runs (up to a bound), for its commit groups; every walk must agree."""
        touches = self.touches(s)
        before = st.flush() if touches else []
        before += _access(self.scalar_access(s), st, NO_SPAN)  # the bounds
        entry = st.copy()
        body = self.iteration(s.body, st, touches)
        trips = _trip_count(s)
        if _has_async(s.body):
            for _ in range(min(trips if trips is not None else 2, _SIMULATED_ITERATIONS) - 1):
                if self.iteration(s.body, st, touches) != body:
                    raise error(None, "internal: a loop's barriers differ between its iterations")
        if trips is None or trips == 0:  # it may not run at all
            st.become(_join(entry, st))
        return before, [replace(s, body=tuple(body))]

    def iteration(self, body: tuple[T.Stmt, ...], st: _State, touches: bool) -> list[T.Stmt]:
        """One iteration of a loop body; nothing is left pending at its end (module docstring)."""
        code = self.block(body, st)
        if touches and not _starts_with_barrier(body):
            code += st.flush()
        return code

    def touches(self, s: T.Stmt) -> bool:
        """`s` (nested loops and branches too) touches shared memory."""
        match s:
            case T.Scope(access=access):
                return access.touches
            case T.Loop(body=body):
                return self.scalar_access(s).touches or any(self.touches(x) for x in body)
            case T.IfThen(then=then, orelse=orelse):
                return self.scalar_access(s).touches or any(self.touches(x) for x in then + orelse)
            case T.Decl() | T.Assign():
                return self.scalar_access(s).touches
            case T.Barrier() | T.SharedView() | T.Call() | T.Comment():
                return False
            case _:
                assert_never(s)

    def scalar_access(self, s: T.Decl | T.Assign | T.IfThen | T.Loop) -> T.SharedAccess:
        """The shared arrays a statement outside tile ops reads and writes: a scalar store or
        declaration (`A_s[0][1] = x;`, `const float v = A_s[i][j];`), a branch's condition,
        a loop's bounds (its body aside)."""
        reads: set[str] = set()
        writes: set[str] = set()
        match s:
            case T.Decl(init=init):
                reads.update(_arrays(init))
            case T.Assign(target, value, op):
                reads.update(_arrays(value))
                ref = target.target if isinstance(target, T.VecRef) else target
                if isinstance(ref, T.Subscript):
                    writes.add(ref.array)
                    reads.update(_arrays(*ref.indices, *((ref,) if op != "=" else ())))
            case T.IfThen(cond=cond):
                reads.update(_arrays(cond))
            case T.Loop(start=start, stop=stop):
                reads.update(_arrays(start, stop))
            case _:
                assert_never(s)
        return T.SharedAccess(reads=frozenset(reads & self.shared), writes=frozenset(writes & self.shared))


def _shared_arrays(body: tuple[T.Stmt, ...]) -> frozenset[str]:
    """The kernel's shared arrays: its views into dynamic shared memory and `__shared__` declarations."""
    return frozenset(s.name for s in body if isinstance(s, T.SharedView) or (isinstance(s, T.Decl) and s.shared))


_Expr = T.Expr | T.VecRef | str | None


def _arrays(*exprs: _Expr) -> Iterator[str]:
    """The C arrays the expressions subscript."""
    for e in exprs:
        match e:
            case T.Subscript(array, indices):
                yield array
                yield from _arrays(*indices)
            case T.VecRef(target) | T.AddressOf(target):
                yield from _arrays(target)
            case T.Intrin(args=args):
                yield from _arrays(*args)
            case tir.Call(args=args) | tir.Load(indices=args):
                yield from _arrays(*args)
            case tir.BinOp(a=a, b=b):
                yield from _arrays(a, b)
            case tir.UnaryOp(a=a) | tir.Cast(value=a):
                yield from _arrays(a)
            case tir.Select(cond, a, b):
                yield from _arrays(cond, a, b)
            case tir.IntImm() | tir.FloatImm() | tir.BoolImm() | tir.Var() | T.Sym() | T.Builtin() | str() | None:
                pass
            case _:
                assert_never(e)


def _access(a: T.SharedAccess, st: _State, span: Span) -> list[T.Stmt]:
    """The barrier a statement doing `a` needs before it, if any; then its accesses are pending."""
    writes = a.writes | a.async_writes | a.tx_writes
    early = (a.reads | writes) & st.in_flight()
    if early:
        raise error(
            span,
            f"internal: '{sorted(early)[0]}' is accessed while an asynchronous write of it may be in flight "
            "(no wait retires it first)",
        )
    hazard = (a.reads & st.writes) or (writes & (st.reads | st.writes))
    before = st.flush() if hazard else []
    st.reads |= a.reads
    st.writes |= a.writes
    st.uncommitted |= a.async_writes
    if a.tx_writes:
        if a.mbarrier is None:
            raise error(span, "internal: TMA writes without the mbarrier that completes them")
        st.tx[a.mbarrier] = st.tx.get(a.mbarrier, frozenset()) | a.tx_writes
    return before


def _barrier(b: T.Barrier, st: _State) -> None:
    match b.kind:
        case "block":
            st.retire()
        case "async_commit":
            st.groups.append(frozenset(st.uncommitted))
            st.uncommitted = set()
        case "async_wait":
            keep = b.args[0].value if b.args and isinstance(b.args[0], tir.IntImm) else None
            if keep is None:
                raise error(None, "internal: a cp.async wait needs a constant group count")
            cut = max(len(st.groups) - keep, 0)
            st.writes.update(*st.groups[:cut])  # complete in this thread; the block sees them after a barrier
            st.groups = st.groups[cut:]
        case "mbarrier_wait":
            st.tx.pop(b.args[0], None)  # complete, and visible to every thread that waited
        case "mbarrier_init" | "mbarrier_arrive" | "mbarrier_expect_tx" | "named" | "fence_proxy_async":
            pass  # nothing the pass tracks is retired (module docstring)
        case _:
            assert_never(b.kind)


def _trip_count(s: T.Loop) -> int | None:
    start, stop = const(s.start), const(s.stop)
    if start is None or stop is None:
        return None
    return max(0, -(-(stop - start) // s.step))


def _starts_with_barrier(body: tuple[T.Stmt, ...]) -> bool:
    """A block barrier comes before any tile op, loop or branch of `body`."""
    for s in body:
        match s:
            case T.Barrier(kind="block"):
                return True
            case T.Scope() | T.Loop() | T.IfThen():
                return False
            case T.Barrier() | T.Decl() | T.SharedView() | T.Assign() | T.Call() | T.Comment():
                continue
            case _:
                assert_never(s)
    return False


def _has_async(body: tuple[T.Stmt, ...]) -> bool:
    """`body` issues, commits or waits for asynchronous writes (its iterations may differ)."""
    return any(_is_async(s) for s in body)


def _is_async(s: T.Stmt) -> bool:
    match s:
        case T.Scope(access=a):
            return bool(a.async_writes or a.tx_writes)
        case T.Barrier(kind=kind):
            return kind in ("async_commit", "async_wait", "mbarrier_wait")
        case T.Loop(body=body):
            return _has_async(body)
        case T.IfThen(then=then, orelse=orelse):
            return _has_async(then) or _has_async(orelse)
        case T.Decl() | T.SharedView() | T.Assign() | T.Call() | T.Comment():
            return False
        case _:
            assert_never(s)


# ---------------------------------------------------------------- what lowering records


def shared_reads_writes(s: tir.Stmt) -> tuple[set[tir.Buffer], set[tir.Buffer]]:
    """Shared buffers a tile op reads and writes (lowering records them on its Scope)."""
    reads: set[tir.Buffer] = set()
    writes: set[tir.Buffer] = set()

    def rd(e: tir.Expr) -> None:
        reads.update(x.buffer for x in tir_walk.loads(e) if x.buffer.scope == "shared")

    def region(r: tir.Region | None, out: set[tir.Buffer]) -> None:
        if r is None:
            return
        for e in (*r.starts, *r.extents):  # indices may read shared memory too (a gather's table)
            rd(e)
        if r.buffer.scope == "shared":
            out.add(r.buffer)

    for x in tir_walk.stmts((s,)):
        match x:
            case tir.Copy(src, dst):
                region(src, reads)
                region(dst, writes)
            case tir.Gemm(a, b):
                region(a, reads)
                region(b, reads)
            case tir.Fill(dst, v):
                region(dst, writes)
                rd(v)
            case tir.Reduce(src=src, dst=dst):
                region(src, reads)
                region(dst, writes)
            case tir.CumSum(src=src, dst=dst):
                region(src, reads)
                region(dst, writes)
            case tir.AtomicAdd(dst, src, value):
                region(src, reads)
                region(dst, writes)  # a read-modify-write: ordered after earlier uses, before later ones
                if value is not None:
                    rd(value)
            case tir.Store(buf, idx, value):
                if buf.scope == "shared":
                    writes.add(buf)
                for i in idx:
                    rd(i)
                rd(value)
            case tir.Let(_, value):
                rd(value)
            case tir.If(cond=cond):
                rd(cond)
            case tir.For(start=start, stop=stop):
                rd(start)
                rd(stop)
            case tir.Print(value=value):
                if isinstance(value, tir.Region):
                    region(value, reads)
                else:
                    rd(value)
            case tir.DeviceAssert(cond=cond):
                rd(cond)
            case tir.Alloc() | tir.Parallel() | tir.UseSwizzle() | tir.AnnotateLayout():
                pass  # no access of its own (a body's statements come next)
            case _:
                assert_never(x)
    return reads, writes
