"""The CDNA targets' instruction records (instructions.py has the record type).

    MFMA_32X32X8    v_mfma_f32_32x32x8{f16,bf16_1k}, v_mfma_i32_32x32x8i8 (gfx90a): one wave64
                    computes C[32, 32] += A[32, 8] B[8, 32]; taken where every wave's tile is whole 32x32s
    MFMA_16X16X16   v_mfma_f32_16x16x16{f16,bf16_1k}, v_mfma_i32_16x16x16i8 (gfx90a): C[16, 16]
                    += A[16, 16] B[16, 16]; any wave tile of whole 16x16s
    MFMA_32X32X16   gfx942's 8-bit forms, twice as deep: v_mfma_i32_32x32x16_i8 and
    MFMA_16X16X32   v_mfma_f32_32x32x16_{fp8_fp8,bf8_bf8} (16x16x32 alike), for int8 and AMD's
                    FNUZ fp8 (float8_e4m3fnuz, float8_e5m2fnuz); gfx942 has no 8-bit form of the
                    shallow shapes, and OCP fp8 (float8_e4m3) gemms, which its matrix cores do
                    not read, take SIMT FMAs (as every fp8 gemm on gfx90a)
    SIMT_FMA        one thread, fused multiply-adds: any types

The MFMA records read their operands from LDS by per-lane loads (no ldmatrix on AMD: a lane
reads its K-consecutive elements, 4 of them or 8 of an 8-bit k-deep form, with one ds_read when
the tile is stored K-contiguous, else element by element), from rows padded so that those reads
are conflict-free (`operand_pitch`), and are lowered by cdna.py; their fragments are
fragments.py's.
"""

from __future__ import annotations

from tilec import layout as L
from tilec import tir
from tilec.backends.hip import fragments as amd
from tilec.dtypes import DType
from tilec.instructions import Instruction, OperandTypes, simt_fma
from tilec.layout_algebra import Layout

F32 = DType.float32
_LDS_ROW_BYTES = 128  # 32 banks x 4 bytes: the bytes LDS serves per clock


def _mfma(operand: DType, accumulator: DType, suffix: str, m: int, k: int) -> OperandTypes:
    name = f"mfma_{m}x{m}x{k}_{suffix}"
    return OperandTypes(operand, accumulator, name, f"tilec_{name}")


