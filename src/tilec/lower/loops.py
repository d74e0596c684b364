"""Distributed loops: a loop nest over a tile whose elements are spread over
the block's threads by a Fragment layout, with 16-byte vector accesses where
shape, alignment and bounds allow (decided per vector at run time), and atomic
adds into a tensor a few lanes at once where the target has such an instruction
(the backend's ATOMIC_ADD_LANES: `tilec_red_add_f32x4(&C[...], &C_v[0])` on sm_90a).

    for i, j in Parallel(4, 1024): Y[i, j] = X[i, j] * 2     (128 threads, f16)
  ->
    for (int g1 = 0; g1 < ...; ++g1) {
      if (X_vec8 && ... + 8 <= N) { 16-byte load; 8 lanes of math; 16-byte store }
      else { for (e1 ...) { const int j = ...; if (j < N) Y[..] = X[..] * 2; } }
    }
"""

from __future__ import annotations

import dataclasses

from tilec import layout as L
from tilec import thread_ir as T
from tilec import tir, tir_walk
from tilec.diagnostics import error
from tilec.dtypes import DType
from tilec.lower.cexpr import (
    I32,
    ElementLoop,
    all_of,
    at_least_zero,
    c_string,
    cast,
    conjuncts,
    counter_var,
    guarded,
    lower_bound,
    lt,
    printf,
    upper_bound,
    vars_in,
)
from tilec.lower.context import LowerContext, kernel_flag
from tilec.lower.exprs import at_most, below, let_decl, nonnegative, ref_of, value_of
from tilec.simplify import add, gcd_of, int_, residue, simplify, substitute


def distributed(
    ctx: LowerContext,
    layout: L.Fragment,
    vars: tuple[tir.Var, ...],
    body: tuple[tir.Stmt, ...],
    vectorize: bool = True,
) -> list[T.Stmt]:
    """Run `body` for every element of `layout`'s shape this thread owns.

    One counter per register digit of the layout (g0, g1 for groups, e1
    for the vector lanes of the last dim); the tile index is the layout's
    sum of thread and register digits times their strides. The loop
    variables keep the user's names (`const int i = ...;`)."""
    coords = L.thread_coords(layout, ctx.tx)
    rank = len(layout.shape)
    counters: list[T.Sym | None] = []
    digits: list[tir.Expr] = []
    parts = layout.local_parts
    for k, part in enumerate(parts):
        if part.extent == 1:
            counters.append(None)
            digits.append(int_(0))
            continue
        is_lane = k == len(parts) - 1 and part.stride == 1
        base = ("e" if is_lane else "g") + (str(part.dim) if rank > 1 else "")
        sym = T.Sym(ctx.fresh(base), I32)
        counters.append(sym)
        digits.append(counter_var(sym, part.extent, ctx.state.bounds))
    index = L.tile_index(layout, coords, digits)
    padded = [d for d in range(rank) if layout.padded(d)]
    last = parts[-1] if parts else None
    lane = None
    if vectorize and last is not None and last.dim == rank - 1 and last.stride == 1 and last.extent > 1:
        lane = counters[-1]
    inner, vectorized = _element_body(ctx, layout, vars, body, index, tuple(digits), padded, lane)
    nest = inner
    for k in reversed(range(len(parts))):
        counter = counters[k]
        if counter is None or (vectorized and k == len(parts) - 1):
            continue
        nest = [T.Loop(counter, int_(0), int_(parts[k].extent), 1, True, tuple(nest))]
    return nest


def replica_zero(ctx: LowerContext, layout: L.Fragment) -> tir.Expr:
    """True in the threads that hold replica 0 of a replicated layout."""
    coords = L.thread_coords(layout, ctx.tx)
    conds = [
        tir.BinOp("==", c, int_(0), DType.bool)
        for c, p in zip(coords, layout.thread_parts)
        if p.dim is None and not isinstance(c, tir.IntImm)
    ]
    return all_of(conds)


