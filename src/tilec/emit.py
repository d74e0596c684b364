"""Print Thread IR as CUDA C++: device kernels, launchers and the ABI line.

Parentheses come from a precedence table, never from guessing:

    BinOp("*", BinOp("+", a, b), c)  ->  (a + b) * c
    BinOp("+", a, BinOp("*", b, c))  ->  a + b * c

Layout is left to clang-format (format.py); this module only decides words
and nesting. Output depends on nothing but the input (no set or hash order).
"""

from __future__ import annotations

import json
import math
from typing import assert_never

from tilec import __version__, tir
from tilec import thread_ir as T
from tilec.dtypes import DType

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
_VEC_TYPE = {16: "uint4", 8: "uint2", 4: "unsigned int", 2: "unsigned short"}


def expr_text(e: object) -> str:
    return _expr(e)[0]


def _paren(e: object, prec: int) -> str:
    text, p = _expr(e)
    return f"({text})" if p < prec else text


def _float_literal(v: float, d: DType) -> str:
    if math.isinf(v):
        text = "INFINITY" if v > 0 else "-INFINITY"
        return text if d == DType.float32 else f"static_cast<{d.cname}>({text})"
    text = repr(float(v))
    if "e" not in text and "." not in text:
        text += ".0"
    return text + "f" if d != DType.float64 else text


def _int_literal(v: int, d: DType) -> str:
    suffix = {DType.int64: "LL", DType.uint64: "ULL", DType.uint32: "u"}.get(d, "")
    if d == DType.int32 and v == -(2**31):
        return "(-2147483647 - 1)"
    return f"{v}{suffix}"


def _expr(e: object) -> tuple[str, int]:
    match e:
        case tir.IntImm(v, d):
            return _int_literal(v, d), _PRIMARY if v >= 0 else _UNARY
        case tir.FloatImm(v, d):
            return _float_literal(v, d), _PRIMARY if v >= 0 else _UNARY
        case tir.BoolImm(v):
            return ("true" if v else "false"), _PRIMARY
        case tir.Var(name) | T.Sym(name):
            return name, _PRIMARY
        case tir.BinOp(op, a, b, d):
            return _binop(op, a, b, d)
        case tir.UnaryOp(op, a):
            sym = {"-": "-", "~": "~", "not": "!"}[op]
            return f"{sym}{_paren(a, _UNARY)}", _UNARY
        case tir.Select(c, a, b):
            return f"{_paren(c, 4)} ? {_paren(a, 4)} : {_paren(b, 3)}", 3
        case tir.Cast(v, d):
            return _cast(v, d), _PRIMARY
        case tir.Call(f, args, d):
            return _call(f, args, d), _PRIMARY
        case T.Subscript(array, indices):
            return array + "".join(f"[{expr_text(i)}]" for i in indices), _PRIMARY
        case T.Intrin(name, args):
            return f"{name}({', '.join(a if isinstance(a, str) else expr_text(a) for a in args)})", _PRIMARY
        case T.VecRef(target, nbytes):
            return f"*reinterpret_cast<{_VEC_TYPE[nbytes]}*>(&{expr_text(target)})", _UNARY
        case tir.Load(buf, idx):
            return buf.name + "".join(f"[{expr_text(i)}]" for i in idx), _PRIMARY
        case T.AddressOf(target):
            return f"&{expr_text(target)}", _UNARY
        case _:
            raise TypeError(f"cannot print {e!r}")


def _binop(op: str, a: tir.Expr, b: tir.Expr, d: DType) -> tuple[str, int]:
    if op == "**":
        return _call("pow", (a, b), d), _PRIMARY
    if op == "%" and d.is_float:
        return _call_named("fmodf" if d == DType.float32 else "fmod", (a, b)), _PRIMARY
    if op == "//" and d.is_float:
        return _call("floor", (tir.BinOp("/", a, b, d),), d), _PRIMARY
    c_op = _C_OP.get(op, op)
    prec = _PREC[c_op]
    # left-associative: the right operand needs parentheses at equal precedence
    return f"{_paren(a, prec)} {c_op} {_paren(b, prec + 1)}", prec


def _cast(v: tir.Expr, d: DType) -> str:
    inner = expr_text(v)
    if d.is_low_precision and v.dtype not in (DType.float32, d):
        inner = f"static_cast<float>({inner})"
    return f"static_cast<{d.cname}>({inner})"


def _call_named(name: str, args: tuple[tir.Expr, ...]) -> str:
    return f"{name}({', '.join(expr_text(a) for a in args)})"


def _call(f: str, args: tuple[tir.Expr, ...], d: DType) -> str:
    if f == "sigmoid":
        one = "1.0f" if d == DType.float32 else "1.0"
        return f"({one} / ({one} + {_call('exp', (tir.UnaryOp('-', args[0], d),), d)}))"
    if d == DType.float32:
        return _call_named(_MATH_F32[f], args)
    if d == DType.float64:
        return _call_named(_MATH_F64[f], args)
    if f in ("max", "min", "abs"):
        return _call_named(f, args)
    raise TypeError(f"{f} on {d}")


