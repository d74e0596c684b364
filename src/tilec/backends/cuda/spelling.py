"""The CUDA target's words: what the emitter prints for each neutral form.

targets.py assembles these into the `Spelling` record of every CUDA target;
the emitter (emit.py) prints Thread IR through that record and holds no CUDA
word itself. A form that lowering produces, and what this file makes of it:

    T.Builtin("thread_index")                  ->  threadIdx.x
    T.Barrier("block")                         ->  __syncthreads();
    T.Barrier("async_wait", (IntImm(1),))      ->  tilec_cp_async_wait<1>();
    T.Intrin("shfl_xor", (v, IntImm(16)))      ->  __shfl_xor_sync(0xffffffffu, v, 16)

Templates are `str.format` strings: `{0}`, `{1}` are the arguments in order,
`{args}` all of them joined with ", ". Only the standard library is imported
here (the runtime reads the target registry on the GPU machine).
"""

from __future__ import annotations

from tilec.backends import SHARED_HELPERS
from tilec.dtypes import DType

LANGUAGE = "cuda"

# T.Builtin names -> the registers that hold them.
BUILTINS: dict[str, str] = {
    "thread_index": "threadIdx.x",
    "thread_index_reread": "tilec_thread_index()",  # HELPERS["thread_index"]
    "block_index_x": "blockIdx.x",
    "block_index_y": "blockIdx.y",
    "block_index_z": "blockIdx.z",
    "grid_dim_x": "gridDim.x",
    "grid_dim_y": "gridDim.y",
    "grid_dim_z": "gridDim.z",
}

# T.Barrier kinds -> one statement. The Hopper kinds (mbarrier_*, named,
# fence_proxy_async) are spelled for sm_90a only (HOPPER_BARRIERS): on the
# other targets the emitter reports them as not spelled.
BARRIERS: dict[str, str] = {
    "block": "__syncthreads();",
    "async_commit": "tilec_cp_async_commit();",
    "async_wait": "tilec_cp_async_wait<{0}>();",
}
HOPPER_BARRIERS: dict[str, str] = {
    **BARRIERS,
    "mbarrier_init": "tilec_mbarrier_init(&{0}, {1});",
    "mbarrier_arrive": "tilec_mbarrier_arrive(&{0});",
    "mbarrier_expect_tx": "tilec_mbarrier_expect_tx(&{0}, {1});",
    "mbarrier_wait": "tilec_mbarrier_wait(&{0}, {1});",
    "named": 'asm volatile("bar.sync %0, %1;" ::"r"({0}), "r"({1}) : "memory");',
    "named_arrive": 'asm volatile("bar.arrive %0, %1;" ::"r"({0}), "r"({1}) : "memory");',
    "fence_proxy_async": 'asm volatile("fence.proxy.async.shared::cta;" ::: "memory");',
}

# Warp roles (sm_90a): the kernel parameter of a bulk-copy descriptor the launcher builds, its
# declaration and construction there, the launch bound of a kernel with warp roles, and the
# launcher's hand-over to the fallback kernel when a descriptor cannot be built.
TENSOR_MAP_PARAM = "const __grid_constant__ CUtensorMap {name}"
TENSOR_MAP_DECL = "CUtensorMap {name};"
TENSOR_MAP_BUILD = (
    "tilec_tensor_map_2d(&{name}, {tensor}, {inner}, {outer}, {box_inner}, {box_outer}, {elem_bytes}, {swizzle})"
)
TENSOR_MAP_BUILD_3D = (
    "tilec_tensor_map_3d(&{name}, {tensor}, {inner}, {outer}, {batch}, {box_inner}, {box_outer}, {elem_bytes}, "
    "{swizzle})"
)
TENSOR_MAP_BUILD_STRIDED = (
    "tilec_tensor_map_strided(&{name}, {tensor}, 2, {inner}, {outer}, 1, {row_pitch}, 0, {box_inner}, {box_outer}, "
    "{elem_bytes}, {swizzle})"
)
TENSOR_MAP_BUILD_STRIDED_3D = (
    "tilec_tensor_map_strided_3d(&{name}, {tensor}, {inner}, {outer}, {batch}, {row_pitch}, {batch_pitch}, "
    "{box_inner}, {box_outer}, {elem_bytes}, {swizzle})"
)
FALLBACK = "if (!({cond})) return {name}({args});  // rows not 16-byte aligned: no bulk copies"

# Inline helpers a barrier kind calls (emitted into the file when it is used).
BARRIER_HELPERS: dict[str, str] = {"async_commit": "cp_async", "async_wait": "cp_async"}
HOPPER_BARRIER_HELPERS: dict[str, str] = {
    **BARRIER_HELPERS,
    **dict.fromkeys(("mbarrier_init", "mbarrier_arrive", "mbarrier_expect_tx", "mbarrier_wait"), "mbarrier"),
}

# Neutral T.Intrin names -> calls. Any other name is printed as written
# (an inline helper of this backend, or a C function).
INTRINSICS: dict[str, str] = {
    "shfl_xor": "__shfl_xor_sync(0xffffffffu, {0}, {1})",
    "shfl_down": "__shfl_down_sync(0xffffffffu, {0}, {1})",
    "atomic_add": "atomicAdd({0}, {1})",
    "atomic_max": "atomicMax({0}, {1})",
    "atomic_min": "atomicMin({0}, {1})",
    "printf": "printf({args})",
    "trap": "__trap()",
    "address": "reinterpret_cast<uintptr_t>({0})",  # the address a pointer holds, as an integer
    # lane 0's value, which nvcc then knows every lane holds (a uniform register: wgmma operands)
    "warp_uniform": "__shfl_sync(0xffffffffu, {0}, 0)",
}

# Names a kernel's own names must not take (lowering appends `_`): C++ keywords, the
# built-in registers and types, the math functions, and the names the kernel and its
# launcher declare themselves (smem, stream, grid, block).
RESERVED = frozenset(
    {
        "auto",
        "bool",
        "break",
        "case",
        "char",
        "const",
        "continue",
        "default",
        "do",
        "double",
        "else",
        "enum",
        "extern",
        "float",
        "for",
        "goto",
        "if",
        "int",
        "long",
        "register",
        "return",
        "short",
        "signed",
        "sizeof",
        "static",
        "struct",
        "switch",
        "typedef",
        "union",
        "unsigned",
        "void",
        "volatile",
        "while",
        "half",
        "threadIdx",
        "blockIdx",
        "blockDim",
        "gridDim",
        "warpSize",
        "min",
        "max",
        "abs",
        "exp",
        "log",
        "sqrt",
        "smem",
        "printf",
        "new",
        "delete",
        "this",
        "class",
        "template",
        "namespace",
        "true",
        "false",
        "inline",
        "asm",
        "dim3",
        "stream",
        "grid",
        "block",
    }
)

