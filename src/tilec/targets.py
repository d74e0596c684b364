"""Targets as data: one record per GPU architecture, read by every stage that differs by target.

    get_target("sm_90a").smem_limit        -> 232448      (elaborate, pipeline)
    get_target("sm_90a").warp_size         -> 32          (elaborate, layout inference)
    get_target("sm_90a").gencode           -> "arch=compute_90a,code=sm_90a"  (toolchain, runtime)
    get_target("sm_90a").spelling.builtins["thread_index"]  -> the thread-index register  (emit)
    get_target("sm_90a").instructions       -> (WGMMA_M64NNK16, WGMMA_M64NNK32, MMA_M16N8K16, MMA_M16N8K32, SIMT_FMA)
    sorted(TARGETS)                         -> the CLI's --arch choices

The words of a language live in its backend (backends/cuda/spelling.py), its
instruction records beside them (backends/cuda/instructions.py); this module
assembles them into records. Nothing here imports beyond the standard library
and tilec's own data modules (dtypes, and the layout/fragment constructors the
instruction records name): the runtime reads the registry on the GPU machine.
Adding a target is adding a record here (and, for a new language or family,
the backend modules under backends/: docs/architecture.md, "Adding a target").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Literal

from tilec.backends.cuda import spelling as cuda
from tilec.backends.cuda.fragments import WARP_SIZE
from tilec.backends.cuda.instructions import SM80_INSTRUCTIONS, SM90A_INSTRUCTIONS
from tilec.backends.hip import spelling as hip
from tilec.backends.hip.fragments import WAVE_SIZE
from tilec.backends.hip.instructions import GFX90A_INSTRUCTIONS, GFX942_INSTRUCTIONS
from tilec.dtypes import DType
from tilec.instructions import Instruction

Language = Literal["cuda", "hip"]


@dataclass(frozen=True, slots=True, eq=False)
class Spelling:
    """How a language writes the neutral Thread IR forms (templates: see backends/cuda/spelling.py)."""

    builtins: Mapping[str, str]  # T.Builtin name -> register
    barriers: Mapping[str, str]  # T.Barrier kind -> statement
    barrier_helpers: Mapping[str, str]  # T.Barrier kind -> the inline helper it calls
    intrinsics: Mapping[str, str]  # neutral T.Intrin name -> call template
    vector_types: Mapping[int, str]  # bytes -> register type of a T.VecRef move
    kernel_qualifiers: str  # device kernel head; {threads}
    dynamic_smem: str  # declaration of the block's dynamic shared memory `smem`
    restrict: str  # pointer qualifier of kernel parameters, not repeated in the launcher
    helpers: Mapping[str, str]  # inline helper name (T.Kernel.helpers) -> text
    helper_types: Mapping[str, tuple[str, ...]]  # helper -> names in its text that need a header
    smem_addr_helper: str  # emitted before the helpers that take shared-memory addresses
    shared_address_helpers: frozenset[str]
    reserved: frozenset[str]  # names a kernel's own names must not take (lowering appends `_`)
    explain: Mapping[str, str]  # neutral operation -> its name in `tilec explain` (backends/cuda/spelling.py)
    # warp roles (T.Kernel.tensor_maps, fallback): {name}; {name}; {name}, {tensor}, {inner}, {outer},
    # {box_inner}, {box_outer}, {elem_bytes}, {swizzle}; {cond}, {name}, {args}
    tensor_map_param: str = ""
    tensor_map_decl: str = ""
    tensor_map_build: str = ""
    tensor_map_build_3d: str = ""  # the same for a batch of matrices, with {batch}
    # a tensor declared with strides: {row_pitch} too; a batch of them: {batch}, {row_pitch}, {batch_pitch}
    tensor_map_build_strided: str = ""
    tensor_map_build_strided_3d: str = ""
    fallback: str = ""
    # a kernel head's cluster shape, after the qualifiers ({size}: blocks along x; T.Kernel.cluster)
    cluster_dims: str = ""
    type_names: Mapping[DType, str] = field(default_factory=dict)  # element types the language names its own way
    explicit_types: frozenset[DType] = frozenset()  # element types a float converts to only by a cast
    # element types the file defines itself (HIP's fp8): C name -> its definition, emitted after
    # `type_prelude` (once) where the file prints the name
    type_definitions: Mapping[str, str] = field(default_factory=dict)
    type_prelude: str = ""


@dataclass(frozen=True, slots=True, eq=False)
class Launch:
    """The host launcher's words: `extern "C" int NAME(params..., stream_param)`."""

    stream_param: str
    doc: str  # {name}
    prototype_doc: str  # {name}; the comment on the launcher's prototype in `--header` files
    grid: str  # {0}, {1}, {2}: the grid's extents
    tiles: str  # {0}, {1}, {2}: a persistent kernel's grid of tiles (T.Kernel.persistent)
    persistent_grid: str  # its launch grid, from `tiles`
    smem_opt_in_above: int  # bytes of dynamic shared memory usable without opting in
    smem_opt_in: tuple[str, ...]  # {name}
    launch: str  # {name}, {threads}, {args}
    status: str  # the launcher's last statement
    too_large: str  # its refusal of a tensor too large for 32-bit indices (emit.py's size check)
    # {smem}, {reread}: the dynamic shared memory of a kernel whose blocks read `reread` bytes twice,
    # padded to keep them in L2 (lower/residency.py; its helper is Spelling.helpers["l2_resident"]);
    # empty where the target has none
    l2_resident: str = ""
    # the launch grid of a persistent kernel in clusters of two ({name}, {threads}; T.Kernel.cluster)
    cluster_grid: str = ""


