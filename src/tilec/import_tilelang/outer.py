"""The Python around the kernel, run statically: module-level constants, then the jit
function's (or factory's) statements before its Kernel block or returned prim_func.

    block_M, threads = 128, 256                   block_M -> param (value 128), threads -> param
    M, N = T.const("M, N")                 ->     M, N    -> symbolic dimensions ("dim")
    C = T.empty((M, N), dtype)                    C       -> an output tensor of the kernel
    half = N // 2                                 half    -> a let before the Kernel block (N is a dim)
    if use_tma: ...                               the branch its static condition takes

Each name becomes a `Binding` ("param", "dim", "tensor", "let", "inline", "prim_func", "def"
or "opaque"); a statement that cannot be run statically is a located diagnostic.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from tilec.diagnostics import CompileError
from tilec.import_tilelang.static import (
    UNKNOWN,
    Binding,
    DType,
    Unit,
    callee,
    decorator_name,
    dtype_name,
    is_main_block,
    new_binding,
    scope_values,
    static_branch,
    t_call,
    target_pairs,
    try_eval,
)
from tilec.import_tilelang.translate import Translator

TORCH_FACTORIES = ("rand", "randn", "empty", "zeros", "ones", "randint")
HOST_QUERIES = {"get_num_sms": "the SM count driver.get_num_sms() returns on an H100/H200; -D to change"}


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


def module_scope(unit: Unit) -> None:
    """Module-level constants (`total_sm = 108`) as bindings: params when a kernel uses them."""
    _run_module(unit, [s for s in unit.tree.body if not is_main_block(s)])


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
            taken = static_branch(unit, stmt, scope_values(scope))
            _run_module(unit, taken if taken is not None else [])
    for b in scope.values():
        b.definition = None  # module-level names are written as their values


def run_python(f: Function, body: list[ast.stmt], scope: dict[str, Binding]) -> None:
    """Run the statements of the jit function (or factory) around the kernel, statically."""
    for stmt in body:
        run_python_stmt(f, stmt, scope)


def run_python_stmt(f: Function, stmt: ast.stmt, scope: dict[str, Binding]) -> None:
    """One statement around the kernel: bind its names, take its static branch, or keep the kernel."""
    unit = f.unit
    match stmt:
        case ast.Expr(value=ast.Constant()) | ast.Assert() | ast.Pass() | ast.Import() | ast.ImportFrom():
            return
        case ast.Assign(value=ast.Call() as call) if t_call(call) in ("const", "symbolic", "dynamic"):
            _bind_dims(f, stmt, call, scope)
        case ast.Assign(targets=[ast.Name(id=name)], value=ast.Call() as call) if t_call(call) == "empty":
            f.tensors.append((name, call_arg(unit, call, 0, "shape"), call_arg(unit, call, 1, "dtype")))
            scope[name] = new_binding(unit, "tensor", name)
        case ast.AnnAssign(target=ast.Name(id=name), annotation=ast.Call() as ann, value=None) if t_call(ann) in (
            "Tensor",
            "Buffer",
        ):
            f.tensors.append((name, call_arg(unit, ann, 0, "shape"), call_arg(unit, ann, 1, "dtype")))
            scope[name] = new_binding(unit, "tensor", name)
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


def call_arg(unit: Unit, call: ast.Call, index: int, name: str) -> ast.expr:
    """Argument `index` (or keyword `name`) of `call`; a located error when it is missing."""
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
        scope[name] = new_binding(f.unit, "dim", name, f.config.get(name, UNKNOWN), node=stmt)


def _bind_python(
    unit: Unit, stmt: ast.Assign | ast.AnnAssign, scope: dict[str, Binding], quiet: bool = False, owner: str = ""
) -> None:
    """A Python local: a param (its formula kept), a let of dimensions, an inline tuple, or opaque."""
    if isinstance(stmt, ast.AnnAssign):
        if stmt.value is None or not isinstance(stmt.target, ast.Name):
            return
        pairs: list[tuple[ast.Name, ast.expr | None]] = [(stmt.target, stmt.value)]
    else:
        pairs = [p for t in stmt.targets for p in target_pairs(t, stmt.value)]  # `BK = BV = 64` too
    if not pairs and not quiet:
        raise unit.fail(stmt, "cannot convert this assignment", "assign one name (or a tuple of names) at a time")
    unpacked = _unpacked(unit, stmt.value, scope, len(pairs)) if stmt.value is not None else None
    for i, (target, value) in enumerate(pairs):
        if value is None and unpacked is not None:
            scope[target.id] = new_binding(unit, "param", target.id, unpacked[i], node=stmt, owner=owner)
            continue
        if value is None:
            scope[target.id] = new_binding(unit, "opaque", target.id, reason="a value unpacked from an expression")
            continue
        scope[target.id] = _local(unit, target.id, value, scope, stmt)
        scope[target.id].owner = owner


def _unpacked(unit: Unit, value: ast.expr, scope: dict[str, Binding], n: int) -> tuple | None:
    """`M, K = A.shape` of `A = torch.rand(m, k, ...)`: a static tuple of n items, or None."""
    if isinstance(value, ast.Attribute) and value.attr == "shape" and isinstance(value.value, ast.Name):
        b = scope.get(value.value.id)
        calls = [c for c in ast.walk(b.node) if isinstance(c, ast.Call)] if b is not None and b.node else []
        for call in calls[:1]:  # torch.rand(m, k) * 2 - 1 has rand's shape
            dims = tuple(try_eval(unit, a, scope_values(scope)) for a in call.args)
            if callee(call.func) in TORCH_FACTORIES and len(dims) == n and UNKNOWN not in dims:
                return dims
    static = try_eval(unit, value, scope_values(scope))
    return static if isinstance(static, tuple) and len(static) == n else None


def _local(unit: Unit, name: str, value: ast.expr, scope: dict[str, Binding], stmt: ast.stmt) -> Binding:
    """The binding of `name = value`: an inline tuple, a let of dimensions, a param, or opaque."""
    static = try_eval(unit, value, scope_values(scope))
    try:
        translated = Translator(unit, scope, outer=True, dry=True).expr(value)
    except CompileError as exc:
        if isinstance(static, (int, float, bool, DType)):
            return new_binding(unit, "param", name, static, node=stmt)
        reason = exc.diagnostics[0].message
        return new_binding(unit, "opaque", name, node=value, reason=reason)
    comment = unit.comments.get(stmt.lineno)
    if _host_query(value):
        comment = f"# {HOST_QUERIES[_host_query(value) or '']}"
    uses = {n.id for n in ast.walk(value) if isinstance(n, ast.Name)}
    if isinstance(static, tuple | str) or isinstance(value, ast.Tuple | ast.List):
        if not (isinstance(static, str) and dtype_name(static)):
            return new_binding(unit, "inline", name, static, node=value)
    if any(scope[u].kind in ("dim", "let") for u in uses if u in scope):
        return new_binding(unit, "let", name, node=value)
    if isinstance(value, ast.Constant):
        return new_binding(unit, "param", name, static, node=stmt, comment=comment)
    return new_binding(
        unit, "param", name, static, node=value, definition=translated, comment=comment, scope=dict(scope)
    )


def _host_query(value: ast.expr) -> str | None:
    """The host query `value` calls (`driver.get_num_sms()`), or None."""
    if isinstance(value, ast.Call) and callee(value.func) in HOST_QUERIES:
        return callee(value.func)
    return None


def _python_if(f: Function, stmt: ast.If, scope: dict[str, Binding]) -> None:
    """An if around the kernel: run the branch its static condition takes."""
    taken = static_branch(f.unit, stmt, scope_values(scope))
    if taken is None:
        raise f.unit.fail(
            stmt.test,
            "cannot evaluate this Python condition outside the kernel statically",
            "give the names it reads values (defaults, main()'s call, -D NAME=VALUE), or move the if into the kernel",
        )
    run_python(f, taken, scope)


def _python_def(f: Function, stmt: ast.FunctionDef, scope: dict[str, Binding]) -> None:
    """A nested function: a prim_func (a kernel once returned), a plain def; T.macro is refused."""
    names = {decorator_name(d) for d in stmt.decorator_list}
    if "prim_func" in names:
        scope[stmt.name] = new_binding(f.unit, "prim_func", stmt.name, node=stmt)  # a kernel once returned
        return
    if "macro" in names:
        raise f.unit.fail(stmt, "T.macro functions are not converted yet", "write the macro in the .tile file by hand")
    scope[stmt.name] = new_binding(f.unit, "def", stmt.name, node=stmt)


def _python_return(f: Function, value: ast.expr | None, scope: dict[str, Binding]) -> None:
    """`return main` (a prim_func) or `return kernel_func(...)` (a nested factory, run)."""
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
    fn = scope[callee(call.func) or ""].node
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
    """A nested function's argument: the caller's binding of a name, or a new local."""
    if isinstance(arg, ast.Name) and arg.id in scope:
        return scope[arg.id]
    return _local(f.unit, name, arg, scope, arg)  # type: ignore[arg-type]


def _is_kernel_with(stmt: ast.With) -> bool:
    """`with T.Kernel(...)`."""
    expr = stmt.items[0].context_expr
    return isinstance(expr, ast.Call) and t_call(expr) == "Kernel"