def _element_body(
    ctx: LowerContext,
    layout: L.Fragment,
    vars: tuple[tir.Var, ...],
    body: tuple[tir.Stmt, ...],
    index: tuple[tir.Expr, ...],
    local: tuple[tir.Expr, ...],
    padded: list[int],
    lane: T.Sym | None,
) -> tuple[list[T.Stmt], bool]:
    """The per-element code, and whether it took the vectorized form."""
    decls: list[T.Stmt] = []
    named: list[tir.Expr] = []
    for d, (v, i) in enumerate(zip(vars, index)):
        if isinstance(i, tir.IntImm):
            named.append(i)
            continue
        cvar = tir.Var(ctx.fresh(v.name), I32, "thread")
        ctx.state.bounds[cvar] = layout.shape[d] - 1
        decls.append(T.Decl(cvar.name, I32, init=i, const=True))
        named.append(cvar)
    scalar_loop = ElementLoop(layout, tuple(named), local)
    guard = all_of([lt(named[d], int_(layout.shape[d])) for d in padded])
    bound = tuple(substitute_stmt(s, dict(zip(vars, named))) for s in body)
    scalar = decls + guarded(guard, _elements(ctx, bound, scalar_loop))
    if lane is None:
        return scalar, False
    full = ElementLoop(layout, index, local)
    width = layout.local_parts[-1].extent
    vec = _vector_path(ctx, tuple(substitute_stmt(s, dict(zip(vars, index))) for s in body), full, lane, width)
    if vec is None:
        return scalar, False
    cond, vbody = vec
    lane_v = next(v for v in ctx.state.bounds if v.name == lane.name)
    outer_guard = simplify(substitute(all_of([lt(index[d], int_(layout.shape[d])) for d in padded]), {lane_v: int_(0)}))
    scalar_lanes = T.Loop(lane, int_(0), int_(layout.local_parts[-1].extent), 1, True, tuple(scalar))
    chosen: list[T.Stmt] = (
        vbody if isinstance(cond, tir.BoolImm) and cond.value else [T.IfThen(cond, tuple(vbody), (scalar_lanes,))]
    )
    return guarded(outer_guard, chosen), True


def _elements(ctx: LowerContext, body: tuple[tir.Stmt, ...], loop: ElementLoop) -> list[T.Stmt]:
    """Thread IR of a Parallel body for one element (indices already bound)."""
    out: list[T.Stmt] = []
    for s in body:
        match s:
            case tir.Store(buf, idx, value):
                acc = ref_of(ctx, buf, idx, loop)
                if buf.scope == "global":
                    ctx.state.written.add(acc.ref.array)
                outer = ctx.state.assumed
                ctx.state.assumed = [*outer, *conjuncts(acc.inbounds)]  # loads under the store's own guard need none
                assign = T.Assign(acc.ref, cast(value_of(ctx, value, loop), buf.dtype))
                ctx.state.assumed = outer
                cond = acc.inbounds
                if buf.scope in ("global", "shared"):  # memory all threads see: one replica writes
                    cond = all_of([replica_zero(ctx, loop.layout), cond])
                out += guarded(all_of([c for c in conjuncts(cond) if c not in ctx.state.assumed]), [assign])
            case tir.Let(var, value):
                out.append(let_decl(ctx, var, value_of(ctx, value, loop)))
            case tir.Alloc(buf, init) if buf.scope == "var":
                value = cast(value_of(ctx, init, loop), buf.dtype) if init is not None else None
                out.append(T.Decl(ctx.name(buf), buf.dtype, (), init=value))
            case tir.If(cond, then, orelse):
                c = value_of(ctx, cond, loop)
                outer = ctx.state.assumed
                if not tir_walk.loads(cond):  # of values the body cannot change: it holds throughout `then`
                    ctx.state.assumed = [*outer, *conjuncts(c)]
                taken = tuple(_elements(ctx, then, loop))
                ctx.state.assumed = outer
                out.append(T.IfThen(c, taken, tuple(_elements(ctx, orelse, loop))))
            case tir.For():
                out.append(_element_loop(ctx, s, loop))
            case tir.Atomic(dst=dst, value=value, op=op) if value is not None:
                out += guarded(replica_zero(ctx, loop.layout), atomic(ctx, op, dst.buffer, dst.starts, value, loop))
            case tir.Print(value=value, msg=msg) if not isinstance(value, tir.Region):
                out.append(printf(msg, value_of(ctx, value, loop)))
            case tir.DeviceAssert():
                out.append(device_assert(ctx, s, loop))
            case _:
                raise error(
                    s.span, "this statement cannot appear inside a Parallel loop", hint="move it out of the loop"
                )
    return out


