"""Lowering of one kernel: its context (context.py), the statement walk, which sends each
tile op to its lowering (ops.py, pipelined.py), and the kernel's head: parameters, block
indices, shared-memory views and kernel-wide flags."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import assert_never

from tilec import thread_ir as T
from tilec import tir
from tilec.budget import INT32_MAX
from tilec.diagnostics import error
from tilec.dtypes import UNPACKED_OF, DType
from tilec.lower.cexpr import (
    I32,
    all_of,
    builtin,
    cast,
    conjuncts,
    forget_bound,
    guarded,
    source_comment,
    source_line,
    symv,
)
from tilec.lower.context import LowerContext, WarpRoles, new_context, shared_bytes, shared_names, shared_view
from tilec.lower.exprs import let_decl, nonnegative, ref_of, value_of
from tilec.lower.lanes import name_lanes
from tilec.lower.loops import device_assert
from tilec.lower.ops import (
    lower_atomic_element,
    lower_atomic_region,
    lower_copy,
    lower_cumsum,
    lower_fill,
    lower_gemm,
    lower_parallel,
    lower_print,
    lower_reduce,
)
from tilec.lower.pipelined import lower_early_copy, lower_pipelined
from tilec.lower.residency import reread_bytes
from tilec.lower.scheduled import lower_scheduled
from tilec.passes.infer_layouts import Layouts
from tilec.passes.pack_subbyte import logical_dim
from tilec.passes.plan_pipeline import producers
from tilec.simplify import int_, simplify, substitute
from tilec.sync import shared_reads_writes
from tilec.targets import Target, instruction_named
from tilec.tir_print import expr_text
from tilec.tir_walk import loads, variables

_GRID_DIM: dict[str, T.BuiltinName] = {"x": "grid_dim_x", "y": "grid_dim_y"}


def lower_kernel(kernel: tir.Kernel, layouts: Layouts, target: Target) -> T.Kernel:
    _check_symbol(kernel, target)
    ctx = new_context(kernel, layouts, target)
    body = lower_block(ctx, kernel.body)
    state = ctx.state
    roles = state.roles
    threads = kernel.threads
    grid = tuple(simplify(value_of(ctx, g, None)) for g in kernel.grid)
    tx = _const(ctx.tx, builtin("thread_index"))
    if roles is None:
        body = [tx, *_block_index(ctx), *state.views, *state.prologue, *body]
    else:  # the block's threads consume; a producer warp group after them
        blocks = blocks_per_multiprocessor(roles, shared_bytes(state.views), target)
        if roles.persistent:  # both walk the tiles
            body = [tx, *state.views, *_warp_roles(ctx, roles, grid, body, blocks)]
        else:  # the kernel's own loops walk them
            body = [tx, *_block_index(ctx), *state.views, *state.prologue, *_roles_once(ctx, roles, body, blocks)]
        threads += roles.producer_threads
    if kernel.threads_written:  # pipeline._widened
        note = (
            f"{kernel.threads} threads where the program says {kernel.threads_written}: its fragments "
            "do not fit one warp group's registers"
        )
        body = [T.Comment(note), *body]
    body = name_lanes(body, ctx.tx, threads, target.warp_size, ctx.fresh, target.warp_group)
    smem = shared_bytes(state.views)
    helpers = tuple(sorted(state.helpers))
    params = _params(ctx) + (roles.params if roles else ())
    k = T.Kernel(kernel.name, params, threads, grid, smem, tuple(body), _abi(ctx), helpers)
    too_large = _too_large(ctx, grid)
    k = replace(k, block_vars=tuple(ctx.name(v) for v in kernel.block_vars), too_large=too_large)
    if roles is None:
        reread = reread_bytes(kernel) if target.launch.l2_resident else 0
        if reread:
            k = replace(k, reread_bytes=reread, helpers=tuple(sorted({*helpers, "l2_resident"})))
        return k
    return replace(
        k,
        consumer_threads=kernel.threads,
        min_blocks=blocks,
        tensor_maps=roles.tensor_maps,
        persistent=roles.persistent,
        cluster=2 if roles.cluster_rank is not None else 0,
        overlapped_products=roles.overlapped,
    )


# The shared memory a block reserves beside its own (the CUDA runtime's 1 KB per block on sm_90)
BLOCK_RESERVED_SMEM = 1024


def blocks_per_multiprocessor(roles: WarpRoles, smem: int, target: Target) -> int:
    """Blocks of a warp-role kernel on one multiprocessor: two where the consumers' registers
    allow (WarpRoles.max_blocks) and two blocks' shared memory fits the multiprocessor's (its
    opt-in limit per block plus the reserve), so that one block's epilogue and ring waits overlap
    the other's main loop; else one."""
    return 2 if roles.max_blocks >= 2 and two_blocks_fit(smem, target) else 1


def two_blocks_fit(smem: int, target: Target) -> bool:
    """Whether two blocks of `smem` bytes of shared memory fit a multiprocessor's."""
    return 2 * (smem + BLOCK_RESERVED_SMEM) <= target.smem_limit + BLOCK_RESERVED_SMEM


