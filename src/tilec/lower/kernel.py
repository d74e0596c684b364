"""Lowering of one kernel: names, block indices, shared-memory views, the
statement walk, and the C form of every expression (`value`, `ref`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, assert_never

from tilec import layout as L
from tilec import thread_ir as T
from tilec import tir
from tilec.diagnostics import error
from tilec.dtypes import DType
from tilec.lower.cexpr import (
    F32,
    I32,
    Access,
    ElementLoop,
    all_of,
    builtin,
    cast,
    compute_dtype,
    conjuncts,
    flatten,
    let_init,
    lt,
    source_comment,
    source_line,
    split_index,
    swizzled_offset,
    upper_bound,
    zero,
)
from tilec.lower.lanes import name_lanes
from tilec.lower.loops import DistributedLoops
from tilec.lower.ops import TileOps, backend_of
from tilec.lower.pipelined import Pipelining
from tilec.passes.infer_layouts import Layouts
from tilec.passes.plan_pipeline import producers
from tilec.simplify import int_, simplify
from tilec.sync import shared_reads_writes
from tilec.targets import Target

_RESERVED = {
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


_GRID_DIM: dict[str, T.BuiltinName] = {"x": "grid_dim_x", "y": "grid_dim_y"}


@dataclass
class _Names:
    """One name per IR object, derived from the user's name; deterministic."""

    taken: set[str] = field(default_factory=set)
    given: dict[object, str] = field(default_factory=dict)  # keyed by the object (identity hash)
    next_suffix: dict[str, int] = field(default_factory=dict)  # base -> the first suffix not yet tried

    def fresh(self, base: str) -> str:
        """`base`, else the first free base_1, base_2...; the search resumes where
        the last one for `base` stopped (taken names stay taken), so n names cost O(n)."""
        name = base if base not in _RESERVED else base + "_"
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


