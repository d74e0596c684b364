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
The module parses with `ast` and imports neither tilelang nor torch.
"""

from __future__ import annotations

import ast
import io
import math
import re
import tokenize
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from tilec.builtins import ALL_SIGS, POLICIES, UNSUPPORTED
from tilec.diagnostics import CompileError, Diagnostic
from tilec.dtypes import DTYPE_NAMES
from tilec.source import SourceFile, Span

TILE_KEYWORDS = frozenset("import param macro kernel for while in if elif else with as and or not pass break".split())
DTYPE_SPELLINGS = {"float": "float32", "half": "float16", "double": "float64", "int": "int32", "bfloat": "bfloat16"}
LOOPS = ("Pipelined", "Parallel", "serial", "Serial", "range", "unroll")
DROPPED_KEYWORDS = {"atomic_add": ("memory_order", "return_prev"), "atomic_max": ("memory_order",)}
DROPPED_KEYWORDS.update(atomic_min=("memory_order",), alloc_shared=("scope",))
PYTHON_FUNCS = {"min", "max", "abs", "range"}  # Python builtins that are .tile builtins too


# ---------------------------------------------------------------- values and bindings


@dataclass(frozen=True, slots=True)
class DType:
    """A dtype value of the Python program (`T.float16`, `"float"`), by its .tile name."""

    name: str


class NotStatic(Exception):
    """An expression whose value cannot be computed without running the program."""


UNKNOWN: object = NotStatic  # the value of a name that cannot be computed


@dataclass(eq=False)
class Binding:
    """What a Python name of the program stands for in the .tile text.

    kind: "param" (a `param`, `definition` its text), "dim" (a symbolic dimension), "tensor" or
    "scalar" (a kernel parameter), "let" (bound before the Kernel block), "inline" (substituted:
    `node`), "prim_func" / "def" (a nested function: `node`), "opaque" (unusable: `reason`)."""

    kind: str
    name: str
    value: object = UNKNOWN
    node: ast.AST | None = None
    definition: str | None = None
    comment: str | None = None
    reason: str = ""
    order: int = 0
    owner: str = ""  # the function that defines it (names a param renamed for a clash)
    scope: dict[str, Binding] | None = None  # where a param's definition is read
    final: str | None = None  # a param's name in the output, once used


@dataclass
class Output:
    """The .tile file being written: params in definition order, then the kernels."""

    params: dict[str, tuple[int, str]] = field(default_factory=dict)  # final name -> (order, definition)
    kernels: list[str] = field(default_factory=list)
    counter: int = 0


@dataclass
class Unit:
    """One file being converted: its source, module-level names and what has been written."""

    source: SourceFile
    tree: ast.Module
    comments: dict[int, str]
    out: Output = field(default_factory=Output)
    module: dict[str, Binding] = field(default_factory=dict)
    defines: Mapping[str, str] = field(default_factory=dict)

    def span(self, node: ast.AST) -> Span:
        return _span(self.source, node)

    def fail(self, node: ast.AST, message: str, hint: str | None = None) -> CompileError:
        return CompileError([Diagnostic(self.span(node), message, hint)])


def _span(source: SourceFile, node: ast.AST) -> Span:
    """The character span of an ast node (ast counts columns in UTF-8 bytes)."""
    line = getattr(node, "lineno", 1)
    end_line = getattr(node, "end_lineno", None) or line
    start = _offset(source, line, getattr(node, "col_offset", 0))
    end = _offset(source, end_line, getattr(node, "end_col_offset", None) or 0)
    return Span(source, start, max(end, start + 1))


def _offset(source: SourceFile, line: int, byte_col: int) -> int:
    line = min(max(line, 1), len(source.line_starts))
    text = source.line_text(line).encode()[:byte_col].decode(errors="ignore")
    return source.line_starts[line - 1] + len(text)


# ---------------------------------------------------------------- static evaluation


def evaluate(node: ast.AST, env: Mapping[str, object], funcs: Mapping[str, ast.FunctionDef] | None = None) -> object:
    """The value of a Python expression built of constants and names of `env`; NotStatic else."""
    value = _eval(node, env, funcs or {})
    if value is UNKNOWN:
        raise NotStatic
    return value


def _eval(node: ast.AST, env: Mapping[str, object], funcs: Mapping[str, ast.FunctionDef]) -> object:
    ev: Callable[[ast.AST], object] = lambda n: evaluate(n, env, funcs)  # noqa: E731
    match node:
        case ast.Constant(value=v) if v is None or isinstance(v, (int, float, str, bool)):
            return v
        case ast.Name(id=name):
            if name in env:
                return env[name]
            return {"True": True, "False": False}.get(name, UNKNOWN)
        case ast.Tuple(elts=elts) | ast.List(elts=elts):
            return tuple(ev(e) for e in elts)
        case ast.BinOp(left=a, op=op, right=b):
            return _binop(op, ev(a), ev(b))
        case ast.UnaryOp(op=op, operand=a):
            return _unary(op, ev(a))
        case ast.BoolOp(op=ast.And(), values=vs):
            return all(ev(v) for v in vs)
        case ast.BoolOp(op=ast.Or(), values=vs):
            return any(ev(v) for v in vs)
        case ast.Compare(left=a, ops=ops, comparators=cs):
            return _compare(ev(a), ops, [ev(c) for c in cs])
        case ast.IfExp(test=t, body=b, orelse=o):
            return ev(b) if ev(t) else ev(o)
        case ast.Subscript(value=v, slice=s):
            return _subscript(ev(v), ev(s))
        case ast.Attribute():
            return _attribute(node, env)
        case ast.Call():
            return _call(node, env, funcs)
    raise NotStatic


def _binop(op: ast.operator, a: object, b: object) -> object:
    table: dict[type, Callable[[object, object], object]] = {
        ast.Add: lambda x, y: x + y,  # type: ignore[operator]
        ast.Sub: lambda x, y: x - y,  # type: ignore[operator]
        ast.Mult: lambda x, y: x * y,  # type: ignore[operator]
        ast.Div: lambda x, y: x / y,  # type: ignore[operator]
        ast.FloorDiv: lambda x, y: x // y,  # type: ignore[operator]
        ast.Mod: lambda x, y: x % y,  # type: ignore[operator]
        ast.Pow: lambda x, y: x**y,  # type: ignore[operator]
        ast.LShift: lambda x, y: x << y,  # type: ignore[operator]
        ast.RShift: lambda x, y: x >> y,  # type: ignore[operator]
        ast.BitAnd: lambda x, y: x & y,  # type: ignore[operator]
        ast.BitOr: lambda x, y: x | y,  # type: ignore[operator]
        ast.BitXor: lambda x, y: x ^ y,  # type: ignore[operator]
    }
    try:
        return table[type(op)](a, b)
    except Exception as exc:  # noqa: BLE001 - any failure of Python's arithmetic
        raise NotStatic from exc


def _unary(op: ast.unaryop, a: object) -> object:
    try:
        if isinstance(op, ast.Not):
            return not a
        return {ast.USub: lambda x: -x, ast.UAdd: lambda x: +x, ast.Invert: lambda x: ~x}[type(op)](a)
    except Exception as exc:  # noqa: BLE001
        raise NotStatic from exc


def _compare(a: object, ops: list[ast.cmpop], cs: list[object]) -> bool:
    table: dict[type, Callable[[object, object], bool]] = {
        ast.Eq: lambda x, y: x == y,
        ast.NotEq: lambda x, y: x != y,
        ast.Lt: lambda x, y: x < y,  # type: ignore[operator]
        ast.LtE: lambda x, y: x <= y,  # type: ignore[operator]
        ast.Gt: lambda x, y: x > y,  # type: ignore[operator]
        ast.GtE: lambda x, y: x >= y,  # type: ignore[operator]
        ast.Is: lambda x, y: x is y,
        ast.IsNot: lambda x, y: x is not y,
    }
    try:
        for op, c in zip(ops, cs, strict=True):
            if not table[type(op)](a, c):
                return False
            a = c
        return True
    except Exception as exc:  # noqa: BLE001
        raise NotStatic from exc


def _subscript(v: object, s: object) -> object:
    try:
        return v[s]  # type: ignore[index]
    except Exception as exc:  # noqa: BLE001
        raise NotStatic from exc


def _attribute(node: ast.Attribute, env: Mapping[str, object]) -> object:
    if _is_t(node.value) or (isinstance(node.value, ast.Name) and node.value.id == "torch"):
        dtype = dtype_name(node.attr)
        if dtype:
            return DType(dtype)
    if isinstance(node.value, ast.Name) and f"{node.value.id}.{node.attr}" in env:
        return env[f"{node.value.id}.{node.attr}"]  # args.m: the argparse default
    raise NotStatic


STATIC_FUNCS: dict[str, Callable[..., object]] = {
    "int": int,
    "float": float,
    "bool": bool,
    "min": min,
    "max": max,
    "abs": abs,
    "len": len,
    "round": round,
    "ceildiv": lambda a, b: -(-a // b),
    "ceil": math.ceil,
    "floor": math.floor,
    "sqrt": math.sqrt,
    "log2": math.log2,
    "cdiv": lambda a, b: -(-a // b),  # tilelang.cdiv
    "determine_fp8_type": lambda kind="e4m3": DType(f"float8_{kind}"),  # tilelang.language.fp8, CUDA's answer
    "get_num_sms": lambda *_: 132,  # tilelang.carver's driver query, as an H100/H200 answers it
}
TORCH_FACTORIES = ("rand", "randn", "empty", "zeros", "ones", "randint")
HOST_QUERIES = {"get_num_sms": "the SM count driver.get_num_sms() returns on an H100/H200; -D to change"}
TILE_CALLEES = {"cdiv": "ceildiv", "ceildiv": "ceildiv"}  # tilelang.cdiv(a, b) and the like, by their .tile name


def _call(node: ast.Call, env: Mapping[str, object], funcs: Mapping[str, ast.FunctionDef]) -> object:
    args = [evaluate(a, env, funcs) for a in node.args]
    kwargs = {k.arg: evaluate(k.value, env, funcs) for k in node.keywords if k.arg}
    name = _callee(node.func)
    if name is not None and name in funcs and not kwargs and name not in STATIC_FUNCS:
        return _call_python(funcs[name], args, funcs)
    if name in STATIC_FUNCS:
        try:
            return STATIC_FUNCS[name](*args, **kwargs)
        except Exception as exc:  # noqa: BLE001
            raise NotStatic from exc
    raise NotStatic


def _callee(func: ast.expr) -> str | None:
    """`f` of `f(...)`, `math.f(...)`, `T.f(...)`, `tilelang.cdiv(...)`."""
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        return func.attr
    return None


def _call_python(fn: ast.FunctionDef, args: list[object], funcs: Mapping[str, ast.FunctionDef]) -> object:
    """A module-level helper of assignments and one return (`def cdiv(a, b): return (a + b - 1) // b`)."""
    names = [a.arg for a in fn.args.args]
    if len(args) != len(names):
        raise NotStatic
    env: dict[str, object] = dict(zip(names, args, strict=True))
    for stmt in fn.body:
        match stmt:
            case ast.Return(value=v) if v is not None:
                return evaluate(v, env, funcs)
            case ast.Assign(targets=[ast.Name(id=n)], value=v):
                env[n] = evaluate(v, env, funcs)
            case ast.Expr(value=ast.Constant(value=str())):
                pass
            case _:
                raise NotStatic
    raise NotStatic


def dtype_name(name: str) -> str | None:
    """The .tile dtype of a TileLang/torch dtype spelling (`float16`, `float`, `half`), or None."""
    name = DTYPE_SPELLINGS.get(name, name)
    return name if name in DTYPE_NAMES or name in UNSUPPORTED else None


def _is_t(node: ast.AST) -> bool:
    """`T` (tilelang.language) or `tilelang.language`."""
    return (isinstance(node, ast.Name) and node.id == "T") or ast.unparse(node) == "tilelang.language"


# ---------------------------------------------------------------- entry


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
        span = Span(source, _offset(source, exc.lineno or 1, (exc.offset or 1) - 1), 0)
        span = Span(source, span.start, span.start + 1)
        raise CompileError([Diagnostic(span, f"not valid Python: {exc.msg}")]) from None
    unit = Unit(source, tree, _comments(text), defines=dict(defines or {}))
    _module_scope(unit)
    selected = _select(unit, kernel_functions(tree), function)
    for fn in selected:
        convert_function(unit, fn)
    return render(unit, path, source_commit)


def kernel_functions(tree: ast.Module) -> list[ast.FunctionDef]:
    """The top-level functions that make kernels: `@tilelang.jit` ones and prim_func factories."""
    return [s for s in tree.body if isinstance(s, ast.FunctionDef) and (_is_jit(s) or _has_prim_func(s))]


def _is_jit(fn: ast.FunctionDef) -> bool:
    return any(_decorator_name(d) == "jit" for d in fn.decorator_list)


def _decorator_name(d: ast.expr) -> str | None:
    return _callee(d.func) if isinstance(d, ast.Call) else _callee(d)


def _has_prim_func(fn: ast.FunctionDef) -> bool:
    return any(
        isinstance(n, ast.FunctionDef) and any(_decorator_name(d) == "prim_func" for d in n.decorator_list)
        for n in ast.walk(fn)
        if n is not fn
    )


def _select(unit: Unit, found: list[ast.FunctionDef], function: str | None) -> list[ast.FunctionDef]:
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


# ---------------------------------------------------------------- config values


def _module_scope(unit: Unit) -> None:
    """Module-level constants (`total_sm = 108`) as bindings: params when a kernel uses them."""
    _run_module(unit, [s for s in unit.tree.body if not _is_main_block(s)])


def _run_module(unit: Unit, body: list[ast.stmt]) -> None:
    """Module-level statements, run as far as they are static; their values become literal params."""
    scope = unit.module
    for stmt in body:
        if isinstance(stmt, ast.Assign):
            _bind_python(unit, stmt, scope, quiet=True)
        elif isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
            value = ast.BinOp(ast.Name(stmt.target.id), stmt.op, stmt.value)
            _bind_python(unit, ast.Assign([stmt.target], value, lineno=stmt.lineno), scope, quiet=True)
        elif isinstance(stmt, ast.If):
            taken = _static_branch(unit, stmt, _values(scope))
            _run_module(unit, taken if taken is not None else [])
    for b in scope.values():
        b.definition = None  # module-level names are written as their values


def helper_functions(unit: Unit) -> dict[str, ast.FunctionDef]:
    return {s.name: s for s in unit.tree.body if isinstance(s, ast.FunctionDef)}


def config_values(unit: Unit, fn: ast.FunctionDef) -> dict[str, object]:
    """The values the file gives `fn`'s arguments: -D, a single autotune config, the call site
    in main() / __main__ / module level / elsewhere, then the defaults."""
    values = _defaults(unit, fn.args)
    values.update(_call_site_values(unit, fn))
    values.update(_autotune_values(unit, fn))
    values.update({k: _define_value(v) for k, v in unit.defines.items()})
    return values


def _define_value(text: str) -> object:
    for parse in (int, float):
        try:
            return parse(text)
        except ValueError:
            pass
    if text in ("True", "False"):
        return text == "True"
    return DType(dtype_name(text) or text)


def _defaults(unit: Unit, args: ast.arguments) -> dict[str, object]:
    values: dict[str, object] = {}
    positional = args.posonlyargs + args.args
    for a, d in zip(positional[len(positional) - len(args.defaults) :], args.defaults, strict=True):
        values[a.arg] = _try_eval(unit, d, {})
    for a, kd in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        if kd is not None:
            values[a.arg] = _try_eval(unit, kd, {})
    return {k: v for k, v in values.items() if v is not UNKNOWN}


def _try_eval(unit: Unit, node: ast.AST, env: Mapping[str, object]) -> object:
    try:
        return evaluate(node, {**_module_values(unit), **env}, helper_functions(unit))
    except NotStatic:
        return UNKNOWN


def _module_values(unit: Unit) -> dict[str, object]:
    return {k: b.value for k, b in unit.module.items() if b.value is not UNKNOWN}


def _call_site_values(unit: Unit, fn: ast.FunctionDef) -> dict[str, object]:
    for body, env in _call_scopes(unit):
        found = _find_call(unit, fn, body, env)
        if found is not None:
            return found
    return {}


def _call_scopes(unit: Unit) -> Iterable[tuple[list[ast.stmt], dict[str, object]]]:
    """Where config values are looked for, in order: main(), the __main__ block, the module, the rest."""
    funcs = helper_functions(unit)
    argparse = _argparse_defaults(unit.tree)
    main_block = [s for s in unit.tree.body if _is_main_block(s)]
    if "main" in funcs:
        yield funcs["main"].body, {**argparse, **_defaults(unit, funcs["main"].args)}
    for block in main_block:
        yield block.body, dict(argparse)  # type: ignore[attr-defined]
    yield [s for s in unit.tree.body if not isinstance(s, ast.FunctionDef | ast.ClassDef)], {}
    for name, f in funcs.items():
        if name != "main":
            yield f.body, _defaults(unit, f.args)


def _is_main_block(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.If) and "__name__" in ast.unparse(stmt.test)


def _argparse_defaults(tree: ast.Module) -> dict[str, object]:
    """`args.m` -> 1024 for `parser.add_argument("--m", type=int, default=1024)`."""
    found: dict[str, object] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _callee(node.func) == "add_argument" and node.args:
            flag = node.args[0]
            default = next((k.value for k in node.keywords if k.arg == "default"), None)
            if isinstance(flag, ast.Constant) and isinstance(flag.value, str) and default is not None:
                try:
                    found["args." + flag.value.lstrip("-").replace("-", "_")] = evaluate(default, {})
                except NotStatic:
                    pass
    return found


def _find_call(
    unit: Unit, fn: ast.FunctionDef, body: list[ast.stmt], env: dict[str, object], depth: int = 0
) -> dict[str, object] | None:
    """The arguments of the first call of `fn` (or `fn.compile`) in `body`, run in order."""
    for stmt in body:
        if isinstance(stmt, ast.If):
            taken = _static_branch(unit, stmt, env)
            branches = [taken] if taken is not None else [stmt.body, stmt.orelse]
            for branch in branches:
                found = _find_call(unit, fn, branch, env, depth)
                if found is not None:
                    return found
            continue
        for node in ast.walk(stmt):
            if isinstance(node, ast.Call) and _calls(node, fn.name):
                return _bind_call(unit, fn, node, env)
        for node in ast.walk(stmt):
            found = _through_helper(unit, fn, node, env, depth) if isinstance(node, ast.Call) else None
            if found is not None:
                return found
        _run_assign(unit, stmt, env)
    return None


def _through_helper(
    unit: Unit, fn: ast.FunctionDef, call: ast.Call, env: Mapping[str, object], depth: int
) -> dict[str, object] | None:
    """main() -> test_gemm(1024, 1024, 1024, dtype) -> matmul.compile(..., dtype=dtype)."""
    helper = helper_functions(unit).get(_callee(call.func) or "") if isinstance(call.func, ast.Name) else None
    if helper is None or helper is fn or depth >= 3 or helper in kernel_functions(unit.tree):
        return None
    inner = {**_defaults(unit, helper.args), **_bind_call(unit, helper, call, env)}
    return _find_call(unit, fn, helper.body, inner, depth + 1)


def _static_branch(unit: Unit, stmt: ast.If, env: Mapping[str, object]) -> list[ast.stmt] | None:
    value = _try_eval(unit, stmt.test, env)
    if value is UNKNOWN:
        return None
    return stmt.body if value else stmt.orelse


def _calls(node: ast.Call, name: str) -> bool:
    f = node.func
    if isinstance(f, ast.Name):
        return f.id == name
    return isinstance(f, ast.Attribute) and f.attr == "compile" and isinstance(f.value, ast.Name) and f.value.id == name


def _bind_call(unit: Unit, fn: ast.FunctionDef, call: ast.Call, env: Mapping[str, object]) -> dict[str, object]:
    names = [a.arg for a in fn.args.posonlyargs + fn.args.args]
    values: dict[str, object] = {}
    for name, arg in zip(names, call.args, strict=False):
        values[name] = _try_eval(unit, arg, env)
    for kw in call.keywords:
        if kw.arg:
            values[kw.arg] = _try_eval(unit, kw.value, env)
    return {k: v for k, v in values.items() if v is not UNKNOWN}


def _run_assign(unit: Unit, stmt: ast.stmt, env: dict[str, object]) -> None:
    """Track `M = 1024` / `M, N = 8192, 8192` of a scope searched for call sites."""
    if not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1:
        return
    target, value = stmt.targets[0], stmt.value
    pairs = _pairs(target, value)
    for name_node, value_node in pairs:
        env[name_node.id] = _try_eval(unit, value_node, env) if value_node is not None else UNKNOWN


def _pairs(target: ast.expr, value: ast.expr) -> list[tuple[ast.Name, ast.expr | None]]:
    if isinstance(target, ast.Name):
        return [(target, value)]
    if isinstance(target, ast.Tuple) and all(isinstance(t, ast.Name) for t in target.elts):
        names = [t for t in target.elts if isinstance(t, ast.Name)]
        if isinstance(value, ast.Tuple) and len(value.elts) == len(names):
            return list(zip(names, value.elts, strict=True))
        return [(n, None) for n in names]
    return []


def _autotune_values(unit: Unit, fn: ast.FunctionDef) -> dict[str, object]:
    """`@autotune(configs=get_configs())` whose get_configs offers one value per key."""
    funcs = helper_functions(unit)
    for d in fn.decorator_list:
        if not (isinstance(d, ast.Call) and _callee(d.func) == "autotune"):
            continue
        configs = next((k.value for k in d.keywords if k.arg == "configs"), None)
        if isinstance(configs, ast.Call) and _callee(configs.func) in funcs:
            return _single_config(unit, funcs[_callee(configs.func) or ""])
    return {}


def _single_config(unit: Unit, fn: ast.FunctionDef) -> dict[str, object]:
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and _callee(node.func) == "dict" and node.keywords:
            values = {k.arg: _try_eval(unit, k.value, {}) for k in node.keywords if k.arg}
            if all(isinstance(v, tuple) and len(v) == 1 for v in values.values()):
                return {k: v[0] for k, v in values.items()}  # type: ignore[index]
    return {}


# ---------------------------------------------------------------- the Python around the kernel


@dataclass
class Function:
    """One kernel function being converted."""

    unit: Unit
    fn: ast.FunctionDef
    scope: dict[str, Binding]
    config: dict[str, object]
    tensors: list[tuple[str, ast.expr, ast.expr]] = field(default_factory=list)  # style 1
    lets: list[tuple[str, ast.expr]] = field(default_factory=list)
    kernel_with: ast.With | None = None
    prim_funcs: list[tuple[ast.FunctionDef, dict[str, Binding]]] = field(default_factory=list)


def convert_function(unit: Unit, fn: ast.FunctionDef) -> None:
    config = config_values(unit, fn)
    scope = dict(unit.module)
    for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs:
        value = config.get(a.arg, UNKNOWN)
        value = _fallback_value(unit, a.arg) if value is UNKNOWN else value
        kind = "dim" if value is UNKNOWN else "param"  # no value: a symbolic dimension, if it can be one
        scope[a.arg] = _new(unit, kind, a.arg, value, node=a, owner=fn.name)
    f = Function(unit, fn, scope, config)
    run_python(f, fn.body, scope)
    if f.kernel_with is not None:
        emit_style1(f)
    for prim, closure in f.prim_funcs:
        emit_prim_func(f, prim, closure)
    if f.kernel_with is None and not f.prim_funcs:
        raise unit.fail(fn, f"'{fn.name}' has no Kernel block and returns no prim_func", "see docs/import-tilelang.md")


def _new(unit: Unit, kind: str, name: str, value: object = UNKNOWN, **kw) -> Binding:
    unit.out.counter += 1
    return Binding(kind, name, value, order=unit.out.counter, **kw)


def run_python(f: Function, body: list[ast.stmt], scope: dict[str, Binding]) -> None:
    """Run the statements of the jit function (or factory) around the kernel, statically."""
    for stmt in body:
        run_python_stmt(f, stmt, scope)


def run_python_stmt(f: Function, stmt: ast.stmt, scope: dict[str, Binding]) -> None:
    unit = f.unit
    match stmt:
        case ast.Expr(value=ast.Constant()) | ast.Assert() | ast.Pass() | ast.Import() | ast.ImportFrom():
            return
        case ast.Assign(value=ast.Call() as call) if _t_call(call) in ("const", "symbolic", "dynamic"):
            _bind_dims(f, stmt, call, scope)
        case ast.Assign(targets=[ast.Name(id=name)], value=ast.Call() as call) if _t_call(call) == "empty":
            f.tensors.append((name, _arg(unit, call, 0, "shape"), _arg(unit, call, 1, "dtype")))
            scope[name] = _new(unit, "tensor", name)
        case ast.AnnAssign(target=ast.Name(id=name), annotation=ast.Call() as ann, value=None) if _t_call(ann) in (
            "Tensor",
            "Buffer",
        ):
            f.tensors.append((name, _arg(unit, ann, 0, "shape"), _arg(unit, ann, 1, "dtype")))
            scope[name] = _new(unit, "tensor", name)
        case ast.Assign() | ast.AnnAssign():
            _bind_python(unit, stmt, scope, owner=f.fn.name)
        case ast.If():
            _python_if(f, stmt, scope)
        case ast.FunctionDef():
            _python_def(f, stmt, scope)
        case ast.Return(value=value):
            _python_return(f, value, scope)
        case ast.With() if _is_kernel_with(stmt):
            f.kernel_with = stmt
        case _:
            raise unit.fail(
                stmt,
                f"cannot convert this Python statement outside the kernel ({type(stmt).__name__.lower()})",
                "only assignments, T.const, tensor annotations, T.empty and ifs with static conditions are read here",
            )


def _t_call(node: ast.Call) -> str | None:
    """`f` of a call `T.f(...)`."""
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) and _is_t(func.value) else None


def _arg(unit: Unit, call: ast.Call, index: int, name: str) -> ast.expr:
    if index < len(call.args):
        return call.args[index]
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    raise unit.fail(call, f"expected the argument '{name}'")


def _bind_dims(f: Function, stmt: ast.Assign, call: ast.Call, scope: dict[str, Binding]) -> None:
    """`M, N = T.const("M, N")`: symbolic dimensions (params where a value is needed constant)."""
    targets = stmt.targets[0]
    names = [t.id for t in targets.elts if isinstance(t, ast.Name)] if isinstance(targets, ast.Tuple) else []
    if isinstance(targets, ast.Name):
        names = [targets.id]
    for name in names:
        scope[name] = _new(f.unit, "dim", name, f.config.get(name, UNKNOWN), node=stmt)


def _bind_python(
    unit: Unit, stmt: ast.Assign | ast.AnnAssign, scope: dict[str, Binding], quiet: bool = False, owner: str = ""
) -> None:
    """A Python local: a param (its formula kept), a let of dimensions, an inline tuple, or opaque."""
    if isinstance(stmt, ast.AnnAssign):
        if stmt.value is None or not isinstance(stmt.target, ast.Name):
            return
        pairs: list[tuple[ast.Name, ast.expr | None]] = [(stmt.target, stmt.value)]
    else:
        pairs = [p for t in stmt.targets for p in _pairs(t, stmt.value)]  # `BK = BV = 64` too
    if not pairs and not quiet:
        raise unit.fail(stmt, "cannot convert this assignment", "assign one name (or a tuple of names) at a time")
    unpacked = _unpacked(unit, stmt.value, scope, len(pairs)) if stmt.value is not None else None
    for i, (target, value) in enumerate(pairs):
        if value is None and unpacked is not None:
            scope[target.id] = _new(unit, "param", target.id, unpacked[i], node=stmt, owner=owner)
            continue
        if value is None:
            scope[target.id] = _new(unit, "opaque", target.id, reason="a value unpacked from an expression")
            continue
        scope[target.id] = _local(unit, target.id, value, scope, stmt)
        scope[target.id].owner = owner


def _unpacked(unit: Unit, value: ast.expr, scope: dict[str, Binding], n: int) -> tuple | None:
    """`M, K = A.shape` of `A = torch.rand(m, k, ...)`: a static tuple of n items, or None."""
    if isinstance(value, ast.Attribute) and value.attr == "shape" and isinstance(value.value, ast.Name):
        b = scope.get(value.value.id)
        calls = [c for c in ast.walk(b.node) if isinstance(c, ast.Call)] if b is not None and b.node else []
        for call in calls[:1]:  # torch.rand(m, k) * 2 - 1 has rand's shape
            dims = tuple(_try_eval(unit, a, _values(scope)) for a in call.args)
            if _callee(call.func) in TORCH_FACTORIES and len(dims) == n and UNKNOWN not in dims:
                return dims
    static = _try_eval(unit, value, _values(scope))
    return static if isinstance(static, tuple) and len(static) == n else None


def _local(unit: Unit, name: str, value: ast.expr, scope: dict[str, Binding], stmt: ast.stmt) -> Binding:
    static = _try_eval(unit, value, _values(scope))
    try:
        translated = Translator(unit, scope, outer=True, dry=True).expr(value)
    except CompileError as exc:
        if isinstance(static, (int, float, bool, DType)):
            return _new(unit, "param", name, static, node=stmt)
        reason = exc.diagnostics[0].message
        return _new(unit, "opaque", name, node=value, reason=reason)
    comment = unit.comments.get(stmt.lineno)
    if _host_query(value):
        comment = f"# {HOST_QUERIES[_host_query(value) or '']}"
    uses = {n.id for n in ast.walk(value) if isinstance(n, ast.Name)}
    if isinstance(static, tuple | str) or isinstance(value, ast.Tuple | ast.List):
        if not (isinstance(static, str) and dtype_name(static)):
            return _new(unit, "inline", name, static, node=value)
    if any(scope[u].kind in ("dim", "let") for u in uses if u in scope):
        return _new(unit, "let", name, node=value)
    if isinstance(value, ast.Constant):
        return _new(unit, "param", name, static, node=stmt, comment=comment)
    return _new(unit, "param", name, static, node=value, definition=translated, comment=comment, scope=dict(scope))


def _host_query(value: ast.expr) -> str | None:
    if isinstance(value, ast.Call) and _callee(value.func) in HOST_QUERIES:
        return _callee(value.func)
    return None


def _values(scope: Mapping[str, Binding]) -> dict[str, object]:
    return {k: b.value for k, b in scope.items() if b.value is not UNKNOWN}


def _python_if(f: Function, stmt: ast.If, scope: dict[str, Binding]) -> None:
    taken = _static_branch(f.unit, stmt, _values(scope))
    if taken is None:
        raise f.unit.fail(
            stmt.test,
            "cannot evaluate this Python condition outside the kernel statically",
            "give the names it reads values (defaults, main()'s call, -D NAME=VALUE), or move the if into the kernel",
        )
    run_python(f, taken, scope)


def _python_def(f: Function, stmt: ast.FunctionDef, scope: dict[str, Binding]) -> None:
    names = {_decorator_name(d) for d in stmt.decorator_list}
    if "prim_func" in names:
        scope[stmt.name] = _new(f.unit, "prim_func", stmt.name, node=stmt)  # a kernel once returned
        return
    if "macro" in names:
        raise f.unit.fail(stmt, "T.macro functions are not converted yet", "write the macro in the .tile file by hand")
    scope[stmt.name] = _new(f.unit, "def", stmt.name, node=stmt)


def _python_return(f: Function, value: ast.expr | None, scope: dict[str, Binding]) -> None:
    match value:
        case ast.Name(id=name) if name in scope and scope[name].kind == "prim_func":
            prim = scope[name].node
            assert isinstance(prim, ast.FunctionDef)
            f.prim_funcs.append((prim, dict(scope)))
        case ast.Call(func=ast.Name(id=name)) if name in scope and scope[name].kind == "def":
            _call_nested(f, value, scope)
        case _:
            return  # style 1 returns its outputs


def _call_nested(f: Function, call: ast.Call, scope: dict[str, Binding]) -> None:
    """`return kernel_func(block_M, ...)`: run the nested function with its arguments bound."""
    fn = scope[_callee(call.func) or ""].node
    assert isinstance(fn, ast.FunctionDef)
    inner = dict(scope)
    names = [a.arg for a in fn.args.args]
    for name, arg in zip(names, call.args, strict=False):
        inner[name] = _alias(f, name, arg, scope)
    for kw in call.keywords:
        if kw.arg:
            inner[kw.arg] = _alias(f, kw.arg, kw.value, scope)
    run_python(f, fn.body, inner)


def _alias(f: Function, name: str, arg: ast.expr, scope: dict[str, Binding]) -> Binding:
    if isinstance(arg, ast.Name) and arg.id in scope:
        return scope[arg.id]
    return _local(f.unit, name, arg, scope, arg)  # type: ignore[arg-type]


def _is_kernel_with(stmt: ast.With) -> bool:
    expr = stmt.items[0].context_expr
    return isinstance(expr, ast.Call) and _t_call(expr) == "Kernel"


# ---------------------------------------------------------------- kernels


def kernel_name(f: Function, name: str) -> str:
    """A prim_func `main` is named after its factory (a kernel `main` cannot be launched from C)."""
    if name == "main":
        name = f.fn.name.lstrip("_") or "kernel"
    return _safe_name(name)


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


def _safe_name(name: str) -> str:
    return name + "_" if name in TILE_KEYWORDS else name


def emit_style1(f: Function) -> None:
    assert f.kernel_with is not None
    tr = Translator(f.unit, f.scope)
    _mark_constant_dims(f, [f.kernel_with], f.scope)
    params = [f"{_safe_name(n)}: Tensor({tr.shape(shape)}, {tr.expr(dtype)})" for n, shape, dtype in f.tensors]
    body = tr.block([f.kernel_with], 1)
    lines = [kernel_header(kernel_name(f, f.fn.name), params), *_lets(f, f.scope, tr), *body]
    f.unit.out.kernels.append("\n".join(lines))


def emit_prim_func(f: Function, prim: ast.FunctionDef, closure: dict[str, Binding]) -> None:
    scope = dict(closure)
    tr = Translator(f.unit, scope)
    params = [_kernel_param(f, a, scope, tr) for a in prim.args.args]
    _mark_constant_dims(f, prim.body, scope)
    body = tr.block(prim.body, 1)
    lines = [kernel_header(kernel_name(f, prim.name), params), *_lets(f, scope, tr), *body]
    f.unit.out.kernels.append("\n".join(lines))


def _kernel_param(f: Function, a: ast.arg, scope: dict[str, Binding], tr: Translator) -> str:
    ann = a.annotation
    name = _safe_name(a.arg)
    if isinstance(ann, ast.Call) and _t_call(ann) in ("Tensor", "Buffer"):
        text = f"{name}: Tensor({tr.shape(_arg(f.unit, ann, 0, 'shape'))}, {tr.expr(_arg(f.unit, ann, 1, 'dtype'))})"
        scope[a.arg] = _new(f.unit, "tensor", name)
        return text
    if isinstance(ann, ast.Attribute) and _is_t(ann.value) and dtype_name(ann.attr):
        scope[a.arg] = _new(f.unit, "scalar", name)
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
            lines.append(f"    {_safe_name(b.name)} = {tr.expr(b.node)}")
    return lines[::-1]


def _mark_constant_dims(f: Function, body: list[ast.stmt], scope: dict[str, Binding]) -> None:
    """Dimensions an allocation shape or a Parallel extent uses become params (with a value)."""
    for node in ast.walk(ast.Module(body=body, type_ignores=[])):
        if isinstance(node, ast.Call) and (_t_call(node) or "").startswith(("alloc_", "Parallel")):
            for n in ast.walk(node):
                if isinstance(n, ast.Name) and n.id in scope and scope[n.id].kind == "dim":
                    _dim_to_param(f, scope, n)


def _dim_to_param(f: Function, scope: dict[str, Binding], n: ast.Name) -> None:
    b = scope[n.id]
    value = b.value if b.value is not UNKNOWN else _fallback_value(f.unit, n.id)
    if value is UNKNOWN:
        raise f.unit.fail(
            n,
            f"the {'argument' if isinstance(b.node, ast.arg) else 'dimension'} '{n.id}' must be a compile-time "
            "constant here, and no value for it can be read statically",
            f"pass it: tilec import-tilelang ... -D {n.id}=VALUE",
        )
    b.kind, b.value = "param", value


def _fallback_value(unit: Unit, name: str) -> object:
    """A value for `name` from the __main__ block or the module (`N, D = 4096, 8192`)."""
    for body, env in _call_scopes(unit):
        for stmt in body:
            _run_assign(unit, stmt, env)
        if env.get(name, UNKNOWN) is not UNKNOWN:
            return env[name]
    return UNKNOWN


# ---------------------------------------------------------------- statements and expressions


class Translator:
    """Kernel statements and expressions to .tile text; `outer` for the Python around the kernel."""

    def __init__(self, unit: Unit, scope: dict[str, Binding], outer: bool = False, dry: bool = False):
        self.unit, self.scope, self.outer, self.dry = unit, scope, outer, dry
        self.used: set[str] = set()
        self.scalars: set[str] = set()  # 1-element "local" fragments, written as alloc_var
        self.prev_line = 0

    # ---- statements

    def block(self, body: list[ast.stmt], depth: int, after: ast.AST | None = None) -> list[str]:
        """`body` at `depth`; `after`: the header it follows (the comments between them are kept)."""
        if after is not None:
            self.prev_line = getattr(after, "end_lineno", None) or self.prev_line
        lines: list[str] = []
        for stmt in body:
            lines += self._leading(stmt, depth)
            lines += self.stmt(stmt, depth)
            self.prev_line = getattr(stmt, "end_lineno", stmt.lineno)
        return lines or ["    " * depth + "pass"]

    def _leading(self, stmt: ast.stmt, depth: int) -> list[str]:
        """Blank lines and whole-line comments between the previous statement and this one."""
        if not self.prev_line:
            return []
        out: list[str] = []
        for line in range(self.prev_line + 1, stmt.lineno):
            text = self.unit.source.line_text(line).strip()
            if not text and (not out or out[-1]):
                out.append("")
            elif text.startswith("#"):
                out.append("    " * depth + text)
        return out

    def stmt(self, s: ast.stmt, depth: int) -> list[str]:
        pad = "    " * depth
        match s:
            case ast.With(items=[item]) if isinstance(item.context_expr, ast.Call):
                head = f"with {self.expr(item.context_expr)}"
                if item.optional_vars is not None:
                    head += f" as {self.target(item.optional_vars)}"
                return [f"{pad}{head}:", *self.block(s.body, depth + 1, item.context_expr)]
            case ast.For(target=t, iter=it, body=body, orelse=[]):
                return [f"{pad}for {self.target(t, bare=True)} in {self.loop(it)}:", *self.block(body, depth + 1, it)]
            case ast.While(test=t, body=body, orelse=[]):
                return [f"{pad}while {self.expr(t)}:", *self.block(body, depth + 1, t)]
            case ast.If():
                return self.if_stmt(s, depth, "if")
            case ast.Assign(targets=[t], value=v):
                return self.assign(t, v, pad)
            case ast.AugAssign(target=t, op=op, value=v):
                target = self.node(t)
                assert isinstance(target, ast.Name | ast.Attribute | ast.Subscript)
                return [pad + ast.unparse(ast.AugAssign(target, op, self.node(v)))]
            case ast.Expr(value=ast.Constant(value=str())):
                return []
            case ast.Expr(value=ast.Call() as call):
                stmt_text = self.call_stmt(call)
                return [pad + stmt_text] if stmt_text else []
            case ast.Pass():
                return [pad + "pass"]
            case ast.Break():
                return [pad + "break"]
        raise self.unit.fail(
            s, f"cannot convert this statement inside the kernel ({type(s).__name__.lower()})", _hint(s)
        )

    def if_stmt(self, s: ast.If, depth: int, word: str) -> list[str]:
        pad = "    " * depth
        lines = [f"{pad}{word} {self.expr(s.test)}:", *self.block(s.body, depth + 1, s.test)]
        if len(s.orelse) == 1 and isinstance(s.orelse[0], ast.If):
            return lines + self.if_stmt(s.orelse[0], depth, "elif")
        if s.orelse:
            lines += [f"{pad}else:", *self.block(s.orelse, depth + 1)]
        return lines

    def assign(self, t: ast.expr, v: ast.expr, pad: str) -> list[str]:
        if isinstance(t, ast.Name) and _local_fragment(v):
            assert isinstance(v, ast.Call)
            self.scalars.add(t.id)
            self.scope.pop(t.id, None)
            return [f"{pad}{_safe_name(t.id)} = alloc_var({self.expr(v.args[1])})"]
        if isinstance(t, ast.Name):
            self.scope.pop(t.id, None)  # a kernel-local name from here on
            return [f"{pad}{_safe_name(t.id)} = {self.expr(v)}"]
        if isinstance(t, ast.Subscript):
            return [f"{pad}{self.expr(t)} = {self.expr(v)}"]
        raise self.unit.fail(
            t, "cannot convert an assignment to several names inside the kernel", "assign each name alone"
        )

    def target(self, t: ast.expr, bare: bool = False) -> str:
        names = t.elts if isinstance(t, ast.Tuple) else [t]
        for n in names:
            if not isinstance(n, ast.Name):
                raise self.unit.fail(n, "expected a name here")
            self.scope.pop(n.id, None)
        text = ", ".join(_safe_name(n.id) for n in names if isinstance(n, ast.Name))
        return text if bare or not isinstance(t, ast.Tuple) else f"({text})"

    def loop(self, it: ast.expr) -> str:
        name = _t_call(it) if isinstance(it, ast.Call) else None
        if isinstance(it, ast.Call) and (name in LOOPS or (isinstance(it.func, ast.Name) and it.func.id == "range")):
            return self.expr(it)
        if name in UNSUPPORTED:
            raise self.unit.fail(it, UNSUPPORTED[name][0], UNSUPPORTED[name][1])
        what = f"T.{name}" if name else ast.unparse(it)
        raise self.unit.fail(
            it, f"cannot convert the loop over {what}", "use T.Pipelined, T.Parallel, T.serial or T.unroll"
        )

    def call_stmt(self, call: ast.Call) -> str | None:
        name = _t_call(call)
        if name == "annotate_layout":
            raise self.unit.fail(
                call,
                "T.annotate_layout is not converted (TileLang's layouts are dicts of T.Layout / swizzle functions)",
                'drop it (tilec infers shared layouts), or write annotate_layout(buf, "swizzle_128B") by hand',
            )
        if name == "use_swizzle":
            return self.use_swizzle(call)
        return self.expr(call)

    def use_swizzle(self, call: ast.Call) -> str | None:
        enable = next((k.value for k in call.keywords if k.arg == "enable"), None)
        if enable is not None:
            on = _try_eval(self.unit, enable, _values(self.scope))
            if on is UNKNOWN:
                raise self.unit.fail(
                    enable, "use_swizzle's enable= must be known statically", "drop the call or the argument"
                )
            if not on:
                return None
        kept = [k for k in call.keywords if k.arg not in ("enable", "panel_size")]
        panel = next((k.value for k in call.keywords if k.arg == "panel_size"), None)
        args = [*call.args, *([panel] if panel is not None else [])]
        return self.expr(ast.Call(ast.Name("use_swizzle"), args, kept))

    # ---- expressions

    def expr(self, node: ast.AST) -> str:
        return ast.unparse(self.node(node))

    def shape(self, node: ast.expr) -> str:
        text = self.expr(node)
        return text if text.startswith(("(", "[")) else f"({text},)"

    def node(self, node: ast.AST) -> ast.expr:
        """The .tile form of an expression, as an ast (ast.unparse prints it with Python's precedence)."""
        match node:
            case ast.Name(id=name):
                return self.name(node, name)
            case ast.Constant(value=v) if isinstance(v, (int, float, str, bool)):
                return ast.Constant(_dtype_string(v))
            case ast.Attribute():
                return self.attribute(node)
            case ast.Call():
                return self.call(node)
            case ast.BinOp(left=a, op=op, right=b):
                return ast.BinOp(self.node(a), op, self.node(b))
            case ast.UnaryOp(op=op, operand=a):
                return ast.UnaryOp(op, self.node(a))
            case ast.BoolOp(op=op, values=vs):
                return ast.BoolOp(op, [self.node(v) for v in vs])
            case ast.Compare(left=a, ops=ops, comparators=cs):
                return ast.Compare(self.node(a), ops, [self.node(c) for c in cs])
            case ast.IfExp(test=t, body=b, orelse=o):
                taken = _try_eval(self.unit, t, _values(self.scope))  # `(M, K) if not trans_A else (K, M)`
                if taken is not UNKNOWN:
                    return self.node(b if taken else o)
                return ast.IfExp(self.node(t), self.node(b), self.node(o))
            case ast.Subscript(value=ast.Name(id=n), slice=ast.Constant(value=0)) if n in self.scalars:
                return ast.Name(_safe_name(n))
            case ast.Subscript(value=v, slice=s):
                return ast.Subscript(self.node(v), self.node(s))
            case ast.Slice(lower=lo, upper=hi, step=None):
                return ast.Slice(self.node(lo) if lo else None, self.node(hi) if hi else None)
            case ast.Tuple(elts=es):
                return ast.Tuple([self.node(e) for e in es])
            case ast.List(elts=es):
                return ast.List([self.node(e) for e in es])
        raise self.unit.fail(
            node, f"cannot convert this Python expression ({type(node).__name__.lower()})", _hint(node)
        )

    def name(self, node: ast.Name, name: str) -> ast.expr:
        b = self.scope.get(name)
        if b is None:
            if name in ("True", "False") or name in PYTHON_FUNCS or not self.outer:
                return ast.Name(_safe_name(name))  # a kernel-local name (buffer, loop variable, let)
            raise self.unit.fail(node, f"'{name}' has no value that can be read statically")
        return self.binding(node, b)

    def binding(self, node: ast.AST, b: Binding) -> ast.expr:
        match b.kind:
            case "param":
                return ast.Name(b.name if self.dry else use_param(self.unit, b, node))
            case "inline":
                assert b.node is not None
                return self.node(b.node)
            case "dim" | "tensor" | "scalar" | "let":
                self.used.add(b.name)
                return ast.Name(_safe_name(b.name))
            case "opaque":
                raise self.unit.fail(
                    node,
                    f"'{b.name}' cannot be converted: {b.reason}",
                    "compute it in the kernel, or give it a static value",
                )
        raise self.unit.fail(node, f"'{b.name}' is a Python function, not a value of the kernel")

    def attribute(self, node: ast.Attribute) -> ast.expr:
        if _is_t(node.value):
            return ast.Name(self.t_name(node, node.attr))
        if isinstance(node.value, ast.Attribute) and _is_t(node.value.value) and node.value.attr == "GemmWarpPolicy":
            return ast.Attribute(ast.Name("GemmWarpPolicy"), node.attr)
        if node.attr in ("dtype", "shape"):
            return ast.Attribute(self.node(node.value), node.attr)
        raise self.unit.fail(node, f"cannot convert the attribute '.{node.attr}'", "only .dtype and .shape of buffers")

    def t_name(self, node: ast.AST, name: str) -> str:
        if name in UNSUPPORTED:
            raise self.unit.fail(node, UNSUPPORTED[name][0], UNSUPPORTED[name][1])
        dtype = dtype_name(name)
        if dtype:
            return dtype
        if name in ALL_SIGS or name in POLICIES:
            return name
        raise self.unit.fail(
            node, f"T.{name} has no .tile equivalent", "see docs/language.md for the tile ops and built-in functions"
        )

    def call(self, node: ast.Call) -> ast.expr:
        name = _t_call(node)
        func = node.func
        if name is not None:
            special = self.t_special(node, name)
            if special is not None:
                return special
            keywords = [k for k in node.keywords if k.arg not in DROPPED_KEYWORDS.get(name, ())]
            return self.plain_call(ast.Name(self.t_name(func, name)), node.args, keywords)
        if isinstance(func, ast.Attribute) and func.attr == "astype" and len(node.args) == 1:
            return ast.Call(ast.Name("cast"), [self.node(func.value), self.node(node.args[0])], [])
        if isinstance(func, ast.Name) and (func.id in PYTHON_FUNCS or func.id in ALL_SIGS):
            return self.plain_call(ast.Name(func.id), node.args, node.keywords)
        if isinstance(func, ast.Attribute) and ast.unparse(func.value) == "tilelang" and func.attr in TILE_CALLEES:
            return self.plain_call(ast.Name(TILE_CALLEES[func.attr]), node.args, node.keywords)
        static = _try_eval(self.unit, node, _values(self.scope))
        if isinstance(static, (int, float, bool)):
            return ast.Constant(static)
        raise self.unit.fail(
            node, f"cannot convert the call of '{ast.unparse(func)}'", "use T. primitives, or give it a static value"
        )

    def plain_call(self, func: ast.expr, args: list[ast.expr], keywords: list[ast.keyword]) -> ast.Call:
        for a in args:
            if isinstance(a, ast.Starred):
                raise self.unit.fail(a, "cannot convert *arguments", "write the arguments out")
        return ast.Call(func, [self.node(a) for a in args], [ast.keyword(k.arg, self.node(k.value)) for k in keywords])

    def t_special(self, node: ast.Call, name: str) -> ast.expr | None:
        """T. calls whose .tile form differs from the call with `T.` dropped."""
        args = node.args
        if name == "Cast" and len(args) == 2:
            return ast.Call(ast.Name("cast"), [self.node(args[1]), self.node(args[0])], [])
        if name in ("floordiv", "floormod", "truncdiv", "truncmod") and len(args) == 2:
            op = ast.FloorDiv() if name.endswith("div") else ast.Mod()
            return ast.BinOp(self.node(args[0]), op, self.node(args[1]))
        if name == "get_thread_binding" and _static_zero(args):
            return ast.Call(ast.Name("thread_index"), [], [])
        if name in TILE_CALLEES:
            return self.plain_call(ast.Name(TILE_CALLEES[name]), args, node.keywords)
        if dtype_name(name) and len(args) == 1 and name not in UNSUPPORTED:
            return ast.Call(ast.Name("cast"), [self.node(args[0]), ast.Name(dtype_name(name) or name)], [])
        return None


def _local_fragment(v: ast.expr) -> bool:
    """`T.alloc_fragment((1,), dtype, "local")`: one register per thread, an alloc_var."""
    if not (isinstance(v, ast.Call) and _t_call(v) == "alloc_fragment" and len(v.args) == 3):
        return False
    shape, scope = v.args[0], v.args[2]
    one = isinstance(shape, ast.Tuple | ast.List) and ast.unparse(shape).strip("()[],") == "1"
    return one and isinstance(scope, ast.Constant) and scope.value == "local"


def _static_zero(args: list[ast.expr]) -> bool:
    return not args or (isinstance(args[0], ast.Constant) and args[0].value == 0)


def _dtype_string(v: str | int | float | bool) -> str | int | float | bool:
    """`"float"` as a dtype argument is float32: TileLang's spellings become tilec's."""
    if isinstance(v, str) and v in DTYPE_SPELLINGS:
        return DTYPE_SPELLINGS[v]
    return v


def _hint(node: ast.AST) -> str:
    if isinstance(node, ast.Lambda):
        return "lambdas have no .tile form; write the computation into the kernel"
    if isinstance(node, ast.ListComp | ast.GeneratorExp | ast.DictComp | ast.SetComp):
        return "comprehensions have no .tile form; write the values out"
    if isinstance(node, ast.Continue):
        return "tilec has no `continue`: put the rest of the body under an if"
    return "see docs/import-tilelang.md for what converts"


def use_param(unit: Unit, b: Binding, node: ast.AST) -> str:
    """The output name of the param `b`, writing its definition the first time it is used."""
    if b.final is not None:
        return b.final
    text = _param_text(unit, b, node)
    name = _safe_name(b.name)
    if unit.out.params.get(name, (0, text))[1] != text:
        name = _free_name(unit, f"{b.owner.lstrip('_')}_{b.name}")
    b.final = name
    unit.out.params.setdefault(name, (b.order, text))
    return name


def _param_text(unit: Unit, b: Binding, node: ast.AST) -> str:
    if b.definition is not None and b.value is not UNKNOWN and _shadowed(unit, b):
        text = literal(b.value)
    elif b.definition is not None:
        assert isinstance(b.node, ast.expr)
        text = Translator(unit, b.scope if b.scope is not None else unit.module, outer=True).expr(b.node)
    elif b.value is UNKNOWN:
        raise unit.fail(
            node,
            f"'{b.name}' has no value that can be read statically",
            f"give it a default, call the function in main() with it, or pass -D {b.name}=VALUE",
        )
    else:
        text = literal(b.value)
    comment = f"  {b.comment}" if b.comment else ""
    return f"{text}{comment}"


def _shadowed(unit: Unit, b: Binding) -> bool:
    """A definition naming a module-level value whose name a kernel reuses: written as its value."""
    names = {n.id for n in ast.walk(b.node) if isinstance(n, ast.Name)} if b.node else set()
    return any(unit.module.get(n) is not None and (b.scope or {}).get(n) is not unit.module.get(n) for n in names)


def _free_name(unit: Unit, name: str) -> str:
    while name in unit.out.params:
        name += "_"
    return name


def literal(value: object) -> str:
    """A Python value as a .tile literal."""
    if isinstance(value, DType):
        return value.name
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, str):
        return dtype_name(value) or repr(value)
    if isinstance(value, (int, float)):
        return repr(value)
    raise NotStatic


# ---------------------------------------------------------------- output


def render(unit: Unit, path: str, commit: str | None) -> str:
    at = f" @ {commit}" if commit else ""
    lines = [f"# source: {path}{at}", "# converted by `tilec import-tilelang`"]
    params = sorted(unit.out.params.items(), key=lambda item: item[1][0])
    lines += [f"param {name} = {text}" for name, (_, text) in params]
    return "\n".join(lines) + "\n\n" + "\n\n\n".join(unit.out.kernels) + "\n"


SOURCE_LINE = re.compile(r"^# source: (\S+\.py)(?: @ ([0-9a-f]{40}))?$", re.M)


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
