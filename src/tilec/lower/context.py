"""What every op lowering reads and writes: `LowerContext`, made once per kernel.

Its inputs (the kernel with the passes' decisions on its nodes, its layouts, the target and the target's backend
module) never change while the kernel is lowered; `LowerContext.state` holds what the op
lowerings build up as they go (the name supply, shared-memory views, kernel-wide flags, ...).
Each mutable field says who writes it and who reads it.

The backend module's protocol (`Backend`) and the tensor-core gemm it hands to the GEMM main
loop (`MmaGemm`) are here too: the context holds the backend, and the backend's functions take
the context.
"""

from __future__ import annotations

import importlib
import math
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from tilec import thread_ir as T
from tilec import tir, tir_walk
from tilec.dtypes import DType
from tilec.instructions import Instruction, OperandTypes
from tilec.lower.cexpr import I32
from tilec.passes.infer_layouts import Layouts
from tilec.shared_plan import shared_lifetimes
from tilec.targets import Target
from tilec.thread_ir import Owners
from tilec.uniformity import Varying, thread_varying


@dataclass
class Names:
    """One name per IR object, derived from the user's name; deterministic. A name the
    target's language reserves (Spelling.reserved) gets a trailing underscore."""

    reserved: frozenset[str]
    taken: set[str] = field(default_factory=set)
    given: dict[object, str] = field(default_factory=dict)  # keyed by the object (identity hash)
    next_suffix: dict[str, int] = field(default_factory=dict)  # base -> the first suffix not yet tried

    def fresh(self, base: str) -> str:
        """`base`, else the first free base_1, base_2...; the search resumes where
        the last one for `base` stopped (taken names stay taken), so n names cost O(n)."""
        name = base if base not in self.reserved else base + "_"
        n = self.next_suffix.get(base, 1)
        while name in self.taken:
            name = f"{base}_{n}"
            n += 1
        self.next_suffix[base] = n
        self.taken.add(name)
        return name

    def of(self, obj: tir.Buffer | tir.Var) -> str:
        if obj not in self.given:
            self.given[obj] = self.fresh(obj.name)
        return self.given[obj]


FlagKey = tuple[tir.Buffer, int] | tir.Expr  # (tensor, vector width) of an alignment flag, or a condition


