"""Loops lowered by their manual schedule (`Pipelined(..., order=, stage=, group=)`, schedules.py).

Each unit runs `ahead` iterations ahead of the last stage (plan_pipeline); iteration `it` of the
emitted loop runs every unit on iteration it + ahead, in the schedule's order, the copies of
stage -1 first. The D = max(ahead) iterations before the loop are its prologue, written out
(unit u runs in prologue iteration it when it + ahead[u] >= 0); a unit running ahead is guarded
by `it + ahead < n`, so no epilogue is needed:

    stage=[-1, 0, 0, 1, -1, 1]                  // prologue, it = -2: copy K tile 0; commit
    order=[-1, 0, 3, 1, -1, 2]                  // it = -1: wait, barrier; copies K 1, V 0; commit;
      copy K         (ahead 2)                  //          Q K^T and softmax of tile 0
      Q K^T, mask    (ahead 1)        ->        for (k = 0; k < n; ++k) {
      softmax, cast  (ahead 1)                    wait; barrier
      rescale O      (ahead 0)                    if (k + 2 < n) copy K tile k + 2; if (k + 1 < n) copy V tile k + 1
      copy V         (ahead 1)                    commit
      P V            (ahead 0)                    if (k + 1 < n) Q K^T of tile k + 1
                                                  rescale O; P V of tile k
                                                  if (k + 1 < n) softmax of tile k + 1
                                                }

A copy writes the stage of the iteration it fetches, (it + ahead) % num_stages, read by units at
their own iteration's stage. Every iteration, prologue ones included, commits one group of
asynchronous copies (possibly empty); an iteration that runs any other unit starts with a wait
until `pending` groups are left (the plan's count: each reader's tile has landed) and a block
barrier, which also retires the reads of the stages the iteration's copies overwrite (they were
read at least one iteration earlier).
"""

from __future__ import annotations

from tilec import thread_ir as T
from tilec import tir
from tilec.lower.cexpr import I32, add, lt, source_comment
from tilec.lower.context import LowerContext, shared_names
from tilec.lower.exprs import value_of
from tilec.lower.pipelined import COMMIT, StmtLowering, async_copy_scope, wait_until
from tilec.simplify import const, int_, simplify
from tilec.sync import BLOCK, shared_reads_writes


def lower_scheduled(ctx: LowerContext, s: tir.For, lower_stmt: StmtLowering) -> list[T.Stmt]:
    """A Pipelined loop whose plan follows its manual schedule (tir.Schedule.honoured)."""
    sched = s.schedule
    assert sched is not None and sched.honoured
    start = simplify(value_of(ctx, s.start, None))
    count = simplify(value_of(ctx, tir.BinOp("-", s.stop, s.start, I32), None))
    steps = _steps(s, sched)
    depth = max(sched.ahead)
    lines = ", ".join(f"{_where(s, sched, u)} stage {sched.stage[u]}" for u in range(len(sched.units)))
    out: list[T.Stmt] = [
        T.Comment(source_comment(s, words=6)),
        T.Comment(f"manual pipeline schedule, {s.num_stages} stages: {lines}"),
    ]
    for it in range(-depth, 0):  # the prologue
        out.append(T.Comment(f"prologue: iteration {it} of the schedule"))
        out += _iteration(ctx, s, steps, start, count, int_(it), it, lower_stmt)
    it_var = tir.Var(ctx.name(s.var) + "_iter" if const(start) != 0 else ctx.name(s.var), I32, "thread")
    ctx.state.nonneg.add(it_var.name)
    body = _iteration(ctx, s, steps, start, count, it_var, None, lower_stmt)
    out.append(T.Loop(T.Sym(it_var.name, I32), int_(0), count, 1, False, tuple(body)))
    if any(producer for _, _, producer in steps):
        out += [wait_until(0), BLOCK]
    ctx.state.cvars.pop(s.var, None)
    return out


