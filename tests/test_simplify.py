"""Index simplification: canonical forms, and agreement with integer evaluation."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from tilec import tir
from tilec.dtypes import DType
from tilec.emit import expr_text
from tilec.simplify import _build, _linear, divides, gcd_of, int_, simplify

I32 = DType.int32
tx = tir.Var("tx", I32, "thread")
k = tir.Var("k", I32, "loop")


def b(op: str, a: tir.Expr, c: tir.Expr | int) -> tir.Expr:
    return tir.BinOp(op, a, int_(c) if isinstance(c, int) else c, I32)


def evaluate(e: tir.Expr, env: dict[str, int]) -> int:
    match e:
        case tir.IntImm(v):
            return v
        case tir.Var(name):
            return env[name]
        case tir.UnaryOp("-", a):
            return -evaluate(a, env)
        case tir.BinOp(op, x, y):
            va, vb = evaluate(x, env), evaluate(y, env)
            ops = {"+": int.__add__, "-": int.__sub__, "*": int.__mul__, "//": int.__floordiv__, "%": int.__mod__}
            return ops[op](va, vb)
    raise AssertionError(e)


def test_linear_terms_are_collected() -> None:
    e = b("+", b("*", b("+", k, 0), 32), b("*", b("+", tx, 1), 8))
    assert expr_text(simplify(e)) == "k * 32 + tx * 8 + 8"


def test_nested_mod_and_div_fold() -> None:
    assert expr_text(simplify(b("%", b("%", tx, 32), 16))) == "tx % 16"
    assert expr_text(simplify(b("//", b("//", tx, 32), 2))) == "tx / 64"
    assert expr_text(simplify(b("%", b("%", tx, 16), 32))) == "tx % 16"  # already below 32
    assert expr_text(simplify(b("%", b("//", b("%", tx, 8), 2), 4))) == "tx % 8 / 2"
    assert expr_text(simplify(b("%", b("//", b("%", tx, 16), 2), 4))) == "tx % 16 / 2 % 4"  # can reach 7: kept


def test_common_factor_of_dividend_and_divisor_divides_out() -> None:
    assert expr_text(simplify(b("//", b("*", k, 32), 64))) == "k / 2"
    assert expr_text(simplify(b("%", b("*", k, 32), 64))) == "k % 2 * 32"
    assert expr_text(simplify(b("//", b("*", b("//", tx, 4), 32), 64))) == "tx / 8"
    assert expr_text(simplify(b("//", b("+", b("*", k, 32), 16), 64))) == "(k * 2 + 1) / 4"


def test_quotient_and_remainder_recombine_in_a_dividend() -> None:
    swizzle_row = b("+", b("*", b("//", tx, 16), 128), b("*", b("%", tx, 16), 8))
    assert expr_text(simplify(b("//", swizzle_row, 64))) == "tx / 8"
    assert expr_text(simplify(swizzle_row)) == "tx / 16 * 128 + tx % 16 * 8"  # outside a division: kept


def test_division_of_multiples() -> None:
    assert expr_text(simplify(b("//", b("+", b("*", k, 64), 128), 64))) == "k + 2"
    assert divides(b("+", b("*", k, 64), b("*", tx, 8)), 8)
    assert not divides(b("+", b("*", k, 64), tx), 8)


def test_reversed_index_reads_naturally() -> None:
    assert expr_text(simplify(b("-", int_(127), k))) == "127 - k"


def test_simplify_preserves_value_on_random_expressions() -> None:
    rng = random.Random(7)
    for _ in range(300):
        e: tir.Expr = rng.choice([tx, k, int_(rng.randrange(1, 9))])
        for _ in range(rng.randrange(1, 6)):
            op = rng.choice(["+", "*", "//", "%"])
            other = int_(rng.choice([1, 2, 4, 8, 16, 32])) if op in ("//", "%") else rng.choice([tx, k, int_(3)])
            e = b(op, e, other) if rng.random() < 0.7 else b(op, other, e) if op in "+*" else b(op, e, other)
        env = {"tx": rng.randrange(0, 256), "k": rng.randrange(0, 64)}
        assert evaluate(simplify(e), env) == evaluate(e, env), expr_text(e)


# ---------------------------------------------------------------- against C's truncating / and %

j = tir.Var("j", I32, "loop")
DIVISORS = (1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 16, 32, 64)
LEAVES = st.one_of(
    st.sampled_from((tx, k, j)), st.sampled_from((0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 24, 32, 128)).map(int_)
)


def _c_div(a: int, c: int) -> int:
    """C's `/` on ints: the quotient truncated toward zero."""
    q = abs(a) // abs(c)
    return q if (a >= 0) == (c > 0) else -q


def c_evaluate(e: tir.Expr, env: dict[str, int], values: list[int] | None = None) -> int:
    """`e`'s value as the generated C computes it (`/` and `%` truncate); every
    subexpression's value is appended to `values` when given."""
    match e:
        case tir.IntImm(v):
            out = v
        case tir.Var(name):
            out = env[name]
        case tir.UnaryOp("-", a):
            out = -c_evaluate(a, env, values)
        case tir.BinOp(op, x, y):
            va, vb = c_evaluate(x, env, values), c_evaluate(y, env, values)
            quotient = _c_div(va, vb) if op in ("//", "%") else 0
            out = {"+": va + vb, "-": va - vb, "*": va * vb, "//": quotient, "%": va - vb * quotient}[op]
        case _:
            raise AssertionError(e)
    if values is not None:
        values.append(out)
    return out


