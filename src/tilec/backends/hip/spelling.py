"""The HIP target's words: what the emitter prints for each neutral form on AMD GPUs.

targets.py assembles these into the `Spelling`, `Launch` and `Headers` records of
the CDNA targets (gfx90a, gfx942), as it does backends/cuda/spelling.py's for
CUDA. A form that lowering produces, and what this file makes of it:

    T.Builtin("thread_index")                  ->  threadIdx.x
    T.Barrier("block")                         ->  __syncthreads();
    T.Barrier("async_wait", (IntImm(1),))      ->  (nothing: copies into LDS are register-staged loads and stores)
    T.Intrin("shfl_xor", (v, IntImm(32)))      ->  __shfl_xor(v, 32)   (a wave64: width 64)

hipcc compiles the HIP runtime's own headers only (hip/hip_runtime.h,
hip/hip_fp16.h, hip/hip_bfloat16.h). Only the standard library is imported here.
"""

from __future__ import annotations

from tilec.backends import SHARED_HELPERS
from tilec.dtypes import DType

LANGUAGE = "hip"

BUILTINS: dict[str, str] = {
    "thread_index": "threadIdx.x",
    "block_index_x": "blockIdx.x",
    "block_index_y": "blockIdx.y",
    "block_index_z": "blockIdx.z",
    "grid_dim_x": "gridDim.x",
    "grid_dim_y": "gridDim.y",
    "grid_dim_z": "gridDim.z",
}

# The copies of pipelined loops are register-staged on CDNA (no cp.async): a stage's stores have
# landed in LDS when the thread moves on, so a commit or a wait has nothing to do ("" prints no
# statement) and the block barrier that follows every wait publishes the stage.
BARRIERS: dict[str, str] = {"block": "__syncthreads();", "async_commit": "", "async_wait": ""}
BARRIER_HELPERS: dict[str, str] = {}

# `__shfl_xor` exchanges across the whole wave64 (width 64 by default): the compiler lowers it
# to ds_swizzle / DPP moves where the lane pattern allows, ds_bpermute otherwise.
INTRINSICS: dict[str, str] = {
    "shfl_xor": "__shfl_xor({0}, {1})",
    "shfl_down": "__shfl_down({0}, {1})",
    "atomic_add": "atomicAdd({0}, {1})",
    "atomic_max": "atomicMax({0}, {1})",
    "atomic_min": "atomicMin({0}, {1})",
    "printf": "printf({args})",
    "trap": "__builtin_trap()",
    "address": "reinterpret_cast<uintptr_t>({0})",
}

# C++ names of the element types where HIP's differ from dtypes.py's (CUDA's). ROCm 5.2's headers
# have no 8-bit float types, so all four are tilec's own (FP8_TYPE below).
TYPE_NAMES: dict[DType, str] = {
    DType.bfloat16: "hip_bfloat16",
    DType.float8_e4m3: "tilec_fp8_e4m3",
    DType.float8_e5m2: "tilec_fp8_e5m2",
}
_FP8 = (DType.float8_e4m3, DType.float8_e5m2, DType.float8_e4m3fnuz, DType.float8_e5m2fnuz)
# Types without an implicit conversion from float (hip_bfloat16's constructor is explicit, and so
# are tilec's fp8 ones): a declaration or assignment of a float value to one spells the conversion.
EXPLICIT_TYPES = frozenset({DType.bfloat16, *_FP8})

