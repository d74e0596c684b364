"""The C form of Tile IR expressions: `value_of` (buffers resolved to subscripts, low-precision
arithmetic widened to float32, indices simplified) and `ref_of` (the subscript of one element and
its bound condition), over the kernel's LowerContext."""

from __future__ import annotations

from typing import assert_never

from tilec import layout as L
from tilec import thread_ir as T
from tilec import tir, tir_walk
from tilec.diagnostics import error
from tilec.dtypes import DType
from tilec.lower.cexpr import (
    F32,
    I32,
    Access,
    ElementLoop,
    all_of,
    at_least_zero,
    cast,
    compute_dtype,
    conjuncts,
    flatten,
    forget_bound,
    let_init,
    lower_bound,
    lt,
    max_value,
    split_index,
    strided,
    swizzled_offset,
    upper_bound,
    zero,
)
from tilec.lower.context import LowerContext
from tilec.simplify import from_linear, int_, linear, simplify
from tilec.source import NO_SPAN, Span


def _shared_divisor(ctx: LowerContext, divisor: tir.Expr, loop: ElementLoop) -> bool:
    """Whether a float32 divisor in element loop `loop` is the same for several of a thread's
    elements (the loop has register digits): a constant, or a register of a fragment read at some
    of the digits only (`acc_o[i, j] / logsum[i]`: one divisor a row). Such a division becomes a
    multiplication by the divisor's reciprocal, which nvcc computes once per distinct divisor of
    the unrolled loop: one IEEE division a row instead of one an element (each a reciprocal, four
    FMAs and a slow-path check). The quotient is then within 1.5 ulp of the exact one instead of
    0.5; a divisor below 2^-126 in magnitude, whose reciprocal overflows, gives infinity. Any other
    divisor (a shared or global read, a let, an expression of the element's indices) stays a
    division: those are C names here whose dependence on the element this cannot see."""
    digits = set().union(*(tir_walk.variables(x) for x in loop.local))
    if not digits:
        return False  # one element a thread: nothing to share
    if isinstance(divisor, tir.FloatImm):
        return True
    if not isinstance(divisor, T.Subscript):
        return False
    if divisor.array not in {ctx.name(b) for b in ctx.layouts.buffers if b.scope == "fragment"}:
        return False  # a vector path's staged lanes (`L_v[e]`), a scratch row
    used = set().union(*(tir_walk.variables(x) for x in divisor.indices))
    return used < digits


