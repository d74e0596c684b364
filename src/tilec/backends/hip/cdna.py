"""CDNA's own lowerings (gfx90a, gfx942): the Backend protocol of lower/context.py.

Copies into LDS are plain loads and stores (no asynchronous copy: `ASYNC_COPY_BYTES` is empty,
so the copies of pipelined loops stay vector loads and stores, their stages still multi-buffered),
and no loop runs by warp roles (no bulk copies on these targets).
"""

from __future__ import annotations

from tilec import thread_ir as T
from tilec import tir
from tilec.instructions import Instruction
from tilec.lower.context import LowerContext, MmaGemm

ASYNC_COPY_BYTES: tuple[int, ...] = ()


def gemm(ctx: LowerContext, s: tir.Gemm, record: Instruction) -> list[T.Stmt]:
    raise AssertionError(f"{record.name}: no MFMA lowering yet")


def setup(ctx: LowerContext, s: tir.Gemm, record: Instruction) -> tuple[list[T.Stmt], MmaGemm]:
    raise AssertionError(f"{record.name}: no MFMA lowering yet")


def registers(ctx: LowerContext, mma: MmaGemm) -> tuple[str, str]:
    raise AssertionError("no MFMA lowering yet")


def declare(mma: MmaGemm, a_reg: str, b_reg: str) -> list[T.Stmt]:
    raise AssertionError("no MFMA lowering yet")


def load(ctx: LowerContext, mma: MmaGemm, a_reg: str, b_reg: str, kk: tir.Expr) -> list[T.Stmt]:
    raise AssertionError("no MFMA lowering yet")


def products(ctx: LowerContext, mma: MmaGemm, a_reg: str, b_reg: str) -> list[T.Stmt]:
    raise AssertionError("no MFMA lowering yet")


def async_copy(ctx: LowerContext, dst: T.Subscript, src: T.Subscript, nbytes: int) -> T.Stmt:
    """Never called: ASYNC_COPY_BYTES is empty, so loops.py keeps every copy synchronous."""
    raise AssertionError(f"{ctx.target.arch} has no asynchronous copy into LDS")


def warp_specialized(ctx: LowerContext, s: tir.For) -> list[T.Stmt]:
    """Warp roles need bulk copies, which CDNA does not have (Target.bulk_copies)."""
    raise AssertionError(f"{ctx.target.arch} has no bulk copies: no loop runs by warp roles")


def bulk_store(ctx: LowerContext, s: tir.Copy) -> list[T.Stmt] | None:
    """No bulk tensor stores on CDNA: copies to global memory are stores."""
    return None
