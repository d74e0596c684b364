"""Software-pipelined loops: producers run num_stages - 1 iterations ahead.

    for k in Pipelined(n, num_stages=3):         for (p = 0; p < 2; ++p) {       // prologue
        copy(A[.., k * 32], A_shared)              if (p < n) async A[.., p * 32] -> A_shared[p]
        gemm(A_shared, B_shared, C)                commit
                                                 }
                                         ->      for (k = 0; k < n; ++k) {
                                                   read_stage = k % 3; write_stage = (k + 2) % 3
                                                   wait until 1 group is pending; block barrier
                                                   if (k + 2 < n) async A[.., (k + 2) * 32] -> A_shared[write_stage]
                                                   commit
                                                   gemm(A_shared[read_stage], B_shared[read_stage], C)
                                                 }

The stages an iteration reads, reads next and writes are named constants at the
top of its body (`const int write_stage = (k + 2) % 3;`).

The barrier at the top of an iteration both publishes the stage about to be
read and retires the reads of the stage about to be overwritten (it was read
in the previous iteration). A trip count below the number of stages, or one
that depends on the block (causal attention), is handled by the `< n` guards:
every iteration still commits a (possibly empty) group, so the wait counts
stay exact.

A GEMM main loop - a body that is only the pipelined copies and one
tensor-core gemm of two tiles they fill, with 3 or more stages - also
pipelines the gemm's fragments: each k step's fragment loads run one step
ahead of its matrix instructions, into a second set of registers, and the barrier moves
into the last step (before the next tile's first fragments are loaded), so
neither the barrier nor the loads' latency sits between two runs of mma:

    for (k = 0; k < n; ++k) {           // fragments of step 0 loaded before the loop
      load fragments of step 1 (tile k: read_stage) into set 1
      if (k + 2 < n) async copy tile k + 2 -> write_stage;  commit
      mma on set 0
      wait until 1 group is pending; block barrier
      if (k + 1 < n) load fragments of step 0 (tile k + 1: next_stage) into set 0
      mma on set 1
    }

The stage overwritten in iteration k was last read before the barrier of
iteration k - 1, so one barrier per iteration still suffices.

In other loops, a copy may be issued later in the iteration, after a gemm
(plan_pipeline's issue points: flash attention's V after Q K^T); the
stage it writes is still the one read in iteration k - 1, and the one
commit per iteration moves after it.

A target without asynchronous copies (CDNA: the backend's ASYNC_COPY_BYTES is empty) stages the
copies of the next stage through registers instead: the global loads into a register tile per
copy go where the asynchronous copy would be issued, the stores from it to the stage after the
iteration's consumers (a main loop: before its last step's barrier), so that the loads' latency
overlaps this stage's matrix instructions:

    for (k = 0; k < n; ++k) {
      wait; block barrier                       (the wait prints nothing)
      if (k + 2 < n) A_next = A[.., (k + 2) * 32]      // global loads into registers
      gemm(A_shared[read_stage], ...)
      if (k + 2 < n) A_shared[write_stage] = A_next    // LDS stores, before the next barrier
    }

The waits, commits and barriers above are the schedule, and this module
places them, as T.Barrier nodes (`async_wait`, `async_commit`, `block`); the
sync pass (sync.py) reads them like any other barrier. The producers' Scopes
record their writes as `stage_writes` (the stage nothing reads before the next
wait + barrier), an early copy's as `async_writes` (retired by the loop's
first wait); the consumers are ordinary tile ops, ordered by the pass.
"""

from __future__ import annotations

from tilec import layout as L
from tilec import thread_ir as T
from tilec import tir
from tilec.lower.cexpr import I32, add, lt, source_comment
from tilec.lower.context import LowerContext, MmaGemm, StmtLowering, shared_names
from tilec.lower.exprs import value_of
from tilec.lower.ops import lower_copy
from tilec.passes import plan_pipeline
from tilec.simplify import const, int_, simplify
from tilec.sync import BLOCK, shared_reads_writes
from tilec.targets import instruction_named

COMMIT = T.Barrier("async_commit")


def wait_until(pending: int) -> T.Barrier:
    """Wait until at most `pending` of this thread's asynchronous-copy groups are in flight."""
    return T.Barrier("async_wait", (int_(pending),))