def _element_loop(ctx: LowerContext, s: tir.For, loop: ElementLoop) -> T.Loop:
    """A serial loop inside a Parallel body; its variable is known nonnegative when it counts
    up from a nonnegative start."""
    name = ctx.name(s.var)
    start, stop = value_of(ctx, s.start, loop), value_of(ctx, s.stop, loop)
    step = s.step.value if isinstance(s.step, tir.IntImm) else 1
    if step > 0 and nonnegative(ctx, simplify(start)):
        ctx.state.nonneg.add(name)
    return T.Loop(T.Sym(name, I32), start, stop, step, s.kind == "unroll", tuple(_elements(ctx, s.body, loop)))


def atomic(
    ctx: LowerContext, op: str, buf: tir.Buffer, idx: tuple[tir.Expr, ...], value: tir.Expr, loop: ElementLoop | None
) -> list[T.Stmt]:
    """`atomic_{op}` of `value` into element `idx` of `buf`: the hardware's atomic, or for a
    float max or min the backend's compare-and-swap loop (`tilec_atomic_max`)."""
    acc = ref_of(ctx, buf, idx, loop)
    if buf.scope == "global":
        ctx.state.written.add(acc.ref.array)
    v = cast(value_of(ctx, value, loop), buf.dtype)
    name = f"atomic_{op}"
    if op != "add" and buf.dtype.is_float:
        ctx.state.helpers.add("atomic_float_minmax")
        name = f"tilec_{name}"
    call = T.Call(T.Intrin(name, (T.AddressOf(acc.ref), v), buf.dtype))
    return guarded(acc.inbounds, [call])


def device_assert(ctx: LowerContext, s: tir.DeviceAssert, loop: ElementLoop | None) -> T.Stmt:
    cond = value_of(ctx, s.cond, loop)
    msg = f"{s.span.file.path}:{s.span.line}: device_assert failed: {s.msg}"
    return T.IfThen(
        tir.UnaryOp("not", cond, DType.bool),
        (T.Call(T.Intrin("printf", (c_string(msg + "\\n"),), I32)), T.Call(T.Intrin("trap", (), I32))),
    )


