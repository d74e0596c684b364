"""The CDNA targets' instruction records (instructions.py has the record type).

    SIMT_FMA      one thread, fused multiply-adds: any types

A gemm takes the first record of its target's list (targets.py) that accepts
it (passes/select.py).
"""

from __future__ import annotations

from tilec.instructions import simt_fma

SIMT_FMA = simt_fma("SIMT FMA (vector ALU)")

GFX90A_INSTRUCTIONS = (SIMT_FMA,)
GFX942_INSTRUCTIONS = (SIMT_FMA,)
