"""Integer index simplification.

Lowering builds index arithmetic mechanically (`(k * 32 + 0) * K + (tx % 8) * 8`);
this module brings it to a canonical, readable form before it is printed:
constants folded, linear terms collected (`k * 32 * K + tx % 8 * 8`), and
`//` / `%` by a constant removed where every term divides evenly. A factor
common to a dividend and its divisor divides out (`i * 32 / 64` -> `i / 2`),
`x / k * k + x % k` in a dividend is `x`, and a `%` of a value already below
its divisor goes (`tx % 8 / 2 % 4` -> `tx % 8 / 2`).

It works on `tir` expressions and knows nothing of layouts. Constants fold as
C computes them (`-7 / 2` is -3), and so do the `//` and `%` rules: a dividend
splits into whole multiples of the divisor and a constant remainder only where
the remainder divides evenly or the dividend's form is not negative (a positive
constant, positive coefficients); `(k * 4 - 17) // 4` stays as written, since
it is -4 at k = 0 in C, not k - 5. Atoms (index values: thread, block and loop
indices, dimensions) are taken as not negative; a program's own negative
values in a let (`d = i - 5`, then `(d * 4 + 1) // 4`) are not told apart.
"""

from __future__ import annotations

import math

from tilec import tir
from tilec.dtypes import DType
from tilec.fold import c_div, c_mod

Linear = tuple[dict[tir.Expr, int], int]  # {atom: coefficient}, constant

_INT = DType.int32


def const(e: tir.Expr) -> int | None:
    return e.value if isinstance(e, tir.IntImm) else None


def int_(v: int) -> tir.IntImm:
    return tir.IntImm(v, _INT)


def add(a: tir.Expr, b: tir.Expr) -> tir.Expr:
    return simplify(tir.BinOp("+", a, b, a.dtype))


def mul(a: tir.Expr, b: tir.Expr | int) -> tir.Expr:
    if isinstance(b, int):
        b = int_(b)
    return simplify(tir.BinOp("*", a, b, a.dtype))


# Within one `simplify`: the nodes it built from a linear form (id -> node, form), so that a parent
# reads its children's forms instead of decomposing their subtrees again (quadratic in depth).
Built = dict[int, tuple[tir.Expr, Linear]]


def _linear(e: tir.Expr, built: Built | None = None) -> Linear | None:
    """Decompose an int32 expression into a linear form, or None."""
    if built and (hit := built.get(id(e))) is not None and hit[0] is e:
        return hit[1]
    if isinstance(e, tir.IntImm):
        return {}, e.value
    if isinstance(e, tir.UnaryOp) and e.op == "-" and e.dtype.is_int:  # as _build writes -(k * 512) + 7680
        la = _linear(e.a, built)
        return None if la is None else scale(la, -1)
    if isinstance(e, tir.BinOp) and e.op in ("+", "-", "*") and e.dtype.is_int:
        la, lb = _linear(e.a, built), _linear(e.b, built)
        if la is None or lb is None:
            return None
        if e.op == "+":
            return combine(la, lb, 1)
        if e.op == "-":
            return combine(la, lb, -1)
        if not la[0]:
            return scale(lb, la[1])
        if not lb[0]:
            return scale(la, lb[1])
        return {e: 1}, 0  # a product of two unknowns is one atom (bx * N)
    if e.dtype.is_int:
        return {e: 1}, 0
    return None


def combine(a: Linear, b: Linear, sign: int) -> Linear:
    """a + sign * b, terms whose coefficients cancel dropped."""
    terms = dict(a[0])
    for atom, c in b[0].items():
        terms[atom] = terms.get(atom, 0) + sign * c
    return {k: v for k, v in terms.items() if v}, a[1] + sign * b[1]


def scale(a: Linear, k: int) -> Linear:
    """k * a."""
    if k == 0:
        return {}, 0
    return {atom: c * k for atom, c in a[0].items()}, a[1] * k


def _build(lin: Linear, dtype: DType) -> tir.Expr:
    terms, c = lin
    out: tir.Expr | None = None
    if c > 0 and terms and all(coef < 0 for coef in terms.values()):
        out, c = tir.IntImm(c, dtype), 0  # 127 - k rather than -k + 127
    for atom, coef in terms.items():
        term = atom if abs(coef) == 1 else tir.BinOp("*", atom, int_(abs(coef)), dtype)
        if out is None:
            out = term if coef > 0 else tir.UnaryOp("-", term, dtype)
        else:
            out = tir.BinOp("+" if coef > 0 else "-", out, term, dtype)
    if out is None:
        return tir.IntImm(c, dtype)
    if c > 0:
        out = tir.BinOp("+", out, tir.IntImm(c, dtype), dtype)
    elif c < 0:
        out = tir.BinOp("-", out, tir.IntImm(-c, dtype), dtype)
    return out


