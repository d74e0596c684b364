"""Expressions of the .tile language: names, operators, calls of built-in
functions, subscripts -> `Value`s (values.py) holding Tile IR expressions.

    exp2(acc_s[i, j] * scale - m[i] * scale)
      -> Val(Call("exp2", (BinOp(-, BinOp(*, Load(acc_s, (i, j)), FloatImm(0.18)), ...),), float32))

A mixin of the elaborator (elaborate.py): it needs only the scopes; typing
and folding are fold.py's, built-in signatures builtins.py's.
"""

from __future__ import annotations

import math
import re
from typing import Any

from tilec import fold, tir
from tilec import syntax as S
from tilec.builtins import ALL_SIGS, ALLOCS, BUILTIN_NAMES, FUNCS, POLICIES, TILE_OPS, bind, did_you_mean, unsupported
from tilec.diagnostics import CompileError, error
from tilec.dtypes import DTYPE_NAMES, DTYPES, DType
from tilec.fold import Val
from tilec.source import Span
from tilec.targets import RESERVED_NAMES
from tilec.tir import EXTERN
from tilec.values import (
    Abandon,
    BufVal,
    BuiltinVal,
    DTypeVal,
    MacroVal,
    Poison,
    PolicyVal,
    Scope,
    SliceVal,
    StrVal,
    SubVal,
    TupleVal,
    Value,
)

# what shfl_xor() / shfl_down() move as they are (low-precision floats move as float32)
_C_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(::[A-Za-z_][A-Za-z0-9_]*)*")  # `my_fn`, `ops::gelu`
_SHUFFLED = frozenset({DType.int32, DType.uint32, DType.int64, DType.uint64, DType.float32, DType.float64})


# reinterpret()'s literals: the unsigned (False) or float (True) type of each width
_SAME_WIDTH: dict[bool, dict[int, DType]] = {
    False: {d.bits: d for d in (DType.uint8, DType.uint16, DType.uint32, DType.uint64)},
    True: {d.bits: d for d in (DType.float16, DType.float32, DType.float64)},
}