def _extend(inner: st.SearchStrategy[tir.Expr]) -> st.SearchStrategy[tir.Expr]:
    """`a op b` over smaller expressions: by a positive constant for / and %, by a
    constant or an expression for *."""
    by_constant = st.tuples(st.sampled_from(("//", "%", "*")), inner, st.sampled_from(DIVISORS).map(int_))
    by_expr = st.tuples(st.sampled_from(("+", "-", "*")), inner, inner)
    return st.one_of(by_constant, by_expr).map(lambda t: b(t[0], t[1], t[2]))


ENVS = st.lists(
    st.fixed_dictionaries({"tx": st.integers(0, 299), "k": st.integers(0, 39), "j": st.integers(0, 8)}),
    min_size=8,
    max_size=8,
)


@settings(max_examples=250, deadline=None)
@given(st.recursive(LEAVES, _extend, max_leaves=12), ENVS)
def test_simplify_agrees_with_c_division_where_every_index_is_nonnegative(
    e: tir.Expr, envs: list[dict[str, int]]
) -> None:
    # simplify.py's premise: every index value in generated code is nonnegative. Where the
    # original expression keeps to it, the simplified one computes the same value in C
    # (its own subexpressions may go negative, where truncation differs from floor division).
    simple = simplify(e)
    for env in envs:
        values: list[int] = []
        want = c_evaluate(e, env, values)
        if min(values) >= 0:
            assert c_evaluate(simple, env) == want, f"{expr_text(e)} -> {expr_text(simple)} at {env}"


def test_gcd_of_reads_a_negated_leading_term() -> None:
    # simplify writes k * -512 + 7680 as -(k * 512) + 7680 (a reversed loop's column, RMSNorm's
    # second pass): its chunks are still 4-aligned, so the copy stays vectorized
    k, tx = tir.Var("k", I32, "loop"), tir.Var("tx", I32, "thread")
    e = simplify(
        tir.BinOp(
            "+", tir.BinOp("*", tir.BinOp("-", int_(15), k, I32), int_(512), I32), tir.BinOp("*", tx, int_(4), I32), I32
        )
    )
    assert isinstance(e, tir.BinOp) and gcd_of(e) == 4
    assert gcd_of(tir.UnaryOp("-", tir.BinOp("*", k, int_(512), I32), I32)) == 512


def test_constants_fold_as_c_divides_them() -> None:
    # C's quotient rounds toward zero and its remainder keeps the dividend's sign (language.md)
    i32 = tir.IntImm(0).dtype
    for a, b, q, r in ((-7, 2, -3, -1), (7, -2, -3, 1), (-7, -2, 3, -1), (7, 2, 3, 1), (-8, 2, -4, 0)):
        assert simplify(tir.BinOp("//", tir.IntImm(a), tir.IntImm(b), i32)) == tir.IntImm(q)
        assert simplify(tir.BinOp("%", tir.IntImm(a), tir.IntImm(b), i32)) == tir.IntImm(r)


def _split_candidate(t: tuple[str, int, list[int], int]) -> tir.Expr:
    """`(c_tx * tx + c_k * k + c) op d` with the coefficients multiples of d: the form whose
    dividend splits into multiples of d and a remainder."""
    op, d, coefs, c = t
    dividend: tir.Expr = int_(c)
    for atom, m in zip((tx, k), coefs):
        dividend = b("+", b("*", atom, m * d), dividend)
    return b(op, dividend, d)


SPLIT_CANDIDATES = st.tuples(
    st.sampled_from(("//", "%")),
    st.sampled_from(DIVISORS[1:]),
    st.lists(st.integers(-3, 3), min_size=2, max_size=2),
    st.integers(-40, 40),
).map(_split_candidate)


@settings(max_examples=400, deadline=None)
@given(st.one_of(SPLIT_CANDIDATES, st.recursive(LEAVES, _extend, max_leaves=12)), ENVS)
def test_simplify_agrees_with_c_division_on_a_programs_own_negative_values(
    e: tir.Expr, envs: list[dict[str, int]]
) -> None:
    # A program's own index math may go negative between its nonnegative indices
    # (`(k * 4 - 17) // 4`): C truncates there, and the simplified form must compute the same.
    simple = simplify(e)
    for env in envs:
        assert c_evaluate(simple, env) == c_evaluate(e, env), f"{expr_text(e)} -> {expr_text(simple)} at {env}"


def test_a_negative_remainder_is_not_split_off() -> None:
    # (k * 4 - 17) / 4 is -4 at k = 0 in C (k - 5 would be -5), and its % is -1 there, not 3
    for op in ("//", "%"):
        e = b(op, b("-", b("*", k, 4), 17), 4)
        assert expr_text(simplify(e)) == expr_text(e)
    assert expr_text(simplify(b("//", b("-", b("*", k, 8), 16), 4))) == "k * 2 - 4"  # an exact remainder splits
    assert expr_text(simplify(b("//", b("+", b("*", k, 8), 3), 4))) == "k * 2"  # a nonnegative dividend splits


@settings(max_examples=300, deadline=None)
@given(st.recursive(LEAVES, _extend, max_leaves=12))
def test_a_built_form_decomposes_into_the_form_it_was_built_from(e: tir.Expr) -> None:
    # simplify remembers, within one call, the linear form each node it built came from, and a
    # parent reads that instead of decomposing the node again: sound only if the two agree.
    lin = _linear(simplify(e))
    if lin is not None:
        assert _linear(_build(lin, I32)) == lin