def _vector_path(
    ctx: LowerContext, body: tuple[tir.Stmt, ...], loop: ElementLoop, lane: T.Sym, width: int
) -> tuple[tir.Expr, list[T.Stmt]] | None:
    """The 16-byte-vector version of a body of plain stores, lets and atomic adds, or None.

    Each global/shared access whose last index is `base + lane` becomes one
    vector load into registers before the lane loop, or one vector store
    (vector atomic adds: `_vector_add`) after it; the rest of the body (the
    lets, in order) runs per lane on those registers."""
    lane_var = next(v for v in ctx.state.bounds if isinstance(v, tir.Var) and v.name == lane.name)
    steps = [t for s in body if (t := _vector_step(s)) is not None]
    if len(steps) != len(body):
        return None
    if ctx.state.async_copy:
        return _async_vector(ctx, body, loop, lane_var, width)
    stores = [s for s in steps if isinstance(s, tir.Store)]
    accesses: dict[tuple, tuple[tir.Buffer, tuple[tir.Expr, ...]]] = {}
    loads: list[tir.Load] = []
    for s in steps:
        loads += tir_walk.loads(_step_value(s))
    added = {s.dst.buffer for s in steps if isinstance(s, tir.Atomic)}
    if any(ld.buffer in added for ld in loads):
        return None  # a read of what the atomics add to would come before the adds
    vec_loads: dict[tir.Load, tir.Buffer | tuple[tir.Buffer, int]] = {}
    windows: dict[tuple, tir.Buffer] = {}  # (tile, row indices, first chunk's column) -> registers
    conds: list[tir.Expr] = []
    pre: list[T.Stmt] = []
    post: list[T.Stmt] = []
    written = {s.buffer for s in stores} | added
    lane_zero = {lane_var: int_(0)}
    per_lane = frozenset(s.var for s in steps if isinstance(s, tir.Let))  # bound anew in each lane
    for ld in loads:
        if ld.buffer.scope not in ("global", "shared") or ld.buffer in written:
            continue
        plan = _vec_access(ctx, ld.buffer, ld.indices, lane_var, width, lane_zero, per_lane)
        if plan is None:
            window = _window(ctx, ld, lane_var, width, lane_zero, windows, per_lane)
            if window is not None:
                pre += window[0]
                vec_loads[ld] = window[1]
            continue
        key = (ld.buffer, ld.indices)
        if key in accesses:
            vec_loads[ld] = accesses[key][0]
            continue
        reg = ctx.fresh(f"{ctx.name(ld.buffer)}_v")
        cond, refs = plan
        conds.append(cond)
        pre.append(T.Decl(reg, ld.buffer.dtype, (width,), align=16))
        pre += vec_moves(T.Subscript(reg, (int_(0),), ld.buffer.dtype), refs, width, to_registers=True)
        reg_buf = tir.Buffer(reg, (int_(width),), ld.buffer.dtype, "local")
        ctx.state.names.given[reg_buf] = reg
        vec_loads[ld] = reg_buf
        accesses[key] = (reg_buf, ())
    lane_body: list[T.Stmt] = []
    for s in steps:
        value = replace_loads(_step_value(s), {ld: _lane_load(r, lane_var) for ld, r in vec_loads.items()})
        if isinstance(s, tir.Let):
            lane_body.append(let_decl(ctx, s.var, value_of(ctx, value, loop)))
            continue
        if isinstance(s, tir.Atomic):
            adds = _vector_add(ctx, s, value, loop, lane_var, width, per_lane)
            if adds is None:
                return None  # one atomic add per element, each with its own bounds check: the scalar path
            conds += [adds.cond, replica_zero(ctx, loop.layout)]
            pre.append(adds.decl)
            lane_body.append(adds.lane)
            post += adds.adds
            continue
        target_plan = None
        if s.buffer.scope in ("global", "shared"):
            target_plan = _vec_access(ctx, s.buffer, s.indices, lane_var, width, lane_zero, per_lane)
        if target_plan is None:
            if s.buffer.scope in ("global",):
                return None  # a scalar global store needs per-element bounds: keep the scalar path
            lane_body += _elements(ctx, (tir.Store(s.buffer, s.indices, value, s.span),), loop)
            continue
        cond, refs = target_plan
        conds += [cond, replica_zero(ctx, loop.layout)]
        reg = ctx.fresh(f"{ctx.name(s.buffer)}_v")
        pre.append(T.Decl(reg, s.buffer.dtype, (width,), align=16))
        lane_body.append(
            T.Assign(
                T.Subscript(reg, (value_of(ctx, lane_var, loop),), s.buffer.dtype),
                cast(value_of(ctx, value, loop), s.buffer.dtype),
            )
        )
        post += vec_moves(T.Subscript(reg, (int_(0),), s.buffer.dtype), refs, width, to_registers=False)
        if s.buffer.scope == "global":
            ctx.state.written.add(refs[0].array)
    if not conds:
        return None
    body_out = pre + [T.Loop(T.Sym(lane.name, I32), int_(0), int_(width), 1, True, tuple(lane_body))] + post
    return all_of(conds), body_out


