"""Plan software pipelines: which copies of a `Pipelined` loop run ahead.

In `for k in Pipelined(n, num_stages=s)` with s >= 2, every top-level copy
from global to shared memory is a *producer*: lowering issues it s - 1
iterations ahead as an asynchronous copy into one of s copies of its shared tile, and
the rest of the body (the consumers) reads the copy of iteration k.

    for k in Pipelined(n, num_stages=3):      A_shared: float16[128, 32]
        copy(A[.., k * 32], A_shared)    ->    A_shared: float16[3][128, 32], producer
        gemm(A_shared, B_shared, C)            consumer, reads stage k % 3

A name the body binds before a copy (`page = block_table[b, k]`) is written
into the copy's indices when the copy can evaluate it for a later iteration
itself: it uses the loop variable, names bound outside the loop and tables
the loop does not write (`_indices_through_lets`). A copy is not a producer
when its source indices use any other value computed in the loop body or read
a buffer the body writes, when anything else in the loop writes its tile, or
when it is not at the top level of the body; `refusals` says which copies and
why (-Wlost-pipeline and explain print it).

Copies that open an `if` of the body (no else) whose condition the copies can
evaluate for a later iteration, as they do their indices, and whose tiles only
that `if` reads, are taken out in front of it, guarded (`_guards_hoisted`;
tir.Copy.guard): they run ahead like any producer, issued for iteration k + s
only where the condition holds for k + s (block-sparse GEMM). An iteration
whose condition fails has a stage nobody fills and nobody reads. Where such a
loop runs by warp roles (its body then the one `if` of its copies and gemm:
`ring_guard`), an iteration whose condition fails takes no stage of the ring at
all, on the producer's side as on the consumers'.

    for k in Pipelined(n, num_stages=2):      copy(A[.., k * 32], A_shared) when M[bx, k], producer
        if M[bx, k]:                     ->    if M[bx, k]:
            copy(A[.., k * 32], A_shared)           gemm(A_shared, B_shared, C)
            gemm(A_shared, B_shared, C)

A global -> shared copy that comes before a pipelined loop in the same block,
with nothing between them touching its tile and nothing in the loop writing
it, is issued asynchronously too (an *early* copy, e.g. the Q tile of flash
attention): the loop's first wait, which precedes any read, also retires it.

A GEMM main loop - 3 or more stages, a body of producers and one
tensor-core gemm of two tiles they fill (its instruction, chosen by
passes/select.py, loads fragments as matrices), an even number of k steps -
also loads the gemm's fragments one k step ahead (lower/pipelined.py).

In any other pipelined loop with several gemms, a producer whose tile is
first read after a gemm is issued right after the last such gemm rather
than at the top of the iteration: flash attention's V copy goes out after
the Q K^T gemm, so the two tiles' loads do not compete at the iteration's
start, and V still has the softmax and the rest of the iteration to land
(each iteration still commits one group, so the wait counts do not change).
On wgmma the gemm is left running while they are issued; its wait follows them.

A loop of producers and one gemm on an asynchronous warp-group instruction
(sm_90a's main loop where warp roles do not apply, and the fallback kernel
without bulk copies of one where they do) issues all its copies after the
gemm, into the stage read one iteration earlier:
their issue, element by element where rows are not 16-byte aligned, overlaps
the gemm's products instead of preceding them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace

from tilec import layout as L
from tilec import schedules, tir, tir_walk
from tilec.diagnostics import error
from tilec.layout_algebra import widest_swizzle
from tilec.passes.select import gemm_depth
from tilec.shared_plan import declared_bytes
from tilec.simplify import const, substitute
from tilec.sync import shared_reads_writes
from tilec.targets import Target, instruction_named


def plan_pipeline(
    kernel: tir.Kernel,
    target: Target,
    rows: Callable[[tir.Buffer], int] | None = None,
    fragments: Mapping[tir.Buffer, L.Fragment] | None = None,
) -> tir.Kernel:
    """`kernel` with the plan on its nodes: each producer and early copy's `pipeline`, each
    multi-buffered tile's `Alloc.stages`, a main-loop gemm's `fragments_ahead`, and the producers
    a gemm is followed by (`then_issue`). `target`: the records of the gemms' instructions;
    `fragments`: the fragments' layouts (infer_layouts), which say how an epilogue stages (ring_depth)."""
    kernel = tir_walk.map_kernel(kernel, _guards_hoisted)  # copies that open an `if` run ahead under it
    kernel = tir_walk.map_kernel(kernel, _indices_through_lets)
    multi = _stages_asked(kernel)  # every pipelined loop's tiles at their num_stages
    producer_ids: set[int] = set()  # ids, like the others below, of statements of `kernel`
    pipelined: set[int] = set()  # loops with producers
    ahead: set[int] = set()
    issue: dict[int, tuple[tir.Buffer, ...]] = {}  # gemm -> the tiles of the producers issued after it
    stages: dict[tir.Buffer, int] = {}
    specialized: set[int] = set()  # loops run by warp roles
    rings: dict[int, int] = {}  # of those, the ones whose ring is deeper than num_stages (ring_depth)
    pairs: set[int] = set()  # of those, the ones whose blocks run in clusters of two (cluster_pairs)
    single_ids: set[int] = set()  # register-staged loops whose tiles keep one buffer
    planned: dict[int, tir.Schedule] = {}  # loops with order=/stage=, the plan on their schedules
    for loop in tir_walk.stmts(kernel.body):
        if _ring_without_stages(kernel, loop, target):  # num_stages < 2, yet warp roles (ring_stages)
            assert isinstance(loop, tir.For)
            found = _producers(loop)
            pipelined.add(id(loop))
            specialized.add(id(loop))
            producer_ids |= {id(c) for c in found}
            _deepen(stages, found, ring_stages(loop))
            continue
        if not isinstance(loop, tir.For) or loop.kind != "pipelined" or loop.num_stages < 2 or not _is_one(loop.step):
            continue
        found = _producers(loop)
        if loop.schedule is not None:
            planned[id(loop)] = _scheduled(loop, found, target)
            if planned[id(loop)].honoured:  # lowered by its schedule (lower/scheduled.py)
                found = schedules.running_ahead(loop, found)
                if found and _warp_specialized(kernel, loop, found, target):
                    planned[id(loop)] = replace(planned[id(loop)], not_warp_roles=True)
                if found:
                    pipelined.add(id(loop))
                    producer_ids |= {id(c) for c in found}
                    _deepen(stages, found, loop.num_stages)
                continue
        if found:
            pipelined.add(id(loop))
            producer_ids |= {id(c) for c in found}
            single = _single_buffered(kernel, multi, target, rows)
            _deepen(stages, found, 1 if single else loop.num_stages)
            gemm = main_loop_gemm(loop, target)
            if single:
                single_ids.add(id(loop))
            elif _warp_specialized(kernel, loop, found, target):
                specialized.add(id(loop))
                if (depth := ring_depth(kernel, loop, found, target, fragments or {})) > loop.num_stages:
                    rings[id(loop)] = depth
                    _deepen(stages, found, depth)
                if cluster_pairs(kernel, loop, found, target):
                    pairs.add(id(loop))
            elif gemm is not None:
                ahead.add(id(gemm))
            elif (g := _async_main_loop_gemm(loop, found, target)) is not None:
                issue[id(g)] = tuple(c.dst.buffer for c in found)
            else:
                for c, g in _issue_points(loop, found):
                    issue[id(g)] = (*issue.get(id(g), ()), c.dst.buffer)
    # a loop of manual schedule (order=/stage=) may issue two neighbours apart: none chained there
    scheduled = {
        id(x) for loop in tir_walk.stmts(kernel.body) if isinstance(loop, tir.For) and loop.schedule for x in loop.body
    }
    chained = {
        id(block[i])
        for block in tir_walk.blocks(kernel.body)
        for i in range(len(block) - 1)
        if not {id(block[i]), id(block[i + 1])} & (ahead | issue.keys() | scheduled)
        and _accumulates_next(block[i], block[i + 1], target)
    }
    early = {
        id(copy)
        for block in tir_walk.blocks(kernel.body)
        for i, loop in enumerate(block)
        if isinstance(loop, tir.For) and id(loop) in pipelined and id(loop) not in single_ids | specialized
        # (a single-buffered loop has no wait to retire one, nor have the consumers of warp roles)
        for copy in _early_copies(block[:i], loop)
    }

    def decided(s: tir.Stmt) -> tir.Stmt:
        match s:
            case tir.Copy() if id(s) in producer_ids:
                return replace(s, pipeline="producer")
            case tir.Copy() if id(s) in early:
                return replace(s, pipeline="early")
            case tir.Alloc() if s.buffer in stages:
                return replace(s, stages=stages[s.buffer])
            case tir.For() if id(s) in specialized or id(s) in single_ids or id(s) in planned:
                sched = planned.get(id(s), s.schedule)
                return replace(
                    s,
                    warp_specialized=id(s) in specialized,
                    single_buffered=id(s) in single_ids,
                    schedule=sched,
                    ring=rings.get(id(s), 0),
                    cluster=2 if id(s) in pairs else 0,
                )
            case tir.Gemm() if id(s) in ahead or id(s) in issue or id(s) in chained:
                return replace(
                    s,
                    fragments_ahead=id(s) in ahead,
                    then_issue=issue.get(id(s), ()),
                    then_accumulates=id(s) in chained,
                )
        return s

    return tir_walk.map_kernel(kernel, decided)