def _check_symbol(kernel: tir.Kernel, target: Target) -> None:
    """A kernel's name is its launcher's C symbol (`extern "C" int NAME(...)`): not a word of the
    target's language, nor `main`, the program's entry point."""
    if kernel.name == "main" or kernel.name in target.spelling.reserved:
        raise error(
            kernel.span,
            f"kernel name '{kernel.name}' cannot be a C symbol: its launcher would be `int {kernel.name}(...)`",
            hint=f"rename the kernel (e.g. '{kernel.name}_op'): the launcher and the Python module take its name",
        )


def _warp_roles(
    ctx: LowerContext, roles: WarpRoles, grid: tuple[tir.Expr, ...], body: list[T.Stmt], per_sm: int
) -> list[T.Stmt]:
    """The body of a persistent kernel with warp roles: the launcher starts at most `per_sm` blocks
    per multiprocessor, and the blocks walk the grid's tiles in rounds of gridDim.x; the producer's
    thread and the consumers each run the walk, with the tile's block indices.

    In round t, block b takes tile t * gridDim.x + b when t is even and t * gridDim.x +
    (gridDim.x - 1 - b) when t is odd. Where a tile's cost grows along the grid's x (the trip count
    of causal attention grows with the query tile), a block that took a round's costliest tile
    takes the next round's cheapest: by x alone, with 32 query tiles a head on 132 blocks, the
    busiest block would do 12% more than the mean; alternating, 3%. Tiles of equal cost are
    untouched, and each round still runs neighbouring tiles together (their K/V, their B panel).
    Blocks in clusters of two walk pairs of tiles so (`_pair_walk`).

        const int tiles = <grid extents multiplied>;
        const int rounds = tiles / gridDim.x;  // whole rounds; round `rounds` has tiles % gridDim.x
        const int last_round_place = <b's place in round `rounds`>;
        const int block_tiles = rounds + (last_round_place < tiles % gridDim.x ? 1 : 0);
        <ring set-up>
        if (tx >= threads) { producer entry; if (tx == threads) { state; walk(producer_tile) } }
        else { consumer entry; walk(flags, body) }
    """
    rank = roles.cluster_rank
    head, mine, t, indices = _tile_walk(ctx, grid) if rank is None else _pair_walk(ctx, grid, rank)

    def walk(stmts: list[T.Stmt]) -> T.Loop:
        return T.Loop(t, int_(0), mine, 1, False, (*indices, *stmts))

    block_names = {ctx.name(v) for v in ctx.kernel.block_vars}
    per_tile = [d for d in ctx.state.prologue if _reads_any(d, block_names)]  # a tile's interior tests
    kernel_wide = [d for d in ctx.state.prologue if d not in per_tile]
    tile_body = _edges_reread_tx(ctx, body)  # (statement for statement)
    exit: list[T.Stmt] = []
    if rank is not None:
        end = next(i for i, x in enumerate(body) if x is roles.loop_end) + 1
        tile_body = _past_the_grid(ctx, grid, tile_body, end)
        exit.append(T.Call(T.Intrin("tilec_cluster_sync", (), I32)))
    consuming: list[T.Stmt] = [walk([*per_tile, *tile_body])]
    split = _roles_split(ctx, roles, per_sm, [walk(list(roles.producer_tile))], consuming)
    return [*head, *kernel_wide, *roles.setup, split, *exit]


def _tile_walk(ctx: LowerContext, grid: tuple[tir.Expr, ...]) -> tuple[list[T.Stmt], tir.Var, T.Sym, list[T.Stmt]]:
    """`_warp_roles`' walk of single blocks: its head, the block's tile count, the round variable
    and the statements that open each round (the tile and its block indices)."""
    ctx.state.helpers.add("persistent")
    count = grid[0]
    for extent in grid[1:]:
        count = _op("*", count, extent)
    blocks = tir.Cast(builtin("grid_dim_x", DType.uint32), I32)
    block = tir.Cast(builtin("block_index_x", DType.uint32), I32)
    note = (
        "persistent: the blocks take the tiles in rounds of gridDim.x, this block the round's",
        "blockIdx.x-th in even rounds and its (gridDim.x - 1 - blockIdx.x)-th in odd ones",
    )
    head, mine, place = _rounds(ctx, count, blocks, block, note)
    t = T.Sym(ctx.fresh("t"), I32)
    tile = tir.Var(ctx.fresh("tile_id"), I32, "thread")
    first = _const(tile, _op("+", _op("*", symv(t), blocks), place(symv(t))))
    return head, mine, t, [first, *_tile_index(ctx, tile, grid)]


