"""Tile IR: the checked program, block-level, with tile ops still whole.

Elaboration (elaborate.py) produces it from the syntax tree; the passes plan
pipelines and infer layouts on it; lowering (lower.py) turns it into Thread IR.

    kernel gemm(A: float16[M, K] global, B: float16[K, N] global, C: float16[M, N] global)
      grid (ceildiv(N, 128), ceildiv(M, 128)) threads 128 as (bx, by)
      A_shared: float16[128, 32] shared
      C_local: float32[128, 128] fragment
      fill C_local[0:128, 0:128] = 0.0
      for k in pipelined(0, ceildiv(K, 32), stages=3):
        copy A[by * 128 : +128, k * 32 : +32] -> A_shared[0:128, 0:32]
        ...

Nodes are frozen, slotted dataclasses with a span. The passes record their
decisions on the nodes, as fields that default to "not decided yet" (a gemm's
instruction, a Parallel loop's layout, a copy's place in a pipeline, a shared
tile's stages); the analyses that reach them live in passes/. Expressions are shared with Thread IR (thread_ir.py).
Literal types are settled by elaboration: a literal next to a typed operand
takes that operand's type, as in TileLang.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, TypeAlias

from tilec.dtypes import DType
from tilec.source import NO_SPAN, Span

if TYPE_CHECKING:
    from tilec.layout import Fragment  # layout.py builds on this module

# ---------------------------------------------------------------- expressions


@dataclass(frozen=True, slots=True)
class IntImm:
    value: int
    dtype: DType = DType.int32
    span: Span = field(default=NO_SPAN, compare=False)


@dataclass(frozen=True, slots=True)
class FloatImm:
    value: float  # may be +-inf for infinity(dtype)
    dtype: DType = DType.float32
    span: Span = field(default=NO_SPAN, compare=False)


@dataclass(frozen=True, slots=True)
class BoolImm:
    value: bool
    dtype: DType = DType.bool
    span: Span = field(default=NO_SPAN, compare=False)


VarKind = Literal["block", "thread", "loop", "dim", "scalar", "let"]


@dataclass(frozen=True, slots=True)
class Var:
    """A named scalar: block index, loop variable, symbolic dimension, scalar
    kernel argument or an immutable `name = expr` binding. Identity is the
    object (eq=False): two variables may share a name in different scopes."""

    name: str
    dtype: DType
    kind: VarKind
    span: Span = field(default=NO_SPAN, compare=False)

    __hash__ = object.__hash__

    def __eq__(self, other: object) -> bool:
        return self is other


# + - * / (true division on floats) // and % (C semantics: round toward zero; indices are nonnegative)
# ** << >> & | ^ and or, comparisons == != < <= > >=
BinOpName = Literal[
    "+",
    "-",
    "*",
    "/",
    "//",
    "%",
    "**",
    "<<",
    ">>",
    "&",
    "|",
    "^",
    "and",
    "or",
    "==",
    "!=",
    "<",
    "<=",
    ">",
    ">=",
]


# `Call.func` of call_extern's device functions: EXTERN + the C name (tir.Call("extern:my_fn", ...))
EXTERN = "extern:"


@dataclass(frozen=True, slots=True)
class BinOp:
    op: BinOpName
    a: Expr
    b: Expr
    dtype: DType
    span: Span = field(default=NO_SPAN, compare=False)
    # The hash, computed on first use: index arithmetic is hashed over and over as dict keys (the
    # simplifier's linear forms), and a dataclass's own hash would walk the whole tree each time.
    _hash: int = field(default=0, init=False, repr=False, compare=False)

    def __hash__(self) -> int:
        if not self._hash:
            object.__setattr__(self, "_hash", hash((self.op, self.a, self.b, self.dtype)) or 1)
        return self._hash


@dataclass(frozen=True, slots=True)
class UnaryOp:
    op: Literal["-", "~", "not"]
    a: Expr
    dtype: DType
    span: Span = field(default=NO_SPAN, compare=False)


@dataclass(frozen=True, slots=True)
class Select:
    """`a if cond else b` and `if_then_else(cond, a, b)`."""

    cond: Expr
    a: Expr
    b: Expr
    dtype: DType
    span: Span = field(default=NO_SPAN, compare=False)


@dataclass(frozen=True, slots=True)
class Cast:
    value: Expr
    dtype: DType
    span: Span = field(default=NO_SPAN, compare=False)


# exp exp2 log log2 sqrt rsqrt tanh sigmoid erf floor ceil pow abs min max
@dataclass(frozen=True, slots=True)
class Call:
    func: str
    args: tuple[Expr, ...]
    dtype: DType
    span: Span = field(default=NO_SPAN, compare=False)


@dataclass(frozen=True, slots=True)
class Load:
    """`buf[i, j]`: one element of a buffer (any scope)."""

    buffer: Buffer
    indices: tuple[Expr, ...]
    span: Span = field(default=NO_SPAN, compare=False)

    @property
    def dtype(self) -> DType:
        return self.buffer.dtype


Expr: TypeAlias = IntImm | FloatImm | BoolImm | Var | BinOp | UnaryOp | Select | Cast | Call | Load

# ---------------------------------------------------------------- buffers

Scope = Literal["global", "shared", "fragment", "local", "var"]


@dataclass(frozen=True, slots=True)
class Buffer:
    """A tensor argument (global), an allocation (shared, fragment, local) or
    an `alloc_var` scalar (scope "var", shape ()). Row-major; identity is the
    object. Shapes of non-global buffers are constants after elaboration. A tensor
    declared with `strides=` keeps them (elements per step of each dimension: ints,
    symbolic dimensions or expressions of them); None is row-major and contiguous.
    A view (`X_flat = Tensor(shape, dtype, X)`, Kernel.views) is a row-major tensor
    in the memory of the tensor parameter `view_of`."""

    name: str
    shape: tuple[Expr, ...]
    dtype: DType
    scope: Scope
    span: Span = field(default=NO_SPAN, compare=False)
    strides: tuple[Expr, ...] | None = None
    view_of: Buffer | None = None

    __hash__ = object.__hash__

    def __eq__(self, other: object) -> bool:
        return self is other

    @property
    def const_shape(self) -> tuple[int, ...]:
        dims = []
        for d in self.shape:
            assert isinstance(d, IntImm), f"{self.name} has a symbolic shape"
            dims.append(d.value)
        return tuple(dims)


def unit_innermost(buf: Buffer) -> bool:
    """Whether consecutive elements of a buffer's last dimension are adjacent in memory: every
    buffer but a tensor whose last stride is not the literal 1 (vector accesses and TMA need it)."""
    last = buf.strides[-1] if buf.strides else None
    return last is None or (isinstance(last, IntImm) and last.value == 1)


@dataclass(frozen=True, slots=True)
class Region:
    """A rectangular piece of a buffer: `starts` and `extents` per buffer
    dimension. Elaboration resolves origin-only operands (`A[i, j]`) by taking
    the extents of the other operand, right-aligned, padded with 1s. A scalar index gives a
    dimension of extent 1; operand shapes are compared with those dropped."""

    buffer: Buffer
    starts: tuple[Expr, ...]
    extents: tuple[Expr, ...]
    span: Span = field(default=NO_SPAN, compare=False)


# ---------------------------------------------------------------- statements


@dataclass(frozen=True, slots=True)
class Alloc:
    buffer: Buffer
    init: Expr | None = None  # alloc_var(dtype, init)
    stages: int = 1  # copies of a multi-buffered shared tile, one per pipeline stage (passes/plan_pipeline.py)
    span: Span = field(default=NO_SPAN, compare=False)


@dataclass(frozen=True, slots=True)
class Let:
    var: Var
    value: Expr
    span: Span = field(default=NO_SPAN, compare=False)


@dataclass(frozen=True, slots=True)
class Store:
    """`buf[i, j] = value` (augmented forms are desugared); for an alloc_var
    `x = value`, indices is ()."""

    buffer: Buffer
    indices: tuple[Expr, ...]
    value: Expr
    span: Span = field(default=NO_SPAN, compare=False)


@dataclass(frozen=True, slots=True)
class Copy:
    src: Region
    dst: Region
    pipeline: CopyPipeline = None  # how the pipeline issues it asynchronously (passes/plan_pipeline.py)
    pad: Expr | None = None  # what elements outside the source tensor read as (`pad=`, a constant); None: zero
    # the copy runs only where this holds (None: always): a producer that plan_pipeline took from the
    # top of an `if` of its loop body, issued for iteration k + s only when the `if` holds for k + s
    guard: Expr | None = None
    span: Span = field(default=NO_SPAN, compare=False)


# "producer": a producer of its pipelined loop, issued stages - 1 iterations ahead into its
# tile's stage; "early": a copy before a pipelined loop that the loop's first wait retires.
CopyPipeline = Literal["producer", "early"] | None

GemmPolicy = Literal["Square", "FullRow", "FullCol"]


@dataclass(frozen=True, slots=True)
class Gemm:
    """C (+)= op(A) @ op(B), op = transpose when the flag is set."""

    a: Region
    b: Region
    c: Region
    transpose_a: bool
    transpose_b: bool
    policy: GemmPolicy
    clear_accum: bool
    instruction: str | None = None  # the chosen instruction record's name (passes/select.py)
    a_from_registers: bool = False  # A's accumulator layout is this gemm's A fragment (passes/infer_layouts.py)
    fragments_ahead: bool = False  # a GEMM main loop's gemm: fragments loaded a k step ahead (plan_pipeline)
    then_issue: tuple[Buffer, ...] = ()  # the producers, by the tile each fills, issued right after it (plan_pipeline)
    then_accumulates: bool = False  # the next statement is a wgmma gemm into C: waited for with it (plan_pipeline)
    span: Span = field(default=NO_SPAN, compare=False)


@dataclass(frozen=True, slots=True)
class Fill:
    """`fill(buf, value)`; `clear(buf)` is fill with 0."""

    dst: Region
    value: Expr
    span: Span = field(default=NO_SPAN, compare=False)


ReduceKind = Literal["max", "min", "sum", "abssum", "absmax", "bitand", "bitor", "bitxor", "argmax", "argmin"]


@dataclass(frozen=True, slots=True)
class Reduce:
    """dst = reduce(src) along `dim` (normalized to >= 0); dst has src's
    shape with `dim` removed. With clear=False the old dst is folded in. `argmax` and `argmin`
    write the index along `dim` of the largest (smallest) element, the first of equal ones."""

    kind: ReduceKind
    src: Region
    dst: Region
    dim: int
    clear: bool
    span: Span = field(default=NO_SPAN, compare=False)


@dataclass(frozen=True, slots=True)
class CumSum:
    """`cumsum(src, dst, dim, reverse)`: dst[..., k, ...] = the sum of src along `dim` up to k (from
    the end when `reverse`); `cummax` and `cummin` (`op`) keep the running max or min instead."""

    src: Region
    dst: Region
    dim: int
    reverse: bool
    span: Span = field(default=NO_SPAN, compare=False)
    op: Literal["sum", "max", "min"] = "sum"


AtomicOp = Literal["add", "max", "min"]


@dataclass(frozen=True, slots=True)
class Atomic:
    """`atomic_add(dst, value)` (or `atomic_max`, `atomic_min`: `op`): dst a region (whole tile)
    with value a region of the same shape, or dst a single element (extents all 1) with value an
    expression (`src` is None then)."""

    dst: Region
    src: Region | None
    value: Expr | None
    span: Span = field(default=NO_SPAN, compare=False)
    op: AtomicOp = "add"


ForKind = Literal["serial", "unroll", "pipelined"]


@dataclass(frozen=True, slots=True)
class Schedule:
    """`Pipelined(..., order=[...], stage=[...], group=[[...], ...])`: a manual schedule of the
    loop body. Its units are the body's scheduled statements (every top-level statement but
    `let` bindings), or the runs of them `group` names; `stage[u]` is unit u's pipeline stage
    (stage s works s iterations behind stage 0; -1 on a copy: the compiler places it as in an
    inferred pipeline), `order[u]` its place in the emitted iteration (-1 with stage -1).
    `units` holds each unit's positions in `For.body`. plan_pipeline decides the rest: `ahead`,
    per unit, the iterations it runs ahead of the last stage; `pending`, the asynchronous-copy
    groups left in flight at an iteration's wait; `as_inferred`, that the schedule is the one
    the compiler infers (lowered as such); `honoured`, that lowering follows it;
    `not_warp_roles`, that the loop would run by warp roles (sm_90a) were it not for the schedule."""

    units: tuple[tuple[int, ...], ...]
    stage: tuple[int, ...]
    order: tuple[int, ...]
    span: Span = field(default=NO_SPAN, compare=False)
    ahead: tuple[int, ...] = ()
    pending: int = 0
    as_inferred: bool = False
    honoured: bool = False
    not_warp_roles: bool = False


@dataclass(frozen=True, slots=True)
class For:
    var: Var
    start: Expr
    stop: Expr
    step: Expr
    kind: ForKind
    body: tuple[Stmt, ...]
    num_stages: int = 0  # pipelined only
    span: Span = field(default=NO_SPAN, compare=False)
    # a GEMM main loop run by warp roles: a producer warp group loads tiles by bulk copies into
    # a ring of stages on barriers, the block's own threads consume them (passes/plan_pipeline.py)
    warp_specialized: bool = False
    # a register-staged pipeline (a target without asynchronous copies) whose tiles keep one
    # buffer each: num_stages of them are over the target's shared memory (passes/plan_pipeline.py)
    single_buffered: bool = False
    # Pipelined(order=, stage=, group=): the user's schedule of the body and the plan for it
    schedule: Schedule | None = None
    # a warp-role loop's ring, where the plan makes it deeper than num_stages (passes/plan_pipeline.py
    # ring_depth); 0: num_stages (plan_pipeline.ring_stages reads it)
    ring: int = 0
    # 2: a warp-role GEMM loop whose kernel runs its blocks in clusters of two along the grid's y,
    # each pair loading the tiles that do not depend on y once for both (passes/plan_pipeline.py
    # cluster_pairs); 0: each block loads its own
    cluster: int = 0


@dataclass(frozen=True, slots=True)
class While:
    """`while cond:`: the body runs as long as `cond` holds; `cond` is the same in every thread of
    the block (uniformity.py checks it), so the block's threads run the same iterations."""

    cond: Expr
    body: tuple[Stmt, ...]
    span: Span = field(default=NO_SPAN, compare=False)


