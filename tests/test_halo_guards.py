"""Copies guarded on every edge (issue 13): property tests over random tile offsets, negative ones
included, constant or symbolic (a scalar argument).

Each case compiles a copy global -> shared -> global whose tiles start at `b * tile + offset`, then
runs its Thread IR in a small interpreter for every block and thread of the grid, recording each
element a read or a write of a tensor touches. Every access must lie inside its tensor, and each
block must write exactly the in-range elements of its tile and read all of them (so a guard that is
too strict fails too). A read whose columns start at a constant offset off a 16-byte chunk may read
the rest of the chunks it touches (in the tensor): the shared tile is then shifted so that whole
chunks land in it (`Layouts.shift`). A tensor index is split into its row and column by evaluating
it at two row strides (it is `row * N + col`), so a column -1 read as the previous row's last
element is caught as column -1.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilec import thread_ir as T
from tilec import tir
from tilec.driver import compile_program_text
from tilec.elaborate import elaborate_file
from tilec.pipeline import run_passes

PROGRAM = """
kernel halo(A: Tensor((M, N), float16), B: Tensor((M, N), float16), o: int32):
    with Kernel(ceildiv(N, {tn}), ceildiv(M, {tm}), threads=32) as (bx, by):
        A_s = alloc_shared(({tm}, {tn}), float16)
        copy(A[by * {tm} + {row}, bx * {tn} + {col}], A_s)
        copy(A_s, B[by * {tm} + {row2}, bx * {tn} + {col2}])