# ---------------------------------------------------------------- statements


def _decl(s: T.Decl) -> str:
    dims = "".join(f"[{d}]" for d in s.dims)
    prefix = ("const " if s.const else "") + (f"alignas({s.align}) " if s.align else "")
    init = f" = {expr_text(s.init)}" if s.init is not None else ""
    return f"{prefix}{s.dtype.cname} {s.name}{dims}{init};"


def _view(s: T.SharedView) -> str:
    if len(s.dims) <= 1:
        return f"{s.dtype.cname}* {s.name} = reinterpret_cast<{s.dtype.cname}*>(smem + {s.offset});"
    inner = "".join(f"[{d}]" for d in s.dims[1:])
    return f"{s.dtype.cname} (*{s.name}){inner} = reinterpret_cast<{s.dtype.cname} (*){inner}>(smem + {s.offset});"


def _vec_src(v: T.VecRef) -> str:
    return f"*reinterpret_cast<const {_VEC_TYPE[v.bytes]}*>(&{expr_text(v.target)})"


def stmt_lines(s: T.Stmt) -> list[str]:
    match s:
        case T.Decl():
            return [_decl(s)]
        case T.SharedView():
            return [_view(s)]
        case T.Assign(target, value, op):
            rhs = _vec_src(value) if isinstance(value, T.VecRef) else expr_text(value)
            return [f"{expr_text(target)} {op} {rhs};"]
        case T.Loop(var, start, stop, step, unroll, body, factor):
            head = f"for (int {var.name} = {expr_text(start)}; {var.name} < {expr_text(stop)}; "
            head += f"++{var.name})" if step == 1 else f"{var.name} += {step})"
            pragma = [f"#pragma unroll {factor}"] if factor else ["#pragma unroll"] if unroll else []
            return pragma + [head + " {"] + _body(body) + ["}"]
        case T.IfThen(cond, then, orelse):
            out = [f"if ({expr_text(cond)}) {{"] + _body(then)
            if orelse:
                if len(orelse) == 1 and isinstance(orelse[0], T.IfThen):
                    nested = stmt_lines(orelse[0])
                    return out + ["} else " + nested[0]] + nested[1:]
                out += ["} else {"] + _body(orelse)
            return out + ["}"]
        case T.Call(call):
            return [expr_text(call) + ";"]
        case T.Comment(text):
            return [f"// {text}"]
        case T.Scope(comment, body):
            head = [f"// {comment}"] if comment else []
            return head + ["{"] + _body(body) + ["}"]
        case _:
            assert_never(s)


def _body(stmts: tuple[T.Stmt, ...]) -> list[str]:
    out: list[str] = []
    for s in stmts:
        out += stmt_lines(s)
    return out


# ---------------------------------------------------------------- kernels


def _kernel(k: T.Kernel) -> list[str]:
    params = ", ".join(f"{p.ctype} {p.name}" for p in k.params)
    out = [f'extern "C" __global__ void __launch_bounds__({k.threads}) {k.name}_kernel({params}) {{']
    if k.dynamic_smem:
        out.append("extern __shared__ __align__(16) unsigned char smem[];")
    out += _body(k.body)
    out.append("}")
    return out


def _launcher(k: T.Kernel) -> list[str]:
    params = ", ".join([f"{p.ctype.replace(' __restrict__', '')} {p.name}" for p in k.params] + ["cudaStream_t stream"])
    grid = [expr_text(g) for g in k.grid] + ["1"] * (3 - len(k.grid))
    args = ", ".join(p.name for p in k.params)
    out = [
        f"// Launches {k.name}_kernel on `stream`; returns the launch's cudaError_t (0 on success).",
        f'extern "C" int {k.name}({params}) {{',
        f"const dim3 grid({', '.join(grid)});",
        "if (grid.x == 0 || grid.y == 0 || grid.z == 0) return 0;  // empty problem: nothing to launch",
        f"const int smem_bytes = {k.dynamic_smem};",
    ]
    if k.dynamic_smem > 48 * 1024:
        out += [
            f"cudaError_t err = cudaFuncSetAttribute({k.name}_kernel, "
            "cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes);",
            "if (err != cudaSuccess) return (int)err;",
        ]
    out += [
        f"{k.name}_kernel<<<grid, {k.threads}, smem_bytes, stream>>>({args});",
        "return (int)cudaGetLastError();",
        "}",
    ]
    return out


