"""Tile IR as text (`tilec build --emit tir`) and its verifier.

kernel gemm(A: float16[M, K] global, B: float16[K, N] global, C: float16[M, N] global)
  grid (ceildiv(N, 128), ceildiv(M, 128)) threads 128 as (bx, by)
  alloc A_shared: float16[128, 32] shared stages=3
  fill C_local[0:128, 0:128] = 0.0f
  for k in pipelined(0, (K + 31) / 32, stages=3):
    copy A[by * 128 : +128, k * 32 : +32] -> A_shared[0 : +128, 0 : +32] (pipeline=producer)

The passes' decisions on the nodes print after them (`stages=`, `(pipeline=...)`, a
gemm's instruction and flags, a Parallel loop's `layout threads [...] regs [...]`).
"""

from __future__ import annotations

import math
from typing import assert_never

from tilec import tir, tir_walk
from tilec.targets import ARCHES, TARGETS, Target

# ---------------------------------------------------------------- expressions, as .tile writes them

# binding strength of each operator (higher binds tighter), as in the .tile language (Python's)
_PREC: dict[str, int] = {
    "or": 1, "and": 2,
    "==": 4, "!=": 4, "<": 4, "<=": 4, ">": 4, ">=": 4,
    "|": 5, "^": 6, "&": 7, "<<": 8, ">>": 8,
    "+": 9, "-": 9, "*": 10, "/": 10, "//": 10, "%": 10,
}  # fmt: skip
_NOT, _COMPARE, _UNARY, _POWER, _PRIMARY = 3, 4, 11, 12, 13


def expr_text(e: tir.Expr) -> str:
    """A Tile IR expression in the .tile language's spelling:

    exp2(m[i] * 0.5 - s[i, j])      if_then_else(k < n, a, 0.0)      cast(x, float16)
    """
    return _expr(e)[0]


def _expr(e: tir.Expr) -> tuple[str, int]:
    """(text, binding strength of its outermost operator)."""
    match e:
        case tir.IntImm(v):
            return str(v), _PRIMARY if v >= 0 else _UNARY
        case tir.FloatImm(v, dtype) if math.isinf(v):
            return f"{'-' if v < 0 else ''}infinity({dtype.tile_name})", _PRIMARY if v > 0 else _UNARY
        case tir.FloatImm(v):
            return repr(float(v)), _PRIMARY if math.copysign(1.0, v) > 0 else _UNARY  # -0.0 too
        case tir.BoolImm(v):
            return str(bool(v)), _PRIMARY
        case tir.Var(name):
            return name, _PRIMARY
        case tir.BinOp("**", a, b):
            # right-associative and tighter than unary minus on its left
            return f"{_paren(a, _POWER + 1)} ** {_paren(b, _UNARY)}", _POWER
        case tir.BinOp(op, a, b) if _PREC[op] == _COMPARE:
            # `a < b == c` would read as a chain (a < b and b == c): no comparison operand bare
            return f"{_paren(a, _COMPARE + 1)} {op} {_paren(b, _COMPARE + 1)}", _COMPARE
        case tir.BinOp(op, a, b):
            prec = _PREC[op]
            return f"{_paren(a, prec)} {op} {_paren(b, prec + 1)}", prec  # left-associative
        case tir.UnaryOp("not", a):
            return f"not {_paren(a, _NOT)}", _NOT
        case tir.UnaryOp(op, a):
            return f"{op}{_paren(a, _UNARY)}", _UNARY
        case tir.Select(cond, a, b):
            return f"if_then_else({expr_text(cond)}, {expr_text(a)}, {expr_text(b)})", _PRIMARY
        case tir.Cast(value, dtype):
            return f"cast({expr_text(value)}, {dtype.tile_name})", _PRIMARY
        case tir.Call(func, args):
            return f"{func}({', '.join(expr_text(x) for x in args)})", _PRIMARY
        case tir.Load(buf, idx):
            return f"{buf.name}[{', '.join(expr_text(i) for i in idx)}]" if idx else buf.name, _PRIMARY
        case _:
            assert_never(e)


def _paren(e: tir.Expr, at_least: int) -> str:
    text, prec = _expr(e)
    return text if prec >= at_least else f"({text})"


def _shape(buf: tir.Buffer) -> str:
    text = f"{buf.dtype.tile_name}[{', '.join(expr_text(d) for d in buf.shape)}] {buf.scope}"
    if buf.strides is None:
        return text
    return f"{text} strides ({', '.join(expr_text(d) for d in buf.strides)})"


def _region(r: tir.Region) -> str:
    parts = [f"{expr_text(s)} : +{expr_text(e)}" for s, e in zip(r.starts, r.extents)]
    return f"{r.buffer.name}[{', '.join(parts)}]"