# The 8-bit floats in software, as bits with conversions to and from float, emitted once before
# the typedefs of the ones a file uses. The same bits as torch's float8 tensors of each name
# (OCP e4m3fn / e5m2 and AMD's FNUZ formats), converted as CUDA's __nv_fp8 types convert:
# round to nearest even, saturating to the largest finite value; NaN to one NaN encoding.
FP8_TYPE = """
// An 8-bit float held as its bits: E exponent bits (bias B), M mantissa bits, largest finite
// encoding MAX; FNUZ formats (AMD's) have no infinities or negative zero and 0x80 is their NaN.
// Converted in software: to float exactly, from float rounding to nearest even and saturating.
template <int E, int M, int B, int MAX, bool FNUZ>
struct tilec_fp8 {
  unsigned char bits;
  tilec_fp8() = default;
  __device__ explicit tilec_fp8(float f) : bits(encode(f)) {}
  __device__ operator float() const { return decode(bits); }

  static __device__ float decode(unsigned char b) {
    const unsigned sign = (b & 0x80u) << 24, e = (b >> M) & ((1u << E) - 1), m = b & ((1u << M) - 1);
    if (FNUZ ? b == 0x80 : (b & 0x7F) > MAX) {  // past the largest finite: NaN, or e5m2's infinity
      return __uint_as_float(E == 5 && !FNUZ && m == 0 ? sign | 0x7F800000u : 0x7FC00000u);
    }
    if (e == 0) {  // subnormal: m * 2^(1 - B - M)
      return __uint_as_float(sign | __float_as_uint(m * __uint_as_float((128u - B - M) << 23)));
    }
    return __uint_as_float(sign | ((e + 127 - B) << 23) | (m << (23 - M)));
  }

  static __device__ unsigned char encode(float f) {
    const unsigned u = __float_as_uint(f), a = u & 0x7FFFFFFFu;
    const unsigned char sign = (u >> 24) & 0x80;
    if (a > 0x7F800000u) return FNUZ ? 0x80 : 0x7F;  // NaN (one canonical encoding)
    if (a < ((128u - B) << 23)) {  // below the smallest normal: a multiple of 2^(1 - B - M)
      const float scaled = __uint_as_float(a) * __uint_as_float((126u + B + M) << 23);  // exact
      const unsigned char q = static_cast<unsigned char>(rintf(scaled));
      return FNUZ && q == 0 ? 0 : (sign | q);
    }
    constexpr unsigned shift = 23 - M;
    const unsigned rounded = (a + (1u << (shift - 1)) - 1 + ((a >> shift) & 1)) >> shift;  // to nearest even
    const int bits = static_cast<int>(rounded) - ((127 - B) << M);  // the exponent rebiased
    return sign | static_cast<unsigned char>(bits > MAX ? MAX : bits);
  }
};"""
FP8_TYPEDEFS: dict[str, str] = {
    "tilec_fp8_e4m3": "typedef tilec_fp8<4, 3, 7, 0x7E, false> tilec_fp8_e4m3;  // OCP e4m3fn: 448 at most",
    "tilec_fp8_e5m2": "typedef tilec_fp8<5, 2, 15, 0x7B, false> tilec_fp8_e5m2;  // OCP e5m2: 57344, infinities",
    "tilec_fp8_e4m3fnuz": "typedef tilec_fp8<4, 3, 8, 0x7F, true> tilec_fp8_e4m3fnuz;  // AMD e4m3fnuz: 240 at most",
    "tilec_fp8_e5m2fnuz": "typedef tilec_fp8<5, 2, 16, 0x7F, true> tilec_fp8_e5m2fnuz;  // AMD e5m2fnuz: 57344",
}

# Names a kernel's own names must not take (lowering appends `_`): C++ keywords, HIP's built-in
# registers and types, the math functions, and the names the kernel and its launcher declare.
RESERVED = frozenset(
    """auto bool break case char const continue default do double else enum extern float for goto if int
    long register return short signed sizeof static struct switch typedef union unsigned void volatile while
    new delete this class template namespace true false inline asm half hip_bfloat16 threadIdx blockIdx
    blockDim gridDim warpSize dim3 min max abs exp log sqrt printf smem stream grid block""".split()
)

