"""Tile operands and the shape / scope checks of tile ops (used by elaborate.py).

An operand is a whole buffer, a region with slices, or an origin `A[i, j]`
whose extents come from the other operand (right-aligned, padded with 1s):

    copy(A[by * 128, k * 32], A_shared)     A_shared: float16[128, 32]
      -> Copy(Region(A, (by * 128, k * 32), (128, 32)), Region(A_shared, (0, 0), (128, 32)))

Shapes are compared with extent-1 dimensions dropped, so a (1, 64, 32)
region of a 3-D tensor copies into a (64, 32) tile.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tilec import tir
from tilec.diagnostics import error
from tilec.dtypes import DType
from tilec.fold import Const, Val, const, convert, difference, imm, limit
from tilec.source import NO_SPAN, Span
from tilec.tir_print import expr_text as tir_text
from tilec.values import BufVal, SliceVal, SubVal, Value

SCOPE_WORDS = {
    "global": "a global tensor",
    "shared": "shared memory",
    "fragment": "a fragment",
    "local": "a local buffer",
    "var": "a scalar variable",
}


@dataclass(frozen=True)
class Operand:
    buffer: tir.Buffer
    starts: tuple[tir.Expr, ...]
    extents: tuple[int, ...] | None  # None: an origin, extents still to come
    span: Span

    @property
    def name(self) -> str:
        return self.buffer.name


DIM_OPS = ("+", "-", "*", "//", "%")


def is_dim_expr(e: tir.Expr) -> bool:
    """Whether `e` is an int32 expression the launcher's callers can compute from
    the symbolic dimensions (tilec.runtime checks it): dimensions, int
    constants, + - * // %, min and max."""
    if e.dtype != DType.int32:
        return False
    match e:
        case tir.IntImm():
            return True
        case tir.Var():
            return e.kind == "dim"
        case tir.BinOp(op, a, b) if op in DIM_OPS:
            return is_dim_expr(a) and is_dim_expr(b)
        case tir.Call("min" | "max", args):
            return all(is_dim_expr(x) for x in args)
    return False


def fits(view: tuple[tir.Expr, ...], tensor: tuple[tir.Expr, ...]) -> bool:
    """Whether a shape provably has no more elements than another: the same symbolic factors (once
    products are taken apart), and a constant factor no larger."""
    (view_factors, view_const), (factors, const_) = _factors(view), _factors(tensor)
    return sorted(view_factors) == sorted(factors) and view_const <= const_


def _factors(shape: tuple[tir.Expr, ...]) -> tuple[list[str], int]:
    """The symbolic factors of a shape's element count (as text) and the product of its constant ones."""
    symbolic: list[str] = []
    constant = 1
    pending = list(shape)
    while pending:
        match pending.pop():
            case tir.BinOp("*", a, b):
                pending += [a, b]
            case tir.IntImm(value):
                constant *= value
            case e:
                symbolic.append(tir_text(e))
    return symbolic, constant


