"""CDNA's own lowerings (gfx90a, gfx942): the gemm on MFMA (the records of instructions.py here)
with operands read from LDS by per-lane loads, and the Backend protocol of lower/context.py.

    gemm(A_s, B_s, acc)     # float16, 64x64x32 tile, 4 waves of 32x32, mfma_16x16x16
  ->
    for (int kk = 0; kk < 2; ++kk) {                       // k steps of the instruction's depth
      half A_s_frag[8], B_s_frag[8];
      *reinterpret_cast<uint2*>(&A_s_frag[0]) = ...&A_s[m0 + lane % 16][kk * 16 + lane / 16 * 4];
      B_s_frag[0] = B_s[kk * 16 + lane / 16 * 4][n0 + lane % 16];  ... (+1, +2, +3: B is (K, N))
      tilec_mfma_16x16x16_f16(&acc[0], &A_s_frag[0], &B_s_frag[0]);   // per 16x16 tile of the wave
    }

A lane's A (and a (N, K) B's) four K-consecutive elements are one 8-byte read; a (K, N) B's (or
(K, M) A's) are four reads of one element. The MmaGemm fields keep sm80's names: `mi_n`, `ni_n`
count the wave's MFMA tiles (16 or 32 wide) along M and N. Copies into LDS are plain loads and
stores (`ASYNC_COPY_BYTES` is empty: a pipelined loop stages its next stage through registers,
lower/pipelined.py's `_staged`, its stages still multi-buffered), no loop runs by warp roles
(no bulk copies on these targets), and a tile's atomic add is one atomicAdd per element
(`ATOMIC_ADD_LANES` is empty).
"""

from __future__ import annotations

from tilec import thread_ir as T
from tilec import tir
from tilec.dtypes import DType
from tilec.instructions import Instruction, group_threads, types_entry
from tilec.lower.cexpr import I32, add, const_int, mul
from tilec.lower.context import LowerContext, MmaGemm, StmtLowering
from tilec.lower.exprs import ref_of
from tilec.lower.ops import cleared_accumulator, operand_index, staged_operand
from tilec.simplify import int_, simplify

ASYNC_COPY_BYTES: tuple[int, ...] = ()


def gemm(ctx: LowerContext, s: tir.Gemm, record: Instruction) -> list[T.Stmt]:
    """Matrix cores: per k step, each lane loads its A and B elements from LDS, then one MFMA
    per tile of the wave's accumulator."""
    out, mma = setup(ctx, s, record)
    kk = tir.Var(ctx.fresh("kk"), I32, "thread")
    ctx.state.bounds[kk] = mma.steps - 1
    a_reg, b_reg = registers(ctx, mma)
    body = declare(mma, a_reg, b_reg) + load(ctx, mma, a_reg, b_reg, kk) + products(ctx, mma, a_reg, b_reg)
    out.append(T.Loop(T.Sym(kk.name, I32), int_(0), int_(mma.steps), 1, mma.steps <= 8, tuple(body)))
    return out


def gemm_wait(ctx: LowerContext, s: tir.Gemm, record: Instruction) -> list[T.Stmt]:
    """Nothing: the gemm's warp instructions have finished when its code has run."""
    return []