def _vector_step(s: tir.Stmt) -> tir.Store | tir.Let | tir.Atomic | None:
    """`s` if a vectorized body may hold it: a store, a let, or an element's atomic add
    (`atomic_add(C[i, j], v)`, as a tile op's is once lowered per element)."""
    match s:
        case tir.Store() | tir.Let():
            return s
        case tir.Atomic(value=value, op="add") if value is not None:
            return s
        case _:
            return None


def _step_value(s: tir.Store | tir.Let | tir.Atomic) -> tir.Expr:
    """The value a step of a vectorized body stores, binds or adds."""
    value = s.value
    assert value is not None, "_vector_step: an element's atomic add has a value"
    return value


@dataclasses.dataclass(frozen=True)
class _VectorAdd:
    """An element's atomic add over a vector's lanes: each lane's value into a register of `decl`
    (`lane`), then the backend's atomic adds of a few lanes each (`adds`), under `cond`."""

    cond: tir.Expr
    decl: T.Stmt
    lane: T.Stmt
    adds: list[T.Stmt]


def _vector_add(
    ctx: LowerContext,
    s: tir.Atomic,
    value: tir.Expr,
    loop: ElementLoop,
    lane: tir.Var,
    width: int,
    per_lane: frozenset[tir.Var],
) -> _VectorAdd | None:
    """An atomic add into a tensor whose last index is `base + lane`, as vector atomic adds of
    the widest lane count of the target's (`ATOMIC_ADD_LANES`) that divides `width`; None where
    the target has none for the type, or the access is not a vector (`_vec_access`)."""
    buf = s.dst.buffer
    lanes = next((n for n in ctx.backend.ATOMIC_ADD_LANES.get(buf.dtype, ()) if width % n == 0), None)
    if lanes is None or buf.scope != "global":
        return None  # shared memory: one atomic per element
    plan = _vec_access(ctx, buf, s.dst.starts, lane, width, {lane: int_(0)}, per_lane)
    if plan is None:
        return None
    cond, refs = plan
    ctx.state.written.add(refs[0].array)
    reg = ctx.fresh(f"{ctx.name(buf)}_v")
    assign = T.Assign(
        T.Subscript(reg, (value_of(ctx, lane, loop),), buf.dtype), cast(value_of(ctx, value, loop), buf.dtype)
    )
    *rows, first = (substitute(i, {lane: int_(0)}) for i in s.dst.starts)
    adds = [  # each `lanes` elements on from the vector's first (aligned to the whole vector's size)
        ctx.backend.atomic_add_vector(
            ctx,
            ref_of(ctx, buf, (*rows, simplify(add(first, int_(k)))), None).ref,
            T.Subscript(reg, (int_(k),), buf.dtype),
            lanes,
        )
        for k in range(0, width, lanes)
    ]
    return _VectorAdd(cond, T.Decl(reg, buf.dtype, (width,), align=16), assign, adds)