def value_of(ctx: LowerContext, e: tir.Expr, loop: ElementLoop | None) -> tir.Expr:
    """The C-ready form of an expression: buffers resolved to subscripts,
    low-precision arithmetic widened to float32, indices simplified."""
    match e:
        case tir.IntImm() | tir.BoolImm():
            return e
        case tir.FloatImm(v, d):
            return tir.FloatImm(v, compute_dtype(d))
        case tir.Var():
            if e.kind == "thread":  # already a C name (counters, the thread index)
                return e
            if e not in ctx.state.cvars:
                ctx.state.cvars[e] = tir.Var(ctx.name(e), e.dtype, "thread")
            return cast(ctx.state.cvars[e], compute_dtype(e.dtype))
        case tir.Load(buf, idx):
            acc = ref_of(ctx, buf, idx, loop, e.span)
            loaded: tir.Expr = acc.ref  # type: ignore[assignment]  # a C subscript standing for the loaded value
            loaded = cast(loaded, compute_dtype(buf.dtype))
            if not all(c in ctx.state.assumed for c in conjuncts(acc.inbounds)):
                outside = ctx.state.pad if ctx.state.pad is not None else zero(compute_dtype(buf.dtype))
                loaded = tir.Select(acc.inbounds, loaded, outside, compute_dtype(buf.dtype))
            return loaded
        case tir.BinOp(op, a, b, d):
            va, vb = value_of(ctx, a, loop), value_of(ctx, b, loop)
            if op in ("==", "!=", "<", "<=", ">", ">=", "and", "or"):
                return simplify(tir.BinOp(op, va, vb, d))
            cd = compute_dtype(d)
            if op == "/" and cd == F32 and loop is not None and _shared_divisor(ctx, vb, loop):
                recip = tir.BinOp("/", tir.FloatImm(1.0, F32), cast(vb, F32), F32)
                return tir.BinOp("*", cast(va, F32), recip, F32)
            return simplify(tir.BinOp(op, cast(va, cd), cast(vb, cd), cd))
        case tir.UnaryOp(op, a, d):
            return simplify(tir.UnaryOp(op, value_of(ctx, a, loop), compute_dtype(d)))
        case tir.Select(c, a, b, d):
            cd = compute_dtype(d)
            return tir.Select(
                value_of(ctx, c, loop), cast(value_of(ctx, a, loop), cd), cast(value_of(ctx, b, loop), cd), cd
            )
        case tir.Cast(v, d):
            inner = value_of(ctx, v, loop)
            if d.is_float and inner.dtype.is_int:
                exact = _small_int_to_float(ctx, inner, d)
                if exact is not None:
                    return exact
            if d.is_low_precision:  # round through the narrow type, keep computing in float
                return tir.Cast(cast(inner, d) if inner.dtype == F32 else tir.Cast(cast(inner, F32), d), F32)
            return cast(inner, d)
        case tir.Call("thread_index", ()):
            return ctx.tx
        case tir.Call("lane_index", ()):  # lanes.py names it `lane`
            return tir.BinOp("%", ctx.tx, int_(ctx.target.warp_size), I32)
        case tir.Call("warp_index", ()):  # lanes.py names it `warp`
            return tir.BinOp("//", ctx.tx, int_(ctx.target.warp_size), I32)
        case tir.Call("shfl_xor" | "shfl_down" as f, (x, offset), d):
            cd = compute_dtype(d)
            shuffled = (cast(value_of(ctx, x, loop), cd), value_of(ctx, offset, loop))
            return T.Intrin(f, shuffled, cd)  # type: ignore[return-value]  # Thread IR leaf in a Tile IR expression
        case tir.Call("exp2", (arg,), d) if compute_dtype(d) == F32:
            ctx.state.helpers.add("exp2")  # the hardware's ex2.approx.ftz (see emit.HELPERS)
            return T.Intrin("tilec_exp2", (cast(value_of(ctx, arg, loop), F32),), F32)  # type: ignore[return-value]  # Thread IR leaf in a Tile IR expression
        case tir.Call("unpack_int4" | "unpack_uint4" | "unpack_fp4_e2m1" as f, (pair, j), d):  # pack_subbyte.py
            name = f.removeprefix("unpack_")
            ctx.state.helpers.add("fp4_e2m1" if name == "fp4_e2m1" else "int4")
            args = (cast(value_of(ctx, pair, loop), pair.dtype), value_of(ctx, j, loop))
            return T.Intrin(f"tilec_{name}", args, d)  # type: ignore[return-value]  # Thread IR leaf in a Tile IR expression
        case tir.Call("reinterpret", (x,), d):  # the bits of x in its own type, not its widened value
            ctx.state.helpers.add("bitcast")
            to = ctx.target.spelling.type_names.get(d, d.cname)
            bits = T.Intrin(f"tilec_bitcast<{to}>", (cast(value_of(ctx, x, loop), x.dtype),), d)
            return cast(bits, compute_dtype(d))  # type: ignore[arg-type]  # Thread IR leaf in a Tile IR expression
        case tir.Call(f, args, d) if f.startswith(tir.EXTERN):  # the user's device function, as written
            call = T.Intrin(f, tuple(value_of(ctx, a, loop) for a in args), d)
            return cast(call, compute_dtype(d))  # type: ignore[arg-type]  # Thread IR leaf in a Tile IR expression
        case tir.Call(f, args, d):
            cd = compute_dtype(d)
            return tir.Call(f, tuple(cast(value_of(ctx, a, loop), cd) for a in args), cd)
        case _:
            assert_never(e)