@dataclass(frozen=True, slots=True, eq=False)
class Headers:
    """Which headers a file includes: `always`, then those declaring a name it prints."""

    always: str
    of_name: Mapping[str, str]  # C type or function name (or neutral intrinsic) -> header


@dataclass(frozen=True, slots=True, eq=False)
class Compiler:
    """The device compiler: `command kind_flags -gencode GENCODE base_flags [werror_flags] -o OUT SRC`
    (hipcc: `--offload-arch=GFX`, the arch flag joined to the target's gencode)."""

    command: str
    arch_flag: str  # precedes Target.gencode
    base_flags: tuple[str, ...]
    werror_flags: tuple[str, ...]
    kind_flags: Mapping[str, tuple[str, ...]]  # "cubin" | "hsaco" | "obj" | "shared" -> flags
    homes: tuple[str, ...]  # environment variables naming the toolkit's root (its bin/ holds `command`)
    default_home: str  # the root where the toolkit installs itself
    source_suffix: str  # of the generated file the compiler reads (".cu", ".hip")
    env: Mapping[str, str] = field(default_factory=dict)  # set for the compiler (hipcc: the AMD platform)
    joined_arch: bool = False  # the arch flag and value are one argument (`--offload-arch=gfx90a`)


@dataclass(frozen=True, slots=True)
class Target:
    arch: str  # as given to --arch
    language: Language
    backend: str  # the lowering module under backends/ ("cuda.sm80")
    capability: tuple[int, int]  # the device's compute capability (runtime.gpu_arch)
    gencode: str  # the compiler's arch value
    smem_limit: int  # bytes of shared memory one block may use (opt-in)
    instructions: tuple[Instruction, ...]  # matrix instructions, in order of preference (the last takes any gemm)
    spelling: Spelling
    launch: Launch
    compiler: Compiler
    headers: tuple[str, ...]  # every header a file may include, in include order
    header_rules: Headers
    warp_size: int  # threads that execute in lockstep (a block is a whole number of them)
    max_threads: int = 1024  # threads one block may have
    max_registers: int = 255  # 32-bit registers one thread may have (more spill to local memory)
    atomic_add_types: frozenset[DType] = frozenset()  # element types with a hardware atomic add
    atomic_minmax_types: frozenset[DType] = frozenset()  # with atomic max / min (floats: a CAS loop)
    # bulk tensor copies (TMA) into swizzled tiles, completing on mbarriers, and warp groups that
    # trade registers: GEMM main loops on warp-group instructions get warp roles (plan_pipeline)
    bulk_copies: bool = False
    # clusters of blocks whose bulk copies multicast a tile into every block of the cluster
    # (sm_90a; plan_pipeline.cluster_pairs)
    clusters: bool = False
    # the threads of one warp group, the consumers' unit under warp roles (0: no warp roles); a
    # kernel of one group whose fragments do not fit its registers gets two (pipeline._widened)
    warp_group: int = 0
    # no asynchronous copies into shared memory: a pipeline stages its next tiles through registers
    # (the backend's ASYNC_COPY_BYTES is empty; lower/pipelined.py)
    register_staged: bool = False
    # a register-staged pipeline whose num_stages are over the shared memory keeps one buffer per
    # tile (plan_pipeline); off for a program with candidate sets, whose nearest fitting point is
    # taken first (driver._compile_fitted)
    single_buffer: bool = False
    partial_wave: int = 0  # a block size below warp_size that is allowed: half a wave64 (HIP)
    # a pipeline's copies from a tensor whose rows are not 16-byte aligned read a tile inside it
    # element by element unchecked and store it in vectors (lower/ops.py `_packed_path`): measured
    # on sm_90a (its GEMM's ragged cell 0.60x -> 0.82x cuBLAS); on sm_80 the extra path cost the
    # GEMM 40 more bytes of spill in its aligned loop, unmeasured on a GPU, so it stays off there
    packed_copies: bool = False
    # element types the language has no type for (elaborate rejects them), each with its hint
    missing_types: Mapping[DType, str] = field(default_factory=dict)

    def block_size_ok(self, threads: int) -> bool:
        """Whether a block may have `threads` threads: whole warps (waves), or one wave's lanes
        partly (32 of a wave64: the lanes past 32 idle, and an MFMA, which needs the whole wave,
        gives way to SIMT FMAs)."""
        whole = threads % self.warp_size == 0 or threads == self.partial_wave
        return 0 < threads <= self.max_threads and whole

    def block_size_rule(self) -> str:
        partial = f"{self.partial_wave} or " if self.partial_wave else ""
        return f"threads must be {partial}a positive multiple of {self.warp_size}, at most {self.max_threads}"