def dims_text(shape: tuple[tir.Expr, ...]) -> str:
    return "(" + ", ".join(tir_text(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def fmt(shape: tuple[int, ...]) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def squeeze(shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(d for d in shape if d != 1)


def operand(v: Value, span: Span, op: str, role: str) -> Operand:
    if isinstance(v, BufVal):
        return _whole(v.buffer, span, op)
    if isinstance(v, SubVal):
        if v.buffer.scope == "var":
            raise error(span, f"'{v.buffer.name}' is a scalar variable, not a tile")
        if v.is_element:
            return Operand(v.buffer, tuple(v.items), None, span)  # type: ignore[arg-type]  # an element: no SliceVal among the items
        return _region(v, span)
    raise error(
        span,
        f"{op}() needs a buffer or a region for '{role}'",
        hint="pass a buffer (A_shared), a region (A[0:64, k]) or an origin (A[i, j])",
    )


def _whole(buf: tir.Buffer, span: Span, op: str) -> Operand:
    if buf.scope == "var":
        raise error(span, f"'{buf.name}' is a scalar variable, not a tile")
    dims = [const(d) for d in buf.shape]
    if any(not isinstance(d, int) for d in dims):
        raise error(
            span,
            f"'{buf.name}' has a symbolic shape, so {op}() cannot use all of it",
            hint=f"say which tile: an origin like {buf.name}[i, j] or a region with constant extents",
        )
    zeros = tuple(tir.IntImm(0, DType.int32, span) for _ in dims)
    return Operand(buf, zeros, tuple(dims), span)  # type: ignore[arg-type]  # all ints (checked above)


def _region(v: SubVal, span: Span) -> Operand:
    starts: list[tir.Expr] = []
    extents: list[int] = []
    for axis, item in enumerate(v.items):
        if isinstance(item, SliceVal):
            extent = difference(item.hi, item.lo)
            if extent is None:
                raise error(
                    item.span,
                    "the extent of this slice is not a compile-time constant",
                    hint="write it as lo:lo + TILE with a constant TILE",
                )
            if extent <= 0:
                raise error(item.span, f"this slice is empty (extent {extent})")
            starts.append(item.lo)
            extents.append(extent)
            _check_bounds(v.buffer, axis, item.lo, extent, item.span)
        else:
            starts.append(item)
            extents.append(1)
    return Operand(v.buffer, tuple(starts), tuple(extents), span)


def _check_bounds(buf: tir.Buffer, axis: int, start: tir.Expr, extent: int, span: Span) -> None:
    if buf.scope == "global":
        return  # tiles may run past the edge of a tensor: the lowering guards them
    lo, size = const(start), const(buf.shape[axis])
    if isinstance(lo, int) and isinstance(size, int) and (lo < 0 or lo + extent > size):
        raise error(
            span, f"region {lo}:{lo + extent} is out of bounds for dimension {axis} of '{buf.name}' (size {size})"
        )


def with_extents(o: Operand, other: Operand, op: str) -> Operand:
    """Give an origin the extents of `other` (right-aligned, leading 1s)."""
    if o.extents is not None:
        return o
    assert other.extents is not None
    ext = list(other.extents)
    rank = len(o.starts)
    while len(ext) > rank and ext[0] == 1:
        ext.pop(0)
    if len(ext) > rank:
        raise error(
            o.span,
            f"cannot take a {len(ext)}-D tile {fmt(tuple(ext))} at an origin of {rank}-D '{o.name}'",
            hint=f"{op}() needs operands of compatible rank",
        )
    ext = [1] * (rank - len(ext)) + ext
    for axis, (start, extent) in enumerate(zip(o.starts, ext)):
        _check_bounds(o.buffer, axis, start, extent, o.span)
    return Operand(o.buffer, o.starts, tuple(ext), o.span)


def region(o: Operand) -> tir.Region:
    assert o.extents is not None
    return tir.Region(o.buffer, o.starts, tuple(tir.IntImm(e, DType.int32, o.span) for e in o.extents), o.span)


def _need_extents(o: Operand, op: str, role: str) -> None:
    if o.extents is None:
        raise error(
            o.span,
            f"{op}() needs the shape of '{role}': give a whole buffer or a region with slices",
            hint=f"e.g. {o.name} or {o.name}[i, 0:64]",
        )


def _need_whole(o: Operand, op: str, role: str) -> None:
    """A fragment operand that must be the whole fragment (reductions fold every element)."""
    assert o.extents is not None
    starts_zero = all(isinstance(s, tir.IntImm) and s.value == 0 for s in o.starts)
    if not starts_zero or squeeze(o.extents) != squeeze(o.buffer.const_shape):
        raise error(
            o.span,
            f"{op}() {role} '{o.name}' is part of a fragment; {op} folds whole fragments",
            hint=f"write the part into a fragment of its own in a Parallel loop, then {op} that",
        )


def _need_scope(o: Operand, scopes: tuple[str, ...], op: str, role: str, hint: str | None = None) -> None:
    if o.buffer.scope not in scopes:
        words = [SCOPE_WORDS[s] for s in scopes]
        wanted = words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]
        raise error(o.span, f"{op}() {role} '{o.name}' must be {wanted}, not {SCOPE_WORDS[o.buffer.scope]}", hint=hint)


# ---------------------------------------------------------------- tile ops


@dataclass(frozen=True)
class Pad:
    """A copy's `pad=` argument: its constant value, and where it was written."""

    value: Const
    span: Span


def copy(src: Operand, dst: Operand, span: Span, pad: Pad | None = None) -> tir.Copy:
    if src.extents is None and dst.extents is None:
        raise error(
            span,
            "copy() needs the shape of at least one operand, but both are single elements",
            hint="give a whole buffer or a region with slices on one side",
        )
    src = with_extents(src, dst, "copy")
    dst = with_extents(dst, src, "copy")
    assert src.extents is not None and dst.extents is not None
    if squeeze(src.extents) != squeeze(dst.extents):
        raise error(span, f"copy() shapes differ: the source is {fmt(src.extents)}, the destination {fmt(dst.extents)}")
    pad_value = None if pad is None else _pad_value(src, pad)
    return tir.Copy(region(src), region(dst), pad=pad_value, span=span)


def _pad_value(src: Operand, pad: Pad) -> tir.Expr:
    """The pad of a copy from `src` as a constant of the source's dtype; a source that is not a
    tensor, or a value the dtype cannot hold, is an error."""
    buf = src.buffer
    if buf.scope != "global":
        raise error(
            pad.span,
            f"copy() pads reads outside a global tensor, but its source '{src.name}' is {SCOPE_WORDS[buf.scope]}",
            hint="every element of an on-chip buffer is in range: drop pad=",
        )
    problem = _pad_problem(pad.value, buf.dtype)
    if problem is not None:
        name = buf.dtype.tile_name
        hint = f"min_value({name}) and max_value({name}) are its limits" if buf.dtype.is_int else None
        raise error(pad.span, f"copy() pad {pad.value} {problem} ('{src.name}' is {name})", hint=hint)
    return imm(pad.value, buf.dtype, pad.span)


def _pad_problem(value: Const, dtype: DType) -> str | None:
    """Why `value` cannot be a pad of `dtype` elements, or None."""
    if dtype == DType.bool:
        return None if isinstance(value, bool) else "is not True or False"
    if isinstance(value, bool):
        return "is a bool, not a number"
    if dtype.is_float:
        top = const(limit("max_value", dtype, NO_SPAN).expr)
        assert isinstance(top, float)
        return "does not fit" if math.isfinite(value) and abs(value) > top else None
    if isinstance(value, float) and not value.is_integer():
        return "is not an integer"
    low, high = (const(limit(f, dtype, NO_SPAN).expr) for f in ("min_value", "max_value"))
    assert isinstance(low, int) and isinstance(high, int)
    return None if low <= value <= high else "does not fit"


def _matrix(o: Operand, op: str, role: str) -> tuple[int, int]:
    assert o.extents is not None
    ext = list(o.extents)
    while len(ext) > 2 and ext[0] == 1:
        ext.pop(0)
    if len(ext) != 2:
        raise error(o.span, f"{op}() operand {role} '{o.name}' must be 2-D, but its shape is {fmt(o.extents)}")
    return ext[0], ext[1]


def gemm(a: Operand, b: Operand, c: Operand, flags: tuple[bool, bool, str, bool], span: Span) -> tir.Gemm:
    transpose_a, transpose_b, policy, clear_accum = flags
    for o, role in ((a, "A"), (b, "B"), (c, "C")):
        _need_extents(o, "gemm", role)
    _need_scope(
        c,
        ("fragment",),
        "gemm",
        "accumulator C",
        hint="allocate the accumulator with alloc_fragment and copy it out afterwards",
    )
    for o, role in ((a, "A"), (b, "B")):
        _need_scope(
            o, ("shared", "fragment"), "gemm", f"operand {role}", hint="copy it into an alloc_shared tile first"
        )
    if b.buffer.scope == "fragment":  # no backend reads B from registers (their lowerings say the same)
        raise error(b.span, "gemm's B operand must be in shared memory", hint="copy it to an alloc_shared buffer first")
    m, k = _matrix(a, "gemm", "A")
    if transpose_a:
        m, k = k, m
    kb, n = _matrix(b, "gemm", "B")
    if transpose_b:
        kb, n = n, kb
    mc, nc = _matrix(c, "gemm", "C")
    if c.buffer.dtype.is_fp8:
        raise error(
            c.span,
            f"gemm() accumulator '{c.name}' is {c.buffer.dtype.tile_name}: fp8 cannot accumulate (no arithmetic, "
            "and no matrix instruction accumulates in it)",
            hint="accumulate in a float32 fragment; copy() converts it to fp8 on the way out",
        )
    if k != kb:
        hint = "if B is stored (N, K), pass transpose_B=True" if not transpose_b else None
        raise error(span, f"gemm() inner dimensions differ: A gives K = {k}, B gives K = {kb}", hint=hint)
    if (m, n) != (mc, nc):
        raise error(span, f"gemm() accumulator shape differs: A @ B is ({m}, {n}) but C is ({mc}, {nc})")
    return tir.Gemm(region(a), region(b), region(c), transpose_a, transpose_b, policy, clear_accum, span=span)  # type: ignore[arg-type]  # policy: checked by the caller


def arg_reduce(kind: str, src: Operand, dst: Operand, dim: int, span: Span) -> tir.Reduce:
    """reduce_argmax / reduce_argmin: `reduce`'s checks, and an index needs an int32 destination
    and a source of at most 32 bits (a value and its index share a cross-warp scratch slot)."""
    op = f"reduce_{kind}"
    if dst.buffer.dtype != DType.int32:
        raise error(
            dst.span,
            f"{op}() writes indices: '{dst.name}' must be int32, not {dst.buffer.dtype.tile_name}",
            hint=f"allocate it with alloc_fragment(..., int32); values= takes a {src.buffer.dtype.tile_name} "
            "fragment for the values",
        )
    if src.buffer.dtype.bits > DType.int32.bits:
        raise error(src.span, f"{op}() of {src.buffer.dtype.tile_name} values is not supported (32 bits at most)")
    if src.buffer.dtype == DType.bool:
        raise error(src.span, f"{op}() needs numbers; '{src.name}' is bool")
    return reduce(kind, src, dst, dim, True, span)


def reduce(kind: str, src: Operand, dst: Operand, dim: int, clear: bool, span: Span) -> tir.Reduce:
    op = f"reduce_{kind}"
    _need_extents(src, op, "src")
    _need_extents(dst, op, "dst")
    hint = "copy it into an alloc_fragment tile first"
    _need_scope(src, ("fragment",), op, "source", hint)
    _need_scope(dst, ("fragment",), op, "destination", "allocate it with alloc_fragment")
    _need_whole(src, op, "source")
    _need_whole(dst, op, "destination")
    assert src.extents is not None and dst.extents is not None
    if kind.startswith("bit") and not src.buffer.dtype.is_int:
        raise error(
            src.span,
            f"{op}() needs an integer fragment; '{src.name}' is {src.buffer.dtype.tile_name}",
            hint="bitwise reductions combine the bits of integers: reduce_max and reduce_sum take floats",
        )
    axis = _axis(dim, len(src.extents), op, span)
    expected = src.extents[:axis] + src.extents[axis + 1 :]
    if squeeze(expected) != squeeze(dst.extents):
        raise error(
            span,
            f"{op}() output shape is {fmt(dst.extents)}, but reducing {fmt(src.extents)} along "
            f"dim {axis} gives {fmt(expected)}",
        )
    return tir.Reduce(kind, region(src), region(dst), axis, clear, span)  # type: ignore[arg-type]  # kind: from an op name


def _axis(dim: int, rank: int, op: str, span: Span) -> int:
    axis = dim + rank if dim < 0 else dim
    if not 0 <= axis < rank:
        raise error(span, f"{op}() dim {dim} is out of range for a {rank}-D source")
    return axis


def cumsum(op: str, src: Operand, dst: Operand, dim: int, reverse: bool, span: Span) -> tir.CumSum:
    """`cumsum`, `cummax` or `cummin` (`op`: "sum", "max", "min") of a shared tile or a fragment along `dim`."""
    name = f"cum{op}"
    _need_extents(src, name, "src")
    dst = with_extents(dst, src, name)
    hint = "scan a fragment or a tile in shared memory"
    _need_scope(src, ("shared", "fragment"), name, "source", hint)
    _need_scope(dst, ("shared", "fragment"), name, "destination", hint)
    assert src.extents is not None and dst.extents is not None
    axis = _axis(dim, len(src.extents), name, span)
    if squeeze(src.extents) != squeeze(dst.extents):
        raise error(
            span, f"{name}() shapes differ: the source is {fmt(src.extents)}, the destination {fmt(dst.extents)}"
        )
    return tir.CumSum(region(src), region(dst), axis, reverse, span, op)  # type: ignore[arg-type]  # op: from an op name


def fill(dst: Operand, value: Val, span: Span) -> tir.Fill:
    _need_extents(dst, "fill", "buf")
    _need_scope(
        dst,
        ("fragment", "shared", "local"),
        "fill",
        "target",
        hint="fill a tile in shared memory or a fragment, then copy it out",
    )
    return tir.Fill(region(dst), convert(value, dst.buffer.dtype, span), span)


ATOMIC_SCOPES = ("global", "shared")  # where atomic_add/max/min may write


def atomic_tile(op: str, dst: Operand, src: Operand, span: Span) -> tir.Atomic:
    """`atomic_{op}(dst, src)` of a whole tile, element by element."""
    name = f"atomic_{op}"
    _need_extents(src, name, "value")
    _need_scope(dst, ATOMIC_SCOPES, name, "destination")
    dst = with_extents(dst, src, name)
    assert src.extents is not None and dst.extents is not None
    if squeeze(src.extents) != squeeze(dst.extents):
        raise error(
            span, f"{name}() shapes differ: the destination is {fmt(dst.extents)}, the value {fmt(src.extents)}"
        )
    return tir.Atomic(region(dst), region(src), None, span, op)  # type: ignore[arg-type]  # op: from an op name


def atomic_element(op: str, dst: SubVal, value: Val, span: Span) -> tir.Atomic:
    """`atomic_{op}(dst, value)` of one element by one thread."""
    if dst.buffer.scope not in ATOMIC_SCOPES:
        raise error(
            dst.span,
            f"atomic_{op}() destination '{dst.buffer.name}' must be a global tensor or shared memory, not "
            f"{SCOPE_WORDS[dst.buffer.scope]}",
        )
    ones = tuple(tir.IntImm(1, DType.int32, span) for _ in dst.items)
    reg = tir.Region(dst.buffer, tuple(dst.items), ones, dst.span)  # type: ignore[arg-type]  # the caller checks it is an element
    return tir.Atomic(reg, None, convert(value, dst.buffer.dtype, span), span, op)  # type: ignore[arg-type]  # op: from an op name