# What `tilec explain` calls the neutral operations: the asynchronous global -> shared copy
# (the backend's async_copy), an instruction record's operand load (Instruction.load), the
# cross-lane exchange of a reduce, an element's atomic add.
EXPLAIN: dict[str, str] = {
    "async_copy": "cp.async",
    "matrices": "ldmatrix",
    "descriptors": "shared-memory descriptors",
    "shuffle": "shfl.xor",
    "atomic_add": "atomicAdd",
    "atomic_max": "atomicMax",
    "atomic_min": "atomicMin",
    "bulk_copy": "TMA (cp.async.bulk.tensor)",
    "bulk_store": "TMA stores",
    "ring_barrier": "mbarrier",
    "move_registers": "setmaxnreg",
    "warp_group_mma": "wgmma",
    "warps": "warps",
    "warp": "warp",
    "warp_width": "",  # the header says "256 threads" alone
    "mma_tiles": "mma tiles",
}

# Register types for moves of 2..16 bytes (T.VecRef).
VECTOR_TYPES: dict[int, str] = {16: "uint4", 8: "uint2", 4: "unsigned int", 2: "unsigned short"}

# The device kernel's head ({threads}: the block size) and its dynamic shared memory.
KERNEL_QUALIFIERS = 'extern "C" __global__ void __launch_bounds__({threads})'
DYNAMIC_SMEM = "extern __shared__ __align__({align}) unsigned char smem[];"  # {align}: the views' largest
RESTRICT = " __restrict__"  # pointer qualifier of kernel parameters, dropped in the launcher

# The launcher: `extern "C" int NAME(params..., STREAM_PARAM)` launching NAME_kernel.
STREAM_PARAM = "cudaStream_t stream"
LAUNCHER_DOC = "// Launches {name}_kernel on `stream`; returns the launch's cudaError_t (0 on success)."
PROTOTYPE_DOC = "// Launches kernel `{name}` on `stream`; returns the launch's cudaError_t (0 on success)."  # in the .h
GRID = "const dim3 grid({0}, {1}, {2});"
TILES = "const dim3 tiles({0}, {1}, {2});"
PERSISTENT_GRID = "const dim3 grid(tilec_persistent_blocks(1ull * tiles.x * tiles.y * tiles.z, {blocks}));"
CLUSTER_GRID = (
    "const dim3 grid(tilec_cluster_blocks(reinterpret_cast<const void*>({name}_kernel), {threads}, smem_bytes, "
    "1ull * tiles.x * ((tiles.y + 1) / 2) * tiles.z));"
)
CLUSTER_DIMS = "__cluster_dims__({size}, 1, 1)"
SMEM_OPT_IN_ABOVE = 48 * 1024  # bytes of dynamic shared memory a kernel gets without opting in
SMEM_OPT_IN = (
    "cudaError_t err = cudaFuncSetAttribute({name}_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes);",
    "if (err != cudaSuccess) return (int)err;",
)
LAUNCH = "{name}_kernel<<<grid, {threads}, smem_bytes, stream>>>({args});"
L2_RESIDENT = "tilec_l2_resident_smem({smem}, {reread}LL)"
LAUNCH_STATUS = "return (int)cudaGetLastError();"
TOO_LARGE = "return (int)cudaErrorInvalidValue;"

# Headers: always the runtime's; the header that declares a name the file
# prints: a type (dtypes.py's cnames, or an intN_t-style type in C text that
# lowering writes) or a function.
HEADER_ALWAYS = "cuda_runtime.h"
_STDINT = ("int8_t", "int16_t", "int32_t", "int64_t", "uint8_t", "uint16_t", "uint32_t", "uint64_t")
# Element types CUDA has no type for, with the hint elaborate gives (AMD's FNUZ fp8 formats).
MISSING_TYPES: dict[DType, str] = {
    DType.float8_e4m3fnuz: "float8_e4m3fnuz is AMD's fp8 (gfx942); NVIDIA GPUs use float8_e4m3 (OCP, bias 7)",
    DType.float8_e5m2fnuz: "float8_e5m2fnuz is AMD's fp8 (gfx942); NVIDIA GPUs use float8_e5m2 (OCP, bias 15)",
}

HEADER_OF_NAME: dict[str, str] = {
    "half": "cuda_fp16.h",
    "__half2": "cuda_fp16.h",
    "__nv_bfloat16": "cuda_bf16.h",
    "__nv_bfloat162": "cuda_bf16.h",
    "__nv_fp8_e4m3": "cuda_fp8.h",
    "__nv_fp8_e5m2": "cuda_fp8.h",
    **dict.fromkeys(_STDINT + ("intptr_t", "uintptr_t"), "stdint.h"),
    "printf": "stdio.h",
    "address": "stdint.h",
    "CUtensorMap": "cuda.h",
}
HEADER_ORDER = ("cuda_runtime.h", "cuda.h", "cuda_fp16.h", "cuda_bf16.h", "cuda_fp8.h", "stdint.h", "stdio.h")

# The C names each helper's text uses that need a header (so it is included with the helper).
HELPER_TYPES: dict[str, tuple[str, ...]] = {"pack": ("half", "__nv_bfloat16")}

