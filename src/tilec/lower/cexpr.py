"""Small builders of C-ready expressions shared by the lowering modules:
conditions (`all_of`, `lt`, `at_least_zero`), index arithmetic (`add`, `mul`, `flatten`, `strided`),
type widening (`compute_dtype`, `cast`) and a bound prover (`upper_bound`, `lower_bound`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tilec import layout as L
from tilec import thread_ir as T
from tilec import tir, tir_walk
from tilec.dtypes import DType
from tilec.layout_algebra import Swizzle
from tilec.simplify import const, from_linear, int_, linear, simplify

I32 = DType.int32


F32 = DType.float32


def conjuncts(e: tir.Expr) -> list[tir.Expr]:
    if isinstance(e, tir.BinOp) and e.op == "and":
        return conjuncts(e.a) + conjuncts(e.b)
    return [] if isinstance(e, tir.BoolImm) and e.value else [e]


def all_of(conds: Sequence[tir.Expr]) -> tir.Expr:
    unique: list[tir.Expr] = []
    for c in conds:
        for part in conjuncts(simplify(c)):
            if part not in unique:
                unique.append(part)
    out: tir.Expr = tir.BoolImm(True)
    for c in unique:
        out = c if isinstance(out, tir.BoolImm) and out.value else tir.BinOp("and", out, c, DType.bool)
    return simplify(out)


def add(a: tir.Expr, b: tir.Expr) -> tir.Expr:
    return tir.BinOp("+", a, b, I32)


def mul(a: tir.Expr, k: int) -> tir.Expr:
    return tir.BinOp("*", a, int_(k), I32)


def lt(a: tir.Expr, b: tir.Expr) -> tir.Expr:
    return tir.BinOp("<", a, b, DType.bool)


def at_least_zero(a: tir.Expr) -> tir.Expr:
    """`0 <= a`: the lower edge of a tensor's dimension."""
    return tir.BinOp("<=", int_(0), a, DType.bool)


def vars_in(e: tir.Expr) -> set[tir.Var]:
    return tir_walk.variables(e)


def compute_dtype(d: DType) -> DType:
    """Type arithmetic is done in: float32 for the 8- and 16-bit floats."""
    return F32 if d.is_low_precision else d


# The fp8 types are computed in float like the other narrow floats, but with no implicit
# conversion back from float in CUDA C++ (or tilec's HIP types): a let of one needs a cast.
def let_init(value: tir.Expr, d: DType) -> tir.Expr:
    """The initializer of a `const d` let whose value, lowered, is `value`."""
    return cast(value, d) if d.is_fp8 else value


def cast(e: tir.Expr, d: DType) -> tir.Expr:
    if isinstance(e, tir.Cast) and _widened_from(e, d):
        return e.value  # half -> float -> half is the identity
    if d.is_fp8 and isinstance(e, tir.Select) and isinstance(e.b, tir.FloatImm) and _widened_from(e.a, d):
        # a guarded fp8 load (`c ? float(x) : 0.0f` back to fp8) moves the bits: `c ? x : fp8(0.0f)`,
        # no conversion of x (HIP's fp8 conversions are software)
        return tir.Select(e.cond, cast(e.a, d), tir.Cast(e.b, d), d)
    return e if e.dtype == d else tir.Cast(e, d)


def _widened_from(e: tir.Expr, d: DType) -> bool:
    return isinstance(e, tir.Cast) and e.value.dtype == d and e.dtype == F32


@dataclass
class Access:
    """How one element access reads in a distributed loop: the C expression
    and whether a global bound check applies."""

    ref: T.Subscript
    inbounds: tir.Expr


@dataclass
class ElementLoop:
    """A distributed loop being lowered: its layout and per-dim index exprs."""

    layout: L.Fragment
    index: tuple[tir.Expr, ...]  # tile index per dim, in terms of loop counters
    local: tuple[tir.Expr, ...]  # the digit of each of the layout's register parts


def index_vars(rank: int) -> tuple[tir.Var, ...]:
    """Loop variables of a tile op's element loop: i, j, k, l, ..."""
    names = "ijklmn"
    return tuple(tir.Var(names[d] if d < len(names) else f"i{d}", I32, "loop") for d in range(rank))


