"""The head of each kernel: its name, its parameters and the lets before its Kernel
block; dimensions an allocation shape or a Parallel extent uses become params.

    @T.prim_func                                   kernel gemm(A: Tensor((M, K), dtype), ...):
    def gemm(A: T.Tensor((M, K), dtype), ...):    ->       half = N // 2
        with T.Kernel(T.ceildiv(half, 64)):                with Kernel(ceildiv(half, 64)):

A jit function's tensors are the ones annotated in its body and its `T.empty` outputs; a prim_func
`main` is named after its factory. The body goes to translate.Translator.
"""

from __future__ import annotations

import ast

from tilec.import_tilelang.outer import Function, call_arg
from tilec.import_tilelang.static import UNKNOWN, Binding, dtype_name, fallback_value, is_t, new_binding, t_call
from tilec.import_tilelang.translate import Translator, safe_name


def kernel_name(f: Function, name: str) -> str:
    """A prim_func `main` is named after its factory (a kernel `main` cannot be launched from C)."""
    if name == "main":
        name = f.fn.name.lstrip("_") or "kernel"
    return safe_name(name)


def kernel_header(name: str, params: list[str]) -> str:
    """`kernel name(p, ...):`, its parameters continued under the first one past 110 columns."""
    head = f"kernel {name}("
    lines, line = [], head
    for i, p in enumerate(params):
        piece = p + (", " if i < len(params) - 1 else "):")
        if len(line) + len(piece) > 110 and line.strip() != head.strip():
            lines.append(line.rstrip())
            line = " " * len(head)
        line += piece
    return "\n".join([*lines, line if params else head + "):"])


def emit_style1(f: Function) -> None:
    """The kernel of a `@tilelang.jit` function: its tensors as parameters, its Kernel block as body."""
    assert f.kernel_with is not None
    tr = Translator(f.unit, f.scope)
    _mark_constant_dims(f, [f.kernel_with], f.scope)
    params = [f"{safe_name(n)}: Tensor({tr.shape(shape)}, {tr.expr(dtype)})" for n, shape, dtype in f.tensors]
    body = tr.block([f.kernel_with], 1)
    lines = [kernel_header(kernel_name(f, f.fn.name), params), *_lets(f, f.scope, tr), *body]
    f.unit.out.kernels.append("\n".join(lines))


def emit_prim_func(f: Function, prim: ast.FunctionDef, closure: dict[str, Binding]) -> None:
    """The kernel of a returned `@T.prim_func`: its annotated parameters, its body."""
    scope = dict(closure)
    tr = Translator(f.unit, scope)
    params = [_kernel_param(f, a, scope, tr) for a in prim.args.args]
    _mark_constant_dims(f, prim.body, scope)
    body = tr.block(prim.body, 1)
    lines = [kernel_header(kernel_name(f, prim.name), params), *_lets(f, scope, tr), *body]
    f.unit.out.kernels.append("\n".join(lines))


def _kernel_param(f: Function, a: ast.arg, scope: dict[str, Binding], tr: Translator) -> str:
    """A prim_func parameter (`A: T.Tensor((M, K), dtype)`, `x: T.float32`) as a kernel parameter."""
    ann = a.annotation
    name = safe_name(a.arg)
    if isinstance(ann, ast.Call) and t_call(ann) in ("Tensor", "Buffer"):
        shape = tr.shape(call_arg(f.unit, ann, 0, "shape"))
        text = f"{name}: Tensor({shape}, {tr.expr(call_arg(f.unit, ann, 1, 'dtype'))})"
        scope[a.arg] = new_binding(f.unit, "tensor", name)
        return text
    if isinstance(ann, ast.Attribute) and is_t(ann.value) and dtype_name(ann.attr):
        scope[a.arg] = new_binding(f.unit, "scalar", name)
        return f"{name}: {dtype_name(ann.attr)}"
    raise f.unit.fail(
        a, f"cannot convert the prim_func parameter '{a.arg}'", "annotate it T.Tensor((dims), dtype) or a dtype"
    )


def _lets(f: Function, scope: dict[str, Binding], tr: Translator) -> list[str]:
    """The Python locals of dimensions the kernel uses (`splitK = K // split_k`), bound before
    its Kernel block; the latest first, so that a let another one uses is found used."""
    lets = sorted((b for b in scope.values() if b.kind == "let"), key=lambda b: -b.order)
    lines = []
    for b in lets:
        if b.name in tr.used:
            assert isinstance(b.node, ast.expr)
            lines.append(f"    {safe_name(b.name)} = {tr.expr(b.node)}")
    return lines[::-1]


def _mark_constant_dims(f: Function, body: list[ast.stmt], scope: dict[str, Binding]) -> None:
    """Dimensions an allocation shape or a Parallel extent uses become params (with a value)."""
    for node in ast.walk(ast.Module(body=body, type_ignores=[])):
        if isinstance(node, ast.Call) and (t_call(node) or "").startswith(("alloc_", "Parallel")):
            for n in ast.walk(node):
                if isinstance(n, ast.Name) and n.id in scope and scope[n.id].kind == "dim":
                    _dim_to_param(f, scope, n)


def _dim_to_param(f: Function, scope: dict[str, Binding], n: ast.Name) -> None:
    """The dimension `n` as a param with a value; a located error when none can be read."""
    b = scope[n.id]
    value = b.value if b.value is not UNKNOWN else fallback_value(f.unit, n.id)
    if value is UNKNOWN:
        raise f.unit.fail(
            n,
            f"the {'argument' if isinstance(b.node, ast.arg) else 'dimension'} '{n.id}' must be a compile-time "
            "constant here, and no value for it can be read statically",
            f"pass it: tilec import-tilelang ... -D {n.id}=VALUE",
        )
    b.kind, b.value = "param", value