def _warp_grid(
    rows: int, cols: int, waves: int, tile: int, policy: str, warp_rows: int | None
) -> tuple[int, int] | None:
    """(wave rows, wave cols) tiling rows x cols with tile x tile MFMA tiles (layout.warp_grid's policies)."""
    options = [(wm, waves // wm) for wm in range(1, waves + 1) if waves % wm == 0]
    fits = [(wm, wn) for wm, wn in options if rows % (wm * tile) == 0 and cols % (wn * tile) == 0]
    if not fits:
        return None
    if warp_rows is not None and any(wm == warp_rows for wm, _ in fits):
        return warp_rows, waves // warp_rows
    if policy == "FullRow":
        return max(fits)
    if policy == "FullCol":
        return min(fits)
    return min(fits, key=lambda w: (abs((rows / w[0]) - (cols / w[1])), -w[0]))


def _accumulator(tile: int):  # noqa: ANN202 - returns an instructions.AccumulatorLayout
    """The accumulator of a tile x tile MFMA tiled over the block's waves: in one tile lane l holds
    column l % tile and rows 8 b + 4 (l / tile) + i (fragments.mfma_c); waves tile the block
    (`_warp_grid`), each repeating the MFMA tile MI x NI times:
      threads: tile @ dim 1 stride 1, 64 / tile @ dim 0 stride 4, wn @ dim 1, wm @ dim 0
      regs:    MI @ dim 0 stride tile, NI @ dim 1 stride tile, (tile / 8) @ dim 0 stride 8, 4 @ dim 0 stride 1
    so one MFMA's tile * tile / 64 results are consecutive registers."""

    def layout(shape: tuple[int, int], threads: int, policy: str, rows: int | None) -> L.Fragment | None:
        if threads % amd.WAVE_SIZE:
            return None
        grid = _warp_grid(shape[0], shape[1], threads // amd.WAVE_SIZE, tile, policy, rows)
        if grid is None:
            return None
        wm, wn = grid
        mi, ni = shape[0] // (wm * tile), shape[1] // (wn * tile)
        lanes = (L.Part(tile, 1, 1), L.Part(amd.WAVE_SIZE // tile, 0, 4))
        thread_parts = (*lanes, L.Part(wn, 1, ni * tile), L.Part(wm, 0, mi * tile))
        groups = (L.Part(tile // 8, 0, 8),) if tile > 16 else ()
        local_parts = (L.Part(mi, 0, tile), L.Part(ni, 1, tile), *groups, L.Part(4, 0, 1))
        return L.Fragment(shape, thread_parts, local_parts)  # MI and NI first, even when 1 (cdna.setup reads them)

    return layout


def operand_pitch(buf: tir.Buffer, tile: int, per_lane: int) -> int:
    """The row length (elements) of a shared operand of a tile x tile MFMA whose lanes read
    `per_lane` K-consecutive elements, padded so that one LDS phase of those reads is
    conflict-free. LDS serves 32 banks x 4 bytes a clock, so a phase is 128 / read-bytes lanes
    (AMD's CK-Tile guide, "Understanding AMD GPU LDS and Bank Conflicts",
    rocm.docs.amd.com/projects/composable_kernel: the hardware splits a wave's access into phases
    by instruction width, 8 lanes each for b128; the ROCm blog "Avoiding LDS Bank Conflicts on AMD
    GPUs Using CK-Tile": 32 banks of one 4-byte access per clock). Those lanes read min(phase,
    tile) rows (lane % tile), 128 / rows bytes of each, so rows must start an odd multiple of that
    apart modulo 128:
      16-bit, and gfx942's k-deep 8-bit (8-byte ds_read_b64, 16 lanes): 16 rows, 8 bytes -> 16 j + 8
      int8 16x16x16 (4-byte ds_read_b32, 32 lanes): 16 rows x 2 K groups, 8 -> 16 j + 8
      int8 32x32x8 (4-byte reads, 32 lanes): 32 rows, 4 bytes -> 8 j + 4
    The K-strided reads (one element each) of those pitches are conflict-free as well."""
    row = buf.const_shape[-1] * buf.dtype.bytes
    rows = min(_LDS_ROW_BYTES // (per_lane * buf.dtype.bytes), tile)  # the rows of one phase
    pad = _LDS_ROW_BYTES // rows
    padded = -(-row // (2 * pad)) * 2 * pad + pad
    return padded // buf.dtype.bytes


def _fits(g: tir.Gemm, threads: int) -> bool:
    """Both operands in LDS (a register A is staged there by the lowering), B never a register tile."""
    return g.b.buffer.scope == "shared"


def _lane_read_conflicts(a):  # noqa: ANN001, ANN202 - a fragment maker; returns an instructions.LoadConflicts
    """The record's per-lane LDS reads (cdna.load) of an operand tile: fragments.lane_read_conflicts
    on its A fragment (B's is its transpose)."""

    def count(shape: tuple[int, int], smem: Layout, elem_bytes: int, k_inner: bool) -> int:
        return amd.lane_read_conflicts(a(), shape, smem, elem_bytes, k_inner)

    return count


def _record(tile: int, k: int, operands: tuple[OperandTypes, ...], a, b, c) -> Instruction:  # noqa: ANN001
    per_lane = tile * k // amd.WAVE_SIZE  # the K elements one lane holds of each operand
    return Instruction(
        name=f"mfma_{tile}x{tile}x{k}",
        shape=(tile, tile, k),
        operands=operands,
        group="warp",
        load="matrices",
        load_helper=None,
        a_in_registers=True,  # a register A (attention's P) is staged to LDS first (cdna.setup)
        a_registers_helper=None,
        k_contiguous=False,  # per-lane loads read either major-ness (strided ones element by element)
        accumulator=_accumulator(tile),
        fragments=(a, b, c),
        explain=f"MFMA {tile}x{tile}x{k} {{a}} -> {{c}} (matrix cores, wave64)",
        operands_fit=_fits,
        operand_pitch=lambda buf: operand_pitch(buf, tile, per_lane),
        load_conflicts=_lane_read_conflicts(a),
    )


def _16bit(m: int, k: int) -> tuple[OperandTypes, ...]:
    return (_mfma(DType.float16, F32, "f16", m, k), _mfma(DType.bfloat16, F32, "bf16", m, k))


def _8bit_deep(m: int, k: int) -> tuple[OperandTypes, ...]:
    """gfx942's k-deep 8-bit forms: int8 -> int32, FNUZ e4m3 (fp8) and e5m2 (bf8) -> float32."""
    return (
        _mfma(DType.int8, DType.int32, "i8", m, k),
        _mfma(DType.float8_e4m3fnuz, F32, "fp8", m, k),
        _mfma(DType.float8_e5m2fnuz, F32, "bf8", m, k),
    )


_I8_16 = _mfma(DType.int8, DType.int32, "i8", 16, 16)
_I8_32 = _mfma(DType.int8, DType.int32, "i8", 32, 8)

MFMA_32X32X8 = _record(32, 8, (*_16bit(32, 8), _I8_32), amd.mfma_32x32x8_a, amd.mfma_32x32x8_b, amd.mfma_32x32_c)
MFMA_16X16X16 = _record(16, 16, (*_16bit(16, 16), _I8_16), amd.mfma_16x16x16_a, amd.mfma_16x16x16_b, amd.mfma_16x16_c)
MFMA_32X32X8_942 = _record(32, 8, _16bit(32, 8), amd.mfma_32x32x8_a, amd.mfma_32x32x8_b, amd.mfma_32x32_c)
MFMA_16X16X16_942 = _record(16, 16, _16bit(16, 16), amd.mfma_16x16x16_a, amd.mfma_16x16x16_b, amd.mfma_16x16_c)
MFMA_32X32X16 = _record(32, 16, _8bit_deep(32, 16), amd.mfma_32x32x16_a, amd.mfma_32x32x16_b, amd.mfma_32x32_c)
MFMA_16X16X32 = _record(16, 32, _8bit_deep(16, 32), amd.mfma_16x16x32_a, amd.mfma_16x16x32_b, amd.mfma_16x16_c)

SIMT_FMA = simt_fma("SIMT FMA (vector ALU)")

GFX90A_INSTRUCTIONS = (MFMA_32X32X8, MFMA_16X16X16, SIMT_FMA)
GFX942_INSTRUCTIONS = (MFMA_32X32X8_942, MFMA_32X32X16, MFMA_16X16X16_942, MFMA_16X16X32, SIMT_FMA)
