"""Walking the Tile IR in one place, so that passes don't each re-implement the recursion.

Expressions (shared with Thread IR): every sub-expression, pre-order.

    [type(x).__name__ for x in subexprs(A[i + 1] * 2.0)]
      -> ['BinOp', 'Load', 'BinOp', 'Var', 'IntImm', 'FloatImm']

Statements: `bodies(s)` is the one exhaustive match over `tir.Stmt` (a new
statement kind is a type error until it says which statement lists it holds);
on it stand `stmts` (every statement, pre-order, into the bodies of For,
Parallel and If), `blocks` (every statement list) and `map_stmts` (a rewrite).

    [type(s).__name__ for s in stmts(kernel.body)]
      -> ['Alloc', 'For', 'Copy', 'Gemm', 'Parallel', 'Store']
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import assert_never

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


# ---------------------------------------------------------------- statements

Body = tuple[tir.Stmt, ...]


def bodies(s: tir.Stmt) -> tuple[Body, ...]:
    """The statement lists directly inside `s`: a loop's body, a branch's then and else."""
    match s:
        case tir.For() | tir.Parallel():
            return (s.body,)
        case tir.If():
            return (s.then, s.orelse)
        case (
            tir.Alloc()
            | tir.Let()
            | tir.Store()
            | tir.Copy()
            | tir.Gemm()
            | tir.Fill()
            | tir.Reduce()
            | tir.CumSum()
            | tir.AtomicAdd()
            | tir.Print()
            | tir.DeviceAssert()
            | tir.UseSwizzle()
            | tir.AnnotateLayout()
        ):
            return ()
        case _:
            assert_never(s)


def with_bodies(s: tir.Stmt, new: tuple[Body, ...]) -> tir.Stmt:
    """`s` with the statement lists `bodies(s)` replaced by `new` (`s` itself when all are the same)."""
    if all(a is b for a, b in zip(bodies(s), new, strict=True)):
        return s
    match s:
        case tir.For() | tir.Parallel():
            return dataclasses.replace(s, body=new[0])
        case tir.If():
            return dataclasses.replace(s, then=new[0], orelse=new[1])
        case _:  # bodies(s) is () and so is new: returned above
            raise AssertionError(f"{type(s).__name__} holds no statements")


def stmts(body: Body, into_parallel: bool = True) -> Iterator[tir.Stmt]:
    """Every statement of `body` and of the statement lists below it, pre-order; with
    `into_parallel=False`, not the per-element statements of Parallel bodies (tile level only)."""
    for s in body:
        yield s
        if into_parallel or not isinstance(s, tir.Parallel):
            for inner in bodies(s):
                yield from stmts(inner, into_parallel)


def blocks(body: Body) -> Iterator[Body]:
    """`body` and every statement list below it: loop bodies, then and else branches."""
    yield body
    for s in body:
        for inner in bodies(s):
            yield from blocks(inner)


def map_stmts(body: Body, fn: Callable[[tir.Stmt], tir.Stmt]) -> Body:
    """`body` with `fn` applied to every statement, top-down: `fn` sees each statement as it is
    in `body` (so a pass may look up what its analysis found about that very node), then the
    statement lists of what `fn` returns are mapped in turn. Unchanged parts are the same
    objects: mapping the identity returns `body` itself."""
    out = tuple(_map_one(s, fn) for s in body)
    return body if all(a is b for a, b in zip(body, out, strict=True)) else out


def _map_one(s: tir.Stmt, fn: Callable[[tir.Stmt], tir.Stmt]) -> tir.Stmt:
    top = fn(s)
    return with_bodies(top, tuple(map_stmts(inner, fn) for inner in bodies(top)))


def map_kernel(kernel: tir.Kernel, fn: Callable[[tir.Stmt], tir.Stmt]) -> tir.Kernel:
    """`kernel` with `map_stmts` applied to its body (`kernel` itself when nothing changed)."""
    body = map_stmts(kernel.body, fn)
    return kernel if body is kernel.body else dataclasses.replace(kernel, body=body)
