"""Lowering of each tile op: copy, fill and atomic_add build an element body and
run it as a distributed loop; gemm (SIMT FMA over the accumulator micro-tile),
reduce (in-thread, warp shuffles, then shared memory across warps) and cumsum
(a thread per line) are lowered directly. A gemm whose instruction record
(passes/select.py) runs on a warp or more goes to the target's backend module
(`ctx.backend`: backends/cuda/sm80.py for the CUDA targets). kernel.lower_stmt calls
each `lower_<op>(ctx, s)` and wraps its code in the op's Scope."""

from __future__ import annotations

import math
from dataclasses import replace

from tilec import layout as L
from tilec import thread_ir as T
from tilec import tir, tir_walk
from tilec.diagnostics import error
from tilec.dtypes import DType
from tilec.lower.cexpr import (
    I32,
    add,
    all_of,
    at_least_zero,
    cast,
    compute_dtype,
    conjuncts,
    const_int,
    counter_var,
    guarded,
    index_vars,
    lt,
    mul,
    printf,
    symv,
    zero,
)
from tilec.lower.context import LowerContext, kernel_flag, shared_view
from tilec.lower.exprs import at_most, nonnegative, value_of
from tilec.lower.loops import aligned, atomic, distributed, replica_zero
from tilec.lower.owners import Owners, owner_map, parallel_indices
from tilec.passes.infer_layouts import place_descriptor_operand
from tilec.simplify import int_, simplify
from tilec.sync import BLOCK
from tilec.targets import instruction_named
from tilec.uniformity import per_thread


def lower_parallel(ctx: LowerContext, s: tir.Parallel) -> list[T.Stmt]:
    layout = s.layout
    assert layout is not None, "infer_layouts placed every Parallel loop"
    for buf in _shared_buffers(s.body):
        if _ownable(ctx, buf):
            indices = parallel_indices(s.body, buf)
            _own(ctx, buf, None if indices is None else owner_map(layout, s.vars, tuple(indices)))
    return distributed(ctx, layout, s.vars, s.body)


def _shared_buffers(body: tuple[tir.Stmt, ...]) -> list[tir.Buffer]:
    found: dict[tir.Buffer, None] = {}
    for t in tir_walk.stmts(body):
        if isinstance(t, tir.Store) and t.buffer.scope == "shared":
            found[t.buffer] = None
        for e in tir_walk.stmt_exprs(t):
            found |= {x.buffer: None for x in tir_walk.loads(e) if x.buffer.scope == "shared"}
    return list(found)


def _ownable(ctx: LowerContext, buf: tir.Buffer) -> bool:
    """A shared tile whose owner maps barrier placement uses: one copy (not a pipeline's stages)."""
    return buf.scope == "shared" and buf not in ctx.state.staged


def _own(ctx: LowerContext, buf: tir.Buffer, owners: Owners | None) -> None:
    """Record the op's owner map of shared tile `buf` for as_scope (none: every thread may touch any element)."""
    if owners is not None:
        ctx.state.owned[ctx.name(buf)] = owners


def _tile_domain(ctx: LowerContext, regions: list[tir.Region]) -> tuple[tuple[tir.Var, ...], tuple[int, ...]]:
    """Loop variables and shape of the element loop of a tile op over `regions`
    (in order of preference): a fragment's whole shape, else the first
    region's extents with unit dims squeezed out."""
    for r in regions:
        if r.buffer.scope == "fragment":
            shape = ctx.layouts.buffers[r.buffer].shape
            return index_vars(len(shape)), shape
    for r in regions:
        shape = tuple(n for n in map(const_int, r.extents) if n != 1)
        if shape:
            return index_vars(len(shape)), shape
    return index_vars(1), (1,)


def _region_index(region: tir.Region, vars: tuple[tir.Var, ...], shape: tuple[int, ...]) -> tuple[tir.Expr, ...]:
    """Buffer index of element `vars` of a loop over `shape`: the region's
    non-unit dims take the loop's non-unit dims in order (unit dims of
    either side are squeezed away, as operand shapes are compared)."""
    loop_dims = [vars[d] for d, n in enumerate(shape) if n != 1]
    out = []
    for start, ext in zip(region.starts, region.extents):
        if const_int(ext) == 1 or not loop_dims:
            out.append(start)
        else:
            out.append(simplify(tir.BinOp("+", start, loop_dims.pop(0), I32)))
    return tuple(out)


def _tile_layout(ctx: LowerContext, regions: list[tir.Region], shape: tuple[int, ...]) -> L.Fragment:
    for r in regions:
        if r.buffer.scope == "fragment":
            frag = ctx.layouts.buffers[r.buffer]
            if frag.shape != shape:
                raise error(r.span, f"a tile op on fragment '{r.buffer.name}' must cover the whole fragment")
            return frag
    if any(r.buffer.scope in ("local", "var") for r in regions):
        return L.replicated_all(
            shape,
            ctx.kernel.threads,
            vec_width(shape[-1], regions),
        )
    return L.default(shape, ctx.kernel.threads, max(r.buffer.dtype.bytes for r in regions))