def _deepen(stages: dict[tir.Buffer, int], copies: list[tir.Copy], n: int) -> None:
    """Gives the tiles `copies` fill at least `n` stages: a tile that pipelines of different
    depths fill keeps the most, each loop using the first of them (the last loop's count alone
    left an earlier, deeper loop writing past the tile's stages)."""
    for c in copies:
        stages[c.dst.buffer] = max(stages.get(c.dst.buffer, 0), n)


def _accumulates_next(a: tir.Stmt, b: tir.Stmt, target: Target) -> bool:
    """Whether gemm `a` need not finish before gemm `b`, the next statement: both on wgmma, `b`
    adding into the same accumulator region, on operands `a` does not write, A from shared memory
    or registers as they are (not staged). The tensor cores run one warp group's products in
    order, so `b`'s wait covers both (MLA decode: Q K^T, then the rotary part into the same scores)."""
    if not isinstance(a, tir.Gemm) or not isinstance(b, tir.Gemm) or b.clear_accum or a.c != b.c:
        return False
    if any(instruction_named(target, g.instruction).group != "warp_group" for g in (a, b)):
        return False
    if a.c.buffer in (b.a.buffer, b.b.buffer):
        return False
    return b.a.buffer.scope == "shared" or b.a_from_registers


def _scheduled(loop: tir.For, found: list[tir.Copy], target: Target) -> tir.Schedule:
    """The plan for a loop's manual schedule (schedules.plan), after checking that each copy of
    stage -1 is one the plan runs ahead. A target that stages copies through registers runs the
    loop as the inferred pipeline (the schedule is checked all the same)."""
    sched = loop.schedule
    assert sched is not None
    ids = {id(c) for c in schedules.running_ahead(loop, found)}
    for u, st in enumerate(sched.stage):
        c = loop.body[sched.units[u][0]]
        if st == -1 and id(c) not in ids:
            assert isinstance(c, tir.Copy)
            why = _refusal(loop, c)
            reason = why.reason if why is not None else "it is not a copy the pipeline can run ahead"
            raise error(
                c.span,
                f"stage -1 leaves this copy to the compiler, but it cannot run ahead: {reason}",
                hint=why.hint if why is not None else "give it a stage of 0 or more, and an order",
            )
    planned = schedules.plan(loop, found, honoured=not target.register_staged)
    if planned.honoured:
        schedules.check_lets(loop, planned, ids)
    return planned


def manual(loop: tir.For, target: Target) -> bool:
    """Whether `loop` is lowered by its manual schedule rather than as the inferred pipeline."""
    if loop.schedule is None or target.register_staged:
        return False
    return not schedules.as_inferred(loop, _producers(loop))


def _stages_asked(kernel: tir.Kernel) -> dict[tir.Buffer, int]:
    """The copies each shared tile of a pipelined loop's producers would get: its loop's num_stages."""
    out: dict[tir.Buffer, int] = {}
    for loop in tir_walk.stmts(kernel.body):
        if isinstance(loop, tir.For) and loop.kind == "pipelined" and loop.num_stages >= 2 and _is_one(loop.step):
            for c in _producers(loop):
                out[c.dst.buffer] = max(out.get(c.dst.buffer, 1), loop.num_stages)
    return out


def _single_buffered(
    kernel: tir.Kernel, stages: dict[tir.Buffer, int], target: Target, rows: Callable[[tir.Buffer], int] | None
) -> bool:
    """Whether a loop's tiles keep one buffer each (tir.For.single_buffered): on a target that
    stages copies through registers, where the kernel's shared tiles, each pipelined loop's at its
    num_stages copies, come to more than the target's shared memory (rows padded as `rows` gives a
    tile's row length, where the layouts are known; as declared otherwise). The next iteration's
    tiles then wait in registers until this iteration's reads are done."""
    if not (target.register_staged and target.single_buffer):
        return False
    allocs = [s.buffer for s in tir_walk.stmts(kernel.body) if isinstance(s, tir.Alloc) and s.buffer.scope == "shared"]

    def nbytes(b: tir.Buffer) -> int:
        shape = b.const_shape
        row = rows(b) if rows is not None else shape[-1]
        return declared_bytes(b) // shape[-1] * row

    return sum(nbytes(b) * stages.get(b, 1) for b in allocs) > target.smem_limit


def ring_stages(loop: tir.For) -> int:
    """The stages of a warp-role loop's ring: its num_stages, and 2 for a loop asked for fewer
    (`_ring_without_stages`), or the deeper ring the plan gave it (`ring_depth`)."""
    return loop.ring or max(loop.num_stages, 2)


