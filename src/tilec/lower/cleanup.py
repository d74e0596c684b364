"""Thread IR clean-up after lowering: drop `const` scalars nothing reads (the
lowering names every loop index for readability; nvcc warns on unused ones)."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import assert_never

from tilec import thread_ir as T
from tilec import tir, tir_walk

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _stmt_exprs(s: T.Stmt) -> tuple[tir_walk.Node, ...]:
    """The expressions a Thread IR statement itself holds (a loop's counter aside: it declares it)."""
    match s:
        case T.Decl(init=init):
            return () if init is None else (init,)
        case T.Assign(target, value):
            return (target, value)
        case T.Loop(start=start, stop=stop):
            return (start, stop)
        case T.IfThen(cond=cond) | T.While(cond=cond):
            return (cond,)
        case T.Call(call):
            return (call,)
        case T.Barrier(args=args):
            return args
        case T.Scope() | T.SharedView() | T.Comment() | T.Break():
            return ()
        case _:
            assert_never(s)


def _stmt_bodies(s: T.Stmt) -> tuple[tuple[T.Stmt, ...], ...]:
    match s:
        case T.Loop(body=body) | T.While(body=body) | T.Scope(body=body):
            return (body,)
        case T.IfThen(then=then, orelse=orelse):
            return (then, orelse)
        case T.Decl() | T.Assign() | T.Call() | T.Barrier() | T.SharedView() | T.Comment() | T.Break():
            return ()
        case _:
            assert_never(s)


def drop_unused(body: list[T.Stmt]) -> list[T.Stmt]:
    """Remove `const` scalar declarations nothing after them in their block reads (nvcc warns on
    them). A name is visible only after its declaration and inside its block, so a block is
    walked from its end: the same name declared in two branches (a warp-role kernel's block
    indices, in the producer's and in the consumers' branch) is kept only where it is read."""
    return _prune(body)[0]


def _prune(stmts: list[T.Stmt] | tuple[T.Stmt, ...]) -> tuple[list[T.Stmt], set[str]]:
    """`stmts` without the unread const scalars, and the names the remaining statements read."""
    out: list[T.Stmt] = []
    used: set[str] = set()
    for s in reversed(stmts):
        match s:
            case T.Decl(name, const=True, dims=()) if name not in used:
                continue
            case T.Loop(body=body) | T.While(body=body) | T.Scope(body=body):
                inner, names = _prune(body)
                s = replace(s, body=tuple(inner))
            case T.IfThen(then=then, orelse=orelse):
                (then_, a), (else_, b) = _prune(then), _prune(orelse)
                s, names = replace(s, then=tuple(then_), orelse=tuple(else_)), a | b
            case _:
                names = set()
        for e in _stmt_exprs(s):
            for x in tir_walk.subexprs(e):
                match x:
                    case tir.Var(name) | T.Sym(name) | T.Subscript(name):
                        names.update(_IDENT.findall(name))
        if isinstance(s, T.Decl):  # reads after it are its own; reads before it, of an outer one
            used.discard(s.name)
        used |= names
        out.append(s)
    out.reverse()
    return out, used
