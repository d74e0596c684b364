"""Block-uniform values: which scalars are the same in every thread of a block, and the check
that needs it. A `while` loop's condition, and the conditions a `break` sits under (up to its
loop), must be block-uniform: then every thread runs the same iterations, and the barriers inside
the loop and after it are reached by all of them. An explicit `sync_threads()` must sit in
block-uniform control flow only (no varying branch or loop bound around it, no Parallel), and so
must a warp shuffle (every lane of the warp takes part in it).
thread_index(), lane_index(), warp_index() and shuffles (shfl_xor, shfl_down) are varying.

    i = alloc_var(int32, bx * 4)      uniform: constants, kernel scalars, dims, block indices
    t = thread_index()                varying: the thread index, and every element of a buffer
    while i < n:                      ok
        i += 1
    while t < n:                      error: the condition of a while loop reads 't'
    if t < 32:
        sync_threads()                error: a block barrier that not every thread reaches

A name is uniform when every value it takes is: a `let` of a uniform expression, a loop variable
of uniform bounds (in uniform control flow), an alloc_var whose every assignment is of a uniform
value in uniform control flow (not inside Parallel, nor under a varying condition). Loads of
buffers other than alloc_vars are varying: tilec cannot prove that every thread reads the same
value (another block may write a tensor meanwhile). The analysis is flow-insensitive: it iterates
over the kernel's body until nothing more turns varying.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import assert_never

from tilec import tir, tir_walk
from tilec.diagnostics import Diagnostic, Note

Varying = set[tir.Var | tir.Buffer]


def not_uniform(body: tuple[tir.Stmt, ...]) -> list[Diagnostic]:
    """A diagnostic for each `while` condition and `break` of `body` that is not block-uniform."""
    varying: Varying = set()
    while True:
        before = len(varying)
        spread = _Spread(varying)
        spread.block(body, True)
        if len(varying) == before:
            break
    check = _Check(varying)
    check.block(body, [])
    for s in spread.divergent:
        what = "sync_threads()" if isinstance(s, tir.SyncThreads) else "a warp shuffle"
        every = "a block barrier" if isinstance(s, tir.SyncThreads) else "a shuffle of the whole warp"
        check.diags.append(
            Diagnostic(
                s.span,
                f"{what} where the threads of the block may not all arrive: it sits in a Parallel loop, or a "
                "loop or branch whose condition may differ between threads",
                hint=f"{every} must be reached by every thread; move it out, or branch on "
                "kernel scalars, dims, block indices and uniformly assigned alloc_vars",
            )
        )
    return check.diags


def _shuffle(e: tir.Expr) -> bool:
    return any(isinstance(x, tir.Call) and x.func in ("shfl_xor", "shfl_down") for x in tir_walk.subexprs(e))


def thread_varying(body: tuple[tir.Stmt, ...]) -> Varying:
    """The names and buffers of `body` whose values depend on which thread computes them: the
    thread's index, lane and warp, what is computed from them, and per-thread storage (local
    arrays, fragments). Unlike block-uniformity, a load of a global tensor or shared tile at a
    uniform index counts as the same in every thread here."""
    varying: Varying = set()
    while True:
        before = len(varying)
        _Spread(varying, memory=False).block(body, True)
        if len(varying) == before:
            return varying


def per_thread(e: tir.Expr, varying: Varying) -> bool:
    """`e` depends on the thread computing it (`varying` from thread_varying)."""
    return reason(e, varying, memory=False) is not None


def reason(e: tir.Expr, varying: Varying, memory: bool = True) -> str | None:
    """What makes `e` differ between threads (the first such leaf, named), None if nothing does;
    with `memory` False a load of a global tensor or shared tile varies only by its indices."""
    for x in tir_walk.subexprs(e):
        match x:
            case tir.Call("thread_index" | "lane_index" | "warp_index" as name, ()):
                return f"{name}()"
            case tir.Call("shfl_xor" | "shfl_down" as name):
                return f"{name}(), another lane's value"
            case tir.Var() if x in varying:
                return f"'{x.name}', whose value may differ between threads"
            case tir.Load(buffer=b) if b.scope != "var" and (memory or b.scope in ("local", "fragment")):
                return f"'{b.name}', a {b.scope} {'tensor' if b.scope == 'global' else 'buffer'}"
            case tir.Load(buffer=b) if b in varying:
                return f"'{b.name}', whose value may differ between threads"
    return None


@dataclass
class _Spread:
    """One walk: marks varying each name given a varying value or assigned in varying control flow."""

    varying: Varying
    memory: bool = True  # loads of global tensors and shared tiles vary (reason)
    divergent: list[tir.Stmt] = field(default_factory=list)  # barriers, shuffles in varying control flow

    def uniform(self, *exprs: tir.Expr) -> bool:
        return all(reason(e, self.varying, self.memory) is None for e in exprs)

    def block(self, body: tuple[tir.Stmt, ...], control: bool) -> None:
        for s in body:
            self.stmt(s, control)

    def stmt(self, s: tir.Stmt, control: bool) -> None:
        if not control and any(_shuffle(e) for e in tir_walk.stmt_exprs(s)):
            self.divergent.append(s)
        match s:
            case tir.Let(var, value):
                self.mark(var, self.uniform(value))
            case tir.Alloc(buffer=b, init=init) if b.scope == "var":
                self.mark(b, init is None or self.uniform(init))
            case tir.Store(buffer=b, value=value) if b.scope == "var":
                self.mark(b, control and self.uniform(value))
            case tir.For(var, start, stop, step, body=body):
                inside = control and self.uniform(start, stop, step)
                self.mark(var, inside)
                self.block(body, inside)
            case tir.While(cond, body):
                self.block(body, control and self.uniform(cond))
            case tir.If(cond, then, orelse):
                self.block(then, control and self.uniform(cond))
                self.block(orelse, control and self.uniform(cond))
            case tir.Parallel(vars=vars, body=body):
                self.varying.update(vars)
                self.block(body, False)
            case tir.SyncThreads():
                if not control:
                    self.divergent.append(s)
            case (
                tir.Alloc()
                | tir.Store()
                | tir.Copy()
                | tir.Gemm()
                | tir.Fill()
                | tir.Reduce()
                | tir.CumSum()
                | tir.Atomic()
                | tir.Break()
                | tir.Print()
                | tir.DeviceAssert()
                | tir.UseSwizzle()
                | tir.AnnotateLayout()
            ):
                pass  # no scalar name of its own (buffers' elements are varying anyway)
            case _:
                assert_never(s)

    def mark(self, name: tir.Var | tir.Buffer, uniform: bool) -> None:
        if not uniform:
            self.varying.add(name)


@dataclass
class _Check:
    """The walk reporting varying `while` conditions and breaks under varying conditions;
    `block`'s `conds` are the branches (If statements) since the innermost loop."""

    varying: Varying
    diags: list[Diagnostic] = field(default_factory=list)

    def block(self, body: tuple[tir.Stmt, ...], conds: list[tir.If]) -> None:
        for s in body:
            match s:
                case tir.While(cond, inner):
                    self.condition(s, cond)
                    self.block(inner, [])
                case tir.Break():
                    self.break_(s, conds)
                case tir.If():
                    self.block(s.then, [*conds, s])
                    self.block(s.orelse, [*conds, s])
                case _:
                    for inner in tir_walk.bodies(s):
                        self.block(inner, [] if isinstance(s, tir.For) else conds)

    def condition(self, s: tir.While, cond: tir.Expr) -> None:
        why = reason(cond, self.varying)
        if why is not None:
            self.diags.append(
                Diagnostic(
                    s.span,
                    f"the condition of a while loop must be the same in every thread of the block; it reads {why}",
                    hint="loop while a condition of kernel scalars, dims, block indices and uniformly assigned "
                    "alloc_vars holds",
                )
            )

    def break_(self, s: tir.Break, conds: list[tir.If]) -> None:
        for branch in conds:
            why = reason(branch.cond, self.varying)
            if why is not None:
                self.diags.append(
                    Diagnostic(
                        s.span,
                        f"`break` under a condition that may differ between the threads of the block (it reads {why})",
                        hint="every thread of the block leaves the loop together: break under a condition of "
                        "kernel scalars, dims, block indices and uniformly assigned alloc_vars",
                        notes=(Note(branch.span, "the condition is here"),),
                    )
                )
                return