# Inline-PTX helpers, emitted once per file and only when a kernel calls them.
HELPERS: dict[str, str] = {
    **SHARED_HELPERS,
    "cp_async": """
// cp.async: global -> shared copies that bypass registers, in commit groups; wait<N> returns once
// at most N groups are still in flight (this thread's; a barrier then publishes them).
__device__ __forceinline__ void tilec_cp_async_16(void* smem, const void* gmem) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(tilec_smem_addr(smem)), "l"(gmem));
}
__device__ __forceinline__ void tilec_cp_async_8(void* smem, const void* gmem) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" ::"r"(tilec_smem_addr(smem)), "l"(gmem));
}
__device__ __forceinline__ void tilec_cp_async_4(void* smem, const void* gmem) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(tilec_smem_addr(smem)), "l"(gmem));
}
__device__ __forceinline__ void tilec_cp_async_commit() { asm volatile("cp.async.commit_group;"); }
template <int N>
__device__ __forceinline__ void tilec_cp_async_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N)); }""",
    "ldmatrix": """
// ldmatrix: eight 16-byte rows per 8x8 matrix, addressed by lanes 8j..8j+7, land in register j
// of every lane (lane l gets row l / 4, columns 2 * (l % 4) and +1); .trans loads the transpose.
__device__ __forceinline__ void tilec_ldmatrix_x4(unsigned* r, const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(tilec_smem_addr(p)));
}
__device__ __forceinline__ void tilec_ldmatrix_x4_trans(unsigned* r, const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(tilec_smem_addr(p)));
}
__device__ __forceinline__ void tilec_ldmatrix_x2(unsigned* r, const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];"
               : "=r"(r[0]), "=r"(r[1]) : "r"(tilec_smem_addr(p)));
}
__device__ __forceinline__ void tilec_ldmatrix_x2_trans(unsigned* r, const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];"
               : "=r"(r[0]), "=r"(r[1]) : "r"(tilec_smem_addr(p)));
}""",
    "mbarrier": """
// mbarrier: a 64-bit barrier in shared memory whose phase completes once `count` threads (init)
// have arrived and the bytes announced by expect_tx have landed (TMA copies count them down);
// wait spins until the phase of parity `phase` has completed.
__device__ __forceinline__ void tilec_mbarrier_init(unsigned long long* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(tilec_smem_addr(bar)), "r"(count) : "memory");
}
__device__ __forceinline__ void tilec_mbarrier_arrive(unsigned long long* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(tilec_smem_addr(bar)) : "memory");
}
__device__ __forceinline__ void tilec_mbarrier_expect_tx(unsigned long long* bar, unsigned bytes) {
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;" ::"r"(tilec_smem_addr(bar)), "r"(bytes)
               : "memory");
}
// Makes the initialized barriers visible to the bulk copies (the asynchronous proxy) too.
__device__ __forceinline__ void tilec_mbarrier_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
__device__ __forceinline__ void tilec_mbarrier_wait(unsigned long long* bar, unsigned phase) {
  unsigned done = 0;
  while (!done) {
    asm volatile("{\\n .reg .pred p;\\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\\n"
                 " selp.u32 %0, 1, 0, p;\\n}"
                 : "=r"(done) : "r"(tilec_smem_addr(bar)), "r"(phase) : "memory");
  }
}""",
    "small_int_to_float": """
// float(v + lo) for 0 <= v < 2^23 without a conversion instruction (I2F issues at an eighth of
// FADD's rate): v's bits become the mantissa of 2^23 + v, and 2^23 - lo is subtracted (exact).
__device__ __forceinline__ float tilec_small_int_to_float(int v, int lo) {
  return __int_as_float(0x4B000000 | v) - (8388608.0f - static_cast<float>(lo));
}""",
    "exp2": """
// 2^x in float32 with the SFU's ex2.approx.ftz: one instruction, at most 2 ulp from exact, and
// denormal inputs and results flush to zero (exp2f adds a range fix-up around the same instruction).
__device__ __forceinline__ float tilec_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}""",
    "pack": """
// Two 16-bit values packed into one 32-bit register, the first in the low half (mma operand order).
__device__ __forceinline__ unsigned tilec_pack_f16x2(half lo, half hi) {
  __half2 v = __halves2half2(lo, hi);
  return *reinterpret_cast<unsigned*>(&v);
}
__device__ __forceinline__ unsigned tilec_pack_bf16x2(__nv_bfloat16 lo, __nv_bfloat16 hi) {
  __nv_bfloat162 v = __halves2bfloat162(lo, hi);
  return *reinterpret_cast<unsigned*>(&v);
}""",
    "mma_f16": """
// c[0..3] += A (16x16, a[0..3]) * B (16x8, b[0..1]) on tensor cores, float16 in, float32 out.
__device__ __forceinline__ void tilec_mma_m16n8k16_f16(float* c, const unsigned* a, const unsigned* b) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}""",
    "mma_bf16": """
// c[0..3] += A (16x16, a[0..3]) * B (16x8, b[0..1]) on tensor cores, bfloat16 in, float32 out.
__device__ __forceinline__ void tilec_mma_m16n8k16_bf16(float* c, const unsigned* a, const unsigned* b) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}""",
    "mma_s8": """
// c[0..3] += A (16x32, a[0..3]) * B (32x8, b[0..1]) on tensor cores, int8 in, int32 out.
__device__ __forceinline__ void tilec_mma_m16n8k32_s8(int* c, const unsigned* a, const unsigned* b) {
  asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 "
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
               : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}""",
    "mma_s4": """
// c[0..3] += A (16x64, a[0..3]) * B (64x8, b[0..1]) on tensor cores, int4 in, int32 out: each byte
// of a and b holds two K-consecutive elements, the lower K in the low nibble, so the registers are
// those of m16n8k32 .s8 on the same bytes.
__device__ __forceinline__ void tilec_mma_m16n8k64_s4(int* c, const unsigned* a, const unsigned* b) {
  asm volatile("mma.sync.aligned.m16n8k64.row.col.s32.s4.s4.s32 "
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
               : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}""",
    "mma_u4": """
// c[0..3] += A (16x64, a[0..3]) * B (64x8, b[0..1]) on tensor cores, uint4 in, int32 out (packed
// as for mma_m16n8k64_s4).
__device__ __forceinline__ void tilec_mma_m16n8k64_u4(int* c, const unsigned* a, const unsigned* b) {
  asm volatile("mma.sync.aligned.m16n8k64.row.col.s32.u4.u4.s32 "
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
               : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}""",
    "mma_e4m3": """
// c[0..3] += A (16x32, a[0..3]) * B (32x8, b[0..1]) on tensor cores, float8 e4m3 in, float32 out.
__device__ __forceinline__ void tilec_mma_m16n8k32_e4m3(float* c, const unsigned* a, const unsigned* b) {
  asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 "
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}""",
    "mma_e5m2": """
// c[0..3] += A (16x32, a[0..3]) * B (32x8, b[0..1]) on tensor cores, float8 e5m2 in, float32 out.
__device__ __forceinline__ void tilec_mma_m16n8k32_e5m2(float* c, const unsigned* a, const unsigned* b) {
  asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e5m2.f32 "
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}""",
}