# The deepest ring `ring_depth` gives a GEMM main loop. Measured on an H100 (hand-edited builds of
# examples/gemm.tile, 128x256x64 tiles, interleaved in 40 rounds with cuBLAS and TileLang,
# bench/results/ab-2026-12-07-s11b-h100-gemm-interleaved.txt): 4 stages with the epilogue stored
# a column block at a time (sm90.bulk_store) ran at 1.028x / 1.005x cuBLAS's speed at 8192^3 /
# 4096^3, the 3 stages of num_stages=3 with the whole tile staged at 0.993x / 0.964x.
RING_STAGES = 4
# Shared memory a ring leaves to the rest of the block besides the kernel's other tiles: its
# barriers and their alignment.
RING_RESERVE = 2048


def ring_depth(
    kernel: tir.Kernel,
    loop: tir.For,
    found: list[tir.Copy],
    target: Target,
    fragments: Mapping[tir.Buffer, L.Fragment],
) -> int:
    """The stages of the ring of warp-role GEMM main loop `loop` (its producers `found`): its
    num_stages, deepened up to RING_STAGES where shared memory leaves room beside the kernel's
    other tiles and the epilogue's staging (`_epilogue_bytes`). With warp roles, num_stages sets
    how far ahead the copies run, not the code's shape: a deeper ring lets the producer's bulk
    copies run further ahead of the tensor cores at no cost in registers. Only a block whose
    tiles as asked take more than half the multiprocessor's shared memory is deepened (one that
    may fit twice keeps its second block: lower/kernel.blocks_per_multiprocessor), and not a ring
    of several products or one under a condition."""
    tiles = {c.dst.buffer for c in found}
    body = _consumer_part(loop, found)
    if loop.num_stages >= RING_STAGES or body is None or not _one_gemm_first(body, tiles):
        return loop.num_stages
    if any(c.guard is not None for c in found):  # a guarded ring (ring_guard): as asked
        return loop.num_stages
    allocs = [s.buffer for s in tir_walk.stmts(kernel.body) if isinstance(s, tir.Alloc) and s.buffer.scope == "shared"]
    other_tiles = sum(declared_bytes(b) for b in allocs if b not in tiles)
    stage = sum(declared_bytes(b) for b in tiles)
    if other_tiles + stage * loop.num_stages <= target.smem_limit // 2:  # may fit twice: as asked
        return loop.num_stages
    others = other_tiles + _epilogue_bytes(kernel, fragments) + RING_RESERVE
    depth = loop.num_stages
    while depth < RING_STAGES and others + stage * (depth + 1) <= target.smem_limit:
        depth += 1
    return depth


# Clusters of two blocks for a GEMM main loop by warp roles (`cluster_pairs`): the pair's blocks
# take vertically neighbouring tiles, so they read the same tiles of B; each loads half of those
# boxes and the copy engine writes them into both blocks' shared memory (TMA multicast), a third
# less traffic from L2 for a 128x256x64 tile (16 KB of A and 16 of B per block and step, not 16 + 32).
# Off until it has run on a GPU: built and tested on the CPU only (the twelfth session got no
# device machine; tests/test_clusters.py turns it on). To decide it: set True, prebuild, and run
# bench/clusters_check.sh (GPU checks, sanitizers, A/B against the build without, GEMM table).
CLUSTER_PAIRS = False


def cluster_pairs(kernel: tir.Kernel, loop: tir.For, found: list[tir.Copy], target: Target) -> bool:
    """Whether the blocks of warp-role GEMM loop `loop` (its producers `found`) run in clusters of
    two along the grid's y (tir.For.cluster): the loop at the top of a persistent kernel with a
    2-D grid, in the GEMM form and unguarded, its trip count independent of y; some producers
    (`pair_shared`) read tiles that do not depend on y, each of a 2-D tensor and loadable in two
    halves (`pair_split`: each block of the pair loads one for both); nothing before the loop
    touches global memory. The pair's second block
    may get a tile row past the grid's last (an odd number of rows): its loads then read zeros
    and its epilogue is skipped (lower/kernel.py), so every statement after the loop is safe."""
    if not CLUSTER_PAIRS or not target.clusters or len(kernel.block_vars) != 2:
        return False
    if not any(s is loop for s in kernel.body) or any(c.guard is not None for c in found):
        return False
    body = _consumer_part(loop, found)
    if body is None or not _one_gemm_first(body, {c.dst.buffer for c in found}):
        return False
    y = kernel.block_vars[1]
    if y in tir_walk.variables(loop.start) | tir_walk.variables(loop.stop):
        return False
    shared = pair_shared(kernel, found)
    if not shared or any(box_row_dim(c) != 0 or not pair_split(c) for c in shared):
        return False
    before = kernel.body[: next(i for i, s in enumerate(kernel.body) if s is loop)]
    if any(b.scope == "global" for s in before for b in tir_walk.buffers(s)):
        return False
    # (an assert or print reading y, before the loop or in it, would run for the row past the grid)
    return not any(_reads(s, y) for s in [*before, *body[1:]])


def _reads(s: tir.Stmt, var: tir.Var) -> bool:
    """Whether any expression of `s` reads `var`."""
    return any(var in tir_walk.variables(e) for x in tir_walk.stmts((s,)) for e in tir_walk.stmt_exprs(x))


def pair_shared(kernel: tir.Kernel, found: list[tir.Copy]) -> list[tir.Copy]:
    """The producers of a loop whose tile's corner does not read the grid's y: the tiles a cluster
    of two blocks along y loads once for both (cluster_pairs)."""
    y = kernel.block_vars[1]
    return [c for c in found if not any(y in tir_walk.variables(e) for e in c.src.starts)]


def pair_split(c: tir.Copy) -> bool:
    """Whether the two blocks of a cluster can each load half of a shared producer's tile: every
    other box of an even number of them, or half the rows of one (a multiple of the swizzle's
    8-row atom each, so that each half starts where the swizzle pattern does)."""
    boxes = _boxes(c)
    return (boxes > 0 and boxes % 2 == 0) or (boxes == 1 and c.dst.buffer.const_shape[0] % 16 == 0)


def _boxes(c: tir.Copy) -> int:
    """The TMA boxes of a producer's tile: one per swizzle-wide column block (0: no swizzle fits)."""
    row_bytes = c.dst.buffer.const_shape[1] * c.dst.buffer.dtype.bytes
    sw = widest_swizzle(row_bytes)
    return row_bytes // sw if sw is not None else 0


def _epilogue_bytes(kernel: tir.Kernel, fragments: Mapping[tir.Buffer, L.Fragment]) -> int:
    """The staging the kernel's stores of whole fragments to 2-D tiles take in shared memory
    (sm90.bulk_store), as layout.staged_columns decides it: two column blocks of the swizzle a row,
    or the whole tile (also where the fragment's layout is not known). The largest such store."""
    most = 0
    for s in kernel.body:
        if isinstance(s, tir.Copy) and s.src.buffer.scope == "fragment" and s.dst.buffer.scope == "global":
            shape = s.src.buffer.const_shape
            elem = s.dst.buffer.dtype.bytes
            if len(shape) != 2:
                continue
            frag = fragments.get(s.src.buffer)
            columns = L.staged_columns(frag, elem)[0] if frag is not None else shape[1]
            most = max(most, shape[0] * columns * elem)
    return most