def lower_copy(ctx: LowerContext, s: tir.Copy) -> list[T.Stmt]:
    """The copy's code; a guarded one (plan_pipeline: a producer from the top of an `if`) under
    `if (guard)`, whose condition, when it loads nothing, its bounds checks may assume."""
    if s.guard is None:
        return _unguarded_copy(ctx, s)
    cond = value_of(ctx, s.guard, None)
    outer = ctx.state.assumed
    if not tir_walk.loads(s.guard):
        ctx.state.assumed = [*outer, *conjuncts(cond)]
    code = _unguarded_copy(ctx, replace(s, guard=None))
    ctx.state.assumed = outer
    return guarded(cond, code)


def _unguarded_copy(ctx: LowerContext, s: tir.Copy) -> list[T.Stmt]:
    s = _widened_to_pitch(ctx, s)
    vars, shape = _tile_domain(ctx, [s.dst, s.src])
    layout = _tile_layout(ctx, [s.src, s.dst], shape)
    src_idx = _region_index(s.src, vars, shape)
    dst_idx = _region_index(s.dst, vars, shape)
    for region, idx in ((s.src, src_idx), (s.dst, dst_idx)):
        if _ownable(ctx, region.buffer):
            _own(ctx, region.buffer, owner_map(layout, vars, (idx,)))
    body = (tir.Store(s.dst.buffer, dst_idx, tir.Load(s.src.buffer, src_idx), s.span),)
    ctx.state.pad = None if s.pad is None else value_of(ctx, s.pad, None)
    general = distributed(ctx, layout, vars, body)
    ctx.state.pad = None
    interior = _interior_condition(ctx, s, layout)
    if interior is None:
        return general
    # Tiles wholly inside the tensor (all but the edges) skip every per-element check.
    tensor = s.src.buffer if s.src.buffer.scope == "global" else s.dst.buffer
    ctx.state.interior.add(tensor)
    fast = distributed(ctx, layout, vars, body)
    ctx.state.interior.discard(tensor)
    packed = _packed_path(ctx, s, layout, vars, body)
    if packed is not None:
        general = [T.IfThen(packed[0], tuple(packed[1]), tuple(general))]
    return [T.IfThen(interior, tuple(fast), tuple(general), edge=True)]


def _packed_path(
    ctx: LowerContext, s: tir.Copy, layout: L.Fragment, vars: tuple[tir.Var, ...], body: tuple[tir.Stmt, ...]
) -> tuple[tir.Expr, list[T.Stmt]] | None:
    """(condition, code) for a pipeline's global -> shared copy of a tile wholly inside a tensor
    whose rows are not on 16-byte boundaries (an odd row length: no asynchronous vector copy can
    read them): each thread reads its vector's elements one by one, with no bounds checks, and
    writes them to the tile as one vector; None for other copies, and on targets without
    `packed_copies`. The per-element path it spares checks and addresses every element (about 19
    instructions each for sm_90a's GEMM)."""
    if not (ctx.target.packed_copies and ctx.state.async_copy):
        return None
    if s.src.buffer.scope != "global" or s.dst.buffer.scope != "shared":
        return None
    conds = [cond for cond, _ in _tile_inside(ctx, s.src)]
    if not conds:
        return None  # the bounds are proven: the interior test is the alignment alone
    tensor = s.src.buffer
    ctx.state.interior.add(tensor)
    ctx.state.unaligned.add(tensor)
    ctx.state.async_copy = False
    code = distributed(ctx, layout, vars, body)
    ctx.state.async_copy = True
    ctx.state.unaligned.discard(tensor)
    ctx.state.interior.discard(tensor)
    return all_of(conds), code


def _widened_to_pitch(ctx: LowerContext, s: tir.Copy) -> tir.Copy:
    """A copy into a tile whose columns infer_layouts shifted to line up with the tensor's 16-byte
    chunks (`Layouts.shift`), widened to the tile's whole padded row: it starts `shift` columns
    earlier, so that it moves whole chunks; the extra elements land in the row's pad."""
    buf = s.dst.buffer
    shift = ctx.layouts.shift.get(buf)
    if shift is None or s.src.buffer.scope != "global":
        return s
    pitch = int_(ctx.layouts.pitch[buf])

    def widened(r: tir.Region) -> tir.Region:
        start = simplify(tir.BinOp("-", r.starts[-1], int_(shift), I32))
        return replace(r, starts=(*r.starts[:-1], start), extents=(*r.extents[:-1], pitch))

    return replace(s, src=widened(s.src), dst=widened(s.dst))


def _interior_condition(ctx: LowerContext, s: tir.Copy, layout: L.Fragment) -> tir.Expr | None:
    """`tile in bounds && tensor aligned` for a vectorized copy between a
    tensor and on-chip memory, or None when there is nothing to check."""
    sides = [r for r in (s.src, s.dst) if r.buffer.scope == "global"]
    last = layout.local_parts[-1] if layout.local_parts else None
    if len(sides) != 1 or last is None or last.stride != 1 or last.dim != len(layout.shape) - 1:
        return None
    region = sides[0]
    if not tir.unit_innermost(region.buffer):
        return None  # no vectors to align (loops._vec_access): per-element checks
    fixed: list[tir.Expr] = [aligned(ctx, region.buffer, last.extent)]  # the same all kernel long
    moving: list[tir.Expr] = []  # depends on loop counters or values computed in the body
    for cond, kernel_wide in _tile_inside(ctx, region):
        (fixed if kernel_wide else moving).append(cond)
    if len(fixed) == 1 and not moving:
        return None
    if not moving:
        return all_of(fixed)
    if len(fixed) == 1 or not ctx.state.async_copy:
        # only the alignment is kernel-wide (already a flag), or a synchronous copy: a hoisted
        # flag pays off in asynchronous-copy loops (a profile showed the recomputed test), while in a
        # row loop it held registers (RMSNorm at 256 threads: 108 instead of 64, 0.18 vs 0.13 ms)
        return all_of(fixed + moving)
    # `{tensor}_interior`: the tensor's alignment and the block-index part of "this tile is inside"
    interior = all_of(fixed)
    return all_of([kernel_flag(ctx, interior, f"{ctx.name(region.buffer)}_interior", interior), *moving])


