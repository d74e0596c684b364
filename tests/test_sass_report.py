"""bench/sass_report.py: the registers and spills ptxas reports, and the tensor-core instructions
and longest loop of each kernel's SASS (parsed from text here; the tools run where installed)."""

from __future__ import annotations

from bench_scripts import load_bench

sass_report = load_bench("sass_report")

PTXAS = """\
ptxas info    : Compiling entry function 'gemm_kernel' for 'sm_90a'
ptxas info    : Function properties for gemm_kernel
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 168 registers, used 2 barriers
ptxas info    : Compiling entry function 'gemm_fallback_kernel' for 'sm_90a'
ptxas info    : Function properties for gemm_fallback_kernel
    24 bytes stack frame, 24 bytes spill stores, 28 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 24 bytes cumulative stack size
"""

SASS = """\
\tFunction : gemm_kernel
        /*0000*/                   MOV R1, c[0x0][0x28] ;
        /*0010*/                   HGMMA.64x256x16.F32 R24, gdesc[UR24].tnspB, R24 ;
        /*0020*/                   QGMMA.64x256x32.F32.E4M3.E4M3 R24, gdesc[UR24], R24, gsb0 ;
        /*0030*/              @!P0 BRA.U.ANY 0x10 ;
        /*0040*/                   EXIT ;
\tFunction : gemm_fallback_kernel
        /*0000*/                   HMMA.16816.F32 R4, R8, R12, R4 ;
        /*0010*/                   IMMA.16832.S8.S8 R4, R8, R12, R4 ;
        /*0020*/                   EXIT ;
"""


def test_ptxas_registers_and_spills_per_kernel() -> None:
    assert sass_report.ptxas_info(PTXAS) == {
        "gemm_kernel": {"spill_stores": 0, "spill_loads": 0, "registers": 168},
        "gemm_fallback_kernel": {"spill_stores": 24, "spill_loads": 28, "registers": 255},
    }


def test_sass_tensor_core_instructions_and_longest_loop() -> None:
    counts = sass_report.sass_counts(SASS)
    assert counts["gemm_kernel"] == {"wgmma": 2, "mma_sync": 0, "instructions": 5, "longest_loop": 3}
    assert counts["gemm_fallback_kernel"] == {"wgmma": 0, "mma_sync": 2, "instructions": 3, "longest_loop": 0}