@dataclass(frozen=True, slots=True)
class Break:
    """`break`: leave the innermost serial loop or while loop; every thread of the block takes
    it together (uniformity.py checks the conditions it sits under)."""

    span: Span = field(default=NO_SPAN, compare=False)


@dataclass(frozen=True, slots=True)
class SyncThreads:
    """`sync_threads()`: a barrier of the whole block (Barrier("block") in the Thread IR); every thread
    of the block reaches it (uniformity.py checks the control flow it sits in). The barrier
    placement pass (sync.py) counts it like the barriers it places itself."""

    span: Span = field(default=NO_SPAN, compare=False)


@dataclass(frozen=True, slots=True)
class Parallel:
    """`for i, j in Parallel(e0, e1)`: every (i, j) independent; extents constant."""

    vars: tuple[Var, ...]
    extents: tuple[int, ...]
    body: tuple[Stmt, ...]
    layout: Fragment | None = None  # where each iteration runs (passes/infer_layouts.py)
    span: Span = field(default=NO_SPAN, compare=False)


@dataclass(frozen=True, slots=True)
class If:
    cond: Expr
    then: tuple[Stmt, ...]
    orelse: tuple[Stmt, ...]
    span: Span = field(default=NO_SPAN, compare=False)


@dataclass(frozen=True, slots=True)
class Print:
    value: Expr | Region
    msg: str
    span: Span = field(default=NO_SPAN, compare=False)


