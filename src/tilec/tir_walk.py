"""Walking expressions: every sub-expression of a Tile IR (or Thread IR)
expression, in one place, so analyses don't each re-implement the recursion.

    [type(x).__name__ for x in subexprs(A[i + 1] * 2.0)]
      -> ['BinOp', 'Load', 'BinOp', 'Var', 'IntImm', 'FloatImm']
"""

from __future__ import annotations

from collections.abc import Iterator

from tilec import thread_ir as T
from tilec import tir


def children(e: object) -> tuple[object, ...]:
    """The direct sub-expressions of an expression node."""
    match e:
        case tir.BinOp(_, a, b):
            return (a, b)
        case tir.UnaryOp(_, a) | tir.Cast(a):
            return (a,)
        case tir.Select(c, a, b):
            return (c, a, b)
        case tir.Call(_, args) | T.Intrin(_, args):
            return tuple(x for x in args if not isinstance(x, str))
        case tir.Load(_, idx) | T.Subscript(_, idx):
            return tuple(idx)
        case T.AddressOf(target) | T.VecRef(target):
            return (target,)
        case _:
            return ()


def subexprs(e: object) -> Iterator[object]:
    """`e` and everything below it, pre-order."""
    stack = [e]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(children(node)))


def loads(e: tir.Expr) -> list[tir.Load]:
    return [x for x in subexprs(e) if isinstance(x, tir.Load)]


def variables(e: object) -> set[tir.Var]:
    return {x for x in subexprs(e) if isinstance(x, tir.Var)}