def _rounds(
    ctx: LowerContext, count: tir.Expr, blocks: tir.Expr, block: tir.Expr, note: tuple[str, ...]
) -> tuple[list[T.Stmt], tir.Var, Callable[[tir.Expr], tir.Expr]]:
    """The alternating rounds of a persistent walk of `count` tiles by `blocks` walkers (blocks,
    or clusters), this one `block`: the declarations (`note` their comment), the walker's tile
    count, and its place in a round (a function of the round)."""
    names = ("tiles", "rounds", "last_round_place", "block_tiles")
    tiles, rounds, last_place, mine = (tir.Var(ctx.fresh(n), I32, "thread") for n in names)

    def place(round_: tir.Expr) -> tir.Expr:  # this block's tile of a round, counted from the round's first
        even = tir.BinOp("==", _op("%", round_, int_(2)), int_(0), DType.bool)
        return tir.Select(even, block, _op("-", _op("-", blocks, int_(1)), block), I32)

    in_last = tir.BinOp("<", last_place, _op("%", tiles, blocks), DType.bool)  # the last round is partial
    head: list[T.Stmt] = [
        _const(tiles, count),
        *(T.Comment(line) for line in note),
        _const(rounds, _op("//", tiles, blocks)),
        _const(last_place, place(rounds)),
        _const(mine, _op("+", rounds, tir.Select(in_last, int_(1), int_(0), I32))),
    ]
    return head, mine, place


