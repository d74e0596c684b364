"""Symbolic index arithmetic through TVM's analyzer (apache-tvm, `tvm.sym`).

The one module that imports TVM, and only inside functions: importing it
costs about a second, which `tilec check` and `tilec build` must not pay.
Expressions cross over as `tilec.tir` and come back as `tilec.tir`; every
variable is an index ranging over [0, extent), given in `bounds`.

    lane in [0, 32):  ((lane // 4) * 64 + lane % 4 * 2) // 64 % 8 * 8
    simplify      ->  lane // 4 * 8
    can_prove(lane // 4 * 8 + 7 < 64)  -> True

Indices are nonnegative, so tilec's `//` and `%` (C: round toward zero) go to
TVM's floordiv/floormod, which agree with them there and which the analyzer
reasons about best.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tilec import tir
from tilec.dtypes import DType

Bounds = Mapping[tir.Var, int]  # each variable ranges over [0, extent)

_BINARY: dict[tir.BinOpName, str] = {
    "+": "Add",
    "-": "Sub",
    "*": "Mul",
    "//": "FloorDiv",
    "%": "FloorMod",
    "^": "BitwiseXor",
    "&": "BitwiseAnd",
    "|": "BitwiseOr",
    "<<": "LShift",
    ">>": "RShift",
    "<": "LT",
    "<=": "LE",
    ">": "GT",
    ">=": "GE",
    "==": "EQ",
    "!=": "NE",
    "and": "And",
    "or": "Or",
}
_BACK: dict[str, tir.BinOpName] = {name: op for op, name in _BINARY.items()} | {"Div": "//", "Mod": "%"}
_COMPARE = {"<", "<=", ">", ">=", "==", "!=", "and", "or"}


def available() -> bool:
    """True when apache-tvm can be imported (tests skip the symbolic checks otherwise)."""
    try:
        import tvm.sym  # noqa: F401
    except ImportError:
        return False
    return True


class _Bridge:
    """Converts one expression family both ways, keeping tilec Var <-> TVM Var one to one.
    With `c_division`, `//` and `%` are C's (rounding toward zero): floordiv and floormod where
    the analyzer shows the dividend >= 0 and the divisor > 0 (they agree there), otherwise a
    fresh unknown (TVM's truncating Div misleads its Z3 bound prover: 0.27 "proves" a false
    `bx * 2048 + 7 < N` from `bx < Div(N + 2047, 2048)`)."""

    def __init__(self, bounds: Bounds, c_division: bool = False):
        import tvm.sym
        import tvm.tirx
        from tvm import ir

        self.T = tvm.tirx
        self.c_division = c_division
        self.to: dict[tir.Var, Any] = {}
        self.back: dict[Any, tir.Var] = {}
        self.analyzer = tvm.sym.Analyzer()
        for var, extent in bounds.items():
            self.analyzer.bind(self.var(var), ir.Range.from_min_extent(0, extent))

    def var(self, v: tir.Var) -> Any:
        if v not in self.to:
            tv = self.T.Var(v.name, v.dtype.tile_name if v.dtype.is_int or v.dtype == DType.bool else "int32")
            self.to[v] = tv
            self.back[tv] = v
        return self.to[v]

    def to_tvm(self, e: tir.Expr) -> Any:
        T = self.T
        match e:
            case tir.IntImm(value, dtype):
                return T.IntImm(dtype.tile_name, value)
            case tir.BoolImm(value):
                return T.IntImm("bool", int(value))
            case tir.Var():
                return self.var(e)
            case tir.BinOp("//" | "%" as op, a, b) if self.c_division:
                return self.c_divide(op, self.to_tvm(a), self.to_tvm(b))
            case tir.BinOp(op, a, b):
                return getattr(T, _BINARY[op])(self.to_tvm(a), self.to_tvm(b))
            case tir.Select(cond, a, b):
                return T.Select(self.to_tvm(cond), self.to_tvm(a), self.to_tvm(b))
            case tir.Call("min" | "max" as f, (a, b)):
                return getattr(T, f.capitalize())(self.to_tvm(a), self.to_tvm(b))
            case tir.UnaryOp("not", a):
                return T.Not(self.to_tvm(a))
            case tir.UnaryOp("-", a):
                return T.Sub(T.IntImm(a.dtype.tile_name, 0), self.to_tvm(a))
            case _:
                raise TypeError(f"arith: no TVM form for {e!r}")

    def c_divide(self, op: str, x: Any, y: Any) -> Any:
        T, zero = self.T, self.T.IntImm("int32", 0)
        if self.analyzer.can_prove(T.GE(x, zero)) and self.analyzer.can_prove(T.GT(y, zero)):
            return (T.FloorDiv if op == "//" else T.FloorMod)(x, y)
        return T.Var("c_division", "int32")

    def from_tvm(self, x: Any) -> tir.Expr:
        T = self.T
        kind = type(x).__name__
        if isinstance(x, T.IntImm):
            return tir.BoolImm(bool(x.value)) if str(x.ty) == "bool" else tir.IntImm(int(x.value), _dtype(x))
        if isinstance(x, T.Var):
            return self.back[x]
        if kind in _BACK:
            op = _BACK[kind]
            dt = DType.bool if op in _COMPARE else _dtype(x)
            return tir.BinOp(op, self.from_tvm(x.a), self.from_tvm(x.b), dt)
        if kind in ("Min", "Max"):
            return tir.Call(kind.lower(), (self.from_tvm(x.a), self.from_tvm(x.b)), _dtype(x))
        if kind == "Select":
            return tir.Select(
                self.from_tvm(x.condition), self.from_tvm(x.true_value), self.from_tvm(x.false_value), _dtype(x)
            )
        if kind == "Not":
            return tir.UnaryOp("not", self.from_tvm(x.a), DType.bool)
        raise TypeError(f"arith: no tilec form for TVM {kind}: {x}")


def _dtype(x: Any) -> DType:
    name = str(x.ty)
    return DType[name] if name in DType.__members__ else DType.int32


def simplify(e: tir.Expr, bounds: Bounds) -> tir.Expr:
    """The analyzer's canonical form of `e`, knowing each variable's range."""
    br = _Bridge(bounds)
    return br.from_tvm(br.analyzer.simplify(br.to_tvm(e)))


def can_prove(cond: tir.Expr, bounds: Bounds) -> bool:
    """True only when `cond` holds for every value of the variables in their ranges."""
    br = _Bridge(bounds)
    return bool(br.analyzer.can_prove(br.to_tvm(cond)))


def prove_equal(a: tir.Expr, b: tir.Expr, bounds: Bounds) -> bool:
    br = _Bridge(bounds)
    diff = br.analyzer.simplify(br.to_tvm(a) - br.to_tvm(b))
    return isinstance(diff, br.T.IntImm) and int(diff.value) == 0


def prove_bijective(index: Sequence[tir.Expr], bounds: Bounds) -> bool:
    """True when TVM's iterator-map detection shows that (variables in their ranges) -> `index`
    is a bijection onto a dense box: every element exactly once. False means "not proved"."""
    import tvm.sym
    from tvm import ir

    br = _Bridge(bounds)
    dom = {br.var(v): ir.Range.from_min_extent(0, n) for v, n in bounds.items()}
    exprs = [br.to_tvm(x) for x in index]
    result = tvm.sym.detect_iter_map(exprs, dom, check_level=tvm.sym.iter_affine_map.IterMapLevel.Bijective)
    return len(result.indices) == len(exprs) and not result.errors


class Prover:
    """An analyzer holding facts that come and go as a walk enters and leaves code: variables
    with ranges (`bind`), conditions in force (`assume`); `can_prove` asks under all of them.
    Variables bound nowhere range over all of their type.

        p.bind(tx, 0, 128)
        with p.assume(by * 128 + tx < M):  p.can_prove(by * 128 + tx < M)  -> True

    Its `//` and `%` are C's (rounding toward zero; `_Bridge`'s c_division): the walk it serves
    meets values that may be negative, which floordiv would misjudge (-1 % 8 is -1 in C, 7 as a
    floormod).
    """

    def __init__(self) -> None:
        self.bridge = _Bridge({}, c_division=True)

    def bind(self, var: tir.Var, lo: int, hi: int) -> None:
        """`var` ranges over [lo, hi)."""
        from tvm import ir

        self.bridge.analyzer.bind(self.bridge.var(var), ir.Range.from_min_extent(lo, hi - lo))

    def assume(self, cond: tir.Expr) -> Any:
        """A context manager in which `cond` holds."""
        return self.bridge.analyzer.constraint_scope(self.bridge.to_tvm(cond))

    def can_prove(self, cond: tir.Expr) -> bool:
        """True only when `cond` holds under every binding and assumption in force: the rewriting
        analyzers first, then symbolic bounds (and Z3, where TVM is built with it)."""
        import tvm.sym

        x = self.bridge.to_tvm(cond)
        analyzer = self.bridge.analyzer
        return bool(analyzer.can_prove(x)) or bool(analyzer.can_prove(x, tvm.sym.ProofStrength.SYMBOLIC_BOUND))

    def bounds(self, e: tir.Expr) -> tuple[int, int]:
        """Constant bounds [lo, hi] of `e` the analyzer finds (those of int32 when it finds none)."""
        b = self.bridge.analyzer.const_int_bound(self.bridge.to_tvm(e))
        return int(b.min_value), int(b.max_value)