CUDA_SPELLING = Spelling(
    builtins=cuda.BUILTINS,
    barriers=cuda.BARRIERS,
    barrier_helpers=cuda.BARRIER_HELPERS,
    intrinsics=cuda.INTRINSICS,
    vector_types=cuda.VECTOR_TYPES,
    kernel_qualifiers=cuda.KERNEL_QUALIFIERS,
    dynamic_smem=cuda.DYNAMIC_SMEM,
    restrict=cuda.RESTRICT,
    helpers=cuda.HELPERS,
    helper_types=cuda.HELPER_TYPES,
    smem_addr_helper=cuda.SMEM_ADDR_HELPER,
    shared_address_helpers=cuda.SHARED_ADDRESS_HELPERS,
    reserved=cuda.RESERVED,
    explain=cuda.EXPLAIN,
)
HOPPER_SPELLING = replace(
    CUDA_SPELLING,
    barriers=cuda.HOPPER_BARRIERS,
    barrier_helpers=cuda.HOPPER_BARRIER_HELPERS,
    cluster_dims=cuda.CLUSTER_DIMS,
    tensor_map_param=cuda.TENSOR_MAP_PARAM,
    tensor_map_decl=cuda.TENSOR_MAP_DECL,
    tensor_map_build=cuda.TENSOR_MAP_BUILD,
    tensor_map_build_3d=cuda.TENSOR_MAP_BUILD_3D,
    tensor_map_build_strided=cuda.TENSOR_MAP_BUILD_STRIDED,
    tensor_map_build_strided_3d=cuda.TENSOR_MAP_BUILD_STRIDED_3D,
    fallback=cuda.FALLBACK,
)  # mbarriers, named barriers, async-proxy fences and bulk copies (sm_90a)
CUDA_LAUNCH = Launch(
    stream_param=cuda.STREAM_PARAM,
    doc=cuda.LAUNCHER_DOC,
    prototype_doc=cuda.PROTOTYPE_DOC,
    grid=cuda.GRID,
    tiles=cuda.TILES,
    persistent_grid=cuda.PERSISTENT_GRID,
    cluster_grid=cuda.CLUSTER_GRID,
    smem_opt_in_above=cuda.SMEM_OPT_IN_ABOVE,
    smem_opt_in=cuda.SMEM_OPT_IN,
    launch=cuda.LAUNCH,
    status=cuda.LAUNCH_STATUS,
    too_large=cuda.TOO_LARGE,
    l2_resident=cuda.L2_RESIDENT,
)
CUDA_HEADERS = Headers(cuda.HEADER_ALWAYS, cuda.HEADER_OF_NAME)
NVCC = Compiler(
    command="nvcc",
    arch_flag="-gencode",
    base_flags=("-O3", "-std=c++17", "-lineinfo"),
    werror_flags=("-Werror", "all-warnings"),
    kind_flags={
        "cubin": ("-cubin",),
        "obj": ("-c", "-Xcompiler", "-fPIC"),
        "shared": ("-shared", "-Xcompiler", "-fPIC"),
    },
    homes=("CUDA_HOME", "CUDA_PATH"),
    default_home="/usr/local/cuda",
    source_suffix=".cu",
)

