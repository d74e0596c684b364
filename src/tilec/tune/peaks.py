"""The GPUs the cost model knows: peak rates and per-multiprocessor limits, with their sources.

    GPUS["h200"].sms              -> 132
    GPUS["h200"].tensor_flops[16] -> 989.4e12   (dense fp16/bf16 tensor-core FLOP/s)
    gpu_for_arch("sm_90a")        -> GPUS["h200"];  gpu_for_arch("sm_80") -> GPUS["a100"]

Peaks are the datasheets' dense numbers (no 2:4 sparsity). Two rows are this project's own
measurements on the lent H200 (README.md, "Kernels on the GPU"): the copy bandwidth an
elementwise kernel reaches (4398 GB/s, 92% of the 4.8 TB/s peak), what the warp-level m16n8k16 MMA
reaches with no memory traffic (638 TFLOP/s, bench/mma_peak.cu: 64% of the datasheet's 989), and
what cuBLAS reaches at 8192^3 (654 TFLOP/s: the H200 does not hold its boost clock under wgmma).
The A100 rows without a measurement assume 90% of the datasheet's bandwidth and tensor rate, and
warp-level MMA at the full rate (it is Ampere's own tensor-core instruction). `dram_latency` and
`l2_bandwidth` are assumptions (about what microbenchmark papers report), not datasheet numbers.
`smem_bandwidth` is the shared memory's 32 banks of 4 bytes per clock per SM at the boost clock
(1.41 GHz A100, 1.98 GHz H200): the most that warp-level gemm operand loads can move into registers.
"""

from __future__ import annotations

from dataclasses import dataclass

A100_SOURCE = (
    "NVIDIA A100 Tensor Core GPU datasheet (SXM4 80GB) and the NVIDIA A100 architecture "
    "whitepaper (164 KB shared memory per SM, 65536 registers, 2048 threads, 32 blocks)"
)
H200_SOURCE = (
    "NVIDIA H200 Tensor Core GPU datasheet (SXM, dense rates are half the sparse ones) and the "
    "NVIDIA H100 architecture whitepaper (Hopper SM: 228 KB shared memory, 65536 registers); "
    "copy bandwidth and warp-level MMA rate measured on the lent H200 (README.md)"
)


@dataclass(frozen=True, slots=True)
class GPU:
    name: str
    sms: int
    tensor_flops: dict[int, float]  # operand bits -> dense tensor-core FLOP/s, datasheet
    tensor_fraction: float  # of `tensor_flops` the best GEMM reaches (clocks under load)
    warp_mma_fraction: float  # what warp-level warp-level MMA reaches of `tensor_flops`
    simt_flops: float  # fp32 FMA FLOP/s on the CUDA cores
    dram_bandwidth: float  # bytes/s, datasheet
    copy_fraction: float  # of `dram_bandwidth` a streaming kernel reaches
    l2_bytes: int
    smem_per_sm: int  # bytes of shared memory one multiprocessor holds
    registers_per_sm: int
    threads_per_sm: int
    blocks_per_sm: int
    dram_latency: float  # seconds from a global load's issue to its data (assumed)
    l2_bandwidth: float  # bytes/s from L2 to the SMs (assumed)
    source: str
    smem_bandwidth: float = 0.0  # bytes/s of shared memory into registers, all SMs (128 B per clock per SM)

    @property
    def copy_bandwidth(self) -> float:
        return self.dram_bandwidth * self.copy_fraction


RESIDENT_BLOCKS = 32  # blocks one SM holds at most, sm_80 to sm_90

GPUS: dict[str, GPU] = {
    "a100": GPU(
        "A100 SXM4 80GB", 108, {16: 312e12, 8: 624e12}, 0.9, 1.0, 19.5e12, 2039e9, 0.90,
        40 * 2**20, 164 * 1024, 65536, 2048, RESIDENT_BLOCKS, 600e-9, 5.0e12, A100_SOURCE, 128 * 1.41e9 * 108,
    ),
    "h200": GPU(
        "H200 SXM 141GB", 132, {16: 989.4e12, 8: 1978.9e12}, 654e12 / 989.4e12, 638e12 / 989.4e12, 67e12,
        4800e9, 4398 / 4800, 50 * 2**20, 228 * 1024, 65536, 2048, RESIDENT_BLOCKS, 700e-9, 8.0e12, H200_SOURCE,
        128 * 1.98e9 * 132,
    ),
}  # fmt: skip

# the GPU a build for each architecture is modelled on unless `tilec tune --gpu` names one
ARCH_GPU = {"sm_80": "a100", "sm_86": "a100", "sm_89": "a100", "sm_90a": "h200"}


def gpu_for_arch(arch: str, name: str | None = None) -> GPU:
    """The GPU `name` names, else the one `arch` is modelled on."""
    return GPUS[name or ARCH_GPU.get(arch, "a100")]