def lower_pipelined(ctx: LowerContext, s: tir.For, lower_stmt: StmtLowering) -> list[T.Stmt]:
    """A loop with producers (passes/plan_pipeline.py); `lower_stmt` lowers its consumers (kernel.py)."""
    if s.single_buffered:
        return _single_buffered(ctx, s, lower_stmt)
    stages = s.num_stages
    producers = plan_pipeline.producers(s)
    consumers = tuple(x for x in s.body if not (isinstance(x, tir.Copy) and x.pipeline == "producer"))
    start = simplify(value_of(ctx, s.start, None))
    count = simplify(value_of(ctx, tir.BinOp("-", s.stop, s.start, I32), None))
    lead = "1 iteration" if stages == 2 else f"{stages - 1} iterations"
    out: list[T.Stmt] = [
        T.Comment(source_comment(s, words=6)),
        T.Comment(f"software pipeline, {stages} stages: copies run {lead} ahead"),
    ]
    # prologue: the first stages - 1 iterations' copies
    p = tir.Var(ctx.fresh("stage"), I32, "thread")
    ctx.state.bounds[p] = stages - 2
    fill = _produce(ctx, s.var, producers, start, p, p, count)
    out.append(T.Loop(T.Sym(p.name, I32), int_(0), int_(stages - 1), 1, True, tuple(fill)))
    # steady state
    it = tir.Var(ctx.name(s.var) + "_iter" if const(start) != 0 else ctx.name(s.var), I32, "thread")
    ctx.state.nonneg.add(it.name)  # the iteration: 0, 1, ..., count - 1
    names = _stage_names(ctx, it, stages)
    read_stage, next_stage, write_stage = (var for var, _ in names)
    ahead = simplify(add(it, int_(stages - 1)))
    staging: list[T.Stmt] = []  # without asynchronous copies: the registers of the next stage
    stores: list[T.Stmt] = []  # and their stores to LDS, after this stage's consumers
    if ctx.backend.ASYNC_COPY_BYTES:
        prefetch = _produce(ctx, s.var, producers, start, ahead, write_stage, count)
    else:
        staging, prefetch, stores = _staged(ctx, s.var, producers, start, ahead, write_stage, count)
    ctx.state.cvars[s.var] = simplify(add(start, it))  # the user's k is start + iteration
    mma = _mainloop_gemm(ctx, consumers)
    body: list[T.Stmt] = [decl for _, decl in names]  # unused ones are dropped after lowering
    body += staging
    if mma is not None:
        setup, steps = _mainloop(ctx, mma, stages, it, count, prefetch, read_stage, next_stage, stores)
        out += setup
        body += steps
    else:
        body += [wait_until(stages - 2), BLOCK]  # publishes stage k, retires the reads of stage k - 1
        for prod in producers:
            ctx.state.stage_of[prod.dst.buffer] = read_stage
        body += _interleaved(ctx, producers, consumers, prefetch, lower_stmt)
        for prod in producers:
            del ctx.state.stage_of[prod.dst.buffer]
        body += stores
    out.append(T.Loop(T.Sym(it.name, I32), int_(0), count, 1, False, tuple(body)))
    out += [wait_until(0), BLOCK]
    return out


def _stage_names(ctx: LowerContext, it: tir.Var, stages: int) -> list[tuple[tir.Var, T.Decl]]:
    """The stages iteration `it` reads, reads next (a GEMM main loop's fragments of the next
    tile) and writes (the copies run stages - 1 iterations ahead), each a named constant:
    `const int write_stage = (k + 2) % 3;`."""
    out = []
    for name, ahead in (("read_stage", 0), ("next_stage", 1), ("write_stage", stages - 1)):
        var = tir.Var(ctx.fresh(name), I32, "thread")
        ctx.state.bounds[var] = stages - 1
        index = simplify(tir.BinOp("%", add(it, int_(ahead)), int_(stages), I32))
        out.append((var, T.Decl(var.name, I32, init=index, const=True)))
    return out