def c_string(text: str) -> str:
    return '"' + text.replace('"', '\\"') + '"'


def builtin(name: T.BuiltinName, dtype: DType = I32) -> tir.Expr:
    """A register of the target (the thread index, ...) inside an expression; the emitter
    spells it from the Target record."""
    return T.Builtin(name, dtype)  # type: ignore[return-value]  # a Thread IR leaf in a tir.Expr tree


def symv(sym: T.Sym) -> tir.Var:
    return tir.Var(sym.name, I32, "thread")


def counter_var(sym: T.Sym, extent: int, bounds: dict[tir.Var, int]) -> tir.Var:
    v = tir.Var(sym.name, I32, "thread")
    bounds[v] = extent - 1
    return v


def zero(d: DType) -> tir.Expr:
    if d.is_float:
        return tir.FloatImm(0.0, compute_dtype(d))
    if d == DType.bool:
        return tir.BoolImm(False)
    return tir.IntImm(0, d)


def const_int(e: tir.Expr) -> int:
    assert isinstance(e, tir.IntImm), f"non-constant extent {e}"
    return e.value


def flatten(idx: tuple[tir.Expr, ...], shape: tuple[tir.Expr, ...]) -> tir.Expr:
    flat: tir.Expr = int_(0)
    for i, d in zip(idx, shape):
        flat = tir.BinOp("+", tir.BinOp("*", flat, d, I32), i, I32)
    return simplify(flat)


def strided(idx: tuple[tir.Expr, ...], strides: tuple[tir.Expr, ...]) -> tir.Expr:
    """The offset of element `idx` of a tensor with `strides` (elements per step of each dimension)."""
    flat: tir.Expr = int_(0)
    for i, s in zip(idx, strides):
        flat = tir.BinOp("+", flat, tir.BinOp("*", i, s, I32), I32)
    return simplify(flat)


def guarded(cond: tir.Expr, body: list[T.Stmt]) -> list[T.Stmt]:
    if isinstance(cond, tir.BoolImm):
        return body if cond.value else []
    return [T.IfThen(cond, tuple(body))]


def upper_bound(e: tir.Expr, bounds: dict[tir.Var, int]) -> int | None:
    """An upper bound of a nonnegative index expression, or None if unknown."""
    match e:
        case tir.IntImm(v):
            return v
        case tir.Var():
            for k, v in bounds.items():
                if k is e or (k.name == e.name and k.kind == e.kind):
                    return v
            return None
        case tir.BinOp("+", a, b):
            ua, ub = upper_bound(a, bounds), upper_bound(b, bounds)
            return None if ua is None or ub is None else ua + ub
        case tir.BinOp("*", a, b):
            ua, ub = upper_bound(a, bounds), upper_bound(b, bounds)
            return None if ua is None or ub is None else ua * ub
        case tir.BinOp("//", a, tir.IntImm(c)) if c > 0:
            ua = upper_bound(a, bounds)
            return None if ua is None else ua // c
        case tir.BinOp("%", _, tir.IntImm(c)) if c > 0:
            return c - 1
        case _:
            return None


def forget_bound(bounds: dict[tir.Var, int], name: str) -> None:
    """Drop the bound of the C variable `name` (as `upper_bound` finds it: by name), before it is
    lowered again where the old bound may not hold (a schedule's prologue, then its loop)."""
    for k in [k for k in bounds if k.name == name and k.kind == "thread"]:
        del bounds[k]


def max_value(e: tir.Expr, bounds: dict[tir.Var, int]) -> int | None:
    """An upper bound of an integer index expression that may be negative: `upper_bound`'s, or
    that of its linear form whose terms are bounded above (positive coefficients: upper_bound's
    nonnegative expressions) or at least 0 (negative ones): `7680 - k * 512` with 0 <= k is at
    most 7680. Only for a whole expression compared with a bound: `upper_bound`'s products and
    quotients need nonnegative operands, which this one's may not be."""
    hi = upper_bound(e, bounds)
    if hi is not None:
        return hi
    lin = linear(e)
    if lin is None:
        return None
    terms, high = lin
    for atom, k in terms.items():
        if k > 0:
            hi = upper_bound(atom, bounds)
            if hi is None:
                return None
            high += k * hi
        elif not _nonnegative_atom(atom, bounds, set()):
            return None
    return high