@dataclass(frozen=True, slots=True)
class DeviceAssert:
    cond: Expr
    msg: str
    span: Span = field(default=NO_SPAN, compare=False)


@dataclass(frozen=True, slots=True)
class UseSwizzle:
    """Rasterize blocks in panels of `panel_size` (L2 reuse); order row|col."""

    panel_size: int
    order: Literal["row", "col"]
    span: Span = field(default=NO_SPAN, compare=False)


SharedLayoutName = Literal["row_major", "padded", "swizzle_32B", "swizzle_64B", "swizzle_128B"]


@dataclass(frozen=True, slots=True)
class AnnotateLayout:
    """`annotate_layout(A_shared, "swizzle_128B")`: the user fixes a shared tile's
    layout (the strict level of inference); nothing runs."""

    buffer: Buffer
    layout: SharedLayoutName
    span: Span = field(default=NO_SPAN, compare=False)


Stmt: TypeAlias = (
    Alloc
    | Let
    | Store
    | Copy
    | Gemm
    | Fill
    | Reduce
    | CumSum
    | Atomic
    | For
    | While
    | Break
    | SyncThreads
    | Parallel
    | If
    | Print
    | DeviceAssert
    | UseSwizzle
    | AnnotateLayout
)

# ---------------------------------------------------------------- kernels