class KernelLowering(TileOps, DistributedLoops, Pipelining):
    """Lowers one kernel; the tile ops and distributed loops are the mixins."""

    def __init__(self, kernel: tir.Kernel, layouts: Layouts, target: Target):
        self.kernel = kernel
        self.layouts = layouts
        self.stage_of: dict[tir.Buffer, tir.Expr] = {}  # multi-buffered tile -> stage being accessed
        self.async_copy = False  # lowering a pipeline's producer copies (cp.async)
        self.interior: set[tir.Buffer] = set()  # tensors whose current tile is wholly in bounds and aligned
        self.target = target
        self.backend = backend_of(target)  # the target's gemms on warp instructions, async copies
        self.names = _Names()
        for t in kernel.tensors:
            self.names.of(t)
        for v in (*kernel.scalars, *kernel.dims, *kernel.block_vars):
            self.names.of(v)
        self.tx = tir.Var(self.names.fresh("tx"), I32, "thread")
        self.bounds: dict[tir.Var, int] = {self.tx: kernel.threads - 1}
        self.smem = 0
        self.views: list[T.SharedView] = []
        self.red_buf: str | None = None  # the reductions' shared scratch, once one needs it
        self.written: set[str] = set()
        self.scratch_reads: set[str] = set()  # shared scratch the op being lowered reads (see op)
        self.swizzle: tir.UseSwizzle | None = None
        # kernel-wide flags (`const bool A_vec8 = ...;`): by (tensor, vector width) or by condition
        self.vec_flags: dict[tuple[tir.Buffer, int] | tir.Expr, tir.Var] = {}
        self.prologue: list[T.Stmt] = []
        self.assumed: list[tir.Expr] = []  # conditions known to hold where code is being built
        self.helpers: set[str] = set()  # inline-PTX helpers the kernel calls
        self.cvars: dict[tir.Var, tir.Expr] = {}  # user variable -> its C form (C-named twin, or start + iteration)

    def run(self) -> T.Kernel:
        body = self.block(self.kernel.body)
        head = self._block_index() + list(self.views) + self.prologue
        params = self._params()
        abi = self._abi()
        grid = tuple(simplify(self.value(g, None)) for g in self.kernel.grid)
        body = name_lanes(head + body, self.tx, self.kernel.threads, self.target.warp_size, self.names.fresh)
        helpers = tuple(sorted(self.helpers))
        return T.Kernel(self.kernel.name, params, self.kernel.threads, grid, self.smem, tuple(body), abi, helpers)

    def _params(self) -> tuple[T.Param, ...]:
        names = [self.names.of(t) for t in self.kernel.tensors]
        tensors = [T.Param(n, t.dtype, True, n not in self.written) for n, t in zip(names, self.kernel.tensors)]
        scalars = [T.Param(self.names.of(v), v.dtype) for v in (*self.kernel.scalars, *self.kernel.dims)]
        return (*tensors, *scalars)

    def _abi(self) -> dict:
        def dim(d: tir.Expr) -> int | str:
            return d.value if isinstance(d, tir.IntImm) else self.names.of(d) if isinstance(d, tir.Var) else "?"

        return {
            "name": self.kernel.name,
            "tensors": [
                {"name": self.names.of(t), "dtype": t.dtype.tile_name, "shape": [dim(d) for d in t.shape]}
                for t in self.kernel.tensors
            ],
            "scalars": [{"name": self.names.of(v), "dtype": v.dtype.tile_name} for v in self.kernel.scalars],
            "dims": [self.names.of(v) for v in self.kernel.dims],
        }

    def _block_index(self) -> list[T.Stmt]:
        out: list[T.Stmt] = [_const(self.tx, builtin("thread_index"))]
        blocks = [tir.Var(self.names.of(v), I32, "thread") for v in self.kernel.block_vars]
        axes: list[T.BuiltinName] = ["block_index_x", "block_index_y", "block_index_z"]
        sw = self.swizzle
        if sw is None or len(blocks) < 2:
            return out + [_const(b, builtin(axis)) for b, axis in zip(blocks, axes)]
        # Panels of `panel_size` block rows (order row) walked column by column, for L2 reuse.
        p = int_(sw.panel_size)
        first, second = ("x", "y") if sw.order == "row" else ("y", "x")
        tile_id, panel_tiles, panel, in_panel, panel_rows = (
            tir.Var(self.names.fresh(n), I32, "thread")
            for n in ("tile_id", "panel_tiles", "panel", "in_panel", "panel_rows")
        )
        grid_first, grid_second = (builtin(_GRID_DIM[a], DType.uint32) for a in (first, second))
        block_x, block_y = builtin("block_index_x"), builtin("block_index_y")
        b_first, b_second = (blocks[0], blocks[1]) if first == "x" else (blocks[1], blocks[0])
        out += [
            _const(tile_id, _op("+", _op("*", block_y, builtin(_GRID_DIM["x"], DType.uint32)), block_x)),
            _const(panel_tiles, _op("*", p, grid_first)),
            _const(panel, _op("//", tile_id, panel_tiles)),
            _const(in_panel, _op("%", tile_id, panel_tiles)),
            _const(panel_rows, tir.Call("min", (p, _op("-", tir.Cast(grid_second, I32), _op("*", panel, p))), I32)),
            _const(b_second, _op("+", _op("*", panel, p), _op("%", in_panel, panel_rows))),
            _const(b_first, _op("//", in_panel, panel_rows)),
        ]
        return out + [_const(b, builtin("block_index_z")) for b in blocks[2:]]

    def block(self, stmts: tuple[tir.Stmt, ...]) -> list[T.Stmt]:
        out: list[T.Stmt] = []
        for s in stmts:
            out += self.stmt(s)
        return out

    def stmt(self, s: tir.Stmt) -> list[T.Stmt]:
        match s:
            case tir.Alloc():
                return self.alloc(s)
            case tir.Let(var, value):
                return [
                    T.Decl(self.names.of(var), var.dtype, init=let_init(self.value(value, None), var.dtype), const=True)
                ]
            case tir.Store():
                return self.scalar_store(s)
            case tir.Copy() if s.pipeline == "early":
                return self.early_copy(s)
            case tir.Copy():
                return self.op(s, self.copy(s))
            case tir.Fill():
                return self.op(s, self.fill(s))
            case tir.Parallel():
                return self.op(s, self.parallel(s))
            case tir.Gemm():
                return self.op(s, self.gemm(s))
            case tir.Reduce():
                return self.op(s, self.reduce(s))
            case tir.CumSum():
                return self.op(s, self.cumsum(s))
            case tir.AtomicAdd():
                return self.op(s, self.atomic_region(s) if s.src is not None else self.atomic_element(s))
            case tir.For():
                return self.loop(s)
            case tir.If():
                return self.if_(s)
            case tir.Print():
                return self.op(s, self.print_(s))
            case tir.DeviceAssert():
                return [self.device_assert(s, None)]
            case tir.UseSwizzle():
                self.swizzle = s
                return []
            case tir.AnnotateLayout():  # read by layout inference
                return []
            case _:
                assert_never(s)

    def op(self, s: tir.Stmt, body: list[T.Stmt]) -> list[T.Stmt]:
        """A lowered tile op as a Scope, with the shared tiles it reads and writes for barrier
        placement (sync.py): its operands, and scratch it reads after its own barriers."""
        reads, writes = shared_reads_writes(s)
        access = T.SharedAccess(
            reads=self.shared_names(reads) | self.scratch_reads,
            writes=self.shared_names(writes),
            scratch=isinstance(s, (tir.Reduce, tir.Gemm)),  # a cross-warp reduction, a staged operand
        )
        self.scratch_reads = set()
        return [T.Scope(source_comment(s), tuple(body), s.span, access)]

    def shared_names(self, bufs: set[tir.Buffer]) -> frozenset[str]:
        return frozenset(self.names.of(b) for b in bufs)

    def alloc(self, s: tir.Alloc) -> list[T.Stmt]:
        buf = s.buffer
        name = self.names.of(buf)
        match buf.scope:
            case "shared":
                dims = buf.const_shape
                if buf in self.layouts.pitch:  # padded rows: conflict-free ldmatrix
                    dims = dims[:-1] + (self.layouts.pitch[buf],)
                if buf in self.layouts.swizzle:  # swizzled: one flat row, offsets through the XOR
                    dims = (math.prod(dims),)
                if s.stages > 1:  # one copy per pipeline stage
                    dims = (s.stages, *dims)
                self.shared_view(name, buf.dtype, dims)
                return []
            case "fragment":
                frag = self.layouts.buffers[buf]
                return [T.Decl(name, buf.dtype, (frag.local_size,))]
            case "local":
                return [T.Decl(name, buf.dtype, buf.const_shape)]
            case "var":
                init = self.value(s.init, None) if s.init is not None else None
                return [T.Decl(name, buf.dtype, (), init=cast(init, buf.dtype) if init is not None else None)]
            case "global":
                raise error(s.span, "tensors cannot be allocated inside a kernel")

    def shared_view(self, name: str, dtype: DType, dims: tuple[int, ...]) -> None:
        self.smem = (self.smem + 15) // 16 * 16
        self.views.append(T.SharedView(name, dtype, dims, self.smem))
        self.smem += math.prod(dims) * dtype.bytes

    def scalar_store(self, s: tir.Store) -> list[T.Stmt]:
        if s.buffer.scope == "fragment":
            raise error(
                s.span,
                f"fragment '{s.buffer.name}' can only be written inside a Parallel loop or by a tile op",
                hint="wrap the assignment in `for i, j in Parallel(...)`",
            )
        ref = self.ref(s.buffer, s.indices, None)
        if s.buffer.scope == "global":
            self.written.add(ref.ref.array)
        value = cast(self.value(s.value, None), s.buffer.dtype)
        return [T.Assign(ref.ref, value)]

    def loop(self, s: tir.For) -> list[T.Stmt]:
        if producers(s):
            return self.pipelined(s)
        var = self.names.of(s.var)
        body = self.block(s.body)
        step = s.step.value if isinstance(s.step, tir.IntImm) else 1
        loop = T.Loop(
            T.Sym(var, I32), self.value(s.start, None), self.value(s.stop, None), step, s.kind == "unroll", tuple(body)
        )
        if s.kind == "pipelined":
            comment = f"{source_line(s)}: {s.span.text.splitlines()[0].strip() if s.span.text else 'Pipelined loop'}"
            return [T.Comment(comment), loop]
        return [loop]

    def if_(self, s: tir.If) -> list[T.Stmt]:
        cond = self.value(s.cond, None)
        then = self.block(s.then)
        orelse = self.block(s.orelse)
        return [T.IfThen(cond, tuple(then), tuple(orelse))]

    def value(self, e: tir.Expr, loop: ElementLoop | None) -> tir.Expr:
        """The C-ready form of an expression: buffers resolved to subscripts,
        low-precision arithmetic widened to float32, indices simplified."""
        match e:
            case tir.IntImm() | tir.BoolImm():
                return e
            case tir.FloatImm(v, d):
                return tir.FloatImm(v, compute_dtype(d))
            case tir.Var():
                if e.kind == "thread":  # already a C name (counters, threadIdx.x)
                    return e
                if e not in self.cvars:
                    self.cvars[e] = tir.Var(self.names.of(e), e.dtype, "thread")
                return cast(self.cvars[e], compute_dtype(e.dtype))
            case tir.Load(buf, idx):
                acc = self.ref(buf, idx, loop)
                ref: tir.Expr = acc.ref  # type: ignore[assignment]  # a C subscript standing for the loaded value
                ref = cast(ref, compute_dtype(buf.dtype))
                if not all(c in self.assumed for c in conjuncts(acc.inbounds)):
                    ref = tir.Select(acc.inbounds, ref, zero(compute_dtype(buf.dtype)), compute_dtype(buf.dtype))
                return ref
            case tir.BinOp(op, a, b, d):
                va, vb = self.value(a, loop), self.value(b, loop)
                if op in ("==", "!=", "<", "<=", ">", ">=", "and", "or"):
                    return simplify(tir.BinOp(op, va, vb, d))
                cd = compute_dtype(d)
                return simplify(tir.BinOp(op, cast(va, cd), cast(vb, cd), cd))
            case tir.UnaryOp(op, a, d):
                return simplify(tir.UnaryOp(op, self.value(a, loop), compute_dtype(d)))
            case tir.Select(c, a, b, d):
                cd = compute_dtype(d)
                return tir.Select(self.value(c, loop), cast(self.value(a, loop), cd), cast(self.value(b, loop), cd), cd)
            case tir.Cast(v, d):
                inner = self.value(v, loop)
                if d.is_low_precision:  # round through the narrow type, keep computing in float
                    return tir.Cast(cast(inner, d) if inner.dtype == F32 else tir.Cast(cast(inner, F32), d), F32)
                return cast(inner, d)
            case tir.Call("exp2", (arg,), d) if compute_dtype(d) == F32:
                self.helpers.add("exp2")  # the hardware's ex2.approx.ftz (see emit.HELPERS)
                return T.Intrin("tilec_exp2", (cast(self.value(arg, loop), F32),), F32)  # type: ignore[return-value]  # Thread IR leaf in a Tile IR expression
            case tir.Call(f, args, d):
                cd = compute_dtype(d)
                return tir.Call(f, tuple(cast(self.value(a, loop), cd) for a in args), cd)
            case _:
                assert_never(e)

    def ref(self, buf: tir.Buffer, idx: tuple[tir.Expr, ...], loop: ElementLoop | None) -> Access:
        """The subscript of one element and its bound condition."""
        name = self.names.of(buf)
        idx = tuple(simplify(self.value(i, loop)) for i in idx)
        true: tir.Expr = tir.BoolImm(True)
        match buf.scope:
            case "global":
                flat = flatten(idx, tuple(self.value(d, None) for d in buf.shape))
                conds = [lt(i, self.value(d, None)) for i, d in zip(idx, buf.shape) if not self._below(i, d)]
                if buf in self.interior:
                    conds = []
                return Access(T.Subscript(name, (flat,), buf.dtype), all_of(conds))
            case "shared" | "local":
                if buf in self.layouts.swizzle:
                    layout = self.layouts.swizzle[buf]
                    assert layout.swizzle is not None, "layouts.swizzle holds swizzled layouts"
                    if len(layout.shape) == len(idx) + 1:  # column blocks (layout_algebra.swizzled_blocks)
                        idx = (*idx[:-1], *split_index(idx[-1], layout.shape[-1], self.bounds))
                    idx = (swizzled_offset(layout.swizzle, simplify(layout.strided_expr(idx)), self.bounds),)
                if buf in self.stage_of:
                    idx = (self.stage_of[buf], *idx)
                return Access(T.Subscript(name, idx, buf.dtype), true)
            case "var":
                return Access(T.Subscript(name, (), buf.dtype), true)
            case "fragment":
                if loop is None:
                    raise error(
                        idx[0].span if idx else buf.span,
                        f"fragment '{buf.name}' can only be indexed inside a Parallel loop",
                        hint="copy it to a shared or local buffer to read single elements",
                    )
                return Access(T.Subscript(name, (self.slot(buf, idx, loop),), buf.dtype), true)

    def slot(self, buf: tir.Buffer, idx: tuple[tir.Expr, ...], loop: ElementLoop) -> tir.Expr:
        """Register of fragment `buf` holding element `idx` of the loop being
        lowered: the fragment's register digits are the loop's digits of the
        dims it is indexed by (its layout is the loop's, projected)."""
        frag = self.layouts.buffers[buf]
        dims = []
        for i in idx:
            pos = next((d for d, e in enumerate(loop.index) if e is i or e == i), None)
            if pos is None:
                raise error(buf.span, f"internal: fragment '{buf.name}' index not a loop variable")
            dims.append(pos)
        digits = [
            digit for part, digit in zip(loop.layout.local_parts, loop.local) if part.extent > 1 and part.dim in dims
        ]
        wanted = [p for p in frag.local_parts if p.extent > 1]
        if len(digits) != len(wanted):
            raise error(buf.span, f"internal: fragment '{buf.name}' registers do not match the loop's layout")
        return L.slot(L.Fragment(frag.shape, frag.thread_parts, tuple(wanted)), digits)

    def _below(self, i: tir.Expr, d: tir.Expr) -> bool:
        """True if index `i` is provably below the constant extent `d`."""
        if not isinstance(d, tir.IntImm):
            return False
        hi = upper_bound(i, self.bounds)
        return hi is not None and hi < d.value


if TYPE_CHECKING:
    # The mixins' methods take `self: LoweringHost`, so mypy checks their bodies against the
    # whole of KernelLowering. A protocol may not name a class as a base (hence the ignore), but
    # a protocol self-type is what lets a mixin method use its host's members.
    class LoweringHost(KernelLowering, Protocol):  # type: ignore[misc]
        pass


def _const(var: tir.Var, init: tir.Expr) -> T.Decl:
    """`const int var = init;`"""
    return T.Decl(var.name, var.dtype, init=init, const=True)


def _op(op: tir.BinOpName, a: tir.Expr, b: tir.Expr) -> tir.Expr:
    """An int32 operation written as is (no simplification: block-index set-up reads as written)."""
    return tir.BinOp(op, a, b, I32)


def lower_kernel(kernel: tir.Kernel, layouts: Layouts, target: Target) -> T.Kernel:
    return KernelLowering(kernel, layouts, target).run()
