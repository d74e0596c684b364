"""The kernel body: TileLang's statements and `T.` primitives to `.tile` text, and the
params a kernel uses, written the first time (`use_param`).

    for k in T.Pipelined(T.ceildiv(K, 32), num_stages=3):   ->   for k in Pipelined(ceildiv(K, 32), num_stages=3):
        T.copy(A[by * block_M, k * 32], A_shared)                    copy(A[by * block_M, k * 32], A_shared)
    acc = T.alloc_fragment((1,), T.float32, "local")              acc = alloc_var(float32)
    y = T.Cast(T.float16, x) + T.floordiv(a, b)                   y = cast(x, float16) + a // b

An expression is rebuilt as an ast of the .tile form and printed by `ast.unparse` (Python's
precedence is the language's); what has no .tile form is a located diagnostic with a hint.
"""

from __future__ import annotations

import ast

from tilec.builtins import ALL_SIGS, POLICIES, UNSUPPORTED
from tilec.import_tilelang.static import (
    DTYPE_SPELLINGS,
    UNKNOWN,
    Binding,
    DType,
    NotStatic,
    Unit,
    dtype_name,
    is_t,
    scope_values,
    t_call,
    try_eval,
)

TILE_KEYWORDS = frozenset("import param macro kernel for while in if elif else with as and or not pass break".split())
LOOPS = ("Pipelined", "Parallel", "serial", "Serial", "range", "unroll", "vectorized")
DROPPED_KEYWORDS = {"atomic_add": ("memory_order", "return_prev"), "atomic_max": ("memory_order",)}
DROPPED_KEYWORDS.update(atomic_min=("memory_order",), alloc_shared=("scope",))
PYTHON_FUNCS = {"min", "max", "abs", "range"}  # Python builtins that are .tile builtins too
TILE_CALLEES = {"cdiv": "ceildiv", "ceildiv": "ceildiv"}  # tilelang.cdiv(a, b) and the like, by their .tile name


