"""The kernel's tensors (used by elaborate.py): the parameters' shapes and strides, and views of
a parameter's memory with another shape.

    kernel k(X: Tensor((M, N), float16, strides=(sM, 1)),     kernel k(X: float16[M, N] global strides (sM, 1),
             Y: Tensor((Z, M, N), float16)):                           Y: float16[Z, M, N] global)
        Y_flat = Tensor((Z * M, N), float16, Y)        ->        dims M, N, sM, Z
                                                               view Y_flat: float16[Z * M, N] global of Y

A dimension or stride is an int, a param or constant expression, a new name (a symbolic dimension:
an int32 argument of the launcher) or an expression of dimensions; a view's shape names no new one.
"""

from __future__ import annotations

import math
from typing import Any

from tilec import fold, shapes, tir, tir_walk
from tilec import syntax as S
from tilec.budget import INT32_MAX
from tilec.builtins import ALL_SIGS, BUILTIN_NAMES, bind
from tilec.diagnostics import error
from tilec.dtypes import DType
from tilec.fold import Val
from tilec.params import ProgramScope, parse_define
from tilec.source import Span
from tilec.values import Abandon, BufVal, Poison, Scope, SubVal


class TensorElaborator(ProgramScope):
    """The tensor parameters and views of a kernel (`kx`: elaborate's per-kernel state)."""

    def tensor_param(self, p: S.KParam, t: S.Call, scope: Scope, kx: Any) -> None:
        """A tensor parameter `X: Tensor(shape, dtype[, strides=...])` of the kernel."""
        b = bind(t, "Tensor", ALL_SIGS["Tensor"])
        if "data" in b.args:
            raise error(
                b.args["data"].span,
                f"kernel parameter '{p.name}' is a tensor of its own; a view of another tensor's memory "
                "is bound in the kernel",
                hint=f"{p.name}_view = Tensor(shape, dtype, X) in the kernel's body, X a tensor parameter",
            )
        shape_node = b.args["shape"]
        items = shape_node.items if isinstance(shape_node, S.Tuple) else (shape_node,)
        if not items:
            raise error(shape_node.span, "a tensor needs at least one dimension")
        dims = tuple(self.dim(d, scope, kx) for d in items)
        count = math.prod(d.value for d in dims if isinstance(d, tir.IntImm))
        if count > INT32_MAX:
            exact = all(isinstance(d, tir.IntImm) for d in dims)
            shape = " x ".join(str(d.value) if isinstance(d, tir.IntImm) else "?" for d in dims)
            raise error(
                shape_node.span,
                f"tensor '{p.name}' has {'' if exact else 'at least '}{count} elements ({shape}); tilec "
                f"indexes tensors with 32-bit integers, so a tensor has at most {INT32_MAX}",
                hint="split the tensor, or the work, into parts of fewer than 2^31 elements",
            )
        dtype = self.dtype_arg(b.args["dtype"], scope, kx)
        if dtype.is_subbyte:
            check_packed_shape(p.name, dims[-1], dtype, items[-1].span)
            if "strides" in b.args:
                raise error(
                    b.args["strides"].span,
                    f"tensor '{p.name}' is {dtype.tile_name}, packed two to a byte: it cannot take strides",
                    hint="pass the packed tensor contiguous (a strided view of it: .contiguous() first)",
                )
        strides = self.strides(b.args.get("strides"), dims, p.name, scope, kx)
        buf = tir.Buffer(kx.fresh(p.name), dims, dtype, "global", p.span, strides)
        kx.tensors.append(buf)
        scope.names[p.name] = BufVal(buf)

    def dim(self, d: S.Expr, scope: Scope, kx: Any) -> tir.Expr:
        new = _new_name(d, scope)
        if new is not None:
            return self.new_dim(new, scope, kx)
        self.check_dim_names(d, scope)
        v = self.ev(d, scope, kx)
        if isinstance(v, Val) and not isinstance(fold.const(v.expr), int) and shapes.is_dim_expr(v.expr):
            return v.expr
        c = fold.const(v.expr) if isinstance(v, Val) else None
        if not isinstance(c, int) or isinstance(c, bool):
            raise error(
                d.span,
                "a tensor dimension must be an int literal, a param, a new name, or an integer expression of "
                "earlier dimensions and constants",
                hint="dimension expressions use + - * // % min max (ceildiv too) of dimensions and params",
            )
        if c <= 0:
            raise error(d.span, f"a tensor dimension must be positive, not {c}")
        if c > INT32_MAX:
            raise error(d.span, f"a tensor dimension must be at most {INT32_MAX} (dimensions are int32), not {c}")
        return tir.IntImm(c, DType.int32, d.span)

    def new_dim(self, d: S.Name, scope: Scope, kx: Any) -> tir.Expr:
        """A symbolic dimension (or stride) named for the first time: an int32 launcher argument,
        unless `-D` fixes it."""
        if d.id in self.defines and d.id not in self.params:
            fixed = self.fixed_dim(d)
            scope.names[d.id] = Val(fixed)
            return fixed
        self.dim_names.add(d.id)
        var = tir.Var(kx.fresh(d.id), DType.int32, "dim", d.span)
        kx.dims.append(var)
        scope.names[d.id] = Val(var)
        return var

    def strides(
        self, node: S.Expr | None, dims: tuple[tir.Expr, ...], name: str, scope: Scope, kx: Any
    ) -> tuple[tir.Expr, ...] | None:
        """A tensor's `strides=`: one per dimension, in elements; None when not given (row-major)."""
        if node is None:
            return None
        items = node.items if isinstance(node, S.Tuple) else (node,)
        if len(items) != len(dims):
            raise error(
                node.span,
                f"tensor '{name}' has {len(dims)} dimension{'s' if len(dims) != 1 else ''} but "
                f"{len(items)} stride{'s' if len(items) != 1 else ''}",
                hint="give one stride per dimension, in elements, outermost first: strides=(sB, sS, 1)",
            )
        strides = tuple(self.stride(item, scope, kx) for item in items)
        self.check_stride_span(node, name, dims, strides)
        return strides

    def stride(self, d: S.Expr, scope: Scope, kx: Any) -> tir.Expr:
        """One stride: a new name (a symbolic stride), an expression of dimensions, or an int >= 0."""
        new = _new_name(d, scope)
        if new is not None:
            return self.new_dim(new, scope, kx)
        self.check_dim_names(d, scope, "stride")
        v = self.ev(d, scope, kx)
        if isinstance(v, Val) and not isinstance(fold.const(v.expr), int) and shapes.is_dim_expr(v.expr):
            return v.expr
        scalars = [x for x in (tir_walk.variables(v.expr) if isinstance(v, Val) else ()) if x.kind == "scalar"]
        if scalars:
            raise error(
                d.span,
                f"a tensor stride cannot use the scalar argument '{scalars[0].name}'",
                hint="write a new name there instead (strides=(ld, 1), ld not a parameter): a symbolic stride, "
                "which tilec.runtime takes from the tensor's stride()",
            )
        c = fold.const(v.expr) if isinstance(v, Val) else None
        if not isinstance(c, int) or isinstance(c, bool):
            raise error(
                d.span,
                "a tensor stride must be an int literal, a param, a new name, or an integer expression of "
                "dimensions and constants",
                hint="strides count elements: (H * D, D, 1) for a row-major (S, H, D) tensor",
            )
        if not 0 <= c <= INT32_MAX:
            raise error(d.span, f"a tensor stride must be from 0 to {INT32_MAX} (strides are int32), not {c}")
        return tir.IntImm(c, DType.int32, d.span)

    def check_stride_span(
        self, node: S.Expr, name: str, dims: tuple[tir.Expr, ...], strides: tuple[tir.Expr, ...]
    ) -> None:
        """The farthest element of a tensor of constant shape and strides within 32-bit offsets."""
        steps = [c for c in map(fold.const, (*dims, *strides)) if isinstance(c, int)]
        if len(steps) != 2 * len(dims):
            return  # symbolic: the launcher tests it
        last = sum((n - 1) * s for n, s in zip(steps[: len(dims)], steps[len(dims) :]))
        if last > INT32_MAX:
            raise error(
                node.span,
                f"tensor '{name}' reaches element {last} with these strides; tilec indexes tensors with 32-bit "
                f"integers, so at most {INT32_MAX}",
                hint="split the tensor, or the work, into parts of fewer than 2^31 elements",
            )

    def check_dim_names(self, d: S.Expr, scope: Scope, what: str = "dimension") -> None:
        """A name inside a dimension (or stride) expression must already be bound: a new
        dimension is introduced alone (`(M, K)`), then used (`(M // 2, K)`)."""
        for name in S.names_in(d):
            if scope.lookup(name.id) is None and name.id not in BUILTIN_NAMES:
                first = f"a new {what} appears alone first" + (f" (strides=({name.id}, 1))" if what == "stride" else "")
                raise error(
                    name.span,
                    f"unknown name '{name.id}' in a tensor {what}",
                    hint=f"{first}: give a tensor the dimension '{name.id}' before this one, or make it a param",
                )

    def fixed_dim(self, d: S.Name) -> tir.Expr:
        self.dim_names.add(d.id)
        text = self.defines[d.id]
        value = parse_define(text)
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise error(d.span, f"-D {d.id}={text}: a dimension must be a positive int")
        if value > INT32_MAX:
            raise error(d.span, f"-D {d.id}={text}: a dimension must be at most {INT32_MAX} (dimensions are int32)")
        return tir.IntImm(value, DType.int32, d.span)

    # ------------------------------------------------------------ statements

    def view(self, target: S.Name, call: S.Call, scope: Scope, kx: Any) -> list[tir.Stmt]:
        """`X_flat = Tensor(shape, dtype, X)`: tensor X's memory seen with another shape (row-major,
        contiguous, no more elements than X has), as TileLang's `T.Tensor(shape, dtype, X.data)`.
        No code: accesses to the view index X's pointer."""
        b = bind(call, "Tensor", ALL_SIGS["Tensor"])
        if "data" not in b.args:
            raise error(
                call.span,
                "a Tensor(...) in a kernel's body is a view of a tensor's memory: name the tensor",
                hint=f"{target.id} = Tensor(shape, dtype, X), X a tensor parameter of the kernel",
            )
        if "strides" in b.args:
            raise error(
                b.args["strides"].span,
                "a view is row-major and contiguous: strides= is for a kernel's tensor parameters",
                hint="declare the tensor parameter with the strides instead",
            )
        base = self.view_base(b.args["data"], scope, kx)
        shape_node = b.args["shape"]
        items = shape_node.items if isinstance(shape_node, S.Tuple) else (shape_node,)
        for name in (n for d in items for n in S.names_in(d)):
            if scope.lookup(name.id) is None and name.id not in BUILTIN_NAMES:
                raise error(
                    name.span,
                    f"unknown name '{name.id}' in the shape of view '{target.id}'",
                    hint="a view's shape is made of the kernel's dimensions, params and constants",
                )
        dims = tuple(self.dim(d, scope, kx) for d in items)
        dtype = self.dtype_arg(b.args["dtype"], scope, kx)
        if dtype != base.dtype:
            raise error(
                b.args["dtype"].span,
                f"view '{target.id}' is {dtype.tile_name} but '{base.name}' holds {base.dtype.tile_name}",
                hint=f"a view has its tensor's dtype: Tensor(shape, {base.dtype.tile_name}, {base.name})",
            )
        if not shapes.fits(dims, base.shape):
            raise error(
                shape_node.span,
                f"cannot show that view '{target.id}' {shapes.dims_text(dims)} has no more elements than "
                f"'{base.name}' {shapes.dims_text(base.shape)}",
                hint="write the view's dimensions as products of the tensor's (a view may have fewer elements)",
            )
        buf = tir.Buffer(kx.fresh(target.id), dims, dtype, "global", call.span, view_of=base)
        kx.views.append(buf)
        scope.names[target.id] = BufVal(buf)
        return []

    def view_base(self, node: S.Expr, scope: Scope, kx: Any) -> tir.Buffer:
        """The tensor parameter a view is of (that of a view, for a view of a view)."""
        v = self.ev(node, scope, kx)
        if isinstance(v, Poison):
            raise Abandon()
        if not isinstance(v, BufVal) or v.buffer.scope != "global":
            what = f", not {shapes.SCOPE_WORDS[v.buffer.scope]}" if isinstance(v, (BufVal, SubVal)) else ""
            raise error(node.span, f"a view's data must be a tensor parameter of the kernel (or a view of one){what}")
        base = v.buffer.view_of or v.buffer
        if base.strides is not None:
            raise error(
                node.span,
                f"'{base.name}' is declared with strides; a view needs a contiguous tensor",
                hint="index the strided tensor itself, or pass a contiguous one",
            )
        return base


def _new_name(d: S.Expr, scope: Scope) -> S.Name | None:
    """A tensor dimension or stride that names a new symbolic dimension, or None."""
    if isinstance(d, S.Name) and scope.lookup(d.id) is None and d.id not in BUILTIN_NAMES:
        return d
    return None


def check_packed_shape(name: str, last: tir.Expr, dtype: DType, span: Span) -> None:
    """A sub-byte buffer's innermost dimension holds whole bytes: an even constant (a symbolic one
    the launcher checks)."""
    if isinstance(last, tir.IntImm) and last.value % 2:
        raise error(
            span,
            f"'{name}' is {dtype.tile_name}, packed two to a byte along its innermost dimension, which must "
            f"be even, not {last.value}",
            hint="pad the innermost dimension to an even size",
        )