def _tile_inside(ctx: LowerContext, region: tir.Region) -> list[tuple[tir.Expr, bool]]:
    """The unproven conditions of "the tile `region` names lies inside its tensor", dimension by
    dimension, each with whether it holds all kernel long (its start reads only block indices,
    dims and scalars) rather than depending on loop counters or values computed in the body."""
    out: list[tuple[tir.Expr, bool]] = []
    for start, ext, dim in zip(region.starts, region.extents, region.buffer.shape):
        kernel_wide = not tir_walk.loads(start) and all(
            v.kind in ("block", "dim", "scalar") for v in tir_walk.variables(start)
        )
        out += [(c, kernel_wide) for c in _tile_in_dimension(ctx, value_of(ctx, start, None), ext, dim)]
    return out


def _tile_in_dimension(ctx: LowerContext, start: tir.Expr, ext: tir.Expr, dim: tir.Expr) -> list[tir.Expr]:
    """`0 <= start` and `start + ext <= dim` for a tile's C start in one dimension of its tensor,
    less those proven."""
    start = simplify(start)
    end = simplify(add(start, ext))
    conds = [] if nonnegative(ctx, start) else [at_least_zero(start)]
    if not at_most(ctx, end, value_of(ctx, dim, None)):
        conds.append(tir.BinOp("<=", end, value_of(ctx, dim, None), DType.bool))
    return conds


def lower_fill(ctx: LowerContext, s: tir.Fill) -> list[T.Stmt]:
    vars, shape = _tile_domain(ctx, [s.dst])
    if s.dst.buffer.scope == "var":
        return [
            T.Assign(
                T.Subscript(ctx.name(s.dst.buffer), (), s.dst.buffer.dtype),
                cast(value_of(ctx, s.value, None), s.dst.buffer.dtype),
            )
        ]
    layout = _tile_layout(ctx, [s.dst], shape)
    body = (tir.Store(s.dst.buffer, _region_index(s.dst, vars, shape), s.value, s.span),)
    return distributed(ctx, layout, vars, body)


def lower_atomic_region(ctx: LowerContext, s: tir.Atomic) -> list[T.Stmt]:
    assert s.src is not None
    vars, shape = _tile_domain(ctx, [s.src])
    layout = _tile_layout(ctx, [s.src], shape)
    src_idx = _region_index(s.src, vars, shape)
    dst_idx = _region_index(s.dst, vars, shape)
    body = (
        tir.Atomic(
            tir.Region(s.dst.buffer, dst_idx, tuple(int_(1) for _ in dst_idx)),
            None,
            tir.Load(s.src.buffer, src_idx),
            s.span,
            s.op,
        ),
    )
    return distributed(ctx, layout, vars, body)  # vector atomic adds where the target has them


def lower_atomic_element(ctx: LowerContext, s: tir.Atomic) -> list[T.Stmt]:
    """An element atomic outside Parallel: one per thread when its element or value depends on
    the thread (`atomic_add(C_shared[tn], acc[0])`), else one for the block, by thread 0."""
    assert s.value is not None
    update = atomic(ctx, s.op, s.dst.buffer, s.dst.starts, s.value, None)
    if any(per_thread(e, ctx.thread_varying) for e in (*s.dst.starts, s.value)):
        return update
    return [T.IfThen(tir.BinOp("==", ctx.tx, int_(0), DType.bool), tuple(update))]


def lower_gemm(ctx: LowerContext, s: tir.Gemm) -> list[T.Stmt]:
    record = instruction_named(ctx.target, s.instruction)
    if record.group == "thread":
        return _gemm_simt(ctx, s)
    return ctx.backend.gemm(ctx, s, record)


