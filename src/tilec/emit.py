"""Print Thread IR as C++ through a target's Spelling: device kernels, launchers and the ABI line.

Parentheses come from a precedence table, never from guessing:

    BinOp("*", BinOp("+", a, b), c)  ->  (a + b) * c
    BinOp("+", a, BinOp("*", b, c))  ->  a + b * c

Every word that differs by target comes from its record (targets.py; the CUDA
words are in backends/cuda/spelling.py), never from this module:

    T.Builtin("thread_index")   ->  spelling.builtins["thread_index"]
    T.Barrier("block")          ->  spelling.barriers["block"]
    T.Intrin("shfl_xor", ...)   ->  spelling.intrinsics["shfl_xor"]

(backends/cuda/spelling.py shows what each becomes in CUDA.)

An intrinsic name the record does not spell (an inline helper, a C function)
is printed as written. Layout is left to clang-format (format.py); this module
only decides words and nesting. Output depends on nothing but the input (no
set or hash order).
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from typing import assert_never

from tilec import __version__, tir, tir_walk
from tilec import thread_ir as T
from tilec.dtypes import DTYPES, DType
from tilec.source import Span
from tilec.targets import ARCHES, TARGETS, Spelling, Target

# For callers without a target (Tile IR printing, lowering's expression keys).
_DEFAULT = TARGETS[ARCHES[0]].spelling

# C++ precedence: larger binds tighter.
_PREC = {
    "||": 4,
    "&&": 5,
    "|": 6,
    "^": 7,
    "&": 8,
    "==": 9,
    "!=": 9,
    "<": 10,
    "<=": 10,
    ">": 10,
    ">=": 10,
    "<<": 11,
    ">>": 11,
    "+": 12,
    "-": 12,
    "*": 13,
    "/": 13,
    "%": 13,
}
_UNARY = 15
_PRIMARY = 16
_C_OP = {"and": "&&", "or": "||", "//": "/"}

_MATH_F32 = {
    "exp": "expf",
    "exp2": "exp2f",
    "log": "logf",
    "log2": "log2f",
    "sqrt": "sqrtf",
    "rsqrt": "rsqrtf",
    "tanh": "tanhf",
    "erf": "erff",
    "floor": "floorf",
    "ceil": "ceilf",
    "pow": "powf",
    "abs": "fabsf",
    "max": "fmaxf",
    "min": "fminf",
}
_MATH_F64 = {
    "exp": "exp",
    "exp2": "exp2",
    "log": "log",
    "log2": "log2",
    "sqrt": "sqrt",
    "rsqrt": "rsqrt",
    "tanh": "tanh",
    "erf": "erf",
    "floor": "floor",
    "ceil": "ceil",
    "pow": "pow",
    "abs": "fabs",
    "max": "fmax",
    "min": "fmin",
}


def expr_text(e: object, sp: Spelling | None = None) -> str:
    return _expr(e, sp or _DEFAULT)[0]


def _paren(e: object, prec: int, sp: Spelling) -> str:
    text, p = _expr(e, sp)
    return f"({text})" if p < prec else text


def ctype(d: DType, sp: Spelling) -> str:
    """The C++ name of element type `d` in the target's language (dtypes.py's, unless it spells its own)."""
    return sp.type_names.get(d, d.cname)


def _float_literal(v: float, d: DType, sp: Spelling) -> str:
    if math.isinf(v):
        text = "INFINITY" if v > 0 else "-INFINITY"
        return text if d == DType.float32 else f"static_cast<{ctype(d, sp)}>({text})"
    text = repr(float(v))
    if "e" not in text and "." not in text:
        text += ".0"
    return text + "f" if d != DType.float64 else text


def _int_literal(v: int, d: DType) -> str:
    suffix = {DType.int64: "LL", DType.uint64: "ULL", DType.uint32: "u"}.get(d, "")
    if d == DType.int32 and v == -(2**31):
        return "(-2147483647 - 1)"
    if d == DType.int64 and v == -(2**63):  # the literal 9223372036854775808 has no signed type
        return "(-9223372036854775807LL - 1)"
    return f"{v}{suffix}"


def _expr(e: object, sp: Spelling) -> tuple[str, int]:
    match e:
        case tir.IntImm(v, d):
            return _int_literal(v, d), _PRIMARY if v >= 0 else _UNARY
        case tir.FloatImm(v, d):
            return _float_literal(v, d, sp), _PRIMARY if v >= 0 else _UNARY
        case tir.BoolImm(v):
            return ("true" if v else "false"), _PRIMARY
        case tir.Var(name) | T.Sym(name):
            return name, _PRIMARY
        case T.Builtin(name):
            return sp.builtins[name], _PRIMARY
        case tir.BinOp(op, a, b, d):
            return _binop(op, a, b, d, sp)
        case tir.UnaryOp(op, a):
            sym = {"-": "-", "~": "~", "not": "!"}[op]
            return f"{sym}{_paren(a, _UNARY, sp)}", _UNARY
        case tir.Select(c, a, b):
            return f"{_paren(c, 4, sp)} ? {_paren(a, 4, sp)} : {_paren(b, 3, sp)}", 3
        case tir.Cast(v, d):
            return _cast(v, d, sp), _PRIMARY
        case tir.Call(f, args, d):
            return _call(f, args, d, sp), _PRIMARY
        case T.Subscript(array, indices, d, reinterpret):
            base = f"reinterpret_cast<{ctype(d, sp)}*>({array})" if reinterpret else array
            return base + "".join(f"[{expr_text(i, sp)}]" for i in indices), _PRIMARY
        case T.Intrin(name, args):
            return _intrin(name, args, sp), _PRIMARY
        case T.VecRef(target, nbytes):
            return f"*reinterpret_cast<{sp.vector_types[nbytes]}*>(&{expr_text(target, sp)})", _UNARY
        case tir.Load(buf, idx):
            return buf.name + "".join(f"[{expr_text(i, sp)}]" for i in idx), _PRIMARY
        case T.AddressOf(target):
            return f"&{expr_text(target, sp)}", _UNARY
        case _:
            raise TypeError(f"cannot print {e!r}")


def _intrin(name: str, args: tuple[T.Expr | str, ...], sp: Spelling) -> str:
    """A neutral intrinsic through the record's template; any other name as written."""
    texts = [a if isinstance(a, str) else expr_text(a, sp) for a in args]
    template = sp.intrinsics.get(name)
    if template is None:  # a helper of the file, a C function, or the user's (call_extern)
        return f"{name.removeprefix(tir.EXTERN)}({', '.join(texts)})"
    return template.format(*texts, args=", ".join(texts))


