"""Small builders of C-ready expressions shared by the lowering modules:
conditions (`all_of`, `lt`), index arithmetic (`add`, `mul`, `flatten`),
type widening (`compute_dtype`, `cast`) and a bound prover (`upper_bound`)."""

from __future__ import annotations

from dataclasses import dataclass

from tilec import layout as L
from tilec import thread_ir as T
from tilec import tir, tir_walk
from tilec.dtypes import DType
from tilec.simplify import int_, simplify

I32 = DType.int32


F32 = DType.float32


def conjuncts(e: tir.Expr) -> list[tir.Expr]:
    if isinstance(e, tir.BinOp) and e.op == "and":
        return conjuncts(e.a) + conjuncts(e.b)
    return [] if isinstance(e, tir.BoolImm) and e.value else [e]


def all_of(conds: list[tir.Expr]) -> tir.Expr:
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


def vars_in(e: tir.Expr) -> set[tir.Var]:
    return tir_walk.variables(e)


def compute_dtype(d: DType) -> DType:
    """Type arithmetic is done in: float32 for the 8- and 16-bit floats."""
    return F32 if d.is_low_precision else d


def cast(e: tir.Expr, d: DType) -> tir.Expr:
    if isinstance(e, tir.Cast) and e.value.dtype == d and e.dtype == F32:
        return e.value  # half -> float -> half is the identity
    return e if e.dtype == d else tir.Cast(e, d)


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


def raw(text: str) -> tir.Var:
    """A C expression spelled out (built-in registers such as threadIdx.x)."""
    return tir.Var(text, I32, "thread")


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
    return T.Call(T.Intrin("printf", (c_string(text), arg), I32))  # type: ignore[arg-type]


def source_line(s: tir.Stmt) -> str:
    """`file.tile:12` of a statement, for the comments above generated code."""
    return f"{s.span.file.path.split('/')[-1]}:{s.span.line}"


def source_comment(s: tir.Stmt, words: int | None = None) -> str:
    """`file.tile:12: copy(A[...], A_shared)`: where a lowered op came from."""
    if not s.span.text:
        return type(s).__name__
    return f"{source_line(s)}: {' '.join(s.span.text.split()[:words])}"