def _gemm_simt(ctx: LowerContext, s: tir.Gemm) -> list[T.Stmt]:
    c = s.c.buffer
    frag = ctx.layouts.buffers[c]
    a_region, out = staged_operand(ctx, s)
    m, n = frag.shape if len(frag.shape) == 2 else (1, frag.shape[0])
    a_ext = [const_int(e) for e in a_region.extents if const_int(e) != 1] or [1]
    k_extent = a_ext[0] if s.transpose_a else a_ext[-1]
    coords = L.thread_coords(frag, ctx.tx)
    row0, col0 = L.tile_index(frag, coords, [0] * len(frag.local_parts))
    (lm, tm), (ln, tn) = _micro_tile(frag, 0), _micro_tile(frag, 1)
    acc_t = compute_dtype(c.dtype)
    cname = ctx.name(c)
    out += cleared_accumulator(ctx, s)
    kk = tir.Var(ctx.fresh("kk"), I32, "thread")
    ctx.state.bounds[kk] = k_extent - 1
    row_i = T.Sym(ctx.fresh("mi"), I32)
    col_i = T.Sym(ctx.fresh("ni"), I32)
    rv = counter_var(row_i, lm, ctx.state.bounds)
    cv = counter_var(col_i, ln, ctx.state.bounds)
    row = simplify(tir.BinOp("+", tir.BinOp("*", rv, int_(tm), I32), row0, I32))
    col = simplify(tir.BinOp("+", tir.BinOp("*", cv, int_(tn), I32), col0, I32))
    a_reg = ctx.fresh(f"{ctx.name(a_region.buffer)}_frag")
    b_reg = ctx.fresh(f"{ctx.name(s.b.buffer)}_frag")
    a_idx = (kk, row) if s.transpose_a else (row, kk)
    b_idx = (col, kk) if s.transpose_b else (kk, col)
    a_load = value_of(ctx, tir.Load(a_region.buffer, operand_index(a_region, a_idx)), None)
    b_load = value_of(ctx, tir.Load(s.b.buffer, operand_index(s.b, b_idx)), None)
    if frag.padded(0):
        a_load = tir.Select(lt(row, int_(m)), a_load, zero(a_load.dtype), a_load.dtype)
    if frag.padded(1):
        b_load = tir.Select(lt(col, int_(n)), b_load, zero(b_load.dtype), b_load.dtype)
    product = tir.BinOp("*", T.Subscript(a_reg, (rv,), acc_t), T.Subscript(b_reg, (cv,), acc_t), acc_t)  # type: ignore[arg-type]  # Thread IR leaf in a Tile IR expression
    fma = T.Assign(T.Subscript(cname, (simplify(add(mul(rv, ln), cv)),), c.dtype), product, "+=")
    inner: tuple[T.Stmt, ...] = (
        T.Decl(a_reg, acc_t, (lm,)),
        T.Loop(row_i, int_(0), int_(lm), 1, True, (T.Assign(T.Subscript(a_reg, (rv,), acc_t), cast(a_load, acc_t)),)),
        T.Decl(b_reg, acc_t, (ln,)),
        T.Loop(col_i, int_(0), int_(ln), 1, True, (T.Assign(T.Subscript(b_reg, (cv,), acc_t), cast(b_load, acc_t)),)),
        T.Loop(
            row_i,
            int_(0),
            int_(lm),
            1,
            True,
            (T.Loop(col_i, int_(0), int_(ln), 1, True, (fma,)),),
        ),
    )
    out.append(T.Loop(T.Sym(kk.name, I32), int_(0), int_(k_extent), 1, False, inner, unroll_factor=min(4, k_extent)))
    return out


def operand_index(region: tir.Region, idx2: tuple[tir.Expr, tir.Expr]) -> tuple[tir.Expr, ...]:
    """Buffer index of element (idx2[0], idx2[1]) of a 2-D gemm operand region:
    the two logical dims are the region's last two non-unit dims."""
    rank = len(region.extents)
    dims = [d for d, e in enumerate(region.extents) if const_int(e) != 1]
    if len(dims) < 2:
        dims = sorted(set(dims) | set(range(rank - (2 - len(dims)) - len(dims), rank)))[-2:]
    dims = dims[-2:]
    out = list(region.starts)
    for d, i in zip(dims, idx2):
        out[d] = simplify(tir.BinOp("+", region.starts[d], i, I32))
    return tuple(out)


def staged_operand(ctx: LowerContext, s: tir.Gemm, a_in_registers: bool = False) -> tuple[tir.Region, list[T.Stmt]]:
    """A's region for a gemm that reads its operands from shared memory, and the code that puts it
    there: a register tile A is written to a shared scratch tile first, unless the instruction
    takes A in registers. B is always in shared memory (shapes.py refuses a register B)."""
    if s.a.buffer.scope == "fragment" and not a_in_registers:
        return stage_fragment(ctx, s.a)
    return s.a, []


def cleared_accumulator(ctx: LowerContext, s: tir.Gemm) -> list[T.Stmt]:
    """`C = 0` over each thread's accumulator registers when the gemm clears it (clear_accum)."""
    if not s.clear_accum:
        return []
    c = s.c.buffer
    i = T.Sym(ctx.fresh("i"), I32)
    zero_c = (T.Assign(T.Subscript(ctx.name(c), (symv(i),), c.dtype), zero(c.dtype)),)
    return [T.Loop(i, int_(0), int_(ctx.layouts.buffers[c].local_size), 1, True, zero_c)]


def stage_fragment(ctx: LowerContext, region: tir.Region, descriptors: bool = False) -> tuple[tir.Region, list[T.Stmt]]:
    """Write a register operand to a shared scratch tile (the SIMT gemm reads
    operands from shared memory; so does wgmma, through `descriptors`, from the tile in their
    swizzle, when its A is not laid out as its register fragment); returns the scratch region
    and the code."""
    buf = region.buffer
    name = ctx.fresh(f"{ctx.name(buf)}_smem")
    scratch = tir.Buffer(name, buf.shape, buf.dtype, "shared", buf.span)
    ctx.state.names.given[scratch] = name
    if descriptors:
        place_descriptor_operand(scratch, ctx.layouts)
        shared_view(ctx, name, buf.dtype, (math.prod(buf.const_shape),), ctx.layouts.align[scratch])
    else:
        shared_view(ctx, name, buf.dtype, buf.const_shape)
    frag = ctx.layouts.buffers[buf]
    vars = index_vars(len(frag.shape))
    body = (tir.Store(scratch, vars, tir.Load(buf, vars)),)
    code = [BLOCK, *distributed(ctx, frag, vars, body), BLOCK]
    ctx.state.scratch_reads.add(name)  # read by the gemm after the barrier
    return tir.Region(
        scratch, tuple(int_(0) for _ in frag.shape), tuple(int_(x) for x in frag.shape), region.span
    ), code