def _binop(op: str, a: tir.Expr, b: tir.Expr, d: DType, sp: Spelling) -> tuple[str, int]:
    if op == "**":
        return _call("pow", (a, b), d, sp), _PRIMARY
    if op == "%" and d.is_float:
        return _call_named("fmodf" if d == DType.float32 else "fmod", (a, b), sp), _PRIMARY
    if op == "//" and d.is_float:
        return _call("floor", (tir.BinOp("/", a, b, d),), d, sp), _PRIMARY
    c_op = _C_OP.get(op, op)
    prec = _PREC[c_op]
    # left-associative: the right operand needs parentheses at equal precedence
    return f"{_paren(a, prec, sp)} {c_op} {_paren(b, prec + 1, sp)}", prec


def _cast(v: tir.Expr, d: DType, sp: Spelling) -> str:
    inner = expr_text(v, sp)
    if d.is_low_precision and v.dtype not in (DType.float32, d):
        inner = f"static_cast<float>({inner})"
    return f"static_cast<{ctype(d, sp)}>({inner})"


def _call_named(name: str, args: tuple[tir.Expr, ...], sp: Spelling) -> str:
    return f"{name}({', '.join(expr_text(a, sp) for a in args)})"


def _call(f: str, args: tuple[tir.Expr, ...], d: DType, sp: Spelling) -> str:
    if f == "sigmoid":
        one = "1.0f" if d == DType.float32 else "1.0"
        return f"({one} / ({one} + {_call('exp', (tir.UnaryOp('-', args[0], d),), d, sp)}))"
    if d == DType.float32:
        return _call_named(_MATH_F32[f], args, sp)
    if d == DType.float64:
        return _call_named(_MATH_F64[f], args, sp)
    if f in ("max", "min", "abs"):
        return _call_named(f, args, sp)
    raise TypeError(f"{f} on {d}")