HIP_SPELLING = Spelling(
    builtins=hip.BUILTINS,
    barriers=hip.BARRIERS,
    barrier_helpers=hip.BARRIER_HELPERS,
    intrinsics=hip.INTRINSICS,
    vector_types=hip.VECTOR_TYPES,
    kernel_qualifiers=hip.KERNEL_QUALIFIERS,
    dynamic_smem=hip.DYNAMIC_SMEM,
    restrict=hip.RESTRICT,
    helpers=hip.HELPERS,
    helper_types=hip.HELPER_TYPES,
    smem_addr_helper=hip.SMEM_ADDR_HELPER,
    shared_address_helpers=hip.SHARED_ADDRESS_HELPERS,
    reserved=hip.RESERVED,
    explain=hip.EXPLAIN,
    type_names=hip.TYPE_NAMES,
    explicit_types=hip.EXPLICIT_TYPES,
    type_definitions=hip.FP8_TYPEDEFS,
    type_prelude=hip.FP8_TYPE,
)
HIP_LAUNCH = Launch(
    stream_param=hip.STREAM_PARAM,
    doc=hip.LAUNCHER_DOC,
    prototype_doc=hip.PROTOTYPE_DOC,
    grid=hip.GRID,
    tiles=hip.TILES,
    persistent_grid=hip.PERSISTENT_GRID,
    smem_opt_in_above=hip.LDS_BYTES,
    smem_opt_in=hip.SMEM_OPT_IN,
    launch=hip.LAUNCH,
    status=hip.LAUNCH_STATUS,
    too_large=hip.TOO_LARGE,
)
HIP_HEADERS = Headers(hip.HEADER_ALWAYS, hip.HEADER_OF_NAME)
HIPCC = Compiler(
    command="hipcc",
    arch_flag="--offload-arch=",
    base_flags=("-O3", "-std=c++17"),
    werror_flags=("-Werror",),
    kind_flags={"hsaco": ("--genco",), "obj": ("-c", "-fPIC"), "shared": ("-shared", "-fPIC")},
    homes=("ROCM_PATH", "HIP_PATH"),
    default_home="/opt/rocm",
    source_suffix=".hip",
    env={"HIP_PLATFORM": "amd"},  # hipcc would compile for NVIDIA where it also finds nvcc
    joined_arch=True,
)


# the element types of CUDA's atomic add on sm_80 and later (16-bit floats included)
_ATOMIC_ADD_CUDA = frozenset(
    {DType.float16, DType.bfloat16, DType.float32, DType.float64, DType.int32, DType.uint32, DType.uint64}
)
# atomicMax/atomicMin of int, unsigned, long long and unsigned long long; floats by tilec's CAS loop
_ATOMIC_MINMAX_CUDA = frozenset({DType.float32, DType.float64, DType.int32, DType.uint32, DType.int64, DType.uint64})