def _interleaved(
    ctx: LowerContext,
    producers: list[tir.Copy],
    consumers: tuple[tir.Stmt, ...],
    prefetch: list[T.Stmt],
    lower_stmt: StmtLowering,
) -> list[T.Stmt]:
    """The consumers, with each producer's prefetch issued at the top of the iteration or right
    after the gemm whose `then_issue` names its tile (plan_pipeline), and one commit after the last."""
    guard, commit = prefetch
    assert isinstance(guard, T.IfThen) and len(guard.then) == len(producers)
    after: dict[int | None, list[T.Stmt]] = {}
    for prod, code in zip(producers, guard.then):
        after.setdefault(_issued_after(prod, consumers), []).append(code)
    last = max((i for i in after if i is not None), default=None)  # the consumer after which the last copies go out
    out: list[T.Stmt] = [T.IfThen(guard.cond, tuple(after[None]))] if None in after else []
    if last is None:
        out.append(commit)
    for i, c in enumerate(consumers):
        out += lower_stmt(ctx, c)
        if i in after:
            out.append(T.IfThen(guard.cond, tuple(after[i])))
        if i == last:
            out.append(commit)
        if i in after:  # a gemm left running while they were issued (wgmma) is completed here
            assert isinstance(c, tir.Gemm)
            out += ctx.backend.gemm_wait(ctx, c, instruction_named(ctx.target, c.instruction))
    return out


def _mainloop_gemm(ctx: LowerContext, consumers: tuple[tir.Stmt, ...]) -> MmaGemm | None:
    """The gemm of a GEMM main loop (module docstring), or None."""
    g = consumers[0] if len(consumers) == 1 else None
    if not isinstance(g, tir.Gemm) or not g.fragments_ahead:
        return None
    staging, mma = ctx.backend.setup(ctx, g, instruction_named(ctx.target, g.instruction))
    assert not staging, "a main-loop gemm reads both operands from pipelined shared tiles"
    return mma


def _mainloop(
    ctx: LowerContext,
    mma: MmaGemm,
    stages: int,
    it: tir.Var,
    count: tir.Expr,
    prefetch: list[T.Stmt],
    current: tir.Var,
    following: tir.Var,
    stores: list[T.Stmt],
) -> tuple[list[T.Stmt], list[T.Stmt]]:
    """The code before the steady-state loop and its body, for a GEMM main loop; `stores` (a
    register-staged prefetch's stores to LDS, `_staged`) go before the last step's barrier."""
    g = mma.gemm
    regs = [ctx.backend.registers(ctx, mma), ctx.backend.registers(ctx, mma)]

    def load(regset: int, stage: tir.Expr, step: int) -> list[T.Stmt]:
        operands = {g.a.buffer, g.b.buffer}  # one tile when A and B are the same
        for buf in operands:
            ctx.state.stage_of[buf] = stage
        code = ctx.backend.load(ctx, mma, *regs[regset], int_(step))
        for buf in operands:
            del ctx.state.stage_of[buf]
        return code

    wait: list[T.Stmt] = [wait_until(stages - 2), BLOCK]
    setup = wait + [d for r in regs for d in ctx.backend.declare(mma, *r)]
    setup.append(T.IfThen(lt(int_(0), count), tuple(load(0, int_(0), 0))))
    body: list[T.Stmt] = [T.Comment(source_comment(g)), T.Comment("fragments are loaded one k step ahead")]
    parts = _spread(prefetch, mma.steps)
    # groups newer than tile k + 1 at the barrier: tiles k + 2 .. k + stages - 2 (one group each
    # counted, which is exact while they come from the prologue and waits longer after), and the
    # groups of tile k + stages - 1, all committed before the last step
    pending = stages - 3 + sum(1 for part in parts if part)
    for step in range(mma.steps):
        if step + 1 < mma.steps:
            body += load((step + 1) % 2, current, step + 1)
        else:
            body += [*stores, wait_until(pending), BLOCK]
            body.append(T.IfThen(lt(add(it, int_(1)), count), tuple(load(0, following, 0))))
        body += parts[step]
        body += ctx.backend.products(ctx, mma, *regs[step % 2])
    return setup, body


def lower_early_copy(ctx: LowerContext, s: tir.Copy) -> list[T.Stmt]:
    """A copy before a pipelined loop, issued asynchronously in a group of its own;
    the loop's first wait (and barrier) retires and publishes it (plan_pipeline)."""
    reads, writes = shared_reads_writes(s)
    access = T.SharedAccess(reads=shared_names(ctx, reads), async_writes=shared_names(ctx, writes))
    return [async_copy_scope(ctx, s, access), COMMIT]