def _window(
    ctx: LowerContext,
    ld: tir.Load,
    lane: tir.Var,
    width: int,
    lane_zero: dict,
    windows: dict[tuple, tir.Buffer],
    per_lane: frozenset[tir.Var],
) -> tuple[list[T.Stmt], tuple[tir.Buffer, int]] | None:
    """A shared-tile read `width` lanes wide that starts `r` elements past a 16-byte chunk (a
    stencil's left or right neighbour, `X_s[i, j + 1]`), as the two aligned chunks around it
    read into registers (`(registers, r)`: lane e reads register r + e), instead of one
    element at a time; None where the chunks are not provably inside the tile's rows. Reads
    whose chunks are the same share one window (`windows`)."""
    buf, idx = ld.buffer, ld.indices
    # one 16-byte chunk per `width` lanes: the window's two chunks are then 16-byte aligned
    if buf.scope != "shared" or buf in ctx.layouts.swizzle or width * buf.dtype.bytes != 16:
        return None
    base = _lane_base(idx, lane, lane_zero, per_lane)
    pitch = ctx.layouts.row(buf)
    r = None if base is None else residue(_column(ctx, buf, base), width)
    if base is None or not r or pitch % width:
        return None
    first = simplify(tir.BinOp("-", base, int_(r), I32))
    column = simplify(_column(ctx, buf, first))  # of the first chunk, in the padded row
    hi, lo = upper_bound(column, ctx.state.bounds), lower_bound(column, ctx.state.bounds, ctx.state.nonneg)
    if hi is None or lo is None or lo < 0 or hi + 2 * width > pitch:
        return None
    key = (buf, idx[:-1], first)
    if key in windows:
        return [], (windows[key], r)
    reg = ctx.fresh(f"{ctx.name(buf)}_w")
    refs = _chunk_refs(ctx, buf, (*idx[:-1], first), 2 * width)
    decl = T.Decl(reg, buf.dtype, (2 * width,), align=16)
    moves = vec_moves(T.Subscript(reg, (int_(0),), buf.dtype), refs, 2 * width, to_registers=True)
    reg_buf = tir.Buffer(reg, (int_(2 * width),), buf.dtype, "local")
    ctx.state.names.given[reg_buf] = reg
    windows[key] = reg_buf
    return [decl, *moves], (reg_buf, r)


def _lane_base(
    idx: tuple[tir.Expr, ...], lane: tir.Var, lane_zero: dict, per_lane: frozenset[tir.Var]
) -> tir.Expr | None:
    """`base` of an access whose last index is `base + lane` and whose other indices and `base`
    are the same in every lane (no lane, no let of the element body: `per_lane`), or None. Lets
    bound outside the element loop (`cur_kv_head = hid // 2`, a page-table lookup) are the same
    in every lane."""
    if any(lane in vars_in(i) for i in idx[:-1]) or any(v in per_lane for i in idx for v in vars_in(i)):
        return None
    last = simplify(idx[-1])
    base = simplify(substitute(last, lane_zero))
    return base if simplify(tir.BinOp("-", last, base, I32)) == lane else None


def _column(ctx: LowerContext, buf: tir.Buffer, index: tir.Expr) -> tir.Expr:
    """The C value of a last-dimension index, counted in the padded row of a shifted tile."""
    return add(value_of(ctx, index, None), int_(ctx.layouts.shift.get(buf, 0)))


def _lane_load(reg: tir.Buffer | tuple[tir.Buffer, int], lane: tir.Var) -> tir.Load:
    """Lane `lane`'s element of a vector load's registers (a window's: `r` further on)."""
    if isinstance(reg, tuple):
        return tir.Load(reg[0], (simplify(tir.BinOp("+", lane, int_(reg[1]), I32)),))
    return tir.Load(reg, (lane,))


def _async_vector(
    ctx: LowerContext, body: tuple[tir.Stmt, ...], loop: ElementLoop, lane: tir.Var, width: int
) -> tuple[tir.Expr, list[T.Stmt]] | None:
    """A global -> shared vector copied asynchronously (no registers on the way)."""
    store = body[0]
    if len(body) != 1 or not isinstance(store, tir.Store) or not isinstance(store.value, tir.Load):
        return None
    load = store.value
    nbytes = width * store.buffer.dtype.bytes
    if load.buffer.dtype != store.buffer.dtype or nbytes not in ctx.backend.ASYNC_COPY_BYTES:
        return None
    zero_lane = {lane: int_(0)}
    src = _vec_access(ctx, load.buffer, load.indices, lane, width, zero_lane, frozenset())
    dst = _vec_access(ctx, store.buffer, store.indices, lane, width, zero_lane, frozenset())
    if src is None or dst is None or len(src[1]) != 1 or len(dst[1]) != 1:
        return None  # one asynchronous copy moves the whole vector: one piece on each side
    copy = ctx.backend.async_copy(ctx, dst[1][0], src[1][0], nbytes)  # the target's instruction
    return all_of([src[0], dst[0], replica_zero(ctx, loop.layout)]), [copy]


