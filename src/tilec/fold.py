"""Typed expression construction with constant folding (used by elaborate.py).

Every scalar the elaborator builds goes through here, so literal typing and
folding happen in one place:

    block_M * 2          (both weak int literals)      -> IntImm(256)        weak
    acc[i] * 0.5         (acc: float16)                -> BinOp(*, Load, FloatImm(0.5, float16))
    x_f32 + y_f16                                      -> BinOp(+, x, Cast(y, float32))
    ceildiv(M, 128)                                    -> (M + 127) // 128

A `Val` pairs an IR expression with `weak`: an untyped literal (or a constant
computed only from literals and params) that takes the type of the operand
next to it. Weak values are always constants.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tilec import tir
from tilec.diagnostics import error
from tilec.dtypes import DType, promote
from tilec.source import Span

INT_MIN, UINT_MAX = -(2**63), 2**64 - 1


@dataclass(frozen=True, slots=True)
class Val:
    expr: tir.Expr
    weak: bool = False

    @property
    def dtype(self) -> DType:
        return self.expr.dtype


Const = int | float | bool


def const(e: tir.Expr) -> Const | None:
    """The Python value of a constant expression, else None."""
    if isinstance(e, (tir.IntImm, tir.FloatImm, tir.BoolImm)):
        return e.value
    return None


def imm(value: Const, dtype: DType, span: Span) -> tir.Expr:
    """A literal of `dtype` holding `value` (converted the way a C cast would)."""
    if dtype == DType.bool:
        return tir.BoolImm(bool(value), DType.bool, span)
    if dtype.is_float:
        return tir.FloatImm(float(value), dtype, span)
    if isinstance(value, float):
        if math.isinf(value) or math.isnan(value):
            raise error(span, f"cannot convert {value} to {dtype.tile_name}")
        value = int(value)
    return tir.IntImm(_check_int(int(value), span), dtype, span)


def _check_int(v: int, span: Span) -> int:
    if not INT_MIN <= v <= UINT_MAX:
        raise error(span, "integer constant is too large", hint="constants must fit in 64 bits")
    return v


def literal(value: Const, span: Span) -> Val:
    """A weak literal: int32, float32 or bool until an operand types it."""
    if isinstance(value, bool):
        return Val(tir.BoolImm(value, DType.bool, span), True)
    if isinstance(value, int):
        dtype = DType.int32 if -(2**31) <= value < 2**31 else DType.int64
        return Val(tir.IntImm(_check_int(value, span), dtype, span), True)
    return Val(tir.FloatImm(value, DType.float32, span), True)


def with_span(e: tir.Expr, span: Span) -> tir.Expr:
    if isinstance(e, tir.IntImm):
        return tir.IntImm(e.value, e.dtype, span)
    if isinstance(e, tir.FloatImm):
        return tir.FloatImm(e.value, e.dtype, span)
    if isinstance(e, tir.BoolImm):
        return tir.BoolImm(e.value, e.dtype, span)
    return e


# ---------------------------------------------------------------- conversions


def cast(v: Val, dtype: DType, span: Span) -> tir.Expr:
    """`v` converted to `dtype` (folded for constants, no-op when equal)."""
    if v.dtype == dtype:
        return v.expr
    c = const(v.expr)
    if c is not None:
        return imm(c, dtype, span)
    return tir.Cast(v.expr, dtype, span)


def convert(v: Val, dtype: DType, span: Span) -> tir.Expr:
    """Implicit conversion on store / fill / init (a weak literal just takes the type)."""
    return cast(v, dtype, span)


def _common(a: Val, b: Val) -> DType:
    if a.weak and b.weak:
        if a.dtype.is_float or b.dtype.is_float:
            return DType.float32 if DType.float64 not in (a.dtype, b.dtype) else DType.float64
        if a.dtype == DType.bool and b.dtype == DType.bool:
            return DType.bool
        return promote(a.dtype, b.dtype) if DType.bool not in (a.dtype, b.dtype) else DType.int32
    if a.weak or b.weak:
        strong, weak = (b, a) if a.weak else (a, b)
        if weak.dtype.is_float and not strong.dtype.is_float:
            return DType.float32
        if strong.dtype == DType.bool and weak.dtype != DType.bool:
            return DType.int32
        return strong.dtype
    return promote(a.dtype, b.dtype)


def unify(a: Val, b: Val, span: Span) -> tuple[tir.Expr, tir.Expr, DType]:
    dtype = _common(a, b)
    return cast(a, dtype, a.expr.span), cast(b, dtype, b.expr.span), dtype


# ---------------------------------------------------------------- operators

_ARITH = {"+", "-", "*", "/", "//", "%"}
_BITS = {"&", "|", "^", "<<", ">>"}
_COMPARE = {"==", "!=", "<", "<=", ">", ">="}


def c_div(a: int, b: int) -> int:
    """C's integer quotient: rounds toward zero (`-7 / 2 == -3`)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def c_mod(a: int, b: int) -> int:
    """C's remainder: the dividend's sign (`-7 % 2 == -1`)."""
    return a - b * c_div(a, b)


