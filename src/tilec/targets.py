"""Targets as data: what differs between GPU architectures lives here.

The emitter and lowering read these fields; they never test an arch name.
"""

from __future__ import annotations

from dataclasses import dataclass

from tilec.dtypes import DType


@dataclass(frozen=True, slots=True)
class Target:
    arch: str  # as given to --arch
    gencode: str  # nvcc -gencode value
    smem_limit: int  # bytes of shared memory one block may use (opt-in)
    headers: tuple[str, ...]
    mma_types: frozenset[tuple[DType, DType]]  # (operands, accumulator) pairs with an mma.sync instruction
    warp_size: int = 32


_HEADERS = ("cuda_runtime.h", "cuda_fp16.h", "cuda_bf16.h", "cuda_fp8.h", "stdint.h", "stdio.h")

# m16n8k16 for 16-bit operands, m16n8k32 for 8-bit ones; fp8 operands need sm_89 or later
_MMA_SM80 = frozenset({(DType.float16, DType.float32), (DType.bfloat16, DType.float32), (DType.int8, DType.int32)})
_MMA_SM89 = _MMA_SM80 | {(DType.float8_e4m3, DType.float32), (DType.float8_e5m2, DType.float32)}

TARGETS: dict[str, Target] = {
    "sm_80": Target("sm_80", "arch=compute_80,code=sm_80", 166912, _HEADERS, _MMA_SM80),
    "sm_86": Target("sm_86", "arch=compute_86,code=sm_86", 101376, _HEADERS, _MMA_SM80),
    "sm_89": Target("sm_89", "arch=compute_89,code=sm_89", 101376, _HEADERS, _MMA_SM89),
    "sm_90a": Target("sm_90a", "arch=compute_90a,code=sm_90a", 232448, _HEADERS, _MMA_SM89),
}


def mma_depth(dtype: DType) -> int:
    """K of one mma.sync: m16n8k16 for 16-bit operands, m16n8k32 for 8-bit ones (32 bytes either way)."""
    return 32 // dtype.bytes


def get_target(arch: str) -> Target:
    return TARGETS[arch]