# ---------------------------------------------------------------- vector atomic adds

# The backends' atomic_add_vector: a few lanes of a tile op's atomic add into global memory by one
# instruction, each element still atomic on its own (the same adds as one atomicAdd per element).
# sm_80 and later: 16-bit floats in pairs, through CUDA's own atomicAdd of __half2 / __nv_bfloat162.
HELPERS["atomic_add_f16x2"] = """
// atomicAdd of the 2 halfs at v into p (4-byte aligned) as one __half2, each half atomically.
__device__ __forceinline__ void tilec_atomic_add_f16x2(half* p, const half* v) {
  atomicAdd(reinterpret_cast<__half2*>(p), *reinterpret_cast<const __half2*>(v));
}"""
HELPERS["atomic_add_bf16x2"] = """
// atomicAdd of the 2 bfloat16s at v into p (4-byte aligned) as one __nv_bfloat162, each atomically
// (before sm_90, CUDA's compare-and-swap loop on the 32 bits: one loop for the pair, not two).
__device__ __forceinline__ void tilec_atomic_add_bf16x2(__nv_bfloat16* p, const __nv_bfloat16* v) {
  atomicAdd(reinterpret_cast<__nv_bfloat162*>(p), *reinterpret_cast<const __nv_bfloat162*>(v));
}"""
HELPER_TYPES["atomic_add_f16x2"] = ("half", "__half2")
HELPER_TYPES["atomic_add_bf16x2"] = ("__nv_bfloat16", "__nv_bfloat162")


# sm_90: vector red.global.add (no value returned) of float32 (4 or 2 lanes) and of 16-bit floats
# packed two to a 32-bit register (8, 4 or 2 lanes), every element added atomically on its own.
HELPERS["red_add_f32"] = """
// red.global.add of the 4 (2) floats at v into p (16-, 8-byte aligned), each float atomically.
__device__ __forceinline__ void tilec_red_add_f32x4(float* p, const float* v) {
  asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(p), "f"(v[0]), "f"(v[1]),
               "f"(v[2]), "f"(v[3])
               : "memory");
}
__device__ __forceinline__ void tilec_red_add_f32x2(float* p, const float* v) {
  asm volatile("red.global.add.v2.f32 [%0], {%1, %2};" ::"l"(p), "f"(v[0]), "f"(v[1]) : "memory");
}"""
HELPERS["red_add_f16"] = """
// red.global.add of the 8 (4, 2) halfs at v into p (16-, 8-, 4-byte aligned), each atomically.
__device__ __forceinline__ void tilec_red_add_f16x8(half* p, const half* v) {
  const unsigned* r = reinterpret_cast<const unsigned*>(v);
  asm volatile("red.global.add.noftz.v4.f16x2 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(r[0]),
               "r"(r[1]), "r"(r[2]), "r"(r[3])
               : "memory");
}
__device__ __forceinline__ void tilec_red_add_f16x4(half* p, const half* v) {
  const unsigned* r = reinterpret_cast<const unsigned*>(v);
  asm volatile("red.global.add.noftz.v2.f16x2 [%0], {%1, %2};" ::"l"(p), "r"(r[0]), "r"(r[1])
               : "memory");
}
__device__ __forceinline__ void tilec_red_add_f16x2(half* p, const half* v) {
  asm volatile("red.global.add.noftz.f16x2 [%0], %1;" ::"l"(p),
               "r"(*reinterpret_cast<const unsigned*>(v))
               : "memory");
}"""
HELPERS["red_add_bf16"] = (  # the same for bfloat16
    HELPERS["red_add_f16"].replace("halfs", "bfloat16s").replace("f16", "bf16").replace("half*", "__nv_bfloat16*")
)
HELPER_TYPES["red_add_f16"] = ("half",)
HELPER_TYPES["red_add_bf16"] = ("__nv_bfloat16",)

SMEM_ADDR_HELPER = """
__device__ __forceinline__ unsigned tilec_smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}"""


# The helpers that take shared-memory addresses (SMEM_ADDR_HELPER comes first).
SHARED_ADDRESS_HELPERS = frozenset({"cp_async", "ldmatrix", "mbarrier", "wgmma"})


# ---------------------------------------------------------------- wgmma (sm_90a)

HELPERS["wgmma"] = """
// wgmma: a warp group's asynchronous matrix multiply. fence orders the accumulator registers'
// earlier uses before the wgmmas that follow; commit closes a group of issued wgmmas; wait<N>
// returns once at most N of the warp group's groups are still running.
__device__ __forceinline__ void tilec_wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void tilec_wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void tilec_wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
// Keeps the compiler from moving accesses of the N accumulator registers at d across a wait.
template <int N>
__device__ __forceinline__ void tilec_wgmma_hold(float* d) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
// The shared-memory matrix descriptor of a wgmma operand starting `offset` elements into `tile`:
// the start address, the leading and stride byte offsets (LBO: between swizzle-wide column blocks
// of an MN-major tile; SBO: between groups of 8 rows), each in 16-byte units, and the swizzle (1:
// 128-byte, 2: 64-byte, 3: 32-byte). The fields are added, not or-ed: a shared address is below
// 2^18, so the start stays in its 14 bits, and nvcc computes `tile`'s descriptor once and each
// offset's as that plus a constant.
template <typename T>
__device__ __forceinline__ unsigned long long tilec_wgmma_desc(const T* tile, int offset, unsigned lbo,
                                                               unsigned sbo, unsigned swizzle) {
  const unsigned bytes = static_cast<unsigned>(offset) * static_cast<unsigned>(sizeof(T));
  const unsigned start = (tilec_smem_addr(tile) >> 4) + bytes / 16;
  return start + (static_cast<unsigned long long>(lbo >> 4) << 16) +
         (static_cast<unsigned long long>(sbo >> 4) << 32) + (static_cast<unsigned long long>(swizzle) << 62);
}"""