"""

STRIDE_STEP = 1000  # the second row stride the tensor indices are evaluated at
CHUNK = 8  # float16 elements in 16 bytes
_BUILTINS = {"thread_index": "tx", "block_index_x": "bx", "block_index_y": "by"}


@dataclass(frozen=True)
class Case:
    tile: tuple[int, int]
    row: str  # the tiles' row offset in the source text: "-3", "o + 2", ...
    col: str
    row2: str
    col2: str
    arch: str = "sm_80"

    def kernel(self) -> T.Kernel:
        tm, tn = self.tile
        text = PROGRAM.format(tm=tm, tn=tn, row=self.row, col=self.col, row2=self.row2, col2=self.col2)
        (unit,) = run_passes(elaborate_file("halo.tile", text=text, arch=self.arch), self.arch)
        assert unit.lowered is not None
        return unit.lowered


@dataclass
class Run:
    """The environment of one thread and the tensor elements it touched."""

    env: dict[str, int]
    touched: dict[str, set[tuple[int, int]]] = field(default_factory=lambda: {"A": set(), "B": set()})


def value(e: object, run: Run) -> int:
    """The value of a Thread IR expression (C's integer semantics); loads of tensors are recorded,
    every value read from memory is 0 (only indices and conditions matter here)."""
    match e:
        case tir.IntImm(v) | tir.BoolImm(v):
            return int(v)
        case tir.FloatImm():
            return 0
        case tir.Var(name):
            return run.env[name]
        case T.Builtin(name):
            return run.env[_BUILTINS[name]]
        case T.Intrin("address"):
            return 0  # tensors are 16-byte aligned
        case T.Subscript() | T.VecRef():
            touch(e, run)
            return 0
        case tir.Cast(v):
            return value(v, run)
        case tir.Select(c, a, b):
            return value(a, run) if value(c, run) else value(b, run)
        case tir.UnaryOp(op, a):
            v = value(a, run)
            return {"-": -v, "not": int(not v), "~": ~v}[op]
        case tir.Call("min" | "max" as f, args):
            return (min if f == "min" else max)(value(x, run) for x in args)
        case tir.BinOp(op, a, b):
            return _binop(op, a, b, run)
    raise TypeError(f"the interpreter has no case for {e!r}")


def _binop(op: str, a: object, b: object, run: Run) -> int:
    if op == "and":
        return int(bool(value(a, run)) and bool(value(b, run)))
    if op == "or":
        return int(bool(value(a, run)) or bool(value(b, run)))
    return int(_INT_OPS[op](value(a, run), value(b, run)))


_INT_OPS = {
    "+": lambda x, y: x + y,
    "-": lambda x, y: x - y,
    "*": lambda x, y: x * y,
    "//": lambda x, y: int(x / y),  # C: toward zero
    "%": lambda x, y: x - int(x / y) * y,
    "<": lambda x, y: x < y,
    "<=": lambda x, y: x <= y,
    ">": lambda x, y: x > y,
    ">=": lambda x, y: x >= y,
    "==": lambda x, y: x == y,
    "!=": lambda x, y: x != y,
    "&": lambda x, y: x & y,
    "|": lambda x, y: x | y,
    "^": lambda x, y: x ^ y,
    "<<": lambda x, y: x << y,
    ">>": lambda x, y: x >> y,
}


def touch(ref: T.Subscript | T.VecRef, run: Run) -> None:
    """Record the elements of a tensor that a scalar or vector access touches, as (row, column)."""
    sub, count = (ref.target, ref.bytes // ref.target.dtype.bytes) if isinstance(ref, T.VecRef) else (ref, 1)
    if sub.array not in run.touched:
        return
    flat = value(sub.indices[0], run)
    wider = Run({**run.env, "N": run.env["N"] + STRIDE_STEP})
    row = (value(sub.indices[0], wider) - flat) // STRIDE_STEP
    col = flat - row * run.env["N"]
    run.touched[sub.array] |= {(row, col + k) for k in range(count)}


def execute(stmts: tuple[T.Stmt, ...], run: Run) -> None:
    """Run the statements of one thread (barriers and comments do nothing here)."""
    for s in stmts:
        match s:
            case T.Decl(name, init=init, dims=()) if init is not None:
                run.env[name] = value(init, run)
            case T.Scope(body=body):
                execute(body, run)
            case T.IfThen(cond, then, orelse):
                execute(then if value(cond, run) else orelse, run)
            case T.Loop(var, start, stop, step, body=body):
                for i in range(value(start, run), value(stop, run), step):
                    execute(body, Run({**run.env, var.name: i}, run.touched))
            case T.Assign(target, v):
                value(v, run)
                if isinstance(target, (T.Subscript, T.VecRef)):
                    touch(target, run)
            case T.Decl() | T.SharedView() | T.Comment() | T.Barrier():
                pass
            case _:
                raise TypeError(f"the interpreter has no case for {s!r}")


def expected(start: int, extent: int, dim: int) -> range:
    """The in-range indices of a tile's dimension."""
    return range(max(start, 0), min(start + extent, dim))


def offset(text: str, o: int) -> int:
    return eval(text, {"o": o})  # noqa: S307 - the test's own offset texts


def violations(case: Case, M: int, N: int, o: int) -> Iterator[str]:
    """What is wrong with the accesses of every block of `case` on an (M, N) tensor."""
    kernel = case.kernel()
    tm, tn = case.tile
    for by in range(math.ceil(M / tm)):
        for bx in range(math.ceil(N / tn)):
            block = {"A": set(), "B": set()}
            for tx in range(kernel.threads):
                run = Run({"M": M, "N": N, "o": o, "tx": tx, "bx": bx, "by": by}, block)
                execute(kernel.body, run)
            for name, row, col in (("A", case.row, case.col), ("B", case.row2, case.col2)):
                rows = expected(by * tm + offset(row, o), tm, M)
                first = bx * tn + offset(col, o)
                want = {(r, c) for r in rows for c in expected(first, tn, N)}
                allowed = want
                if name == "A" and "o" not in col:  # a constant offset: whole 16-byte chunks may be read
                    lo, hi = first // CHUNK * CHUNK, -(-(first + tn) // CHUNK) * CHUNK
                    allowed = {(r, c) for r in rows for c in expected(lo, hi - lo, N)}
                if not want <= block[name] <= allowed:
                    outside = sorted(block[name] - allowed)[:3]
                    missed = sorted(want - block[name])[:3]
                    yield f"block ({bx}, {by}) {name}: touched outside {outside}, missed {missed}"


OFFSETS = st.one_of(
    st.integers(-9, 9).map(str),
    st.integers(-9, 9).map(lambda k: f"o + {k}" if k >= 0 else f"o - {-k}"),
)
TILES = st.sampled_from([(4, 16), (8, 8), (2, 32), (3, 24)])


ARCHS = st.sampled_from(["sm_80", "sm_90a"])


@settings(max_examples=30, deadline=None)
@given(TILES, OFFSETS, OFFSETS, OFFSETS, OFFSETS, ARCHS, st.integers(1, 20), st.integers(1, 40), st.integers(-12, 12))
def test_copies_touch_exactly_the_tiles_elements_inside_the_tensor(tile, row, col, row2, col2, arch, M, N, o):
    case = Case(tile, row, col, row2, col2, arch)
    assert list(violations(case, M, N, o)) == []


@pytest.mark.parametrize("row, col", [("-3", "0"), ("0", "-1"), ("o", "o")])
def test_a_missing_lower_edge_check_is_caught(monkeypatch, row, col):
    """The interpreter sees the reads before the tensor that the lower-edge checks prevent."""
    from tilec.lower import exprs, loops, ops

    for module in (exprs, loops, ops):
        monkeypatch.setattr(module, "nonnegative", lambda ctx, i: True)
    case = Case((4, 16), row, col, "0", "0")
    found = [v for v in violations(case, 9, 33, -2) if v.startswith("block (0, 0) A:")]
    assert found and "touched outside []" not in found[0], found


def test_pad_is_what_outside_elements_read():
    """`pad=` replaces the zero of out-of-range reads, in the general path only."""
    text = """
kernel k(A: Tensor((M, N), float16), B: Tensor((M, N), float16)):
    with Kernel(ceildiv(N, 64), ceildiv(M, 32), threads=128) as (bx, by):
        A_s = alloc_shared((32, 64), float16)
        copy(A[by * 32 - 1, bx * 64], A_s, pad=-infinity(float16))
        copy(A_s, B[by * 32, bx * 64])
"""
    cu = compile_program_text(elaborate_file("k.tile", text=text), "sm_80", "cuda")
    first = cu.split("copy(A_s, B")[0]
    assert ": -INFINITY)" in first and ": 0.0f" not in first