def setup(ctx: LowerContext, s: tir.Gemm, record: Instruction) -> tuple[list[T.Stmt], MmaGemm]:
    """What every k step needs, and the code before the steps (A staged to LDS, C cleared)."""
    c = s.c.buffer
    frag = ctx.layouts.buffers[c]
    a_region, out = staged_operand(ctx, s)
    cname = ctx.name(c)
    out += cleared_accumulator(ctx, s)
    tile = record.shape[0]
    mi_n, ni_n = frag.local_parts[0].extent, frag.local_parts[1].extent
    wn, wm = frag.thread_parts[2].extent, frag.thread_parts[3].extent
    a_ext = [const_int(e) for e in a_region.extents if const_int(e) != 1]
    k_extent = a_ext[0] if s.transpose_a else a_ext[-1]
    wave = simplify(tir.BinOp("//", ctx.tx, int_(_lanes(ctx, record)), I32))
    wave_n = simplify(tir.BinOp("%", wave, int_(wn), I32)) if wn > 1 else int_(0)
    wave_m = simplify(tir.BinOp("//", wave, int_(wn), I32)) if wm > 1 else int_(0)
    m0, n0 = simplify(mul(wave_m, mi_n * tile)), simplify(mul(wave_n, ni_n * tile))
    types = types_entry(record, s.a.buffer.dtype)
    depth = record.shape[2]
    return out, MmaGemm(s, record, types, a_region, False, cname, mi_n, ni_n, m0, n0, depth, k_extent // depth)


def registers(ctx: LowerContext, mma: MmaGemm) -> tuple[str, str]:
    """Fresh names for one set of A and B operand registers."""
    return ctx.fresh(f"{ctx.name(mma.a.buffer)}_frag"), ctx.fresh(f"{ctx.name(mma.gemm.b.buffer)}_frag")


def declare(mma: MmaGemm, a_reg: str, b_reg: str) -> list[T.Stmt]:
    """The lane's elements of each MFMA tile's A and B, aligned for one vector read each."""
    dtype, per_lane = mma.a.buffer.dtype, _per_lane(mma)
    align = per_lane * dtype.bytes
    return [
        T.Decl(a_reg, dtype, (mma.mi_n * per_lane,), align=align),
        T.Decl(b_reg, dtype, (mma.ni_n * per_lane,), align=align),
    ]


def load(ctx: LowerContext, mma: MmaGemm, a_reg: str, b_reg: str, kk: tir.Expr) -> list[T.Stmt]:
    """The A and B elements of k step `kk` into `a_reg`, `b_reg`: lane l takes row (column) l % tile
    of each tile and K elements per_lane * (l / tile) .. + per_lane - 1 of the step."""
    s, tile, per_lane = mma.gemm, mma.record.shape[0], _per_lane(mma)
    lane = simplify(tir.BinOp("%", ctx.tx, int_(_lanes(ctx, mma.record)), I32))
    across = tir.BinOp("%", lane, int_(tile), I32)
    k0 = add(mul(kk, mma.depth), mul(tir.BinOp("//", lane, int_(tile), I32), per_lane))
    body: list[T.Stmt] = []
    for mi in range(mma.mi_n):
        row = add(mma.m0, add(int_(mi * tile), across))
        body += _lane_elements(ctx, mma, mma.a, a_reg, mi * per_lane, row, k0, k_inner=not s.transpose_a)
    for ni in range(mma.ni_n):
        col = add(mma.n0, add(int_(ni * tile), across))
        body += _lane_elements(ctx, mma, s.b, b_reg, ni * per_lane, col, k0, k_inner=s.transpose_b)
    return body


def _lane_elements(
    ctx: LowerContext, mma: MmaGemm, region: tir.Region, reg: str, at: int, mn: tir.Expr, k0: tir.Expr, k_inner: bool
) -> list[T.Stmt]:
    """reg[at ..] = the lane's per_lane elements (mn, k0 ..) of an operand: one vector read when
    K is the tile's contiguous dimension (`k_inner`), else one read per element."""
    dtype, per_lane = region.buffer.dtype, _per_lane(mma)

    def at_k(i: int) -> T.Subscript:
        k = simplify(add(k0, int_(i)))
        idx = (simplify(mn), k) if k_inner else (k, simplify(mn))
        return ref_of(ctx, region.buffer, operand_index(region, idx), None).ref

    dst = T.Subscript(reg, (int_(at),), dtype)
    if k_inner:
        nbytes = per_lane * dtype.bytes
        return [T.Assign(T.VecRef(dst, nbytes), T.VecRef(at_k(0), nbytes))]
    return [T.Assign(T.Subscript(reg, (int_(at + i),), dtype), at_k(i)) for i in range(per_lane)]


def products(ctx: LowerContext, mma: MmaGemm, a_reg: str, b_reg: str) -> list[T.Stmt]:
    """One MFMA per tile of the wave's accumulator (tile * tile / 64 consecutive registers each)."""
    ctx.state.helpers.add(mma.types.helper)
    tile, per_lane = mma.record.shape[0], _per_lane(mma)
    results = tile * tile // _lanes(ctx, mma.record)
    dtype = mma.a.buffer.dtype
    body: list[T.Stmt] = []
    for mi in range(mma.mi_n):
        for ni in range(mma.ni_n):
            acc = T.AddressOf(T.Subscript(mma.c, (int_((mi * mma.ni_n + ni) * results),), mma.gemm.c.buffer.dtype))
            a = T.AddressOf(T.Subscript(a_reg, (int_(mi * per_lane),), dtype))
            b = T.AddressOf(T.Subscript(b_reg, (int_(ni * per_lane),), dtype))
            body.append(T.Call(T.Intrin(mma.types.call, (acc, a, b), I32)))
    return body


def _per_lane(mma: MmaGemm) -> int:
    """K elements of one operand a lane holds per MFMA: 4, or 8 for gfx942's k-deep 8-bit forms."""
    tile, k = mma.record.shape[0], mma.record.shape[2]
    return tile * k // 64


def _lanes(ctx: LowerContext, record: Instruction) -> int:
    """Threads of one MFMA: the wave (Target.warp_size)."""
    return group_threads(record.group, ctx.target.warp_size)


def async_copy(ctx: LowerContext, dst: T.Subscript, src: T.Subscript, nbytes: int) -> T.Stmt:
    """Never called: ASYNC_COPY_BYTES is empty, so pipelined.py stages copies through registers."""
    raise AssertionError(f"{ctx.target.arch} has no asynchronous copy into LDS")


ATOMIC_ADD_LANES: dict[DType, tuple[int, ...]] = {}  # no vector atomic adds: one atomicAdd per element


def atomic_add_vector(ctx: LowerContext, dst: T.Subscript, values: T.Subscript, lanes: int) -> T.Stmt:
    """Never called: ATOMIC_ADD_LANES is empty, so a tile op's atomic add goes element by element."""
    raise AssertionError(f"{ctx.target.arch} has no vector atomic add")


def warp_specialized(ctx: LowerContext, s: tir.For, lower: StmtLowering) -> list[T.Stmt]:
    """Warp roles need bulk copies, which CDNA does not have (Target.bulk_copies)."""
    raise AssertionError(f"{ctx.target.arch} has no bulk copies: no loop runs by warp roles")


def bulk_store(ctx: LowerContext, s: tir.Copy) -> list[T.Stmt] | None:
    """No bulk tensor stores on CDNA: copies to global memory are stores."""
    return None
