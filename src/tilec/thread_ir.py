"""Thread IR: what one thread of a block does, one step above C++ text.

Lowering (lower.py) produces it from the Tile IR; the emitter prints it. Its
expressions are the Tile IR's (`tir.Expr`) plus the few forms below that only
exist once memory is concrete: subscripts of C arrays, 16-byte vector moves,
calls of the target's intrinsics. Buffers in Thread IR are C arrays: global tensors
are flat pointers, shared tiles are shared-memory arrays with their tile
shape (times stages), fragments and locals are per-thread register arrays.

    // gemm.tile:15: copy(A[by * block_M, k * block_K], A_shared)
    for (int i = 0; i < 4; ++i) {
      VecRef(A_shared[...][...], 16) = VecRef(A[...], 16);
    }
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Literal, TypeAlias, assert_never

from tilec import tir
from tilec.dtypes import DType
from tilec.source import NO_SPAN, Span

# ---------------------------------------------------------------- expressions


@dataclass(frozen=True, slots=True)
class Sym:
    """A C name: a register, a loop counter, the thread index."""

    name: str
    dtype: DType

    __hash__ = object.__hash__

    def __eq__(self, other: object) -> bool:
        return self is other


@dataclass(frozen=True, slots=True)
class Subscript:
    """`array[i][j]` on a C array named `array` (flat: one index). With `reinterpret`,
    the array's memory read as `dtype` elements (a scratch row declared with another
    type): `reinterpret_cast<float*>(red_buf)[i]`. A global tensor's element records its
    index and extent per dimension in `within` (its one index is their row-major flattening,
    or the sum of index times stride over `strides` for a tensor declared with strides), which
    `tilec build --verify` checks (bounds_verify.py); nothing else reads them."""

    array: str
    indices: tuple[tir.Expr, ...]
    dtype: DType
    reinterpret: bool = False
    within: tuple[tuple[tir.Expr, tir.Expr], ...] = field(default=(), compare=False)
    strides: tuple[tir.Expr, ...] = field(default=(), compare=False)


@dataclass(frozen=True, slots=True)
class Intrin:
    """A call of a CUDA function or a helper emitted into the file (`tir.EXTERN + name`: a
    device function of the user's, call_extern)."""

    name: str
    args: tuple[Expr | str, ...]
    dtype: DType


@dataclass(frozen=True, slots=True)
class VecRef:
    """`bytes` bytes from an element, moved as one register of the target's vector type
    (Spelling.vector_types)."""

    target: Subscript
    bytes: int


BuiltinName = Literal[
    "thread_index",  # this thread's index in the block (x)
    "thread_index_reread",  # the same, read again where it is written: the C compiler may not reuse
    # an earlier read, so nothing computed from it is hoisted above the read (lower/kernel.py)
    "block_index_x",
    "block_index_y",
    "block_index_z",
    "grid_dim_x",
    "grid_dim_y",
    "grid_dim_z",
]


@dataclass(frozen=True, slots=True)
class Builtin:
    """A built-in register of the target (its thread index, ...); the emitter
    spells it from the Target record, lowering never does."""

    name: BuiltinName
    dtype: DType = DType.int32


@dataclass(frozen=True, slots=True)
class AddressOf:
    """`&array[i]` (the target of an atomic)."""

    target: Subscript
    dtype: DType = DType.int64


# A Thread IR expression: a Tile IR one or one of the C forms above (VecRef is no value of its own:
# it is only ever the target or value of an Assign).
Expr: TypeAlias = tir.Expr | Sym | Subscript | Intrin | Builtin | AddressOf

# ---------------------------------------------------------------- statements


@dataclass(frozen=True, slots=True)
class Decl:
    """`ctype name[d0][d1] = init;`, in shared memory when `shared` (dims () for a scalar)."""

    name: str
    dtype: DType
    dims: tuple[int, ...] = ()
    init: tir.Expr | None = None
    shared: bool = False
    const: bool = False
    align: int = 0


@dataclass(frozen=True, slots=True)
class Lifetime:
    """Where a shared tile is live: the positions, in the Tile IR's program order, of the first and
    last statements using it (a loop it may carry a value around counts whole: shared_plan.py),
    and the source lines they span."""

    first: int
    last: int
    lines: tuple[int, int] = (0, 0)


@dataclass(frozen=True, slots=True)
class SharedView:
    """A named view into the block's dynamic shared memory:
    `half (*A_shared)[32] = reinterpret_cast<half (*)[32]>(smem + offset);`"""

    name: str
    dtype: DType
    dims: tuple[int, ...]
    offset: int
    align: int = 16  # bytes the offset is a multiple of (the block's `smem` is declared as aligned)
    # the user tile's lifetime, by which shared_plan.py may give its bytes to another tile; None
    # (scratch, barriers, staging, a kernel with warp roles): live for the whole kernel, never shared
    live: Lifetime | None = None


@dataclass(frozen=True, slots=True)
class Assign:
    target: Subscript | Sym | VecRef
    value: Expr | VecRef
    op: str = "="  # or "+=" etc.


@dataclass(frozen=True, slots=True)
class Loop:
    var: Sym
    start: tir.Expr
    stop: tir.Expr
    step: int = 1
    unroll: bool = False
    body: tuple[Stmt, ...] = ()
    unroll_factor: int = 0  # `#pragma unroll N` (partial) when set


@dataclass(frozen=True, slots=True)
class While:
    """`while (cond) { body }`: a loop of unknown trip count (its condition the same in every thread)."""

    cond: tir.Expr
    body: tuple[Stmt, ...] = ()


@dataclass(frozen=True, slots=True)
class Break:
    """`break;`: leave the innermost Loop or While (every thread of the block together)."""


@dataclass(frozen=True, slots=True)
class IfThen:
    cond: tir.Expr
    then: tuple[Stmt, ...]
    orelse: tuple[Stmt, ...] = ()
    edge: bool = False  # `orelse` is a copy's path for the tiles at a tensor's edge (rarely taken)


@dataclass(frozen=True, slots=True)
class Call:
    """An expression statement: a call, e.g. `Intrin("atomic_add", (&x, v))`."""

    call: Intrin


BarrierKind = Literal[
    "block",  # every thread of the block waits; shared-memory writes before it are visible after
    "async_commit",  # close this thread's group of asynchronous global->shared copies
    "async_wait",  # args (n,): wait until at most n of this thread's groups are in flight
    # Named slots the Hopper backend fills in (sync.py models them; lowering emits none yet):
    "mbarrier_init",  # args (barrier, count): set up an mbarrier in shared memory for `count` arrivals
    "mbarrier_arrive",  # args (barrier,): this thread arrives on the barrier's current phase
    "mbarrier_expect_tx",  # args (barrier, bytes): the phase also waits for `bytes` of async (TMA) writes
    "mbarrier_wait",  # args (barrier, phase): wait until phase `phase` (its parity) of the barrier completes
    "named",  # args (id, count): bar.sync on hardware barrier `id` among `count` threads (warp groups)
    "named_arrive",  # args (id, count): bar.arrive: count this thread on barrier `id` and go on, no wait
    "fence_proxy_async",  # order this thread's generic-proxy shared accesses before later async-proxy ones
]


@dataclass(frozen=True, slots=True)
class Barrier:
    """A synchronization statement; `sync.py` places `block` barriers and
    models every kind, the target record spells them (Spelling.barriers)."""

    kind: BarrierKind
    args: tuple[Expr, ...] = ()  # counts, ids, an mbarrier (a uint64 in shared memory)


# A shared tile's owner map in one tile op: (element, the one thread touching it) pairs (lower/owners.py)
Owners: TypeAlias = frozenset[tuple[tuple[int, ...], int]]


@dataclass(frozen=True, slots=True)
class SharedAccess:
    """What one tile op (its `Scope`) does to shared tiles, by C name: the
    data barrier placement (sync.py) orders. Lowering records it; nothing
    reads C text.

        copy(A[..], A_shared)          SharedAccess(writes={"A_shared"})
        gemm(A_shared, B_shared, C)    SharedAccess(reads={"A_shared", "B_shared"}, scratch=True)
        early async copy of Q_shared   SharedAccess(async_writes={"Q_shared"})
    """

    reads: frozenset[str] = frozenset()
    writes: frozenset[str] = frozenset()  # visible to other threads after the next `block` barrier
    async_writes: frozenset[str] = frozenset()  # asynchronous copies: complete once their commit group is waited for
    # TMA writes (Hopper): complete once `mbarrier` (an mbarrier_wait's first argument) completes a phase
    tx_writes: frozenset[str] = frozenset()
    mbarrier: Expr | None = None
    # writes into a pipeline stage that no statement reads before the pipeline's own wait and
    # barrier (lower/pipelined.py places those; sync.py's docstring states the contract)
    stage_writes: frozenset[str] = frozenset()
    scratch: bool = False  # may use shared scratch of its own, synchronized inside the op
    # reads its shared operands through the asynchronous proxy (wgmma's descriptors): shared memory
    # written by ordinary stores (asynchronous copies too) needs a proxy fence in the writers before the barrier
    proxy_reads: bool = False
    # (tile, owner map) for tiles each element of which one thread touches (lower/owners.py): an
    # access of the same tile with the same map needs no barrier after this one
    owners: tuple[tuple[str, Owners], ...] = ()

    @property
    def touches(self) -> bool:
        return bool(self.reads or self.writes or self.async_writes or self.tx_writes or self.stage_writes) or (
            self.scratch
        )


NO_ACCESS = SharedAccess()


@dataclass(frozen=True, slots=True)
class Comment:
    text: str


@dataclass(frozen=True, slots=True)
class Scope:
    """A braced block with a leading comment (one lowered tile op) and what
    the op does to shared tiles (barrier placement reads only that)."""

    comment: str
    body: tuple[Stmt, ...]
    span: Span = field(default=NO_SPAN, compare=False)
    access: SharedAccess = NO_ACCESS


Stmt: TypeAlias = Decl | SharedView | Assign | Loop | While | Break | IfThen | Call | Barrier | Comment | Scope

# ---------------------------------------------------------------- kernels


@dataclass(frozen=True, slots=True)
class Param:
    """A kernel parameter: a scalar, or a pointer to a tensor's elements
    (`const half* __restrict__ A` in the kernel, `const half* A` in the launcher)."""

    name: str
    dtype: DType
    pointer: bool = False
    const: bool = False  # the kernel only reads what the pointer points to
    tensor_map: bool = False  # a bulk-copy descriptor the launcher builds (TensorMap), passed by value


@dataclass(frozen=True, slots=True)
class TensorMap:
    """A bulk-copy (TMA) descriptor of a 2-D tensor (or a 3-D one: `batch` is then the extent of
    its first dimension, and boxes are one deep in it) that the launcher builds and the kernel
    takes as parameter `name`: boxes of `box` (inner, outer) elements, swizzled by `swizzle` bytes."""

    name: str
    tensor: str  # the tensor parameter
    dtype: DType
    inner: Expr  # extent of the contiguous dimension
    outer: Expr
    box: tuple[int, int]
    swizzle: int
    batch: Expr | None = None
    pitches: tuple[tir.Expr, ...] = ()  # a tensor declared with strides: elements between rows (, matrices)


@dataclass(frozen=True, slots=True)
class Kernel:
    """One device kernel and its launcher.

    `host_prologue` holds statements the emitter prints in the launcher after the
    shared-memory opt-in and before the launch (host code: e.g. building TMA
    descriptors the kernel takes); empty for every sm_80-family kernel today.

        extern "C" int gemm(..., stream) {  const dim3 grid(...); ...
          <host_prologue>
          <the launch of gemm_kernel: Launch.launch>
    """

    name: str
    params: tuple[Param, ...]  # device kernel parameters (also the launcher's, minus stream)
    threads: int
    grid: tuple[tir.Expr, ...]
    dynamic_smem: int
    body: tuple[Stmt, ...]
    abi: dict  # the kernel's entry of the `// tilec-abi:` line
    helpers: tuple[str, ...] = ()  # inline helpers it calls (keys of its target's Spelling.helpers)
    host_prologue: tuple[Stmt, ...] = ()  # launcher statements before the launch (see above)
    # warp roles (a warp-specialized GEMM main loop): the block's own threads, which alone run its
    # `block` barriers (sync.py makes them named barriers), and a producer warp group after them
    consumer_threads: int = 0
    min_blocks: int = 0  # > 0: the launch bound's blocks per multiprocessor (warp roles need 1)
    tensor_maps: tuple[TensorMap, ...] = ()  # built by the launcher, passed as parameters
    # the kernel the launcher runs instead when a tensor map cannot be built (unaligned rows)
    fallback: Kernel | None = None
    # `grid` counts tiles, not blocks: the launcher starts at most `min_blocks` blocks per
    # multiprocessor, which take the tiles in alternating rounds of gridDim.x (lower/kernel.py)
    persistent: bool = False
    # 2: the persistent blocks run in clusters of two (backends/cuda/sm90.py _Pair), launched as such
    cluster: int = 0
    # warp roles whose consumers issue a loop's first product of iteration k before the second
    # of k - 1, each product's tiles in a ring of their own (backends/cuda/sm90.py)
    overlapped_products: bool = False
    # > 0: the bytes of global memory each block reads twice (lower/residency.py): the launcher pads
    # the shared memory so that the resident blocks' bytes stay in L2 (Launch.l2_resident)
    reread_bytes: int = 0
    # the C names of the block variables, in grid order: each in [0, its extent of `grid`), which
    # the raster lowering writes (blockIdx's, panels, a persistent kernel's tiles) keeps and
    # the bounds verifier (bounds_verify.py) takes as given
    block_vars: tuple[str, ...] = ()
    # true when some tensor has 2^31 elements or more (its 32-bit element offsets would wrap): the
    # launcher then refuses the call (Launch.too_large); None when no count can get there
    too_large: tir.Expr | None = None


@dataclass(frozen=True, slots=True)
class Module:
    kernels: tuple[Kernel, ...]
    helpers: tuple[str, ...]  # names of inline helpers the kernels use
    headers: tuple[str, ...]
    source_name: str


def all_stmts(body: tuple[Stmt, ...]) -> Iterator[Stmt]:
    """Every statement of `body`, those nested in loops, branches and scopes included (preorder)."""
    for s in body:
        yield s
        for inner in bodies(s):
            yield from all_stmts(inner)


def bodies(s: Stmt) -> tuple[tuple[Stmt, ...], ...]:
    """The statement lists directly inside `s`."""
    match s:
        case Loop() | While() | Scope():
            return (s.body,)
        case IfThen():
            return (s.then, s.orelse)
        case Decl() | SharedView() | Assign() | Call() | Barrier() | Comment() | Break():
            return ()
        case _:
            assert_never(s)


def with_bodies(s: Stmt, f: Callable[[tuple[Stmt, ...]], tuple[Stmt, ...]]) -> Stmt:
    """`s` with `f` applied to each statement list directly inside it (`bodies(s)`), its other
    fields kept."""
    match s:
        case Loop() | While() | Scope():
            return replace(s, body=f(s.body))
        case IfThen():
            return replace(s, then=f(s.then), orelse=f(s.orelse))
    return s