def _cuda(
    arch: str,
    capability: tuple[int, int],
    smem_limit: int,
    spelling: Spelling = CUDA_SPELLING,
    backend: str = "cuda.sm80",
    instructions: tuple[Instruction, ...] = SM80_INSTRUCTIONS,
    bulk_copies: bool = False,
) -> Target:
    num = arch.removeprefix("sm_")
    return Target(
        arch, "cuda", backend, capability, f"arch=compute_{num},code=sm_{num}", smem_limit, instructions,
        spelling, CUDA_LAUNCH, NVCC, cuda.HEADER_ORDER, CUDA_HEADERS, WARP_SIZE, atomic_add_types=_ATOMIC_ADD_CUDA,
        atomic_minmax_types=_ATOMIC_MINMAX_CUDA,
        bulk_copies=bulk_copies, clusters=bulk_copies, warp_group=4 * WARP_SIZE if bulk_copies else 0,
        missing_types=cuda.MISSING_TYPES,
        packed_copies=bulk_copies,
    )  # fmt: skip


# the element types of HIP's atomic add on CDNA2/3 (no 16-bit floats in ROCm 5.2's headers)
_ATOMIC_ADD_HIP = frozenset({DType.float32, DType.float64, DType.int32, DType.uint32, DType.uint64})
_ATOMIC_MINMAX_HIP = _ATOMIC_ADD_HIP  # atomicMax/atomicMin of int, unsigned, unsigned long long; floats by CAS


def _hip(arch: str, capability: tuple[int, int], instructions: tuple[Instruction, ...]) -> Target:
    """A CDNA target: wave64, 64 KB of LDS per workgroup, the "hip.cdna" lowerings; `capability`
    is the gfx number as (major, minor) (gfx90a -> (9, 0x0a)), ordering the records' `since`."""
    return Target(
        arch, "hip", "hip.cdna", capability, arch, hip.LDS_BYTES, instructions, HIP_SPELLING, HIP_LAUNCH, HIPCC,
        hip.HEADER_ORDER, HIP_HEADERS, WAVE_SIZE, atomic_add_types=_ATOMIC_ADD_HIP,
        atomic_minmax_types=_ATOMIC_MINMAX_HIP, register_staged=True, single_buffer=True,
        partial_wave=WAVE_SIZE // 2,
    )  # fmt: skip


# what no user name in generated code may be, whatever the target (call_extern's function names)
RESERVED_NAMES: frozenset[str] = CUDA_SPELLING.reserved | HIP_SPELLING.reserved

TARGETS: dict[str, Target] = {
    t.arch: t
    for t in (
        _cuda("sm_80", (8, 0), 166912),
        _cuda("sm_86", (8, 6), 101376),
        _cuda("sm_89", (8, 9), 101376),  # fp8 matrix instructions (the records' `since`)
        _cuda("sm_90a", (9, 0), 232448, HOPPER_SPELLING, "cuda.sm90", SM90A_INSTRUCTIONS, True),  # the `a`: wgmma
        _hip("gfx90a", (9, 0x0A), GFX90A_INSTRUCTIONS),  # MI200 (CDNA2)
        _hip("gfx942", (9, 0x42), GFX942_INSTRUCTIONS),  # MI300 (CDNA3): fp8 (FNUZ) MFMA, 8-bit forms twice as deep
    )
}
ARCHES: tuple[str, ...] = tuple(TARGETS)  # --arch choices, in registry order


def get_target(arch: str) -> Target:
    return TARGETS[arch]


def instruction_named(target: Target, name: str | None) -> Instruction:
    """The record a gemm's `instruction` names (passes/select.py stored it)."""
    found = next((r for r in target.instructions if r.name == name), None)
    assert found is not None, f"no instruction {name!r} on {target.arch}: run passes.select first"
    return found


def target_of_capability(major: int, minor: int) -> Target | None:
    """The registered target of a device's compute capability ((9, 0) -> sm_90a); None if none is."""
    return next((t for t in TARGETS.values() if t.language == "cuda" and t.capability == (major, minor)), None)


def compiler_flags(target: Target, kind: str, werror: bool = False) -> list[str]:
    """`kind` ("cubin", "obj", "shared") for `target`, without the output and source:
    sm_80 cubin -> ["-cubin", "-gencode", "arch=compute_80,code=sm_80", "-O3", "-std=c++17", "-lineinfo"]."""
    c = target.compiler
    arch = [c.arch_flag + target.gencode] if c.joined_arch else [c.arch_flag, target.gencode]
    return [*c.kind_flags[kind], *arch, *c.base_flags, *(c.werror_flags if werror else ())]