# ---------------------------------------------------------------- statements


def _decl(s: T.Decl, sp: Spelling) -> str:
    dims = "".join(f"[{d}]" for d in s.dims)
    prefix = ("const " if s.const else "") + (f"alignas({s.align}) " if s.align else "")
    init = f" = {_converted(s.init, s.dtype, sp)}" if s.init is not None else ""
    return f"{prefix}{ctype(s.dtype, sp)} {s.name}{dims}{init};"


def _converted(value: T.Expr, dtype: DType, sp: Spelling) -> str:
    """`value` as stored into a `dtype`: as written, or through a static_cast where the language
    converts to `dtype` only explicitly (Spelling.explicit_types: HIP's hip_bfloat16) and `value`
    has another type."""
    text = expr_text(value, sp)
    if dtype in sp.explicit_types and value.dtype != dtype:
        return f"static_cast<{ctype(dtype, sp)}>({text})"
    return text


def _view(s: T.SharedView, sp: Spelling) -> str:
    t = ctype(s.dtype, sp)
    if len(s.dims) <= 1:
        return f"{t}* {s.name} = reinterpret_cast<{t}*>(smem + {s.offset});"
    inner = "".join(f"[{d}]" for d in s.dims[1:])
    return f"{t} (*{s.name}){inner} = reinterpret_cast<{t} (*){inner}>(smem + {s.offset});"


def _vec_src(v: T.VecRef, sp: Spelling) -> str:
    return f"*reinterpret_cast<const {sp.vector_types[v.bytes]}*>(&{expr_text(v.target, sp)})"


def _barrier(s: T.Barrier, sp: Spelling) -> list[str]:
    """The barrier's statement; none where the target spells its kind "" (nothing to do there)."""
    template = sp.barriers.get(s.kind)
    if template is None:
        raise NotImplementedError(f"barrier kind '{s.kind}' is not spelled for this target yet")
    return [template.format(*(expr_text(a, sp) for a in s.args))] if template else []


def stmt_lines(s: T.Stmt, sp: Spelling | None = None) -> list[str]:
    sp = sp or _DEFAULT
    match s:
        case T.Decl():
            return [_decl(s, sp)]
        case T.SharedView():
            return [_view(s, sp)]
        case T.Assign(target, value, op):
            if isinstance(value, T.VecRef):
                rhs = _vec_src(value, sp)
            else:
                rhs = expr_text(value, sp) if isinstance(target, T.VecRef) else _converted(value, target.dtype, sp)
            return [f"{expr_text(target, sp)} {op} {rhs};"]
        case T.Loop(var, start, stop, step, unroll, body, factor):
            head = f"for (int {var.name} = {expr_text(start, sp)}; {var.name} < {expr_text(stop, sp)}; "
            head += f"++{var.name})" if step == 1 else f"{var.name} += {step})"
            pragma = [f"#pragma unroll {factor}"] if factor else ["#pragma unroll"] if unroll else []
            return pragma + [head + " {"] + _body(body, sp) + ["}"]
        case T.While(cond, body):
            return [f"while ({expr_text(cond, sp)}) {{"] + _body(body, sp) + ["}"]
        case T.Break():
            return ["break;"]
        case T.IfThen(cond, then, orelse):
            out = [f"if ({expr_text(cond, sp)}) {{"] + _body(then, sp)
            if orelse:
                if len(orelse) == 1 and isinstance(orelse[0], T.IfThen):
                    nested = stmt_lines(orelse[0], sp)
                    return out + ["} else " + nested[0]] + nested[1:]
                out += ["} else {"] + _body(orelse, sp)
            return out + ["}"]
        case T.Call(call):
            return [expr_text(call, sp) + ";"]
        case T.Barrier():
            return _barrier(s, sp)
        case T.Comment(text):
            return [f"// {text}"]
        case T.Scope(comment, body):
            lead = [f"// {comment}"] if comment else []
            return lead + ["{"] + _body(body, sp) + ["}"]
        case _:
            assert_never(s)