def _vec_access(
    ctx: LowerContext,
    buf: tir.Buffer,
    idx: tuple[tir.Expr, ...],
    lane: tir.Var,
    width: int,
    lane_zero: dict,
    per_lane: frozenset[tir.Var],
) -> tuple[tir.Expr, list[T.Subscript]] | None:
    """(condition, subscript of the first element) for a vector access, or None."""
    if width * buf.dtype.bytes > 16 and (width * buf.dtype.bytes) % 16:
        return None
    if buf.scope == "global" and not tir.unit_innermost(buf):
        return None  # a row's elements may lie apart: element by element
    if buf in ctx.state.unaligned:
        return None  # rows not on vector boundaries: read element by element (a copy's packed path)
    if (width * buf.dtype.bytes) & (width * buf.dtype.bytes - 1):
        return None
    base = _lane_base(idx, lane, lane_zero, per_lane)
    if base is None or gcd_of(_column(ctx, buf, base)) % width:
        return None  # not `base + lane`, or base not the first of an aligned chunk
    base_idx = tuple(substitute(i, lane_zero) for i in idx)
    refs = _chunk_refs(ctx, buf, base_idx, width)
    conds: list[tir.Expr] = []
    if buf.scope == "shared":
        if _piece(ctx, buf, width) * buf.dtype.bytes < 4:
            return None  # rows too unevenly padded for moves wider than one element
    elif buf in ctx.state.interior:  # the whole tile is known inside and aligned: nothing to check
        pass
    else:
        conds.append(aligned(ctx, buf, width))
        shape = tuple(value_of(ctx, d, None) for d in buf.shape)
        vals = tuple(simplify(value_of(ctx, i, None)) for i in base_idx)
        for i, d in zip(vals[:-1], shape[:-1]):
            if not nonnegative(ctx, i):
                conds.append(at_least_zero(i))
            if not below(ctx, i, d):
                conds.append(lt(i, d))
        if not nonnegative(ctx, vals[-1]):
            conds.append(at_least_zero(vals[-1]))
        last_end = simplify(tir.BinOp("+", vals[-1], int_(width), I32))
        if not at_most(ctx, last_end, shape[-1]):
            conds.append(tir.BinOp("<=", last_end, shape[-1], DType.bool))
    return all_of(conds), refs