def lower_reduce(ctx: LowerContext, s: tir.Reduce) -> list[T.Stmt]:
    """Fold the registers along `dim` in each thread, then across the
    threads sharing a row: warp shuffles, then shared memory across warps."""
    if s.kind in ("argmax", "argmin"):
        return lower_arg_reduce(ctx, s)
    src, dst = s.src.buffer, s.dst.buffer
    sf = ctx.layouts.buffers[src]
    df = ctx.layouts.buffers[dst]
    dim = s.dim
    acc_t = compute_dtype(src.dtype)
    if not L.same_placement(df, L.reduced(sf, dim)):
        raise error(
            s.span,
            f"'{dst.name}' is not laid out as a reduction of '{src.name}'",
            hint="use a fresh alloc_fragment for the result",
        )
    out: list[T.Stmt] = []
    coords = L.thread_coords(sf, ctx.tx)
    sname, dname = ctx.name(src), ctx.name(dst)
    kept = [k for k, p in enumerate(sf.local_parts) if p.dim != dim]
    padded = [d for d in range(len(sf.shape)) if sf.padded(d)]
    across = [(p.extent, sf.thread_stride(k)) for k, p in enumerate(sf.thread_parts) if p.dim == dim and p.extent > 1]
    by_dst: dict[tuple[int, ...], list[tuple[int, ...]]] = {}
    for digits in L.local_digits(sf):
        by_dst.setdefault(tuple(digits[k] for k in kept), []).append(digits)
    # each destination slot's fold in this thread; rows spanning warps meet in shared memory in
    # one round for several slots, so those slots are folded first, then combined together
    batches = [list(by_dst)] if _lane_plan(ctx, across)[1] else [[key] for key in by_dst]
    dslots = {key: n for n, key in enumerate(by_dst)}
    for batch in batches:
        accs = [ctx.fresh("red") for _ in batch]
        for acc, key in zip(accs, batch):
            out.append(T.Decl(acc, acc_t, (), init=identity(s.kind, acc_t)))
            for digits in by_dst[key]:
                reg = T.Subscript(sname, (L.slot(sf, digits),), src.dtype)
                x: tir.Expr = cast(reg, acc_t)  # type: ignore[arg-type]  # Thread IR leaf in a Tile IR expression
                if s.kind in ("abssum", "absmax"):
                    x = tir.Call("abs", (x,), acc_t)
                upd = T.Assign(T.Sym(acc, acc_t), combine(s.kind, tir.Var(acc, acc_t, "let"), x))
                idx = L.tile_index(sf, coords, digits)
                out += guarded(all_of([lt(idx[d], int_(sf.shape[d])) for d in padded]), [upd])
        out += _cross_thread(ctx, s.kind, accs, acc_t, across)
        for acc, key in zip(accs, batch):
            target = T.Subscript(dname, (int_(dslots[key]),), dst.dtype)
            val: tir.Expr = tir.Var(acc, acc_t, "let")
            if not s.clear:
                val = combine(s.kind, cast(target, acc_t), val)  # type: ignore[arg-type]  # Thread IR leaf in a Tile IR expression
            out.append(T.Assign(target, cast(val, dst.dtype)))
    return out