def async_copy_scope(ctx: LowerContext, s: tir.Copy, access: T.SharedAccess) -> T.Scope:
    """`s` issued as an asynchronous global -> shared copy (the backend's async_copy); on a
    target without one, vector loads and stores that have landed when the thread moves on."""
    ctx.state.async_copy = bool(ctx.backend.ASYNC_COPY_BYTES)
    code = lower_copy(ctx, s)
    ctx.state.async_copy = False
    return T.Scope(source_comment(s), tuple(code), s.span, access)


def _produce(
    ctx: LowerContext,
    var: tir.Var,
    producers: list[tir.Copy],
    start: tir.Expr,
    iteration: tir.Expr,
    stage: tir.Expr,
    count: tir.Expr,
) -> list[T.Stmt]:
    """Issue the copies of `iteration` into `stage`, then commit a group."""
    ctx.state.cvars[var] = simplify(add(start, iteration))
    code: list[T.Stmt] = []
    for prod in producers:
        reads, writes = shared_reads_writes(prod)
        access = T.SharedAccess(reads=shared_names(ctx, reads), stage_writes=shared_names(ctx, writes))
        ctx.state.stage_of[prod.dst.buffer] = stage
        code.append(async_copy_scope(ctx, prod, access))
        del ctx.state.stage_of[prod.dst.buffer]
    return [T.IfThen(lt(iteration, count), tuple(code)), COMMIT]


def _staged(
    ctx: LowerContext,
    var: tir.Var,
    producers: list[tir.Copy],
    start: tir.Expr,
    iteration: tir.Expr,
    stage: tir.Expr | None,
    count: tir.Expr,
) -> tuple[list[T.Stmt], list[T.Stmt], list[T.Stmt]]:
    """The copies of `iteration` into `stage` staged through registers, for a target without
    asynchronous copies: (the registers' declarations, the global loads into them and a commit,
    in `_produce`'s form, the guarded stores from them to LDS). The loads are issued where an
    asynchronous copy would be, before this stage's consumers; the stores go after them, before
    the next wait + barrier (nothing reads `stage` until then: `stage_writes`). `stage` None: the
    tiles' one buffer (`_single_buffered`), whose stores are ordinary writes."""
    ctx.state.cvars[var] = simplify(add(start, iteration))
    decls: list[T.Stmt] = []
    loads: list[T.Stmt] = []
    stores: list[T.Stmt] = []
    for prod in producers:
        reg = _staging_buffer(ctx, prod)
        decls.append(T.Decl(ctx.name(reg), reg.dtype, (ctx.layouts.buffers[reg].local_size,)))
        whole = tir.Region(reg, tuple(int_(0) for _ in reg.shape), reg.shape, prod.span)
        load = tir.Copy(prod.src, whole, pad=prod.pad, guard=prod.guard, span=prod.span)
        loads.append(T.Scope(source_comment(prod), tuple(lower_copy(ctx, load)), prod.span, T.SharedAccess()))
        if stage is None:
            access = _writes(ctx, prod)
            code = lower_copy(ctx, tir.Copy(whole, prod.dst, guard=prod.guard, span=prod.span))
        else:
            reads, writes = shared_reads_writes(prod)
            access = T.SharedAccess(reads=shared_names(ctx, reads), stage_writes=shared_names(ctx, writes))
            ctx.state.stage_of[prod.dst.buffer] = stage
            code = lower_copy(ctx, tir.Copy(whole, prod.dst, guard=prod.guard, span=prod.span))
            del ctx.state.stage_of[prod.dst.buffer]
        stores.append(T.Scope(f"{source_comment(prod)} (registers -> LDS)", tuple(code), prod.span, access))
    guard = lt(iteration, count)
    return decls, [T.IfThen(guard, tuple(loads)), COMMIT], [T.IfThen(guard, tuple(stores))]