def _piece(ctx: LowerContext, buf: tir.Buffer, width: int) -> int:
    """Elements per move of a `width`-element vector of `buf`: at most 16 bytes, and in a shared
    tile no more than its rows' alignment allows (rows padded to 20 halfs, as HIP's MFMA operand
    tiles are, start 8 bytes apart: 8-byte moves)."""
    per = min(width, 16 // buf.dtype.bytes)
    if buf.scope == "shared" and buf not in ctx.layouts.swizzle:
        while ctx.layouts.row(buf) % per:
            per //= 2
    return per


def _chunk_refs(ctx: LowerContext, buf: tir.Buffer, base_idx: tuple[tir.Expr, ...], width: int) -> list[T.Subscript]:
    """The subscript of each piece (`_piece`) of a `width`-element vector at `base_idx`: consecutive
    elements, except in a swizzled tile, where each piece's column goes through the swizzle."""
    first = ref_of(ctx, buf, base_idx, None).ref
    per = _piece(ctx, buf, width)
    if buf not in ctx.layouts.swizzle:
        return [offset(first, k * per) for k in range(width // per)]
    last = base_idx[-1]
    return [first] + [
        ref_of(ctx, buf, (*base_idx[:-1], simplify(tir.BinOp("+", last, int_(k * per), I32))), None).ref
        for k in range(1, width // per)
    ]


def aligned(ctx: LowerContext, buf: tir.Buffer, width: int) -> tir.Var:
    """A kernel-wide flag: the tensor's rows start on `width`-element boundaries (for a tensor
    with strides, every stride but the last, which is 1, a multiple of `width`).

    const bool A_vec8 = reinterpret_cast<uintptr_t>(A) % 16 == 0 && K % 8 == 0;
    """
    key = (buf, width)
    if key in ctx.state.flags:
        return ctx.state.flags[key]
    name = ctx.name(buf)
    address = T.Intrin("address", (tir.Var(name, buf.dtype, "thread"),), DType.uint64)
    cond = _divisible(address, 16)  # type: ignore[arg-type]  # a Thread IR leaf in a tir.Expr tree
    steps = buf.shape[-1:] if buf.strides is None else buf.strides[:-1]
    if len(buf.shape) > 1:
        for step in steps:
            if not (isinstance(step, tir.IntImm) and step.value % width == 0):
                cond = tir.BinOp("and", cond, _divisible(value_of(ctx, step, None), width), DType.bool)
    return kernel_flag(ctx, key, f"{name}_vec{width}", cond)


def _divisible(e: tir.Expr, k: int) -> tir.Expr:
    """`e % k == 0`, as written."""
    return tir.BinOp("==", tir.BinOp("%", e, int_(k), e.dtype), int_(0), DType.bool)


def replace_loads(e: tir.Expr, table: dict[tir.Load, tir.Expr]) -> tir.Expr:
    match e:
        case tir.Load(buf, idx):
            for k, v in table.items():
                if k is e or (k.buffer is buf and k.indices == idx):
                    return v
            return e
        case tir.BinOp(op, a, b, d):
            return tir.BinOp(op, replace_loads(a, table), replace_loads(b, table), d, e.span)
        case tir.UnaryOp(op, a, d):
            return tir.UnaryOp(op, replace_loads(a, table), d, e.span)
        case tir.Cast(v, d):
            return tir.Cast(replace_loads(v, table), d, e.span)
        case tir.Select(c, a, b, d):
            return tir.Select(replace_loads(c, table), replace_loads(a, table), replace_loads(b, table), d, e.span)
        case tir.Call(f, args, d):
            return tir.Call(f, tuple(replace_loads(x, table) for x in args), d, e.span)
        case _:
            return e


def vec_moves(regs: T.Subscript, pieces: list[T.Subscript], width: int, to_registers: bool) -> list[T.Stmt]:
    """16-byte (or narrower) moves of `width` elements between a register array and memory, whose
    pieces (each up to 16 bytes of consecutive elements) are at `pieces`."""
    chunk = width * regs.dtype.bytes // len(pieces)
    per = chunk // regs.dtype.bytes
    out: list[T.Stmt] = []
    for k, piece in enumerate(pieces):
        reg = T.VecRef(offset(regs, k * per), chunk)
        mem = T.VecRef(piece, chunk)
        out.append(T.Assign(reg, mem) if to_registers else T.Assign(mem, reg))
    return out


def offset(ref: T.Subscript, delta: int) -> T.Subscript:
    if delta == 0:
        return ref
    idx = ref.indices[:-1] + (simplify(tir.BinOp("+", ref.indices[-1], int_(delta), I32)),)
    return dataclasses.replace(ref, indices=idx)


def substitute_stmt(s: tir.Stmt, env: dict[tir.Var, tir.Expr]) -> tir.Stmt:
    """Bind loop variables in a Parallel body statement and the statements below it."""

    def bound(t: tir.Stmt) -> tir.Stmt:
        return tir_walk.map_stmt_exprs(t, lambda e: simplify(substitute(e, env)))

    (out,) = tir_walk.map_stmts((s,), bound)
    return out