def _lane_plan(ctx: LowerContext, parts: list[tuple[int, int]]) -> tuple[list[int], list[tuple[int, int]]]:
    """How threads that differ only in `parts` ((extent, thread-id stride) each) combine: the xor
    shuffle masks inside a warp, in order, and the (extent, stride) factors left that span warps."""
    masks: list[int] = []
    outer: list[tuple[int, int]] = []
    for extent, stride in parts:
        inner = 1
        while inner < extent and stride * inner * 2 <= ctx.target.warp_size:
            inner *= 2
        mask = stride * inner // 2
        while mask >= stride and inner > 1:
            masks.append(mask)
            mask //= 2
        if extent // inner > 1:
            outer.append((extent // inner, stride * inner))
    return masks, outer


def _across_warps(ctx: LowerContext, outer: list[tuple[int, int]]) -> tuple[tir.Expr, list[int]]:
    """For factors spanning warps (`_lane_plan`): the scratch slot of this thread's first partner
    (its digits along `outer` zeroed) and the offsets from it of every partner, itself included."""
    base: tir.Expr = ctx.tx
    for extent, step in outer:
        digit = tir.BinOp("%", tir.BinOp("//", ctx.tx, int_(step), I32), int_(extent), I32)
        base = tir.BinOp("-", base, tir.BinOp("*", digit, int_(step), I32), I32)
    offsets = [0]
    for extent, step in outer:
        offsets = [o + c * step for o in offsets for c in range(extent)]
    return simplify(base), offsets


def _cross_thread(
    ctx: LowerContext, kind: str, accs: list[str], dtype: DType, parts: list[tuple[int, int]]
) -> list[T.Stmt]:
    """Combine each of `accs` over the threads that differ only in `parts` ((extent, thread-id
    stride) each): xor shuffles inside a warp, then rounds through shared memory for the factors
    that span warps, as many accumulators a round as fit the scratch's 8 bytes a thread (a
    fragment's two rows per thread: one pair of barriers, not two)."""
    masks, outer = _lane_plan(ctx, parts)
    out: list[T.Stmt] = []
    for acc in accs:
        accv = tir.Var(acc, dtype, "let")
        for mask in masks:
            other = T.Intrin("shfl_xor", (accv, int_(mask)), dtype)
            out.append(T.Assign(T.Sym(acc, dtype), combine(kind, accv, other)))  # type: ignore[arg-type]  # Thread IR leaf in a Tile IR expression
    if not outer:
        return out
    per_round = max(1, 8 // dtype.bytes)
    for first in range(0, len(accs), per_round):
        out += _across_warps_round(ctx, kind, accs[first : first + per_round], dtype, outer)
    return out


def _across_warps_round(
    ctx: LowerContext, kind: str, accs: list[str], dtype: DType, outer: list[tuple[int, int]]
) -> list[T.Stmt]:
    """One round through the reduction scratch: every thread writes its accumulators (the j-th in
    the scratch's j-th row of `threads` elements), then folds in its partners' across warps."""
    red = _red_scratch(ctx)
    threads = ctx.kernel.threads

    def scratch_at(j: int, i: tir.Expr) -> T.Subscript:
        return T.Subscript(red, (simplify(add(int_(j * threads), i)),), dtype, reinterpret=True)

    base, offsets = _across_warps(ctx, outer)
    out: list[T.Stmt] = [BLOCK]
    out += [T.Assign(scratch_at(j, ctx.tx), tir.Var(acc, dtype, "let")) for j, acc in enumerate(accs)]
    out.append(BLOCK)
    for j, acc in enumerate(accs):
        accv = tir.Var(acc, dtype, "let")
        out.append(T.Assign(T.Sym(acc, dtype), scratch_at(j, base)))
        if len(outer) == 1:
            extent, step = outer[0]
            k = T.Sym(ctx.fresh("k"), I32)
            kv = counter_var(k, extent, ctx.state.bounds)
            other_ref = scratch_at(j, simplify(add(base, mul(kv, step))))
            body = (T.Assign(T.Sym(acc, dtype), combine(kind, accv, other_ref)),)  # type: ignore[arg-type]  # Thread IR leaf in a Tile IR expression
            out.append(T.Loop(k, int_(1), int_(extent), 1, True, body))
            continue
        for off in offsets[1:]:
            other_ref = scratch_at(j, simplify(add(base, int_(off))))
            out.append(T.Assign(T.Sym(acc, dtype), combine(kind, accv, other_ref)))  # type: ignore[arg-type]  # Thread IR leaf in a Tile IR expression
    return out


def lower_arg_reduce(ctx: LowerContext, s: tir.Reduce) -> list[T.Stmt]:
    """reduce_argmax / reduce_argmin: lower_reduce's plan on (value, index) pairs. Each thread
    keeps the best value it has seen and its index along `dim`, then the pairs are combined
    across lanes (both shuffled) and warps (values, then indices, in the scratch row):

        best = -inf; at = INT_MAX;                     // per destination element
        if (x[0] > best || x[0] == best && 0 < at) { best = x[0]; at = 0; }   ... in-thread
        other = shfl_xor(best, 16); other_at = shfl_xor(at, 16);  if (better) take it  ...

    The first of equal values wins (the smallest index); NaNs are never taken, and a row of
    NaNs only gets index 0."""
    src, dst = s.src.buffer, s.dst.buffer
    sf, df = ctx.layouts.buffers[src], ctx.layouts.buffers[dst]
    if not L.same_placement(df, L.reduced(sf, s.dim)):
        raise error(
            s.span,
            f"'{dst.name}' is not laid out as a reduction of '{src.name}'",
            hint="use a fresh alloc_fragment for the result",
        )
    acc_t, kind = compute_dtype(src.dtype), s.kind.removeprefix("arg")
    coords = L.thread_coords(sf, ctx.tx)
    kept = [k for k, p in enumerate(sf.local_parts) if p.dim != s.dim]
    padded = [d for d in range(len(sf.shape)) if sf.padded(d)]
    across = [(p.extent, sf.thread_stride(k)) for k, p in enumerate(sf.thread_parts) if p.dim == s.dim and p.extent > 1]
    by_dst: dict[tuple[int, ...], list[tuple[int, ...]]] = {}
    for digits in L.local_digits(sf):
        by_dst.setdefault(tuple(digits[k] for k in kept), []).append(digits)
    out: list[T.Stmt] = []
    none = int_(DType.int32.int_bounds[1])  # no index yet: loses every tie
    for dslot, group in enumerate(by_dst.values()):
        pair = _Pair(ctx.fresh("best"), ctx.fresh("at"), acc_t, kind)
        out += [T.Decl(pair.value, acc_t, (), init=identity(kind, acc_t)), T.Decl(pair.index, I32, (), init=none)]
        for digits in group:
            reg = T.Subscript(ctx.name(src), (L.slot(sf, digits),), src.dtype)
            idx = L.tile_index(sf, coords, digits)
            x: tir.Expr = cast(reg, acc_t)  # type: ignore[arg-type]  # Thread IR leaf in a Tile IR expression
            take = pair.take(x, simplify(idx[s.dim]))
            out += guarded(all_of([lt(idx[d], int_(sf.shape[d])) for d in padded]), take)
        out += _cross_thread_pairs(ctx, pair, across)
        at = tir.Var(pair.index, I32, "let")
        found = tir.Select(tir.BinOp("==", at, none, DType.bool), int_(0), at, I32)
        out.append(T.Assign(T.Subscript(ctx.name(dst), (int_(dslot),), dst.dtype), found))
    return out


class _Pair:
    """A running (value, index) of an arg-reduction: C names, value type, "max" or "min"."""

    def __init__(self, value: str, index: str, dtype: DType, kind: str):
        self.value, self.index, self.dtype, self.kind = value, index, dtype, kind

    def better(self, x: tir.Expr, i: tir.Expr) -> tir.Expr:
        """(x, i) beats the pair held: a larger (smaller) value, or an equal one at a smaller index."""
        best, at = tir.Var(self.value, self.dtype, "let"), tir.Var(self.index, I32, "let")
        b = DType.bool
        strictly = tir.BinOp(">" if self.kind == "max" else "<", x, best, b)
        tie = tir.BinOp("and", tir.BinOp("==", x, best, b), tir.BinOp("<", i, at, b), b)
        return tir.BinOp("or", strictly, tie, b)

    def take(self, x: tir.Expr, i: tir.Expr) -> list[T.Stmt]:
        sets = (T.Assign(T.Sym(self.value, self.dtype), x), T.Assign(T.Sym(self.index, I32), i))
        return [T.IfThen(self.better(x, i), sets)]


def _cross_thread_pairs(ctx: LowerContext, pair: _Pair, parts: list[tuple[int, int]]) -> list[T.Stmt]:
    """`_cross_thread` for a (value, index) pair, on the same plan: each xor shuffle moves both,
    the better is kept; across warps the values go to the scratch row's first `threads` slots as
    the value type and the indices to the next `threads` as int32."""
    value, index = tir.Var(pair.value, pair.dtype, "let"), tir.Var(pair.index, I32, "let")
    masks, outer = _lane_plan(ctx, parts)
    out: list[T.Stmt] = []
    for mask in masks:
        other, other_at = ctx.fresh("other"), ctx.fresh("other_at")
        out.append(T.Decl(other, pair.dtype, (), init=T.Intrin("shfl_xor", (value, int_(mask)), pair.dtype)))  # type: ignore[arg-type]
        out.append(T.Decl(other_at, I32, (), init=T.Intrin("shfl_xor", (index, int_(mask)), I32)))  # type: ignore[arg-type]
        out += pair.take(tir.Var(other, pair.dtype, "let"), tir.Var(other_at, I32, "let"))
    if not outer:
        return out
    red, threads = _red_scratch(ctx), ctx.kernel.threads

    def values_at(i: tir.Expr) -> T.Subscript:
        return T.Subscript(red, (i,), pair.dtype, reinterpret=True)

    def indices_at(i: tir.Expr) -> T.Subscript:  # 8 bytes a thread: room for both at 4 bytes each
        return T.Subscript(red, (simplify(add(i, int_(threads))),), I32, reinterpret=True)

    base, offsets = _across_warps(ctx, outer)
    out += [BLOCK, T.Assign(values_at(ctx.tx), value), T.Assign(indices_at(ctx.tx), index), BLOCK]
    for off in offsets:
        at = simplify(add(base, int_(off)))
        out += pair.take(values_at(at), indices_at(at))  # type: ignore[arg-type]  # Thread IR leaves
    return out


def _red_scratch(ctx: LowerContext) -> str:
    """The kernel's scratch row for reductions across warps: 8 bytes a thread, declared
    once and shared by all reductions (each reads it as its own element type)."""
    if ctx.state.red_buf is None:
        ctx.state.red_buf = ctx.fresh("red_buf")
        shared_view(ctx, ctx.state.red_buf, DType.float64, (ctx.kernel.threads,))
    return ctx.state.red_buf


def lower_cumsum(ctx: LowerContext, s: tir.CumSum) -> list[T.Stmt]:
    """One thread per line along `dim`, scanning it serially (in place is fine); the running
    value starts at the op's identity (0, or -inf / +inf for cummax / cummin). A fragment's scan
    goes through a shared tile of its own (`_fragment_scan`)."""
    if "fragment" in (s.src.buffer.scope, s.dst.buffer.scope):
        return _fragment_scan(ctx, s)
    src, dst = s.src, s.dst
    ext = tuple(const_int(e) for e in src.extents)
    n = ext[s.dim]
    lines = ext[: s.dim] + ext[s.dim + 1 :] or (1,)
    vars = index_vars(len(lines))
    layout = L.default(lines, ctx.kernel.threads, 16)
    k = tir.Var("k", I32, "loop")
    pos = simplify(tir.BinOp("-", int_(n - 1), k, I32)) if s.reverse else k
    full = (*vars[: s.dim], pos, *vars[s.dim :]) if len(ext) > 1 else (pos,)
    running = tir.Buffer("running", (), compute_dtype(src.buffer.dtype), "var")
    src_i = tuple(simplify(tir.BinOp("+", st, i, I32)) for st, i in zip(src.starts, full))
    dst_i = tuple(simplify(tir.BinOp("+", st, i, I32)) for st, i in zip(dst.starts, full))
    step = (
        tir.Store(running, (), combine(s.op, tir.Load(running, ()), tir.Load(src.buffer, src_i))),
        tir.Store(dst.buffer, dst_i, tir.Load(running, ())),
    )
    start = identity(s.op, running.dtype)
    body = (tir.Alloc(running, start), tir.For(k, int_(0), int_(n), int_(1), "serial", step))
    # fewer lines than threads: only the threads of replica 0 scan (the others would read the
    # elements the scan is overwriting, a race even if their sums are dropped)
    owner = replica_zero(ctx, layout)
    outer = ctx.state.assumed
    ctx.state.assumed = [*outer, *conjuncts(owner)]  # the stores under it need no guard of their own
    code = distributed(ctx, layout, vars, body, vectorize=False)
    ctx.state.assumed = outer
    return guarded(owner, code)


def _fragment_scan(ctx: LowerContext, s: tir.CumSum) -> list[T.Stmt]:
    """A scan whose source or destination is a fragment: the source copied into a shared tile
    of the destination's type (the tile's own view, `NAME_scan`), scanned there in place by
    lines, copied to the destination; block barriers between the three, since each has its
    own thread layout, and one before: the tile is the scan's alone, so that no other statement
    orders it (in a loop, the previous iteration's copy-out may still be reading it)."""
    kept = [d for d, e in enumerate(s.src.extents) if const_int(e) != 1 or d == s.dim]  # the scan's own dim too
    extents = tuple(s.src.extents[d] for d in kept)
    tile = tir.Buffer(f"{s.dst.buffer.name}_scan", extents, s.dst.buffer.dtype, "shared", s.span)
    shared_view(ctx, ctx.name(tile), tile.dtype, tile.const_shape)
    whole = tir.Region(tile, tuple(int_(0) for _ in extents), extents, s.span)
    scan = tir.CumSum(whole, whole, kept.index(s.dim), s.reverse, s.span, s.op)
    into, out_of = tir.Copy(s.src, whole, span=s.span), tir.Copy(whole, s.dst, span=s.span)
    return [BLOCK, *lower_copy(ctx, into), BLOCK, *lower_cumsum(ctx, scan), BLOCK, *lower_copy(ctx, out_of)]


def lower_print(ctx: LowerContext, s: tir.Print) -> list[T.Stmt]:
    if isinstance(s.value, tir.Region):
        r = s.value
        vars, shape = _tile_domain(ctx, [r])
        if r.buffer.scope == "fragment":
            layout = ctx.layouts.buffers[r.buffer]
        else:
            layout = L.replicated_all(shape, ctx.kernel.threads)
        idx = _region_index(r, vars, shape)
        body = (tir.Print(tir.Load(r.buffer, idx), f"{s.msg or r.buffer.name}"),)
        out = distributed(ctx, layout, vars, body, vectorize=False)
        return (
            out
            if r.buffer.scope == "fragment"
            else [T.IfThen(tir.BinOp("==", ctx.tx, int_(0), DType.bool), tuple(out))]
        )
    return [T.IfThen(tir.BinOp("==", ctx.tx, int_(0), DType.bool), (printf(s.msg, value_of(ctx, s.value, None)),))]


BITWISE: dict[str, tir.BinOpName] = {"bitand": "&", "bitor": "|", "bitxor": "^"}  # the bitwise reductions' operators


def identity(kind: str, d: DType) -> tir.Expr:
    inf = float("inf")
    if kind == "bitand":  # every bit set
        return tir.IntImm(-1 if d.kind == "int" else d.int_bounds[1], d)
    if kind == "max":
        return tir.FloatImm(-inf, d) if d.is_float else tir.IntImm(d.int_bounds[0], d)
    if kind == "min":
        return tir.FloatImm(inf, d) if d.is_float else tir.IntImm(d.int_bounds[1], d)
    return zero(d)


def combine(kind: str, a: tir.Expr, b: tir.Expr) -> tir.Expr:
    d = a.dtype
    if kind in ("max", "absmax"):
        return tir.Call("max", (a, b), d)
    if kind == "min":
        return tir.Call("min", (a, b), d)
    return tir.BinOp(BITWISE.get(kind, "+"), a, b, d)


def vec_width(last: int, regions: list[tir.Region]) -> int:
    v = 16 // max(r.buffer.dtype.bytes for r in regions)
    while v > 1 and last % v:
        v //= 2
    return max(v, 1)


def _micro_tile(frag: L.Fragment, dim: int) -> tuple[int, int]:
    """(registers, stride) of a SIMT accumulator along `dim`: one register
    digit per dim, as `layout.accumulator` builds it."""
    parts = [p for p in frag.local_parts if p.dim == dim and p.extent > 1]
    if len(parts) > 1:
        raise AssertionError(f"SIMT gemm needs one register digit per dim, got {frag.describe()}")
    return (parts[0].extent, parts[0].stride) if parts else (1, 1)
