"""Exact small-integer conversions (lower/exprs.py): `int_range` bounds every value an integer
expression takes (checked by evaluating random expressions at every point of their variables'
ranges), and the conversion helper's bit trick gives float(v + lo) exactly over its domain."""

from __future__ import annotations

import itertools
import pathlib
import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from tilec import thread_ir as T
from tilec import tir
from tilec.dtypes import DType
from tilec.elaborate import elaborate_file
from tilec.lower.cexpr import I32
from tilec.lower.context import new_context
from tilec.lower.exprs import int_range
from tilec.passes.infer_layouts import infer_layouts
from tilec.passes.select import select
from tilec.simplify import int_
from tilec.targets import get_target

ROOT = pathlib.Path(__file__).resolve().parent.parent
BYTE = T.Subscript("P_s", (int_(0),), DType.uint8)  # a loaded uint8: 0..255
COUNTER = tir.Var("e1", I32, "thread")  # a lane counter: 0..7


def _context():
    target = get_target("sm_80")
    (kernel,) = select(elaborate_file(str(ROOT / "examples" / "dequant_gemm.tile"), {}), target).kernels
    kernel, layouts = infer_layouts(kernel, target)
    ctx = new_context(kernel, layouts, target)
    ctx.state.bounds[COUNTER] = 7
    return ctx


def _eval(e: tir.Expr, env: dict[str, int]) -> int:
    match e:
        case tir.IntImm(v):
            return v
        case tir.Var(name):
            return env[name]
        case T.Subscript():
            return env["byte"]
        case tir.Cast(v):
            return _eval(v, env)
        case tir.BinOp(op, a, b):
            x, y = _eval(a, env), _eval(b, env)
            if op in ("%", "//"):
                q = int(x / y)  # C: toward zero
                return q if op == "//" else x - q * y
            return {"+": x + y, "-": x - y, "*": x * y, "&": x & y, ">>": x >> y}[op]
    raise TypeError(e)


LEAVES = st.sampled_from([BYTE, COUNTER, int_(4), int_(15), int_(8), int_(-3)])


def _tree(children):
    ops = st.sampled_from(["+", "-", "*", "&", ">>", "%", "//"])
    return st.builds(lambda op, a, b: tir.BinOp(op, a, b, I32), ops, children, children)


EXPRS = st.recursive(LEAVES, _tree, max_leaves=5)


@settings(max_examples=200, deadline=None)
@given(EXPRS)
def test_int_range_bounds_every_value(e: tir.Expr) -> None:
    r = int_range(_context(), e)
    if r is None:
        return
    for byte, lane in itertools.product(range(256), range(8)):
        try:
            v = _eval(e, {"byte": byte, "e1": lane})
        except (ZeroDivisionError, ValueError):  # undefined in C (a division by 0, a negative shift)
            continue  # inside a masked operand, whose range does not depend on it
        assert r[0] <= v <= r[1], (e, byte, lane, v, r)


def test_the_unpacked_code_is_bounded() -> None:
    """The dequant example's 4-bit code, (byte >> (j % 2 * 4)) & 15, lies in [0, 15]."""
    shift = tir.BinOp("*", tir.BinOp("%", COUNTER, int_(2), I32), int_(4), I32)
    code = tir.BinOp("&", tir.BinOp(">>", tir.Cast(BYTE, DType.int32), shift, I32), int_(15), I32)
    ctx = _context()
    assert int_range(ctx, code) == (0, 15)
    assert int_range(ctx, tir.BinOp("-", code, int_(8), I32)) == (-8, 7)


def _helper(v: int, lo: int) -> float:
    """tilec_small_int_to_float in float32 arithmetic: bits 0x4B000000 | v, minus (2^23 - lo)."""
    f32 = struct.unpack("<f", struct.pack("<I", 0x4B000000 | v))[0]
    sub = struct.unpack("<f", struct.pack("<f", 8388608.0 - lo))[0]
    return struct.unpack("<f", struct.pack("<f", f32 - sub))[0]


def test_the_conversion_helper_is_exact() -> None:
    for lo in (-2048, -128, -8, 0, 5):
        for v in list(range(4096)) + [(1 << 23) - 1, (1 << 22) + 12345]:
            assert _helper(v, lo) == float(v + lo)
