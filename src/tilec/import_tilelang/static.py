"""The static side of the converter: what a Python name of the program stands for
(`Binding`, `Unit`), the values of the Python outside the kernel computed without running it
(`evaluate`: constants, arithmetic, `T.float16`, `math.ceil`, small module-level helpers), and
the values the file gives a kernel function's config arguments (`config_values`):

    @autotune(configs=get_configs())              # get_configs: dict(block_M=[128]) -> block_M = 128
    def matmul(M, N, K, block_M=64, threads=128): # the defaults            -> threads = 128
    def main():
        matmul(1024, 1024, 1024)                  # the call in main()      -> M = N = K = 1024

`-D NAME=VALUE` wins over a single autotune config, which wins over the call site (main(), the
`__main__` block, module-level calls, then other functions), which wins over the defaults.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from tilec.builtins import UNSUPPORTED
from tilec.diagnostics import CompileError, Diagnostic
from tilec.dtypes import DTYPE_NAMES
from tilec.source import SourceFile, Span

DTYPE_SPELLINGS = {"float": "float32", "half": "float16", "double": "float64", "int": "int32", "bfloat": "bfloat16"}


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
        """The span of `node` in this file."""
        return _span(self.source, node)

    def fail(self, node: ast.AST, message: str, hint: str | None = None) -> CompileError:
        """A CompileError at `node` (raise it)."""
        return CompileError([Diagnostic(self.span(node), message, hint)])


def _span(source: SourceFile, node: ast.AST) -> Span:
    """The character span of an ast node (ast counts columns in UTF-8 bytes)."""
    line = getattr(node, "lineno", 1)
    end_line = getattr(node, "end_lineno", None) or line
    start = offset(source, line, getattr(node, "col_offset", 0))
    end = offset(source, end_line, getattr(node, "end_col_offset", None) or 0)
    return Span(source, start, max(end, start + 1))


def offset(source: SourceFile, line: int, byte_col: int) -> int:
    """The character offset of (line, UTF-8 byte column) in `source`."""
    line = min(max(line, 1), len(source.line_starts))
    text = source.line_text(line).encode()[:byte_col].decode(errors="ignore")
    return source.line_starts[line - 1] + len(text)


def new_binding(unit: Unit, kind: str, name: str, value: object = UNKNOWN, **kw) -> Binding:
    """A Binding numbered in definition order (the order params are written in)."""
    unit.out.counter += 1
    return Binding(kind, name, value, order=unit.out.counter, **kw)


def scope_values(scope: Mapping[str, Binding]) -> dict[str, object]:
    """The static values of a scope's names."""
    return {k: b.value for k, b in scope.items() if b.value is not UNKNOWN}


# ---------------------------------------------------------------- static evaluation


def evaluate(node: ast.AST, env: Mapping[str, object], funcs: Mapping[str, ast.FunctionDef] | None = None) -> object:
    """The value of a Python expression built of constants and names of `env`; NotStatic else."""
    value = _eval(node, env, funcs or {})
    if value is UNKNOWN:
        raise NotStatic
    return value


def _eval(node: ast.AST, env: Mapping[str, object], funcs: Mapping[str, ast.FunctionDef]) -> object:
    """`evaluate`'s cases; UNKNOWN for a name without a value."""
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
    """Python's binary operator `op` on static values."""
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
    """Python's unary operator `op` on a static value."""
    try:
        if isinstance(op, ast.Not):
            return not a
        return {ast.USub: lambda x: -x, ast.UAdd: lambda x: +x, ast.Invert: lambda x: ~x}[type(op)](a)
    except Exception as exc:  # noqa: BLE001
        raise NotStatic from exc


def _compare(a: object, ops: list[ast.cmpop], cs: list[object]) -> bool:
    """A chained comparison of static values."""
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
    """`v[s]` of static values."""
    try:
        return v[s]  # type: ignore[index]
    except Exception as exc:  # noqa: BLE001
        raise NotStatic from exc


def _attribute(node: ast.Attribute, env: Mapping[str, object]) -> object:
    """`T.float16` / `torch.float16` as a DType, or `args.m` from the argparse defaults."""
    if is_t(node.value) or (isinstance(node.value, ast.Name) and node.value.id == "torch"):
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