class ExprElaborator:
    """Evaluation of expressions in a scope; `kx` (the kernel being
    elaborated) is passed through untouched."""

    def callee_name(self, call: S.Call, scope: Scope) -> str | None:
        f = call.func
        if isinstance(f, S.Name) and scope.lookup(f.id) is None and f.id in ALL_SIGS:
            return f.id
        return None

    def callee(self, call: S.Call, scope: Scope, kx: Any) -> Value:
        f = call.func
        if isinstance(f, S.Name) and scope.lookup(f.id) is None and f.id not in BUILTIN_NAMES and f.id != "T":
            candidates = (
                list(TILE_OPS)
                + list(FUNCS)
                + list(ALLOCS)
                + [n for n in scope.visible() if isinstance(scope.lookup(n), MacroVal)]
            )
            unsupported(f.id, f.span)
            raise error(f.span, f"unknown function '{f.id}'", hint=did_you_mean(f.id, candidates))
        v = self.ev(f, scope, kx)
        if isinstance(v, Poison):
            raise Abandon()
        return v

    def ev_value(self, node: S.Expr, scope: Scope, kx: Any) -> Value:
        v = self.ev(node, scope, kx)
        if isinstance(v, Poison):
            raise Abandon()
        return v

    def scalar(self, node: S.Expr, scope: Scope, kx: Any) -> Val:
        return self.as_val(self.ev_value(node, scope, kx), node.span)

    def as_val(self, v: Value, span: Span) -> Val:
        match v:
            case Val():
                return v
            case SubVal() if v.is_element:
                load = tir.Load(v.buffer, tuple(v.items), span)  # type: ignore[arg-type]  # an element: no SliceVal among the items
                if v.buffer.dtype.is_subbyte:  # an int4 element reads as an int8 (passes/pack_subbyte.py)
                    return Val(tir.Cast(load, v.buffer.dtype.value_type, span))
                return Val(load)
            case SubVal():
                raise error(span, "a region is not a scalar value", hint="index every dimension to read one element")
            case BufVal() if v.buffer.scope == "var":
                return Val(tir.Load(v.buffer, (), span))
            case BufVal():
                idx = ", ".join("ijkl"[i % 4] for i in range(len(v.buffer.shape)))
                raise error(
                    span,
                    f"'{v.buffer.name}' is a buffer, not a scalar value",
                    hint=f"index it to read an element: {span.text}[{idx}]",
                )
            case DTypeVal():
                raise error(span, f"'{v.dtype.tile_name}' is a dtype, not a value")
            case Poison():
                raise Abandon()
        raise error(span, "expected a scalar value here")

    def int_expr(self, node: S.Expr, scope: Scope, kx: Any, what: str) -> tir.Expr:
        v = self.scalar(node, scope, kx)
        if not v.dtype.is_int:
            raise error(node.span, f"{what} must be an integer, not {v.dtype.tile_name}")
        return v.expr

    def const_int(self, node: S.Expr | None, scope: Scope, kx: Any, what: str, default: int) -> int:
        if node is None:
            return default
        c = fold.const(self.scalar(node, scope, kx).expr)
        if not isinstance(c, int) or isinstance(c, bool):
            raise error(node.span, f"{what} must be a compile-time integer constant")
        return c

    def const_bool(self, node: S.Expr | None, scope: Scope, kx: Any, what: str, default: bool) -> bool:
        if node is None:
            return default
        c = fold.const(self.scalar(node, scope, kx).expr)
        if not isinstance(c, bool):
            raise error(node.span, f"{what} must be True or False")
        return c

    def string(self, node: S.Expr | None, scope: Scope, kx: Any, what: str, default: str = "") -> str:
        if node is None:
            return default
        v = self.ev_value(node, scope, kx)
        if not isinstance(v, StrVal):
            raise error(node.span, f"{what} must be a string")
        return v.value

    def dtype_arg(self, node: S.Expr, scope: Scope, kx: Any) -> DType:
        if isinstance(node, S.Str):
            if node.value in DTYPE_NAMES:
                return DTYPE_NAMES[node.value]
            unsupported(node.value, node.span)
            raise error(node.span, f"unknown dtype '{node.value}'", hint=did_you_mean(node.value, tuple(DTYPES)))
        if isinstance(node, S.Name) and scope.lookup(node.id) is None and node.id not in DTYPE_NAMES:
            unsupported(node.id, node.span)
            dtype_names = list(DTYPES) + [n for n in scope.visible() if isinstance(scope.lookup(n), DTypeVal)]
            raise error(node.span, f"unknown dtype '{node.id}'", hint=did_you_mean(node.id, dtype_names))
        v = self.ev_value(node, scope, kx)
        if not isinstance(v, DTypeVal):
            raise error(node.span, "expected a dtype here (float16, float32, int8, ...)")
        return v.dtype

    def value_dtype(self, node: S.Expr, scope: Scope, kx: Any, what: str) -> DType:
        """A dtype that values may have: not a sub-byte type, whose elements exist only packed
        in tensors and shared tiles (they read as int8, uint8 or float32)."""
        d = self.dtype_arg(node, scope, kx)
        if d.is_subbyte:
            raise error(
                node.span,
                f"{what} cannot convert to {d.tile_name}: its elements exist only packed, two to a "
                f"byte, in tensors and shared tiles, and read as {d.value_type.tile_name}",
                hint=f"use {d.value_type.tile_name}; to write packed data, store bytes into a uint8 tensor: "
                "Q[i, j] = (lo & 15) | (hi << 4)",
            )
        return d

    def unknown(self, node: S.Name, scope: Scope) -> CompileError:
        local = [n for n in scope.visible() if not isinstance(scope.lookup(n), Poison)]
        hint = did_you_mean(node.id, local) or did_you_mean(node.id, BUILTIN_NAMES)
        return error(node.span, f"unknown name '{node.id}'", hint=hint)

    def ev(self, node: S.Expr, scope: Scope, kx: Any) -> Value:
        match node:
            case S.Name():
                return self.name(node, scope)
            case S.Int() | S.Float() | S.Bool():
                return fold.literal(node.value, node.span)
            case S.Str():
                return StrVal(node.value)
            case S.BinOp():
                a, b = self.scalar(node.left, scope, kx), self.scalar(node.right, scope, kx)
                return fold.binop(node.op, a, b, node.span)
            case S.UnaryOp():
                return fold.unary(node.op, self.scalar(node.operand, scope, kx), node.span)
            case S.IfExp():
                cond = self.scalar(node.cond, scope, kx)
                a, b = self.scalar(node.a, scope, kx), self.scalar(node.b, scope, kx)
                return fold.select(cond, a, b, node.span)
            case S.Call():
                return self.call(node, scope, kx)
            case S.Subscript():
                return self.subscript(node, scope, kx)
            case S.Attribute():
                return self.attribute(node, scope, kx)
            case S.Tuple():
                return TupleVal(tuple(self.ev_value(i, scope, kx) for i in node.items))
        raise AssertionError(node)

    def name(self, node: S.Name, scope: Scope) -> Value:
        v = scope.lookup(node.id)
        if v is not None:
            return v
        if node.id in DTYPE_NAMES:
            return DTypeVal(DTYPE_NAMES[node.id])
        if node.id in POLICIES:
            return PolicyVal(node.id)
        if node.id in ALL_SIGS:
            return BuiltinVal(node.id)
        if node.id == "T":
            raise error(node.span, "tilec has no 'T' module", hint="drop the 'T.' prefix: write copy(...)")
        unsupported(node.id, node.span)
        raise self.unknown(node, scope)

    def attribute(self, node: S.Attribute, scope: Scope, kx: Any) -> Value:
        if isinstance(node.value, S.Name) and node.value.id == "T":
            return self.t_attribute(node)
        if isinstance(node.value, S.Name) and node.value.id == "GemmWarpPolicy" and node.attr in POLICIES:
            return PolicyVal(node.attr)
        base = self.ev_value(node.value, scope, kx)
        if isinstance(base, (BufVal, SubVal)):
            return self.buffer_attribute(base, node)
        raise error(node.span, "attribute access ('.') is not supported", hint="only buffers have attributes")

    @staticmethod
    def t_attribute(node: S.Attribute) -> Value:
        """`T.name`: TileLang's module prefix, which .tile drops."""
        unsupported(node.attr, node.span)
        raise error(
            node.span,
            f"drop the 'T.' prefix: write '{node.attr}'",
            hint="tile ops, dtypes and loops are built in; TileLang's T. module is not needed",
        )

    @staticmethod
    def buffer_attribute(base: BufVal | SubVal, node: S.Attribute) -> Value:
        """`buf.dtype` and `buf.shape` (of a region: its extents); a tensor's `.data` is the tensor
        (TileLang's spelling of a view's memory: Tensor(shape, dtype, X.data))."""
        buf = base.buffer
        if node.attr == "data" and isinstance(base, BufVal) and buf.scope == "global":
            return base
        if node.attr == "dtype":
            return DTypeVal(buf.dtype)
        if node.attr == "shape":
            if isinstance(base, SubVal):
                raise error(node.span, "a region has no .shape", hint=f"use the shape of the buffer: {buf.name}.shape")
            return TupleVal(tuple(ExprElaborator.extent(d, node.span) for d in buf.shape))
        hint = did_you_mean(node.attr, ("dtype", "shape")) or "a buffer has the attributes .dtype and .shape"
        raise error(node.span, f"'{buf.name}' has no attribute '{node.attr}'", hint=hint)

    @staticmethod
    def extent(d: tir.Expr, span: Span) -> Val:
        """One entry of `.shape`: a constant is a literal (weak, like a param); a dimension its variable."""
        c = fold.const(d)
        return fold.literal(c, span) if isinstance(c, int) else Val(d)

    def call(self, node: S.Call, scope: Scope, kx: Any) -> Value:
        if isinstance(node.func, S.Attribute) and node.func.attr == "astype":
            return self.astype(node, scope, kx)
        f = self.callee(node, scope, kx)
        if isinstance(f, BuiltinVal) and f.name in FUNCS:
            return self.builtin(f.name, node, scope, kx)
        if isinstance(f, BuiltinVal) and f.name in TILE_OPS:
            raise error(node.span, f"{f.name}() is a statement; it has no value")
        if isinstance(f, BuiltinVal) and f.name in ALLOCS:
            raise error(
                node.span,
                f"{f.name}() must be the whole right side of an assignment",
                hint=f"write x = {f.name}(...) on its own line",
            )
        if isinstance(f, MacroVal):
            raise error(node.span, f"macro '{f.macro.name}' has no value; call it as a statement")
        if isinstance(f, BuiltinVal):
            raise error(node.span, f"{f.name}(...) cannot be used here")
        raise error(node.func.span, f"'{node.func.span.text}' is not a function")

    def astype(self, node: S.Call, scope: Scope, kx: Any) -> Val:
        """`x.astype(dtype)` (TileLang's method on a value): `cast(x, dtype)`."""
        assert isinstance(node.func, S.Attribute)
        if len(node.args) != 1 or node.keywords:
            raise error(node.span, ".astype() takes one argument, the dtype", hint="write x.astype(float32)")
        x = self.scalar(node.func.value, scope, kx)
        return Val(fold.cast(x, self.dtype_arg(node.args[0], scope, kx), node.span))

    def builtin(self, name: str, node: S.Call, scope: Scope, kx: Any) -> Value:
        b = bind(node, name, FUNCS[name])
        a = b.args
        span = node.span

        def arg(key: str) -> Val:
            return self.scalar(a[key], scope, kx)

        match name:
            case "ceildiv":
                return fold.ceildiv(arg("a"), arg("b"), span)
            case "min" | "max":
                return fold.minmax(name, [self.scalar(x, scope, kx) for x in b.rest], span)
            case "abs":
                return fold.absolute(arg("x"), span)
            case "clamp":  # TileLang's T.clamp: min(max(x, lo), hi)
                return fold.minmax("min", [fold.minmax("max", [arg("x"), arg("lo")], span), arg("hi")], span)
            case "pow":
                return fold.power(arg("x"), arg("y"), span)
            case "cast":
                return Val(fold.cast(arg("x"), self.value_dtype(a["dtype"], scope, kx, "cast()"), span))
            case "reinterpret":
                return self.reinterpret(arg("x"), a["dtype"], span, scope, kx)
            case "if_then_else":
                return fold.select(arg("cond"), arg("a"), arg("b"), span)
            case "infinity" | "max_value" | "min_value":
                return fold.limit(name, self.dtype_arg(a["dtype"], scope, kx), span)
            case "thread_index" | "get_thread_binding":
                return self.thread_index(a.get("dim"), span, scope, kx)
            case "lane_index" | "warp_index":
                self.in_block(name, span, kx)
                return Val(tir.Call(name, (), DType.int32, span))
            case "shfl_xor" | "shfl_down":
                self.in_block(name, span, kx)
                return self.shuffle(name, arg("x"), a["mask" if name == "shfl_xor" else "delta"], span, scope, kx)
            case "call_extern":
                self.in_block(name, span, kx)
                return self.call_extern(b.rest, span, scope, kx)
        return fold.math_call(name, arg("x"), span)

    def reinterpret(self, x: Val, dtype_node: S.Expr, span: Span, scope: Scope, kx: Any) -> Val:
        """`reinterpret(x, dtype)`: x's bits as a `dtype` of the same width (TileLang's T.reinterpret),
        never a conversion; a literal takes the unsigned (float) type of that width first."""
        d = self.value_dtype(dtype_node, scope, kx, "reinterpret()")
        if x.weak and d.bits in _SAME_WIDTH[x.dtype.is_float]:
            x = Val(fold.cast(x, _SAME_WIDTH[x.dtype.is_float][d.bits], span))
        if DType.bool in (x.dtype, d) or x.dtype.bits != d.bits:
            raise error(
                span,
                f"reinterpret() keeps the bits of its value: {x.dtype.tile_name} ({x.dtype.bits} bits) has no "
                f"{d.tile_name} ({d.bits} bits) form",
                hint="reinterpret between types of one width (uint16 <-> float16, uint32 <-> float32); cast() "
                "converts values",
            )
        if x.dtype == d:
            return x
        return Val(tir.Call("reinterpret", (x.expr,), d, span))

    def call_extern(self, rest: list[S.Expr], span: Span, scope: Scope, kx: Any) -> Val:
        """`call_extern(dtype, "name", args...)`: a device function of a header given with
        `--include`, returning `dtype`; taken to be a pure function of its arguments."""
        dtype = self.value_dtype(rest[0], scope, kx, "call_extern()")
        fname = self.string(rest[1], scope, kx, "call_extern()'s function name")
        if not _C_NAME.fullmatch(fname) or fname.startswith(EXTERN):
            raise error(
                rest[1].span,
                f"call_extern(): '{fname}' is not a C function name",
                hint='name a device function of a header given with --include: call_extern(float32, "my_fn", x)',
            )
        if fname in RESERVED_NAMES:
            raise error(
                rest[1].span,
                f"call_extern(): '{fname}' is a C++ keyword or a name the generated code uses",
                hint="give your device function a name of its own (tilec's math functions need no call_extern)",
            )
        args = tuple(self.scalar(x, scope, kx).expr for x in rest[2:])
        return Val(tir.Call(EXTERN + fname, args, dtype, span), False)

    @staticmethod
    def in_block(name: str, span: Span, kx: Any) -> None:
        if kx is None or not kx.in_block:
            raise error(span, f"{name}() outside the Kernel block", hint="threads and lanes exist inside it only")

    def shuffle(self, name: str, x: Val, lane: S.Expr, span: Span, scope: Scope, kx: Any) -> Val:
        """`shfl_xor(x, mask)` / `shfl_down(x, delta)`: `x` of another lane of this thread's warp
        (lane ^ mask, lane + delta), every lane of the warp taking part."""
        dtype = x.dtype
        if x.weak:
            dtype = DType.float32 if dtype.is_float else DType.int32
        if dtype not in _SHUFFLED and not dtype.is_low_precision:
            raise error(
                span,
                f"{name}() of {dtype.tile_name} is not supported",
                hint="shuffle a 32- or 64-bit integer or a float: cast(x, int32) first",
            )
        offset = self.scalar(lane, scope, kx)
        if not offset.dtype.is_int:
            what = "mask" if name == "shfl_xor" else "delta"
            raise error(lane.span, f"the {what} of {name}() must be an integer, not {offset.dtype.tile_name}")
        return Val(tir.Call(name, (fold.cast(x, dtype, span), fold.cast(offset, DType.int32, span)), dtype, span))

    def thread_index(self, dim: S.Expr | None, span: Span, scope: Scope, kx: Any) -> Val:
        """`thread_index()`: this thread's index in the block, 0 to threads - 1. TileLang's
        `get_thread_binding(d)`: its coordinate d in `threads=(x, y, z)` (x fastest); with one
        extent, get_thread_binding(0) is thread_index()."""
        if kx is None or not kx.in_block:
            raise error(span, "thread_index() outside the Kernel block", hint="a thread index exists inside it only")
        t = Val(tir.Call("thread_index", (), DType.int32, span))
        if dim is None:
            return t
        shape = kx.thread_shape
        d = self.const_int(dim, scope, kx, "dim", 0)
        if not 0 <= d < len(shape):
            raise error(
                dim.span,
                f"get_thread_binding({d}): the block has {len(shape)} thread dimension{'s' if len(shape) > 1 else ''}",
                hint="name the extents in the Kernel block: threads=(x, y)",
            )
        inner = math.prod(shape[:d])
        if inner > 1:
            t = fold.binop("//", t, fold.literal(inner, span), span)
        if d < len(shape) - 1:
            t = fold.binop("%", t, fold.literal(shape[d], span), span)
        return t

    def subscript(self, node: S.Subscript, scope: Scope, kx: Any) -> Value:
        base = self.ev_value(node.value, scope, kx)
        if isinstance(base, TupleVal):
            return self.tuple_item(base, node, scope, kx)
        if not isinstance(base, BufVal):
            raise error(node.value.span, f"'{node.value.span.text}' is not a buffer, so it cannot be indexed")
        buf = base.buffer
        if len(node.indices) != len(buf.shape):
            rank, n = len(buf.shape), len(node.indices)
            hint = f"'{buf.name}' is a scalar variable: use it without an index" if buf.scope == "var" else None
            given = "1 index was" if n == 1 else f"{n} indices were"
            raise error(
                node.span, f"'{buf.name}' has {rank} dimension{'s' if rank != 1 else ''} but {given} given", hint=hint
            )
        items: list[tir.Expr | SliceVal] = []
        for axis, item in enumerate(node.indices):
            if isinstance(item, S.Slice):
                lo = (
                    self.index(item.lo, buf, axis, scope, kx, False) if item.lo else fold.imm(0, DType.int32, item.span)
                )
                hi = self.index(item.hi, buf, axis, scope, kx, False) if item.hi else buf.shape[axis]
                items.append(SliceVal(lo, hi, item.span))
            else:
                items.append(self.index(item, buf, axis, scope, kx, True))
        return SubVal(buf, tuple(items), node.span)

    def tuple_item(self, base: TupleVal, node: S.Subscript, scope: Scope, kx: Any) -> Value:
        """`acc.shape[1]`: a constant index (negative counts from the end) into a tuple."""
        n = len(base.items)
        if len(node.indices) != 1 or isinstance(node.indices[0], S.Slice):
            raise error(node.span, "a tuple takes one index", hint=f"write {node.value.span.text}[0] .. [{n - 1}]")
        item = node.indices[0]
        c = fold.const(self.scalar(item, scope, kx).expr)
        if not isinstance(c, int) or isinstance(c, bool):
            raise error(item.span, "the index of a tuple must be a compile-time integer constant")
        if not -n <= c < n:
            raise error(item.span, f"index {c} is out of range for a tuple of {n} item{'s' if n != 1 else ''}")
        return base.items[c]

    def shape_items(self, node: S.Expr, scope: Scope, kx: Any) -> list[tuple[Value, Span]]:
        """The dimensions of a shape argument: a tuple `(a, b)`, one int, or a buffer's `.shape`."""
        if isinstance(node, S.Tuple):
            return [(self.ev_value(i, scope, kx), i.span) for i in node.items]
        v = self.ev_value(node, scope, kx)
        if isinstance(v, TupleVal):
            return [(item, node.span) for item in v.items]
        return [(v, node.span)]

    def index(self, node: S.Expr, buf: tir.Buffer, axis: int, scope: Scope, kx: Any, element: bool) -> tir.Expr:
        v = self.scalar(node, scope, kx)
        if not v.dtype.is_int:
            raise error(node.span, f"an index must be an integer, not {v.dtype.tile_name}")
        expr = fold.cast(v, DType.int32, node.span) if v.weak else v.expr
        c, size = fold.const(expr), fold.const(buf.shape[axis])
        if isinstance(c, int) and (c < 0 or (isinstance(size, int) and (c >= size if element else c > size))):
            shown = size if size is not None else getattr(buf.shape[axis], "name", "?")
            raise error(node.span, f"index {c} is out of bounds for dimension {axis} of '{buf.name}' (size {shown})")
        return expr