def ref_of(
    ctx: LowerContext, buf: tir.Buffer, idx: tuple[tir.Expr, ...], loop: ElementLoop | None, at: Span = NO_SPAN
) -> Access:
    """The subscript of one element and its bound condition: for a tensor, each index below its
    dimension and at least 0, where neither is proven. `at`: the access's place in the source."""
    name = ctx.name(buf)
    at = at if at != NO_SPAN else next((i.span for i in idx if i.span != NO_SPAN), buf.span)
    idx = tuple(simplify(value_of(ctx, i, loop)) for i in idx)
    true: tir.Expr = tir.BoolImm(True)
    match buf.scope:
        case "global":
            extents = tuple(value_of(ctx, d, None) for d in buf.shape)
            conds = [] if buf in ctx.state.interior else in_dimension(ctx, idx, buf.shape)
            within = tuple(zip(idx, extents))
            if buf.strides is None:
                return Access(T.Subscript(name, (flatten(idx, extents),), buf.dtype, within=within), all_of(conds))
            steps = tuple(value_of(ctx, s, None) for s in buf.strides)
            ref = T.Subscript(name, (strided(idx, steps),), buf.dtype, within=within, strides=steps)
            return Access(ref, all_of(conds))
        case "shared" | "local":
            if buf in ctx.layouts.shift:  # column 0 sits `shift` elements into the padded row
                idx = (*idx[:-1], simplify(tir.BinOp("+", idx[-1], int_(ctx.layouts.shift[buf]), idx[-1].dtype)))
            if buf in ctx.layouts.swizzle:
                layout = ctx.layouts.swizzle[buf]
                assert layout.swizzle is not None, "layouts.swizzle holds swizzled layouts"
                if len(layout.shape) == len(idx) + 1:  # column blocks (layout_algebra.swizzled_blocks)
                    idx = (*idx[:-1], *split_index(idx[-1], layout.shape[-1], ctx.state.bounds))
                    if (n := ctx.state.wrapped_blocks.get(buf)) is not None:
                        idx = (*idx[:-2], simplify(tir.BinOp("%", idx[-2], int_(n), idx[-2].dtype)), idx[-1])
                idx = (swizzled_offset(layout.swizzle, simplify(layout.strided_expr(idx)), ctx.state.bounds),)
            if buf in ctx.state.stage_of:
                idx = (ctx.state.stage_of[buf], *idx)
            elif buf in ctx.state.staged:
                raise error(
                    at,
                    f"'{buf.name}' keeps one copy per stage of its Pipelined loop, so outside the loop no "
                    "copy is the one a statement means",
                    hint=f"inside the loop, copy what is needed after it into a tile of its own (not "
                    f"filled by the loop's copies), or read '{buf.name}' only inside the loop",
                )
            return Access(T.Subscript(name, idx, buf.dtype), true)
        case "var":
            return Access(T.Subscript(name, (), buf.dtype), true)
        case "fragment":
            frag = ctx.layouts.buffers[buf]
            if loop is None and all(p.dim is None for p in frag.thread_parts):  # every thread holds it all
                return Access(T.Subscript(name, (L.slot(frag, list(idx)),), buf.dtype), true)
            if loop is None:
                raise error(
                    at,
                    f"fragment '{buf.name}' can only be indexed inside a Parallel loop",
                    hint="copy it to a shared or local buffer to read single elements",
                )
            return Access(T.Subscript(name, (_slot(ctx, buf, idx, loop),), buf.dtype), true)


def _slot(ctx: LowerContext, buf: tir.Buffer, idx: tuple[tir.Expr, ...], loop: ElementLoop) -> tir.Expr:
    """Register of fragment `buf` holding element `idx` of the loop being
    lowered: the fragment's register digits are the loop's digits of the
    dims it is indexed by (its layout is the loop's, projected)."""
    frag = ctx.layouts.buffers[buf]
    dims = []
    for i in idx:
        pos = next((d for d, e in enumerate(loop.index) if e is i or e == i), None)
        if pos is None:
            raise error(buf.span, f"internal: fragment '{buf.name}' index not a loop variable")
        dims.append(pos)
    digits = [digit for part, digit in zip(loop.layout.local_parts, loop.local) if part.extent > 1 and part.dim in dims]
    wanted = [p for p in frag.local_parts if p.extent > 1]
    split = (  # the loop's register digits split the fragment's (layout.column_blocks), indexed as laid out
        loop.layout.thread_parts == frag.thread_parts
        and dims == list(range(len(frag.shape)))
        and L.merged(loop.layout.local_parts) == L.merged(frag.local_parts)
    )
    if len(digits) != len(wanted) and split:
        wanted = [p for p in loop.layout.local_parts if p.extent > 1]
    if len(digits) != len(wanted):
        raise error(buf.span, f"internal: fragment '{buf.name}' registers do not match the loop's layout")
    return L.slot(L.Fragment(frag.shape, frag.thread_parts, tuple(wanted)), digits)