def _call(node: ast.Call, env: Mapping[str, object], funcs: Mapping[str, ast.FunctionDef]) -> object:
    """A call of a STATIC_FUNCS function or of a module-level helper on static arguments."""
    args = [evaluate(a, env, funcs) for a in node.args]
    kwargs = {k.arg: evaluate(k.value, env, funcs) for k in node.keywords if k.arg}
    name = callee(node.func)
    if name is not None and name in funcs and not kwargs and name not in STATIC_FUNCS:
        return _call_python(funcs[name], args, funcs)
    if name in STATIC_FUNCS:
        try:
            return STATIC_FUNCS[name](*args, **kwargs)
        except Exception as exc:  # noqa: BLE001
            raise NotStatic from exc
    raise NotStatic


def callee(func: ast.expr) -> str | None:
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


def is_t(node: ast.AST) -> bool:
    """`T` (tilelang.language) or `tilelang.language`."""
    return (isinstance(node, ast.Name) and node.id == "T") or ast.unparse(node) == "tilelang.language"


def t_call(node: ast.Call) -> str | None:
    """`f` of a call `T.f(...)`."""
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) and is_t(func.value) else None


# ---------------------------------------------------------------- kernel functions


def kernel_functions(tree: ast.Module) -> list[ast.FunctionDef]:
    """The top-level functions that make kernels: `@tilelang.jit` ones and prim_func factories."""
    return [s for s in tree.body if isinstance(s, ast.FunctionDef) and (_is_jit(s) or _has_prim_func(s))]


def _is_jit(fn: ast.FunctionDef) -> bool:
    """A `@tilelang.jit` function."""
    return any(decorator_name(d) == "jit" for d in fn.decorator_list)


def decorator_name(d: ast.expr) -> str | None:
    """`jit` of `@tilelang.jit`, `prim_func` of `@T.prim_func(...)`."""
    return callee(d.func) if isinstance(d, ast.Call) else callee(d)


def _has_prim_func(fn: ast.FunctionDef) -> bool:
    """A factory: a function with a `@T.prim_func` inside."""
    return any(
        isinstance(n, ast.FunctionDef) and any(decorator_name(d) == "prim_func" for d in n.decorator_list)
        for n in ast.walk(fn)
        if n is not fn
    )


# ---------------------------------------------------------------- config values


def helper_functions(unit: Unit) -> dict[str, ast.FunctionDef]:
    """The module-level functions, by name."""
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
    """The value of `-D NAME=TEXT`: an int, a float, a bool, else a dtype."""
    for parse in (int, float):
        try:
            return parse(text)
        except ValueError:
            pass
    if text in ("True", "False"):
        return text == "True"
    return DType(dtype_name(text) or text)


def _defaults(unit: Unit, args: ast.arguments) -> dict[str, object]:
    """The static default values of a function's arguments."""
    values: dict[str, object] = {}
    positional = args.posonlyargs + args.args
    for a, d in zip(positional[len(positional) - len(args.defaults) :], args.defaults, strict=True):
        values[a.arg] = try_eval(unit, d, {})
    for a, kd in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        if kd is not None:
            values[a.arg] = try_eval(unit, kd, {})
    return {k: v for k, v in values.items() if v is not UNKNOWN}


def try_eval(unit: Unit, node: ast.AST, env: Mapping[str, object]) -> object:
    """`evaluate` with the module's values and helpers; UNKNOWN when not static."""
    try:
        return evaluate(node, {**_module_values(unit), **env}, helper_functions(unit))
    except NotStatic:
        return UNKNOWN


def _module_values(unit: Unit) -> dict[str, object]:
    """The static values of the module-level names."""
    return {k: b.value for k, b in unit.module.items() if b.value is not UNKNOWN}


def _call_site_values(unit: Unit, fn: ast.FunctionDef) -> dict[str, object]:
    """The arguments of the first call of `fn` found in `_call_scopes`' order."""
    for body, env in _call_scopes(unit):
        found = _find_call(unit, fn, body, env)
        if found is not None:
            return found
    return {}


def _call_scopes(unit: Unit) -> Iterable[tuple[list[ast.stmt], dict[str, object]]]:
    """Where config values are looked for, in order: main(), the __main__ block, the module, the rest."""
    funcs = helper_functions(unit)
    argparse = _argparse_defaults(unit.tree)
    main_block = [s for s in unit.tree.body if is_main_block(s)]
    if "main" in funcs:
        yield funcs["main"].body, {**argparse, **_defaults(unit, funcs["main"].args)}
    for block in main_block:
        yield block.body, dict(argparse)  # type: ignore[attr-defined]
    yield [s for s in unit.tree.body if not isinstance(s, ast.FunctionDef | ast.ClassDef)], {}
    for name, f in funcs.items():
        if name != "main":
            yield f.body, _defaults(unit, f.args)