def _divmod(e: tir.BinOp, a: tir.Expr, b: tir.Expr) -> tir.Expr:
    d = const(b)
    if d is not None and d > 0 and isinstance(a, tir.BinOp) and isinstance(a.b, tir.IntImm) and a.b.value > 0:
        inner = a.b.value
        if e.op == "%" and a.op == "%" and inner % d == 0:
            return _divmod(e, a.a, b)  # x % 32 % 16 = x % 16
        if e.op == "//" and a.op == "//":
            return _divmod(e, a.a, int_(inner * d))  # x / 32 / 2 = x / 64
    limit = _limit(a)
    if e.op == "%" and d is not None and d > 0 and limit is not None and limit <= d:
        return a  # tx % 8 / 2 % 4 = tx % 8 / 2: already below 4
    ca = const(a)
    if d is not None and ca is not None and d != 0:
        return int_(c_div(ca, d) if e.op == "//" else c_mod(ca, d))
    if d == 1:
        return a if e.op == "//" else int_(0)
    lin = _linear(a)
    if d is not None and d > 0 and lin is not None:
        terms, c = _merge_quotient_remainder(lin)
        if all(coef % d == 0 for coef in terms.values()) and _splits(terms, c, d):
            if e.op == "//":
                return _build(({k: v // d for k, v in terms.items()}, c // d), e.dtype)
            return int_(c % d)
        g = math.gcd(d, c, *terms.values())
        if g > 1:  # x * 32 / 64 = x / 2, x * 32 % 64 = x % 2 * 32
            reduced = _build(({k: v // g for k, v in terms.items()}, c // g), e.dtype)
            part = _divmod(tir.BinOp(e.op, reduced, int_(d // g), e.dtype, e.span), reduced, int_(d // g))
            return part if e.op == "//" else simplify(tir.BinOp("*", part, int_(g), e.dtype))
        if (terms, c) != lin:
            a = _build((terms, c), e.dtype)
    return tir.BinOp(e.op, a, b, e.dtype, e.span)


def _splits(terms: dict[tir.Expr, int], c: int, d: int) -> bool:
    """Whether `(sum of terms + c) / d` is `sum of terms / d + c / d` (and its `%` is `c % d`) where d
    divides every coefficient: always when d divides c too; otherwise only for a dividend that is
    not negative (C rounds toward zero: `(k * 4 - 17) / 4` is -4 at k = 0, not k - 5), which the
    form shows when c and every coefficient are positive (atoms, index values, are not negative)."""
    return c % d == 0 or (c > 0 and all(coef > 0 for coef in terms.values()))


def _limit(e: tir.Expr) -> int | None:
    """A bound that a nonnegative expression stays below, read off its form (`x % 8 / 2` < 4), or None."""
    match e:
        case tir.IntImm(v) if v >= 0:
            return v + 1
        case tir.BinOp("%", _, tir.IntImm(m)) if m > 0:
            return m
        case tir.BinOp("//", a, tir.IntImm(k)) if k > 0:
            la = _limit(a)
            return None if la is None else (la - 1) // k + 1
        case _:
            return None


def _merge_quotient_remainder(lin: Linear) -> Linear:
    """x / k * k + x % k = x (C's / and % satisfy it for every sign), scaled:
    the dividend of `(tx / 16 * 16 + tx % 16) / 8` is tx."""
    terms, c = dict(lin[0]), lin[1]
    for atom, coef in lin[0].items():
        if not (isinstance(atom, tir.BinOp) and atom.op == "%" and isinstance(atom.b, tir.IntImm)):
            continue
        quotient = tir.BinOp("//", atom.a, atom.b, atom.dtype)
        x = _linear(atom.a)
        if x is None or terms.get(atom) != coef or terms.get(quotient) != coef * atom.b.value:
            continue
        del terms[atom], terms[quotient]
        merged = combine((terms, c), scale(x, coef), 1)
        terms, c = dict(merged[0]), merged[1]
    return terms, c


_LEAVES = frozenset({tir.IntImm, tir.Var, tir.FloatImm, tir.BoolImm})


def simplify(e: tir.Expr) -> tir.Expr:
    """Canonical form of an expression (int math normalized, constants folded)."""
    return _simplify(e, {})


def _simplify(e: tir.Expr, built: Built) -> tir.Expr:
    if type(e) in _LEAVES:  # most calls: taken before the `match` tries every other class
        return e
    match e:
        case tir.BinOp(op, a, b, dtype):
            a, b = _simplify(a, built), _simplify(b, built)
            if dtype.is_int and op in ("+", "-", "*"):
                lin = _linear(tir.BinOp(op, a, b, dtype), built)
                if lin is not None:
                    out = _build(lin, dtype)
                    built[id(out)] = (out, lin)
                    return out
            if dtype.is_int and op in ("//", "%"):
                return _divmod(e, a, b)
            if (
                op in ("<", "<=", ">", ">=", "==", "!=")
                and (ca := const(a)) is not None
                and (cb := const(b)) is not None
            ):
                return tir.BoolImm(_compare(op, ca, cb))
            if op == "and":
                if isinstance(a, tir.BoolImm):
                    return b if a.value else a
                if isinstance(b, tir.BoolImm):
                    return a if b.value else b
            if op == "or":
                if isinstance(a, tir.BoolImm):
                    return a if a.value else b
                if isinstance(b, tir.BoolImm):
                    return b if b.value else a
            return tir.BinOp(op, a, b, dtype, e.span)
        case tir.UnaryOp(op, a, dtype):
            a = _simplify(a, built)
            if op == "-" and isinstance(a, tir.IntImm):
                return tir.IntImm(-a.value, dtype)
            if op == "not" and isinstance(a, tir.BoolImm):
                return tir.BoolImm(not a.value)
            return tir.UnaryOp(op, a, dtype, e.span)
        case tir.Select(cond, a, b, dtype):
            cond = _simplify(cond, built)
            if isinstance(cond, tir.BoolImm):
                return _simplify(a, built) if cond.value else _simplify(b, built)
            return tir.Select(cond, _simplify(a, built), _simplify(b, built), dtype, e.span)
        case tir.Cast(value, dtype):
            value = _simplify(value, built)
            if value.dtype == dtype:
                return value
            if isinstance(value, tir.IntImm) and dtype.is_int:
                return tir.IntImm(value.value, dtype)
            return tir.Cast(value, dtype, e.span)
        case tir.Call(func, args, dtype):
            return tir.Call(func, tuple(_simplify(x, built) for x in args), dtype, e.span)
        case tir.Load(buffer, indices):
            return tir.Load(buffer, tuple(_simplify(x, built) for x in indices), e.span)
        case _:
            return e


def linear(e: tir.Expr) -> Linear | None:
    """The linear form ({atom: coefficient}, constant) of an int expression, or None."""
    return _linear(simplify(e))


def from_linear(lin: Linear, dtype: DType = _INT) -> tir.Expr:
    """The expression of a linear form (the inverse of `linear`)."""
    return _build(lin, dtype)


def _compare(op: str, a: int, b: int) -> bool:
    return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "==": a == b, "!=": a != b}[op]


def divides(e: tir.Expr, d: int) -> bool:
    """True if `e` is provably a multiple of `d` (every term and the constant)."""
    return residue(e, d) == 0


def residue(e: tir.Expr, d: int) -> int | None:
    """The r in [0, d) with `e` provably congruent to r modulo `d` (every term a multiple of d), or None."""
    lin = _linear(simplify(e))
    if lin is None or any(coef % d for coef in lin[0].values()):
        return None
    return lin[1] % d


def gcd_of(e: tir.Expr) -> int:
    """The largest constant provably dividing `e` (0 for the constant 0)."""
    lin = _linear(simplify(e))
    if lin is None:
        return 1
    terms, c = lin
    g = c
    for coef in terms.values():
        g = math.gcd(g, coef)
    return abs(g)


def substitute(e: tir.Expr, mapping: dict[tir.Var, tir.Expr]) -> tir.Expr:
    """Replace variables (by identity) in an expression."""
    match e:
        case tir.Var():
            return mapping.get(e, e)
        case tir.BinOp(op, a, b, dtype):
            return tir.BinOp(op, substitute(a, mapping), substitute(b, mapping), dtype, e.span)
        case tir.UnaryOp(op, a, dtype):
            return tir.UnaryOp(op, substitute(a, mapping), dtype, e.span)
        case tir.Select(c, a, b, dtype):
            return tir.Select(substitute(c, mapping), substitute(a, mapping), substitute(b, mapping), dtype, e.span)
        case tir.Cast(v, dtype):
            return tir.Cast(substitute(v, mapping), dtype, e.span)
        case tir.Call(f, args, dtype):
            return tir.Call(f, tuple(substitute(x, mapping) for x in args), dtype, e.span)
        case tir.Load(buf, idx):
            return tir.Load(buf, tuple(substitute(x, mapping) for x in idx), e.span)
        case _:
            return e
