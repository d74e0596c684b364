"""sm_90a's own lowerings: the gemm on wgmma (the WGMMA_M64NNK16 and WGMMA_M64NNK32 records of
instructions.py), each warp group multiplying its slice of the accumulator with both operands
read straight from the swizzled shared tiles through matrix descriptors; every other gemm and
the asynchronous copy are sm_80's (sm80.py).

    gemm(A_s, B_s, acc)     # float16, 128x256x64 tile, 2 warp groups of 64x256
  ->
    tilec_wgmma_hold<128>(&acc[0]);                  // the accumulator's registers stay put
    tilec_wgmma_fence();
    for (int kk = 0; kk < 4; ++kk) {                 // k steps of 16
      tilec_wgmma_m64n256k16_f16<0, 1>(&acc[0],      // B stored (K, N): MN-major
          tilec_wgmma_desc(&A_s[0], ..., 16, 1024, 1),  // the warp group's 64 rows at column 16 kk
          tilec_wgmma_desc(&B_s[0], ..., 8192, 1024, 1));
    }
    tilec_wgmma_commit();
    tilec_wgmma_wait<0>();
    tilec_wgmma_hold<128>(&acc[0]);

Descriptors (layout inference stored the tiles in the widest swizzle their rows allow,
aligned to its 8-row atom): SBO, the step between groups of 8 rows, is 8 swizzle rows;
LBO, for an operand stored MN-major (its M or N contiguous), is the step between its
swizzle-wide column blocks (unused for K-major operands, whose k step stays inside a
swizzle row: 32 bytes, 16 elements of 16 bits or 32 of 8 bits; 8-bit operands are K-major
only, e.g. `tilec_wgmma_m64n128k32_s8(&acc[0], tilec_wgmma_desc(&A_s[0], kk * 32, 16, 512, 2),
...)` in 64-byte rows). A descriptor takes its tile and the element offset apart (`&A_s[0],
kk * 32`; the offset is never negative: a k step's, a warp group's rows), so nvcc computes the
tile's once and each k step's as that plus a constant; the k steps are unrolled up to
UNROLLED_K_STEPS (a 576-deep MLA score product: 36), so the offsets are constants. The sync pass
fences the asynchronous proxy before the barriers of a kernel with such reads (sync.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from tilec import layout as L
from tilec import thread_ir as T
from tilec import tir, tir_walk
from tilec.backends.cuda.fragments import WARP_GROUP
from tilec.backends.cuda.instructions import WGMMA_M64NNK16
from tilec.backends.cuda.sm80 import (
    _ATOMIC_SUFFIX,
    ASYNC_COPY_BYTES,
    _smem_elem,
    async_copy,
    declare,
    load,
    products,
    registers,
    setup,
)
from tilec.backends.cuda.sm80 import gemm as warp_gemm
from tilec.budget import ADDRESS_REGISTERS
from tilec.dtypes import DType
from tilec.instructions import Instruction, types_entry
from tilec.layout_algebra import widest_swizzle
from tilec.lower.cexpr import I32, add, all_of, flatten, index_vars, mul, source_comment, source_line
from tilec.lower.context import LowerContext, StmtLowering, WarpRoles, shared_bytes, shared_names, shared_view
from tilec.lower.exprs import in_dimension, let_decl, nonnegative, ref_of, value_of
from tilec.lower.loops import distributed
from tilec.lower.ops import lower_copy, stage_fragment
from tilec.passes.infer_layouts import fragment_registers, place_descriptor_operand
from tilec.passes.plan_pipeline import (
    Level,
    Overlap,
    box_row_dim,
    consumer_body,
    overlap,
    pair_shared,
    producers,
    ring_guard,
    ring_stages,
    runs_products,
    skeleton,
)
from tilec.passes.select import gemm_depth
from tilec.simplify import const, int_, simplify, substitute
from tilec.sync import BLOCK, FENCE_PROXY_ASYNC, shared_reads_writes
from tilec.targets import instruction_named

__all__ = [
    "ASYNC_COPY_BYTES",
    "ATOMIC_ADD_LANES",
    "async_copy",
    "atomic_add_vector",
    "bulk_store",
    "declare",
    "gemm",
    "load",
    "products",
    "registers",
    "setup",
    "warp_specialized",
]

_SWIZZLE_MODE = {128: 1, 64: 2, 32: 3}  # the descriptor's swizzle field
UNROLLED_K_STEPS = 36  # a gemm's k steps written out up to this many (MLA's 512 + 64 deep scores)

# vector atomic adds into global memory (red.global.add, sm_90): element type -> the lanes one
# instruction adds, widest first (16 bytes, 8, and a 16-bit pair)
ATOMIC_ADD_LANES: dict[DType, tuple[int, ...]] = {
    DType.float32: (4, 2),
    DType.float16: (8, 4, 2),
    DType.bfloat16: (8, 4, 2),
}


def atomic_add_vector(ctx: LowerContext, dst: T.Subscript, values: T.Subscript, lanes: int) -> T.Stmt:
    """The `lanes` registers from `values` on added into global memory from `dst` on (aligned to
    their size) by one red.global.add, each element atomically on its own."""
    suffix = _ATOMIC_SUFFIX[dst.dtype]
    ctx.state.helpers.add(f"red_add_{suffix}")
    return T.Call(T.Intrin(f"tilec_red_add_{suffix}x{lanes}", (T.AddressOf(dst), T.AddressOf(values)), I32))


def gemm(ctx: LowerContext, s: tir.Gemm, record: Instruction) -> list[T.Stmt]:
    """wgmma for a warp-group record, sm_80's mma.sync for the others. A wgmma gemm followed by
    copies (`then_issue`) or by another product into its accumulator (`then_accumulates`) is left
    running: `gemm_wait`, or the next product's wait, completes it."""
    if record.group != "warp_group":
        return warp_gemm(ctx, s, record)
    return _wgmma_gemm(ctx, s, record, in_flight=None if s.then_accumulates or s.then_issue else 0)


def gemm_wait(ctx: LowerContext, s: tir.Gemm, record: Instruction) -> list[T.Stmt]:
    """The wait that completes a wgmma gemm left running for the copies issued after it
    (`then_issue`), with its accumulator held in place across it, and its register A tile kept
    live up to it (nothing may reuse those registers while the wgmmas read them); nothing for
    mma.sync."""
    if record.group != "warp_group" or not s.then_issue:
        return []
    frag = ctx.layouts.buffers[s.c.buffer]
    out: list[T.Stmt] = [_call("tilec_wgmma_wait<0>"), _hold(ctx.name(s.c.buffer), frag.local_size, s.c.buffer.dtype)]
    if s.a_from_registers:
        out.append(_hold_a(ctx, s.a.buffer))
    return out


