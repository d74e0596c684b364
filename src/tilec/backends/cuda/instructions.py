"""The CUDA targets' instruction records (instructions.py has the record type).

    MMA_M16N8K16  mma.sync m16n8k16: float16/bfloat16 -> float32
    MMA_M16N8K32  mma.sync m16n8k32: int8 -> int32; float8 e4m3/e5m2 -> float32 from sm_89
    SIMT_FMA      one thread, fused multiply-adds: any types

A gemm takes the first record of its target's list (targets.py) that accepts
it (passes/select.py). Both mma.sync records run on one warp, load their
operands from shared memory with ldmatrix (helpers in spelling.py), and are
lowered by sm80.py; their fragments are the PTX ISA's (fragment_algebra.py).
"""

from __future__ import annotations

from tilec import fragment_algebra as fa
from tilec import layout as L
from tilec.dtypes import DType
from tilec.instructions import Instruction, OperandTypes, simt_fma

F32 = DType.float32
SM89 = (8, 9)  # fp8 mma.sync


def _mma(operand: DType, accumulator: DType, suffix: str, k: int, since: tuple[int, int] = (0, 0)) -> OperandTypes:
    return OperandTypes(operand, accumulator, f"mma_{suffix}", f"tilec_mma_m16n8k{k}_{suffix}", since)


MMA_M16N8K16 = Instruction(
    name="mma_sync_m16n8k16",
    shape=(16, 8, 16),
    operands=(_mma(DType.float16, F32, "f16", 16), _mma(DType.bfloat16, F32, "bf16", 16)),
    group="warp",
    load="ldmatrix",
    load_helper="ldmatrix",
    a_in_registers=True,
    a_registers_helper="pack",  # two m16n8 accumulator tiles are one m16k16 A fragment
    k_contiguous=False,  # ldmatrix.trans transposes 16-bit elements
    accumulator=L.mma_accumulator,
    fragments=(fa.mma_m16n8k16_a, fa.mma_m16n8k16_b, fa.mma_m16n8k16_c),
    explain="mma.sync m16n8k16 {a} -> {c} (tensor cores)",
)

MMA_M16N8K32 = Instruction(
    name="mma_sync_m16n8k32",
    shape=(16, 8, 32),
    operands=(
        _mma(DType.int8, DType.int32, "s8", 32),
        _mma(DType.float8_e4m3, F32, "e4m3", 32, SM89),
        _mma(DType.float8_e5m2, F32, "e5m2", 32, SM89),
    ),
    group="warp",
    load="ldmatrix",
    load_helper="ldmatrix",
    a_in_registers=False,
    a_registers_helper=None,
    k_contiguous=True,  # ldmatrix transposes 16-bit elements only
    accumulator=L.mma_accumulator,
    fragments=(fa.mma_m16n8k32_a, fa.mma_m16n8k32_b, fa.mma_m16n8k16_c),
    explain="mma.sync m16n8k32 {a} -> {c} (tensor cores)",
)

SIMT_FMA = simt_fma("SIMT FMA (CUDA cores)")

# Every CUDA target's records, in order of preference.
SM80_INSTRUCTIONS = (MMA_M16N8K16, MMA_M16N8K32, SIMT_FMA)