def _ring_without_stages(kernel: tir.Kernel, loop: tir.Stmt, target: Target) -> bool:
    """A `Pipelined(..., num_stages=0 or 1)` GEMM main loop that warp roles can run, on a target
    with bulk copies, with room in shared memory for a second copy of its tiles: it runs by warp
    roles on a ring of 2 stages. num_stages < 2 asks that the loop's iterations not overlap, and
    the consumers' loop is kept as written; the producer warp group's bulk copies, which the
    consumers' threads never run, fill the other stage while they compute (TileLang's examples
    write num_stages=0 for split-K and still get their warp-specialized copies on Hopper)."""
    if not isinstance(loop, tir.For) or loop.kind != "pipelined" or loop.num_stages >= 2 or not _is_one(loop.step):
        return False
    if not target.bulk_copies or loop.schedule is not None:
        return False
    found = _producers(loop)
    if not found or not _warp_specialized(kernel, loop, found, target):
        return False
    tiles = {c.dst.buffer for c in found}
    allocs = [s.buffer for s in tir_walk.stmts(kernel.body) if isinstance(s, tir.Alloc) and s.buffer.scope == "shared"]
    nbytes = sum(declared_bytes(b) * (ring_stages(loop) if b in tiles else 1) for b in allocs)
    return nbytes <= target.smem_limit // 2  # the epilogue's staging tile and barriers fit beside them


def _warp_specialized(kernel: tir.Kernel, loop: tir.For, found: list[tir.Copy], target: Target) -> bool:
    """Whether `loop` runs by warp roles (tir.For.warp_specialized): on a target with bulk copies,
    a loop at the top of the kernel or inside serial loops and ifs there that its producer can
    replay (`skeleton`: the roles split the whole body), its only pipelined one,
    whose body is its producers and one gemm on a warp-group instruction reading two of their
    tiles, after which only register work may follow (`register_only`: TileLang's fp8 2xAcc
    example folds its accumulator into a second one every few steps), each producer a whole 2-D
    tile of a 2-D tensor of the tile's type (or of a 3-D one, one
    index deep in its first dimension: a batch) whose last stride is 1 (row-major, or declared with
    strides ending in a literal 1: its tensor map takes the other strides as pitches), no tile
    read or written outside the loop, no pad but zero (a TMA box's corner may lie outside the
    tensor on any side, negative ones included; the hardware reads those elements as zero).
    The body may also be one `if` of those copies and that gemm (`_consumer_part`: a block-sparse
    GEMM's mask), whose condition reads only tensors the kernel never writes (`_read_only`) and
    names the producer knows: only the iterations where it holds take a stage (`ring_guard`)."""
    levels = skeleton(kernel, loop) if target.bulk_copies else None
    if levels is None:
        return False
    loops = [s for s in tir_walk.stmts(kernel.body) if isinstance(s, tir.For) and s.kind == "pipelined"]
    rest = _consumer_part(loop, found)
    tiles = {c.dst.buffer for c in found}
    guard = found[0].guard
    if len(loops) != 1 or rest is None or not _consumer_form(rest, tiles, target, guard is not None):
        return False
    if guard is not None and not _read_only(kernel, guard):
        return False
    for c in found:
        src, dst = c.src.buffer, c.dst.buffer
        if src.dtype != dst.dtype or len(dst.shape) != 2 or box_row_dim(c) is None:
            return False
        if not tir.unit_innermost(src):  # a tensor map's innermost stride is 1
            return False
        if c.pad is not None and not (isinstance(c.pad, (tir.IntImm, tir.FloatImm)) and c.pad.value == 0):
            return False
        if dst.const_shape[0] > 256:
            return False
    # the producer runs apart from the body: its bounds and tile corners may use only the block's
    # indices, the tensors' dimensions, scalars, the loop's own variable and what it replays
    known = {*kernel.block_vars, *kernel.dims, *kernel.scalars, loop.var, *skeleton_vars(levels)}
    used = [loop.start, loop.stop, *(e for c in found for e in c.src.starts), *([guard] if guard is not None else [])]
    if any(v not in known for e in used for v in tir_walk.variables(e)):
        return False
    inside = [*(lv.holder for lv in levels), *tir_walk.stmts(loop.body)]  # (the holders hold the loop)
    outside = [s for s in tir_walk.stmts(kernel.body) if not any(s is t for t in inside)]
    return not any(b in tiles for s in outside for b in set().union(*shared_reads_writes(s)))


def _consumer_part(loop: tir.For, found: list[tir.Copy]) -> list[tir.Stmt] | None:
    """`loop`'s body less its producers `found`, as the consumers of warp roles run it: as it is
    when no producer is guarded; when all are, by one condition (the copies of an `if`,
    `_guards_hoisted`), the body of that `if`, which must then be all that is left (the
    block-sparse GEMM's `if BlockMask[by, bx, k]: gemm(...)`): the producer and the consumers
    each test it, and only the iterations where it holds take a stage of the ring. None for
    any other body (producers guarded differently or not all, statements beside the `if`)."""
    rest = [s for s in loop.body if not any(s is c for c in found)]
    guards = [c.guard for c in found]
    if all(g is None for g in guards):
        return rest
    match rest:
        case [tir.If(cond, then, ())] if all(g == cond for g in guards):
            return list(then)
    return None


def _consumer_form(rest: list[tir.Stmt], tiles: set[tir.Buffer], target: Target, guarded: bool) -> bool:
    """Whether the consumers of warp roles can run `rest` (`_consumer_part`): the GEMM form, or
    the products form unless guarded (barrier placement finds no one code for the consumers'
    iterations when their products' barriers sit under the guard: flash attention under a mask
    keeps the software pipeline of other targets)."""
    return gemm_form(rest, tiles, target) or (not guarded and _products_form(rest, tiles, target))


def _read_only(kernel: tir.Kernel, guard: tir.Expr) -> bool:
    """Whether `guard` reads only global tensors the kernel never writes (a block-sparse mask): the
    producer thread and the consumers evaluate it at different times and must agree on it, or
    the ring's two sides would count different iterations."""
    tensors = {ld.buffer.view_of or ld.buffer for ld in tir_walk.loads(guard)}
    if any(t.scope != "global" for t in tensors):
        return False
    written = {b.view_of or b for s in tir_walk.stmts(kernel.body) for b in tir_walk.written(s)}
    return not tensors & written


def ring_guard(loop: tir.For) -> tir.If | None:
    """The `if` of a warp-role loop whose copies are its producers (`_consumer_part`): only the
    iterations where its condition holds take a stage of the ring; None when every iteration does."""
    found = producers(loop)
    if not found or found[0].guard is None:
        return None
    (branch,) = [s for s in loop.body if not any(s is c for c in found)]
    assert isinstance(branch, tir.If), "plan_pipeline gives warp roles a guarded loop only as one `if`"
    return branch


def consumer_body(loop: tir.For) -> list[tir.Stmt]:
    """A warp-role loop's body as its consumers run it in an iteration that takes a stage: less
    its producers, and inside the `if` of `ring_guard` when there is one."""
    body = _consumer_part(loop, producers(loop))
    assert body is not None, "plan_pipeline gives warp roles only a body of this form"
    return body