def let_decl(ctx: LowerContext, var: tir.Var, value: tir.Expr) -> T.Decl:
    """`const T name = value;` of a let whose C value is `value`; the name is known nonnegative
    when the value is, and its range recorded when it can be bounded."""
    name = ctx.name(var)
    key = tir.Var(name, I32, "thread")
    forget_bound(ctx.state.bounds, name)  # lowered again, its value may differ
    if var.dtype.is_int and nonnegative(ctx, simplify(value)):
        ctx.state.nonneg.add(name)
        if (hi := max_value(simplify(value), ctx.state.bounds)) is not None:  # `i_b = i_bh // 32`: at most 7
            ctx.state.bounds[key] = hi
    if var.dtype.is_int and (r := int_range(ctx, value)) is not None:
        ctx.state.ranges[name] = r
    return T.Decl(name, var.dtype, init=let_init(value, var.dtype), const=True)


def in_dimension(ctx: LowerContext, idx: tuple[tir.Expr, ...], shape: tuple[tir.Expr, ...]) -> list[tir.Expr]:
    """The conditions for C indices `idx` to lie in a tensor of `shape`: `0 <= i` and `i < d`
    per dimension, less those proven."""
    conds: list[tir.Expr] = []
    for i, d in zip(idx, shape):
        if not nonnegative(ctx, i):
            conds.append(at_least_zero(i))
        if not below(ctx, i, d) and not _block_below(ctx, i, value_of(ctx, d, None)):
            conds.append(lt(i, value_of(ctx, d, None)))
    return conds


def _block_below(ctx: LowerContext, i: tir.Expr, d: tir.Expr) -> bool:
    """True if `i` is `b * c` for a block index `b` of grid extent `ceildiv(d, c)` or `d // c`
    (a block's first element: `Y[bx * 128] = ...` in `Kernel(ceildiv(N, 128))`)."""
    for var, extent in zip(ctx.kernel.block_vars, ctx.kernel.grid):
        g = simplify(value_of(ctx, extent, None))
        match g:
            case tir.BinOp("//", tir.BinOp("+", num, tir.IntImm(r)), tir.IntImm(c)) if r == c - 1 and num == d:
                pass
            case tir.BinOp("//", num, tir.IntImm(c)) if num == d:
                pass
            case _:
                continue
        if i == simplify(tir.BinOp("*", value_of(ctx, var, None), int_(c), I32)):
            return True
    return False


def nonnegative(ctx: LowerContext, i: tir.Expr) -> bool:
    """True if the C index `i` is provably at least 0."""
    low = lower_bound(i, ctx.state.bounds, ctx.state.nonneg)
    return low is not None and low >= 0


def below(ctx: LowerContext, i: tir.Expr, d: tir.Expr) -> bool:
    """True if index `i` is provably below the extent `d` (`at_most(i + 1, d)`)."""
    return at_most(ctx, simplify(tir.BinOp("+", i, int_(1), I32)), d)


def at_most(ctx: LowerContext, a: tir.Expr, b: tir.Expr) -> bool:
    """True if `a <= b` provably holds in every block: the gap `a - b`, with each block index that
    raises it at the grid's last one, is at most 0. A row kernel's `bx + 1 <= M` holds in a grid of
    M blocks (`Kernel(ceildiv(M, 1))`); a tile's `bx * 128 + 128 <= M` does not (the last tile may
    be ragged)."""
    gap = linear(simplify(tir.BinOp("-", a, b, I32)))
    if gap is None:
        return False
    terms, constant = gap
    last = _last_block_indices(ctx)
    raised = {v: k for v, k in terms.items() if k > 0 and isinstance(v, tir.Var) and v.name in last}
    widest = from_linear(({v: k for v, k in terms.items() if v not in raised}, constant))
    for v, k in raised.items():
        widest = tir.BinOp("+", widest, tir.BinOp("*", last[v.name], int_(k), I32), I32)
    hi = max_value(simplify(widest), ctx.state.bounds)
    return hi is not None and hi <= 0


def _last_block_indices(ctx: LowerContext) -> dict[str, tir.Expr]:
    """Each block index's C name -> its largest value, the grid extent less one."""
    kernel = ctx.kernel
    return {
        ctx.name(b): simplify(tir.BinOp("-", value_of(ctx, g, None), int_(1), I32))
        for b, g in zip(kernel.block_vars, kernel.grid)
    }


# The largest integer each float type holds exactly, with every integer below it: 2^(mantissa bits + 1).
_EXACT_INTS = {DType.float32: 1 << 24, DType.float16: 1 << 11, DType.bfloat16: 1 << 8}
_MANTISSA = 1 << 23  # float32: 0x4B000000 | v is the float 2^23 + v for 0 <= v < 2^23


