"""The builds of the examples that the GPU checks and the benchmarks use.

A variant is one `.tile` example compiled with some `-D` overrides for one arch; its generated file
is `<prebuilt dir>/<name>.cu`. `tests/gpu/prebuild.py` writes them all (here, where the compiler's
dependencies are installed); `tests/gpu/run_all.py` and `bench/run.py` load them on the GPU machine
through `tilec.runtime`, which needs only the standard library, torch and nvcc.

Standard library only: imported on the GPU machine too.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(ROOT, "examples")
PROGRAMS = "bench/programs"  # the GEMM table's layouts (transposed A, transposed B, batched + bias)
ATTENTION = "bench/programs/attention"  # attention cells the examples do not cover (grouped-query)
PRIMITIVES = "tests/gpu/programs"  # one small kernel per primitive the examples do not use
CORPUS = "tests/corpus/tilelang"  # TileLang's examples as .tile (bench/corpus_gpu.py times them)


@dataclass(frozen=True)
class Variant:
    name: str  # file stem of the generated .cu
    example: str  # <folder>/<example>.tile
    defines: dict[str, str] = field(default_factory=dict)
    arch: str = "sm_80"  # the arch tilec generates code for (nvcc then builds for the GPU at hand)
    bench: bool = False  # a configuration for bench/run.py (still checked by the GPU tests)
    folder: str = "examples"  # where the .tile file is, relative to the repository root
    includes: tuple[str, ...] = ()  # `tilec build --include` headers, relative to the repository root

    @property
    def path(self) -> str:
        return os.path.join(ROOT, self.folder, f"{self.example}.tile")

    def describe(self) -> str:
        ds = " ".join(f"-D {k}={v}" for k, v in self.defines.items())
        where = "" if self.folder == "examples" else f"{self.folder}/"
        return f"{where}{self.example}.tile --arch {self.arch}" + (f" {ds}" if ds else "")


# Smaller tiles than the defaults, so that ragged rows (block_M > 1) and multi-tile rows are
# exercised at test sizes.
_SMALL_ROWS = {"block_M": "4", "block_N": "256", "threads": "128"}

# examples/gemm_int8.tile's fp8 forms; 128x256 tiles (two consumer warp groups) with 128- or 64-byte
# K rows, in as many stages as shared memory holds
_FP8 = {"dtype": "float8_e4m3", "accum_dtype": "float32"}
_FP8_F16 = {**_FP8, "out_dtype": "float16"}
_WIDE = {"block_N": "256", "threads": "256", "block_K": "128", "num_stages": "4"}
_WIDE_K64 = {"block_N": "256", "threads": "256", "block_K": "64", "num_stages": "8"}
_SKINNY = {"block_M": "64", "block_N": "128", "block_K": "128", "num_stages": "4", "threads": "128"}
_SKINNY_N64 = {**_SKINNY, "block_N": "64"}

VARIANTS: list[Variant] = [
    Variant("elementwise_add", "elementwise_add"),
    Variant("gemm", "gemm"),
    Variant("gemm-sm90a", "gemm", arch="sm_90a"),
    Variant("gemm-sm90a-128x128", "gemm", {"block_N": "128", "threads": "128"}, arch="sm_90a"),
    Variant("gemm-sm90a-k32", "gemm", {"block_K": "32", "num_stages": "4"}, arch="sm_90a"),
    Variant("gemm_bf16-sm90a", "gemm", {"dtype": "bfloat16"}, arch="sm_90a"),
    Variant("gemm_relu-sm90a", "gemm_relu", arch="sm_90a"),
    Variant("gemm_splitk-sm90a", "gemm_splitk", arch="sm_90a"),
    Variant("dequant_gemm-sm90a", "dequant_gemm", arch="sm_90a"),
    Variant("gemm-64x64", "gemm", {"block_M": "64", "block_N": "64", "block_K": "16", "threads": "64"}),
    Variant("gemm_relu", "gemm_relu"),
    Variant("gemm_splitk", "gemm_splitk"),
    Variant("gemm_int8", "gemm_int8"),
    Variant("gemm_int8-sm90a", "gemm_int8", arch="sm_90a"),
    Variant("gemm_uint8-sm90a", "gemm_int8", {"dtype": "uint8"}, arch="sm_90a"),
    Variant("gemm_fp8-sm90a", "gemm_int8", _FP8, arch="sm_90a"),
    Variant("gemm_fp8_e5m2-sm90a", "gemm_int8", {**_FP8, "dtype": "float8_e5m2"}, arch="sm_90a"),
    Variant("softmax", "softmax"),
    Variant("softmax-small", "softmax", _SMALL_ROWS),
    Variant("rmsnorm", "rmsnorm"),
    Variant("rmsnorm-small", "rmsnorm", _SMALL_ROWS),
    Variant("layernorm", "layernorm"),
    Variant("layernorm-small", "layernorm", _SMALL_ROWS),
    Variant("flash_attention", "flash_attention"),
    Variant("flash_attention-causal", "flash_attention", {"is_causal": "True"}),
    Variant("flash_attention-sm90a", "flash_attention", arch="sm_90a"),
    Variant("flash_attention-causal-sm90a", "flash_attention", {"is_causal": "True"}, arch="sm_90a"),
    Variant("flash_attention-d64", "flash_attention", {"dim": "64", "block_M": "32", "block_N": "32"}),
    Variant("dequant_gemm", "dequant_gemm"),
    Variant("mla_decode", "mla_decode"),
    # halos: tiles whose copies start before row or column 0 (lower-edge guards)
    Variant("conv1d_halo", "conv1d_halo"),
    Variant("conv1d_halo-sm90a", "conv1d_halo", arch="sm_90a"),
    Variant("conv1d_halo-k7", "conv1d_halo", {"K": "7", "block_L": "32", "block_C": "128"}),
    Variant("stencil", "stencil"),
    Variant("stencil-sm90a", "stencil", arch="sm_90a"),
    # ---- benchmark configurations (bench/run.py picks the fastest correct one per workload)
    Variant("gemm-bench-128x128", "gemm", {"block_N": "128", "threads": "128"}, bench=True),
    Variant("gemm-bench-s4", "gemm", {"block_K": "32", "num_stages": "4"}, bench=True),
    Variant("gemm-bench-k32", "gemm", {"block_K": "32"}, bench=True),
    Variant("flash_attention-bench-n32", "flash_attention", {"block_N": "32"}, bench=True),
    Variant("flash_attention-bench-s1", "flash_attention", {"num_stages": "1"}, bench=True),
    Variant("flash_attention-causal-bench-s1", "flash_attention", {"is_causal": "True", "num_stages": "1"}, bench=True),
    # two consumer warp groups of 64 rows each (wgmma m64), the example's 128-row tile
    Variant("flash_attention-bench-sm90a-t256", "flash_attention", {"threads": "256"}, arch="sm_90a", bench=True),
    # 128x128 tiles, D 64, two consumer warp groups: the products overlap (sm90 _consumers_overlapped),
    # the causal one's too (its loop stops at the block's diagonal)
    Variant(
        "flash_attention-sm90a-overlap",
        "flash_attention",
        {"dim": "64", "block_N": "128", "threads": "256"},
        arch="sm_90a",
    ),
    Variant(
        "flash_attention-causal-sm90a-overlap",
        "flash_attention",
        {"dim": "64", "block_N": "128", "threads": "256", "is_causal": "True"},
        arch="sm_90a",
    ),
    # 128x128 tiles, D 128, two consumer warp groups: overlapped where the consumers' registers allow
    Variant(
        "flash_attention-bench-sm90a-n128",
        "flash_attention",
        {"block_N": "128", "threads": "256"},
        arch="sm_90a",
        bench=True,
    ),
    Variant(
        "flash_attention-causal-bench-sm90a-n128",
        "flash_attention",
        {"is_causal": "True", "block_N": "128", "threads": "256"},
        arch="sm_90a",
        bench=True,
    ),
    Variant(
        "flash_attention-causal-bench-sm90a-t256",
        "flash_attention",
        {"is_causal": "True", "threads": "256"},
        arch="sm_90a",
        bench=True,
    ),
    # head dims 64 and 256 (issue 12's other cells): D 64 on 128x64 tiles beside the overlap build's
    # 128x128; D 256 on 128x64 tiles (Q 64 KB, 2 stages of K and V 128 KB) and 128x32
    Variant(
        "flash_attention-d64-bench-sm90a-n64",
        "flash_attention",
        {"dim": "64", "threads": "256"},
        arch="sm_90a",
        bench=True,
    ),
    # D 64 on 192x128 tiles: three consumer warp groups of 64 rows (FlashAttention-3's tile for D 64)
    Variant(
        "flash_attention-d64-bench-sm90a-m192",
        "flash_attention",
        {"dim": "64", "block_M": "192", "block_N": "128", "threads": "384"},
        arch="sm_90a",
        bench=True,
    ),
    Variant(
        "flash_attention-d64-causal-bench-sm90a-m192",
        "flash_attention",
        {"dim": "64", "block_M": "192", "block_N": "128", "threads": "384", "is_causal": "True"},
        arch="sm_90a",
        bench=True,
    ),
    Variant(
        "flash_attention-d64-causal-bench-sm90a-n64",
        "flash_attention",
        {"dim": "64", "threads": "256", "is_causal": "True"},
        arch="sm_90a",
        bench=True,
    ),
    Variant(
        "flash_attention-d256-bench-sm90a",
        "flash_attention",
        {"dim": "256", "threads": "256"},
        arch="sm_90a",
        bench=True,
    ),
    Variant(
        "flash_attention-d256-bench-sm90a-n32",
        "flash_attention",
        {"dim": "256", "block_N": "32", "threads": "256"},
        arch="sm_90a",
        bench=True,
    ),
    Variant(
        "flash_attention-d256-causal-bench-sm90a",
        "flash_attention",
        {"dim": "256", "threads": "256", "is_causal": "True"},
        arch="sm_90a",
        bench=True,
    ),
    Variant(
        "flash_attention-d256-causal-bench-sm90a-n32",
        "flash_attention",
        {"dim": "256", "block_N": "32", "threads": "256", "is_causal": "True"},
        arch="sm_90a",
        bench=True,
    ),
    # 128x80 at D 256 (FlashAttention-3's tile there): K and V of 80 rows, S a ragged multiple of it
    Variant(
        "flash_attention-d256-bench-sm90a-n80",
        "flash_attention",
        {"dim": "256", "block_N": "80", "threads": "256"},
        arch="sm_90a",
        bench=True,
    ),
    Variant(
        "flash_attention-d256-causal-bench-sm90a-n80",
        "flash_attention",
        {"dim": "256", "block_N": "80", "threads": "256", "is_causal": "True"},
        arch="sm_90a",
        bench=True,
    ),
    # grouped-query attention (bench/programs/attention/gqa_attention.tile: causal, 4 query heads per K/V head)
    Variant("gqa_attention-sm90a", "gqa_attention", arch="sm_90a", bench=True, folder=ATTENTION),
    Variant(
        "gqa_attention-bench-sm90a-n64",
        "gqa_attention",
        {"block_N": "64"},
        arch="sm_90a",
        bench=True,
        folder=ATTENTION,
    ),
    Variant("elementwise_add-bench", "elementwise_add", {"block_N": "4096", "threads": "256"}, bench=True),
    Variant("softmax-bench", "softmax", {"block_N": "8192", "threads": "512"}, bench=True),
    Variant("rmsnorm-bench", "rmsnorm", {"block_N": "8192", "threads": "512"}, bench=True),
    Variant("rmsnorm-bench-t256", "rmsnorm", {"block_N": "8192", "threads": "256"}, bench=True),
    Variant("rmsnorm-bench-t1024", "rmsnorm", {"block_N": "8192", "threads": "1024"}, bench=True),
    Variant("rmsnorm-bench-m2", "rmsnorm", {"block_M": "2", "block_N": "8192", "threads": "512"}, bench=True),
    Variant("softmax-bench-t256", "softmax", {"block_N": "8192", "threads": "256"}, bench=True),
    # 8-bit GEMMs on sm_90a (wgmma k32 by warp roles): the example's 128x128x64, and 128x256 tiles
    # of two consumer warp groups with 64- or 128-byte K rows; fp8 written as float16
    Variant("gemm_fp8-bench-sm90a", "gemm_int8", _FP8_F16, arch="sm_90a", bench=True),
    Variant("gemm_fp8-bench-sm90a-128x256", "gemm_int8", {**_FP8_F16, **_WIDE}, arch="sm_90a", bench=True),
    Variant("gemm_fp8-bench-sm90a-128x256-k64", "gemm_int8", {**_FP8_F16, **_WIDE_K64}, arch="sm_90a", bench=True),
    Variant("gemm_int8-bench-sm90a-128x256", "gemm_int8", _WIDE, arch="sm_90a", bench=True),
    Variant("gemm_int8-bench-sm90a-128x256-k64", "gemm_int8", _WIDE_K64, arch="sm_90a", bench=True),
    # ---- the GEMM table (bench/gemm_table.py): the other layouts, as a TileLang user writes them
    Variant("gemm_tn-sm90a", "gemm_tn", arch="sm_90a", folder=PROGRAMS),
    Variant("gemm_nt-sm90a", "gemm_nt", arch="sm_90a", folder=PROGRAMS),
    Variant("bmm_bias-sm90a", "bmm_bias", arch="sm_90a", folder=PROGRAMS),
    Variant("gemm_tn", "gemm_tn", folder=PROGRAMS),
    Variant("gemm_nt", "gemm_nt", folder=PROGRAMS),
    Variant("bmm_bias", "bmm_bias", folder=PROGRAMS),
    Variant("row_bits", "row_bits", folder=PRIMITIVES),
    Variant("row_bits-sm90a", "row_bits", arch="sm_90a", folder=PRIMITIVES),
    Variant("row_argmax", "row_argmax", folder=PRIMITIVES),
    Variant("paged_gather", "paged_gather", folder=PRIMITIVES),
    Variant("frag_scan", "frag_scan", folder=PRIMITIVES),
    Variant("paged_gather-sm90a", "paged_gather", arch="sm_90a", folder=PRIMITIVES),
    Variant("attention_schedule", "attention_schedule", folder=PRIMITIVES),
    Variant("attention_schedule-sm90a", "attention_schedule", arch="sm_90a", folder=PRIMITIVES),
    Variant("gemm_schedule", "gemm_schedule", folder=PRIMITIVES),
    Variant("gemm_schedule-sm90a", "gemm_schedule", arch="sm_90a", folder=PRIMITIVES),
    Variant("row_argmax-sm90a", "row_argmax", arch="sm_90a", folder=PRIMITIVES),
    # block-sparse GEMM: copies that open a Pipelined loop's `if` run ahead under its mask (cp.async;
    # on sm_90a by warp roles, taking a stage of the ring only where the mask is set, and the
    # cp.async + wgmma fallback for unaligned rows), 3 stages, and 4 on 128x128 tiles
    Variant("blocksparse_gemm", "blocksparse_gemm", folder=PRIMITIVES),
    Variant("blocksparse_gemm-sm90a", "blocksparse_gemm", arch="sm_90a", folder=PRIMITIVES),
    Variant(
        "blocksparse_gemm-sm90a-128x128-s4",
        "blocksparse_gemm",
        {"block_M": "128", "block_N": "128", "num_stages": "4"},
        arch="sm_90a",
        folder=PRIMITIVES,
    ),
    # sub-byte types: packed int4 / uint4 / fp4 tensors and tiles, TileLang's int4 GEMM, an MXFP4 dequantize GEMM
    Variant("subbyte_unpack", "subbyte_unpack", folder=PRIMITIVES),
    Variant("subbyte_unpack-sm90a", "subbyte_unpack", arch="sm_90a", folder=PRIMITIVES),
    Variant("gemm_int4", "gemm_int4", folder=CORPUS),
    Variant("gemm_int4-sm90a", "gemm_int4", arch="sm_90a", folder=CORPUS),
    Variant("dequant_gemm_w4", "dequant_gemm_w4", folder=PRIMITIVES),
    Variant("dequant_gemm_w4-sm90a", "dequant_gemm_w4", arch="sm_90a", folder=PRIMITIVES),
    Variant("dequant_gemm_mxfp4", "dequant_gemm_mxfp4"),
    Variant("dequant_gemm_mxfp4-sm90a", "dequant_gemm_mxfp4", arch="sm_90a"),
    Variant("atomic_minmax", "atomic_minmax", folder=PRIMITIVES),
    Variant("row_scan", "row_scan", folder=PRIMITIVES),
    Variant("block_histogram", "block_histogram", folder=PRIMITIVES),
    Variant("extern_gelu", "extern_gelu", folder=PRIMITIVES, includes=(f"{PRIMITIVES}/extern_ops.cuh",)),
    Variant("row_scan-sm90a", "row_scan", arch="sm_90a", folder=PRIMITIVES),
    Variant("atomic_minmax-sm90a", "atomic_minmax", arch="sm_90a", folder=PRIMITIVES),
    Variant("atomic_add_tiles", "atomic_add_tiles", folder=PRIMITIVES),
    Variant("atomic_add_tiles-sm90a", "atomic_add_tiles", arch="sm_90a", folder=PRIMITIVES),
    Variant("scaled_gemm", "scaled_gemm", folder=PRIMITIVES),
    Variant("scaled_gemm-sm90a", "scaled_gemm", arch="sm_90a", folder=PRIMITIVES),
    Variant("strided_views", "strided_views", folder=PRIMITIVES),
    Variant("strided_views-sm90a", "strided_views", arch="sm_90a", folder=PRIMITIVES),
    # skinny M (a few rows, wide N and K, memory-bound): the -D values a user would pick for a
    # few rows (64-row tiles, deep k steps), at 128- and 64-wide N tiles (bench/skinny_sweep.py:
    # on an H100 the first is the fastest of 14 configurations at 16, 64 and 128 rows together)
    Variant("gemm-sm90a-skinny", "gemm", _SKINNY, arch="sm_90a", bench=True),
    Variant("gemm-sm90a-skinny-n64", "gemm", _SKINNY_N64, arch="sm_90a", bench=True),
    # TileLang's own example program (anchors.py tl-gemm) exactly: examples/gemm.tile's
    # 128x256x64 tile, 3 stages, 256 threads, with its panel of 10 block rows instead of 8
    Variant("gemm-sm90a-p10", "gemm", {"panel": "10"}, arch="sm_90a", bench=True),
    # GEMMs walking their own tiles in a wave loop (TileLang's persistent example, by hand): the
    # main loop runs by warp roles inside it, the kernel keeps its grid; 20 blocks, so that a
    # block runs several waves and the last one has slots past the last tile
    Variant("gemm_persistent-sm90a-waves", "gemm_persistent", {"sm_num": "20"}, arch="sm_90a", folder=CORPUS),
    Variant("gemm_waves-sm90a", "gemm_waves", arch="sm_90a", folder=PRIMITIVES),  # holes mid-walk
]

BY_NAME: dict[str, Variant] = {v.name: v for v in VARIANTS}
assert len(BY_NAME) == len(VARIANTS), "duplicate variant names"

MANIFEST = "manifest.json"  # written by prebuild.py beside the .cu files