def box_row_dim(c: tir.Copy) -> int | None:
    """The dimension of `c`'s tensor that its tile's rows run along, when a tensor map of at most
    3 dimensions can serve the copy, else None. The tile spans that dimension and the last one, one
    index deep in every other. A row-major tensor's dimensions before the rows fold into a batch
    (K[b, h, rows, :] of a (B, H, S, D) tensor: B * H matrices of S x D) and those between the rows
    and the last fold into the columns (K[b, rows, h, :] of a (B, S, H, D) tensor: B matrices of
    S x H * D) when the tile spans the whole last dimension, so that its box never reaches the next
    index's columns; a tensor with strides keeps at most 3 dimensions, a batch one deep in the first."""
    src, dst = c.src.buffer, c.dst.buffer
    extents = [const(e) for e in c.src.extents]
    if len(dst.shape) != 2 or len(src.shape) < 2 or None in extents or extents[-1] != dst.const_shape[1]:
        return None
    rows = [d for d, e in enumerate(extents[:-1]) if e != 1] or [len(extents) - 2]
    r = rows[-1]
    if len(rows) > 1 or extents[r] != dst.const_shape[0]:
        return None
    if src.strides is not None:
        return r if r == len(src.shape) - 2 and len(src.shape) in (2, 3) else None
    if r < len(src.shape) - 2:  # columns folded with the dimensions before them: the whole last one
        whole = const(c.src.starts[-1]) == 0 and const(src.shape[-1]) == extents[-1]
        return r if whole else None
    return r


def gemm_form(rest: list[tir.Stmt], tiles: set[tir.Buffer], target: Target) -> bool:
    """A GEMM main loop's body less its producers: one gemm on a warp-group instruction reading
    both ring tiles, then only register work (`register_only`)."""
    g = rest[0] if _one_gemm_first(rest, tiles) else None
    return isinstance(g, tir.Gemm) and instruction_named(target, g.instruction).group == "warp_group"


def _one_gemm_first(rest: list[tir.Stmt], tiles: set[tir.Buffer]) -> bool:
    g = rest[0] if rest else None
    if not isinstance(g, tir.Gemm) or {g.a.buffer, g.b.buffer} != tiles:
        return False
    return all(register_only(x) for x in rest[1:])


def _consumer_work(s: tir.Stmt, tiles: set[tir.Buffer]) -> bool:
    """Work of a products-form loop between its gemms: in registers, or on shared tiles other than
    the ring's (MLA's scores written to a tile for the next product; barriers among the consumers
    order those), never global memory, a gemm, a barrier or a loop of its own."""
    return _plain(s) and all(b.scope != "global" and b not in tiles for b in tir_walk.buffers(s))


def runs_products(loop: tir.For) -> bool:
    """Whether a warp-role loop has the products form (`_products_form`), not the GEMM form."""
    return not _one_gemm_first(consumer_body(loop), {c.dst.buffer for c in producers(loop)})


def _products_form(rest: list[tir.Stmt], tiles: set[tir.Buffer], target: Target) -> bool:
    """A loop of several products and work between them (flash attention: S = Q K^T, the softmax
    in registers, O += P V; MLA decode writes P to a shared tile), less its producers: gemms on a
    warp-group instruction, every ring tile read by one of them and by nothing else, and otherwise
    `_consumer_work`; each gemm finishes before the next statement."""
    gemms = [x for x in rest if isinstance(x, tir.Gemm)]
    if not gemms or not all(isinstance(x, tir.Gemm) or _consumer_work(x, tiles) for x in rest):
        return False
    if any(instruction_named(target, g.instruction).group != "warp_group" for g in gemms):
        return False
    read = {r.buffer for g in gemms for r in (g.a, g.b) if r.buffer.scope == "shared"}
    return tiles <= read


@dataclass(frozen=True, slots=True)
class Overlap:
    """A products-form warp-role loop whose two products overlap across iterations (`overlap`):
    the consumers issue iteration k's first product (S = Q K^T), then iteration k - 1's second
    (O += P V), and run iteration k's `early` work (the softmax) while the latter runs; `late`
    work (O's rescale, P's conversion) waits for it. `head` runs before the first product."""

    head: tuple[tir.Stmt, ...]
    first: tir.Gemm
    early: tuple[tir.Stmt, ...]
    late: tuple[tir.Stmt, ...]
    second: tir.Gemm

    def tiles(self, loop: tir.For) -> tuple[list[tir.Copy], list[tir.Copy]]:
        """`loop`'s producers split by the product reading their tile: the first's, the second's."""
        found = producers(loop)
        second = {self.second.a.buffer, self.second.b.buffer}
        return [c for c in found if c.dst.buffer not in second], [c for c in found if c.dst.buffer in second]


def overlap(loop: tir.For) -> Overlap | None:
    """How a products-form warp-role loop (`runs_products`) overlaps its two products across
    iterations (FlashAttention-3's intra-warp-group overlap), or None. The body, less its
    producers: `head`, a first gemm, work, and a second gemm last, on A from registers (P, in
    the first's accumulator layout) into an accumulator it does not clear (O); each ring tile
    read by one of the two. The work splits into `early`, which touches neither the second's
    accumulator nor its A (the softmax), and `late`, which does (O's rescale, P's conversion):
    the early work runs while iteration k - 1's second product is in flight, so it must not
    depend on late work before it, nor late work on early work after it. The head touches
    neither either. Not for a guarded ring."""
    if ring_guard(loop) is not None:
        return None
    body = consumer_body(loop)
    at = [i for i, x in enumerate(body) if isinstance(x, tir.Gemm)]
    if len(at) != 2 or at[1] != len(body) - 1:
        return None
    first, second = body[at[0]], body[-1]
    assert isinstance(first, tir.Gemm) and isinstance(second, tir.Gemm)
    if not second.a_from_registers or second.clear_accum:
        return None
    tiles = {c.dst.buffer for c in producers(loop)}
    reads = ({first.a.buffer, first.b.buffer} & tiles, {second.a.buffer, second.b.buffer} & tiles)
    if not all(reads) or reads[0] & reads[1]:
        return None
    held = {second.c.buffer, second.a.buffer}
    head = body[: at[0]]
    if first.c.buffer in held or any(held & tir_walk.buffers(x) for x in head):
        return None
    early: list[tir.Stmt] = []
    late: list[tir.Stmt] = []
    for x in body[at[0] + 1 : -1]:
        if held & tir_walk.buffers(x):
            late.append(x)
        elif any(_dependent(x, y) for y in late):
            return None
        else:
            early.append(x)
    return Overlap(tuple(head), first, tuple(early), tuple(late), second)


def _dependent(a: tir.Stmt, b: tir.Stmt) -> bool:
    """Whether swapping `a` and `b` could change what either computes: one writes a buffer the
    other touches, or binds a name the other reads."""
    return _writes_into(a, b) or _writes_into(b, a)


