"""sm_80's own lowerings: the gemm on tensor cores, mma.sync m16n8k16 / m16n8k32 (the
records of instructions.py here) with operands by ldmatrix from shared memory, and the
asynchronous global -> shared copy, cp.async (`async_copy`), and the atomic add of 16-bit
float pairs (`atomic_add_vector`).

    gemm(A_s, B_s, acc)     # float16, 128x128x32 tile, 4 warps of 64x64 (FullRow, Square, ...)
  ->
    for (int kk = 0; kk < 2; ++kk) {             // k steps of the instruction's depth
      tilec_ldmatrix_x4(&A_s_frag[0], &A_s[...]);  // A of each m16 tile of the warp
      tilec_ldmatrix_x4_trans(&B_s_frag[0], ...);  // B of two n8 tiles (x2 for a last odd one)
      tilec_mma_m16n8k16_f16(&acc[0], &A_s_frag[0], &B_s_frag[0]);  // per m16n8 tile
    }

lower/ops.py sends every gemm whose record runs on a warp here (the module
named by Target.backend); the GEMM main loop (lower/pipelined.py) calls
`setup`, `registers`, `declare`, `load` and `products` to load each k step's
fragments a step ahead; the copies of pipelined loops (lower/loops.py) call
`async_copy`. `ctx` is the kernel's LowerContext (lower/context.py).
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


def gemm(ctx: LowerContext, s: tir.Gemm, record: Instruction) -> list[T.Stmt]:
    """Tensor cores: per k step (16 deep, 32 for 8-bit types), ldmatrix the warp's A and
    B tiles from shared memory into registers, then one mma.sync per
    16x8 piece of the warp's accumulator tile."""
    out, mma = setup(ctx, s, record)
    kk = tir.Var(ctx.fresh("kk"), I32, "thread")
    ctx.state.bounds[kk] = mma.steps - 1
    a_reg, b_reg = registers(ctx, mma)
    body = declare(mma, a_reg, b_reg)
    body += load(ctx, mma, a_reg, b_reg, kk)
    body += products(ctx, mma, a_reg, b_reg)
    out.append(T.Loop(T.Sym(kk.name, I32), int_(0), int_(mma.steps), 1, mma.steps <= 8, tuple(body)))
    return out


def gemm_wait(ctx: LowerContext, s: tir.Gemm, record: Instruction) -> list[T.Stmt]:
    """Nothing: the gemm's warp instructions have finished when its code has run."""
    return []


def setup(ctx: LowerContext, s: tir.Gemm, record: Instruction) -> tuple[list[T.Stmt], MmaGemm]:
    """What every k step of a tensor-core gemm needs, and the code that
    runs once before the steps (staging of A, clearing of C)."""
    c = s.c.buffer
    frag = ctx.layouts.buffers[c]
    a_in_registers = s.a_from_registers
    a_region, out = staged_operand(ctx, s, a_in_registers)
    cname = ctx.name(c)
    out += cleared_accumulator(ctx, s)
    mi_n, ni_n = frag.local_parts[0].extent, frag.local_parts[1].extent
    wn, wm = frag.thread_parts[2].extent, frag.thread_parts[3].extent
    a_ext = [const_int(e) for e in a_region.extents if const_int(e) != 1]
    k_extent = a_ext[0] if s.transpose_a else a_ext[-1]
    warp = simplify(tir.BinOp("//", ctx.tx, int_(_threads(ctx, record)), I32))
    warp_n = simplify(tir.BinOp("%", warp, int_(wn), I32)) if wn > 1 else int_(0)
    warp_m = simplify(tir.BinOp("//", warp, int_(wn), I32)) if wm > 1 else int_(0)
    types = types_entry(record, s.a.buffer.dtype)
    depth = record.shape[2]
    m0, n0 = simplify(mul(warp_m, mi_n * 16)), simplify(mul(warp_n, ni_n * 8))
    steps = k_extent // depth
    return out, MmaGemm(s, record, types, a_region, a_in_registers, cname, mi_n, ni_n, m0, n0, depth, steps)


def registers(ctx: LowerContext, mma: MmaGemm) -> tuple[str, str]:
    """Fresh names for one set of A and B fragment registers."""
    a_reg = ctx.fresh(f"{ctx.name(mma.a.buffer)}_frag")
    b_reg = ctx.fresh(f"{ctx.name(mma.gemm.b.buffer)}_frag")
    return a_reg, b_reg