# What `tilec explain` calls the neutral operations on CDNA.
EXPLAIN: dict[str, str] = {
    "async_copy": "register-staged global load + LDS store",
    "matrices": "ds_read",
    "descriptors": "shared-memory descriptors",
    "shuffle": "__shfl_xor (wave64: DPP / ds_swizzle / ds_bpermute)",
    "atomic_add": "atomicAdd",
    "atomic_max": "atomicMax",
    "atomic_min": "atomicMin",
    "warps": "waves",
    "warp": "wave",
    "warp_width": "wave64",  # the header: "256 threads = 4 x wave64"
    "mma_tiles": "MFMA tiles",
}

VECTOR_TYPES: dict[int, str] = {16: "uint4", 8: "uint2", 4: "unsigned int", 2: "unsigned short"}

KERNEL_QUALIFIERS = 'extern "C" __global__ void __launch_bounds__({threads})'
DYNAMIC_SMEM = "extern __shared__ __align__({align}) unsigned char smem[];"
RESTRICT = " __restrict__"

STREAM_PARAM = "hipStream_t stream"
LAUNCHER_DOC = "// Launches {name}_kernel on `stream`; returns the launch's hipError_t (0 on success)."
PROTOTYPE_DOC = "// Launches kernel `{name}` on `stream`; returns the launch's hipError_t (0 on success)."
GRID = "const dim3 grid({0}, {1}, {2});"
TILES = "const dim3 tiles({0}, {1}, {2});"
PERSISTENT_GRID = ""  # no persistent kernels: those come with warp roles, which need bulk copies
LDS_BYTES = 64 * 1024  # LDS one workgroup may use on gfx90a and gfx942: all of it, without opting in
SMEM_OPT_IN: tuple[str, ...] = ()
LAUNCH = "{name}_kernel<<<grid, {threads}, smem_bytes, stream>>>({args});"
LAUNCH_STATUS = "return (int)hipGetLastError();"
TOO_LARGE = "return (int)hipErrorInvalidValue;"

HEADER_ALWAYS = "hip/hip_runtime.h"
_STDINT = ("int8_t", "int16_t", "int32_t", "int64_t", "uint8_t", "uint16_t", "uint32_t", "uint64_t")
HEADER_OF_NAME: dict[str, str] = {
    "half": "hip/hip_fp16.h",
    "hip_bfloat16": "hip/hip_bfloat16.h",
    **dict.fromkeys(_STDINT + ("intptr_t", "uintptr_t"), "stdint.h"),
    "printf": "stdio.h",
    "address": "stdint.h",
}
HEADER_ORDER = ("hip/hip_runtime.h", "hip/hip_fp16.h", "hip/hip_bfloat16.h", "stdint.h", "stdio.h")

HELPER_TYPES: dict[str, tuple[str, ...]] = {
    "mfma_16x16x16_f16": ("half",),
    "mfma_32x32x8_f16": ("half",),
    "mfma_16x16x16_bf16": ("hip_bfloat16",),
    "mfma_32x32x8_bf16": ("hip_bfloat16",),
    "mfma_16x16x32_fp8": ("tilec_fp8_e4m3fnuz",),
    "mfma_32x32x16_fp8": ("tilec_fp8_e4m3fnuz",),
    "mfma_16x16x32_bf8": ("tilec_fp8_e5m2fnuz",),
    "mfma_32x32x16_bf8": ("tilec_fp8_e5m2fnuz",),
}

HELPERS: dict[str, str] = {
    **SHARED_HELPERS,
    "small_int_to_float": """
// float(v + lo) for a small v >= 0: a plain conversion here (the CUDA spelling's mantissa trick
// pays for NVIDIA's slow I2F; AMD's conversion rate was not measured).
__device__ __forceinline__ float tilec_small_int_to_float(int v, int lo) { return static_cast<float>(v + lo); }""",
    "exp2": """
// 2^x in float32 (v_exp_f32, with the library's handling of denormal inputs).
__device__ __forceinline__ float tilec_exp2(float x) { return exp2f(x); }""",
}
SMEM_ADDR_HELPER = ""
SHARED_ADDRESS_HELPERS: frozenset[str] = frozenset()