def _small_int_to_float(ctx: LowerContext, v: tir.Expr, d: DType) -> tir.Expr | None:
    """The float32 value of the integer `v` cast to float type `d`, without a conversion
    instruction (the int-to-float conversion runs at an eighth of the float adds' rate on
    sm_80 and sm_90), when `v`'s range is known and narrow: the helper puts `v - lo` in the
    mantissa of 2^23 and subtracts 2^23 - lo (exact). Rounding through `d` is then left out
    where `d` holds every integer of the range exactly (float16 up to 2048), as the program's
    cast to a 16-bit float is followed by arithmetic in float32 anyway. None: the usual cast."""
    if not _from_data(ctx, v):
        return None  # an index (a counter, the thread index): converted once, and reads better as a cast
    r = int_range(ctx, v)
    limit = _EXACT_INTS.get(d)
    if r is None or limit is None or r[1] - r[0] >= _MANTISSA or max(-r[0], r[1]) > limit:
        return None
    lo = r[0]
    ctx.state.helpers.add("small_int_to_float")
    offset = simplify(tir.BinOp("-", v, int_(lo), I32)) if lo else v
    return T.Intrin("tilec_small_int_to_float", (offset, int_(lo)), F32)  # type: ignore[return-value]  # Thread IR leaf in a Tile IR expression


def _from_data(ctx: LowerContext, e: tir.Expr) -> bool:
    """Whether an integer expression reads a loaded element or a bounded let (data, converted
    once per element), not only indices."""
    match e:
        case T.Subscript():  # a Thread IR leaf: a loaded element
            return True
        case T.Intrin(name) if name in _NIBBLE_RANGES:  # an unpacked sub-byte element
            return True
        case tir.Var(name):
            return name in ctx.state.ranges
        case tir.Cast(v) | tir.UnaryOp(a=v):
            return _from_data(ctx, v)
        case tir.BinOp(a=a, b=b):
            return _from_data(ctx, a) or _from_data(ctx, b)
    return False


_NIBBLE_RANGES = {"tilec_int4": DType.int4.int_bounds, "tilec_uint4": DType.uint4.int_bounds}  # their helpers
_INT_RANGES = {d: d.int_bounds for d in (DType.int8, DType.uint8, DType.int16, DType.uint16)}  # narrow loads


def int_range(ctx: LowerContext, e: tir.Expr) -> tuple[int, int] | None:
    """Bounds [lo, hi] of a C integer expression, or None: constants, counters and thread
    indices (`LowerState.bounds`), lets bounded before (`LowerState.ranges`), narrow integer
    loads (their type's range), and +, -, *, & with a nonnegative mask, >>, % and // of
    nonnegative values by those."""
    match e:
        case tir.IntImm(v):
            return v, v
        case tir.Var(name):
            if name in ctx.state.ranges:
                return ctx.state.ranges[name]
            hi = upper_bound(e, ctx.state.bounds)
            return None if hi is None else (0, hi)
        case T.Subscript(dtype=d):  # a Thread IR leaf: a loaded element
            return _INT_RANGES.get(d)
        case T.Intrin(name) if name in _NIBBLE_RANGES:  # an unpacked sub-byte element
            return _NIBBLE_RANGES[name]
        case tir.Cast(v, d) if d.is_int and v.dtype.is_int:
            r = int_range(ctx, v)
            full = _INT_RANGES.get(d)
            return r if r is not None and (full is None or full[0] <= r[0] <= r[1] <= full[1]) else None
        case tir.BinOp(op, a, b) if op in ("+", "-", "*", "&", ">>", "%", "//"):
            ra, rb = int_range(ctx, a), int_range(ctx, b)
            if op == "&":  # either side a nonnegative range bounds the result
                bounds = [r for r in (ra, rb) if r is not None and r[0] >= 0]
                return (0, min(r[1] for r in bounds)) if bounds else None
            if ra is None or rb is None:
                return None
            if op == "+":
                return ra[0] + rb[0], ra[1] + rb[1]
            if op == "-":
                return ra[0] - rb[1], ra[1] - rb[0]
            if op == "*":
                products = [x * y for x in ra for y in rb]
                return min(products), max(products)
            if ra[0] < 0 or rb[0] < 0:
                return None
            if op == ">>":
                return ra[0] >> rb[1], ra[1] >> rb[0]
            if rb[0] == 0:
                return None  # a divisor that may be 0
            if op == "%":
                return 0, min(ra[1], rb[1] - 1)
            return ra[0] // rb[1], ra[1] // rb[0]
    return None
