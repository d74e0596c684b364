"""Plan software pipelines: which copies of a `Pipelined` loop run ahead.

In `for k in Pipelined(n, num_stages=s)` with s >= 2, every top-level copy
from global to shared memory is a *producer*: lowering issues it s - 1
iterations ahead as cp.async into one of s copies of its shared tile, and
the rest of the body (the consumers) reads the copy of iteration k.

    for k in Pipelined(n, num_stages=3):      A_shared: float16[128, 32]
        copy(A[.., k * 32], A_shared)    ->    A_shared: float16[3][128, 32], producer
        gemm(A_shared, B_shared, C)            consumer, reads stage k % 3

A copy is not a producer when its source indices use a value computed in
the loop body, or when anything else in the loop writes its tile.

A global -> shared copy that comes before a pipelined loop in the same block,
with nothing between them touching its tile and nothing in the loop writing
it, is issued as cp.async too (an *early* copy, e.g. the Q tile of flash
attention): the loop's first wait, which precedes any read, also retires it.

A GEMM main loop - 3 or more stages, a body of producers and one
tensor-core gemm of two tiles they fill (its instruction, chosen by
passes/select.py, loads fragments by ldmatrix), an even number of k steps -
also loads the gemm's fragments one k step ahead (lower/pipelined.py).

In any other pipelined loop with several gemms, a producer whose tile is
first read after a gemm is issued right after the last such gemm rather
than at the top of the iteration: flash attention's V copy goes out after
the Q K^T gemm, so the two tiles' loads do not compete at the iteration's
start, and V still has the softmax and the rest of the iteration to land
(each iteration still commits one group, so the wait counts do not change).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tilec import tir, tir_walk
from tilec.passes.select import gemm_depth
from tilec.sync import shared_reads_writes
from tilec.targets import Target, instruction_named


@dataclass
class PipelinePlan:
    stages: dict[tir.Buffer, int] = field(default_factory=dict)  # multi-buffered shared tiles
    producers: dict[int, tuple[int, ...]] = field(default_factory=dict)  # id(For) -> ids of its producer copies
    fragments_ahead: set[int] = field(default_factory=set)  # ids of main-loop gemms, fragments a k step ahead
    early: set[int] = field(default_factory=set)  # ids of copies issued before a loop whose first wait retires them
    issue_after: dict[int, int] = field(default_factory=dict)  # id(producer) -> id(gemm) it is issued after


def plan_pipeline(kernel: tir.Kernel, target: Target) -> PipelinePlan:
    """`target`: the records of the instructions the gemms carry (passes/select.py)."""
    plan = PipelinePlan()
    for loop in _loops(kernel.body):
        if loop.kind != "pipelined" or loop.num_stages < 2 or not _is_one(loop.step):
            continue
        producers = _producers(loop)
        if producers:
            plan.producers[id(loop)] = tuple(id(c) for c in producers)
            for c in producers:
                plan.stages[c.dst.buffer] = loop.num_stages
            gemm = main_loop_gemm(loop, target)
            if gemm is not None:
                plan.fragments_ahead.add(id(gemm))
            else:
                plan.issue_after.update(_issue_points(loop, producers))
    for block in _blocks(kernel.body):
        for i, loop in enumerate(block):
            if isinstance(loop, tir.For) and id(loop) in plan.producers:
                for copy in _early_copies(block[:i], loop):
                    plan.early.add(id(copy))
    return plan


def _blocks(stmts: tuple[tir.Stmt, ...]):
    """Every statement list of the kernel: the body, loop bodies, branches."""
    yield stmts
    for s in stmts:
        if isinstance(s, tir.For):
            yield from _blocks(s.body)
        elif isinstance(s, tir.If):
            yield from _blocks(s.then)
            yield from _blocks(s.orelse)


def _early_copies(before: tuple[tir.Stmt, ...], loop: tir.For) -> list[tir.Copy]:
    """The global -> shared copies of `before` that may run as cp.async until the first wait of `loop`."""
    out: list[tir.Copy] = []
    touched = {b for s in _all(loop.body) for b in _written(s)}
    # the loop's bounds and its copies' indices are evaluated before its first wait (the prologue)
    bound_loads = [ld for e in (loop.start, loop.stop) for ld in tir_walk.loads(e)]
    index_loads = [
        ld for s in _all(loop.body) if isinstance(s, tir.Copy) for r in (s.src, s.dst) for ld in _index_loads(r)
    ]
    touched |= {ld.buffer for ld in bound_loads + index_loads}
    for j in range(len(before) - 1, -1, -1):
        s = before[j]
        if isinstance(s, (tir.For, tir.If, tir.Parallel)):
            break  # keep it simple: only straight-line statements back to the loop
        if (
            isinstance(s, tir.Copy)
            and s.src.buffer.scope == "global"
            and s.dst.buffer.scope == "shared"
            and s.dst.buffer not in touched
        ):
            out.append(s)
        reads, writes = shared_reads_writes(s)
        touched |= reads | writes
    return out


def main_loop_gemm(loop: tir.For, target: Target) -> tir.Gemm | None:
    """The gemm of `loop` when it is a GEMM main loop (module docstring), or None: its
    instruction loads fragments from shared memory (ldmatrix), which can run a k step ahead.
    Layout inference asks too, to lay out the tiles of these copy-limited loops."""
    if loop.kind != "pipelined" or not _is_one(loop.step):
        return None
    producers = _producers(loop)
    ids = {id(c) for c in producers}
    rest = [s for s in loop.body if id(s) not in ids]
    if loop.num_stages < 3 or len(rest) != 1 or not isinstance(rest[0], tir.Gemm):
        return None
    g = rest[0]
    filled = {c.dst.buffer for c in producers}
    record = instruction_named(target, g.instruction)
    if record.load != "ldmatrix" or g.clear_accum or g.a.buffer not in filled or g.b.buffer not in filled:
        return None
    steps = gemm_depth(g) // record.shape[2]
    return g if steps % 2 == 0 else None  # the two register sets alternate within a tile


def _issue_points(loop: tir.For, producers: list[tir.Copy]) -> dict[int, int]:
    """id(producer) -> id(the last gemm of the body before the first statement reading its tile),
    for the producers that have one (the others are issued at the top of the iteration)."""
    ids = {id(c) for c in producers}
    out: dict[int, int] = {}
    for c in producers:
        last_gemm = None
        for s in loop.body:
            if id(s) in ids:
                continue
            if c.dst.buffer in shared_reads_writes(s)[0]:
                break
            if isinstance(s, tir.Gemm):
                last_gemm = s
        if last_gemm is not None:
            out[id(c)] = id(last_gemm)
    return out


def _is_one(e: tir.Expr) -> bool:
    return isinstance(e, tir.IntImm) and e.value == 1


def _loops(stmts: tuple[tir.Stmt, ...]):
    for s in stmts:
        if isinstance(s, tir.For):
            yield s
            yield from _loops(s.body)
        elif isinstance(s, tir.If):
            yield from _loops(s.then)
            yield from _loops(s.orelse)


def _producers(loop: tir.For) -> list[tir.Copy]:
    defined = {s.var for s in loop.body if isinstance(s, tir.Let)}
    candidates = [
        s
        for s in loop.body
        if isinstance(s, tir.Copy)
        and s.src.buffer.scope == "global"
        and s.dst.buffer.scope == "shared"
        and not (defined & _vars(s.src))
    ]
    writes: dict[tir.Buffer, int] = {}
    for s in _all(loop.body):
        for buf in _written(s):
            writes[buf] = writes.get(buf, 0) + 1
    return [
        c
        for c in candidates
        if writes.get(c.dst.buffer, 0) == 1 and not any(ld.buffer in writes for ld in _index_loads(c.src))
    ]


def _index_loads(region: tir.Region) -> list[tir.Load]:
    """The loads in a region's indices (a gather through a table): a copy whose table the loop
    writes cannot be issued iterations ahead."""
    return [ld for e in (*region.starts, *region.extents) for ld in tir_walk.loads(e)]


def _all(stmts: tuple[tir.Stmt, ...]):
    for s in stmts:
        yield s
        if isinstance(s, (tir.For, tir.Parallel)):
            yield from _all(s.body)
        elif isinstance(s, tir.If):
            yield from _all(s.then + s.orelse)


def _written(s: tir.Stmt) -> list[tir.Buffer]:
    match s:
        case tir.Copy(dst=dst) | tir.Fill(dst=dst) | tir.Reduce(dst=dst) | tir.CumSum(dst=dst):
            return [dst.buffer]
        case tir.Gemm(c=c):
            return [c.buffer]
        case tir.Store(buffer=b):
            return [b]
        case _:
            return []


def _vars(region: tir.Region) -> set[tir.Var]:
    return {v for e in (*region.starts, *region.extents) for v in tir_walk.variables(e)}