HELPERS["bulk_copy"] = """
// TMA: a bulk tensor copy of one 2-D box from global (tensor map `map`, box corner (x, y),
// x the contiguous dimension) into shared memory, in the map's swizzle; its bytes count down
// the transaction count of mbarrier `bar`. Parts of the box outside the tensor read as zeros.
__device__ __forceinline__ void tilec_tma_load_2d(void* smem, const CUtensorMap& map, unsigned long long* bar,
                                                  int x, int y) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];"
               ::"r"(tilec_smem_addr(smem)), "l"(&map), "r"(tilec_smem_addr(bar)), "r"(x), "r"(y) : "memory");
}
// setmaxnreg: a warp group gives registers back (dec: the producer) or takes them (inc: consumers).
template <int N>
__device__ __forceinline__ void tilec_setmaxnreg_dec() { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(N)); }
template <int N>
__device__ __forceinline__ void tilec_setmaxnreg_inc() { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N)); }

// Host: the tensor map of `rank` (2 or 3) dims (inner first; rows of `elem_bytes` elements laid one
// after the other), boxes of box_inner x box_outer (x 1), swizzled by `swizzle` bytes (32, 64 or
// 128), zeros outside the tensor; false when the driver refuses it (a base or row not 16-byte
// aligned, an empty tensor). cuTensorMapEncodeTiled is reached through the runtime, so nothing more
// is linked. A map depends on nothing but these arguments, and encoding one costs about as much as
// launching a small kernel, so each thread keeps the last 32 it encoded and reuses them.
typedef CUresult (*tilec_encode_tiled)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                       const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                       CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
struct tilec_map_key {  // every argument a map depends on
  const void* base;
  int rank;
  long long dims[3];  // inner first; 1 past the rank
  int box_inner, box_outer, elem_bytes, swizzle;
  bool operator==(const tilec_map_key& o) const {
    return base == o.base && rank == o.rank && dims[0] == o.dims[0] && dims[1] == o.dims[1] &&
           dims[2] == o.dims[2] && box_inner == o.box_inner && box_outer == o.box_outer &&
           elem_bytes == o.elem_bytes && swizzle == o.swizzle;
  }
};
static bool tilec_encode_map(CUtensorMap* map, const tilec_map_key& key) {
  constexpr int kRemembered = 32;
  thread_local tilec_map_key keys[kRemembered];
  thread_local CUtensorMap maps[kRemembered];
  thread_local int filled = 0, next = 0;
  for (int i = 0; i < filled; ++i)
    if (keys[i] == key) {
      *map = maps[i];
      return true;
    }
  static const tilec_encode_tiled encode = [] {  // looked up once (thread-safe static)
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found;
    const bool ok = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault,
                                                     &found) == cudaSuccess && found == cudaDriverEntryPointSuccess;
    return ok ? reinterpret_cast<tilec_encode_tiled>(fn) : nullptr;
  }();
  if (encode == nullptr) return false;
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(key.dims[0]), static_cast<cuuint64_t>(key.dims[1]),
                              static_cast<cuuint64_t>(key.dims[2])};
  const cuuint64_t pitch[2] = {dims[0] * key.elem_bytes, dims[0] * key.elem_bytes * dims[1]};
  const cuuint32_t box[3] = {static_cast<cuuint32_t>(key.box_inner), static_cast<cuuint32_t>(key.box_outer), 1};
  const cuuint32_t steps[3] = {1, 1, 1};
  const CUtensorMapDataType type = key.elem_bytes == 4   ? CU_TENSOR_MAP_DATA_TYPE_UINT32
                                   : key.elem_bytes == 2 ? CU_TENSOR_MAP_DATA_TYPE_UINT16
                                                         : CU_TENSOR_MAP_DATA_TYPE_UINT8;
  const CUtensorMapSwizzle sw = key.swizzle == 128  ? CU_TENSOR_MAP_SWIZZLE_128B
                                : key.swizzle == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
                                                    : CU_TENSOR_MAP_SWIZZLE_32B;
  if (encode(map, type, key.rank, const_cast<void*>(key.base), dims, pitch, box, steps,
             CU_TENSOR_MAP_INTERLEAVE_NONE, sw, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
             CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS)
    return false;
  keys[next] = key;
  maps[next] = *map;
  next = (next + 1) % kRemembered;
  filled = filled < kRemembered ? filled + 1 : kRemembered;
  return true;
}
// Host: the tensor map of a row-major (outer x inner) matrix, as tilec_encode_map describes.
static bool tilec_tensor_map_2d(CUtensorMap* map, const void* base, long long inner, long long outer, int box_inner,
                                int box_outer, int elem_bytes, int swizzle) {
  if (inner <= 0 || outer <= 0 || reinterpret_cast<uintptr_t>(base) % 16 || inner * elem_bytes % 16) return false;
  const tilec_map_key key = {base, 2, {inner, outer, 1}, box_inner, box_outer, elem_bytes, swizzle};
  return tilec_encode_map(map, key);
}"""
HELPER_TYPES["bulk_copy"] = ("CUtensorMap", "uintptr_t")
HELPERS["bulk_store"] = """
// TMA store: a bulk tensor copy of one 2-D box from shared memory (in the map's swizzle) to
// global (tensor map `map`, box corner (x, y)); parts outside the tensor are not written. commit
// closes this thread's group of stores; wait_read<N> returns once at most N groups still read
// shared memory, wait<N> once at most N have not finished writing.
__device__ __forceinline__ void tilec_tma_store_2d(const CUtensorMap& map, const void* smem, int x, int y) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];"
               ::"l"(&map), "r"(tilec_smem_addr(smem)), "r"(x), "r"(y) : "memory");
}
__device__ __forceinline__ void tilec_bulk_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void tilec_bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
}
template <int N>
__device__ __forceinline__ void tilec_bulk_wait() {
  asm volatile("cp.async.bulk.wait_group %0;" ::"n"(N) : "memory");
}"""
HELPER_TYPES["bulk_store"] = ("CUtensorMap",)
HELPERS["persistent"] = """
// Host: the blocks of a persistent kernel (each takes one tile of each round of gridDim.x tiles):
// per_sm per multiprocessor of the current device, at most `tiles`; 1 if the device cannot be
// asked (the launch then reports why).
static unsigned tilec_persistent_blocks(unsigned long long tiles, int per_sm) {
  int device = 0, sms = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess || sms < 1)
    return 1;
  const unsigned long long most = 1ull * sms * per_sm;
  return static_cast<unsigned>(tiles < most ? tiles : most);
}"""
HELPERS["cluster"] = """
// Clusters of two blocks (__cluster_dims__(2, 1, 1)). cluster_sync: every thread of both blocks
// waits for the others (release / acquire: what each wrote before is seen after). A multicast
// load is one TMA box written into the shared memory of each block in `mask` (bit r: rank r) at
// `smem`'s place, its bytes counted down on the barrier at `bar`'s place in each. arrive_remote:
// an arrival on the barrier at `bar`'s place in the shared memory of the block of rank `rank`.
__device__ __forceinline__ void tilec_cluster_sync() {
  asm volatile("barrier.cluster.arrive.release;\\n barrier.cluster.wait.acquire;" ::: "memory");
}
__device__ __forceinline__ void tilec_tma_load_2d_multicast(void* smem, const CUtensorMap& map,
                                                            unsigned long long* bar, int x, int y,
                                                            unsigned short mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%3, %4}], [%2], %5;" ::"r"(tilec_smem_addr(smem)), "l"(&map), "r"(tilec_smem_addr(bar)),
      "r"(x), "r"(y), "h"(mask) : "memory");
}
__device__ __forceinline__ void tilec_mbarrier_arrive_remote(unsigned long long* bar, int rank) {
  asm volatile(
      "{\\n .reg .b32 remote;\\n mapa.shared::cluster.u32 remote, %0, %1;\\n"
      " mbarrier.arrive.release.cluster.shared::cluster.b64 _, [remote];\\n}" ::"r"(tilec_smem_addr(bar)),
      "r"(rank) : "memory");
}"""
HELPER_TYPES["cluster"] = ("CUtensorMap",)
HELPERS["cluster_launch"] = """
// Host: the blocks of a persistent kernel in clusters of two (each cluster takes one pair of tiles
// of each round): two for each cluster the device runs at once, at most `pairs` clusters; 2 if
// the device cannot be asked (the launch then reports why). The count depends on the kernel, its
// block and shared memory and the device; each thread keeps the last 8 it asked for.
static unsigned tilec_cluster_blocks(const void* kernel, int threads, int smem, unsigned long long pairs) {
  struct asked {
    const void* kernel;
    int device, threads, smem, clusters;
  };
  thread_local asked seen[8];
  thread_local int filled = 0, next = 0;
  int device = 0, clusters = 0;
  if (cudaGetDevice(&device) != cudaSuccess)
    return 2;
  for (int i = 0; i < filled && clusters == 0; ++i)
    if (seen[i].kernel == kernel && seen[i].device == device && seen[i].threads == threads && seen[i].smem == smem)
      clusters = seen[i].clusters;
  if (clusters == 0) {
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3(2, 1, 1);
    config.blockDim = dim3(threads, 1, 1);
    config.dynamicSmemBytes = smem;
    if (cudaOccupancyMaxActiveClusters(&clusters, kernel, &config) != cudaSuccess || clusters < 1) {
      cudaGetLastError();  // not the launch's error
      return 2;
    }
    seen[next] = {kernel, device, threads, smem, clusters};
    next = (next + 1) % 8;
    filled = filled < 8 ? filled + 1 : 8;
  }
  return 2 * static_cast<unsigned>(pairs < static_cast<unsigned long long>(clusters) ? pairs : clusters);
}"""
SHARED_ADDRESS_HELPERS |= {"bulk_copy", "bulk_store", "cluster"}
HELPERS["thread_index"] = """
// threadIdx.x read by an instruction nvcc may not merge with another read: what a branch computes
// from it stays in the branch (a persistent kernel's edge-tile copies: their per-element
// addresses are not computed once before the tile walk and held, spilled, through it).
__device__ __forceinline__ int tilec_thread_index() {
  int tx;
  asm volatile("mov.u32 %0, %%tid.x;" : "=r"(tx));
  return tx;
}"""
HELPERS["l2_resident"] = """
// Host: the dynamic shared memory of a kernel whose blocks each read `reread` bytes of global memory
// twice, padded so that no more blocks share a multiprocessor than keep all resident blocks' bytes
// within a quarter of L2, where the second read finds them; `smem` itself where that needs no
// padding or the device cannot be asked.
static int tilec_l2_resident_smem(int smem, long long reread) {
  int device = 0, sms = 0, l2 = 0, per_sm = 0, reserved = 0, most = 0, blocks_most = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&reserved, cudaDevAttrReservedSharedMemoryPerBlock, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&most, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&blocks_most, cudaDevAttrMaxBlocksPerMultiprocessor, device) != cudaSuccess ||
      sms < 1 || reread < 1)
    return smem;
  const long long blocks = l2 / 4 / (1LL * sms * reread);
  if (blocks < 1 || blocks >= blocks_most) return smem;  // no cap keeps them in L2, or none is needed
  const long long padded = per_sm / (blocks + 1) - reserved + 1;  // one block more no longer fits
  return padded > smem && padded <= most ? static_cast<int>(padded) : smem;
}"""

