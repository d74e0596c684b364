"""Index simplification: canonical forms, and agreement with integer evaluation."""

from __future__ import annotations

import random

from tilec import tir
from tilec.dtypes import DType
from tilec.emit import expr_text
from tilec.simplify import divides, int_, simplify

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
