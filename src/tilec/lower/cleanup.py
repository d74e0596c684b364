"""Thread IR clean-up after lowering: drop `const` scalars nothing reads (the
lowering names every loop index for readability; nvcc warns on unused ones)."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import assert_never

from tilec import thread_ir as T
from tilec import tir, tir_walk

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _names_used(s: T.Stmt, out: set[str]) -> None:
    """Every identifier a statement (and the statements inside it) mentions, C text included."""
    for e in _stmt_exprs(s):
        for x in tir_walk.subexprs(e):
            match x:
                case tir.Var(name) | T.Sym(name) | T.Subscript(name):
                    out.update(_IDENT.findall(name))
    for inner in _stmt_bodies(s):
        for t in inner:
            _names_used(t, out)


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
    """Remove `const` scalar declarations nothing reads (nvcc warns on them)."""
    while True:
        used: set[str] = set()
        for s in body:
            _names_used(s, used)
        pruned = _prune(body, used)
        if pruned == body:
            return body
        body = pruned


def _prune(stmts: list[T.Stmt], used: set[str]) -> list[T.Stmt]:
    out: list[T.Stmt] = []
    for s in stmts:
        match s:
            case T.Decl(name, const=True, dims=()) if name not in used:
                continue
            case T.Loop(body=body) | T.While(body=body):
                out.append(replace(s, body=tuple(_prune(list(body), used))))
            case T.IfThen(cond, then, orelse):
                out.append(T.IfThen(cond, tuple(_prune(list(then), used)), tuple(_prune(list(orelse), used))))
            case T.Scope(body=body):
                out.append(replace(s, body=tuple(_prune(list(body), used))))
            case _:
                out.append(s)
    return out
