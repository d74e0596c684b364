"""The CUDA targets' instruction records (instructions.py has the record type).

    MMA_M16N8K16  mma.sync m16n8k16: float16/bfloat16 -> float32
    MMA_M16N8K32  mma.sync m16n8k32: int8 -> int32; float8 e4m3/e5m2 -> float32 from sm_89;
                  m16n8k64 on int4/uint4 -> int32, as their packed bytes (sm_90a too: no 4-bit wgmma)
    SIMT_FMA      one thread, fused multiply-adds: any types
    WGMMA_M64NNK16  wgmma m64nNk16 (sm_90a): float16/bfloat16 -> float32, A and B by descriptor
    WGMMA_M64NNK16_RS  the same with A from registers (flash attention's P V), B by descriptor
    WGMMA_M64NNK32  wgmma m64nNk32 (sm_90a): int8/uint8 -> int32, float8 e4m3/e5m2 -> float32,
                    A (M, K) and B (N, K) by descriptor

A gemm takes the first record of its target's list (targets.py) that accepts
it (passes/select.py). Both mma.sync records run on one warp, load their
operands from shared memory with ldmatrix (helpers in spelling.py), and are
lowered by sm80.py; their fragments are the PTX ISA's (fragments.py). The
wgmma records run on a warp group of four warps, read both operands from
shared tiles in the 32/64/128-byte swizzle through matrix descriptors, and are
lowered by sm90.py; a k16 step of 16-bit elements and a k32 step of 8-bit ones
are the same 32 bytes of a swizzle row, and both write the same D fragment.
"""

from __future__ import annotations

import dataclasses

from tilec import layout as L
from tilec import tir
from tilec.backends.cuda import fragments as ptx
from tilec.dtypes import DType
from tilec.instructions import Instruction, OperandTypes, simt_fma
from tilec.layout_algebra import widest_swizzle
from tilec.simplify import const

F32 = DType.float32
SM89 = (8, 9)  # fp8 mma.sync


def _mma(operand: DType, accumulator: DType, suffix: str, k: int, since: tuple[int, int] = (0, 0)) -> OperandTypes:
    return OperandTypes(operand, accumulator, f"mma_{suffix}", f"tilec_mma_m16n8k{k}_{suffix}", since)


def _mma4(packed: DType, suffix: str) -> OperandTypes:
    words = f"mma.sync m16n8k64 {suffix.replace('s', 'int').replace('u', 'uint')} -> {{c}} (tensor cores"
    return dataclasses.replace(
        _mma(packed, DType.int32, suffix, 64), explain=words + "; wgmma has no 4-bit types, so sm_90a too)"
    )


MMA_M16N8K16 = Instruction(
    name="mma_sync_m16n8k16",
    shape=(16, 8, 16),
    operands=(_mma(DType.float16, F32, "f16", 16), _mma(DType.bfloat16, F32, "bf16", 16)),
    group="warp",
    load="matrices",
    load_helper="ldmatrix",
    a_in_registers=True,
    a_registers_helper="pack",  # two m16n8 accumulator tiles are one m16k16 A fragment
    k_contiguous=False,  # ldmatrix.trans transposes 16-bit elements
    accumulator=L.mma_accumulator,
    fragments=(ptx.mma_m16n8k16_a, ptx.mma_m16n8k16_b, ptx.mma_m16n8k16_c),
    explain="mma.sync m16n8k16 {a} -> {c} (tensor cores)",
    load_conflicts=ptx.ldmatrix_conflict_degree,
)

