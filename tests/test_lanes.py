"""lower/lanes.py: `tx % 32` and `tx / 32` become `lane` and `warp`, declared after `tx`."""

from __future__ import annotations

from tilec import emit, tir
from tilec import thread_ir as T
from tilec.dtypes import DType
from tilec.lower.cexpr import builtin
from tilec.lower.cleanup import drop_unused
from tilec.lower.lanes import name_lanes
from tilec.simplify import int_

I32 = DType.int32


def lowered(index: tir.Expr, tx: tir.Var, warp_size: int = 32, threads: int = 1024, warp_group: int = 0) -> list[str]:
    body: list[T.Stmt] = [
        T.Decl(tx.name, I32, init=builtin("thread_index"), const=True),
        T.Assign(T.Subscript("out", (index,), I32), int_(1)),
    ]
    names = iter(["lane", "warp", "warp_group"])
    out = drop_unused(name_lanes(body, tx, threads, warp_size, lambda base: next(names), warp_group))
    return [line for s in out for line in emit.stmt_lines(s)]


def b(op: tir.BinOpName, a: tir.Expr, k: int) -> tir.Expr:
    return tir.BinOp(op, a, int_(k), I32)


def test_lane_and_warp_are_named_once_after_tx() -> None:
    tx = tir.Var("tx", I32, "thread")
    index = tir.BinOp("+", b("*", b("//", tx, 32), 16), b("*", b("//", b("%", tx, 32), 16), 8), I32)
    assert lowered(index, tx) == [
        "const int tx = threadIdx.x;",
        "const int lane = tx % 32;",
        "const int warp = tx / 32;",
        "out[warp * 16 + lane / 16 * 8] = 1;",
    ]


def test_only_the_names_used_are_declared() -> None:
    tx = tir.Var("tx", I32, "thread")
    assert lowered(b("//", tx, 64), tx) == [
        "const int tx = threadIdx.x;",
        "const int warp = tx / 32;",
        "out[warp / 2] = 1;",
    ]
    assert lowered(b("%", tx, 16), tx) == ["const int tx = threadIdx.x;", "out[tx % 16] = 1;"]


def test_the_warp_size_is_the_targets() -> None:
    tx = tir.Var("tx", I32, "thread")
    assert lowered(tir.BinOp("+", b("%", tx, 64), b("%", tx, 32), I32), tx, warp_size=64) == [
        "const int tx = threadIdx.x;",
        "const int lane = tx % 64;",
        "out[lane + tx % 32] = 1;",
    ]


def test_the_block_size_bounds_the_warp() -> None:
    tx = tir.Var("tx", I32, "thread")
    warp_row = b("%", b("//", tx, 32), 8)
    assert lowered(warp_row, tx, threads=256)[-1] == "out[warp] = 1;"  # 8 warps: warp % 8 is warp
    assert lowered(warp_row, tx, threads=512)[-1] == "out[warp % 8] = 1;"
    below = tir.BinOp("+", tir.BinOp("-", tx, b("*", warp_row, 32), I32), b("*", b("//", tx, 64), 32), I32)
    assert lowered(below, tx, threads=256)[-1] == "out[lane + warp / 2 * 32] = 1;"  # tx - warp * 32 is lane


def test_the_warp_group_is_lane_zeros_broadcast() -> None:
    """sm_90a: `tx / 128` is read once, from lane 0, so nvcc knows every lane of the warp holds it
    (what is computed from it, a wgmma descriptor, stays in uniform registers); `% 2` of it in a
    block of two groups is the group itself."""
    tx = tir.Var("tx", I32, "thread")
    index = tir.BinOp("+", b("*", b("//", tx, 128), 4096), b("*", b("%", b("//", tx, 128), 2), 8), I32)
    assert lowered(index, tx, threads=256, warp_group=128) == [
        "const int tx = threadIdx.x;",
        "const int warp_group = __shfl_sync(0xffffffffu, tx / 128, 0);",
        "out[warp_group * 4096 + warp_group * 8] = 1;",
    ]