def _pair_walk(
    ctx: LowerContext, grid: tuple[tir.Expr, ...], rank: tir.Var
) -> tuple[list[T.Stmt], tir.Var, T.Sym, list[T.Stmt]]:
    """`_warp_roles`' walk of blocks in clusters of two along the grid's y (sm90._Pair): the
    clusters walk the grid's pairs of tile rows as single blocks walk its tiles, in panels of half
    as many pair rows, and the block of rank r takes row 2 * pair_row + r. Both blocks of a
    cluster walk the same pairs, so their rings stay in step; `_past_the_grid` keeps the second
    block from storing a row past the grid's, and the kernel ends with a cluster barrier: neither
    block may leave while the other can still write into its shared memory or arrive on its
    barriers.

        const int cta_rank = blockIdx.x % 2;
        <_rounds over tiles.x * ceil(tiles.y / 2) pairs by gridDim.x / 2 clusters>
        per pair: <pair_row, bx>; const int by = pair_row * 2 + cta_rank;
    """
    ctx.state.helpers.add("cluster_launch")
    pair_rows = _op("//", _op("+", grid[1], int_(1)), int_(2))
    two = int_(2)
    blocks = _op("//", tir.Cast(builtin("grid_dim_x", DType.uint32), I32), two)
    block = _op("//", tir.Cast(builtin("block_index_x", DType.uint32), I32), two)
    note = (
        "persistent, in clusters of two blocks: the clusters take the pairs of tiles in rounds of",
        "gridDim.x / 2, this one the round's (blockIdx.x / 2)-th in even rounds, counted from the",
        "round's last in odd ones",
    )
    head, mine, place = _rounds(ctx, _op("*", grid[0], pair_rows), blocks, block, note)
    rank_decl = _const(rank, _op("%", tir.Cast(builtin("block_index_x", DType.uint32), I32), two))
    t = T.Sym(ctx.fresh("t"), I32)
    pair = tir.Var(ctx.fresh("pair_id"), I32, "thread")
    first = _const(pair, _op("+", _op("*", symv(t), blocks), place(symv(t))))
    y = tir.Var(ctx.name(ctx.kernel.block_vars[1]), I32, "thread")
    pair_row = tir.Var(ctx.fresh("pair_row"), I32, "thread")
    sw = ctx.state.swizzle
    # panels of rows (order row) cover as many rows as before in half as many pair rows
    halved = replace(sw, panel_size=max(1, sw.panel_size // 2)) if sw is not None and sw.order == "row" else sw
    rows = _tile_index(ctx, pair, (grid[0], pair_rows), rows=pair_row, swizzle=halved)
    return [rank_decl, *head], mine, t, [first, *rows, _const(y, _op("+", _op("*", pair_row, two), rank))]


def _past_the_grid(ctx: LowerContext, grid: tuple[tir.Expr, ...], body: list[T.Stmt], end: int) -> list[T.Stmt]:
    """A cluster walk's consumer `body` with what follows the main loop (`body[end:]`, the
    epilogue) skipped for a tile row past the grid's: an odd grid's last pair has one, whose
    main loop runs all the same (its loads read zeros; its half of the shared tile serves the pair)."""
    if not body[end:]:
        return body
    y = tir.Var(ctx.name(ctx.kernel.block_vars[1]), I32, "thread")
    inside = tir.BinOp("<", y, tir.Cast(grid[1], I32) if grid[1].dtype != I32 else grid[1], DType.bool)
    skip = T.Comment("a pair's second tile past the grid's last row: its main loop served the pair, nothing to store")
    return [*body[:end], skip, T.IfThen(inside, tuple(body[end:]))]


def _edges_reread_tx(ctx: LowerContext, body: list[T.Stmt]) -> list[T.Stmt]:
    """`body` with the thread index read anew at the head of each copy's edge-tile path (ops.py).
    Those paths address every element on its own: nvcc would compute all their addresses once,
    before the tile walk (they do not change from tile to tile), and hold them, spilled, through
    the whole kernel (D 256 attention's consumers: 392 bytes of spill, 0 with the reread), where
    the path is taken for a few tiles only."""

    def walk(stmts: tuple[T.Stmt, ...]) -> tuple[T.Stmt, ...]:
        return tuple(reread(s) for s in stmts)

    def reread(s: T.Stmt) -> T.Stmt:
        s = T.with_bodies(s, walk)
        if isinstance(s, T.IfThen) and s.edge and s.orelse:
            ctx.state.helpers.add("thread_index")
            return replace(s, orelse=(_const(ctx.tx, builtin("thread_index_reread")), *s.orelse))
        return s

    return list(walk(tuple(body)))


def _roles_once(ctx: LowerContext, roles: WarpRoles, body: list[T.Stmt], per_sm: int) -> list[T.Stmt]:
    """The body of a kernel with warp roles that keeps its grid (its loop sits in the kernel's
    own loops, which the producer replays: WarpRoles.persistent is false): the ring's set-up,
    then each role runs its part once.

        <ring set-up>
        if (tx >= threads) { producer entry; if (tx == threads) { state; replayed loops } }
        else { consumer entry; body }
    """
    return [*roles.setup, _roles_split(ctx, roles, per_sm, list(roles.producer_tile), body)]


def _roles_split(
    ctx: LowerContext, roles: WarpRoles, per_sm: int, producing: list[T.Stmt], consuming: list[T.Stmt]
) -> T.IfThen:
    """The split between the roles: the producer warp group (its registers given back; its one
    thread runs its state, then `producing`) and the block's own threads (`consuming`)."""
    producer_registers, consumer_registers = roles.registers(per_sm)
    producer = (
        producer_registers,
        *roles.producer_entry,
        T.IfThen(roles.producer_thread, (*roles.producer_state, *producing)),
    )
    consumer = (consumer_registers, *roles.consumer_entry, *consuming, *roles.consumer_exit)
    return T.IfThen(tir.BinOp(">=", ctx.tx, int_(ctx.kernel.threads), DType.bool), producer, consumer)


def _reads_any(d: T.Stmt, names: set[str]) -> bool:
    """Whether the declaration `d`'s initial value reads a variable named in `names`."""
    return isinstance(d, T.Decl) and d.init is not None and any(v.name in names for v in variables(d.init))


def lower_block(ctx: LowerContext, stmts: tuple[tir.Stmt, ...]) -> list[T.Stmt]:
    out: list[T.Stmt] = []
    for s in stmts:
        out += lower_stmt(ctx, s)
    return out


def lower_stmt(ctx: LowerContext, s: tir.Stmt) -> list[T.Stmt]:
    """One statement of the kernel body; every tile op becomes a Scope (`as_scope`)."""
    ctx.state.owned = {}  # what this statement's own lowering records
    match s:
        case tir.Alloc():
            return lower_alloc(ctx, s)
        case tir.Let(var, value):
            return [let_decl(ctx, var, value_of(ctx, value, None))]
        case tir.Store():
            return lower_store(ctx, s)
        case tir.Copy() if s.pipeline == "early":
            return lower_early_copy(ctx, s)
        case tir.Copy():
            return as_scope(ctx, s, ctx.backend.bulk_store(ctx, s) or lower_copy(ctx, s))
        case tir.Fill():
            return as_scope(ctx, s, lower_fill(ctx, s))
        case tir.Parallel():
            return as_scope(ctx, s, lower_parallel(ctx, s))
        case tir.Gemm():
            return as_scope(ctx, s, lower_gemm(ctx, s))
        case tir.Reduce():
            return as_scope(ctx, s, lower_reduce(ctx, s))
        case tir.CumSum():
            return as_scope(ctx, s, lower_cumsum(ctx, s))
        case tir.Atomic() if s.src is not None:
            return as_scope(ctx, s, lower_atomic_region(ctx, s))
        case tir.Atomic():
            return as_scope(ctx, s, lower_atomic_element(ctx, s))
        case tir.For() if s.warp_specialized:
            return ctx.backend.warp_specialized(ctx, s, lower_stmt)
        case tir.For() if s.schedule is not None and s.schedule.honoured:
            return lower_scheduled(ctx, s, lower_stmt)
        case tir.For() if producers(s):
            return lower_pipelined(ctx, s, lower_stmt)
        case tir.For():
            return lower_for(ctx, s)
        case tir.While(cond, body):
            return [T.While(value_of(ctx, cond, None), tuple(lower_block(ctx, body)))]
        case tir.Break():
            return [T.Break()]
        case tir.SyncThreads():
            return [T.Barrier("block")]
        case tir.If():
            return lower_if(ctx, s)
        case tir.Print():
            return as_scope(ctx, s, lower_print(ctx, s))
        case tir.DeviceAssert():
            return [device_assert(ctx, s, None)]
        case tir.UseSwizzle():
            ctx.state.swizzle = s
            return []
        case tir.AnnotateLayout():  # read by layout inference
            return []
        case _:
            assert_never(s)


def as_scope(ctx: LowerContext, s: tir.Stmt, body: list[T.Stmt]) -> list[T.Stmt]:
    """A lowered tile op as a Scope, with the shared tiles it reads and writes for barrier
    placement (sync.py): its operands, and scratch it reads after its own barriers."""
    reads, writes = shared_reads_writes(s)
    reads_, writes_ = shared_names(ctx, reads) | ctx.state.scratch_reads, shared_names(ctx, writes)
    owned = {n: o for n, o in ctx.state.owned.items() if n in reads_ | writes_} if _owns(s) else {}
    access = T.SharedAccess(
        reads=reads_,
        writes=writes_,
        scratch=isinstance(s, (tir.Reduce, tir.Gemm)),  # a cross-warp reduction, a staged operand
        proxy_reads=isinstance(s, tir.Gemm) and instruction_named(ctx.target, s.instruction).load == "descriptors",
        owners=tuple(sorted(owned.items(), key=lambda item: item[0])),
    )
    ctx.state.scratch_reads = set()
    ctx.state.owned = {}
    return [T.Scope(source_comment(s), tuple(body), s.span, access)]


def _owns(s: tir.Stmt) -> bool:
    """Tile ops whose owner maps lowering records (owners.py): a copy touches only the elements its
    layout gives each thread; so does a Parallel loop."""
    return isinstance(s, (tir.Copy, tir.Parallel))


def lower_alloc(ctx: LowerContext, s: tir.Alloc) -> list[T.Stmt]:
    buf = s.buffer
    name = ctx.name(buf)
    layouts = ctx.layouts
    match buf.scope:
        case "shared":
            dims = buf.const_shape
            if buf in layouts.pitch:  # padded rows: conflict-free matrix loads
                dims = dims[:-1] + (layouts.pitch[buf],)
            if buf in layouts.swizzle:  # swizzled: one flat row, offsets through the XOR
                dims = (math.prod(dims),)
            if s.stages > 1:  # one copy per pipeline stage
                dims = (s.stages, *dims)
            shared_view(ctx, name, buf.dtype, dims, layouts.align.get(buf, 16), ctx.state.lifetimes.get(buf))
            return []
        case "fragment":
            frag = layouts.buffers[buf]
            return [T.Decl(name, buf.dtype, (frag.local_size,))]
        case "local":
            return [T.Decl(name, buf.dtype, buf.const_shape)]
        case "var":
            init = value_of(ctx, s.init, None) if s.init is not None else None
            return [T.Decl(name, buf.dtype, (), init=cast(init, buf.dtype) if init is not None else None)]
        case "global":
            raise error(s.span, "tensors cannot be allocated inside a kernel")


def lower_store(ctx: LowerContext, s: tir.Store) -> list[T.Stmt]:
    """A scalar store outside any Parallel loop, skipped where its element is outside the tensor
    (as a Parallel loop's store is, loops.py); loads under the guard need none of their own."""
    if s.buffer.scope == "fragment":
        raise error(
            s.span,
            f"fragment '{s.buffer.name}' can only be written inside a Parallel loop or by a tile op",
            hint="wrap the assignment in `for i, j in Parallel(...)`",
        )
    ref = ref_of(ctx, s.buffer, s.indices, None)
    if s.buffer.scope == "global":
        ctx.state.written.add(ref.ref.array)
    outer = ctx.state.assumed
    ctx.state.assumed = [*outer, *conjuncts(ref.inbounds)]
    value = cast(value_of(ctx, s.value, None), s.buffer.dtype)
    ctx.state.assumed = outer
    cond = all_of([c for c in conjuncts(ref.inbounds) if c not in outer])
    return guarded(cond, [T.Assign(ref.ref, value)])


def lower_for(ctx: LowerContext, s: tir.For) -> list[T.Stmt]:
    """A loop without producers (a Pipelined loop with nothing to pipeline runs as is)."""
    var = ctx.name(s.var)
    step = s.step.value if isinstance(s.step, tir.IntImm) else 1
    start, stop = value_of(ctx, s.start, None), value_of(ctx, s.stop, None)
    counter = tir.Var(var, I32, "thread")
    forget_bound(ctx.state.bounds, var)
    if step > 0 and nonnegative(ctx, simplify(start)):
        ctx.state.nonneg.add(var)  # counts up from a nonnegative start
        stop_value = simplify(stop)
        if isinstance(stop_value, tir.IntImm):  # and below a constant: its checks fold away
            ctx.state.bounds[counter] = stop_value.value - 1
    body = lower_block(ctx, s.body)
    loop = T.Loop(T.Sym(var, I32), start, stop, step, s.kind == "unroll", tuple(body))
    code = _unswitched(ctx, loop)
    if s.kind == "pipelined":
        comment = f"{source_line(s)}: {s.span.text.splitlines()[0].strip() if s.span.text else 'Pipelined loop'}"
        return [T.Comment(comment), *code]
    return code


def _unswitched(ctx: LowerContext, loop: T.Loop) -> list[T.Stmt]:
    """A loop whose copies test kernel-wide flags every iteration (`A_vec4`: the tensor's rows
    16-byte aligned) in two versions: where the flags hold, one whose body takes their fast paths
    with no test; the loop as it was otherwise. nvcc leaves such tests in a loop whose body has
    more than one of them (RMSNorm's second pass: one 16-byte load in flight per iteration)."""
    if loop.unroll or _has_loop(loop.body):
        return [loop]  # an inner loop has its own versions: one level of copies, not one per level
    flags = set(ctx.state.flags.values())
    tests = _flag_tests(loop.body, flags)
    if not tests or any(not c <= flags for c in tests):
        return [loop]  # no test, or one that would stay (`A_vec8 && by * 64 + 64 <= M`): no gain
    tested = sorted((f for f in flags if any(f in c for c in tests)), key=lambda f: f.name)
    fast = replace(loop, body=tuple(_assuming(loop.body, set(tested))))
    return [T.IfThen(all_of(list(tested)), (fast,), (loop,))]


def _has_loop(body: tuple[T.Stmt, ...]) -> bool:
    """Whether `body` holds a loop the emitted code keeps (not one unrolled into copies of its body)."""
    for s in body:
        match s:
            case T.Loop(unroll=False) | T.While():
                return True
            case T.Loop(body=inner) | T.Scope(body=inner):
                if _has_loop(inner):
                    return True
            case T.IfThen(then=then, orelse=orelse):
                if _has_loop(then) or _has_loop(orelse):
                    return True
    return False


def _flag_tests(body: tuple[T.Stmt, ...], flags: set[tir.Var]) -> list[set[tir.Expr]]:
    """The conjuncts of each `if` condition of `body` that tests one of `flags`, at any depth but
    in the `else` of an `if` of flags alone (code the flags holding never runs)."""
    found: list[set[tir.Expr]] = []
    for s in body:
        match s:
            case T.IfThen(cond, then, orelse):
                parts = set(conjuncts(cond))
                if parts & flags:
                    found.append(parts)
                found += _flag_tests(then, flags)
                if not parts <= flags:
                    found += _flag_tests(orelse, flags)
            case T.Loop(body=inner) | T.While(body=inner) | T.Scope(body=inner):
                found += _flag_tests(inner, flags)
    return found


def _assuming(body: tuple[T.Stmt, ...], flags: set[tir.Var]) -> list[T.Stmt]:
    """`body` with `flags` known true: conditions lose them, and an `if` of nothing else is its
    `then` branch."""
    out: list[T.Stmt] = []
    for s in body:
        match s:
            case T.IfThen(cond, then, orelse):
                rest = [c for c in conjuncts(cond) if c not in flags]
                then_, else_ = _assuming(then, flags), _assuming(orelse, flags)
                if rest:
                    out.append(replace(s, cond=all_of(rest), then=tuple(then_), orelse=tuple(else_)))
                else:  # its declarations have names of their own (fresh): they join the block
                    out.extend(then_)
            case T.Loop(body=inner) | T.While(body=inner) | T.Scope(body=inner):
                out.append(replace(s, body=tuple(_assuming(inner, flags))))
            case _:
                out.append(s)
    return out


def lower_if(ctx: LowerContext, s: tir.If) -> list[T.Stmt]:
    cond = value_of(ctx, s.cond, None)
    outer = ctx.state.assumed
    if not loads(s.cond):  # of values no statement changes: it holds throughout `then`
        ctx.state.assumed = [*outer, *conjuncts(cond)]
    then = lower_block(ctx, s.then)
    ctx.state.assumed = outer
    orelse = lower_block(ctx, s.orelse)
    return [T.IfThen(cond, tuple(then), tuple(orelse))]


def _params(ctx: LowerContext) -> tuple[T.Param, ...]:
    kernel = ctx.kernel
    names = [ctx.name(t) for t in kernel.tensors]
    tensors = [T.Param(n, t.dtype, True, n not in ctx.state.written) for n, t in zip(names, kernel.tensors)]
    scalars = [T.Param(ctx.name(v), v.dtype) for v in (*kernel.scalars, *kernel.dims)]
    return (*tensors, *scalars)


def _abi(ctx: LowerContext) -> dict:
    """The kernel's `// tilec-abi:` entry: a tensor dimension (and a stride, for a tensor declared
    with strides) is an int, a dimension's name, or an expression of them (`M // 64`,
    tilec.runtime checks it)."""
    kernel = ctx.kernel

    def dim(d: tir.Expr) -> int | str:
        if isinstance(d, tir.IntImm):
            return d.value
        if isinstance(d, tir.Var):
            return ctx.name(d)
        return expr_text(substitute(d, {v: tir.Var(ctx.name(v), v.dtype, v.kind) for v in variables(d)}))

    def tensor(t: tir.Buffer) -> dict:
        entry = {"name": ctx.name(t), "dtype": _logical(t.dtype).tile_name, "shape": _logical_shape(t, dim)}
        if t.strides is not None:
            entry["strides"] = [dim(s) for s in t.strides]
        return entry

    return {
        "name": kernel.name,
        "tensors": [tensor(t) for t in kernel.tensors],
        "scalars": [{"name": ctx.name(v), "dtype": v.dtype.tile_name} for v in kernel.scalars],
        "dims": [ctx.name(v) for v in kernel.dims],
    }


def _logical(d: DType) -> DType:
    """The type a packed tensor's program wrote (int4 for int4x2): what the ABI names."""
    return UNPACKED_OF.get(d, d)


def _logical_shape(t: tir.Buffer, dim: Callable[[tir.Expr], int | str]) -> list[int | str]:
    """The ABI's shape of tensor `t`: as written (a packed tensor's elements, not its bytes)."""
    return [dim(logical_dim(t, d, i == len(t.shape) - 1)) for i, d in enumerate(t.shape)]


def _too_large(ctx: LowerContext, grid: tuple[tir.Expr, ...]) -> tir.Expr | None:
    """`1LL * M * K > 2147483647LL || ...`: some tensor has more elements than a 32-bit offset
    reaches (a constant shape over INT32_MAX is an elaboration error). One test per set of symbolic
    factors, with the largest constant factor any tensor has beside them (B x H x 4 x 512 covers
    B x H x 512); none for a tensor that is one bare dimension (an int argument cannot pass
    2^31 - 1). The dimensions inside an expression (`M * 4`) are widened first, so the expression
    cannot wrap before the test. Then `N > 2147481600` for a grid extent `(N + 2047) / 2048`: the
    launcher's sum, and the last block's indices, which reach N + 2046, stay within 32 bits."""
    i64 = DType.int64
    largest: dict[tuple[str, ...], tuple[int, list[tir.Expr]]] = {}
    for t in ctx.kernel.tensors:
        symbolic = [_widened(ctx, d) for d in t.shape if not isinstance(d, tir.IntImm)]
        const = math.prod(d.value for d in t.shape if isinstance(d, tir.IntImm))
        bare = len(symbolic) == 1 and const == 1 and isinstance(t.shape[0], tir.Var)
        key = tuple(sorted(expr_text(d) for d in symbolic))
        if symbolic and not bare and const > largest.get(key, (0, []))[0]:
            largest[key] = (const, symbolic)
    out: tir.Expr | None = None
    for const, symbolic in largest.values():
        count: tir.Expr = tir.IntImm(1, i64)
        for d in symbolic + ([tir.IntImm(const, i64)] if const > 1 else []):
            count = tir.BinOp("*", count, d, i64)
        test = tir.BinOp(">", count, tir.IntImm(INT32_MAX, i64), DType.bool)
        out = test if out is None else tir.BinOp("or", out, test, DType.bool)
    for t in ctx.kernel.tensors:
        reach = _reach_test(ctx, t)
        if reach is not None:
            out = reach if out is None else tir.BinOp("or", out, reach, DType.bool)
    # a dimension whose own count test has a constant factor (M x 64 <= 2^31 - 1) needs no other
    covered = {s[0].name for c, s in largest.values() if c > 1 and len(s) == 1 and isinstance(s[0], tir.Var)}
    for dim, overhang in _grid_overhangs(grid).items():
        if dim.name in covered and overhang < INT32_MAX // 2:
            continue
        test = tir.BinOp(">", dim, tir.IntImm(INT32_MAX - overhang, I32), DType.bool)
        out = test if out is None else tir.BinOp("or", out, test, DType.bool)
    for odd in _odd_packed_dims(ctx):
        out = odd if out is None else tir.BinOp("or", out, odd, DType.bool)
    return out


def _odd_packed_dims(ctx: LowerContext) -> list[tir.Expr]:
    """`K % 2 != 0` per packed tensor whose innermost dimension is a symbolic K (stored as K // 2
    bytes, passes/pack_subbyte.py): an odd K has no packed form, and the launcher refuses it too."""
    tests: list[tir.Expr] = []
    for t in ctx.kernel.tensors:
        if t.dtype.is_packed and not isinstance(t.shape[-1], tir.IntImm):
            x = _widened(ctx, logical_dim(t, t.shape[-1], True))
            test = tir.BinOp("!=", tir.BinOp("%", x, int_(2), x.dtype), int_(0), DType.bool)
            if all(expr_text(test) != expr_text(e) for e in tests):
                tests.append(test)
    return tests


def _reach_test(ctx: LowerContext, t: tir.Buffer) -> tir.Expr | None:
    """`1LL * (S - 1) * sS + 1LL * (D - 1) > 2147483647LL`: the farthest element of a tensor with
    strides past a 32-bit offset; None for a row-major tensor, or one whose shape and strides are
    constants (elaboration checked those). Dimensions of extent 1 and strides of 0 add nothing."""
    if t.strides is None or all(isinstance(e, tir.IntImm) for e in (*t.shape, *t.strides)):
        return None
    i64 = DType.int64
    reach: tir.Expr = tir.IntImm(0, i64)
    for d, s in zip(t.shape, t.strides):
        if (isinstance(d, tir.IntImm) and d.value == 1) or (isinstance(s, tir.IntImm) and s.value == 0):
            continue
        steps: tir.Expr = tir.BinOp("*", tir.IntImm(1, i64), tir.BinOp("-", _widened(ctx, d), int_(1), d.dtype), i64)
        if isinstance(d, tir.IntImm):
            steps = tir.IntImm(d.value - 1, i64)
        unit = isinstance(s, tir.IntImm) and s.value == 1
        term = steps if unit else tir.BinOp("*", steps, _widened(ctx, s), i64)
        reach = term if isinstance(reach, tir.IntImm) else tir.BinOp("+", reach, term, i64)
    return tir.BinOp(">", reach, tir.IntImm(INT32_MAX, i64), DType.bool)


def _grid_overhangs(grid: tuple[tir.Expr, ...]) -> dict[tir.Var, int]:
    """Per dimension N of a grid extent `(N + c) / t` (a ceildiv of a bare dimension), the largest c."""
    out: dict[tir.Var, int] = {}
    for g in grid:
        match g:
            case tir.BinOp("//", tir.BinOp("+", tir.Var() as dim, tir.IntImm(c)), tir.IntImm()) if c > 0:
                out[dim] = max(out.get(dim, 0), c)
    return out


def _widened(ctx: LowerContext, d: tir.Expr) -> tir.Expr:
    """A tensor dimension in the launcher's names: a dimension as it is, an expression of them
    with each dimension cast to 64 bits."""
    if isinstance(d, tir.Var):
        return tir.Var(ctx.name(d), d.dtype, d.kind)
    wide: dict[tir.Var, tir.Expr] = {
        v: tir.Cast(tir.Var(ctx.name(v), v.dtype, v.kind), DType.int64) for v in variables(d)
    }
    return substitute(d, wide)


def _block_index(ctx: LowerContext) -> list[T.Stmt]:
    """The block variables of a kernel whose blocks are its tiles: blockIdx's, or in panels."""
    blocks = [tir.Var(ctx.name(v), I32, "thread") for v in ctx.kernel.block_vars]
    axes: list[T.BuiltinName] = ["block_index_x", "block_index_y", "block_index_z"]
    sw = ctx.state.swizzle
    if sw is None or len(blocks) < 2:
        return [_const(b, builtin(axis)) for b, axis in zip(blocks, axes)]
    tile_id = tir.Var(ctx.fresh("tile_id"), I32, "thread")
    extents = (builtin(_GRID_DIM["x"], DType.uint32), builtin(_GRID_DIM["y"], DType.uint32))
    first = _op("+", _op("*", builtin("block_index_y"), extents[0]), builtin("block_index_x"))
    z = [_const(b, builtin("block_index_z")) for b in blocks[2:]]
    return [_const(tile_id, first), *_panels(ctx, sw, tile_id, extents, blocks), *z]


def _tile_index(
    ctx: LowerContext,
    tile: tir.Var,
    grid: tuple[tir.Expr, ...],
    rows: tir.Var | None = None,
    swizzle: tir.UseSwizzle | None = None,
) -> list[T.Stmt]:
    """The block variables of tile `tile` of `grid` (a persistent kernel): x fastest, or in panels.
    `rows`: the name the grid's y takes instead of its block variable's (a cluster walk's pair
    row), and `swizzle`: its panels (else the kernel's)."""
    blocks = [tir.Var(ctx.name(v), I32, "thread") for v in ctx.kernel.block_vars]
    if rows is not None:
        blocks[1] = rows
    if len(blocks) == 1:
        return [_const(blocks[0], tile)]
    plane: tir.Expr = tile
    z: list[T.Stmt] = []
    if len(blocks) == 3:
        area = _op("*", grid[0], grid[1])
        plane, z = _op("%", tile, area), [_const(blocks[2], _op("//", tile, area))]
    sw = swizzle if rows is not None else ctx.state.swizzle
    if sw is None:
        return [_const(blocks[0], _op("%", plane, grid[0])), _const(blocks[1], _op("//", plane, grid[0])), *z]
    if len(blocks) == 3:
        in_plane = tir.Var(ctx.fresh("plane_id"), I32, "thread")
        z, plane = [_const(in_plane, plane), *z], in_plane
    assert isinstance(plane, tir.Var)
    return [*z, *_panels(ctx, sw, plane, (grid[0], grid[1]), blocks)]


def _panels(
    ctx: LowerContext, sw: tir.UseSwizzle, tile_id: tir.Var, extents: tuple[tir.Expr, tir.Expr], blocks: list[tir.Var]
) -> list[T.Stmt]:
    """Block x and y of tile `tile_id` (x fastest over `extents`) in panels of `panel_size`
    block rows (order row) walked column by column, for L2 reuse."""
    p = int_(sw.panel_size)
    first, second = ("x", "y") if sw.order == "row" else ("y", "x")
    panel_tiles, panel, in_panel, panel_rows = (
        tir.Var(ctx.fresh(n), I32, "thread") for n in ("panel_tiles", "panel", "in_panel", "panel_rows")
    )
    grid_first, grid_second = (extents[0], extents[1]) if first == "x" else (extents[1], extents[0])
    if grid_second.dtype != I32:
        grid_second = tir.Cast(grid_second, I32)
    b_first, b_second = (blocks[0], blocks[1]) if first == "x" else (blocks[1], blocks[0])
    return [
        _const(panel_tiles, _op("*", p, grid_first)),
        _const(panel, _op("//", tile_id, panel_tiles)),
        _const(in_panel, _op("%", tile_id, panel_tiles)),
        _const(panel_rows, tir.Call("min", (p, _op("-", grid_second, _op("*", panel, p))), I32)),
        _const(b_second, _op("+", _op("*", panel, p), _op("%", in_panel, panel_rows))),
        _const(b_first, _op("//", in_panel, panel_rows)),
    ]


def _const(var: tir.Var, init: tir.Expr) -> T.Decl:
    """`const int var = init;`"""
    return T.Decl(var.name, var.dtype, init=init, const=True)


def _op(op: tir.BinOpName, a: tir.Expr, b: tir.Expr) -> tir.Expr:
    """An int32 operation written as is (no simplification: block-index set-up reads as written)."""
    return tir.BinOp(op, a, b, I32)
