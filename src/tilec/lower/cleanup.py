"""Thread IR clean-up after lowering: drop `const` scalars nothing reads (the
lowering names every loop index for readability; nvcc warns on unused ones)."""

from __future__ import annotations

import re
from dataclasses import replace

from tilec import thread_ir as T
from tilec import tir

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _names_used(x: object, out: set[str]) -> None:
    """Every identifier an expression or statement mentions (C text included)."""
    match x:
        case tir.Var(name) | T.Sym(name):
            out.update(_IDENT.findall(name))
        case T.Subscript(array, indices):
            out.update(_IDENT.findall(array))
            for i in indices:
                _names_used(i, out)
        case T.Decl(init=init) | T.Assign(value=init) if init is not None:
            _names_used(init, out)
            if isinstance(x, T.Assign):
                _names_used(x.target, out)
        case T.VecRef(target):
            _names_used(target, out)
        case T.Loop(_, start, stop, _, _, body):
            for e in (start, stop, *body):
                _names_used(e, out)
        case T.IfThen(cond, then, orelse):
            for e in (cond, *then, *orelse):
                _names_used(e, out)
        case T.Scope(body=body):
            for e in body:
                _names_used(e, out)
        case T.Call(call):
            _names_used(call, out)
        case T.Intrin(args=args) | tir.Call(args=args):
            for a in args:
                if not isinstance(a, str):
                    _names_used(a, out)
        case tir.BinOp(a=a, b=b):
            _names_used(a, out)
            _names_used(b, out)
        case tir.UnaryOp(a=a) | tir.Cast(value=a):
            _names_used(a, out)
        case tir.Select(cond, a, b):
            for e in (cond, a, b):
                _names_used(e, out)
        case T.AddressOf(ref):
            _names_used(ref, out)
        case _:
            pass


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
            case T.Loop(body=body):
                out.append(replace(s, body=tuple(_prune(list(body), used))))
            case T.IfThen(cond, then, orelse):
                out.append(T.IfThen(cond, tuple(_prune(list(then), used)), tuple(_prune(list(orelse), used))))
            case T.Scope(body=body):
                out.append(replace(s, body=tuple(_prune(list(body), used))))
            case _:
                out.append(s)
    return out