def _fold(op: str, x: Const, y: Const, dtype: DType, span: Span) -> Const:
    if op in ("/", "//", "%") and y == 0:
        raise error(span, "division by zero in a constant expression")
    if op in ("<<", ">>") and not 0 <= int(y) < 64:
        raise error(span, f"shift by {y} is out of range (0 to 63)")
    match op:
        case "+":
            return x + y
        case "-":
            return x - y
        case "*":
            return x * y
        case "/":
            return x / y
        case "//":
            return c_div(int(x), int(y))
        case "%":
            return c_mod(int(x), int(y))
        case "&":
            return x & y  # type: ignore[operator]  # ints only: the caller rejects float operands of bit operators
        case "|":
            return x | y  # type: ignore[operator]  # (as above)
        case "^":
            return x ^ y  # type: ignore[operator]  # (as above)
        case "<<":
            return int(x) << int(y)
        case ">>":
            return int(x) >> int(y)
        case "==":
            return x == y
        case "!=":
            return x != y
        case "<":
            return x < y
        case "<=":
            return x <= y
        case ">":
            return x > y
        case ">=":
            return x >= y
    raise AssertionError(op)


def _identity(op: str, a: tir.Expr, b: tir.Expr, dtype: DType) -> tir.Expr | None:
    """x + 0, x * 1 and friends on integers (keeps region math readable)."""
    if not dtype.is_int:
        return None
    ca, cb = const(a), const(b)
    if op in ("+", "-") and cb == 0:
        return a
    if op == "+" and ca == 0:
        return b
    if op in ("*", "//") and cb == 1:
        return a
    if op == "*" and ca == 1:
        return b
    if op == "*" and (ca == 0 or cb == 0):
        return tir.IntImm(0, dtype, a.span)
    return None


def binop(op: str, a: Val, b: Val, span: Span) -> Val:
    if op in ("and", "or"):
        return _logical(op, a, b, span)
    if op == "**":
        return power(a, b, span)
    ea, eb, dtype = unify(a, b, span)
    if op in _BITS and dtype.is_float:
        raise error(span, f"'{op}' needs integer operands, not {dtype.tile_name}")
    if op in ("<<", ">>") and dtype == DType.bool:
        raise error(span, f"'{op}' needs integer operands, not bool")
    if op == "/" and not dtype.is_float:
        raise error(
            span,
            "'/' divides two integers",
            hint="use '//' for integer division, or cast(x, float32) / y for true division",
        )
    if op in ("//", "%") and dtype.is_float:
        raise error(span, f"'{op}' needs integer operands, not {dtype.tile_name}", hint="use '/' and floor() on floats")
    if op in ("+", "-", "*", "//", "%") and dtype == DType.bool:
        dtype = DType.int32
        ea, eb = cast(Val(ea), dtype, span), cast(Val(eb), dtype, span)
    result = DType.bool if op in _COMPARE else dtype
    x, y = const(ea), const(eb)
    if x is not None and y is not None:
        try:
            value = _fold(op, x, y, dtype, span)
        except (ArithmeticError, ValueError):
            raise error(span, "cannot evaluate this constant expression") from None
        if isinstance(value, int) and not isinstance(value, bool) and a.weak and b.weak and result.is_int:
            return literal(value, span)
        return Val(imm(value, result, span), a.weak and b.weak)
    same = _identity(op, ea, eb, dtype)
    if same is not None:
        return Val(same, False)
    return Val(tir.BinOp(op, ea, eb, result, span), False)  # type: ignore[arg-type]  # op: a surface operator (all are BinOpNames)