def _mfma_helper(m: int, k: int, suffix: str, ctype: str, builtin: str, operand: str, acc: str) -> str:
    """c[0 .. m*m/64) += A B for one wave64's m x m x k MFMA; a, b: the lane's K-consecutive elements."""
    regs, per_lane = m * m // 64, m * k // 64
    vec = f"tilec_{acc}{regs}"
    inputs = ", ".join(f"c[{i}]" for i in range(regs))
    if operand == "long":  # eight 8-bit elements (tilec's fp8 types too): copied, not type-punned
        operands = f"""  operand_t a8, b8;
  __builtin_memcpy(&a8, a, 8);
  __builtin_memcpy(&b8, b, 8);
  d = __builtin_amdgcn_{builtin}(a8, b8, d, 0, 0, 0);"""
    else:
        punned = "*reinterpret_cast<const operand_t*>(a), *reinterpret_cast<const operand_t*>(b)"
        operands = f"""  d = __builtin_amdgcn_{builtin}({punned}, d,
                                 0, 0, 0);"""
    return f"""
// c[0..{regs - 1}] += A ({m}x{k}) * B ({k}x{m}) by one wave64 on the matrix cores ({builtin}); lane l
// gives A row l % {m} and B column l % {m}, K elements {per_lane} (l / {m}) .. +{per_lane - 1} of each.
__device__ __forceinline__ void tilec_mfma_{m}x{m}x{k}_{suffix}({acc}* c, const {ctype}* a, const {ctype}* b) {{
  typedef {operand} operand_t;
  typedef {acc} {vec} __attribute__((ext_vector_type({regs})));
  {vec} d = {{{inputs}}};
{operands}
#pragma unroll
  for (int i = 0; i < {regs}; ++i) c[i] = d[i];
}}"""


_HALF4 = "_Float16 __attribute__((ext_vector_type(4)))"
_SHORT4 = "short __attribute__((ext_vector_type(4)))"
_FORMS = (  # (m, k, suffix, element type, builtin, operand register, accumulator)
    (16, 16, "f16", "half", "mfma_f32_16x16x16f16", _HALF4, "float"),
    (32, 8, "f16", "half", "mfma_f32_32x32x8f16", _HALF4, "float"),
    (16, 16, "bf16", "hip_bfloat16", "mfma_f32_16x16x16bf16_1k", _SHORT4, "float"),
    (32, 8, "bf16", "hip_bfloat16", "mfma_f32_32x32x8bf16_1k", _SHORT4, "float"),
    (16, 16, "i8", "signed char", "mfma_i32_16x16x16i8", "int", "int"),  # gfx90a
    (32, 8, "i8", "signed char", "mfma_i32_32x32x8i8", "int", "int"),  # gfx90a
    (16, 32, "i8", "signed char", "mfma_i32_16x16x32_i8", "long", "int"),  # gfx942 from here on
    (32, 16, "i8", "signed char", "mfma_i32_32x32x16_i8", "long", "int"),
    (16, 32, "fp8", "tilec_fp8_e4m3fnuz", "mfma_f32_16x16x32_fp8_fp8", "long", "float"),
    (32, 16, "fp8", "tilec_fp8_e4m3fnuz", "mfma_f32_32x32x16_fp8_fp8", "long", "float"),
    (16, 32, "bf8", "tilec_fp8_e5m2fnuz", "mfma_f32_16x16x32_bf8_bf8", "long", "float"),
    (32, 16, "bf8", "tilec_fp8_e5m2fnuz", "mfma_f32_32x32x16_bf8_bf8", "long", "float"),
)
for _m, _k, _suffix, *_rest in _FORMS:
    HELPERS[f"mfma_{_m}x{_m}x{_k}_{_suffix}"] = _mfma_helper(_m, _k, _suffix, *_rest)