def _body(stmts: tuple[T.Stmt, ...], sp: Spelling) -> list[str]:
    out: list[str] = []
    for s in stmts:
        out += stmt_lines(s, sp)
    return out


# ---------------------------------------------------------------- kernels


def _param(p: T.Param, sp: Spelling, restrict: str = "") -> str:
    """`const half* __restrict__ A` (`restrict` is the target's pointer qualifier, or none), `int M`."""
    if not p.pointer:
        return f"{ctype(p.dtype, sp)} {p.name}"
    return f"{'const ' if p.const else ''}{ctype(p.dtype, sp)}*{restrict} {p.name}"


def _smem_align(m: T.Module) -> int:
    """The alignment of the dynamic shared memory, the widest any kernel's views need: every
    kernel of a file declares the same `extern __shared__` array, so they must agree on it."""
    kernels = [*m.kernels, *(k.fallback for k in m.kernels if k.fallback is not None)]
    return max((s.align for k in kernels for s in k.body if isinstance(s, T.SharedView)), default=16)


def _kernel(k: T.Kernel, sp: Spelling, align: int) -> list[str]:
    params = ", ".join(
        sp.tensor_map_param.format(name=p.name) if p.tensor_map else _param(p, sp, sp.restrict) for p in k.params
    )
    bound = f"{k.threads}, {k.min_blocks}" if k.min_blocks else str(k.threads)
    qualifiers = sp.kernel_qualifiers.format(threads=bound)
    if k.cluster:
        qualifiers += " " + sp.cluster_dims.format(size=k.cluster)
    out = [f"{qualifiers} {k.name}_kernel({params}) {{"]
    if k.dynamic_smem:
        out.append(sp.dynamic_smem.format(align=align))
    out += _body(k.body, sp)
    out.append("}")
    return out


