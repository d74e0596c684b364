"""The syntax tree of a .tile file, as parse.py builds it.

Plain data: frozen, slotted dataclasses, every node with the `Span` of the text
it came from. Nothing here knows about types or scopes; elaborate.py does.

    kernel k(A: Tensor((M,), float32)):      KernelDef("k", (KParam("A", Call(Name("Tensor"), ...)),),
        with Kernel(1, threads=32) as bx:        (With(Call(Name("Kernel"), ...), (Name("bx"),),
            A[bx] = 0.0                                (Assign(Subscript(Name("A"), (Name("bx"),)), Float(0.0)),)),))
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeAlias

from tilec.source import SourceFile, Span

# ---------------------------------------------------------------- expressions


@dataclass(frozen=True, slots=True)
class Name:
    id: str
    span: Span


@dataclass(frozen=True, slots=True)
class Int:
    value: int
    span: Span


@dataclass(frozen=True, slots=True)
class Float:
    value: float
    span: Span


@dataclass(frozen=True, slots=True)
class Bool:
    value: bool
    span: Span


@dataclass(frozen=True, slots=True)
class Str:
    value: str
    span: Span


@dataclass(frozen=True, slots=True)
class BinOp:
    """Arithmetic, bitwise, comparison (`<`...) and boolean (`and`, `or`)
    operators. A chained comparison `a < b < c` is parsed as
    `a < b and b < c`, as in Python."""

    op: str
    left: Expr
    right: Expr
    span: Span
    op_span: Span


@dataclass(frozen=True, slots=True)
class UnaryOp:
    op: str  # "-" "+" "~" "not"
    operand: Expr
    span: Span


@dataclass(frozen=True, slots=True)
class IfExp:
    """`a if cond else b`."""

    cond: Expr
    a: Expr
    b: Expr
    span: Span


@dataclass(frozen=True, slots=True)
class Keyword:
    name: str
    value: Expr
    span: Span  # the whole `name=value`
    name_span: Span


@dataclass(frozen=True, slots=True)
class Call:
    func: Expr
    args: tuple[Expr, ...]
    keywords: tuple[Keyword, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class Slice:
    """`lo:hi` inside a subscript; either bound may be missing."""

    lo: Expr | None
    hi: Expr | None
    span: Span


@dataclass(frozen=True, slots=True)
class Subscript:
    value: Expr
    indices: tuple[Expr | Slice, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class Attribute:
    """`a.b`: only to report `T.copy` helpfully and accept `GemmWarpPolicy.Square`."""

    value: Expr
    attr: str
    span: Span


@dataclass(frozen=True, slots=True)
class Tuple:
    """`(a, b)` or `[a, b]` (shapes)."""

    items: tuple[Expr, ...]
    span: Span


Expr: TypeAlias = Name | Int | Float | Bool | Str | BinOp | UnaryOp | IfExp | Call | Subscript | Attribute | Tuple


def names_in(e: Expr | Slice | Keyword) -> list[Name]:
    """Every `Name` inside `e`, left to right (an attribute's name is not one)."""
    match e:
        case Name():
            return [e]
        case BinOp():
            return names_in(e.left) + names_in(e.right)
        case UnaryOp():
            return names_in(e.operand)
        case IfExp():
            return names_in(e.cond) + names_in(e.a) + names_in(e.b)
        case Call():
            return [n for x in (e.func, *e.args, *e.keywords) for n in names_in(x)]
        case Keyword():
            return names_in(e.value)
        case Subscript():
            return [n for x in (e.value, *e.indices) for n in names_in(x)]
        case Slice():
            return [n for x in (e.lo, e.hi) if x is not None for n in names_in(x)]
        case Attribute():
            return names_in(e.value)
        case Tuple():
            return [n for x in e.items for n in names_in(x)]
    return []


# ---------------------------------------------------------------- statements


@dataclass(frozen=True, slots=True)
class ExprStmt:
    expr: Expr
    span: Span


@dataclass(frozen=True, slots=True)
class Assign:
    target: Expr
    value: Expr
    span: Span


@dataclass(frozen=True, slots=True)
class AugAssign:
    target: Expr
    op: str  # "+" "-" "*" "/"
    value: Expr
    span: Span


@dataclass(frozen=True, slots=True)
class Pass:
    span: Span


@dataclass(frozen=True, slots=True)
class For:
    targets: tuple[Name, ...]
    iter: Expr
    body: tuple[Stmt, ...]
    span: Span  # the header `for ... :`


@dataclass(frozen=True, slots=True)
class While:
    """`while cond:` (elaboration reports it as not supported yet)."""

    cond: Expr
    body: tuple[Stmt, ...]
    span: Span  # the header


@dataclass(frozen=True, slots=True)
class Break:
    span: Span


@dataclass(frozen=True, slots=True)
class If:
    cond: Expr
    then: tuple[Stmt, ...]
    orelse: tuple[Stmt, ...]  # `elif` is an If inside orelse
    span: Span  # the header


@dataclass(frozen=True, slots=True)
class With:
    context: Expr
    targets: tuple[Name, ...]
    body: tuple[Stmt, ...]
    span: Span  # the header


Stmt: TypeAlias = ExprStmt | Assign | AugAssign | Pass | Break | For | While | If | With

# ---------------------------------------------------------------- top level


@dataclass(frozen=True, slots=True)
class Import:
    path: str
    span: Span


@dataclass(frozen=True, slots=True)
class ParamDef:
    name: str
    type: Expr | None
    value: Expr
    span: Span
    name_span: Span
    candidates: Tuple | None = None  # `in (64, 128, 256)`: the values `tilec tune` tries


@dataclass(frozen=True, slots=True)
class MacroDef:
    name: str
    params: tuple[Name, ...]
    body: tuple[Stmt, ...]
    span: Span  # the header
    name_span: Span


@dataclass(frozen=True, slots=True)
class KParam:
    name: str
    type: Expr
    span: Span
    name_span: Span


@dataclass(frozen=True, slots=True)
class KernelDef:
    name: str
    params: tuple[KParam, ...]
    body: tuple[Stmt, ...]
    span: Span  # the header
    name_span: Span


Item: TypeAlias = Import | ParamDef | MacroDef | KernelDef


@dataclass(frozen=True, slots=True)
class Module:
    items: tuple[Item, ...]
    source: SourceFile = field(repr=False)