def _stmt(s: tir.Stmt, depth: int) -> list[str]:
    pad = "  " * depth
    match s:
        case tir.Alloc(buf, init, stages):
            tail = f" = {expr_text(init)}" if init is not None else ""
            tail += f" stages={stages}" if stages > 1 else ""
            return [f"{pad}alloc {buf.name}: {_shape(buf)}{tail}"]
        case tir.Let(var, value):
            return [f"{pad}let {var.name}: {var.dtype.tile_name} = {expr_text(value)}"]
        case tir.Store(buf, idx, value):
            sub = f"[{', '.join(expr_text(i) for i in idx)}]" if idx else ""
            return [f"{pad}{buf.name}{sub} = {expr_text(value)}"]
        case tir.Copy(src, dst, pipeline, pad_value, guard):
            tail = f" pad={expr_text(pad_value)}" if pad_value is not None else ""
            tail += f" when {expr_text(guard)}" if guard is not None else ""
            tail += f" (pipeline={pipeline})" if pipeline is not None else ""
            return [f"{pad}copy {_region(src)} -> {_region(dst)}{tail}"]
        case tir.Gemm(a, b, c, ta, tb, policy, clear, instruction, a_registers, ahead, then_issue, chained):
            flags = f"transpose_A={ta}, transpose_B={tb}, policy={policy}, clear_accum={clear}"
            flags += f", instruction={instruction}" if instruction is not None else ""
            flags += ", a_from_registers=True" if a_registers else ""
            flags += ", fragments_ahead=True" if ahead else ""
            flags += f", then_issue=[{', '.join(b.name for b in then_issue)}]" if then_issue else ""
            flags += ", then_accumulates=True" if chained else ""
            return [f"{pad}gemm {_region(a)}, {_region(b)} -> {_region(c)} ({flags})"]
        case tir.Fill(dst, value):
            return [f"{pad}fill {_region(dst)} = {expr_text(value)}"]
        case tir.Reduce(kind, src, dst, dim, clear):
            return [f"{pad}reduce_{kind} {_region(src)} -> {_region(dst)} dim={dim} clear={clear}"]
        case tir.CumSum(src, dst, dim, reverse, _, op):
            return [f"{pad}cum{op} {_region(src)} -> {_region(dst)} dim={dim} reverse={reverse}"]
        case tir.Atomic(dst, src, value, _, op):
            what = _region(src) if src is not None else expr_text(value) if value is not None else ""
            sign = {"add": "+=", "max": "max=", "min": "min="}[op]
            return [f"{pad}atomic_{op} {_region(dst)} {sign} {what}"]
        case tir.For(var, start, stop, step, kind, body, stages, schedule=schedule):
            extra = f", stages={stages}" if kind == "pipelined" else ""
            extra += _schedule(schedule) if schedule is not None else ""
            head = f"{pad}for {var.name} in {kind}({expr_text(start)}, {expr_text(stop)}, {expr_text(step)}{extra}):"
            return [head] + _block(body, depth + 1)
        case tir.While(cond, body):
            return [f"{pad}while {expr_text(cond)}:"] + _block(body, depth + 1)
        case tir.Break():
            return [f"{pad}break"]
        case tir.SyncThreads():
            return [f"{pad}sync_threads()"]
        case tir.Parallel(vars, extents, body, layout):
            names = ", ".join(v.name for v in vars)
            placed = f" layout {layout.describe()}" if layout is not None else ""
            return [f"{pad}for {names} in parallel({', '.join(map(str, extents))}){placed}:"] + _block(body, depth + 1)
        case tir.If(cond, then, orelse):
            out = [f"{pad}if {expr_text(cond)}:"] + _block(then, depth + 1)
            if orelse:
                out += [f"{pad}else:"] + _block(orelse, depth + 1)
            return out
        case tir.Print(value, msg):
            what = _region(value) if isinstance(value, tir.Region) else expr_text(value)
            return [f'{pad}print {what} "{msg}"']
        case tir.DeviceAssert(cond, msg):
            return [f'{pad}device_assert {expr_text(cond)} "{msg}"']
        case tir.UseSwizzle(panel, order):
            return [f"{pad}use_swizzle {panel} {order}"]
        case tir.AnnotateLayout(buf, layout):
            return [f"{pad}annotate_layout {buf.name} {layout}"]
        case _:
            assert_never(s)


def _block(stmts: tuple[tir.Stmt, ...], depth: int) -> list[str]:
    out: list[str] = []
    for s in stmts:
        out += _stmt(s, depth)
    return out or ["  " * depth + "pass"]


def print_kernel(k: tir.Kernel) -> str:
    args = [f"{t.name}: {_shape(t)}" for t in k.tensors] + [f"{v.name}: {v.dtype.tile_name}" for v in k.scalars]
    lines = [f"kernel {k.name}({', '.join(args)})"]
    if k.dims:
        lines.append(f"  dims {', '.join(v.name for v in k.dims)}")
    lines += [f"  view {v.name}: {_shape(v)} of {v.view_of.name}" for v in k.views if v.view_of is not None]
    grid = ", ".join(expr_text(g) for g in k.grid)
    written = f" (written {k.threads_written})" if k.threads_written else ""
    lines.append(f"  grid ({grid}) threads {k.threads}{written} as ({', '.join(v.name for v in k.block_vars)})")
    return "\n".join(lines + _block(k.body, 1)) + "\n"