def _launcher(k: T.Kernel, target: Target, linkage: str = 'extern "C"') -> list[str]:
    """`extern "C" int NAME(params..., stream)`: the grid, the shared-memory opt-in, the
    kernel's tensor maps (and the hand-over to its fallback kernel when one cannot be built),
    its host prologue (k.host_prologue), the launch."""
    sp, launch = target.spelling, target.launch
    params = [_param(p, sp) for p in k.params if not p.tensor_map] + [launch.stream_param]
    grid = [expr_text(g, sp) for g in k.grid] + ["1"] * (3 - len(k.grid))
    tiles = "tiles" if k.persistent else "grid"
    out = [launch.doc.format(name=k.name), f"{linkage} int {k.name}({', '.join(params)}) {{"]
    if k.too_large is not None:  # lower/kernel.py: a tensor whose 32-bit offsets would wrap
        out.append("// element offsets are 32-bit ints: a tensor of 2^31 elements or more, or a dimension")
        out.append("// whose last block would index past 2^31 - 1, is refused, not wrapped")
        if any(DTYPES[t["dtype"]].is_subbyte and isinstance(t["shape"][-1], str) for t in k.abi["tensors"]):
            out.append("// (and so is an odd last dimension of a sub-byte tensor, packed two elements a byte)")
        out.append(f"if ({expr_text(k.too_large, sp)}) {launch.too_large}")
    out += [
        (launch.tiles if k.persistent else launch.grid).format(*grid),
        f"if ({tiles}.x == 0 || {tiles}.y == 0 || {tiles}.z == 0) return 0;  // empty problem: nothing to launch",
    ]
    if k.tensor_maps:
        out += [sp.tensor_map_decl.format(name=m.name) for m in k.tensor_maps]
        built = " && ".join(_tensor_map_build(m, sp) for m in k.tensor_maps)
        out.append(f"const bool bulk_copies = {built};")
        if k.fallback is not None:
            names = ", ".join([p.name for p in k.fallback.params] + ["stream"])
            out.append(sp.fallback.format(cond="bulk_copies", name=k.fallback.name, args=names))
    if k.reread_bytes:  # padded at run time, maybe past the opt-in threshold
        out.append(f"const int smem_bytes = {launch.l2_resident.format(smem=k.dynamic_smem, reread=k.reread_bytes)};")
        out += [line.format(name=k.name) for line in launch.smem_opt_in]
    else:
        out.append(f"const int smem_bytes = {k.dynamic_smem};")
        if k.dynamic_smem > launch.smem_opt_in_above:
            out += [line.format(name=k.name) for line in launch.smem_opt_in]
    out += _body(k.host_prologue, sp)
    if k.cluster:
        out.append(launch.cluster_grid.format(name=k.name, threads=k.threads))
    elif k.persistent:
        out.append(launch.persistent_grid.format(blocks=k.min_blocks))
    args = ", ".join(p.name for p in k.params)
    return out + [launch.launch.format(name=k.name, threads=k.threads, args=args), launch.status, "}"]


def _tensor_map_build(m: T.TensorMap, sp: Spelling) -> str:
    if m.pitches:
        return _strided_map_build(m, sp)
    batch = {} if m.batch is None else {"batch": expr_text(m.batch, sp)}
    return (sp.tensor_map_build if m.batch is None else sp.tensor_map_build_3d).format(
        name=m.name,
        tensor=m.tensor,
        inner=expr_text(m.inner, sp),
        outer=expr_text(m.outer, sp),
        box_inner=m.box[0],
        box_outer=m.box[1],
        elem_bytes=m.dtype.bytes,
        swizzle=m.swizzle,
        **batch,
    )


def _strided_map_build(m: T.TensorMap, sp: Spelling) -> str:
    """The tensor map of a tensor declared with strides: the row pitch and (a batch) the
    matrices' pitch, in elements."""
    row_pitch, *batch_pitch = (expr_text(p, sp) for p in m.pitches)
    batch = {} if m.batch is None else {"batch": expr_text(m.batch, sp), "batch_pitch": batch_pitch[0]}
    return (sp.tensor_map_build_strided if m.batch is None else sp.tensor_map_build_strided_3d).format(
        name=m.name,
        tensor=m.tensor,
        inner=expr_text(m.inner, sp),
        outer=expr_text(m.outer, sp),
        row_pitch=row_pitch,
        **batch,
        box_inner=m.box[0],
        box_outer=m.box[1],
        elem_bytes=m.dtype.bytes,
        swizzle=m.swizzle,
    )


def _helper_lines(m: T.Module, sp: Spelling, uses: _Uses) -> list[str]:
    names = _helpers(m, sp, uses)
    printed = uses.names | {t for h in names for t in sp.helper_types.get(h, ())}
    defined = [text for name, text in sp.type_definitions.items() if name in printed]
    lines = (sp.type_prelude.split("\n") + defined) if defined else []
    if set(names) & sp.shared_address_helpers:
        lines += sp.smem_addr_helper.split("\n")
    for name in names:
        lines += sp.helpers[name].split("\n")
    return lines


