"""sm_90a's own lowerings: the gemm on wgmma (the WGMMA_M64NNK16 record of instructions.py),
each warp group multiplying its slice of the accumulator with both operands read straight
from the swizzled shared tiles through matrix descriptors; every other gemm and the
asynchronous copy are sm_80's (sm80.py).

    gemm(A_s, B_s, acc)     # float16, 128x256x64 tile, 2 warp groups of 64x256
  ->
    tilec_wgmma_hold<128>(&acc[0]);                  // the accumulator's registers stay put
    tilec_wgmma_fence();
    for (int kk = 0; kk < 4; ++kk) {                 // k steps of 16
      tilec_wgmma_m64n256k16_f16<0, 1>(&acc[0],      // B stored (K, N): MN-major
          tilec_wgmma_desc(&A_s[...], 16, 1024, 1),  // the warp group's 64 rows at column 16 kk
          tilec_wgmma_desc(&B_s[...], 8192, 1024, 1));
    }
    tilec_wgmma_commit();
    tilec_wgmma_wait<0>();
    tilec_wgmma_hold<128>(&acc[0]);

Descriptors (layout inference stored the tiles in the widest swizzle their rows allow,
aligned to its 8-row atom): SBO, the step between groups of 8 rows, is 8 swizzle rows;
LBO, for an operand stored MN-major (its M or N contiguous), is the step between its
swizzle-wide column blocks (unused for K-major operands, whose k16 step stays inside a
swizzle row). The sync pass fences the asynchronous proxy before the barriers of a kernel
with such reads (sync.py).
"""

from __future__ import annotations

from tilec import thread_ir as T
from tilec import tir
from tilec.backends.cuda.fragments import WARP_GROUP
from tilec.backends.cuda.sm80 import (
    ASYNC_COPY_BYTES,
    _smem_elem,
    async_copy,
    declare,
    load,
    products,
    registers,
    setup,
)
from tilec.backends.cuda.sm80 import gemm as warp_gemm
from tilec.dtypes import DType
from tilec.instructions import Instruction, types_entry
from tilec.layout_algebra import widest_swizzle
from tilec.lower.cexpr import I32, add, mul, symv, zero
from tilec.lower.context import LowerContext
from tilec.passes.select import gemm_depth
from tilec.simplify import int_, simplify

__all__ = ["ASYNC_COPY_BYTES", "async_copy", "declare", "gemm", "load", "products", "registers", "setup"]

_SWIZZLE_MODE = {128: 1, 64: 2, 32: 3}  # the descriptor's swizzle field


def gemm(ctx: LowerContext, s: tir.Gemm, record: Instruction) -> list[T.Stmt]:
    """wgmma for a warp-group record, sm_80's mma.sync for the others."""
    if record.group != "warp_group":
        return warp_gemm(ctx, s, record)
    return _wgmma_gemm(ctx, s, record)


def _wgmma_gemm(ctx: LowerContext, s: tir.Gemm, record: Instruction) -> list[T.Stmt]:
    c = s.c.buffer
    frag = ctx.layouts.buffers[c]
    gn, gm = frag.thread_parts[3].extent, frag.thread_parts[4].extent  # wgmma_accumulator's parts
    mi, width = frag.local_parts[0].extent, frag.shape[1] // gn
    n = min(width, record.shape[1])
    depth = record.shape[2]
    cname = ctx.name(c)
    out: list[T.Stmt] = []
    if s.clear_accum:
        i = T.Sym(ctx.fresh("i"), I32)
        zero_c = (T.Assign(T.Subscript(cname, (symv(i),), c.dtype), zero(c.dtype)),)
        out.append(T.Loop(i, int_(0), int_(frag.local_size), 1, True, zero_c))
    group = simplify(tir.BinOp("//", ctx.tx, int_(WARP_GROUP), I32))
    g_n = simplify(tir.BinOp("%", group, int_(gn), I32)) if gn > 1 else int_(0)
    g_m = simplify(tir.BinOp("//", group, int_(gn), I32)) if gm > 1 else int_(0)
    m0, n0 = simplify(mul(g_m, mi * 64)), simplify(mul(g_n, width))
    types = types_entry(record, s.a.buffer.dtype)
    call = types.call.format(n=n) + f"<{int(s.transpose_a)}, {int(not s.transpose_b)}>"
    assert record.load_helper is not None, "the wgmma record names its helper"
    ctx.state.helpers |= {record.load_helper, types.helper.format(n=n)}
    kk = tir.Var(ctx.fresh("kk"), I32, "thread")
    steps = gemm_depth(s) // depth
    ctx.state.bounds[kk] = steps - 1
    k0 = mul(kk, depth)
    body: list[T.Stmt] = []
    for mt in range(mi):
        row = add(m0, int_(mt * 64))
        a_at = (k0, row) if s.transpose_a else (row, k0)
        for nt in range(width // n):
            col = add(n0, int_(nt * n))
            b_at = (col, k0) if s.transpose_b else (k0, col)
            acc = T.AddressOf(T.Subscript(cname, (int_((mt * (width // 8) + nt * (n // 8)) * 4),), c.dtype))
            args = (acc, _descriptor(ctx, s.a, a_at, s.transpose_a), _descriptor(ctx, s.b, b_at, not s.transpose_b))
            body.append(T.Call(T.Intrin(call, args, I32)))
    hold = T.Call(
        T.Intrin(f"tilec_wgmma_hold<{frag.local_size}>", (T.AddressOf(T.Subscript(cname, (int_(0),), c.dtype)),), I32)
    )
    out += [hold, _call("tilec_wgmma_fence")]
    out.append(T.Loop(T.Sym(kk.name, I32), int_(0), int_(steps), 1, steps <= 8, tuple(body)))
    out += [_call("tilec_wgmma_commit"), _call("tilec_wgmma_wait<0>"), hold]
    return out


def _descriptor(ctx: LowerContext, region: tir.Region, at: tuple[tir.Expr, tir.Expr], mn_major: bool) -> T.Intrin:
    """The matrix descriptor of the operand tile `region` starting at element `at` (row 8k of a
    swizzle atom, so the swizzle leaves its address linear)."""
    buf = region.buffer
    rows, cols = buf.const_shape
    sw = widest_swizzle(cols * buf.dtype.bytes)
    assert sw is not None, "layout inference stored the tile in a descriptor swizzle"
    lbo = rows * sw if mn_major else 16  # column blocks of an MN-major tile; unused when K-major
    args = (_smem_elem(ctx, region, at), int_(lbo), int_(8 * sw), int_(_SWIZZLE_MODE[sw]))
    return T.Intrin("tilec_wgmma_desc", args, DType.uint64)


def _call(name: str) -> T.Call:
    return T.Call(T.Intrin(name, (), I32))