# The same for a batch of matrices (a 3-D tensor): emitted after "bulk_copy", whose types and
# set-up helpers it uses.
HELPERS["bulk_copy_3d"] = """
// TMA: one box of the map's box size at (x, y) of matrix z of a 3-D tensor (a batch of row-major
// matrices), as tilec_tma_load_2d does for one matrix; parts outside matrix z read as zeros.
__device__ __forceinline__ void tilec_tma_load_3d(void* smem, const CUtensorMap& map, unsigned long long* bar,
                                                  int x, int y, int z) {
  asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%3, %4, %5}], [%2];"
               ::"r"(tilec_smem_addr(smem)), "l"(&map), "r"(tilec_smem_addr(bar)), "r"(x), "r"(y), "r"(z) : "memory");
}
// Host: the tensor map of `batch` row-major (outer x inner) matrices stored one after the other,
// boxes of box_inner x box_outer x 1, as tilec_tensor_map_2d builds it for one matrix.
static bool tilec_tensor_map_3d(CUtensorMap* map, const void* base, long long inner, long long outer, long long batch,
                                int box_inner, int box_outer, int elem_bytes, int swizzle) {
  (void)&tilec_tensor_map_2d;  // a kernel whose maps are all 3-D calls only this one: no unused-function warning
  if (inner <= 0 || outer <= 0 || batch <= 0 || reinterpret_cast<uintptr_t>(base) % 16 || inner * elem_bytes % 16)
    return false;
  const tilec_map_key key = {base, 3, {inner, outer, batch}, box_inner, box_outer, elem_bytes, swizzle};
  return tilec_encode_map(map, key);
}"""
HELPER_TYPES["bulk_copy_3d"] = ("CUtensorMap", "uintptr_t")
SHARED_ADDRESS_HELPERS |= {"bulk_copy_3d"}