def lower_bound(e: tir.Expr, bounds: dict[tir.Var, int], nonneg: set[str]) -> int | None:
    """A lower bound of an integer index expression, or None if unknown. The variables of
    `bounds` (0 up to their bound) and those named in `nonneg` are at least 0; any other
    variable (a scalar argument, a value loaded from memory) may be anything."""
    lin = linear(e)
    if lin is None:
        return None
    terms, low = lin
    for atom, k in terms.items():
        if not _nonnegative_atom(atom, bounds, nonneg):
            return None
        if k < 0:
            hi = upper_bound(atom, bounds)
            if hi is None:
                return None
            low += k * hi
    return low


def nonnegative(e: tir.Expr, bounds: dict[tir.Var, int], nonneg: set[str]) -> bool:
    """Whether an integer index expression is provably at least 0 (see `lower_bound`)."""
    low = lower_bound(e, bounds, nonneg)
    return low is not None and low >= 0


def _nonnegative_atom(a: tir.Expr, bounds: dict[tir.Var, int], nonneg: set[str]) -> bool:
    """Whether a term of a linear form (a variable, a product, a quotient...) is at least 0."""
    match a:
        case tir.Var():
            return a.name in nonneg or upper_bound(a, bounds) is not None
        case tir.BinOp("*", x, y):
            return nonnegative(x, bounds, nonneg) and nonnegative(y, bounds, nonneg)
        case tir.BinOp("//" | "%", x, tir.IntImm(c)) if c > 0:
            return nonnegative(x, bounds, nonneg)
        case tir.Call("min", args):
            return all(nonnegative(v, bounds, nonneg) for v in args)
        case tir.Call("max", args):
            return any(nonnegative(v, bounds, nonneg) for v in args)
        case _:
            return False


def swizzled_offset(sw: Swizzle, offset: tir.Expr, bounds: dict[tir.Var, int]) -> tir.Expr:
    """sw(offset), written so that an access costs little more than an unswizzled one.

    The swizzle permutes offsets only inside aligned blocks of `sw.block` elements, and on an
    offset's bits it is linear over XOR. So terms that are whole blocks (a pipeline stage, an
    unrolled step of rows) are added after it; and when the other terms cannot carry into each
    other (their possible bits are disjoint, so their sum is their XOR), a constant is XORed in
    after it (sw(v + c) = sw(v) ^ sw(c)) and a term below the swizzled bits (the element in a
    16-byte chunk) is added after it. What stays inside is the thread-dependent part, the same
    expression for every access of a loop nest: nvcc computes it once, and an access is an XOR
    and an immediate offset, as with CUTLASS's iterators.
    """
    lin = linear(offset)
    if lin is None or sw.bits == 0:
        return sw.expr(offset)
    terms, c = lin
    if c < 0 or any(k < 0 for k in terms.values()):
        return sw.expr(offset)
    block = sw.block
    inside = {a: k for a, k in terms.items() if k % block}
    outside = from_linear(({a: k for a, k in terms.items() if k % block == 0}, c - c % block))
    low = c % block
    masks = {a: _term_bits(a, k, bounds) for a, k in inside.items()}
    known = [m for m in masks.values() if m is not None]
    union = _union(known)
    if len(known) < len(masks) or union is None or union & low:
        core = sw.expr(from_linear((inside, low)))
    else:
        target = ((1 << sw.bits) - 1) << sw.base  # the bits the swizzle XORs into
        source = target << sw.shift  # the bits it reads
        bits = {a: m for a, m in masks.items() if m is not None}  # all of them, on this branch
        kept = {a: k for a, k in inside.items() if bits[a] & source}
        xored = {a: k for a, k in inside.items() if not bits[a] & source and bits[a] & target}
        passed = {a: k for a, k in inside.items() if not bits[a] & (source | target)}
        core = sw.expr(from_linear((kept, 0))) if kept else int_(0)
        for part in [from_linear(({a: k}, 0)) for a, k in xored.items()] + ([int_(sw.apply(low))] if low else []):
            core = part if const(core) == 0 else tir.BinOp("^", core, part, I32)
        outside = tir.BinOp("+", from_linear((passed, 0)), outside, I32)
    return simplify(tir.BinOp("+", core, outside, I32))