def _writes_into(a: tir.Stmt, b: tir.Stmt) -> bool:
    """Whether `a` writes a buffer `b` touches or binds a name `b` reads."""
    inside_a, inside_b = list(tir_walk.stmts((a,))), list(tir_walk.stmts((b,)))
    if {w for x in inside_a for w in tir_walk.written(x)} & tir_walk.buffers(b):
        return True
    bound = {x.var for x in inside_a if isinstance(x, tir.Let)}
    return any(bound & tir_walk.variables(e) for x in inside_b for e in tir_walk.stmt_exprs(x))


@dataclass(frozen=True, slots=True)
class Level:
    """One step of the way from the kernel body down to a warp-role loop (`skeleton`): the lets
    of that statement list, before `holder`, that the producer can compute itself, and `holder`,
    the serial loop or `if` the way goes through (its else branch when `orelse`), or the loop."""

    lets: tuple[tir.Let, ...]
    holder: tir.Stmt
    orelse: bool = False


def skeleton(kernel: tir.Kernel, loop: tir.For) -> list[Level] | None:
    """The control around `loop` that its producer replays, outermost first, the loop's own level
    last (one level: the loop is at the top of the kernel); None when anything but serial loops
    and ifs holds it, or one of them has a bound or condition the producer cannot compute
    (`_computable`), or a loop of them may `break`. The producer declares the lets it reads:
    TileLang's persistent GEMM binds a tile's indices from its wave loop's variable
    (`tile_id = sm_num * w + block_id`) and tests them (`if bx * block_M < M ...`)."""
    path = _path(kernel.body, loop)
    if path is None:
        return None
    known = {*kernel.block_vars, *kernel.dims, *kernel.scalars}
    levels: list[Level] = []
    for body, i, orelse in path:
        lets: list[tir.Let] = []
        for s in body[:i]:
            if isinstance(s, tir.Let) and _computable(s.value, known):
                lets.append(s)
                known.add(s.var)
        holder = body[i]
        match holder:
            case tir.For() if holder is not loop:
                if not all(_computable(e, known) for e in (holder.start, holder.stop, holder.step)):
                    return None
                if any(isinstance(x, tir.Break) for x in tir_walk.stmts(holder.body)):
                    return None
                known.add(holder.var)
            case tir.If() if not _computable(holder.cond, known):
                return None
        levels.append(Level(tuple(lets), holder, orelse))
    return levels


def skeleton_vars(levels: list[Level]) -> set[tir.Var]:
    """The names a producer's replayed control binds: its lets and its loops' variables."""
    loops = {lv.holder.var for lv in levels[:-1] if isinstance(lv.holder, tir.For)}
    return loops | {let.var for lv in levels for let in lv.lets}


def _path(body: tuple[tir.Stmt, ...], loop: tir.For) -> list[tuple[tuple[tir.Stmt, ...], int, bool]] | None:
    """Each statement list from `body` down to `loop` through serial loops and ifs, with the index
    of the statement the way goes through and whether through its else branch; None elsewhere."""
    for i, s in enumerate(body):
        if s is loop:
            return [(body, i, False)]
        if (isinstance(s, tir.For) and s.kind == "serial") or isinstance(s, tir.If):
            for branch, inner in enumerate(tir_walk.bodies(s)):
                found = _path(inner, loop)
                if found is not None:
                    return [(body, i, branch == 1), *found]
    return None


def _computable(e: tir.Expr, known: set[tir.Var]) -> bool:
    """Whether the producer can compute `e` itself: no loads, only names of `known` (block
    indices, dimensions, scalars, the enclosing loops' variables, earlier such lets)."""
    return not tir_walk.loads(e) and tir_walk.variables(e) <= known


def register_only(s: tir.Stmt) -> bool:
    """Whether `s` touches no shared or global memory and holds no gemm, barrier or copy but
    between registers: the consumers of a warp-role loop can run it beside their wgmmas without
    the producer knowing."""
    return _plain(s) and all(b.scope not in ("shared", "global") for b in tir_walk.buffers(s))


def _plain(s: tir.Stmt) -> bool:
    """`s` holds no gemm, barrier, atomic or loop of its own (Parallel loops aside): work the
    consumers of a warp-role loop can run between their wgmmas."""
    barred = (tir.Gemm, tir.SyncThreads, tir.Atomic, tir.For, tir.While, tir.Break)
    return not any(isinstance(x, barred) for x in tir_walk.stmts((s,)))


def producers(loop: tir.For) -> list[tir.Copy]:
    """The copies of `loop` that the plan made its producers (none: a plain loop)."""
    return [s for s in loop.body if isinstance(s, tir.Copy) and s.pipeline == "producer"]


def _early_copies(before: tuple[tir.Stmt, ...], loop: tir.For) -> list[tir.Copy]:
    """The global -> shared copies of `before` that may run asynchronously until the first wait of `loop`."""
    out: list[tir.Copy] = []
    touched = {b for s in tir_walk.stmts(loop.body) for b in tir_walk.written(s)}
    # the loop's bounds and its copies' indices are evaluated before its first wait (the prologue)
    bound_loads = [ld for e in (loop.start, loop.stop) for ld in tir_walk.loads(e)]
    copies = [s for s in tir_walk.stmts(loop.body) if isinstance(s, tir.Copy)]
    index_loads = [ld for s in copies for r in (s.src, s.dst) for ld in _index_loads(r)]
    index_loads += [ld for s in copies if s.guard is not None for ld in tir_walk.loads(s.guard)]  # and guards
    touched |= {ld.buffer for ld in bound_loads + index_loads}
    for j in range(len(before) - 1, -1, -1):
        s = before[j]
        if isinstance(s, (tir.For, tir.While, tir.If, tir.Parallel)):
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
    instruction loads fragments from shared memory ("matrices"), which can run a k step ahead.
    Layout inference asks too, to lay out the tiles of these copy-limited loops."""
    if loop.kind != "pipelined" or not _is_one(loop.step) or manual(loop, target):
        return None
    producers = _producers(loop)
    g = _sole_gemm(loop, producers)
    if loop.num_stages < 3 or g is None:
        return None
    filled = {c.dst.buffer for c in producers}
    record = instruction_named(target, g.instruction)
    if record.load != "matrices" or g.clear_accum or g.a.buffer not in filled or g.b.buffer not in filled:
        return None
    steps = gemm_depth(g) // record.shape[2]
    return g if steps % 2 == 0 else None  # the two register sets alternate within a tile


def _async_main_loop_gemm(loop: tir.For, producers: list[tir.Copy], target: Target) -> tir.Gemm | None:
    """The gemm of a loop that is only its producers and one gemm on an asynchronous instruction
    (wgmma), or None. Its copies go out after the gemm is issued, into the stage read one
    iteration earlier (retired by the barrier at the top), so that they, element-wise loads of
    rows not 16-byte aligned above all, overlap its products; its wait follows them."""
    g = _sole_gemm(loop, producers)
    return g if g is not None and instruction_named(target, g.instruction).group == "warp_group" else None


def _sole_gemm(loop: tir.For, producers: list[tir.Copy]) -> tir.Gemm | None:
    """The body's one statement besides `producers`, when it is a gemm."""
    ids = {id(c) for c in producers}
    rest = [s for s in loop.body if id(s) not in ids]
    return rest[0] if len(rest) == 1 and isinstance(rest[0], tir.Gemm) else None