@dataclass
class LowerState:
    """What lowering builds up over a kernel; each field names its writers and readers."""

    # The C name of every buffer, variable and generated temporary. Written by everyone who
    # declares something; the kernel's parameters take their names first (lower_kernel).
    names: Names
    # Value ranges of index variables (the thread index, loop counters, named loop indices),
    # for the bound prover (cexpr.upper_bound). Written by whoever creates such a variable; read
    # by exprs.below and the vector accesses (loops.py) to drop checks that always hold.
    bounds: dict[tir.Var, int]
    # The C names of integer variables known to be at least 0 with no known upper bound (block
    # indices, dimensions, loop variables counting up from a nonnegative start, lets of such
    # values), for the lower-edge prover (cexpr.lower_bound). Set by new_context and whoever
    # declares such a variable (kernel.py, loops.py, pipelined.py, the backends' warp roles);
    # read by exprs.nonnegative: an index it cannot prove nonnegative is checked against 0.
    nonneg: set[str]
    # The value range [lo, hi] of integer lets, by C name, where lowering could bound it
    # (exprs.int_range): a 4-bit code unpacked from a byte is in [0, 15]. Written by
    # exprs.let_decl; read by exprs.int_range for the exact small-integer conversions.
    ranges: dict[str, tuple[int, int]] = field(default_factory=dict)
    # The block's dynamic shared memory, one view per tile, each after the last. Appended by
    # `shared_view` (shared allocations, a fragment operand staged for a gemm, the reductions'
    # scratch); read at the end for the kernel's head and its shared-memory size (the
    # shared_plan pass after lowering may then pack the user tiles by lifetime).
    views: list[T.SharedView] = field(default_factory=list)
    # The lifetime of each shared tile (shared_plan.shared_lifetimes), set by new_context; read by
    # lower_alloc, which records it on the tile's view (shared_plan.plan_shared packs by them).
    lifetimes: dict[tir.Buffer, T.Lifetime] = field(default_factory=dict)
    # Kernel-wide flags (`const bool A_vec8 = ...;`) by key, and their declarations, which go
    # before the kernel's first statement. Written by `kernel_flag`, for a tensor's alignment
    # (loops.aligned) and a copy's interior test (ops.py).
    flags: dict[FlagKey, tir.Var] = field(default_factory=dict)
    prologue: list[T.Stmt] = field(default_factory=list)
    # The reductions' shared scratch row, declared by the first reduction that crosses warps
    # (ops.py) and shared by all the others.
    red_buf: str | None = None
    # Shared scratch the op being lowered reads after its own barriers (a staged gemm operand).
    # Written by ops.stage_fragment; read and cleared by kernel.as_scope when the op's Scope is made.
    scratch_reads: set[str] = field(default_factory=set)
    # lower_copy / lower_parallel -> as_scope: the op's shared tiles each element of which one
    # thread touches, with that owner map (owners.py; barrier placement compares them)
    owned: dict[str, Owners] = field(default_factory=dict)
    # shared tiles with one copy per pipeline stage: their owner maps are not kept (which copy a
    # thread touches depends on the iteration)
    staged: set[tir.Buffer] = field(default_factory=set)
    # Tensors written by the kernel: the others become `const` parameters. Written by every
    # store to global memory (kernel.py, loops.py); read at the end.
    written: set[str] = field(default_factory=set)
    # Helpers (inline PTX, spelling.py) the kernel calls. Written where a call to one is made;
    # read at the end, so emit prints only those.
    helpers: set[str] = field(default_factory=set)
    # The C form of a user variable: its C-named twin, or a pipelined loop's `start + iteration`.
    # Filled by exprs.value_of on first use; pipelined.py sets a pipelined loop's variable.
    cvars: dict[tir.Var, tir.Expr] = field(default_factory=dict)
    # The stage of a multi-buffered tile being accessed. Set and cleared by pipelined.py around
    # the code it generates for one stage; read by exprs.ref_of.
    stage_of: dict[tir.Buffer, tir.Expr] = field(default_factory=dict)
    # Staging tiles that hold fewer swizzle-wide column blocks than the columns written to them:
    # column block b lands in block b % n (sm90._chunked_store writes a tile's blocks in turn
    # through two). Set by sm90.bulk_store; read by exprs.ref_of.
    wrapped_blocks: dict[tir.Buffer, int] = field(default_factory=dict)
    # Tensors whose current tile is wholly in bounds and aligned. Set by ops.lower_copy while it
    # builds a copy's fast path; read by exprs.ref_of and the vector accesses (no checks needed).
    interior: set[tir.Buffer] = field(default_factory=set)
    # Of those, the tensors whose rows are not aligned for vectors (a copy's packed path, ops.py):
    # their elements are read one by one, the tile's side in shared memory written in vectors.
    unaligned: set[tir.Buffer] = field(default_factory=set)
    # The value out-of-range elements of the copy being lowered read as (`copy(..., pad=v)`), in
    # its compute type; None: zero. Set by ops.lower_copy around its element loops; read by
    # exprs.value_of where a tensor's load is guarded.
    pad: tir.Expr | None = None
    # Conditions known to hold where code is being built: a store's own guard while its value is
    # lowered (loops.py, kernel.lower_store), so that loads under it need none, and the condition
    # of an enclosing `if` of load-free values (kernel.lower_if), so that a scalar store under a
    # hand-written guard takes no second one; read by exprs.value_of and kernel.lower_store.
    assumed: list[tir.Expr] = field(default_factory=list)
    # True while a pipeline's producer copies are lowered, which then use the backend's
    # asynchronous copy. Set by pipelined.py around them; read by the vector
    # accesses (loops.py) and the copy's interior test (ops.py).
    async_copy: bool = False
    # The kernel's block-index swizzle, once the statement walk meets `T.use_swizzle`; read at
    # the end by the block-index set-up.
    swizzle: tir.UseSwizzle | None = None
    # Warp roles: set by the backend's lowering of a warp-specialized loop (its producer's code and
    # set-up); read at the end by lower_kernel, which splits the body between the roles.
    roles: WarpRoles | None = None


