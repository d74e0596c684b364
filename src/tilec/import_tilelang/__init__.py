"""`tilec import-tilelang`: a TileLang Python program (the common subset) to `.tile` text.

    @tilelang.jit                                    # source: examples/gemm/example_gemm.py
    def matmul(A, B, block_M, dtype=T.float16):      # converted by `tilec import-tilelang`
        M, N, K = T.const("M, N, K")                 param block_M = 128
        A: T.Tensor((M, K), dtype)                   param dtype = float16
        B: T.Tensor((K, N), dtype)
        C = T.empty((M, N), dtype)            ->     kernel matmul(A: Tensor((M, K), dtype), ...):
        with T.Kernel(T.ceildiv(N, block_M),             with Kernel(ceildiv(N, block_M), ...) as (bx, by):
                      ...) as (bx, by):                      ...
            ...                                              copy(A[by * block_M, k * 32], A_shared)
    def main():
        matmul.compile(M=1024, block_M=128)

Both of TileLang's styles are read: a `@tilelang.jit` function holding the Kernel block (tensors
annotated in its body, outputs from `T.empty`), and a factory returning a `@T.prim_func`. The
factory's (or jit function's) config arguments become `param`s, with the values the file passes
them where they can be read statically (a single `@autotune` config, the call in `main()`, the
`__main__` block, module-level calls, then the argument's default); its Python locals become
params too (`param scale = (1.0 / dim) ** 0.5`) or, when they use a symbolic dimension, a binding
before the Kernel block. `T.const` dimensions stay symbolic unless an allocation shape or a
`Parallel` extent needs them constant. `T.` primitives map to the language's names
(`T.Cast(dtype, x)` -> `cast(x, dtype)`, `T.float32(1.0)` -> `cast(1.0, float32)`,
`T.floordiv(a, b)` -> `a // b`, `T.get_thread_binding(0)` -> `thread_index()`, `x.astype(t)` ->
`cast(x, t)`).

What cannot be converted is a located `Diagnostic` (file:line:col, message, hint) raised as a
`CompileError`: Python control flow outside the kernel that cannot be evaluated, `T.im2col` and
the other names tilec lacks, `T.annotate_layout`, unknown `T.` calls, lambdas, comprehensions.
The package parses with `ast` and imports neither tilelang nor torch.

The pipeline, one module a stage: static.py (values, static evaluation, config values), outer.py
(the Python around the kernel, run statically), kernels.py (each kernel's head), translate.py
(the kernel body).
"""

from __future__ import annotations

import ast
import io
import tokenize
from collections.abc import Mapping

from tilec.diagnostics import CompileError, Diagnostic
from tilec.import_tilelang.kernels import emit_prim_func, emit_style1
from tilec.import_tilelang.outer import Function, module_scope, run_python
from tilec.import_tilelang.static import (
    UNKNOWN,
    Unit,
    config_values,
    fallback_value,
    kernel_functions,
    new_binding,
    offset,
)
from tilec.source import SourceFile, Span


def convert(
    text: str,
    path: str,
    function: str | None = None,
    source_commit: str | None = None,
    defines: Mapping[str, str] | None = None,
) -> str:
    """The .tile text of the TileLang program `text` (read from `path`); raises CompileError."""
    source = SourceFile(path, text)
    try:
        tree = ast.parse(text, filename=path)
    except SyntaxError as exc:
        span = Span(source, offset(source, exc.lineno or 1, (exc.offset or 1) - 1), 0)
        span = Span(source, span.start, span.start + 1)
        raise CompileError([Diagnostic(span, f"not valid Python: {exc.msg}")]) from None
    unit = Unit(source, tree, _comments(text), defines=dict(defines or {}))
    module_scope(unit)
    selected = _select(unit, kernel_functions(tree), function)
    for fn in selected:
        convert_function(unit, fn)
    return render(unit, path, source_commit)


def convert_function(unit: Unit, fn: ast.FunctionDef) -> None:
    """One kernel function: its arguments bound to their config values, its Python run, its kernels written."""
    config = config_values(unit, fn)
    scope = dict(unit.module)
    for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs:
        value = config.get(a.arg, UNKNOWN)
        value = fallback_value(unit, a.arg) if value is UNKNOWN else value
        kind = "dim" if value is UNKNOWN else "param"  # no value: a symbolic dimension, if it can be one
        scope[a.arg] = new_binding(unit, kind, a.arg, value, node=a, owner=fn.name)
    f = Function(unit, fn, scope, config)
    run_python(f, fn.body, scope)
    if f.kernel_with is not None:
        emit_style1(f)
    for prim, closure in f.prim_funcs:
        emit_prim_func(f, prim, closure)
    if f.kernel_with is None and not f.prim_funcs:
        raise unit.fail(fn, f"'{fn.name}' has no Kernel block and returns no prim_func", "see docs/import-tilelang.md")


def _select(unit: Unit, found: list[ast.FunctionDef], function: str | None) -> list[ast.FunctionDef]:
    """The kernel functions to convert: all of them, or the one `--function` names."""
    if not found:
        raise unit.fail(unit.tree, "no TileLang kernel function found", "a @tilelang.jit function or a @T.prim_func")
    if function is None:
        return found
    chosen = [f for f in found if f.name == function]
    if not chosen:
        names = ", ".join(f.name for f in found)
        raise CompileError(
            [Diagnostic(None, f"no kernel function '{function}' in {unit.source.path}", f"one of {names}")]
        )
    return chosen


def _comments(text: str) -> dict[int, str]:
    """Line -> comment text ("# ..."), for comments carried into the output."""
    found: dict[int, str] = {}
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.COMMENT:
                found[tok.start[0]] = tok.string
    except (tokenize.TokenError, SyntaxError):
        pass
    return found


def render(unit: Unit, path: str, commit: str | None) -> str:
    """The output file: the source line, the params in definition order, then the kernels."""
    at = f" @ {commit}" if commit else ""
    lines = [f"# source: {path}{at}", "# converted by `tilec import-tilelang`"]
    params = sorted(unit.out.params.items(), key=lambda item: item[1][0])
    lines += [f"param {name} = {text}" for name, (_, text) in params]
    return "\n".join(lines) + "\n\n" + "\n\n\n".join(unit.out.kernels) + "\n"


def read_source(path: str) -> str:
    """The text of a Python file; an unreadable or non-UTF-8 one is a diagnostic."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise CompileError([Diagnostic(None, f"cannot read {path}: {exc.strerror}")]) from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise CompileError([Diagnostic(None, f"{path}:{line}: not UTF-8 (byte 0x{data[exc.start]:02x})")]) from None