def print_program(p: tir.Program) -> str:
    return "\n".join(print_kernel(k) for k in p.kernels)


# ---------------------------------------------------------------- verifier


class VerifyError(Exception):
    pass


def _schedule(s: tir.Schedule) -> str:
    units = ", ".join("[" + ", ".join(map(str, u)) + "]" for u in s.units)
    text = f", units=[{units}], stage={list(s.stage)}, order={list(s.order)}"
    if s.ahead:
        text += f", ahead={list(s.ahead)}, pending={s.pending}"
    text += ", as_inferred=True" if s.as_inferred else ""
    text += ", not_warp_roles=True" if s.not_warp_roles else ""
    return text + (", honoured=True" if s.honoured else "")


def verify(p: tir.Program, target: Target | None = None) -> None:
    """Structural invariants every pass must keep (run after each pass in tests); the block
    size is checked against `target` (the first arch's record by default)."""
    t = target or TARGETS[ARCHES[0]]
    for k in p.kernels:
        if not t.block_size_ok(k.threads):
            raise VerifyError(f"{k.name}: threads {k.threads}")
        if not 1 <= len(k.grid) <= 3 or len(k.block_vars) != len(k.grid):
            raise VerifyError(f"{k.name}: grid/block vars mismatch")
        for tensor in k.tensors:
            if tensor.strides is not None and len(tensor.strides) != len(tensor.shape):
                raise VerifyError(f"{k.name}: tensor {tensor.name} has strides for another rank")
        for view in k.views:
            if view.view_of not in k.tensors or view.strides is not None:
                raise VerifyError(f"{k.name}: view {view.name} is not a row-major view of a tensor parameter")
        allocated: set[tir.Buffer] = {*k.tensors, *k.views}
        _verify_block(k.body, allocated, k.name)


def _verify_block(stmts: tuple[tir.Stmt, ...], allocated: set[tir.Buffer], where: str) -> None:
    for s in tir_walk.stmts(stmts):
        match s:
            case tir.Alloc(buf):
                if buf.scope != "global":
                    buf.const_shape  # noqa: B018 - asserts constant
                if buf.strides is not None:
                    raise VerifyError(f"{where}: allocation {buf.name} has strides")
                allocated.add(buf)
            case tir.Copy(src, dst):
                _check_region(src, allocated, where)
                _check_region(dst, allocated, where)
            case tir.Gemm(a, b, c):
                for r in (a, b, c):
                    _check_region(r, allocated, where)
                if c.buffer.scope != "fragment":
                    raise VerifyError(f"{where}: gemm accumulator {c.buffer.name} is not a fragment")
            case tir.Reduce(src=src, dst=dst) | tir.CumSum(src=src, dst=dst):
                _check_region(src, allocated, where)
                _check_region(dst, allocated, where)
            case tir.Fill(dst=dst):
                _check_region(dst, allocated, where)
            case tir.Store(buf, idx):
                if buf not in allocated:
                    raise VerifyError(f"{where}: store to unallocated {buf.name}")
                if len(idx) != len(buf.shape):
                    raise VerifyError(f"{where}: store to {buf.name} has {len(idx)} indices")
            case tir.For(body=body, schedule=schedule) if schedule is not None:
                _verify_schedule(schedule, body, where)
            case (
                tir.Let()
                | tir.Atomic()
                | tir.For()
                | tir.While()
                | tir.Break()
                | tir.SyncThreads()
                | tir.Parallel()
                | tir.If()
                | tir.Print()
                | tir.DeviceAssert()
                | tir.UseSwizzle()
                | tir.AnnotateLayout()
            ):
                pass  # nothing checked yet (their bodies are walked)
            case _:
                assert_never(s)


def _verify_schedule(s: tir.Schedule, body: tuple[tir.Stmt, ...], where: str) -> None:
    """A schedule's units are runs of the body's statements, none a let, one stage and order each."""
    positions = [i for u in s.units for i in u]
    if positions != sorted(set(positions)) or any(not 0 <= i < len(body) for i in positions):
        raise VerifyError(f"{where}: schedule units {s.units} do not fit a body of {len(body)} statements")
    if any(isinstance(body[i], tir.Let) for i in positions):
        raise VerifyError(f"{where}: a schedule unit holds a let")
    if not len(s.units) == len(s.stage) == len(s.order) or (s.ahead and len(s.ahead) != len(s.units)):
        raise VerifyError(f"{where}: schedule lists of different lengths")


def _check_region(r: tir.Region, allocated: set[tir.Buffer], where: str) -> None:
    if r.buffer not in allocated:
        raise VerifyError(f"{where}: {r.buffer.name} used before allocation")
    if not (len(r.starts) == len(r.extents) == len(r.buffer.shape)):
        raise VerifyError(f"{where}: region of {r.buffer.name} has the wrong rank")