MMA_M16N8K32 = Instruction(
    name="mma_sync_m16n8k32",
    shape=(16, 8, 32),
    operands=(
        _mma(DType.int8, DType.int32, "s8", 32),
        _mma(DType.float8_e4m3, F32, "e4m3", 32, SM89),
        _mma(DType.float8_e5m2, F32, "e5m2", 32, SM89),
        # int4 / uint4 as their packed bytes (passes/pack_subbyte.py): a k32 step of bytes is
        # m16n8k64's 64 elements, in the same registers; wgmma has no 4-bit types, so sm_90a too
        _mma4(DType.int4x2, "s4"),
        _mma4(DType.uint4x2, "u4"),
    ),
    group="warp",
    load="matrices",
    load_helper="ldmatrix",
    a_in_registers=False,
    a_registers_helper=None,
    k_contiguous=True,  # ldmatrix transposes 16-bit elements only
    accumulator=L.mma_accumulator,
    fragments=(ptx.mma_m16n8k32_a, ptx.mma_m16n8k32_b, ptx.mma_m16n8k16_c),
    explain="mma.sync m16n8k32 {a} -> {c} (tensor cores)",
    load_conflicts=ptx.ldmatrix_conflict_degree,
)

SIMT_FMA = simt_fma("SIMT FMA (CUDA cores)")

# Every CUDA target's records, in order of preference.
SM80_INSTRUCTIONS = (MMA_M16N8K16, MMA_M16N8K32, SIMT_FMA)


WGMMA_MAX_N = 256  # the widest wgmma: m64n256k16 (the record's shape[1])


def warp_group_grid(m: int, n: int, groups: int) -> tuple[int, int] | None:
    """(warp groups along M, along N) tiling an m x n accumulator with m64 tiles and column
    slices of one wgmma each (a multiple of 8, at most 256 wide, or whole multiples of 256): the
    most groups along M that divide it, the rest along N."""
    for gm in range(groups, 0, -1):
        gn = groups // gm
        if groups % gm or m % (gm * 64) or n % gn:
            continue
        width = n // gn
        if width % 8 == 0 and (width <= WGMMA_MAX_N or width % WGMMA_MAX_N == 0):
            return gm, gn
    return None