@dataclass(frozen=True)
class WarpRoles:
    """What a warp-specialized loop adds to its kernel. A `persistent` one's blocks take the tiles
    in alternating rounds of gridDim.x (lower_kernel builds that loop, with the block
    indices of each tile, around `producer_tile` and around the consumers' body); otherwise the
    loop sits in the kernel's own loops (a persistent wave loop written by hand), which
    `producer_tile` replays, and the kernel keeps its grid: each role runs its part once.

    `setup` runs on all threads first (barrier set-up). The producer warp group runs
    `producer_entry`, then its thread `producer_thread` runs `producer_state` once and
    `producer_tile` per tile. The consumers (the block's own threads) run `consumer_entry` once,
    then the kernel's body per tile, then `consumer_exit`. `params` and `tensor_maps` are the
    bulk copies' kernel parameters and the launcher's maps."""

    setup: tuple[T.Stmt, ...]
    producer_entry: tuple[T.Stmt, ...]  # after its `registers` share
    producer_thread: tir.Expr
    producer_state: tuple[T.Stmt, ...]
    producer_tile: tuple[T.Stmt, ...]
    consumer_entry: tuple[T.Stmt, ...]
    consumer_exit: tuple[T.Stmt, ...]
    producer_threads: int
    params: tuple[T.Param, ...]
    tensor_maps: tuple[T.TensorMap, ...]
    # blocks per multiprocessor -> the producer's and the consumers' register moves (setmaxnreg),
    # each role's first statement; lower_kernel picks the blocks (blocks_per_multiprocessor)
    registers: Callable[[int], tuple[T.Stmt, T.Stmt]]
    # how many of the SM's blocks the consumers' registers allow: 2 where one block's warp groups
    # leave room for a second block (its producer's epilogue overlaps the other's main loop)
    max_blocks: int
    persistent: bool = True
    overlapped: bool = False  # its consumers overlap two products across iterations (sm90._overlap)
    # the block's rank in a cluster of two along the grid's y (tir.For.cluster), which the tile
    # walk reads (lower/kernel.py walks the tiles by pairs); None: no cluster
    cluster_rank: tir.Var | None = None
    # the consumers' warp-role loop, the last statement it lowers to: what follows it in the body
    # (the epilogue) is skipped for a cluster's tile past the grid's last row
    loop_end: T.Stmt | None = None


@dataclass(frozen=True)
class LowerContext:
    """One kernel's lowering: its inputs, which never change, and its mutable `state`."""

    kernel: tir.Kernel  # with every Tile IR pass's decisions on its nodes (instructions, layouts, plan)
    layouts: Layouts
    target: Target
    backend: Backend  # the target's gemms on warp instructions and its asynchronous copy
    tx: tir.Var  # the thread index
    state: LowerState
    thread_varying: Varying  # what depends on the thread computing it (uniformity.thread_varying)

    def fresh(self, base: str) -> str:
        """A name for a generated temporary, unused so far in the kernel."""
        return self.state.names.fresh(base)

    def name(self, obj: tir.Buffer | tir.Var) -> str:
        """The C name of a buffer or variable of the kernel."""
        return self.state.names.of(obj)


StmtLowering = Callable[[LowerContext, tir.Stmt], list[T.Stmt]]  # the lowering of one statement


def new_context(kernel: tir.Kernel, layouts: Layouts, target: Target) -> LowerContext:
    """The context of `kernel` before its first statement: parameters named, nothing declared."""
    names = Names(target.spelling.reserved)
    for t in kernel.tensors:
        names.of(t)
    for view in kernel.views:  # a view indexes its tensor's pointer
        assert view.view_of is not None, "Kernel.views are views"
        names.given[view] = names.of(view.view_of)
    for v in (*kernel.scalars, *kernel.dims, *kernel.block_vars):
        names.of(v)
    tx = tir.Var(names.fresh("tx"), I32, "thread")
    nonneg = {names.of(v) for v in (*kernel.dims, *kernel.block_vars)}
    bounds: dict[tir.Var, int] = {tx: kernel.threads - 1}
    for v, extent in zip(kernel.block_vars, kernel.grid):  # a block index below a constant grid extent
        if isinstance(extent, tir.IntImm):
            bounds[tir.Var(names.of(v), I32, "thread")] = extent.value - 1
    state = LowerState(names, bounds, nonneg, lifetimes=shared_lifetimes(kernel))
    state.staged = {s.buffer for s in tir_walk.stmts(kernel.body) if isinstance(s, tir.Alloc) and s.stages > 1}
    return LowerContext(kernel, layouts, target, backend_of(target), tx, state, thread_varying(kernel.body))


def kernel_flag(ctx: LowerContext, key: FlagKey, name: str, cond: tir.Expr) -> tir.Var:
    """`const bool name = cond;` once per key, before the kernel's first statement (`cond` may use
    block indices, tensor dims and scalars only, no loads): a loop then tests a register instead
    of recomputing the condition every iteration."""
    state = ctx.state
    if key not in state.flags:
        flag = tir.Var(ctx.fresh(name), DType.bool, "let")
        state.flags[key] = flag
        state.prologue.append(T.Decl(flag.name, DType.bool, init=cond, const=True))
    return state.flags[key]