def _wgmma_gemm(ctx: LowerContext, s: tir.Gemm, record: Instruction, in_flight: int | None = 0) -> list[T.Stmt]:
    """The warp groups' wgmmas of `s`, committed as one group; returns once at most `in_flight`
    groups are still running (0: the accumulator is final), or at once (None: the caller waits,
    then holds the accumulator, `_hold`)."""
    c = s.c.buffer
    frag = ctx.layouts.buffers[c]
    gn, gm = frag.thread_parts[3].extent, frag.thread_parts[4].extent  # wgmma_accumulator's parts
    mi, width = frag.local_parts[0].extent, frag.shape[1] // gn
    n = min(width, record.shape[1])
    depth = record.shape[2]
    cname = ctx.name(c)
    out: list[T.Stmt] = []  # a cleared C: each tile's first k step ignores its registers (`accumulate`)
    group = simplify(tir.BinOp("//", ctx.tx, int_(WARP_GROUP), I32))
    g_n = simplify(tir.BinOp("%", group, int_(gn), I32)) if gn > 1 else int_(0)
    g_m = simplify(tir.BinOp("//", group, int_(gn), I32)) if gm > 1 else int_(0)
    m0, n0 = simplify(mul(g_m, mi * 64)), simplify(mul(g_n, width))
    a_region = s.a
    if s.a.buffer.scope == "fragment" and not s.a_from_registers:  # laid out otherwise: A from shared memory
        a_region, staging = stage_fragment(ctx, s.a, descriptors=True)
        out += staging
        record = WGMMA_M64NNK16
    types = types_entry(record, s.a.buffer.dtype)
    call = types.call.format(n=n, ta=int(s.transpose_a), tb=int(not s.transpose_b))
    assert record.load_helper is not None, "the wgmma record names its helper"
    ctx.state.helpers |= {record.load_helper, types.helper.format(n=n)}
    if c.dtype.is_int:
        ctx.state.helpers.add("wgmma_s32")  # tilec_wgmma_hold_s32
    kk = tir.Var(ctx.fresh("kk"), I32, "thread")
    steps = gemm_depth(s) // depth
    ctx.state.bounds[kk] = steps - 1
    k0 = mul(kk, depth)
    body: list[T.Stmt] = []
    for mt in range(mi):
        row = add(m0, int_(mt * 64))
        a_at = (k0, row) if s.transpose_a else (row, k0)
        for nt in range(width // n):
            col = add(n0, int_(nt * n))
            b_at = (col, k0) if s.transpose_b else (k0, col)
            acc = T.AddressOf(T.Subscript(cname, (int_((mt * (width // 8) + nt * (n // 8)) * 4),), c.dtype))
            a = _a_registers(ctx, s, mt, kk) if s.a_from_registers else _descriptor(ctx, a_region, a_at, s.transpose_a)
            args: tuple[T.Expr, ...] = (acc, a, _descriptor(ctx, s.b, b_at, not s.transpose_b))
            if s.clear_accum:  # the first k step reads none of C (`accumulate` 0)
                args += (tir.BinOp(">", kk, int_(0), DType.bool),)
            body.append(T.Call(T.Intrin(call, args, I32)))
    hold = _hold(cname, frag.local_size, c.dtype)
    out += _dropped(ctx, s, frag.local_size)
    out.append(hold)
    if s.a_from_registers:  # A's registers, too, are final before the fence
        out.append(_hold_a(ctx, s.a.buffer))
    out.append(_call("tilec_wgmma_fence"))
    out.append(T.Loop(T.Sym(kk.name, I32), int_(0), int_(steps), 1, steps <= UNROLLED_K_STEPS, tuple(body)))
    out.append(_call("tilec_wgmma_commit"))
    if in_flight is not None:
        out += [_call(f"tilec_wgmma_wait<{in_flight}>"), hold]
    return out


def _dropped(ctx: LowerContext, s: tir.Gemm, size: int) -> list[T.Stmt]:
    """For a gemm that clears C: C's old values end before it (its first k step reads none), so
    they are not kept alive from their last use up to the wgmma that ignores them."""
    if not s.clear_accum:
        return []
    ctx.state.helpers.add("wgmma_drop_s32" if s.c.buffer.dtype.is_int else "wgmma_drop")
    return [_per_register("tilec_wgmma_drop", ctx.name(s.c.buffer), size, s.c.buffer.dtype)]


def _hold_a(ctx: LowerContext, a_tile: tir.Buffer) -> T.Call:
    """Keeps a register A tile of wgmma (16-bit pairs, as 32-bit words) where it is."""
    ctx.state.helpers.add("wgmma_rs")
    words = ctx.layouts.buffers[a_tile].local_size * a_tile.dtype.bytes // 4
    first_word = T.AddressOf(T.Subscript(ctx.name(a_tile), (int_(0),), a_tile.dtype))
    return T.Call(T.Intrin(f"tilec_wgmma_hold_a<{words}>", (first_word,), I32))


def _a_registers(ctx: LowerContext, s: tir.Gemm, mt: int, kk: tir.Var) -> T.AddressOf:
    """The A operand of wgmma's register form for m64 tile `mt`, k step `kk`: the 8 registers of
    the A tile laid out as an accumulator (instructions.wgmma_a_in_registers) that hold columns
    16 kk .. 16 kk + 15, two m64n8 tiles side by side."""
    a = s.a.buffer
    tiles = ctx.layouts.buffers[a].local_parts[1].extent  # A's n8 tiles along K
    first = simplify(mul(add(int_(mt * tiles), mul(kk, 2)), 4))
    return T.AddressOf(T.Subscript(ctx.name(a), (first,), a.dtype))


def _descriptor(ctx: LowerContext, region: tir.Region, at: tuple[tir.Expr, tir.Expr], mn_major: bool) -> T.Intrin:
    """The matrix descriptor of the operand tile `region` starting at element `at` (row 8k of a
    swizzle atom, so the swizzle leaves its address linear)."""
    buf = region.buffer
    rows, cols = buf.const_shape
    sw = widest_swizzle(cols * buf.dtype.bytes)
    assert sw is not None, "layout inference stored the tile in a descriptor swizzle"
    lbo = rows * sw if mn_major else 16  # column blocks of an MN-major tile; unused when K-major
    # the tile (its stage's first element) and the element offset apart: the tile's descriptor is
    # then computed once, and each k step's is that plus a constant (spelling.py's helper)
    element = _smem_elem(ctx, region, at).target
    *stage, offset = element.indices
    tile = T.AddressOf(replace(element, indices=(*stage, int_(0))))
    args = (tile, offset, int_(lbo), int_(8 * sw), int_(_SWIZZLE_MODE[sw]))
    return T.Intrin("tilec_wgmma_desc", args, DType.uint64)


def _call(name: str) -> T.Call:
    return T.Call(T.Intrin(name, (), I32))


# ---------------------------------------------------------------- warp roles

# setmaxnreg of the producer warp group: it only issues bulk copies. 40 leaves its one thread room
# for the tile and ring arithmetic of any loop; an overlapped products loop whose fragments need
# more than the consumers' share then gives its producer TIGHT_PRODUCER_REGISTERS (its producer
# walks one loop of two rings: measured on an H100, 128x128 tiles at D128 overlapped only so, 1.943
# against 2.008 ms as written).
PRODUCER_REGISTERS = 40
TIGHT_PRODUCER_REGISTERS = 24
REGISTER_FILE = 65536  # 32-bit registers of one multiprocessor, shared by the block's warp groups


def warp_specialized(ctx: LowerContext, s: tir.For, lower: StmtLowering) -> list[T.Stmt]:
    """A GEMM main loop by warp roles (plan_pipeline's tir.For.warp_specialized), in a kernel
    whose blocks walk its tiles (lower_kernel builds the tile loop, WarpRoles):

        if (tx >= threads) {                   // the producer warp group
          setmaxnreg_dec<40>
          if (tx == threads) {                 // one thread issues every bulk copy
            int filled = 0;
            for each tile: for k:
              wait empty[stage] (phase ^ 1); expect_tx full[stage]; TMA boxes; arrive full[stage]
              ... filled += k's trip count
          }
        } else {                               // the block's own threads
          setmaxnreg_inc<...>; int consumed = 0;
          for each tile: ... for k: wait full[stage] (phase); wgmma ... commit; wait<1>;
                                    lane 0 of each warp: arrive empty[previous stage]
                         wait<0>; arrive empty[last stage]; consumed += trip count; ...
        }

    The ring position of iteration k is `filled + k` (`consumed + k`), counted over the tiles the
    block has walked: stage = position % stages, phase = (position / stages) % 2. The register
    work after the gemm (plan_pipeline.register_only) follows its wgmmas in the consumers' loop,
    lowered by `lower`; when it reads or writes the accumulator, each step waits for all its
    wgmmas first. A stage is
    released once the wgmma group that read it has retired (one group stays in flight), the
    last one of a tile before its epilogue, so the producer fills the next tile's stages while
    the consumers store this one's.

    A loop of several products (plan_pipeline's products form: flash attention's Q K^T, softmax,
    P V) has consumers of its own (`_consumers_of_products`): each iteration waits for its
    stage, runs the body as written on it and frees it at the end.

    A loop inside the kernel's own serial loops and ifs (TileLang's persistent GEMM walks its
    tiles in a wave loop of its own: plan_pipeline.skeleton) keeps the kernel's grid: the
    producer thread replays those loops and ifs around its loop (`_replayed`), the consumers run
    the body as written, and the counters run on across the runs of the loop as across tiles.

    A loop whose body is one `if` of its copies and gemm (plan_pipeline.ring_guard: a block-sparse
    GEMM's mask) is walked by both roles in the iterations where its condition holds only
    (`_run`, `_iteration`): each tests it for iteration k, and a taken iteration's ring position
    is the counter plus `taken`, the iterations the run took before it.
    Returns the consumers' loop; the rest goes to ctx.state.roles."""
    copies = producers(s)
    threads = ctx.kernel.threads
    ring = _ring(ctx, s)
    ctx.state.helpers |= {"bulk_copy", "mbarrier"}
    groups = threads // WARP_GROUP
    fragments = fragment_registers(ctx.layouts)
    plan = _overlap(ctx, s, fragments, groups)
    producer = PRODUCER_REGISTERS
    if plan is not None and fragments + ADDRESS_REGISTERS > consumer_registers(groups, 1):
        producer = TIGHT_PRODUCER_REGISTERS
    if plan is not None:  # each product's tiles in a ring of their own
        second = _second_ring(ctx, ring)
        parts = list(zip((ring, second), plan.tiles(s), strict=True))
    else:
        parts = [(ring, copies)]
    pair = _pair(ctx, s)
    filled_decl, producer_code, maps = _producer(ctx, s, parts, pair)
    setup = _ring_setup(ctx, [r for r, _ in parts], threads, pair)
    if plan is not None:
        consumed_decl, consumer = _consumers_overlapped(ctx, s, parts, plan, lower)
    elif runs_products(s):
        consumed_decl, consumer = _consumers_of_products(ctx, s, ring, copies, lower)
    else:
        (g,) = [x for x in consumer_body(s) if isinstance(x, tir.Gemm)]
        consumed_decl, consumer = _consumers(ctx, s, ring, g, lower, pair)
    params = tuple(T.Param(m.name, DType.uint8, tensor_map=True) for m in maps)
    ctx.state.roles = WarpRoles(
        setup=setup,
        producer_entry=(),
        producer_thread=tir.BinOp("==", ctx.tx, int_(threads), DType.bool),
        producer_state=(filled_decl,),
        producer_tile=producer_code,
        consumer_entry=(consumed_decl,),
        consumer_exit=(),
        producer_threads=WARP_GROUP,
        params=params,
        tensor_maps=tuple(maps),
        registers=lambda blocks: _register_moves(groups, blocks, producer),
        max_blocks=2 if consumer_registers(groups, 2, producer) - fragments >= ADDRESS_REGISTERS else 1,
        persistent=any(x is s for x in ctx.kernel.body),
        overlapped=plan is not None,
        cluster_rank=pair.rank if pair is not None else None,
        loop_end=consumer[-1],
    )
    return consumer


# The narrowest first product (key tile) whose loop overlaps its products. Measured side by side
# on an H100 (B4 H32 S4096 D128, 128x64 tiles, two consumer warp groups): overlapped, with or
# without ping-pong turns, 3-4% slower than as written (2.297 vs 2.222 ms; causal 1.353 vs
# 1.303): a 64-column tile's softmax is too short to hide a product behind. With 128x128 tiles
# it pays: TileLang's mha_fwd_bhsd (D64) ran at 0.97x TileLang's time in the same process, where
# the loop as written had run at 1.00-1.02x; at D128, 1.943 against 2.008 ms as written. Causal
# loops, whose trip count grows with the query tile, gain as much since the persistent walk
# alternates (lower/kernel.py): 1.062 against 1.107 ms at D128, 0.712 against 0.752 at D64 (H100,
# 128x128 tiles, both orders measured); before it, with the blocks' work uneven, they had lost 8%.
# At D256 an 80-column tile pays too (FlashAttention-3's tile there; its products are long beside
# the softmax): 3.59 against 3.77 ms, causal 2.03 against 2.07 (H100, B4 H32 S4096, side by side,
# bench/results/ab-2026-12-06-s9a-h100.txt).
OVERLAP_MIN_COLUMNS = 80
# What an overlapped loop with a key tile narrower than 128 columns leaves its consumers beyond
# the fragments, for addresses, indices and the softmax's temporaries (fewer scores a thread, fewer
# temporaries): D256 on 128x80 tiles overlaps with 198 registers of fragments and ptxas fits the
# rest of its 240 without a spill. Wider tiles keep ADDRESS_REGISTERS: TileLang's mha_fwd_bhsd at
# D128 on 128x160 tiles (194 registers of fragments) spilled 136 bytes with 40 and none as written.
OVERLAP_ADDRESS_REGISTERS = 40
OVERLAP_NARROW_COLUMNS = 128  # key tiles below this many columns take OVERLAP_ADDRESS_REGISTERS


def _overlap(ctx: LowerContext, s: tir.For, fragments: int, groups: int) -> Overlap | None:
    """How the consumers of `s` overlap its two products (plan_pipeline.overlap), where it pays
    (a first product of at least OVERLAP_MIN_COLUMNS columns) and the registers allow: all its
    fragments live at once (iteration k's scores beside k - 1's P and the output) besides the
    allowance above, within the consumers' share of one block per multiprocessor. (A 128-row tile
    on one warp group, 234 registers of fragments, spilled and had ptxas serialize its wgmmas; two
    warp groups of 64 rows, 122, did neither.)"""
    if not runs_products(s):
        return None
    plan = overlap(s)
    if plan is None:
        return None
    columns = ctx.layouts.buffers[plan.first.c.buffer].shape[1]
    allowance = OVERLAP_ADDRESS_REGISTERS if columns < OVERLAP_NARROW_COLUMNS else ADDRESS_REGISTERS
    if columns < OVERLAP_MIN_COLUMNS or fragments + allowance > consumer_registers(groups, 1, TIGHT_PRODUCER_REGISTERS):
        return None
    return plan


@dataclass(frozen=True, slots=True)
class _Pair:
    """A cluster of two blocks along the grid's y (tir.For.cluster): the block's rank in it
    (`rank`, blockIdx.x % 2: lower/kernel.py walks the tiles by pairs) and the producer copies
    whose tiles the two load once for both (plan_pipeline.pair_shared)."""

    rank: tir.Var
    shared: tuple[tir.Copy, ...]


def _pair(ctx: LowerContext, s: tir.For) -> _Pair | None:
    """The cluster of warp-role loop `s`'s blocks, where the plan gave it one."""
    if s.cluster != 2:
        return None
    rank = tir.Var(ctx.fresh("cta_rank"), I32, "thread")
    ctx.state.bounds[rank] = 1
    ctx.state.nonneg.add(rank.name)
    ctx.state.helpers.add("cluster")
    return _Pair(rank, tuple(pair_shared(ctx.kernel, producers(s))))


@dataclass(frozen=True, slots=True)
class _Ring:
    """The ring of a warp-role loop: its full and empty mbarrier arrays of `stages` each, the
    loop's trip count and iteration variable (0, 1, ..., count - 1), and the `if` whose
    condition an iteration takes a stage under (plan_pipeline.ring_guard; None: every one does)."""

    full: str
    empty: str
    stages: int
    count: tir.Expr
    it: tir.Var
    guard: tir.If | None = None


@dataclass(frozen=True, slots=True)
class _Run:
    """How a role walks one run of the ring's loop from its counter (filled, consumed): `at`, the
    current iteration's ring position less the counter, and `total`, the stages the run took,
    which the counter advances by after it: the iteration and the trip count, or in a guarded
    ring (`_Ring.guard`) the iterations taken so far, a count `head` declares and `step`
    advances at the end of each iteration taken. Both roles test the same condition, so
    they take the same iterations and walk the ring alike."""

    at: tir.Expr
    total: tir.Expr
    head: tuple[T.Stmt, ...] = ()
    step: tuple[T.Stmt, ...] = ()


def _ring(ctx: LowerContext, s: tir.For) -> _Ring:
    """The ring of `s`, its barriers placed in shared memory; the loop variable becomes
    start + iteration. A range that may be empty (split-K's last blocks) counts as 0 iterations,
    never fewer: the counters must not run the ring back."""
    stages = ring_stages(s)
    full, empty = ctx.fresh("full_bar"), ctx.fresh("empty_bar")
    for name in (full, empty):
        shared_view(ctx, name, DType.uint64, (stages,), 8)
    start = simplify(value_of(ctx, s.start, None))
    count = simplify(value_of(ctx, tir.BinOp("-", s.stop, s.start, I32), None))
    if not nonnegative(ctx, count):
        count = tir.Call("max", (count, int_(0)), I32)
    it = tir.Var(ctx.name(s.var) + "_iter" if const(start) != 0 else ctx.name(s.var), I32, "thread")
    ctx.state.nonneg.add(it.name)
    ctx.state.cvars[s.var] = simplify(add(start, it))
    return _Ring(full, empty, stages, count, it, ring_guard(s))


def _second_ring(ctx: LowerContext, ring: _Ring) -> _Ring:
    """A ring beside `ring` for other tiles of the same loop: barriers of its own, the same
    stages, iterations and positions."""
    full, empty = ctx.fresh("full_bar"), ctx.fresh("empty_bar")
    for name in (full, empty):
        shared_view(ctx, name, DType.uint64, (ring.stages,), 8)
    return replace(ring, full=full, empty=empty)


def _run(ctx: LowerContext, ring: _Ring) -> _Run:
    """A role's walk of one run of `ring`'s loop: by the iteration, or for a guarded ring by a
    count of the iterations taken (`taken`, 0 at the start of the run)."""
    if ring.guard is None:
        return _Run(ring.it, ring.count)
    taken = tir.Var(ctx.fresh("taken"), I32, "thread")
    ctx.state.nonneg.add(taken.name)
    head = T.Decl(taken.name, I32, init=int_(0))
    return _Run(taken, taken, (head,), (T.Assign(T.Sym(taken.name, I32), int_(1), "+="),))


def _iteration(ctx: LowerContext, ring: _Ring, run: _Run, body: list[T.Stmt]) -> tuple[T.Stmt, ...]:
    """One iteration of a role's loop: `body`; in a guarded ring only where the `if`'s condition
    holds for the iteration, which then counts as taken."""
    if ring.guard is None:
        return tuple(body)
    comment = T.Comment(f"{_first_line(ring.guard)} (only these iterations take a stage of the ring)")
    return (comment, T.IfThen(value_of(ctx, ring.guard.cond, None), (*body, *run.step)))


def _slot(ctx: LowerContext, ring: _Ring, position: tir.Expr) -> tuple[tir.Var, tir.Var, list[T.Stmt]]:
    """The stage and phase of ring position `position`, declared."""
    stage = tir.Var(ctx.fresh("stage"), I32, "thread")
    phase = tir.Var(ctx.fresh("phase"), I32, "thread")
    ctx.state.bounds[stage], ctx.state.bounds[phase] = ring.stages - 1, 1
    decls: list[T.Stmt] = [
        T.Decl(stage.name, I32, init=tir.BinOp("%", position, int_(ring.stages), I32), const=True),
        T.Decl(
            phase.name,
            I32,
            init=tir.BinOp("%", tir.BinOp("//", position, int_(ring.stages), I32), int_(2), I32),
            const=True,
        ),
    ]
    return stage, phase, decls


def _counter(ctx: LowerContext, run: _Run, name: str) -> tuple[tir.Var, T.Decl, T.Assign]:
    """A ring position (filled, consumed): declared 0, advanced by the stages `run` took after each run."""
    var = tir.Var(ctx.fresh(name), I32, "thread")
    return var, T.Decl(var.name, I32, init=int_(0)), T.Assign(T.Sym(var.name, I32), run.total, "+=")


def _producer(
    ctx: LowerContext, s: tir.For, parts: list[tuple[_Ring, list[tir.Copy]]], pair: _Pair | None = None
) -> tuple[T.Decl, tuple[T.Stmt, ...], list[T.TensorMap]]:
    """The producer thread's counter, its code per run of `s` (`_replayed` in the control around
    it) and its tensor maps: per iteration (taken, in a guarded ring), for each ring and the
    copies it carries, wait for a free stage, announce its bytes, issue the copies' boxes. In a
    cluster (`pair`), the stage's bytes are all the block's own tiles' as before: the boxes of a
    shared tile the other block loads land in this block's stage too, counted on its barrier."""
    ring = parts[0][0]
    run = _run(ctx, ring)
    filled, filled_decl, filled_step = _counter(ctx, run, "filled")
    stage, phase, decls = _slot(ctx, ring, add(filled, run.at))
    issue: list[T.Stmt] = [*decls]
    maps: list[T.TensorMap] = []
    for r, copies in parts:
        full = _bar(r.full, stage)
        tx_bytes = sum(math.prod(c.dst.buffer.const_shape) * c.dst.buffer.dtype.bytes for c in copies)
        issue.append(T.Barrier("mbarrier_wait", (_bar(r.empty, stage), tir.BinOp("^", phase, int_(1), I32))))
        issue.append(T.Barrier("mbarrier_expect_tx", (full, int_(tx_bytes))))
        for c in copies:
            multicast = pair.rank if pair is not None and any(c is x for x in pair.shared) else None
            code, tmap = _bulk_copy(ctx, c, stage, full, multicast)
            issue.append(T.Scope(source_comment(c), tuple(code), c.span, T.NO_ACCESS))
            maps.append(tmap)
        issue.append(T.Barrier("mbarrier_arrive", (full,)))
    loop = T.Loop(T.Sym(ring.it.name, I32), int_(0), ring.count, 1, False, _iteration(ctx, ring, run, issue))
    return filled_decl, _replayed(ctx, s, copies, (*run.head, loop, filled_step)), maps


def _replayed(ctx: LowerContext, s: tir.For, copies: list[tir.Copy], run: tuple[T.Stmt, ...]) -> tuple[T.Stmt, ...]:
    """The producer's `run` of `s` in the control the kernel body holds `s` in
    (plan_pipeline.skeleton), outermost first: each serial loop and `if` on the way replayed,
    after the lets of its level that the producer reads (`_wanted`); `run` and its own level's
    lets in one Scope (a loop at the top of the kernel has only that)."""
    levels = skeleton(ctx.kernel, s)
    assert levels is not None, "plan_pipeline runs by warp roles only a loop whose way the producer replays"
    wanted = _wanted(s, copies, levels)
    code = run
    for level in reversed(levels):
        lets = [let_decl(ctx, x.var, value_of(ctx, x.value, None)) for x in level.lets if x.var in wanted]
        if level.holder is s:
            code = (T.Scope(f"{_first_line(s)} (producer: bulk copies)", (*lets, *code), s.span, T.NO_ACCESS),)
        else:
            code = (*lets, *_replay(ctx, level, code))
    return code


def _wanted(s: tir.For, copies: list[tir.Copy], levels: list[Level]) -> set[tir.Var]:
    """The names the producer of `s` reads: through the loop's bounds, its copies' corners, the
    condition of a guarded ring, the replayed loops' bounds and ifs' conditions, and the lets of
    those names."""
    exprs = [s.start, s.stop, *(e for c in copies for e in c.src.starts)]
    guard = ring_guard(s)
    exprs += [guard.cond] if guard is not None else []
    for level in levels[:-1]:
        h = level.holder
        exprs += [h.start, h.stop, h.step] if isinstance(h, tir.For) else [h.cond] if isinstance(h, tir.If) else []
    wanted: set[tir.Var] = set().union(*(tir_walk.variables(e) for e in exprs))
    for let in reversed([x for level in levels for x in level.lets]):
        if let.var in wanted:
            wanted |= tir_walk.variables(let.value)
    return wanted


def _replay(ctx: LowerContext, level: Level, body: tuple[T.Stmt, ...]) -> list[T.Stmt]:
    """A serial loop or `if` on the way to a warp-role loop, as the producer runs it around
    `body` (the loop variable and lets keep their names: the producer's branch declares its own)."""
    h = level.holder
    comment = T.Comment(f"{_first_line(h)} (replayed by the producer)")
    if isinstance(h, tir.For):
        step = h.step.value if isinstance(h.step, tir.IntImm) else 1
        start, stop = value_of(ctx, h.start, None), value_of(ctx, h.stop, None)
        return [comment, T.Loop(T.Sym(ctx.name(h.var), I32), start, stop, step, False, body)]
    assert isinstance(h, tir.If), "plan_pipeline.skeleton holds a loop in serial loops and ifs"
    cond = value_of(ctx, h.cond, None)
    return [comment, T.IfThen(tir.UnaryOp("not", cond, DType.bool) if level.orelse else cond, body)]


def _ring_setup(ctx: LowerContext, rings: list[_Ring], threads: int, pair: _Pair | None = None) -> tuple[T.Stmt, ...]:
    """One thread initializes the rings' barriers (a full one for the producer's arrival, an
    empty one for each consumer warp's), then every thread of the block waits for it. In a
    cluster (`pair`) a stage is free once both blocks' consumers are done with it (the other
    block's producer writes into it too): an empty barrier counts both blocks' warps, and every
    thread of the cluster waits, so that no block arrives on or writes into a barrier of the
    other's before it is set up."""
    warps = threads // ctx.target.warp_size * (2 if pair is not None else 1)
    i = tir.Var(ctx.fresh("i"), I32, "thread")
    init = tuple(
        T.Barrier("mbarrier_init", (_bar(name, i), int_(count)))
        for ring in rings
        for name, count in ((ring.full, 1), (ring.empty, warps))
    )
    first = tir.BinOp("==", ctx.tx, int_(0), DType.bool)
    stages = rings[0].stages
    return (
        T.IfThen(
            first,
            (T.Loop(T.Sym(i.name, I32), int_(0), int_(stages), 1, True, init), _call("tilec_mbarrier_init_fence")),
        ),
        _call("tilec_cluster_sync") if pair is not None else T.Barrier("named", (int_(0), int_(threads + WARP_GROUP))),
    )


def _wait_full(ctx: LowerContext, ring: _Ring, position: tir.Expr) -> tuple[tir.Var, list[T.Stmt]]:
    """The stage of the consumers' current iteration, at ring position `position`, and the start
    of its body: the stage and phase declared, then the wait for the producer to have filled it."""
    stage, phase, decls = _slot(ctx, ring, position)
    return stage, [*decls, T.Barrier("mbarrier_wait", (_bar(ring.full, stage), phase))]


def _consumers(
    ctx: LowerContext, s: tir.For, ring: _Ring, g: tir.Gemm, lower: StmtLowering, pair: _Pair | None = None
) -> tuple[T.Decl, list[T.Stmt]]:
    """The consumers' counter and their loop: per iteration (taken, in a guarded ring), wait for
    the stage to be full, the wgmmas (then the register work after the gemm, lowered by
    `lower`), release the previous stage; after the loop, wait for the last group and release
    its stage (none where the run took no stage)."""
    run = _run(ctx, ring)
    consumed, consumed_decl, consumed_step = _counter(ctx, run, "consumed")
    stage, body = _wait_full(ctx, ring, add(consumed, run.at))
    for buf in (g.a.buffer, g.b.buffer):
        ctx.state.stage_of[buf] = stage
    after = [x for x in consumer_body(s) if x is not g]  # the gemm comes first
    uses_acc = any(g.c.buffer in tir_walk.buffers(x) for x in after)
    record = instruction_named(ctx.target, g.instruction)
    code = _wgmma_gemm(ctx, g, record, in_flight=0 if uses_acc else 1)
    for buf in (g.a.buffer, g.b.buffer):
        del ctx.state.stage_of[buf]
    body.append(T.Scope(source_comment(g), tuple(code), g.span, T.SharedAccess(proxy_reads=True)))
    for x in after:
        body += lower(ctx, x)
    at, total = run.at, run.total
    body.append(_release(ctx, ring, tir.BinOp(">", at, int_(0), DType.bool), _minus_one(add(consumed, at)), pair))
    acc = g.c.buffer
    hold = _hold(ctx.name(acc), ctx.layouts.buffers[acc].local_size, acc.dtype)
    last = _release(ctx, ring, tir.BinOp(">", total, int_(0), DType.bool), _minus_one(add(consumed, total)), pair)
    loop = T.Loop(T.Sym(ring.it.name, I32), int_(0), ring.count, 1, False, _iteration(ctx, ring, run, body))
    return consumed_decl, [
        T.Comment(f"{_first_line(s)} (consumers: wgmma)"),
        T.Comment(f"warp roles: a producer warp group fills a ring of {ring.stages} stages by bulk copies"),
        T.Scope(
            "",
            (*run.head, loop, _call("tilec_wgmma_wait<0>"), hold, last, consumed_step),
            s.span,
            T.SharedAccess(proxy_reads=True),
        ),
    ]


def _consumers_of_products(
    ctx: LowerContext, s: tir.For, ring: _Ring, copies: list[tir.Copy], lower: StmtLowering
) -> tuple[T.Decl, list[T.Stmt]]:
    """The consumers of a loop of several products (plan_pipeline's products form: flash
    attention's Q K^T, softmax, P V): per iteration, wait for the stage to be full, run the body
    as written on that stage's tiles (each gemm's wgmmas waited for before the next statement),
    then release the stage, which nothing reads any more."""
    run = _run(ctx, ring)
    consumed, consumed_decl, consumed_step = _counter(ctx, run, "consumed")
    stage, body = _wait_full(ctx, ring, add(consumed, run.at))
    for c in copies:
        ctx.state.stage_of[c.dst.buffer] = stage
    for x in consumer_body(s):
        body += lower(ctx, x)
    for c in copies:
        del ctx.state.stage_of[c.dst.buffer]
    body.append(_release(ctx, ring, tir.BoolImm(True), add(consumed, run.at)))
    # the ring's tiles are ordered by its barriers: barrier placement sees the body's other
    # accesses only (Q's tile read by every product, a tile of P written for the next one)
    ring_tiles = frozenset(ctx.name(c.dst.buffer) for c in copies)
    iteration = _without(_iteration(ctx, ring, run, body), ring_tiles)
    loop = T.Loop(T.Sym(ring.it.name, I32), int_(0), ring.count, 1, False, iteration)
    return consumed_decl, [
        T.Comment(f"{_first_line(s)} (consumers: wgmma)"),
        T.Comment(f"warp roles: a producer warp group fills a ring of {ring.stages} stages by bulk copies"),
        *run.head,
        loop,
        consumed_step,
    ]


def _consumers_overlapped(
    ctx: LowerContext, s: tir.For, parts: list[tuple[_Ring, list[tir.Copy]]], plan: Overlap, lower: StmtLowering
) -> tuple[T.Decl, list[T.Stmt]]:
    """The consumers of a products-form loop whose products overlap (plan_pipeline.overlap), the
    first product's tiles (K) in one ring, the second's (V) in another:

        iteration 0:  head; wait K full; S = Q K^T; wait<0>; free K; early; late
        k = 1 ..:     head; wait K full; issue S = Q K^T (k)
                      wait V full (k - 1); issue O += P V (k - 1)
                      wait<1>: S is final; free K (k); early (the softmax, beside P V)
                      wait<0>: O is final; free V (k - 1); late (O's rescale, P for k)
        the last:     wait V full; O += P V; wait<0>; free V

    A run of no iterations does nothing."""
    (first_ring, first_copies), (second_ring, second_copies) = parts
    run = _run(ctx, first_ring)
    consumed, consumed_decl, consumed_step = _counter(ctx, run, "consumed")
    it, count = first_ring.it, first_ring.count
    ring_tiles = frozenset(ctx.name(c.dst.buffer) for c in first_copies + second_copies)
    s_acc, o_acc, p_regs = plan.first.c.buffer, plan.second.c.buffer, plan.second.a.buffer

    turns = _turns(ctx, plan)

    def products(*issued: tuple[tir.Gemm, _Ring, list[tir.Copy], tir.Expr]) -> list[T.Stmt]:
        """Wait for each ring's stage at its position, then (in this group's turn) issue each
        gemm on its tiles, with no wait for them."""
        waits: list[T.Stmt] = []
        scopes: list[T.Scope] = []
        for g, ring, copies, position in issued:
            stage, code = _wait_full(ctx, ring, position)
            waits += code
            for c in copies:
                ctx.state.stage_of[c.dst.buffer] = stage
            record = instruction_named(ctx.target, g.instruction)
            issue = _wgmma_gemm(ctx, g, record, in_flight=None)
            for c in copies:
                del ctx.state.stage_of[c.dst.buffer]
            reads, writes = shared_reads_writes(g)
            access = T.SharedAccess(
                reads=shared_names(ctx, reads), writes=shared_names(ctx, writes), scratch=True, proxy_reads=True
            )
            scopes.append(T.Scope(source_comment(g), tuple(issue), g.span, access))
        if turns is not None:  # inside the scopes: barrier placement puts its barriers before them, never inside
            scopes[0] = replace(scopes[0], body=(turns.wait, *scopes[0].body))
            scopes[-1] = replace(scopes[-1], body=(*scopes[-1].body, turns.hand_over))
        return [*waits, *scopes]

    def held(*bufs: tir.Buffer) -> list[T.Stmt]:
        return [
            _hold_a(ctx, b) if b is p_regs else _hold(ctx.name(b), ctx.layouts.buffers[b].local_size, b.dtype)
            for b in bufs
        ]

    def work(stmts: tuple[tir.Stmt, ...]) -> list[T.Stmt]:
        return [x for stmt in stmts for x in lower(ctx, stmt)]

    at = add(consumed, it)
    # iteration 0, k at its first value
    in_loop = ctx.state.cvars[s.var]
    ctx.state.cvars[s.var] = simplify(substitute(in_loop, {it: int_(0)}))
    first = [*work(plan.head), *products((plan.first, first_ring, first_copies, consumed))]
    first += [_call("tilec_wgmma_wait<0>"), *held(s_acc)]
    first += [_release(ctx, first_ring, tir.BoolImm(True), consumed), *work(plan.early), *work(plan.late)]
    ctx.state.cvars[s.var] = in_loop
    body = [*work(plan.head)]
    body += products(
        (plan.first, first_ring, first_copies, at), (plan.second, second_ring, second_copies, _minus_one(at))
    )
    body += [_call("tilec_wgmma_wait<1>"), *held(s_acc), _release(ctx, first_ring, tir.BoolImm(True), at)]
    body += [T.Comment("the softmax of iteration k runs beside the P V product of k - 1"), *work(plan.early)]
    body += [_call("tilec_wgmma_wait<0>"), *held(o_acc, p_regs)]
    body += [_release(ctx, second_ring, tir.BoolImm(True), _minus_one(at)), *work(plan.late)]
    last_at = _minus_one(add(consumed, count))
    last = [*products((plan.second, second_ring, second_copies, last_at)), _call("tilec_wgmma_wait<0>")]
    last += [*held(o_acc), _release(ctx, second_ring, tir.BoolImm(True), last_at)]
    loop = T.Loop(T.Sym(it.name, I32), int_(1), count, 1, False, _without(tuple(body), ring_tiles))
    some = tir.BinOp(">", count, int_(0), DType.bool)
    return consumed_decl, [
        T.Comment(f"{_first_line(s)} (consumers: wgmma)"),
        T.Comment(
            f"warp roles: a producer warp group fills two rings of {first_ring.stages} stages by bulk copies, "
            "one for each product's tiles; each iteration issues its first product before the previous "
            "iteration's second"
        ),
        *((turns.before,) if turns else ()),
        T.IfThen(some, _without(tuple(first), ring_tiles)),
        loop,
        T.IfThen(some, _without(tuple(last), ring_tiles)),
        *((turns.after,) if turns else ()),
        consumed_step,
    ]


@dataclass(frozen=True)
class _Turns:
    """Ping-pong of two consumer warp groups: each issues its wgmmas only in its turn (hardware
    barrier 2 + its group, completed by the other group's arrivals) and hands the turn over once
    they are issued, so that one group's products run on the tensor cores while the other works on
    its scores. Group 1 gives group 0 the first turn (`before`); group 0 takes the turn group 1
    hands over after its last products (`after`): every arrival on a barrier meets a wait, tile
    after tile, since both groups take one turn per issue point of the same loop. (compute-sanitizer's
    racecheck reports hazards across such turns, also in a 30-line kernel that has none:
    bench/racecheck_pingpong.cu; synccheck and memcheck report nothing.)"""

    wait: T.Stmt  # for this group's turn, before its wgmmas
    hand_over: T.Stmt  # the turn to the other group, once they are issued
    before: T.Stmt  # the run's first turn to group 0
    after: T.Stmt  # group 0 takes the turn group 1 handed over last


def _turns(ctx: LowerContext, plan: Overlap) -> _Turns | None:
    """The turns of an overlapped products loop (`_consumers_overlapped`) run by exactly two
    consumer warp groups, each owning its own rows of both products (wgmma_accumulator's group
    parts: none along the columns, two along the rows); None otherwise."""
    if ctx.kernel.threads != 2 * WARP_GROUP:
        return None
    for g in (plan.first, plan.second):
        frag = ctx.layouts.buffers[g.c.buffer]
        if frag.thread_parts[3].extent != 1 or frag.thread_parts[4].extent != 2:
            return None
    group = simplify(tir.BinOp("//", ctx.tx, int_(WARP_GROUP), I32))
    group0, group1 = (tir.BinOp("==", group, int_(g), DType.bool) for g in (0, 1))

    def on(kind: T.BarrierKind, group: int) -> T.Barrier:  # barrier 2 + group: constant ids for ptxas
        return T.Barrier(kind, (int_(2 + group), int_(2 * WARP_GROUP)))

    return _Turns(
        wait=T.IfThen(group0, (on("named", 0),), (on("named", 1),)),
        hand_over=T.IfThen(group0, (on("named_arrive", 1),), (on("named_arrive", 0),)),
        before=T.IfThen(group1, (on("named_arrive", 0),)),
        after=T.IfThen(group0, (on("named", 0),)),
    )


def _without(body: tuple[T.Stmt, ...], tiles: frozenset[str]) -> tuple[T.Stmt, ...]:
    """`body` with `tiles` left out of its tile ops' recorded accesses."""
    out: list[T.Stmt] = []
    for x in body:
        match x:
            case T.Scope(access=a):
                kept = replace(a, reads=a.reads - tiles, writes=a.writes - tiles)
                out.append(replace(x, access=kept, body=_without(x.body, tiles)))
            case T.Loop() | T.While():
                out.append(replace(x, body=_without(x.body, tiles)))
            case T.IfThen():
                out.append(replace(x, then=_without(x.then, tiles), orelse=_without(x.orelse, tiles)))
            case _:
                out.append(x)
    return tuple(out)


def _release(ctx: LowerContext, ring: _Ring, cond: tir.Expr, position: tir.Expr, pair: _Pair | None = None) -> T.IfThen:
    """Lane 0 of each consumer warp frees the stage of ring position `position`, when `cond`; in a
    cluster (`pair`), in both blocks' empty barriers (the other block's producer fills it too)."""
    lane0 = tir.BinOp("==", simplify(tir.BinOp("%", ctx.tx, int_(ctx.target.warp_size), I32)), int_(0), DType.bool)
    at = tir.BinOp("%", position, int_(ring.stages), I32)
    when = lane0 if cond == tir.BoolImm(True) else tir.BinOp("and", cond, lane0, DType.bool)
    free: list[T.Stmt] = [T.Barrier("mbarrier_arrive", (_bar(ring.empty, at),))]
    if pair is not None:
        other = tir.BinOp("^", pair.rank, int_(1), I32)
        free.append(T.Call(T.Intrin("tilec_mbarrier_arrive_remote", (T.AddressOf(_bar(ring.empty, at)), other), I32)))
    return T.IfThen(when, tuple(free))


def consumer_registers(groups: int, blocks: int, producer: int = PRODUCER_REGISTERS) -> int:
    """Registers per consumer thread of a block of `groups` consumer warp groups and a producer one,
    `blocks` such blocks on a multiprocessor: the file's share left by the producer's `producer`,
    a multiple of 8 (setmaxnreg's unit), at most 240."""
    share = REGISTER_FILE // blocks - WARP_GROUP * producer
    return min(240, share // (WARP_GROUP * groups) // 8 * 8)


def _register_moves(groups: int, blocks: int, producer: int) -> tuple[T.Stmt, T.Stmt]:
    """setmaxnreg of the producer warp group (down to `producer`) and of the consumers (up to their
    share)."""
    dec = _call(f"tilec_setmaxnreg_dec<{producer}>")
    return dec, _call(f"tilec_setmaxnreg_inc<{consumer_registers(groups, blocks, producer)}>")


def bulk_store(ctx: LowerContext, s: tir.Copy) -> list[T.Stmt] | None:
    """A fragment's tile stored to global memory in a kernel with warp roles, through a staging
    tile in shared memory and bulk tensor stores (TMA), which drain while the block's threads go
    on to the next tile; None (plain stores) unless `_bulk_storable`:

        if (tx == 0) tilec_bulk_wait_read<0>();   // the last tile's stores have read the stage
        <barrier>
        C_stage[...] = acc[...];                   // the copy, into the stage's swizzle
        <proxy fence, barrier>
        if (tx == 0) { tilec_tma_store_2d(...) per column block; tilec_bulk_commit(); }

    A tile of an even number of swizzle-wide column blocks, more than two, is stored a block at a
    time through a stage of two (`_chunked_store`, layout.staged_columns), which leaves its shared
    memory to the main loop's ring (plan_pipeline.ring_depth counts on the same staging). The
    stores clip to the tensor, so ragged tiles need no checks; the consumers' last thread waits
    for its stores before the block exits."""
    roles = ctx.state.roles
    if roles is None or not _bulk_storable(ctx, s):
        return None
    dst = s.dst.buffer
    frag = ctx.layouts.buffers[s.src.buffer]
    rows, cols = frag.shape
    sw = widest_swizzle(cols * dst.dtype.bytes)
    assert sw is not None, "_bulk_storable: the tile's rows fit a swizzle"
    width = sw // dst.dtype.bytes
    staged, chunks = L.staged_columns(frag, dst.dtype.bytes)
    stage = tir.Buffer(f"{dst.name}_stage", (int_(rows), int_(staged)), dst.dtype, "shared", s.span)
    place_descriptor_operand(stage, ctx.layouts)
    shared_view(ctx, ctx.name(stage), dst.dtype, (rows * staged,), ctx.layouts.align[stage])
    if shared_bytes(ctx.state.views) > ctx.target.smem_limit:
        ctx.state.views.pop()
        return None
    tname = ctx.name(dst)
    ctx.state.written.add(tname)
    mname = ctx.fresh(f"{tname}_map")
    y0, x0 = (simplify(value_of(ctx, e, None)) for e in s.dst.starts)
    first = tir.BinOp("==", ctx.tx, int_(0), DType.bool)
    inner, outer = (simplify(value_of(ctx, d, None)) for d in (dst.shape[1], dst.shape[0]))
    tmap = T.TensorMap(mname, tname, dst.dtype, inner, outer, (width, rows), sw, pitches=_pitches(ctx, dst))
    ctx.state.helpers |= {"bulk_store"}
    ctx.state.roles = replace(
        roles,
        params=(*roles.params, T.Param(mname, DType.uint8, tensor_map=True)),
        tensor_maps=(*roles.tensor_maps, tmap),
        consumer_exit=(*roles.consumer_exit, T.IfThen(first, (_call("tilec_bulk_wait<0>"),))),
    )
    if chunks is not None:
        return _chunked_store(ctx, s, stage, chunks, width, (mname, x0, y0))
    whole = (int_(0), int_(0)), (int_(rows), int_(cols))
    write = lower_copy(ctx, tir.Copy(s.src, tir.Region(stage, *whole, s.span), span=s.span))
    issue: list[T.Stmt] = []
    for at, col in _column_blocks(ctx, stage)[2]:
        args = (T.Sym(mname, DType.uint8), at, simplify(add(x0, int_(col))), y0)
        issue.append(T.Call(T.Intrin("tilec_tma_store_2d", args, I32)))
    issue.append(_call("tilec_bulk_commit"))
    return [
        T.Comment("through shared memory and bulk tensor stores, which finish while the next tile runs"),
        T.IfThen(first, (_call("tilec_bulk_wait_read<0>"),)),
        BLOCK,
        *write,
        FENCE_PROXY_ASYNC,  # the stage's ordinary writes, before the bulk stores read it
        BLOCK,
        T.IfThen(first, tuple(issue)),
    ]


def _chunked_store(
    ctx: LowerContext,
    s: tir.Copy,
    stage: tir.Buffer,
    chunks: L.Fragment,
    width: int,
    target: tuple[str, tir.Expr, tir.Expr],
) -> list[T.Stmt]:
    """The fragment's column blocks in turn, each through one half of a two-block stage (block
    c through half c % 2), each half stored by TMA once written; before a half is written again,
    the store that last read it must have (at most one store group, the other half's, pending):

        for (int c = 0; c < blocks; ++c) {
          if (tx == 0) tilec_bulk_wait_read<1>();
          <barrier>; C_stage[..., c % 2 * width + ...] = acc[...]; <proxy fence, barrier>
          if (tx == 0) { tilec_tma_store_2d(C_map, &C_stage half c % 2, x0 + c * width, y0); commit }
        }

    `chunks` is the fragment's layout with its first register digit stepping whole column
    blocks (layout.column_blocks): the element loop over it, outermost, is the loop over c."""
    mname, x0, y0 = target
    i, j = index_vars(2)
    body = (tir.Store(stage, (i, j), tir.Load(s.src.buffer, (i, j)), s.span),)
    ctx.state.wrapped_blocks[stage] = 2  # column block c of the tile lands in half c % 2
    nest = distributed(ctx, chunks, (i, j), body)
    del ctx.state.wrapped_blocks[stage]
    assert len(nest) == 1 and isinstance(nest[0], T.Loop), "the outermost digit of column_blocks is a loop"
    loop = nest[0]
    c = next(v for v in ctx.state.bounds if isinstance(v, tir.Var) and v.name == loop.var.name)
    half = simplify(tir.BinOp("*", tir.BinOp("%", c, int_(2), I32), int_(width), I32))
    at = ref_of(ctx, stage, (int_(0), half), None)
    x = simplify(add(x0, tir.BinOp("*", c, int_(width), I32)))
    store = T.Call(T.Intrin("tilec_tma_store_2d", (T.Sym(mname, DType.uint8), T.AddressOf(at.ref), x, y0), I32))
    first = tir.BinOp("==", ctx.tx, int_(0), DType.bool)
    chunk = (
        T.IfThen(first, (_call("tilec_bulk_wait_read<1>"),)),  # the store that read this half two blocks ago
        BLOCK,
        *loop.body,
        FENCE_PROXY_ASYNC,
        BLOCK,
        T.IfThen(first, (store, _call("tilec_bulk_commit"))),
    )
    return [
        T.Comment("through shared memory and bulk tensor stores, a column block at a time through two halves"),
        T.Comment("of a stage; the stores finish while the next block is written and the next tile runs"),
        replace(loop, body=chunk),
    ]


def _bulk_storable(ctx: LowerContext, s: tir.Copy) -> bool:
    """A copy of a whole fragment to a 2-D tile of a 2-D tensor whose last stride is 1, at the top
    of the kernel body (every consumer thread runs it), whose rows fit a swizzle and a tensor-map box."""
    src, dst = s.src.buffer, s.dst.buffer
    if src.scope != "fragment" or dst.scope != "global" or len(dst.shape) != 2 or not tir.unit_innermost(dst):
        return False
    if not any(s is t for t in ctx.kernel.body) or dst.dtype.bytes not in (1, 2, 4):
        return False
    shape = ctx.layouts.buffers[src].shape
    if len(shape) != 2 or tuple(const(e) for e in s.dst.extents) != shape or shape[0] > 256:
        return False
    sw = widest_swizzle(shape[1] * dst.dtype.bytes)
    return sw is not None and shape[1] % (sw // dst.dtype.bytes) == 0


def _column_blocks(ctx: LowerContext, tile: tir.Buffer) -> tuple[int, int, list[tuple[T.AddressOf, int]]]:
    """A swizzled shared tile (a descriptor operand's layout) as bulk copies see it: its swizzle
    in bytes, the width of one swizzle-wide column block in elements, and each block's first
    element (its address, in the current stage) and column: one TMA box each."""
    cols = tile.const_shape[1]
    sw = widest_swizzle(cols * tile.dtype.bytes)
    assert sw is not None, "a bulk-copied tile is stored in a swizzle"
    width = sw // tile.dtype.bytes
    blocks = [
        (T.AddressOf(ref_of(ctx, tile, (int_(0), int_(j * width)), None).ref), j * width) for j in range(cols // width)
    ]
    return sw, width, blocks


def _minus_one(e: tir.Expr) -> tir.Expr:
    return tir.BinOp("-", e, int_(1), I32)


def _first_line(s: tir.Stmt) -> str:
    """`file.tile:12: for k in Pipelined(...):`, the first line of a loop or `if`."""
    return f"{source_line(s)}: {s.span.text.splitlines()[0].strip() if s.span.text else 'Pipelined loop'}"


def _bar(name: str, index: tir.Expr) -> T.Subscript:
    return T.Subscript(name, (index,), DType.uint64)


def _hold(cname: str, size: int, dtype: DType) -> T.Call:
    """Keeps the `size` accumulator registers of `cname` (float32, or int32) in place across a wait."""
    return _per_register("tilec_wgmma_hold", cname, size, dtype)


def _per_register(helper: str, cname: str, size: int, dtype: DType) -> T.Call:
    """`helper<size>(&cname[0])` over an accumulator's registers (its `_s32` form for int32)."""
    name = f"{helper}_s32" if dtype.is_int else helper
    return T.Call(T.Intrin(f"{name}<{size}>", (T.AddressOf(T.Subscript(cname, (int_(0),), dtype)),), I32))


def _bulk_copy(
    ctx: LowerContext, c: tir.Copy, stage: tir.Expr, bar: T.Subscript, rank: tir.Var | None = None
) -> tuple[list[T.Stmt], T.TensorMap]:
    """A producer copy as TMA boxes, one per swizzle-wide column block of its tile (the layout
    layout inference gave it), and the tensor map they read. A tensor of more dimensions is read
    as a batch of matrices (plan_pipeline.box_row_dim): a 3-D map, boxes one deep in the batch.
    A tile a cluster of two shares (`rank`: the block's in the cluster) is loaded half by each
    block, every other box from its rank's, each box written into both blocks (`_multicast`)."""
    src, dst = c.src.buffer, c.dst.buffer
    r = box_row_dim(c)
    assert r is not None, "plan_pipeline gives warp roles only to copies a tensor map serves"
    batched = r > 0
    rows = dst.const_shape[0]
    tname = ctx.name(src)
    mname = ctx.fresh(f"{tname}_map")
    inner = _extent(ctx, src.shape[r + 1 :])
    outer = simplify(value_of(ctx, src.shape[r], None))
    batch = _extent(ctx, src.shape[:r]) if batched else None
    z0 = _folded(ctx, c.src.starts[:r], src.shape[:r], batch) if batch is not None else None
    y0 = simplify(value_of(ctx, c.src.starts[r], None))
    x0 = _folded(ctx, c.src.starts[r + 1 :], src.shape[r + 1 :], inner)
    if batched:
        ctx.state.helpers.add("bulk_copy_3d")
    ctx.state.stage_of[dst] = stage
    sw, width, blocks = _column_blocks(ctx, dst)
    if rank is not None:  # (a 2-D tile of a 2-D tensor: plan_pipeline.cluster_pairs)
        out, box = _multicast(ctx, dst, width, (T.Sym(mname, DType.uint8), T.AddressOf(bar)), (x0, y0), rank)
    else:
        out, box = [], (width, rows)
        for at, col in blocks:
            args = (at, T.Sym(mname, DType.uint8), T.AddressOf(bar), simplify(add(x0, int_(col))), y0)
            load = "tilec_tma_load_3d" if batched else "tilec_tma_load_2d"
            out.append(T.Call(T.Intrin(load, (*args, z0) if z0 is not None else args, I32)))
    del ctx.state.stage_of[dst]
    return out, T.TensorMap(mname, tname, src.dtype, inner, outer, box, sw, batch, _pitches(ctx, src))


def _multicast(
    ctx: LowerContext,
    tile: tir.Buffer,
    width: int,
    map_bar: tuple[T.Sym, T.AddressOf],
    at: tuple[tir.Expr, tir.Expr],
    rank: tir.Var,
) -> tuple[list[T.Stmt], tuple[int, int]]:
    """The boxes of a shared tile (plan_pipeline.pair_shared) that the block of cluster rank
    `rank` loads, each into both blocks' shared memory at the same place, completing on both
    blocks' barriers at the same place (tile corner `at`, x the columns), and the box's shape:
    column blocks rank, rank + 2, ... of the tile (`width` columns each); of a tile of one column
    block, the half of its rows of the rank (a box half as tall, starting on a multiple of the
    swizzle's 8-row atom)."""
    rows, cols = tile.const_shape
    x0, y0 = at
    if cols == width:  # plan_pipeline.pair_split: rows / 2 a multiple of 8
        row = simplify(tir.BinOp("*", rank, int_(rows // 2), I32))
        half = T.AddressOf(ref_of(ctx, tile, (row, int_(0)), None).ref)
        args = (half, *map_bar, x0, simplify(add(y0, row)), int_(0b11))
        return [T.Call(T.Intrin("tilec_tma_load_2d_multicast", args, I32))], (width, rows // 2)
    boxes: list[T.Stmt] = []
    for i in range(cols // width // 2):
        col = simplify(tir.BinOp("*", add(tir.BinOp("*", int_(2), int_(i), I32), rank), int_(width), I32))
        box = T.AddressOf(ref_of(ctx, tile, (int_(0), col), None).ref)
        args = (box, *map_bar, simplify(add(x0, col)), y0, int_(0b11))
        boxes.append(T.Call(T.Intrin("tilec_tma_load_2d_multicast", args, I32)))
    return boxes, (width, rows)


def _folded(ctx: LowerContext, starts: tuple[tir.Expr, ...], dims: tuple[tir.Expr, ...], extent: tir.Expr) -> tir.Expr:
    """The coordinate of `starts` in dimensions `dims` folded into one of `extent`. An index of
    any dimension but the first that may lie outside its own would land on a neighbour's
    elements (K[b, h, ...] with h == H reads K[b + 1, 0]) where the language reads zeros: the
    coordinate is then `extent` unless all are inside, a box wholly outside the map, which the
    hardware fills with zeros (its bytes still count toward the stage's transaction)."""
    idx = tuple(simplify(value_of(ctx, e, None)) for e in starts)
    shape = tuple(simplify(value_of(ctx, d, None)) for d in dims)
    flat = flatten(idx, shape)
    conds = in_dimension(ctx, idx[1:], shape[1:])
    return tir.Select(all_of(conds), flat, extent, I32) if conds else flat


def _extent(ctx: LowerContext, dims: tuple[tir.Expr, ...]) -> tir.Expr:
    """The extent of dimensions `dims` folded into one."""
    total: tir.Expr = int_(1)
    for dim in dims:
        total = tir.BinOp("*", total, value_of(ctx, dim, None), I32)
    return simplify(total)


def _pitches(ctx: LowerContext, tensor: tir.Buffer) -> tuple[tir.Expr, ...]:
    """A tensor map's pitches, in elements, inner first (rows, then matrices), for a tensor declared
    with strides (plan_pipeline and _bulk_storable checked its last stride is 1); () for a row-major
    one. Names the helpers that build such maps."""
    if tensor.strides is None:
        return ()
    ctx.state.helpers.add("bulk_copy_strided")
    if len(tensor.shape) == 3:
        ctx.state.helpers.add("bulk_copy_strided_3d")
    return tuple(simplify(value_of(ctx, s, None)) for s in reversed(tensor.strides[:-1]))