# The tensor map of a tensor declared with strides (tilec_encode_map's maps are row-major, their
# pitches computed from the dims): emitted after "bulk_copy" (and "bulk_copy_3d"), whose types it
# uses; "bulk_copy_strided_3d" after it, for 3-D maps.
HELPERS["bulk_copy_strided"] = """
// Host: the tensor map of a tensor given by its strides (a view), as tilec_encode_map builds a
// row-major one: `rank` 2 (outer x inner) or 3 (batch x outer x inner), its rows `row_pitch`
// elements apart and its matrices `batch_pitch` apart (the inner stride is 1); false when a
// pitch or the base is not a multiple of 16 bytes or the driver refuses the map. Each thread
// keeps the last 32 it encoded.
struct tilec_strided_key {
  tilec_map_key map;
  long long row_pitch, batch_pitch;
  bool operator==(const tilec_strided_key& o) const {
    return map == o.map && row_pitch == o.row_pitch && batch_pitch == o.batch_pitch;
  }
};
static bool tilec_tensor_map_strided(CUtensorMap* map, const void* base, int rank, long long inner, long long outer,
                                     long long batch, long long row_pitch, long long batch_pitch, int box_inner,
                                     int box_outer, int elem_bytes, int swizzle) {
  (void)&tilec_tensor_map_2d;  // a file whose maps are all strided calls only this one: no unused-function warning
  if (inner <= 0 || outer <= 0 || batch <= 0 || reinterpret_cast<uintptr_t>(base) % 16 ||
      row_pitch * elem_bytes % 16 || batch_pitch * elem_bytes % 16)
    return false;
  const tilec_strided_key key = {{base, rank, {inner, outer, batch}, box_inner, box_outer, elem_bytes, swizzle},
                                 row_pitch, batch_pitch};
  constexpr int kRemembered = 32;
  thread_local tilec_strided_key keys[kRemembered];
  thread_local CUtensorMap maps[kRemembered];
  thread_local int filled = 0, next = 0;
  for (int i = 0; i < filled; ++i)
    if (keys[i] == key) {
      *map = maps[i];
      return true;
    }
  static const tilec_encode_tiled encode = [] {  // looked up once (thread-safe static)
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found;
    const bool ok = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault,
                                                     &found) == cudaSuccess && found == cudaDriverEntryPointSuccess;
    return ok ? reinterpret_cast<tilec_encode_tiled>(fn) : nullptr;
  }();
  if (encode == nullptr) return false;
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(inner), static_cast<cuuint64_t>(outer),
                              static_cast<cuuint64_t>(batch)};
  const cuuint64_t pitch[2] = {static_cast<cuuint64_t>(row_pitch * elem_bytes),
                               static_cast<cuuint64_t>(batch_pitch * elem_bytes)};
  const cuuint32_t box[3] = {static_cast<cuuint32_t>(box_inner), static_cast<cuuint32_t>(box_outer), 1};
  const cuuint32_t steps[3] = {1, 1, 1};
  const CUtensorMapDataType type = elem_bytes == 4   ? CU_TENSOR_MAP_DATA_TYPE_UINT32
                                   : elem_bytes == 2 ? CU_TENSOR_MAP_DATA_TYPE_UINT16
                                                     : CU_TENSOR_MAP_DATA_TYPE_UINT8;
  const CUtensorMapSwizzle sw = swizzle == 128  ? CU_TENSOR_MAP_SWIZZLE_128B
                                : swizzle == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
                                                : CU_TENSOR_MAP_SWIZZLE_32B;
  if (encode(map, type, rank, const_cast<void*>(base), dims, pitch, box, steps, CU_TENSOR_MAP_INTERLEAVE_NONE, sw,
             CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS)
    return false;
  keys[next] = key;
  maps[next] = *map;
  next = (next + 1) % kRemembered;
  filled = filled < kRemembered ? filled + 1 : kRemembered;
  return true;
}"""
HELPER_TYPES["bulk_copy_strided"] = ("CUtensorMap", "uintptr_t")
HELPERS["bulk_copy_strided_3d"] = """
// Host: the tensor map of a batch of matrices given by their strides (tilec_tensor_map_strided of
// rank 3).
static bool tilec_tensor_map_strided_3d(CUtensorMap* map, const void* base, long long inner, long long outer,
                                        long long batch, long long row_pitch, long long batch_pitch, int box_inner,
                                        int box_outer, int elem_bytes, int swizzle) {
  (void)&tilec_tensor_map_3d;  // a file whose 3-D maps are all strided calls only this one
  return tilec_tensor_map_strided(map, base, 3, inner, outer, batch, row_pitch, batch_pitch, box_inner, box_outer,
                                  elem_bytes, swizzle);
}"""
HELPER_TYPES["bulk_copy_strided_3d"] = ("CUtensorMap",)


def _wgmma_helper(n: int, suffix: str, ptx_type: str) -> str:
    """d[0 .. n/2) += A (64 x 16) B (16 x n) for one wgmma m64n{n}k16, both operands by descriptor;
    TA / TB: 1 when the operand's tile is stored MN-major (A as (K, M), B as (K, N))."""
    regs = n // 2
    d = ", ".join(f"%{i}" for i in range(regs))
    outs = ", ".join(f'"+f"(d[{i}])' for i in range(regs))
    return f"""
// d[0..{regs - 1}] += A (64x16) * B (16x{n}) by one warp group, {ptx_type} in, float32 out; A and B
// are read from shared memory through descriptors (TA, TB: 1 for an MN-major tile); accumulate 0:
// d = A * B, d's old values unread.
template <int TA, int TB>
__device__ __forceinline__ void tilec_wgmma_m64n{n}k16_{suffix}(float* d, unsigned long long a, unsigned long long b,
                                                              int accumulate = 1) {{
  asm volatile("{{\\n .reg .pred p;\\n setp.ne.b32 p, %{regs + 2}, 0;\\n"
               " wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{ptx_type}.{ptx_type} "
               "{{{d}}}, %{regs}, %{regs + 1}, p, 1, 1, %{regs + 3}, %{regs + 4};\\n}}"
               : {outs}
               : "l"(a), "l"(b), "r"(accumulate), "n"(TA), "n"(TB));
}}"""