def declare(mma: MmaGemm, a_reg: str, b_reg: str) -> list[T.Stmt]:
    return [T.Decl(a_reg, DType.uint32, (mma.mi_n * 4,)), T.Decl(b_reg, DType.uint32, (mma.ni_n * 2,))]


def load(ctx: LowerContext, mma: MmaGemm, a_reg: str, b_reg: str, kk: tir.Expr) -> list[T.Stmt]:
    """The A and B fragments of k step `kk` into registers `a_reg`, `b_reg`:
    ldmatrix from shared memory (.trans for a transposed tile), or A packed
    from a register tile laid out as an accumulator."""
    s = mma.gemm
    lane = simplify(tir.BinOp("%", ctx.tx, int_(_threads(ctx, mma.record)), I32))
    k0 = mul(kk, mma.depth)
    chunk = 16 // s.a.buffer.dtype.bytes  # elements in one 16-byte ldmatrix row
    lane16 = tir.BinOp("%", lane, int_(16), I32)
    lane8 = tir.BinOp("%", lane, int_(8), I32)
    hi16 = mul(tir.BinOp("//", lane, int_(16), I32), 8)  # (lane / 16) * 8
    mid8 = mul(tir.BinOp("%", tir.BinOp("//", lane, int_(8), I32), int_(2), I32), 8)  # (lane / 8 % 2) * 8
    hi_k = mul(tir.BinOp("//", lane, int_(16), I32), chunk)  # the same, in k and 16-byte chunks
    mid_k = mul(tir.BinOp("%", tir.BinOp("//", lane, int_(8), I32), int_(2), I32), chunk)
    body: list[T.Stmt] = []
    assert mma.record.load_helper is not None, "an ldmatrix record names its helper"
    ctx.state.helpers.add(mma.record.load_helper)
    for mi in range(mma.mi_n):
        row = add(mma.m0, int_(mi * 16))
        if mma.a_in_registers:
            body += _a_registers(ctx, mma, a_reg, mi, kk)
            continue
        if not s.transpose_a:  # A[m][k]: lane l addresses row l % 16, 16-byte chunk l / 16
            idx = (add(row, lane16), add(k0, hi_k))
            fn = "tilec_ldmatrix_x4"
        else:  # A stored [k][m]: transposed load
            idx = (add(k0, add(hi16, lane8)), add(row, mid8))
            fn = "tilec_ldmatrix_x4_trans"
        addr = _smem_elem(ctx, mma.a, idx)
        regs = T.AddressOf(T.Subscript(a_reg, (int_(mi * 4),), DType.uint32))
        body.append(T.Call(T.Intrin(fn, (regs, addr), I32)))
    for ni in range(0, mma.ni_n, 2):
        col = add(mma.n0, int_(ni * 8))
        pair = ni + 1 < mma.ni_n
        n_off = hi16 if pair else int_(0)
        if s.transpose_b:  # B stored [n][k]: rows n, plain load
            idx = (add(col, add(n_off, lane8)), add(k0, mid_k))
            fn = "tilec_ldmatrix_x4" if pair else "tilec_ldmatrix_x2"
        else:  # B stored [k][n]: transposed load
            idx = (add(k0, add(mid8, lane8)), add(col, n_off))
            fn = "tilec_ldmatrix_x4_trans" if pair else "tilec_ldmatrix_x2_trans"
        addr = _smem_elem(ctx, s.b, idx)
        regs = T.AddressOf(T.Subscript(b_reg, (int_(ni * 2),), DType.uint32))
        body.append(T.Call(T.Intrin(fn, (regs, addr), I32)))
    return body


def products(ctx: LowerContext, mma: MmaGemm, a_reg: str, b_reg: str) -> list[T.Stmt]:
    """One mma.sync per m16n8 piece of the warp's accumulator tile."""
    ctx.state.helpers.add(mma.types.helper)
    body: list[T.Stmt] = []
    for mi in range(mma.mi_n):
        for ni in range(mma.ni_n):
            acc = T.AddressOf(T.Subscript(mma.c, (int_((mi * mma.ni_n + ni) * 4),), mma.gemm.c.buffer.dtype))
            a = T.AddressOf(T.Subscript(a_reg, (int_(mi * 4),), DType.uint32))
            b = T.AddressOf(T.Subscript(b_reg, (int_(ni * 2),), DType.uint32))
            body.append(T.Call(T.Intrin(mma.types.call, (acc, a, b), I32)))
    return body