def split_index(c: tir.Expr, width: int, bounds: dict[tir.Var, int]) -> tuple[tir.Expr, tir.Expr]:
    """(c // width, c % width), exact and without a division when the terms of c that are not
    multiples of width provably stay below it (the usual case: a block-aligned warp offset plus a
    lane's offset inside the block)."""
    lin = linear(c)
    if lin is not None and lin[1] >= 0 and all(k > 0 for k in lin[0].values()):
        terms, const = _split_atoms(lin[0], width, bounds), lin[1]
        whole = {a: k // width for a, k in terms.items() if k % width == 0}
        part = ({a: k for a, k in terms.items() if k % width}, const % width)
        top = upper_bound(from_linear(part), bounds)
        if top is not None and top < width:
            return from_linear((whole, const // width)), from_linear(part)
    return simplify(tir.BinOp("//", c, int_(width), I32)), simplify(tir.BinOp("%", c, int_(width), I32))


def _split_atoms(terms: dict[tir.Expr, int], width: int, bounds: dict[tir.Var, int]) -> dict[tir.Expr, int]:
    """Terms a * k (k dividing width) that can reach width, as (a // m) * width + (a % m) * k with
    m = width / k: a k step of 16 columns over 64-column blocks is a block and a step inside one."""
    out: dict[tir.Expr, int] = {}
    for a, k in terms.items():
        ub = upper_bound(a, bounds)
        if k % width and width % k == 0 and ub is not None and ub * k >= width:
            m = width // k
            for part, coef in (
                (simplify(tir.BinOp("//", a, int_(m), I32)), width),
                (simplify(tir.BinOp("%", a, int_(m), I32)), k),
            ):
                out[part] = out.get(part, 0) + coef
        else:
            out[a] = out.get(a, 0) + k
    return out


def _term_bits(atom: tir.Expr, k: int, bounds: dict[tir.Var, int]) -> int | None:
    """The bits that atom * k can set (atom nonnegative, at most its upper bound), or None:
    a multiple of 2**lo below 2**hi sets bits lo..hi-1 only."""
    ub = upper_bound(atom, bounds)
    if ub is None:
        return None
    if ub == 0:
        return 0
    lo, hi = (k & -k).bit_length() - 1, (ub * k).bit_length()
    return ((1 << hi) - 1) ^ ((1 << lo) - 1)


def _union(masks: list[int]) -> int | None:
    """The union of bit masks, or None if two overlap (their sum could carry)."""
    out = 0
    for m in masks:
        if out & m:
            return None
        out |= m
    return out


def printf(msg: str, value: tir.Expr) -> T.Call:
    if value.dtype.is_float:
        fmt, arg = "%f", tir.Cast(value, DType.float64)
    elif value.dtype == DType.bool:
        fmt, arg = "%d", tir.Cast(value, I32)
    elif value.dtype.bits == 64:
        fmt, arg = "%lld", tir.Cast(value, DType.int64)
    else:
        fmt, arg = "%d", tir.Cast(value, I32)
    text = f"{msg}: {fmt}\\n" if msg else f"{fmt}\\n"
    return T.Call(T.Intrin("printf", (c_string(text), arg), I32))


def source_line(s: tir.Stmt) -> str:
    """`file.tile:12` of a statement, for the comments above generated code."""
    return f"{s.span.file.path.split('/')[-1]}:{s.span.line}"


def source_comment(s: tir.Stmt, words: int | None = None) -> str:
    """`file.tile:12: copy(A[...], A_shared)`: where a lowered op came from."""
    if not s.span.text:
        return type(s).__name__
    return f"{source_line(s)}: {' '.join(s.span.text.split()[:words])}"