def emit_module(m: T.Module, target: Target) -> str:
    abi = json.dumps({"kernels": [k.abi for k in m.kernels]}, separators=(", ", ": "))
    lines = [f"// Generated by tilec {__version__} from {m.source_name}. Do not edit.", f"// tilec-abi: {abi}"]
    uses = _uses(m, target.spelling)
    lines += [f"#include <{h}>" for h in used_headers(m, target, uses)]
    lines += _helper_lines(m, target.spelling, uses)
    sp, align = target.spelling, _smem_align(m)
    for k in m.kernels:
        if k.fallback is not None:
            lines += [""] + _kernel(k.fallback, sp, align) + [""] + _launcher(k.fallback, target, "static")
        lines += [""] + _kernel(k, sp, align) + [""] + _launcher(k, target)
    return "\n".join(lines) + "\n"


def thread_text(m: T.Module, target: Target | None = None) -> str:
    """Thread IR before formatting (`--emit thread`): the kernels' bodies as
    structured statements, without launchers or includes."""
    sp = target.spelling if target else _DEFAULT
    lines: list[str] = []
    for k in m.kernels:
        grid = ", ".join(expr_text(g, sp) for g in k.grid)
        lines.append(f"kernel {k.name} threads={k.threads} smem={k.dynamic_smem} grid=({grid})")
        lines += ["  " + line for line in _body(k.body, sp)]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- headers


@dataclasses.dataclass(slots=True)
class _Uses:
    """What a module's kernels contain, for the headers and helpers it needs."""

    names: set[str] = dataclasses.field(default_factory=set)  # C types, intrinsics, words of C text
    barriers: set[str] = dataclasses.field(default_factory=set)


def used_headers(m: T.Module, target: Target, uses: _Uses | None = None) -> tuple[str, ...]:
    """The headers `m` needs, in `target.headers` order: the runtime's always, and
    the header declaring each name the file prints: element types (declarations,
    casts, parameters, helpers' texts), intrinsics, types in C text lowering wrote.

        a float32-only kernel                    -> cuda_runtime.h
        + a float16 tensor                       -> + cuda_fp16.h
        + the `pack` helper (half and bfloat16)  -> + cuda_fp16.h, cuda_bf16.h
        + printf (a device assertion)            -> + stdio.h
    """
    uses = uses if uses is not None else _uses(m, target.spelling)
    sp, of_name = target.spelling, target.header_rules.of_name
    names = uses.names | {t for h in _helpers(m, sp, uses) for t in sp.helper_types.get(h, ())}
    needed = {target.header_rules.always} | {of_name[n] for n in names if n in of_name}
    return tuple(h for h in target.headers if h in needed)


def _helpers(m: T.Module, sp: Spelling, uses: _Uses) -> list[str]:
    """The inline helpers the kernels call, and those their barriers call (sorted)."""
    return sorted(set(m.helpers) | {sp.barrier_helpers[b] for b in uses.barriers if b in sp.barrier_helpers})


def _uses(m: T.Module, sp: Spelling) -> _Uses:
    uses = _Uses()
    _collect(m.kernels, uses, sp)
    for k in m.kernels:
        abi = (*k.abi.get("tensors", ()), *k.abi.get("scalars", ()))
        uses.names |= {ctype(DTYPES[a["dtype"]], sp) for a in abi}
    return uses


_WORD = re.compile(r"[A-Za-z_]\w*")


def _collect(node: object, uses: _Uses, sp: Spelling) -> None:
    """Every type name (DTypes), identifier of C text, T.Intrin name and T.Barrier
    kind under `node`, comments aside, through any IR dataclass (a generic walk on
    purpose: a node kind added later is covered without a case here)."""
    match node:
        case DType():
            uses.names.add(ctype(node, sp))
        case str():
            uses.names.update(_WORD.findall(node))
        case T.Barrier(kind=kind):
            uses.barriers.add(kind)
        case T.Comment() | Span():
            return
        case T.Scope(body=body):
            return _collect(body, uses, sp)
        case tuple() | list():
            for item in node:
                _collect(item, uses, sp)
    for name in tir_walk.node_fields(node):
        _collect(getattr(node, name), uses, sp)