def _a_registers(ctx: LowerContext, mma: MmaGemm, a_reg: str, mi: int, kk: tir.Expr) -> list[T.Stmt]:
    """A operand registers of one m16k16 tile taken from a register tile laid
    out as an mma accumulator: two neighbouring m16n8 tiles (columns 16 kk
    ... 16 kk + 15) are exactly the A fragment, packed two halves a word."""
    a = mma.gemm.a.buffer
    fa = ctx.layouts.buffers[a]
    ni_a = fa.local_parts[1].extent
    name = ctx.name(a)
    helper = "tilec_pack_bf16x2" if a.dtype == DType.bfloat16 else "tilec_pack_f16x2"
    assert mma.record.a_registers_helper is not None, "infer_layouts checked the record packs A"
    ctx.state.helpers.add(mma.record.a_registers_helper)
    out: list[T.Stmt] = []
    for r, (dn, h) in enumerate(((0, 0), (0, 1), (1, 0), (1, 1))):
        ni = add(mul(kk, 2), int_(dn))
        base = simplify(mul(add(mul(add(int_(mi * ni_a), ni), 2), int_(h)), 2))
        lo = T.Subscript(name, (base,), a.dtype)
        hi = T.Subscript(name, (simplify(add(base, int_(1))),), a.dtype)
        target = T.Subscript(a_reg, (int_(mi * 4 + r),), DType.uint32)
        out.append(T.Assign(target, T.Intrin(helper, (lo, hi), DType.uint32)))
    return out


def _smem_elem(ctx: LowerContext, region: tir.Region, idx2: tuple[tir.Expr, tir.Expr]) -> T.AddressOf:
    """&tile[...] of element idx2 of a 2-D operand region in shared memory."""
    ref = ref_of(ctx, region.buffer, operand_index(region, (simplify(idx2[0]), simplify(idx2[1]))), None)
    return T.AddressOf(ref.ref)


def _threads(ctx: LowerContext, record: Instruction) -> int:
    """Threads of one instruction's group (a warp)."""
    return group_threads(record.group, ctx.target.warp_size)


# cp.async sizes: 16 bytes bypass L1 (.cg), 4 and 8 go through it (.ca); spelling.py's cp_async helper
ASYNC_COPY_BYTES = (4, 8, 16)


def async_copy(ctx: LowerContext, dst: T.Subscript, src: T.Subscript, nbytes: int) -> T.Stmt:
    """`nbytes` from global `src` to shared `dst` by cp.async, in the current commit group."""
    ctx.state.helpers.add("cp_async")
    return T.Call(T.Intrin(f"tilec_cp_async_{nbytes}", (T.AddressOf(dst), T.AddressOf(src)), I32))


# vector atomic adds into global memory: element type -> the lanes one instruction adds, widest
# first; 16-bit floats in pairs (spelling.py's atomic_add_f16x2 / atomic_add_bf16x2 helpers)
ATOMIC_ADD_LANES: dict[DType, tuple[int, ...]] = {DType.float16: (2,), DType.bfloat16: (2,)}
_ATOMIC_SUFFIX = {DType.float32: "f32", DType.float16: "f16", DType.bfloat16: "bf16"}  # of the helpers' names


def atomic_add_vector(ctx: LowerContext, dst: T.Subscript, values: T.Subscript, lanes: int) -> T.Stmt:
    """The `lanes` registers from `values` on added into global memory from `dst` on (aligned to
    their size), each element atomically on its own."""
    name = f"atomic_add_{_ATOMIC_SUFFIX[dst.dtype]}x{lanes}"
    ctx.state.helpers.add(name)
    return T.Call(T.Intrin(f"tilec_{name}", (T.AddressOf(dst), T.AddressOf(values)), I32))


def warp_specialized(ctx: LowerContext, s: tir.For, lower: StmtLowering) -> list[T.Stmt]:
    """Warp roles need bulk copies, which no target of this backend has (Target.bulk_copies):
    plan_pipeline never marks a loop for them here."""
    raise AssertionError(f"{ctx.target.arch} has no bulk copies: no loop runs by warp roles")


def bulk_store(ctx: LowerContext, s: tir.Copy) -> list[T.Stmt] | None:
    """No bulk tensor stores on this backend's targets: copies to global memory are stores."""
    return None
