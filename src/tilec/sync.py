"""Barrier placement: a pass over the Thread IR (pipeline.py runs it after
lowering) that puts a `block` barrier (all the block's threads) between a write of a
shared tile and a later read of it, or a read and a later overwrite.

    { copy(A[..], A_shared) }        access: writes A_shared
    Barrier("block")                 <- placed here: A_shared written, now read
    { gemm(A_shared, B_shared, C) }  access: reads A_shared, B_shared

The contract with lowering:

- Every tile op is one `T.Scope` whose `access` (T.SharedAccess) lists the
  shared tiles it reads and writes (`shared_reads_writes` below gives them from
  the Tile IR). The pass reads that record only, and a Scope's own barriers (a
  cross-warp reduction's scratch, a staged gemm operand) are the op's business; it
  looks inside a Scope only to see whether its code opens with a `block` barrier,
  before any shared access or call (`opens_with_barrier`): that barrier orders what
  is pending before the op, which then needs none placed before it. (MLA decode's
  loop: the reductions' barriers order P V's reads of the P tile against the next
  iteration's write of it, with no barrier at the end of the body.)
- Scalar statements outside Scopes (a store into a shared tile, a declaration
  reading one, a branch's condition, a loop's bounds) are ordered by their
  subscripts of the kernel's shared arrays (its SharedViews and shared
  declarations). Calls outside Scopes are not looked at: the only ones that
  reach shared memory are a GEMM main loop's fragment loads (matrices), which
  read pipeline stages ordered by the pipeline's own wait + barrier (below).
- Asynchronous writes are complete only after their wait: an asynchronous copy's write
  (`async_writes`) once a `Barrier("async_wait", (n,))` retires its commit
  group (the groups committed by `async_commit`, oldest first, all but the n
  newest); a TMA write (`tx_writes`) once an `mbarrier_wait` on its
  `mbarrier` returns. A retired asynchronous copy's write is then like a plain write of
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
  (a barrier at its end) unless the next iteration meets a `block` barrier (its own,
  or the first one of a tile op whose code opens with one, above) before any access
  that is a hazard with what is pending (`barrier_ahead`), which orders one iteration's
  accesses against the next one's, or all that is pending are
  reads of tiles the body never writes and stores that no two iterations make into
  one element (they stay pending after the loop: its next access of them gets the
  barrier). Such stores (`disjoint_stores`) are the body's only accesses of their
  array, or of any array sharing its bytes (nested statements too): plain scalar
  stores, all with one index `c * k + e` in the same dimension, k the loop counter,
  c a constant other than 0 and e the same in all of them, in every thread and every
  iteration (constants times scalar parameters, `const` scalars of values the same in
  every thread, counters of enclosing loops of such bounds; nothing the body declares
  or assigns). With each index inside its dimension (`tilec build --verify` proves
  it), iteration k stores only elements whose index there is c * k + e: the stores of
  different iterations, by whichever threads, are to different elements and need no
  order among them (stores of one iteration to one element by several threads are not
  ordered by a barrier at the body's end either; an enclosing loop orders its own
  iterations' stores, or keeps them apart, by the same rule). TileLang's naive GEMV:

      Loop tk < 128:                             Loop tk < 128:
        A_shared[tk] = A[bk * 128 + tk]            A_shared[tk] = A[bk * 128 + tk]
        B_shared[tn][tk] = B[...]          ->      B_shared[tn][tk] = B[...]
        Barrier("block")                         Barrier("block")
      Loop tk_1 < 128: ... A_shared[tk_1] ...    Loop tk_1 < 128: ... A_shared[tk_1] ...

  Stores with a read of their array in the body (`X_s[k] = X_s[k] * 2`: several threads
  read and store one element) keep the barrier. A body issuing asynchronous
  copies is walked iteration by iteration until its state repeats or its trip
  count is reached (`_Placement.iterations`). A barrier placed before a
  statement goes above the comments heading it. A while loop is a loop of unknown trip
  count. A `break` leaves its loop with what is pending where it stands (no barrier at the
  body's end on that path): the state after the loop joins those of its breaks, so the
  first access after the loop that meets one of them gets its barrier there.
- Branches start from the same state and join with the union of theirs.
- Views sharing bytes (shared_plan.py packs tiles whose lifetimes do not meet) are one storage:
  an access of one is a hazard with the pending accesses of each (`aliases`), so a barrier
  separates the last reads of a dead tile from the first writes of the tile taking its bytes,
  a pipeline's stage writes included.
- Named Hopper slots: `mbarrier_init`, `mbarrier_arrive`, `mbarrier_expect_tx`,
  `named` (a barrier among some warps, not the block) and `fence_proxy_async`
  retire nothing the pass tracks; `mbarrier_wait` completes its barrier's TMA
  writes (visible to the threads that waited: all of them).
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from itertools import zip_longest
from typing import assert_never

from tilec import thread_ir as T
from tilec import tir, tir_walk
from tilec.diagnostics import error
from tilec.dtypes import DType
from tilec.shared_plan import aliases
from tilec.simplify import const
from tilec.source import NO_SPAN, Span
from tilec.thread_ir import Owners

BLOCK = T.Barrier("block")
_SETTLE_WALKS = 2  # a loop of unknown trip count is settled within this many iterations (_Placement.iterations)


FENCE_PROXY_ASYNC = T.Barrier("fence_proxy_async")


def place_barriers(kernel: T.Kernel) -> T.Kernel:
    """`kernel` with the `block` barriers its shared-memory accesses need; in a kernel with a tile
    op reading shared memory through the asynchronous proxy (`proxy_reads`), a `block` barrier
    comes after a proxy fence where ordinary writes of tiles that proxy may touch could have
    happened since the last fence (`_Fences`), so that they are visible to those reads (the
    writers fence: a barrier alone orders only ordinary accesses)."""
    placement = _Placement(_shared_arrays(kernel.body), aliases(kernel.body), _declared_once(kernel))
    placement.uniform.update(p.name for p in kernel.params if p.name in placement.once and not p.pointer)
    body = tuple(placement.block(kernel.body, _State()))
    if any(isinstance(s, T.Scope) and s.access.proxy_reads for s in T.all_stmts(body)):
        body = _Fences(placement, _proxied(body, placement)).block(body, False)[0]
    if kernel.consumer_threads:  # warp roles: only the consumers run the body's barriers
        body = _among(
            body, T.Barrier("named", (tir.IntImm(1, DType.int32), tir.IntImm(kernel.consumer_threads, DType.int32)))
        )
    return replace(kernel, body=body)


def _among(body: tuple[T.Stmt, ...], named: T.Barrier) -> tuple[T.Stmt, ...]:
    """`body` with every `block` barrier replaced by `named` (a barrier of the consumer threads)."""
    out: list[T.Stmt] = []
    for s in body:
        match s:
            case T.Barrier(kind="block"):
                out.append(named)
            case _:
                out.append(T.with_bodies(s, lambda body: _among(body, named)))
    return tuple(out)


def _fenced(body: tuple[T.Stmt, ...]) -> tuple[T.Stmt, ...]:
    """`body` with FENCE_PROXY_ASYNC before every `block` barrier."""
    out: list[T.Stmt] = []
    for s in body:
        match s:
            case T.Barrier(kind="block"):
                out += [FENCE_PROXY_ASYNC, s]
            case _:
                out.append(T.with_bodies(s, _fenced))
    return tuple(out)


def _proxied(body: tuple[T.Stmt, ...], placement: _Placement) -> frozenset[str]:
    """The shared arrays the asynchronous proxy may touch, with every array sharing bytes with
    one: those a `proxy_reads` op reads or TMA writes, and those no access record names (a warp
    role loop's ring tiles, which lowering leaves out of them). Cross-warp scratch is among the
    latter, but its ordinary writes are inside the ops (not `SharedAccess.writes`) and never
    make a fence needed."""
    named: set[str] = set()
    suspect: set[str] = set()
    for s in T.all_stmts(body):
        match s:
            case T.Scope(access=a):
                named |= a.reads | a.writes | a.async_writes | a.tx_writes | a.stage_writes
                suspect |= a.tx_writes | a.stage_writes | (a.reads if a.proxy_reads else frozenset())
            case T.Decl() | T.Assign() | T.IfThen() | T.Loop() | T.While():
                acc = placement.scalar_access(s)
                named |= acc.reads | acc.writes
    suspect |= placement.shared - named
    return frozenset(x for x in placement.shared if _storage(frozenset({x}), placement.aliases) & suspect)


@dataclass(frozen=True)
class _Fences:
    """Proxy fences for a kernel whose barriers are placed: walking it in order, `dirty` says
    whether this thread may have written one of the `proxied` arrays (an ordinary or
    asynchronous copy's write, a scalar store) since its last fence; a `block` barrier the
    kernel's own statements hold (not one inside a tile op) gets a fence before it when so.
    Branches join (either dirty), a loop is walked dirty when its body ends so, a `break`
    leaves it dirty. Inside an op reading through the proxy (a wgmma gemm staging its operand),
    every barrier is fenced, as before any such read; other ops' barriers (a reduction's
    scratch) order only ordinary accesses and get none."""

    placement: _Placement
    proxied: frozenset[str]

    def block(self, body: tuple[T.Stmt, ...], dirty: bool) -> tuple[tuple[T.Stmt, ...], bool]:
        out: list[T.Stmt] = []
        for s in body:
            code, dirty = self.stmt(s, dirty)
            out += code
        return tuple(out), dirty

    def stmt(self, s: T.Stmt, dirty: bool) -> tuple[list[T.Stmt], bool]:
        match s:
            case T.Scope(access=a):
                written = bool((a.writes | a.async_writes) & self.proxied)
                if a.proxy_reads:
                    return [T.with_bodies(s, _fenced)], dirty or written
                if dirty and self.placement.opens_with_barrier(s):  # it orders what came before (_Placement)
                    at = next(i for i, x in enumerate(s.body) if isinstance(x, T.Barrier))
                    return [replace(s, body=(*s.body[:at], FENCE_PROXY_ASYNC, *s.body[at:]))], written
                return [s], dirty or written
            case T.Barrier(kind="block"):
                return ([FENCE_PROXY_ASYNC, s] if dirty else [s]), False
            case T.Barrier(kind="async_wait"):  # retired asynchronous copies: this thread's writes now
                return [s], True
            case T.IfThen(then=then, orelse=orelse):
                then_code, d1 = self.block(then, dirty)
                else_code, d2 = self.block(orelse, dirty)
                return [replace(s, then=then_code, orelse=else_code)], d1 or d2
            case T.Loop(body=body) | T.While(body=body):
                code, end = self.block(body, dirty)
                if end and not dirty:  # the next iteration starts dirty
                    code, end = self.block(body, True)
                breaks = any(isinstance(x, T.Break) for x in T.all_stmts(body))
                return [replace(s, body=code)], dirty or end or breaks
            case T.Decl() | T.Assign():
                return [s], dirty or bool(self.placement.scalar_access(s).writes & self.proxied)
            case T.Barrier() | T.SharedView() | T.Call() | T.Comment() | T.Break():
                return [s], dirty
            case _:
                assert_never(s)


# ---------------------------------------------------------------- the state


@dataclass
class _State:
    """Accesses not yet ordered by a barrier, at one point of the walk."""

    reads: set[str] = field(default_factory=set)  # since the last block barrier
    writes: set[str] = field(default_factory=set)  # since the last block barrier (retired asynchronous copies too)
    uncommitted: set[str] = field(default_factory=set)  # asynchronous copies' writes of the open group
    groups: list[frozenset[str]] = field(default_factory=list)  # committed, in flight, oldest first
    tx: dict[T.Expr, frozenset[str]] = field(default_factory=dict)  # TMA writes by mbarrier, in flight
    # pending tile -> the owner map every pending access of it had (lower/owners.py), None if they differ
    owner: dict[str, Owners | None] = field(default_factory=dict)

    def copy(self) -> _State:
        groups, tx = list(self.groups), dict(self.tx)
        return _State(set(self.reads), set(self.writes), set(self.uncommitted), groups, tx, dict(self.owner))

    def owned_by_all(self, touched: dict[str, Owners | None], aliases: dict[str, frozenset[str]]) -> bool:
        """Every pending tile was touched by its elements' owners only, and `touched` (a loop body's
        accesses) touches it, and every tile sharing its bytes, with the same owners or not at all."""
        for name in self.reads | self.writes:
            mine = self.owner.get(name)
            if mine is None or any(touched.get(a, mine) != mine for a in aliases.get(name, ()) if a != name):
                return False
            if name in touched and touched[name] != mine:
                return False
        return True

    def in_flight(self) -> set[str]:
        return self.uncommitted.union(*self.groups, *self.tx.values())

    def flush(self) -> list[T.Stmt]:
        """A block barrier if any read or write is pending."""
        if not (self.reads or self.writes):
            return []
        self.retire()
        return [BLOCK]

    def retire(self) -> None:
        self.reads, self.writes, self.owner = set(), set(), {}

    def become(self, other: _State) -> None:
        self.reads, self.writes, self.uncommitted = other.reads, other.writes, other.uncommitted
        self.groups, self.tx, self.owner = other.groups, other.tx, other.owner


def _join(a: _State, b: _State) -> _State:
    """What holds after either of two paths: pending on one of them is pending. Groups are
    aligned from the newest (a wait counts from there), each one the union of both."""
    empty: frozenset[str] = frozenset()
    groups = [x | y for x, y in zip_longest(reversed(a.groups), reversed(b.groups), fillvalue=empty)][::-1]
    tx = {bar: a.tx.get(bar, frozenset()) | b.tx.get(bar, frozenset()) for bar in (*a.tx, *b.tx)}
    owner = {n: a.owner.get(n, b.owner.get(n)) for n in a.owner.keys() | b.owner.keys()}
    owner |= {n: None for n in a.owner.keys() & b.owner.keys() if a.owner[n] != b.owner[n]}
    return _State(a.reads | b.reads, a.writes | b.writes, a.uncommitted | b.uncommitted, groups, tx, owner)


# ---------------------------------------------------------------- the walk


@dataclass(frozen=True)
class _Placement:
    """The walk over one kernel; `shared` names its shared arrays (scalar statements' accesses)."""

    shared: frozenset[str]
    aliases: dict[str, frozenset[str]]  # a view and those sharing its bytes (shared_plan.aliases)
    once: frozenset[str]  # C names declared once in the kernel and never assigned (_declared_once)
    # per loop being walked, innermost last: the states its `break`s leave it with
    breaks: list[list[_State]] = field(default_factory=list)
    # C names whose values may differ between threads (set as the walk declares them)
    varying: set[str] = field(default_factory=set)
    # C names of `once` with the same value in every thread: scalar parameters, `const` scalars of
    # such values, counters of loops with such bounds (set as the walk meets them)
    uniform: set[str] = field(default_factory=set)

    def divergent(self, e: T.Expr | T.VecRef) -> bool:
        """`e` may differ between the threads of the block: it reads the thread index, a name
        computed from it, or memory."""
        for x in tir_walk.subexprs(e):
            match x:
                case T.Builtin(name="thread_index" | "thread_index_reread") | T.Subscript() | tir.Load():
                    return True
                case T.Sym(name=name) | tir.Var(name=name) if name in self.varying:
                    return True
        return False

    def fixed(self, e: T.Expr, changing: frozenset[str] = frozenset()) -> bool:
        """`e` has the same value in every thread and keeps it while only the names `changing`
        change: arithmetic of constants, block-wide built-ins and `uniform` names not among them
        (no thread index, no memory, no call)."""
        for x in tir_walk.subexprs(e):
            match x:
                case T.Sym(name=name) | tir.Var(name=name):
                    if name not in self.uniform or name in changing:
                        return False
                case T.Builtin(name=name):
                    if name in ("thread_index", "thread_index_reread"):
                        return False
                case tir.IntImm() | tir.FloatImm() | tir.BoolImm():
                    continue
                case tir.BinOp() | tir.UnaryOp() | tir.Cast() | tir.Select():
                    continue  # their operands are walked too
                case _:
                    return False
        return True

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
                if self.opens_with_barrier(s):  # its own first barrier orders what is pending
                    st.retire()
                return _access(access, st, span, self.aliases), [s]
            case T.Loop() | T.While():
                return self.loop(s, st)
            case T.Break():
                self.breaks[-1].append(st.copy())
                return [], [s]
            case T.IfThen(cond, then, orelse):
                # a condition that may differ between threads (`tn < N`, `tk == 0`): what is pending
                # is settled before the branch, where every thread meets the barrier
                before = st.flush() if self.touches(s) and self.divergent(cond) else []
                before += _access(self.scalar_access(s), st, NO_SPAN, self.aliases)
                other = st.copy()
                then_code = self.block(then, st)
                else_code = self.block(orelse, other)
                st.become(_join(st, other))
                return before, [replace(s, then=tuple(then_code), orelse=tuple(else_code))]
            case T.Barrier():
                _barrier(s, st)
                return [], [s]
            case T.Decl(name=name, init=init) if init is not None and self.divergent(init):
                self.varying.add(name)
                return _access(self.scalar_access(s), st, NO_SPAN, self.aliases), [s]
            case T.Decl(name=name, dims=(), init=init, const=True) if init is not None and self.fixed(init):
                if name in self.once:
                    self.uniform.add(name)
                return _access(self.scalar_access(s), st, NO_SPAN, self.aliases), [s]
            case T.Assign(target=T.Sym(name=name), value=value) if self.divergent(value):
                self.varying.add(name)
                return _access(self.scalar_access(s), st, NO_SPAN, self.aliases), [s]
            case T.Decl() | T.Assign():
                return _access(self.scalar_access(s), st, NO_SPAN, self.aliases), [s]
            case T.SharedView() | T.Call() | T.Comment():
                return [], [s]
            case _:
                assert_never(s)

    def loop(self, s: T.Loop | T.While, st: _State) -> tuple[list[T.Stmt], list[T.Stmt]]:
        """The loop rule (module docstring), walking the body as the loop runs (`iterations`); a
        while loop's trip count is unknown. A `break` leaves the loop with the state it found."""
        touches = self.touches(s)
        touched = self.owners_in((s,))  # the loop's bounds or condition too: scalar accesses
        before = st.flush() if touches and not st.owned_by_all(touched, self.aliases) else []
        before += _access(self.scalar_access(s), st, NO_SPAN, self.aliases)  # the bounds, the condition
        entry = st.copy()
        trips = _trip_count(s) if isinstance(s, T.Loop) else None
        if isinstance(s, T.Loop) and s.var.name in self.once and self.fixed(s.start) and self.fixed(s.stop):
            self.uniform.add(s.var.name)  # the same in every thread, and in the body's inner loops
        apart = self.disjoint_stores(s) if isinstance(s, T.Loop) else frozenset()
        self.breaks.append([])
        head = self.scalar_access(s)  # the bounds or condition, read again before each iteration
        body, after = self.iterations(s.body, st, touches and not self.owned_throughout(touched), trips, apart, head)
        exits = self.breaks.pop()
        if trips is None or trips == 0:  # it may not run at all, or stop after any walked iteration
            st.become(functools.reduce(_join, after + exits, entry))
        elif exits:
            st.become(functools.reduce(_join, exits, st))
        return before, [replace(s, body=tuple(body))]

    def iterations(
        self,
        body: tuple[T.Stmt, ...],
        st: _State,
        touches: bool,
        trips: int | None,
        apart: frozenset[str],
        head: T.SharedAccess,
    ) -> tuple[list[T.Stmt], list[_State]]:
        """The code of a loop body and the states after each iteration walked. A body issuing
        asynchronous copies carries commit groups from one iteration to the next, so it is walked
        until an iteration leaves the state as it found it (every later one is the same) or
        `trips` iterations are walked; every walk must give the same code. A loop of unknown trip
        count must be settled after `_SETTLE_WALKS` iterations: the next walk repeats the state
        (lowering's pipelines commit and wait once per iteration: the first iteration retires
        what came before the loop, the second leaves the state as the first did)."""
        code = self.iteration(body, st, touches, apart, head)
        after = [st.copy()]
        if not _has_async(body):
            return code, after
        while trips is None or len(after) < trips:
            if self.iteration(body, st, touches, apart, head) != code:
                raise error(None, "internal: a loop's barriers differ between its iterations")
            if st == after[-1]:
                break
            if trips is None and len(after) == _SETTLE_WALKS:
                raise error(None, "internal: the asynchronous copies of a loop of unknown trip count do not settle")
            after.append(st.copy())
        return code, after

    def iteration(
        self, body: tuple[T.Stmt, ...], st: _State, touches: bool, apart: frozenset[str], head: T.SharedAccess
    ) -> list[T.Stmt]:
        """One iteration of a loop body; nothing is left pending at its end (module docstring),
        but reads of tiles the body never writes and stores into arrays `apart` (disjoint_stores):
        the next iteration touches them without a hazard (reads again, stores elsewhere), and they
        stay pending after the loop for whatever accesses them next."""
        code = self.block(body, st)
        carried = st.writes - apart or st.reads & self.written_in(body)
        if touches and carried and not self.barrier_ahead(body, st, head):
            code += st.flush()
        return code

    def barrier_ahead(self, body: tuple[T.Stmt, ...], st: _State, head: T.SharedAccess) -> bool:
        """The next iteration of `body` meets a block barrier (its own, or the first one of a tile
        op opening with one: a cross-warp reduction) before any access that is a hazard with
        what `st` has pending at the end of this one (module docstring, Loops), the loop's bounds
        or condition (`head`, read before the body) first."""
        if _hazards(head, st, self.aliases):
            return False
        for s in body:
            match s:
                case T.Barrier(kind="block"):
                    return True
                case T.Scope(access=a):
                    if self.opens_with_barrier(s):
                        return True
                    if _hazards(a, st, self.aliases):
                        return False
                case T.Decl() | T.Assign():
                    if _hazards(self.scalar_access(s), st, self.aliases):
                        return False
                case T.Loop() | T.While() | T.IfThen():
                    if self.touches(s):
                        return False
                case T.Barrier() | T.SharedView() | T.Call() | T.Comment() | T.Break():
                    continue
                case _:
                    assert_never(s)
        return False

    def opens_with_barrier(self, scope: T.Scope) -> bool:
        """The tile op's code runs a block barrier before it touches shared memory or calls anything
        (a cross-warp reduction folds in registers first, then meets at its scratch): what is
        pending before it is ordered by that barrier."""
        for s in scope.body:
            match s:
                case T.Barrier(kind="block"):
                    return True
                case T.Decl() | T.Assign():
                    if self.scalar_access(s).touches:
                        return False
                case T.Comment() | T.SharedView():
                    continue
                case _:
                    return False
        return False

    def disjoint_stores(self, s: T.Loop) -> frozenset[str]:
        """The shared arrays that `s`'s body stores into, each iteration into elements no other
        iteration stores into (module docstring, Loops): plain scalar stores, their subscripts
        `apart` in one dimension, and nothing else (a read, a vector or reinterpreted store, a
        tile op, a call or barrier argument) touches the array or an array sharing its bytes.
        None in a body issuing asynchronous copies (it is walked iteration by iteration)."""
        if _has_async(s.body) or s.var.name not in self.once:
            return frozenset()
        stores, other = _stores(s.body)
        touched = stores.keys() | other
        changing = _assigned(s.body) | {s.var.name}
        out = set()
        for name, refs in stores.items():
            shared = name in self.shared and name not in other
            if shared and not (self.aliases.get(name, frozenset()) - {name}) & touched:
                if self.apart(refs, s.var.name, changing):
                    out.add(name)
        return frozenset(out)

    def apart(self, refs: list[T.Subscript], k: str, changing: frozenset[str]) -> bool:
        """Some dimension where every subscript of `refs` has the index `c * k + e`, the same c
        and e in all of them: c a constant other than 0, e a sum of constants and `uniform` names
        (none of `changing`, the names the loop's body declares or assigns) times constants. In
        iteration k they all store where that index is c * k + e, for one e in every thread and
        iteration: distinct k, distinct elements (each index inside its dimension)."""
        for d in range(len(refs[0].indices)):
            forms = {_affine(r.indices[d]) if d < len(r.indices) else None for r in refs}
            if len(forms) != 1 or (form := forms.pop()) is None:
                continue
            terms, _ = form
            rest = [n for n, _ in terms if n != k]
            if dict(terms).get(k) and all(n in self.uniform and n not in changing for n in rest):
                return True
        return False

    def written_in(self, body: tuple[T.Stmt, ...]) -> set[str]:
        """The shared tiles `body` (nested statements too) writes in any way, and those sharing
        their bytes."""
        out: set[str] = set()
        for t in T.all_stmts(body):
            match t:
                case T.Scope(access=a):
                    out |= a.writes | a.async_writes | a.tx_writes | a.stage_writes
                case T.Decl() | T.Assign() | T.IfThen() | T.Loop() | T.While():
                    out |= self.scalar_access(t).writes
        return out | {b for n in out for b in self.aliases.get(n, frozenset())}

    def owners_in(self, body: tuple[T.Stmt, ...]) -> dict[str, Owners | None]:
        """Each shared tile `body` touches -> the owner map all its accesses there have (None: they
        differ, or one has none: a scalar access, an op without a map)."""
        out: dict[str, Owners | None] = {}

        def note(names: Iterable[str], owners: dict[str, Owners]) -> None:
            for n in names:
                out[n] = owners.get(n) if out.get(n, owners.get(n)) == owners.get(n) else None

        def walk(stmts: tuple[T.Stmt, ...]) -> None:
            for t in stmts:
                match t:
                    case T.Scope(access=a):  # its own code is the op's business (module docstring)
                        note(a.reads | a.writes | a.async_writes | a.tx_writes | a.stage_writes, dict(a.owners))
                    case T.Decl() | T.Assign() | T.IfThen() | T.Loop() | T.While():
                        acc = self.scalar_access(t)
                        note(acc.reads | acc.writes, {})
                        for inner in T.bodies(t):
                            walk(inner)

        walk(body)
        return out

    def owned_throughout(self, touched: dict[str, Owners | None]) -> bool:
        """Every shared tile a loop body touches, each element from one thread, the same in all its
        accesses: one iteration's accesses need no barrier before the next one's."""
        return all(o is not None for o in touched.values()) and not any(
            self.aliases.get(n, frozenset()) - {n} for n in touched
        )

    def touches(self, s: T.Stmt) -> bool:
        """`s` (nested loops and branches too) touches shared memory."""
        match s:
            case T.Scope(access=access):
                return access.touches
            case T.Loop(body=body) | T.While(body=body):
                return self.scalar_access(s).touches or any(self.touches(x) for x in body)
            case T.IfThen(then=then, orelse=orelse):
                return self.scalar_access(s).touches or any(self.touches(x) for x in then + orelse)
            case T.Decl() | T.Assign():
                return self.scalar_access(s).touches
            case T.Barrier() | T.SharedView() | T.Call() | T.Comment() | T.Break():
                return False
            case _:
                assert_never(s)

    def scalar_access(self, s: T.Decl | T.Assign | T.IfThen | T.Loop | T.While) -> T.SharedAccess:
        """The shared arrays a statement outside tile ops reads and writes: a scalar store or
        declaration (`A_s[0][1] = x;`, `const float v = A_s[i][j];`), a branch's or while
        loop's condition, a loop's bounds (its body aside)."""
        reads: set[str] = set()
        writes: set[str] = set()
        match s:
            case T.Decl(init=init):
                if init is not None:
                    reads.update(_arrays(init))
            case T.Assign(target, value, op):
                reads.update(_arrays(value))
                ref = target.target if isinstance(target, T.VecRef) else target
                if isinstance(ref, T.Subscript):
                    writes.add(ref.array)
                    reads.update(_arrays(*ref.indices, *((ref,) if op != "=" else ())))
            case T.IfThen(cond=cond) | T.While(cond=cond):
                reads.update(_arrays(cond))
            case T.Loop(start=start, stop=stop):
                reads.update(_arrays(start, stop))
            case _:
                assert_never(s)
        return T.SharedAccess(reads=frozenset(reads & self.shared), writes=frozenset(writes & self.shared))


def _shared_arrays(body: tuple[T.Stmt, ...]) -> frozenset[str]:
    """The kernel's shared arrays: its views into dynamic shared memory and its shared T.Decls."""
    return frozenset(s.name for s in body if isinstance(s, T.SharedView) or (isinstance(s, T.Decl) and s.shared))


def _declared_once(kernel: T.Kernel) -> frozenset[str]:
    """The C names one parameter, declaration or loop of `kernel` declares, no other, and no
    statement assigns."""
    names = Counter(p.name for p in kernel.params)
    for s in T.all_stmts(kernel.body):
        match s:
            case T.Decl(name=name) | T.SharedView(name=name) | T.Loop(var=T.Sym(name=name)):
                names[name] += 1
            case T.Assign(target=T.Sym(name=name)):
                names[name] += 2
    return frozenset(n for n, count in names.items() if count == 1)


def _assigned(body: tuple[T.Stmt, ...]) -> frozenset[str]:
    """The C names `body` (nested statements, tile ops' code too) declares or assigns: their
    values may differ between its runs."""
    out: set[str] = set()
    for s in T.all_stmts(body):
        match s:
            case T.Decl(name=name) | T.Loop(var=T.Sym(name=name)) | T.Assign(target=T.Sym(name=name)):
                out.add(name)
    return frozenset(out)


def _stores(body: tuple[T.Stmt, ...]) -> tuple[dict[str, list[T.Subscript]], set[str]]:
    """The plain scalar stores into each array in `body`, nested statements too (`S[i][k] = x;`),
    and the arrays `body` touches any other way: reads them, stores a vector or another type
    into them, a tile op (anything in a Scope), a call or a barrier's argument."""
    stores: dict[str, list[T.Subscript]] = {}
    other: set[str] = set()
    for s in T.all_stmts(body):
        match s:
            case T.Assign(target=T.Subscript(reinterpret=False) as ref, value=value, op="="):
                stores.setdefault(ref.array, []).append(ref)
                other.update(_arrays(value, *ref.indices))
            case T.Assign(target=target, value=value):
                other.update(_arrays(target, value))
            case T.Decl(init=init):
                other.update(_arrays(init) if init is not None else ())
            case T.IfThen(cond=cond) | T.While(cond=cond):
                other.update(_arrays(cond))
            case T.Loop(start=start, stop=stop):
                other.update(_arrays(start, stop))
            case T.Call(call=call):
                other.update(_arrays(call))
            case T.Barrier(args=args):
                other.update(_arrays(*args))
            case T.Scope(access=a, body=inner):
                other.update(a.reads, a.writes, a.async_writes, a.tx_writes, a.stage_writes, _stores(inner)[0])
            case T.SharedView() | T.Comment() | T.Break():
                pass
            case _:
                assert_never(s)
    return stores, other


Affine = tuple[frozenset[tuple[str, int]], int]  # {C name: coefficient} (none 0), constant


def _affine(e: T.Expr) -> Affine | None:
    """`e` as a sum of C names times constants plus a constant, or None (another form)."""
    match e:
        case tir.IntImm(value=value):
            return frozenset(), value
        case T.Sym(name=name) | tir.Var(name=name):
            return frozenset({(name, 1)}), 0
        case tir.UnaryOp(op="-", a=a):
            return _scaled(_affine(a), -1)
        case tir.BinOp(op="+" | "-" as op, a=a, b=b):
            x, y = _affine(a), _scaled(_affine(b), 1 if op == "+" else -1)
            if x is None or y is None:
                return None
            terms = Counter(dict(x[0]))
            terms.update(dict(y[0]))
            return frozenset((n, c) for n, c in terms.items() if c), x[1] + y[1]
        case tir.BinOp(op="*", a=a, b=b):
            x, y = _affine(a), _affine(b)
            if x is not None and not x[0]:
                return _scaled(y, x[1])
            if y is not None and not y[0]:
                return _scaled(x, y[1])
            return None
        case _:
            return None


def _scaled(x: Affine | None, k: int) -> Affine | None:
    return None if x is None else (frozenset((n, c * k) for n, c in x[0] if c * k), x[1] * k)


def _arrays(*exprs: tir_walk.Node) -> Iterator[str]:
    """The C arrays the expressions subscript."""
    for e in exprs:
        yield from (x.array for x in tir_walk.subexprs(e) if isinstance(x, T.Subscript))


def _access(a: T.SharedAccess, st: _State, span: Span, aliases: dict[str, frozenset[str]]) -> list[T.Stmt]:
    """The barrier a statement doing `a` needs before it, if any; then its accesses are pending.
    Views sharing bytes (`aliases`) are one storage: an access of one meets the pending
    accesses of all of them, and a pipeline's stage writes those of the tiles whose bytes it took."""
    reads = _storage(a.reads, aliases)
    writes = _storage(a.writes | a.async_writes | a.tx_writes, aliases)
    early = (reads | writes) & st.in_flight()
    if early:
        raise error(
            span,
            f"internal: '{sorted(early)[0]}' is accessed while an asynchronous write of it may be in flight "
            "(no wait retires it first)",
        )
    hazard = _hazards(a, st, aliases)
    owners = dict(a.owners)
    pending = st.reads | st.writes
    own = {x for x in hazard if owners.get(x) is not None and st.owner.get(x) == owners[x]}
    own = {x for x in own if not (aliases.get(x, frozenset()) - {x}) & pending}  # nothing else on its bytes
    before = st.flush() if hazard - own else []
    pending = st.reads | st.writes
    for x in a.reads | a.writes:  # the owner map of x's pending accesses, None once they differ
        mine = owners.get(x)
        st.owner[x] = mine if x not in pending or st.owner.get(x) == mine else None
    st.reads |= a.reads
    st.writes |= a.writes
    st.uncommitted |= a.async_writes
    if a.tx_writes:
        if a.mbarrier is None:
            raise error(span, "internal: TMA writes without the mbarrier that completes them")
        st.tx[a.mbarrier] = st.tx.get(a.mbarrier, frozenset()) | a.tx_writes
    return before


def _hazards(a: T.SharedAccess, st: _State, aliases: dict[str, frozenset[str]]) -> frozenset[str]:
    """The storage where doing `a` meets an access `st` has pending: a read of a pending write, a
    write of a pending read or write (views sharing bytes are one storage; a pipeline's stage
    writes meet only the tiles whose bytes they took, module docstring)."""
    reads = _storage(a.reads, aliases)
    writes = _storage(a.writes | a.async_writes | a.tx_writes, aliases)
    others = _storage(a.stage_writes, aliases) - a.stage_writes
    return (reads & st.writes) | ((writes | others) & (st.reads | st.writes))


def _storage(names: frozenset[str], aliases: dict[str, frozenset[str]]) -> frozenset[str]:
    """`names` and every view sharing bytes with one of them."""
    return names.union(*(aliases.get(n, ()) for n in names))


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
                raise error(None, "internal: an async_wait needs a constant group count")
            cut = max(len(st.groups) - keep, 0)
            st.writes.update(*st.groups[:cut])  # complete in this thread; the block sees them after a barrier
            st.owner |= {name: None for name in frozenset().union(*st.groups[:cut])}
            st.groups = st.groups[cut:]
        case "mbarrier_wait":
            st.tx.pop(b.args[0], None)  # complete, and visible to every thread that waited
        case "mbarrier_init" | "mbarrier_arrive" | "mbarrier_expect_tx" | "named" | "named_arrive":
            pass  # nothing the pass tracks is retired (module docstring)
        case "fence_proxy_async":
            pass  # nothing the pass tracks is retired (module docstring)
        case _:
            assert_never(b.kind)


def _trip_count(s: T.Loop) -> int | None:
    start, stop = const(s.start), const(s.stop)
    if start is None or stop is None:
        return None
    return max(0, -(-(stop - start) // s.step))


def _has_async(body: tuple[T.Stmt, ...]) -> bool:
    """`body` issues, commits or waits for asynchronous writes (its iterations may differ)."""
    return any(_is_async(s) for s in body)


def _is_async(s: T.Stmt) -> bool:
    match s:
        case T.Scope(access=a):
            return bool(a.async_writes or a.tx_writes)
        case T.Barrier(kind=kind):
            return kind in ("async_commit", "async_wait", "mbarrier_wait")
        case T.Loop(body=body) | T.While(body=body):
            return _has_async(body)
        case T.IfThen(then=then, orelse=orelse):
            return _has_async(then) or _has_async(orelse)
        case T.Decl() | T.SharedView() | T.Assign() | T.Call() | T.Comment() | T.Break():
            return False
        case _:
            assert_never(s)


# ---------------------------------------------------------------- what lowering records


def shared_reads_writes(s: tir.Stmt) -> tuple[set[tir.Buffer], set[tir.Buffer]]:
    """Shared buffers a tile op reads and writes (lowering records them on its Scope): the
    statements' destinations are written, their other operands read, and so is every shared
    element their expressions load (an alloc_var's init, a gather's table, a loop's bounds)."""
    reads: set[tir.Buffer] = set()
    writes: set[tir.Buffer] = set()
    for x in tir_walk.stmts((s,)):
        written = tir_walk.written(x)
        writes.update(b for b in written if b.scope == "shared")
        operands = [r.buffer for r in tir_walk.regions(x) if r.buffer not in written]
        loaded = [ld.buffer for e in tir_walk.stmt_exprs(x) for ld in tir_walk.loads(e)]
        reads.update(b for b in operands + loaded if b.scope == "shared")
    return reads, writes