def _steps(s: tir.For, sched: tir.Schedule) -> list[tuple[int, tuple[tir.Stmt, ...], bool]]:
    """The units in emitted order: (ahead, statements, a producer copy), stage -1 copies first,
    then by order; the loop's lets go first, on the last stage's iteration."""
    lets = [(0, (t,), False) for t in s.body if isinstance(t, tir.Let)]
    units = sorted(range(len(sched.units)), key=lambda u: (sched.order[u], sched.units[u]))
    out = []
    for u in units:
        stmts = tuple(s.body[p] for p in sched.units[u])
        producer = isinstance(stmts[0], tir.Copy) and stmts[0].pipeline == "producer"
        out.append((sched.ahead[u], stmts, producer))
    return lets + out


def _iteration(
    ctx: LowerContext,
    s: tir.For,
    steps: list[tuple[int, tuple[tir.Stmt, ...], bool]],
    start: tir.Expr,
    count: tir.Expr,
    it: tir.Expr,
    static: int | None,
    lower_stmt: StmtLowering,
) -> list[T.Stmt]:
    """One iteration of the schedule: `it` the emitted loop's counter, or the constant `static`
    of a prologue iteration (whose units of too small an `ahead` do not run)."""
    sched = s.schedule
    assert sched is not None
    active = [step for step in steps if static is None or static + step[0] >= 0]
    copies = any(producer for _, _, producer in steps)  # none: no groups to wait for (sync places barriers)
    out: list[T.Stmt] = []
    if copies and any(not producer for _, _, producer in active):
        out += [wait_until(sched.pending), BLOCK]
    last_copy = max((i for i, (_, _, producer) in enumerate(active) if producer), default=-1)
    if copies and last_copy == -1:
        out.append(COMMIT)
    for i, (ahead, stmts, producer) in enumerate(active):
        iteration = simplify(add(it, int_(ahead)))
        ctx.state.cvars[s.var] = simplify(add(start, iteration))
        stage = _stage(it, ahead, s.num_stages)
        code = _produce(ctx, stmts, stage) if producer else _consume(ctx, s, stmts, it, ahead, lower_stmt)
        if ahead > 0 or static is not None:
            out.append(T.IfThen(lt(iteration, count), tuple(code)))
        else:
            out += code
        if i == last_copy:
            out.append(COMMIT)
    return out


def _produce(ctx: LowerContext, stmts: tuple[tir.Stmt, ...], stage: tir.Expr) -> list[T.Stmt]:
    code: list[T.Stmt] = []
    for prod in stmts:
        assert isinstance(prod, tir.Copy)
        reads, writes = shared_reads_writes(prod)
        access = T.SharedAccess(reads=shared_names(ctx, reads), stage_writes=shared_names(ctx, writes))
        ctx.state.stage_of[prod.dst.buffer] = stage
        code.append(async_copy_scope(ctx, prod, access))
        del ctx.state.stage_of[prod.dst.buffer]
    return code


def _consume(
    ctx: LowerContext, s: tir.For, stmts: tuple[tir.Stmt, ...], it: tir.Expr, ahead: int, lower_stmt: StmtLowering
) -> list[T.Stmt]:
    """Statements working on `iteration`: the producers' tiles read at its stage."""
    tiles = [t.dst.buffer for t in s.body if isinstance(t, tir.Copy) and t.pipeline == "producer"]
    for tile in tiles:
        ctx.state.stage_of[tile] = _stage(it, ahead, s.num_stages)
    code = [c for t in stmts for c in lower_stmt(ctx, t)]
    for tile in tiles:
        del ctx.state.stage_of[tile]
    return code


def _stage(it: tir.Expr, ahead: int, stages: int) -> tir.Expr:
    """The stage of iteration it + ahead's tiles (it + ahead >= 0): (it + ahead % stages) % stages
    for the loop's counter (at least 0), (it + ahead) % stages for a prologue's constant iteration,
    which may be negative (C's % keeps a negative dividend's sign)."""
    shift = ahead if isinstance(it, tir.IntImm) else ahead % stages
    return simplify(tir.BinOp("%", add(it, int_(shift)), int_(stages), I32))


def _where(s: tir.For, sched: tir.Schedule, u: int) -> str:
    lines = sorted({s.body[p].span.line for p in sched.units[u]})
    return f"line {lines[0]}" if len(lines) == 1 else f"lines {lines[0]}-{lines[-1]}"