def shared_names(ctx: LowerContext, bufs: set[tir.Buffer]) -> frozenset[str]:
    """The C names of shared tiles, as a Scope's T.SharedAccess records them."""
    return frozenset(ctx.name(b) for b in bufs)


def shared_view(
    ctx: LowerContext, name: str, dtype: DType, dims: tuple[int, ...], align: int = 16, live: T.Lifetime | None = None
) -> None:
    """A view of `dims` elements of the block's shared memory after the last, at a multiple of
    `align` bytes (16; a descriptor-read swizzled tile: its swizzle's 8-row atom). A user tile
    passes its lifetime, by which the shared_plan pass may move it onto the bytes of dead tiles."""
    offset = -(-shared_bytes(ctx.state.views) // align) * align
    ctx.state.views.append(T.SharedView(name, dtype, dims, offset, align, live))


def shared_bytes(views: list[T.SharedView]) -> int:
    """The shared memory `views` span: the end of the last one."""
    if not views:
        return 0
    last = views[-1]
    return last.offset + math.prod(last.dims) * last.dtype.bytes


@dataclass(frozen=True)
class MmaGemm:
    """A gemm on a warp's matrix instruction (m16n8k16, m16n8k32 for 8-bit operands),
    split into k steps of the instruction's depth (the backend's `setup`)."""

    gemm: tir.Gemm
    record: Instruction
    types: OperandTypes  # the record's entry for the operand type: its helper and call
    a: tir.Region  # A as read by the steps (a fragment operand may have been staged to shared memory)
    a_in_registers: bool  # A comes from a register tile laid out as an accumulator
    c: str  # the accumulator's C name
    mi_n: int  # m16 tiles per warp
    ni_n: int  # n8 tiles per warp
    m0: tir.Expr  # the warp's first row and column of C
    n0: tir.Expr
    depth: int  # K of one instruction: 16, or 32 for 8-bit operands
    steps: int  # k steps of `depth`


class Backend(Protocol):
    """What a backend module (tilec.backends.<Target.backend>) provides: gemms on its warp-level
    instructions (the whole gemm, the wait that completes one issued ahead of the copies that
    follow it, and the pieces the GEMM main loop of lower/pipelined.py interleaves), the
    asynchronous global -> shared copy of pipelined loops, and the atomic add of a few lanes at
    once into global memory."""

    ASYNC_COPY_BYTES: tuple[int, ...]  # the sizes one asynchronous copy moves
    ATOMIC_ADD_LANES: Mapping[DType, tuple[int, ...]]  # element type -> lanes of one vector atomic add, widest first

    def gemm(self, ctx: LowerContext, s: tir.Gemm, record: Instruction) -> list[T.Stmt]: ...
    def gemm_wait(self, ctx: LowerContext, s: tir.Gemm, record: Instruction) -> list[T.Stmt]: ...
    def setup(self, ctx: LowerContext, s: tir.Gemm, record: Instruction) -> tuple[list[T.Stmt], MmaGemm]: ...
    def registers(self, ctx: LowerContext, mma: MmaGemm) -> tuple[str, str]: ...
    def declare(self, mma: MmaGemm, a_reg: str, b_reg: str) -> list[T.Stmt]: ...
    def load(self, ctx: LowerContext, mma: MmaGemm, a_reg: str, b_reg: str, kk: tir.Expr) -> list[T.Stmt]: ...
    def products(self, ctx: LowerContext, mma: MmaGemm, a_reg: str, b_reg: str) -> list[T.Stmt]: ...
    def async_copy(self, ctx: LowerContext, dst: T.Subscript, src: T.Subscript, nbytes: int) -> T.Stmt: ...
    def atomic_add_vector(self, ctx: LowerContext, dst: T.Subscript, values: T.Subscript, lanes: int) -> T.Stmt: ...
    def warp_specialized(self, ctx: LowerContext, s: tir.For, lower: StmtLowering) -> list[T.Stmt]: ...
    def bulk_store(self, ctx: LowerContext, s: tir.Copy) -> list[T.Stmt] | None: ...


def backend_of(target: Target) -> Backend:
    """The backend module Target.backend names ("cuda.sm80" -> tilec.backends.cuda.sm80)."""
    return typing.cast(Backend, importlib.import_module(f"tilec.backends.{target.backend}"))