# Inline-PTX helpers, emitted once per file and only when a kernel calls them.
HELPERS: dict[str, str] = {
    "cp_async": """
// cp.async: global -> shared copies that bypass registers, in commit groups; wait<N> returns once
// at most N groups are still in flight (this thread's; a barrier then publishes them).
__device__ __forceinline__ void tilec_cp_async_16(void* smem, const void* gmem) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(tilec_smem_addr(smem)), "l"(gmem));
}
__device__ __forceinline__ void tilec_cp_async_8(void* smem, const void* gmem) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" ::"r"(tilec_smem_addr(smem)), "l"(gmem));
}
__device__ __forceinline__ void tilec_cp_async_4(void* smem, const void* gmem) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(tilec_smem_addr(smem)), "l"(gmem));
}
__device__ __forceinline__ void tilec_cp_async_commit() { asm volatile("cp.async.commit_group;"); }
template <int N>
__device__ __forceinline__ void tilec_cp_async_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N)); }""",
    "ldmatrix": """
// ldmatrix: eight 16-byte rows per 8x8 matrix, addressed by lanes 8j..8j+7, land in register j
// of every lane (lane l gets row l / 4, columns 2 * (l % 4) and +1); .trans loads the transpose.
__device__ __forceinline__ void tilec_ldmatrix_x4(unsigned* r, const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(tilec_smem_addr(p)));
}
__device__ __forceinline__ void tilec_ldmatrix_x4_trans(unsigned* r, const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(tilec_smem_addr(p)));
}
__device__ __forceinline__ void tilec_ldmatrix_x2(unsigned* r, const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];"
               : "=r"(r[0]), "=r"(r[1]) : "r"(tilec_smem_addr(p)));
}
__device__ __forceinline__ void tilec_ldmatrix_x2_trans(unsigned* r, const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];"
               : "=r"(r[0]), "=r"(r[1]) : "r"(tilec_smem_addr(p)));
}""",
    "exp2": """
// 2^x in float32 with the SFU's ex2.approx.ftz: one instruction, at most 2 ulp from exact, and
// denormal inputs and results flush to zero (exp2f adds a range fix-up around the same instruction).
__device__ __forceinline__ float tilec_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}""",
    "pack": """
// Two 16-bit values packed into one 32-bit register, the first in the low half (mma operand order).
__device__ __forceinline__ unsigned tilec_pack_f16x2(half lo, half hi) {
  __half2 v = __halves2half2(lo, hi);
  return *reinterpret_cast<unsigned*>(&v);
}
__device__ __forceinline__ unsigned tilec_pack_bf16x2(__nv_bfloat16 lo, __nv_bfloat16 hi) {
  __nv_bfloat162 v = __halves2bfloat162(lo, hi);
  return *reinterpret_cast<unsigned*>(&v);
}""",
    "mma_f16": """
// c[0..3] += A (16x16, a[0..3]) * B (16x8, b[0..1]) on tensor cores, float16 in, float32 out.
__device__ __forceinline__ void tilec_mma_m16n8k16_f16(float* c, const unsigned* a, const unsigned* b) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}""",
    "mma_bf16": """
// c[0..3] += A (16x16, a[0..3]) * B (16x8, b[0..1]) on tensor cores, bfloat16 in, float32 out.
__device__ __forceinline__ void tilec_mma_m16n8k16_bf16(float* c, const unsigned* a, const unsigned* b) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}""",
    "mma_s8": """
// c[0..3] += A (16x32, a[0..3]) * B (32x8, b[0..1]) on tensor cores, int8 in, int32 out.
__device__ __forceinline__ void tilec_mma_m16n8k32_s8(int* c, const unsigned* a, const unsigned* b) {
  asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 "
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
               : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}""",
    "mma_e4m3": """
// c[0..3] += A (16x32, a[0..3]) * B (32x8, b[0..1]) on tensor cores, float8 e4m3 in, float32 out.
__device__ __forceinline__ void tilec_mma_m16n8k32_e4m3(float* c, const unsigned* a, const unsigned* b) {
  asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 "
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}""",
    "mma_e5m2": """
// c[0..3] += A (16x32, a[0..3]) * B (32x8, b[0..1]) on tensor cores, float8 e5m2 in, float32 out.
__device__ __forceinline__ void tilec_mma_m16n8k32_e5m2(float* c, const unsigned* a, const unsigned* b) {
  asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e5m2.f32 "
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}""",
}


_SHARED_HELPERS = {"cp_async", "ldmatrix"}  # the helpers that take shared-memory addresses
_SMEM_ADDR = """
__device__ __forceinline__ unsigned tilec_smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}"""


def emit_module(m: T.Module) -> str:
    abi = json.dumps({"kernels": [k.abi for k in m.kernels]}, separators=(", ", ": "))
    lines = [f"// Generated by tilec {__version__} from {m.source_name}. Do not edit.", f"// tilec-abi: {abi}"]
    lines += [f"#include <{h}>" for h in m.headers]
    if set(m.helpers) & _SHARED_HELPERS:
        lines += _SMEM_ADDR.split("\n")
    for name in m.helpers:
        lines += HELPERS[name].split("\n")
    for k in m.kernels:
        lines += [""] + _kernel(k) + [""] + _launcher(k)
    return "\n".join(lines) + "\n"


def thread_text(m: T.Module) -> str:
    """Thread IR before formatting (`--emit thread`): the kernels' bodies as
    structured statements, without launchers or includes."""
    lines: list[str] = []
    for k in m.kernels:
        grid = ", ".join(expr_text(g) for g in k.grid)
        lines.append(f"kernel {k.name} threads={k.threads} smem={k.dynamic_smem} grid=({grid})")
        lines += ["  " + line for line in _body(k.body)]
    return "\n".join(lines) + "\n"
