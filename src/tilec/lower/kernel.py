"""Lowering of one kernel: its context (context.py), the statement walk, which sends each
tile op to its lowering (ops.py, pipelined.py), and the kernel's head: parameters, block
indices, shared-memory views and kernel-wide flags."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import assert_never

from tilec import thread_ir as T
from tilec import tir
from tilec.diagnostics import error
from tilec.dtypes import DType
from tilec.lower.cexpr import I32, builtin, cast, let_init, source_comment, source_line
from tilec.lower.context import LowerContext, new_context, shared_bytes, shared_names, shared_view
from tilec.lower.exprs import ref_of, value_of
from tilec.lower.lanes import name_lanes
from tilec.lower.loops import device_assert
from tilec.lower.ops import (
    lower_atomic_element,
    lower_atomic_region,
    lower_copy,
    lower_cumsum,
    lower_fill,
    lower_gemm,
    lower_parallel,
    lower_print,
    lower_reduce,
)
from tilec.lower.pipelined import lower_early_copy, lower_pipelined
from tilec.passes.infer_layouts import Layouts
from tilec.passes.plan_pipeline import producers
from tilec.simplify import int_, simplify
from tilec.sync import shared_reads_writes
from tilec.targets import Target, instruction_named

_GRID_DIM: dict[str, T.BuiltinName] = {"x": "grid_dim_x", "y": "grid_dim_y"}


def lower_kernel(kernel: tir.Kernel, layouts: Layouts, target: Target) -> T.Kernel:
    ctx = new_context(kernel, layouts, target)
    body = lower_block(ctx, kernel.body)
    state = ctx.state
    roles = state.roles
    threads = kernel.threads
    if roles is not None:  # the block's threads consume; a producer warp group after them
        producing = tir.BinOp(">=", ctx.tx, int_(threads), DType.bool)
        body = [*roles.setup, T.IfThen(producing, roles.producer, (*roles.consumer_entry, *body))]
        threads += roles.producer_threads
    head = _block_index(ctx) + list(state.views) + state.prologue
    grid = tuple(simplify(value_of(ctx, g, None)) for g in kernel.grid)
    body = name_lanes(head + body, ctx.tx, threads, target.warp_size, ctx.fresh)
    smem = shared_bytes(state.views)
    helpers = tuple(sorted(state.helpers))
    params = _params(ctx) + (roles.params if roles else ())
    k = T.Kernel(kernel.name, params, threads, grid, smem, tuple(body), _abi(ctx), helpers)
    if roles is None:
        return k
    return replace(k, consumer_threads=kernel.threads, min_blocks=1, tensor_maps=roles.tensor_maps)


def lower_block(ctx: LowerContext, stmts: tuple[tir.Stmt, ...]) -> list[T.Stmt]:
    out: list[T.Stmt] = []
    for s in stmts:
        out += lower_stmt(ctx, s)
    return out


def lower_stmt(ctx: LowerContext, s: tir.Stmt) -> list[T.Stmt]:
    """One statement of the kernel body; every tile op becomes a Scope (`as_scope`)."""
    match s:
        case tir.Alloc():
            return lower_alloc(ctx, s)
        case tir.Let(var, value):
            return [T.Decl(ctx.name(var), var.dtype, init=let_init(value_of(ctx, value, None), var.dtype), const=True)]
        case tir.Store():
            return lower_store(ctx, s)
        case tir.Copy() if s.pipeline == "early":
            return lower_early_copy(ctx, s)
        case tir.Copy():
            return as_scope(ctx, s, lower_copy(ctx, s))
        case tir.Fill():
            return as_scope(ctx, s, lower_fill(ctx, s))
        case tir.Parallel():
            return as_scope(ctx, s, lower_parallel(ctx, s))
        case tir.Gemm():
            return as_scope(ctx, s, lower_gemm(ctx, s))
        case tir.Reduce():
            return as_scope(ctx, s, lower_reduce(ctx, s))
        case tir.CumSum():
            return as_scope(ctx, s, lower_cumsum(ctx, s))
        case tir.AtomicAdd() if s.src is not None:
            return as_scope(ctx, s, lower_atomic_region(ctx, s))
        case tir.AtomicAdd():
            return as_scope(ctx, s, lower_atomic_element(ctx, s))
        case tir.For() if s.warp_specialized:
            return ctx.backend.warp_specialized(ctx, s)
        case tir.For() if producers(s):
            return lower_pipelined(ctx, s, lower_stmt)
        case tir.For():
            return lower_for(ctx, s)
        case tir.If():
            return lower_if(ctx, s)
        case tir.Print():
            return as_scope(ctx, s, lower_print(ctx, s))
        case tir.DeviceAssert():
            return [device_assert(ctx, s, None)]
        case tir.UseSwizzle():
            ctx.state.swizzle = s
            return []
        case tir.AnnotateLayout():  # read by layout inference
            return []
        case _:
            assert_never(s)


def as_scope(ctx: LowerContext, s: tir.Stmt, body: list[T.Stmt]) -> list[T.Stmt]:
    """A lowered tile op as a Scope, with the shared tiles it reads and writes for barrier
    placement (sync.py): its operands, and scratch it reads after its own barriers."""
    reads, writes = shared_reads_writes(s)
    access = T.SharedAccess(
        reads=shared_names(ctx, reads) | ctx.state.scratch_reads,
        writes=shared_names(ctx, writes),
        scratch=isinstance(s, (tir.Reduce, tir.Gemm)),  # a cross-warp reduction, a staged operand
        proxy_reads=isinstance(s, tir.Gemm) and instruction_named(ctx.target, s.instruction).load == "descriptors",
    )
    ctx.state.scratch_reads = set()
    return [T.Scope(source_comment(s), tuple(body), s.span, access)]


def lower_alloc(ctx: LowerContext, s: tir.Alloc) -> list[T.Stmt]:
    buf = s.buffer
    name = ctx.name(buf)
    layouts = ctx.layouts
    match buf.scope:
        case "shared":
            dims = buf.const_shape
            if buf in layouts.pitch:  # padded rows: conflict-free matrix loads
                dims = dims[:-1] + (layouts.pitch[buf],)
            if buf in layouts.swizzle:  # swizzled: one flat row, offsets through the XOR
                dims = (math.prod(dims),)
            if s.stages > 1:  # one copy per pipeline stage
                dims = (s.stages, *dims)
            shared_view(ctx, name, buf.dtype, dims, layouts.align.get(buf, 16))
            return []
        case "fragment":
            frag = layouts.buffers[buf]
            return [T.Decl(name, buf.dtype, (frag.local_size,))]
        case "local":
            return [T.Decl(name, buf.dtype, buf.const_shape)]
        case "var":
            init = value_of(ctx, s.init, None) if s.init is not None else None
            return [T.Decl(name, buf.dtype, (), init=cast(init, buf.dtype) if init is not None else None)]
        case "global":
            raise error(s.span, "tensors cannot be allocated inside a kernel")


def lower_store(ctx: LowerContext, s: tir.Store) -> list[T.Stmt]:
    """A scalar store outside any Parallel loop."""
    if s.buffer.scope == "fragment":
        raise error(
            s.span,
            f"fragment '{s.buffer.name}' can only be written inside a Parallel loop or by a tile op",
            hint="wrap the assignment in `for i, j in Parallel(...)`",
        )
    ref = ref_of(ctx, s.buffer, s.indices, None)
    if s.buffer.scope == "global":
        ctx.state.written.add(ref.ref.array)
    value = cast(value_of(ctx, s.value, None), s.buffer.dtype)
    return [T.Assign(ref.ref, value)]


def lower_for(ctx: LowerContext, s: tir.For) -> list[T.Stmt]:
    """A loop without producers (a Pipelined loop with nothing to pipeline runs as is)."""
    var = ctx.name(s.var)
    body = lower_block(ctx, s.body)
    step = s.step.value if isinstance(s.step, tir.IntImm) else 1
    start, stop = value_of(ctx, s.start, None), value_of(ctx, s.stop, None)
    loop = T.Loop(T.Sym(var, I32), start, stop, step, s.kind == "unroll", tuple(body))
    if s.kind == "pipelined":
        comment = f"{source_line(s)}: {s.span.text.splitlines()[0].strip() if s.span.text else 'Pipelined loop'}"
        return [T.Comment(comment), loop]
    return [loop]


def lower_if(ctx: LowerContext, s: tir.If) -> list[T.Stmt]:
    cond = value_of(ctx, s.cond, None)
    then = lower_block(ctx, s.then)
    orelse = lower_block(ctx, s.orelse)
    return [T.IfThen(cond, tuple(then), tuple(orelse))]


def _params(ctx: LowerContext) -> tuple[T.Param, ...]:
    kernel = ctx.kernel
    names = [ctx.name(t) for t in kernel.tensors]
    tensors = [T.Param(n, t.dtype, True, n not in ctx.state.written) for n, t in zip(names, kernel.tensors)]
    scalars = [T.Param(ctx.name(v), v.dtype) for v in (*kernel.scalars, *kernel.dims)]
    return (*tensors, *scalars)


def _abi(ctx: LowerContext) -> dict:
    kernel = ctx.kernel

    def dim(d: tir.Expr) -> int | str:
        return d.value if isinstance(d, tir.IntImm) else ctx.name(d) if isinstance(d, tir.Var) else "?"

    return {
        "name": kernel.name,
        "tensors": [
            {"name": ctx.name(t), "dtype": t.dtype.tile_name, "shape": [dim(d) for d in t.shape]}
            for t in kernel.tensors
        ],
        "scalars": [{"name": ctx.name(v), "dtype": v.dtype.tile_name} for v in kernel.scalars],
        "dims": [ctx.name(v) for v in kernel.dims],
    }


def _block_index(ctx: LowerContext) -> list[T.Stmt]:
    out: list[T.Stmt] = [_const(ctx.tx, builtin("thread_index"))]
    blocks = [tir.Var(ctx.name(v), I32, "thread") for v in ctx.kernel.block_vars]
    axes: list[T.BuiltinName] = ["block_index_x", "block_index_y", "block_index_z"]
    sw = ctx.state.swizzle
    if sw is None or len(blocks) < 2:
        return out + [_const(b, builtin(axis)) for b, axis in zip(blocks, axes)]
    # Panels of `panel_size` block rows (order row) walked column by column, for L2 reuse.
    p = int_(sw.panel_size)
    first, second = ("x", "y") if sw.order == "row" else ("y", "x")
    tile_id, panel_tiles, panel, in_panel, panel_rows = (
        tir.Var(ctx.fresh(n), I32, "thread") for n in ("tile_id", "panel_tiles", "panel", "in_panel", "panel_rows")
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


def _const(var: tir.Var, init: tir.Expr) -> T.Decl:
    """`const int var = init;`"""
    return T.Decl(var.name, var.dtype, init=init, const=True)


def _op(op: tir.BinOpName, a: tir.Expr, b: tir.Expr) -> tir.Expr:
    """An int32 operation written as is (no simplification: block-index set-up reads as written)."""
    return tir.BinOp(op, a, b, I32)