def wgmma_accumulator(shape: tuple[int, int], threads: int, policy: str, rows: int | None = None) -> L.Fragment | None:
    """The accumulator of wgmma m64nNk16 tiled over the block's warp groups (fragments.wgmma_m64n8k16_c):

    warp group (gm x gn grid, `warp_group_grid`) g holds MI m64 tiles of a slice of W columns;
    in each, warp w of the group holds rows 16 w .. 16 w + 15 as mma's C, W / 8 times along N:
      threads: 4 @ dim 1 stride 2, 8 @ dim 0 stride 1, 4 @ dim 0 stride 16, gn @ dim 1 stride W, gm @ dim 0
      regs:    MI @ dim 0 stride 64, W / 8 @ dim 1 stride 8, 2 @ dim 0 stride 8, 2 @ dim 1 stride 1
    so one wgmma's N / 2 accumulator registers are consecutive. `policy` and `rows` (warp rows
    shared with an earlier accumulator) do not apply: the warps of a group are stacked along M.
    """
    m, n = shape
    if threads % ptx.WARP_GROUP:
        return None
    grid = warp_group_grid(m, n, threads // ptx.WARP_GROUP)
    if grid is None:
        return None
    gm, gn = grid
    mi, width = m // (gm * 64), n // gn
    warps = ptx.WARP_GROUP // ptx.WARP_SIZE
    thread_parts = (
        L.Part(4, 1, 2),
        L.Part(8, 0, 1),
        L.Part(warps, 0, 16),
        L.Part(gn, 1, width),
        L.Part(gm, 0, mi * 64),
    )
    local_parts = (L.Part(mi, 0, 64), L.Part(width // 8, 1, 8), L.Part(2, 0, 8), L.Part(2, 1, 1))
    return L.Fragment(shape, thread_parts, local_parts)


def wgmma_operands(g: tir.Gemm, threads: int) -> bool:
    """Whether wgmma can read both operands of `g` through descriptors: whole 2-D shared tiles,
    each stored with its contiguous dimension in a swizzle's rows, of at least 8 rows; the column
    slice of each warp group of a B stored (K, N) (or the m64 tile of an A stored (K, M)) whole
    swizzle rows. (Which element types and which major-ness a record takes, select checks.)"""
    a, b = g.a, g.b
    for region in (a, b):
        buf = region.buffer
        if buf.scope != "shared" or len(buf.shape) != 2:
            return False
        shape = buf.const_shape
        whole = all(isinstance(s, tir.IntImm) and s.value == 0 for s in region.starts)
        if not whole or tuple(const(e) for e in region.extents) != shape:
            return False
        if shape[0] % 8 or widest_swizzle(shape[1] * buf.dtype.bytes) is None:
            return False
    grid = _grid(g, threads)
    if grid is None:
        return False
    n = g.c.buffer.const_shape[1]
    slices: list[tuple[tir.Buffer, int]] = [] if g.transpose_b else [(b.buffer, n // grid[1])]
    slices += [(a.buffer, 64)] if g.transpose_a else []
    for buf, width in slices:  # an MN-major operand: each instruction starts at a swizzle row
        sw = widest_swizzle(buf.const_shape[1] * buf.dtype.bytes)
        if sw is None or width * buf.dtype.bytes % sw:
            return False
    return True


def _grid(g: tir.Gemm, threads: int) -> tuple[int, int] | None:
    m, n = g.c.buffer.const_shape  # select checked the accumulator is 2-D
    return warp_group_grid(m, n, threads // ptx.WARP_GROUP)


def wgmma_register_a_operands(g: tir.Gemm, threads: int) -> bool:
    """Whether wgmma's register-A form can take `g`: A a 2-D register tile (M, K), B a whole shared
    tile as `wgmma_operands` wants it, and the accumulator split over warp groups along M only,
    so that each group holds whole rows of A (its m64 tiles) as it holds those of C."""
    a, b = g.a.buffer, g.b.buffer
    if a.scope != "fragment" or len(a.shape) != 2 or g.transpose_a:
        return False
    grid = _grid(g, threads)
    if grid is None or grid[1] != 1 or a.const_shape[0] != g.c.buffer.const_shape[0]:
        return False
    whole = all(isinstance(x, tir.IntImm) and x.value == 0 for x in g.b.starts)
    shape = b.const_shape
    if b.scope != "shared" or len(shape) != 2 or not whole or tuple(const(e) for e in g.b.extents) != shape:
        return False
    sw = widest_swizzle(shape[1] * b.dtype.bytes)
    if shape[0] % 8 or sw is None:
        return False
    return g.transpose_b or shape[1] * b.dtype.bytes % sw == 0


def wgmma_a_in_registers(fa: L.Fragment, fc: L.Fragment) -> bool:
    """A register A (M, K) laid out as a wgmma accumulator of the same warp-group rows as C
    (`wgmma_accumulator`, one group column): each k16 step of an m64 tile is then 8 consecutive
    16-bit registers of each thread, two m64n8 C tiles side by side, which are wgmma's A fragment
    (the PTX ISA's m64k16 register layout: each warp's 16 rows as mma.sync m16n8k16's A)."""
    if len(fa.thread_parts) != 5 or len(fc.thread_parts) != 5 or fa.thread_parts[:3] != fc.thread_parts[:3]:
        return False
    (_, ga_n, ga_m), (_, gc_n, gc_m) = fa.thread_parts[2:], fc.thread_parts[2:]
    return (
        ga_n.extent == gc_n.extent == 1
        and ga_m == gc_m
        and fa.local_parts[0] == fc.local_parts[0]
        and fa.local_parts[1].extent % 2 == 0
        and fa.local_parts[2:] == fc.local_parts[2:]
    )


def wgmma_8bit_operands(g: tir.Gemm, threads: int) -> bool:
    """`wgmma_operands`, and for an integer accumulator an N the integer wgmma has: 8, 16, 24, or
    a multiple of 16 (ptxas rejects m64n40k32.s32 and the like)."""
    grid = _grid(g, threads) if wgmma_operands(g, threads) else None
    if grid is None:
        return False
    n = min(g.c.buffer.const_shape[1] // grid[1], WGMMA_MAX_N)  # one wgmma's width (sm90.py)
    return not g.c.buffer.dtype.is_int or n <= 24 or n % 16 == 0


def _wgmma(operand: DType, suffix: str, k: int, accumulator: DType = F32) -> OperandTypes:
    # {n}: the instruction's width, one helper per width (spelling.py's wgmma_<suffix>_n<N>);
    # {ta}, {tb}: 1 for an MN-major A or B (16-bit types only: the k32 calls take no transposes)
    call = f"tilec_wgmma_m64n{{n}}k{k}_{suffix}" + ("<{ta}, {tb}>" if k == 16 else "")
    return OperandTypes(operand, accumulator, f"wgmma_{suffix}_n{{n}}", call)


WGMMA_M64NNK16 = Instruction(
    name="wgmma_m64nNk16",
    shape=(64, WGMMA_MAX_N, 16),  # N: any multiple of 8 up to 256 (warp_group_grid picks it per accumulator)
    operands=(_wgmma(DType.float16, "f16", 16), _wgmma(DType.bfloat16, "bf16", 16)),
    group="warp_group",
    load="descriptors",
    load_helper="wgmma",
    a_in_registers=False,
    a_registers_helper=None,
    k_contiguous=False,  # the descriptors' major-ness transposes 16-bit operands
    accumulator=wgmma_accumulator,
    fragments=(ptx.wgmma_m64n8k16_c,),
    explain="wgmma m64n{n}k16 {a} -> {c} (tensor cores, warp groups)",
    operands_fit=wgmma_operands,
)

WGMMA_M64NNK16_RS = Instruction(
    name="wgmma_m64nNk16_rs",
    shape=(64, WGMMA_MAX_N, 16),
    operands=(
        OperandTypes(DType.float16, F32, "wgmma_rs_f16_n{n}", "tilec_wgmma_m64n{n}k16_rs_f16<{tb}>"),
        OperandTypes(DType.bfloat16, F32, "wgmma_rs_bf16_n{n}", "tilec_wgmma_m64n{n}k16_rs_bf16<{tb}>"),
    ),
    group="warp_group",
    load="descriptors",
    load_helper="wgmma",
    a_in_registers=True,  # flash attention's P of P V; staged to a swizzled shared tile when laid out otherwise
    a_registers_helper="wgmma",
    k_contiguous=False,  # B's descriptor transposes it; A in registers is K-major by definition
    accumulator=wgmma_accumulator,
    fragments=(ptx.wgmma_m64k16_a, ptx.wgmma_m64n8k16_c),  # A (registers), D
    explain="wgmma m64n{n}k16 {a} -> {c} (tensor cores, warp groups)",
    operands_fit=wgmma_register_a_operands,
    a_registers_fit=wgmma_a_in_registers,
)

WGMMA_M64NNK32 = Instruction(
    name="wgmma_m64nNk32",
    shape=(64, WGMMA_MAX_N, 32),  # N: a multiple of 8 up to 256; for int32 8, 16, 24 or a multiple of 16
    operands=(
        _wgmma(DType.int8, "s8", 32, DType.int32),
        _wgmma(DType.uint8, "u8", 32, DType.int32),
        _wgmma(DType.float8_e4m3, "e4m3", 32),
        _wgmma(DType.float8_e5m2, "e5m2", 32),
    ),
    group="warp_group",
    load="descriptors",
    load_helper="wgmma",
    a_in_registers=False,
    a_registers_helper=None,
    k_contiguous=True,  # the PTX ISA: 8-bit operands are K-major only (no transposes)
    accumulator=wgmma_accumulator,
    fragments=(ptx.wgmma_m64n8k16_c,),  # the k16 D fragment: D does not depend on K
    explain="wgmma m64n{n}k32 {a} -> {c} (tensor cores, warp groups)",
    operands_fit=wgmma_8bit_operands,
)

SM90A_INSTRUCTIONS = (WGMMA_M64NNK16, WGMMA_M64NNK16_RS, WGMMA_M64NNK32, *SM80_INSTRUCTIONS)