def _logical(op: str, a: Val, b: Val, span: Span) -> Val:
    for v in (a, b):
        if v.dtype != DType.bool:
            raise error(
                v.expr.span, f"'{op}' needs bool operands, got {v.dtype.tile_name}", hint="compare it, e.g. x != 0"
            )
    x, y = const(a.expr), const(b.expr)
    if x is not None:
        keep_right = bool(x) if op == "and" else not bool(x)
        return b if keep_right else a
    if y is not None:
        if (op == "and") == bool(y):
            return a
        return b
    return Val(tir.BinOp(op, a.expr, b.expr, DType.bool, span), False)  # type: ignore[arg-type]  # op: 'and' | 'or'


def power(a: Val, b: Val, span: Span) -> Val:
    x, y = const(a.expr), const(b.expr)
    if x is not None and y is not None:
        if isinstance(y, int) and not isinstance(y, float) and abs(y) > 64 and abs(x) > 1:
            raise error(span, "constant power is too large")
        ea, eb, dtype = unify(a, b, span)
        try:
            value = x**y
        except (ArithmeticError, ValueError):
            raise error(span, "cannot evaluate this constant expression") from None
        if isinstance(value, complex):
            raise error(span, "negative number raised to a fractional power")
        if dtype.is_int and isinstance(value, float):
            dtype = DType.float32
        return Val(imm(value, dtype, span), a.weak and b.weak)
    if isinstance(y, int) and not isinstance(y, bool) and 1 <= y <= 4:
        result = a
        for _ in range(y - 1):
            result = binop("*", result, a, span)
        return result
    dtype = a.dtype if a.dtype.is_float else (b.dtype if b.dtype.is_float and not b.weak else DType.float32)
    return Val(tir.Call("pow", (cast(a, dtype, span), cast(b, dtype, span)), dtype, span), False)


def unary(op: str, a: Val, span: Span) -> Val:
    c = const(a.expr)
    if op == "+":
        return a
    if op == "not":
        if a.dtype != DType.bool:
            raise error(span, f"'not' needs a bool operand, got {a.dtype.tile_name}")
        if c is not None:
            return Val(tir.BoolImm(not c, DType.bool, span), a.weak)
        return Val(tir.UnaryOp("not", a.expr, DType.bool, span), False)
    if op == "~" and not a.dtype.is_int:
        raise error(span, f"'~' needs an integer operand, got {a.dtype.tile_name}")
    dtype = DType.int32 if a.dtype == DType.bool else a.dtype
    if c is not None:
        value = -c if op == "-" else ~int(c)
        if a.weak and isinstance(value, int):
            return literal(value, span)
        return Val(imm(value, dtype, span), a.weak)
    return Val(tir.UnaryOp(op, cast(a, dtype, span), dtype, span), False)  # type: ignore[arg-type]  # op: a surface operator (all are UnaryOpNames)


def select(cond: Val, a: Val, b: Val, span: Span) -> Val:
    if cond.dtype != DType.bool:
        raise error(
            cond.expr.span, f"condition must be a bool, got {cond.dtype.tile_name}", hint="compare it, e.g. x != 0"
        )
    c = const(cond.expr)
    ea, eb, dtype = unify(a, b, span)
    if c is not None:
        return Val(ea if c else eb, a.weak and b.weak)
    return Val(tir.Select(cond.expr, ea, eb, dtype, span), False)


# ---------------------------------------------------------------- math functions

_MATH = {
    "exp": math.exp,
    "exp2": lambda x: 2.0**x,
    "log": math.log,
    "log2": math.log2,
    "sqrt": math.sqrt,
    "rsqrt": lambda x: 1.0 / math.sqrt(x),
    "tanh": math.tanh,
    "sigmoid": lambda x: 1.0 / (1.0 + math.exp(-x)),
    "erf": math.erf,
    "floor": math.floor,
    "ceil": math.ceil,
}
MATH_FUNCS = tuple(_MATH)


def math_call(func: str, a: Val, span: Span) -> Val:
    if a.dtype.is_int or a.dtype == DType.bool:
        if not a.weak:
            raise error(
                span,
                f"{func}() needs a float argument, got {a.dtype.tile_name}",
                hint=f"convert it first: {func}(cast(x, float32))",
            )
        a = Val(cast(a, DType.float32, span), True)
    c = const(a.expr)
    if c is not None:
        try:
            return Val(imm(float(_MATH[func](c)), a.dtype, span), a.weak)
        except (ArithmeticError, ValueError):
            pass
    return Val(tir.Call(func, (a.expr,), a.dtype, span), False)