def safe_name(name: str) -> str:
    """A Python name that is a .tile keyword, with `_` appended."""
    return name + "_" if name in TILE_KEYWORDS else name


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
        """One kernel statement at `depth` as .tile lines."""
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
        """An if (`word` is `if` or `elif`), its elif chain and else."""
        pad = "    " * depth
        lines = [f"{pad}{word} {self.expr(s.test)}:", *self.block(s.body, depth + 1, s.test)]
        if len(s.orelse) == 1 and isinstance(s.orelse[0], ast.If):
            return lines + self.if_stmt(s.orelse[0], depth, "elif")
        if s.orelse:
            lines += [f"{pad}else:", *self.block(s.orelse, depth + 1)]
        return lines

    def assign(self, t: ast.expr, v: ast.expr, pad: str) -> list[str]:
        """`t = v` in the kernel; a one-element local fragment becomes an alloc_var."""
        if isinstance(t, ast.Name) and _local_fragment(v):
            assert isinstance(v, ast.Call)
            self.scalars.add(t.id)
            self.scope.pop(t.id, None)
            return [f"{pad}{safe_name(t.id)} = alloc_var({self.expr(v.args[1])})"]
        if isinstance(t, ast.Name):
            self.scope.pop(t.id, None)  # a kernel-local name from here on
            return [f"{pad}{safe_name(t.id)} = {self.expr(v)}"]
        if isinstance(t, ast.Subscript):
            return [f"{pad}{self.expr(t)} = {self.expr(v)}"]
        raise self.unit.fail(
            t, "cannot convert an assignment to several names inside the kernel", "assign each name alone"
        )

    def target(self, t: ast.expr, bare: bool = False) -> str:
        """The names a for or with binds (they are kernel-local from here on)."""
        names = t.elts if isinstance(t, ast.Tuple) else [t]
        for n in names:
            if not isinstance(n, ast.Name):
                raise self.unit.fail(n, "expected a name here")
            self.scope.pop(n.id, None)
        text = ", ".join(safe_name(n.id) for n in names if isinstance(n, ast.Name))
        return text if bare or not isinstance(t, ast.Tuple) else f"({text})"

    def loop(self, it: ast.expr) -> str:
        """The iterator of a for: a T. loop or range; anything else is refused."""
        name = t_call(it) if isinstance(it, ast.Call) else None
        if isinstance(it, ast.Call) and (name in LOOPS or (isinstance(it.func, ast.Name) and it.func.id == "range")):
            return self.expr(it)
        if name in UNSUPPORTED:
            raise self.unit.fail(it, UNSUPPORTED[name][0], UNSUPPORTED[name][1])
        what = f"T.{name}" if name else ast.unparse(it)
        raise self.unit.fail(
            it, f"cannot convert the loop over {what}", "use T.Pipelined, T.Parallel, T.serial or T.unroll"
        )

    def call_stmt(self, call: ast.Call) -> str | None:
        """A call as a statement; T.annotate_layout is refused, T.use_swizzle rewritten."""
        name = t_call(call)
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
        """T.use_swizzle: dropped when enable= is statically false, panel_size= positional."""
        enable = next((k.value for k in call.keywords if k.arg == "enable"), None)
        if enable is not None:
            on = try_eval(self.unit, enable, scope_values(self.scope))
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
        """The .tile text of an expression."""
        return ast.unparse(self.node(node))

    def shape(self, node: ast.expr) -> str:
        """The .tile text of a shape, always a tuple."""
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
                taken = try_eval(self.unit, t, scope_values(self.scope))  # `(M, K) if not trans_A else (K, M)`
                if taken is not UNKNOWN:
                    return self.node(b if taken else o)
                return ast.IfExp(self.node(t), self.node(b), self.node(o))
            case ast.Subscript(value=ast.Name(id=n), slice=ast.Constant(value=0)) if n in self.scalars:
                return ast.Name(safe_name(n))
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
        """A name: its binding, a kernel-local name, or a located error."""
        b = self.scope.get(name)
        if b is None:
            if name in ("True", "False") or name in PYTHON_FUNCS or not self.outer:
                return ast.Name(safe_name(name))  # a kernel-local name (buffer, loop variable, let)
            raise self.unit.fail(node, f"'{name}' has no value that can be read statically")
        return self.binding(node, b)

    def binding(self, node: ast.AST, b: Binding) -> ast.expr:
        """The .tile form of a name bound around the kernel."""
        match b.kind:
            case "param":
                return ast.Name(b.name if self.dry else use_param(self.unit, b, node))
            case "inline":
                assert b.node is not None
                return self.node(b.node)
            case "dim" | "tensor" | "scalar" | "let":
                self.used.add(b.name)
                return ast.Name(safe_name(b.name))
            case "opaque":
                raise self.unit.fail(
                    node,
                    f"'{b.name}' cannot be converted: {b.reason}",
                    "compute it in the kernel, or give it a static value",
                )
        raise self.unit.fail(node, f"'{b.name}' is a Python function, not a value of the kernel")

    def attribute(self, node: ast.Attribute) -> ast.expr:
        """`T.x`, `T.GemmWarpPolicy.x`, `.dtype`, `.shape` and `.data` (a view's tensor); other
        attributes are refused."""
        if is_t(node.value):
            return ast.Name(self.t_name(node, node.attr))
        if isinstance(node.value, ast.Attribute) and is_t(node.value.value) and node.value.attr == "GemmWarpPolicy":
            return ast.Attribute(ast.Name("GemmWarpPolicy"), node.attr)
        if node.attr in ("dtype", "shape", "data"):
            return ast.Attribute(self.node(node.value), node.attr)
        raise self.unit.fail(
            node, f"cannot convert the attribute '.{node.attr}'", "only .dtype, .shape and .data of buffers"
        )

    def t_name(self, node: ast.AST, name: str) -> str:
        """The .tile name of `T.name`; a located error when tilec lacks it."""
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
        """A call: a T. primitive, `.astype`, a builtin, `tilelang.cdiv`, or a static value."""
        name = t_call(node)
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
        static = try_eval(self.unit, node, scope_values(self.scope))
        if isinstance(static, (int, float, bool)):
            return ast.Constant(static)
        raise self.unit.fail(
            node, f"cannot convert the call of '{ast.unparse(func)}'", "use T. primitives, or give it a static value"
        )

    def plain_call(self, func: ast.expr, args: list[ast.expr], keywords: list[ast.keyword]) -> ast.Call:
        """`func(args, keywords)` with its arguments translated; *arguments are refused."""
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
    if not (isinstance(v, ast.Call) and t_call(v) == "alloc_fragment" and len(v.args) == 3):
        return False
    shape, scope = v.args[0], v.args[2]
    one = isinstance(shape, ast.Tuple | ast.List) and ast.unparse(shape).strip("()[],") == "1"
    return one and isinstance(scope, ast.Constant) and scope.value == "local"


def _static_zero(args: list[ast.expr]) -> bool:
    """No argument, or a literal 0."""
    return not args or (isinstance(args[0], ast.Constant) and args[0].value == 0)


def _dtype_string(v: str | int | float | bool) -> str | int | float | bool:
    """`"float"` as a dtype argument is float32: TileLang's spellings become tilec's."""
    if isinstance(v, str) and v in DTYPE_SPELLINGS:
        return DTYPE_SPELLINGS[v]
    return v


def _hint(node: ast.AST) -> str:
    """The hint of an expression or statement that has no .tile form."""
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
    name = safe_name(b.name)
    if unit.out.params.get(name, (0, text))[1] != text:
        name = _free_name(unit, f"{b.owner.lstrip('_')}_{b.name}")
    b.final = name
    unit.out.params.setdefault(name, (b.order, text))
    return name


def _param_text(unit: Unit, b: Binding, node: ast.AST) -> str:
    """The definition of param `b`: its formula, or its value as a literal."""
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
    """`name` with `_` appended until no param has it."""
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