def is_main_block(stmt: ast.stmt) -> bool:
    """`if __name__ == "__main__":`."""
    return isinstance(stmt, ast.If) and "__name__" in ast.unparse(stmt.test)


def _argparse_defaults(tree: ast.Module) -> dict[str, object]:
    """`args.m` -> 1024 for `parser.add_argument("--m", type=int, default=1024)`."""
    found: dict[str, object] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and callee(node.func) == "add_argument" and node.args:
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
            taken = static_branch(unit, stmt, env)
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
    helper = helper_functions(unit).get(callee(call.func) or "") if isinstance(call.func, ast.Name) else None
    if helper is None or helper is fn or depth >= 3 or helper in kernel_functions(unit.tree):
        return None
    inner = {**_defaults(unit, helper.args), **_bind_call(unit, helper, call, env)}
    return _find_call(unit, fn, helper.body, inner, depth + 1)


def static_branch(unit: Unit, stmt: ast.If, env: Mapping[str, object]) -> list[ast.stmt] | None:
    """The branch of `stmt` its condition takes, or None when the condition is not static."""
    value = try_eval(unit, stmt.test, env)
    if value is UNKNOWN:
        return None
    return stmt.body if value else stmt.orelse


def _calls(node: ast.Call, name: str) -> bool:
    """`name(...)` or `name.compile(...)`."""
    f = node.func
    if isinstance(f, ast.Name):
        return f.id == name
    return isinstance(f, ast.Attribute) and f.attr == "compile" and isinstance(f.value, ast.Name) and f.value.id == name


def _bind_call(unit: Unit, fn: ast.FunctionDef, call: ast.Call, env: Mapping[str, object]) -> dict[str, object]:
    """The static values `call` passes to `fn`'s arguments, by name."""
    names = [a.arg for a in fn.args.posonlyargs + fn.args.args]
    values: dict[str, object] = {}
    for name, arg in zip(names, call.args, strict=False):
        values[name] = try_eval(unit, arg, env)
    for kw in call.keywords:
        if kw.arg:
            values[kw.arg] = try_eval(unit, kw.value, env)
    return {k: v for k, v in values.items() if v is not UNKNOWN}


def _run_assign(unit: Unit, stmt: ast.stmt, env: dict[str, object]) -> None:
    """Track `M = 1024` / `M, N = 8192, 8192` of a scope searched for call sites."""
    if not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1:
        return
    target, value = stmt.targets[0], stmt.value
    pairs = target_pairs(target, value)
    for name_node, value_node in pairs:
        env[name_node.id] = try_eval(unit, value_node, env) if value_node is not None else UNKNOWN


def target_pairs(target: ast.expr, value: ast.expr) -> list[tuple[ast.Name, ast.expr | None]]:
    """(name, value) of each name an assignment target binds; value None when not separable."""
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
        if not (isinstance(d, ast.Call) and callee(d.func) == "autotune"):
            continue
        configs = next((k.value for k in d.keywords if k.arg == "configs"), None)
        if isinstance(configs, ast.Call) and callee(configs.func) in funcs:
            return _single_config(unit, funcs[callee(configs.func) or ""])
    return {}


def _single_config(unit: Unit, fn: ast.FunctionDef) -> dict[str, object]:
    """The one value per key of the `dict(...)` a config function builds, or nothing."""
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and callee(node.func) == "dict" and node.keywords:
            values = {k.arg: try_eval(unit, k.value, {}) for k in node.keywords if k.arg}
            if all(isinstance(v, tuple) and len(v) == 1 for v in values.values()):
                return {k: v[0] for k, v in values.items()}  # type: ignore[index]
    return {}


def fallback_value(unit: Unit, name: str) -> object:
    """A value for `name` from the __main__ block or the module (`N, D = 4096, 8192`)."""
    for body, env in _call_scopes(unit):
        for stmt in body:
            _run_assign(unit, stmt, env)
        if env.get(name, UNKNOWN) is not UNKNOWN:
            return env[name]
    return UNKNOWN