for _n in range(8, 257, 8):
    HELPERS[f"wgmma_f16_n{_n}"] = _wgmma_helper(_n, "f16", "f16")
    HELPERS[f"wgmma_bf16_n{_n}"] = _wgmma_helper(_n, "bf16", "bf16")
    SHARED_ADDRESS_HELPERS |= {f"wgmma_f16_n{_n}", f"wgmma_bf16_n{_n}"}


def _wgmma_rs_helper(n: int, suffix: str, ptx_type: str) -> str:
    """d[0 .. n/2) += A (64 x 16) B (16 x n) for one wgmma m64n{n}k16 with A in registers: the
    thread's 8 16-bit elements of the k16 step at `a` (4 32-bit registers), B by descriptor."""
    regs = n // 2
    d = ", ".join(f"%{i}" for i in range(regs))
    outs = ", ".join(f'"+f"(d[{i}])' for i in range(regs))
    a = ", ".join(f"%{regs + i}" for i in range(4))
    return f"""
// d[0..{regs - 1}] += A (64x16) * B (16x{n}) by one warp group, {ptx_type} in, float32 out; A from
// this thread's registers at a (its wgmma A fragment), B from shared memory by descriptor (TB: 1
// for an MN-major tile); accumulate 0: d = A * B, d's old values unread.
template <int TB>
__device__ __forceinline__ void tilec_wgmma_m64n{n}k16_rs_{suffix}(float* d, const void* a, unsigned long long b,
                                                                 int accumulate = 1) {{
  const unsigned* r = static_cast<const unsigned*>(a);
  asm volatile("{{\\n .reg .pred p;\\n setp.ne.b32 p, %{regs + 5}, 0;\\n"
               " wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{ptx_type}.{ptx_type} "
               "{{{d}}}, {{{a}}}, %{regs + 4}, p, 1, 1, %{regs + 6};\\n}}"
               : {outs}
               : "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]), "l"(b), "r"(accumulate), "n"(TB));
}}"""


for _n in range(8, 257, 8):
    HELPERS[f"wgmma_rs_f16_n{_n}"] = _wgmma_rs_helper(_n, "f16", "f16")
    HELPERS[f"wgmma_rs_bf16_n{_n}"] = _wgmma_rs_helper(_n, "bf16", "bf16")


def _wgmma_8bit_helper(n: int, suffix: str, accumulator: str) -> str:
    """d[0 .. n/2) += A (64 x 32) B (32 x n) for one wgmma m64n{n}k32 on 8-bit operands, both by
    descriptor and both K-major (A stored (M, K), B (N, K)): 8-bit types take no transposes, and
    an integer accumulator (s32) no scales of A and B either."""
    regs = n // 2
    integer = accumulator == "s32"
    reg, ctype = ("r", "int") if integer else ("f", "float")
    d = ", ".join(f"%{i}" for i in range(regs))
    outs = ", ".join(f'"+{reg}"(d[{i}])' for i in range(regs))
    scales = "" if integer else ", 1, 1"
    return f"""
// d[0..{regs - 1}] += A (64x32) * B (32x{n}) by one warp group, {suffix} in, {accumulator} out; A (M, K)
// and B (N, K) are read K-major from shared memory through descriptors; accumulate 0: d = A * B,
// d's old values unread.
__device__ __forceinline__ void tilec_wgmma_m64n{n}k32_{suffix}({ctype}* d, unsigned long long a,
                                                                unsigned long long b, int accumulate = 1) {{
  asm volatile("{{\\n .reg .pred p;\\n setp.ne.b32 p, %{regs + 2}, 0;\\n"
               " wgmma.mma_async.sync.aligned.m64n{n}k32.{accumulator}.{suffix}.{suffix} "
               "{{{d}}}, %{regs}, %{regs + 1}, p{scales};\\n}}"
               : {outs}
               : "l"(a), "l"(b), "r"(accumulate));
}}"""


HELPERS["wgmma_rs"] = """
// Keeps the N 32-bit registers at a (a register A of wgmma, 16-bit pairs) computed before the
// wgmma fence that follows: ptxas would otherwise fence again where their conversions land.
template <int N>
__device__ __forceinline__ void tilec_wgmma_hold_a(void* a) {
  unsigned* r = static_cast<unsigned*>(a);
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+r"(r[i])::"memory");
}"""

HELPERS["wgmma_drop"] = """
// Ends the old values of the N accumulator registers at d before a gemm that clears them (its
// first k step does not read them): no instruction, only their live ranges end here.
template <int N>
__device__ __forceinline__ void tilec_wgmma_drop(float* d) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "=f"(d[i]));
}"""

HELPERS["wgmma_drop_s32"] = """
// tilec_wgmma_drop for N int32 accumulator registers.
template <int N>
__device__ __forceinline__ void tilec_wgmma_drop_s32(int* d) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "=r"(d[i]));
}"""

HELPERS["wgmma_s32"] = """
// Keeps the compiler from moving accesses of the N int32 accumulator registers at d across a wait.
template <int N>
__device__ __forceinline__ void tilec_wgmma_hold_s32(int* d) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+r"(d[i])::"memory");
}"""

for _n in range(8, 257, 8):
    for _suffix in ("e4m3", "e5m2"):
        HELPERS[f"wgmma_{_suffix}_n{_n}"] = _wgmma_8bit_helper(_n, _suffix, "f32")
        SHARED_ADDRESS_HELPERS |= {f"wgmma_{_suffix}_n{_n}"}
    if _n <= 24 or _n % 16 == 0:  # the integer wgmma's widths
        for _suffix in ("s8", "u8"):
            HELPERS[f"wgmma_{_suffix}_n{_n}"] = _wgmma_8bit_helper(_n, _suffix, "s32")
            SHARED_ADDRESS_HELPERS |= {f"wgmma_{_suffix}_n{_n}"}