@dataclass(frozen=True, slots=True)
class Kernel:
    """One `kernel` of a file. `tensors` and `scalars` are the arguments in
    source order; `dims` the symbolic dimensions in order of first
    appearance (each an int32 argument of the launcher)."""

    name: str
    tensors: tuple[Buffer, ...]
    scalars: tuple[Var, ...]
    dims: tuple[Var, ...]
    grid: tuple[Expr, ...]  # 1 to 3 extents, x first
    block_vars: tuple[Var, ...]  # bx[, by[, bz]]
    threads: int
    body: tuple[Stmt, ...]
    span: Span = field(default=NO_SPAN, compare=False)
    views: tuple[Buffer, ...] = ()  # tensors with another shape in a tensor parameter's memory
    # > 0: the `threads=` the program wrote, where the compiler runs more (pipeline.py `_widened`:
    # a second consumer warp group for fragments one group's registers cannot hold)
    threads_written: int = 0


@dataclass(frozen=True, slots=True)
class CandidateSet:
    """`param block_M = 128 in (64, 128, 256)`: the values `tilec tune` tries, each
    written as `-D` takes it; `value` is the one this build has."""

    param: str
    value: str
    candidates: tuple[str, ...]
    span: Span = field(default=NO_SPAN, compare=False)


@dataclass(frozen=True, slots=True)
class Program:
    kernels: tuple[Kernel, ...]
    files: tuple[str, ...]  # every .tile read, the main file first (for depfiles)
    candidate_sets: tuple[CandidateSet, ...] = ()  # in order of definition (tune/space.py)