def minmax(func: str, args: list[Val], span: Span) -> Val:
    result = args[0]
    for b in args[1:]:
        ea, eb, dtype = unify(result, b, span)
        if dtype == DType.bool:
            raise error(span, f"{func}() needs numbers, not bool")
        x, y = const(ea), const(eb)
        if x is not None and y is not None:
            result = Val(imm(min(x, y) if func == "min" else max(x, y), dtype, span), result.weak and b.weak)
        else:
            result = Val(tir.Call(func, (ea, eb), dtype, span), False)
    return result


def absolute(a: Val, span: Span) -> Val:
    c = const(a.expr)
    if a.dtype == DType.bool:
        raise error(span, "abs() needs a number, not bool")
    if c is not None:
        return Val(imm(abs(c), a.dtype, span), a.weak)
    return Val(tir.Call("abs", (a.expr,), a.dtype, span), False)


def ceildiv(a: Val, b: Val, span: Span) -> Val:
    for v in (a, b):
        if not v.dtype.is_int:
            raise error(v.expr.span, f"ceildiv() needs integers, got {v.dtype.tile_name}")
    one = literal(1, span)
    return binop("//", binop("+", a, binop("-", b, one, span), span), b, span)


_LIMITS = {
    DType.float16: 65504.0,
    DType.bfloat16: 3.3895313892515355e38,
    DType.float32: 3.4028234663852886e38,
    DType.float64: 1.7976931348623157e308,
    DType.float8_e4m3: 448.0,
    DType.float8_e5m2: 57344.0,
    DType.float8_e4m3fnuz: 240.0,
    DType.float8_e5m2fnuz: 57344.0,
    DType.float4_e2m1: 6.0,
}


def limit(func: str, dtype: DType, span: Span) -> Val:
    """infinity / max_value / min_value of a dtype."""
    if func == "infinity":
        if dtype == DType.float4_e2m1:
            raise error(span, "float4_e2m1 has no infinity", hint="use max_value(float4_e2m1), 6.0")
        if not dtype.is_float:
            raise error(
                span, f"infinity() needs a float type, not {dtype.tile_name}", hint="use max_value(dtype) for integers"
            )
        return Val(tir.FloatImm(math.inf, dtype, span))
    sign = 1 if func == "max_value" else -1
    value = dtype.value_type if dtype.is_subbyte else dtype  # a sub-byte type's limits as its elements read
    if dtype.is_float:
        return Val(tir.FloatImm(sign * _LIMITS[dtype], value, span))
    if dtype == DType.bool:
        return Val(tir.BoolImm(sign > 0, dtype, span))
    lo, hi = dtype.int_bounds
    return Val(tir.IntImm(hi if sign > 0 else lo, value, span))


# ---------------------------------------------------------------- linear forms


def linear(e: tir.Expr) -> tuple[dict[object, int], int] | None:
    """`e` as sum(coeff * atom) + constant, for integer expressions."""
    if isinstance(e, tir.IntImm):
        return {}, e.value
    if isinstance(e, tir.BinOp) and e.op in ("+", "-"):
        a, b = linear(e.a), linear(e.b)
        if a is None or b is None:
            return None
        s = 1 if e.op == "+" else -1
        terms = dict(a[0])
        for k, v in b[0].items():
            terms[k] = terms.get(k, 0) + s * v
        return terms, a[1] + s * b[1]
    if isinstance(e, tir.BinOp) and e.op == "*":
        for x, y in ((e.a, e.b), (e.b, e.a)):
            c = const(x)
            if isinstance(c, int):
                inner = linear(y)
                if inner is None:
                    return None
                return {k: c * v for k, v in inner[0].items()}, c * inner[1]
    if isinstance(e, tir.UnaryOp) and e.op == "-":
        inner = linear(e.a)
        if inner is None:
            return None
        return {k: -v for k, v in inner[0].items()}, -inner[1]
    try:
        hash(e)
    except TypeError:
        return None
    return {e: 1}, 0


def difference(hi: tir.Expr, lo: tir.Expr) -> int | None:
    """hi - lo when it is a constant (e.g. (bx + 1) * 64 - bx * 64 = 64)."""
    a, b = linear(hi), linear(lo)
    if a is None or b is None:
        return None
    keys = set(a[0]) | set(b[0])
    if any(a[0].get(k, 0) != b[0].get(k, 0) for k in keys):
        return None
    return a[1] - b[1]