def _issue_points(loop: tir.For, producers: list[tir.Copy]) -> list[tuple[tir.Copy, tir.Gemm]]:
    """(producer, the last gemm of the body before the first statement reading its tile), for the
    producers that have one (the others are issued at the top of the iteration)."""
    ids = {id(c) for c in producers}
    out: list[tuple[tir.Copy, tir.Gemm]] = []
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
            out.append((c, last_gemm))
    return out


def _is_one(e: tir.Expr) -> bool:
    return isinstance(e, tir.IntImm) and e.value == 1


def _producers(loop: tir.For) -> list[tir.Copy]:
    return [c for c in _top_level_candidates(loop) if _refusal(loop, c) is None]


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a copy of a pipelined loop does not run ahead: `reason` (a clause: "its indices
    use ..."), what to do instead, and the statement of the body that makes it so, with what
    to say about it."""

    reason: str
    hint: str
    cause: tir.Stmt | None = None
    cause_note: str = ""


def refusals(loop: tir.For) -> list[tuple[tir.Copy, Refusal]]:
    """The global -> shared copies of a pipelined loop (num_stages >= 2, step 1) that the plan
    leaves in their iteration, each with its reason (what `-Wlost-pipeline` and explain say)."""
    top = _top_level_candidates(loop)
    out = [(c, r) for c in top if (r := _refusal(loop, c)) is not None]
    nested = [s for s in _copies_into_shared(tir_walk.stmts(loop.body)) if not any(s is c for c in top)]
    return out + [(c, _nested_refusal(loop, c)) for c in nested]


def _nested_refusal(loop: tir.For, c: tir.Copy) -> Refusal:
    """Why `c`, a copy inside a statement of `loop`'s body, stays in its iteration: the reason its
    `if` gives (`_hoist_refusal`) when it opens one at the top of the body, else its being nested."""
    for i, branch in enumerate(loop.body):
        if isinstance(branch, tir.If) and any(c is t for t in _leading_copies(branch)):
            refusal = _hoist_refusal(loop, branch, c, _trial(loop, i, (c,)), i)
            if refusal is not None:
                return refusal
    why = (
        "it is inside a block of the loop body; only copies at the top level of the body, or opening an "
        "`if` (without else) there, run ahead"
    )
    return Refusal(why, "move the copy to the top level of the loop body if it may run in every iteration")


def loop_refusal(loop: tir.For) -> tuple[str, str] | None:
    """Why a Pipelined(num_stages >= 2) loop has no producers at all, and what to do instead, when
    the reason is the loop's own (a body without copies into shared memory); None when its copies'
    reasons (`refusals`) are the whole story."""
    if _copies_into_shared(tir_walk.stmts(loop.body)):
        return None
    why = "its body has no copy from a global tensor into shared memory to run ahead"
    return why, "drop num_stages, or copy the loop's tiles into shared memory in its body"


def _copies_into_shared(stmts: Iterable[tir.Stmt]) -> list[tir.Copy]:
    """The copies of `stmts` from a global tensor into a shared tile."""
    return [
        s
        for s in stmts
        if isinstance(s, tir.Copy) and s.src.buffer.scope == "global" and s.dst.buffer.scope == "shared"
    ]


def _top_level_candidates(loop: tir.For) -> list[tir.Copy]:
    return _copies_into_shared(loop.body)


def _indices_through_lets(s: tir.Stmt) -> tir.Stmt:
    """A Pipelined loop whose copies' indices use names bound earlier in its body to values the
    copy can evaluate for a later iteration itself (`_ahead_value`: a page table's entry
    `page = block_table[b, k]`), with those values written into the indices: the copy can then
    run ahead (its indices are evaluated for the iteration it fetches). The names stay for the
    body's other uses."""
    if not (isinstance(s, tir.For) and s.kind == "pipelined" and s.num_stages >= 2):
        return s
    values = _ahead_lets(s)
    body: list[tir.Stmt] = []
    for t in s.body:
        if isinstance(t, tir.Copy) and t.src.buffer.scope == "global" and (_vars(t.src) | _vars(t.dst)) & set(values):
            t = replace(t, src=_substituted(t.src, values), dst=_substituted(t.dst, values))
        body.append(t)
    return replace(s, body=tuple(body))


def _ahead_lets(loop: tir.For) -> dict[tir.Var, tir.Expr]:
    """The names the top level of `loop`'s body binds to values a copy may evaluate for a later
    iteration (`_ahead_value`), each with its value (earlier such names written out)."""
    values: dict[tir.Var, tir.Expr] = {}
    for t in loop.body:
        if isinstance(t, tir.Let):
            value = _ahead_value(loop, substitute(t.value, values))
            if value is not None:
                values[t.var] = value
    return values


def _guards_hoisted(s: tir.Stmt) -> tir.Stmt:
    """A Pipelined loop whose top-level `if C:` (no else) opens with copies that can run ahead
    under their condition (`_hoist_refusal` is None), with those copies taken out in front of it,
    each guarded by C (its lets written out, so that the copy can evaluate it for the iteration it
    fetches); the rest of the `if` stays, dropped if nothing is left:

        if BlockMask[by, bx, k]:                     copy(A[.., k * 32], A_s) when BlockMask[by, bx, k]
            copy(A[.., k * 32], A_s)         ->      if BlockMask[by, bx, k]:
            gemm(A_s, B_s, C)                            gemm(A_s, B_s, C)

    Loops with a manual schedule are left alone (their units are positions in the body)."""
    if not (isinstance(s, tir.For) and s.kind == "pipelined" and s.num_stages >= 2 and s.schedule is None):
        return s
    body: list[tir.Stmt] = []
    for i, t in enumerate(s.body):
        if not (isinstance(t, tir.If) and _leading_copies(t)):
            body.append(t)
            continue
        trial = _trial(s, i, t.then)
        taken = [c for j, c in enumerate(_leading_copies(t)) if _hoist_refusal(s, t, c, trial, i + j) is None]
        body += _hoisted(s, t, taken)
    same = len(body) == len(s.body) and all(a is b for a, b in zip(body, s.body))
    return s if same else replace(s, body=tuple(body))


def _hoisted(loop: tir.For, branch: tir.If, taken: Iterable[tir.Stmt]) -> list[tir.Stmt]:
    """`branch` with those of its leading copies that are in `taken` in front of it, guarded."""
    ids = {id(c) for c in taken}
    chosen = {id(c) for c in _leading_copies(branch) if id(c) in ids}
    if not chosen:
        return [branch]
    guard = substitute(branch.cond, _ahead_lets(loop))
    out: list[tir.Stmt] = [replace(c, guard=guard) for c in _leading_copies(branch) if id(c) in chosen]
    rest = tuple(t for t in branch.then if id(t) not in chosen)
    return out + [replace(branch, then=rest)] if rest else out


def _trial(loop: tir.For, i: int, taken: Iterable[tir.Stmt]) -> tir.For:
    """`loop` with the `if` at `loop.body[i]` hoisted for the copies of `taken` (`_hoisted`), and
    their indices written out (`_indices_through_lets`): where their own reasons are asked."""
    branch = loop.body[i]
    assert isinstance(branch, tir.If)
    hoisted = replace(loop, body=(*loop.body[:i], *_hoisted(loop, branch, taken), *loop.body[i + 1 :]))
    out = _indices_through_lets(hoisted)
    assert isinstance(out, tir.For)
    return out


def _leading_copies(branch: tir.If) -> list[tir.Copy]:
    """The global -> shared copies that open the then-body of an `if` without else."""
    if branch.orelse:
        return []
    out: list[tir.Copy] = []
    for t in branch.then:
        if not _copies_into_shared((t,)):
            break
        assert isinstance(t, tir.Copy)
        out.append(t)
    return out


def _hoist_refusal(loop: tir.For, branch: tir.If, c: tir.Copy, trial: tir.For, at: int) -> Refusal | None:
    """Why `c`, a leading copy of `branch` (an `if` at the top of `loop`'s body), cannot run ahead
    under its condition (None: it can). `trial.body[at]` is the copy taken out in front of the
    `if` (`_trial`): its own reasons are `_refusal`'s there."""
    if loop.schedule is not None:
        return Refusal(
            "it is inside an `if` of a loop with a manual schedule (order=, stage=); only the schedule's "
            "units run ahead",
            "move the copy to the top level of the loop body if it may run in every iteration",
        )
    why = _condition_refusal(loop, branch)
    if why is not None:
        return why
    tile = c.dst.buffer.name
    reader = next((t for t in loop.body if t is not branch and c.dst.buffer in shared_reads_writes(t)[0]), None)
    if reader is not None:
        return Refusal(
            f"its tile '{tile}' is read outside the `if` at line {branch.span.line}, where an iteration whose "
            "condition fails would read a stage it did not fill",
            f"read '{tile}' only under the `if` that copies it, or copy it in every iteration",
            reader,
            f"'{tile}' is read here",
        )
    hoisted = trial.body[at]
    assert isinstance(hoisted, tir.Copy)
    return _refusal(trial, hoisted)


def _condition_refusal(loop: tir.For, branch: tir.If) -> Refusal | None:
    """Why the condition of `branch`, an `if` at the top of `loop`'s body, cannot be evaluated for a
    later iteration (`_ahead_value`, its lets written out), or None."""
    values = _ahead_lets(loop)
    if _ahead_value(loop, substitute(branch.cond, values)) is not None:
        return None
    line = branch.span.line
    hint = (
        f"a pipelined copy under an `if` evaluates its condition for the iteration it fetches "
        f"({loop.var.name} + {loop.num_stages - 1}): compute it from {loop.var.name} and tables the loop does not write"
    )
    lets = [t for t in loop.body if isinstance(t, tir.Let) and t.var in tir_walk.variables(branch.cond)]
    let = next((t for t in lets if t.var not in values), None)
    if let is not None:
        how = "loaded" if tir_walk.loads(let.value) else "computed"
        note = f"'{let.var.name}' is {how} here, from a value of the iteration the copy would run ahead of"
        return Refusal(
            f"the condition of its `if` (line {line}) uses '{let.var.name}', {how} in the loop body", hint, let, note
        )
    loaded = [ld.buffer for ld in tir_walk.loads(substitute(branch.cond, values))]
    for buf in loaded:
        writer = _writer(loop, buf, None)
        if writer is not None:
            note = f"'{buf.name}' is written here, in the iteration the copy would run ahead of"
            return Refusal(
                f"the condition of its `if` (line {line}) reads '{buf.name}', which the loop body writes",
                hint,
                writer,
                note,
            )
    return Refusal(f"the condition of its `if` (line {line}) uses a value of the iteration", hint)


def _substituted(r: tir.Region, values: dict[tir.Var, tir.Expr]) -> tir.Region:
    starts = tuple(substitute(e, values) for e in r.starts)
    return replace(r, starts=starts, extents=tuple(substitute(e, values) for e in r.extents))


def _ahead_value(loop: tir.For, value: tir.Expr) -> tir.Expr | None:
    """`value` (lets before it already substituted) when a copy may evaluate it for a later
    iteration: it uses no name the loop body binds other than the loop's own variable, and reads
    only buffers the loop does not write. None otherwise."""
    bound = {t.var for t in tir_walk.stmts(loop.body) if isinstance(t, tir.Let)}
    allocated = {t.buffer for t in tir_walk.stmts(loop.body) if isinstance(t, tir.Alloc)}
    if any(v in bound for v in tir_walk.variables(value)):
        return None
    if any(ld.buffer in allocated or _writer(loop, ld.buffer, None) is not None for ld in tir_walk.loads(value)):
        return None
    return value


def _refusal(loop: tir.For, c: tir.Copy) -> Refusal | None:
    """Why `c`, a global -> shared copy at the top of `loop`'s body, cannot run ahead (None: it can):
    its indices use a value of the iteration, or the loop writes its tile or an index's table."""
    lets = [s for s in loop.body if isinstance(s, tir.Let) and s.var in _vars(c.src) | _vars(c.dst)]
    if lets:
        let = lets[0]
        how = "loaded" if tir_walk.loads(let.value) else "computed"
        note = f"'{let.var.name}' is {how} here, from a value of the iteration the copy would run ahead of"
        hint = (
            f"a pipelined copy evaluates its indices for the iteration it fetches ({loop.var.name} + "
            f"{loop.num_stages - 1}): compute '{let.var.name}' from {loop.var.name} and tables the loop does not "
            f"write (a page table's entry, table[b, {loop.var.name}], is fine)"
        )
        return Refusal(f"its indices use '{let.var.name}', {how} in the loop body", hint, let, note)
    tile = c.dst.buffer.name
    other = _writer(loop, c.dst.buffer, c)
    if other is not None:
        hint = f"give the other statement a tile of its own, so that only the copy writes '{tile}'"
        return Refusal(
            f"the loop body writes its tile '{tile}' elsewhere too", hint, other, f"'{tile}' is written here"
        )
    for ld in _index_loads(c.src):
        writer = _writer(loop, ld.buffer, None)
        if writer is not None:
            note = f"'{ld.buffer.name}' is written here, in the iteration the copy would run ahead of"
            hint = f"fill '{ld.buffer.name}' before the loop, so that the copy can read it iterations ahead"
            return Refusal(f"its indices read '{ld.buffer.name}', which the loop body writes", hint, writer, note)
    return None


def _writer(loop: tir.For, buf: tir.Buffer, besides: tir.Stmt | None) -> tir.Stmt | None:
    """The first statement of `loop`'s body (nested ones included) other than `besides` that writes `buf`."""
    return next((s for s in tir_walk.stmts(loop.body) if s is not besides and buf in tir_walk.written(s)), None)


def _index_loads(region: tir.Region) -> list[tir.Load]:
    """The loads in a region's indices (a gather through a table): a copy whose table the loop
    writes cannot be issued iterations ahead."""
    return [ld for e in (*region.starts, *region.extents) for ld in tir_walk.loads(e)]


def _vars(region: tir.Region) -> set[tir.Var]:
    return {v for e in (*region.starts, *region.extents) for v in tir_walk.variables(e)}