def _single_buffered(ctx: LowerContext, s: tir.For, lower_stmt: StmtLowering) -> list[T.Stmt]:
    """A register-staged loop whose tiles keep one buffer each (plan_pipeline: num_stages of them
    do not fit): while the consumers read iteration k's tiles, iteration k + 1's global loads go
    to registers; a second barrier lets every thread finish reading before the stores overwrite
    the tiles, and the next iteration's first barrier publishes them:

        tiles = the copies of iteration 0
        for (k = 0; k < n; ++k) {
          block barrier                                 // iteration k's tiles are in LDS
          if (k + 1 < n) A_next = A[.., (k + 1) * 32]   // global loads into registers
          consumers (read A_shared)
          block barrier                                 // every read of them is done
          if (k + 1 < n) A_shared = A_next              // LDS stores
        }
    """
    producers = plan_pipeline.producers(s)
    consumers = tuple(x for x in s.body if not (isinstance(x, tir.Copy) and x.pipeline == "producer"))
    start = simplify(value_of(ctx, s.start, None))
    count = simplify(value_of(ctx, tir.BinOp("-", s.stop, s.start, I32), None))
    out: list[T.Stmt] = [
        T.Comment(source_comment(s, words=6)),
        T.Comment(f"software pipeline, one buffer per tile ({s.num_stages} stages are over the LDS):"),
        T.Comment("the next iteration's copies wait in registers until this one's reads are done"),
    ]
    ctx.state.cvars[s.var] = start
    first = [T.Scope(source_comment(p), tuple(lower_copy(ctx, p)), p.span, _writes(ctx, p)) for p in producers]
    out.append(T.IfThen(lt(int_(0), count), tuple(first)))
    it = tir.Var(ctx.name(s.var) + "_iter" if const(start) != 0 else ctx.name(s.var), I32, "thread")
    ctx.state.nonneg.add(it.name)
    staging, loads, stores = _staged(ctx, s.var, producers, start, add(it, int_(1)), None, count)
    ctx.state.cvars[s.var] = simplify(add(start, it))
    out += staging
    body: list[T.Stmt] = [BLOCK, *(x for x in loads if x is not COMMIT)]  # no group: nothing waits
    for c in consumers:
        body += lower_stmt(ctx, c)
    body += [BLOCK, *stores]
    out.append(T.Loop(T.Sym(it.name, I32), int_(0), count, 1, False, tuple(body)))
    return out


def _writes(ctx: LowerContext, prod: tir.Copy) -> T.SharedAccess:
    reads, writes = shared_reads_writes(prod)
    return T.SharedAccess(reads=shared_names(ctx, reads), writes=shared_names(ctx, writes))


def _staging_buffer(ctx: LowerContext, prod: tir.Copy) -> tir.Buffer:
    """The register tile that stages `prod`'s next stage: its destination's shape, in the layout
    a copy of that tile takes (16-byte vectors along the last dimension)."""
    tile = prod.dst.buffer
    extents = tuple(e for e in prod.dst.extents if not (isinstance(e, tir.IntImm) and e.value == 1))
    reg = tir.Buffer(f"{tile.name}_next", extents, tile.dtype, "fragment", prod.span)
    shape = tuple(e.value for e in extents if isinstance(e, tir.IntImm))
    ctx.layouts.buffers[reg] = L.default(shape, ctx.kernel.threads, tile.dtype.bytes)
    return reg


def _issued_after(producer: tir.Copy, consumers: tuple[tir.Stmt, ...]) -> int | None:
    """The position of the consumer gemm whose `then_issue` names `producer`'s tile (None: the top
    of the iteration)."""
    tile = producer.dst.buffer
    return next((i for i, c in enumerate(consumers) if isinstance(c, tir.Gemm) and tile in c.then_issue), None)


def _spread(prefetch: list[T.Stmt], steps: int) -> list[list[T.Stmt]]:
    """The producers' copies (`produce`'s guarded block, then its commit) spread over the k steps of
    a main-loop iteration but its last, a share before each step's mma so that no step waits
    behind all of them, each share a commit group of its own. Any step may write the stage being
    refilled (it was last read before the previous iteration's barrier); keeping them before the
    last step's barrier gives every copy at least stages - 2 whole iterations to land."""
    guard, commit = prefetch
    assert isinstance(guard, T.IfThen)
    copies = guard.then
    spread = max(steps - 1, 1)
    parts: list[list[T.Stmt]] = []
    for step in range(steps):
        share = copies[step * len(copies) // spread : (step + 1) * len(copies) // spread] if step < spread else ()
        parts.append([T.IfThen(guard.cond, share), commit] if share else [])
    return parts
