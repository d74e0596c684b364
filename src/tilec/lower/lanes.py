"""Lane and warp names: a lowered kernel's `tx % 32` and `tx / 32` read as `lane` and `warp`
(a 32-thread warp here).

    const half* row = &A_s[0][tx / 32 * 16 + tx % 16][tx % 32 / 16 * 8];
  ->
    const int lane = tx % 32;
    const int warp = tx / 32;
    ...
    const half* row = &A_s[0][warp * 16 + tx % 16][lane / 16 * 8];

32 is the target's warp size (Target.warp_size), and `tx / 64` is `warp / 2` (exact: tx is
nonnegative). With the block's warp count known, `warp % 8` in a block of 8 warps is `warp`,
and `tx - warp * 32` is `lane`. It runs on a lowered kernel before unused constants are
dropped, so a kernel that never names a lane or a warp declares neither.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, cast

from tilec import thread_ir as T
from tilec import tir, tir_walk
from tilec.dtypes import DType
from tilec.simplify import int_
from tilec.source import Span

I32 = DType.int32


def name_lanes(
    body: list[T.Stmt],
    tx: tir.Var,
    threads: int,
    warp_size: int,
    fresh: Callable[[str], str],
    warp_group: int = 0,
) -> list[T.Stmt]:
    """`body` (of a block of `threads` threads) with `lane` and `warp` declared after `tx` and
    used wherever they are meant. With `warp_group` (its threads, sm_90a), `tx / warp_group` is
    `warp_group`, lane 0's value broadcast (the `warp_uniform` intrinsic): nvcc then knows it is
    the same in every lane and keeps what is computed from it, the wgmma descriptors, in uniform
    registers instead of moving each from a thread's registers before its wgmma."""
    lane = tir.Var(fresh("lane"), I32, "thread")
    warp = tir.Var(fresh("warp"), I32, "thread")
    group = tir.Var(fresh("warp_group"), I32, "thread")

    def respell(node: object) -> object:
        match node:
            case tir.BinOp("%", a, tir.IntImm(k)) if a is tx and k == warp_size:
                return lane
            case tir.BinOp("//", a, tir.IntImm(k)) if a is tx and k == warp_size:
                return warp
            case tir.BinOp("//", a, tir.IntImm(k)) if a is tx and warp_group and k == warp_group:
                return group
            case tir.BinOp("%", a, tir.IntImm(k)) if a is group and k * warp_group >= threads:
                return group
            case tir.BinOp("//", a, tir.IntImm(k)) if a is tx and k % warp_size == 0:
                return tir.BinOp("//", warp, int_(k // warp_size), I32)
            case tir.BinOp("%", a, tir.IntImm(k)) if a is warp and k * warp_size >= threads:
                return warp
            case tir.BinOp("-", a, tir.BinOp("*", w, tir.IntImm(k))) if a is tx and w is warp and k == warp_size:
                return lane
        return node

    names = (
        T.Decl(lane.name, I32, init=tir.BinOp("%", tx, int_(warp_size), I32), const=True),
        T.Decl(warp.name, I32, init=tir.BinOp("//", tx, int_(warp_size), I32), const=True),
    )
    out = list(_after_tx(tuple(cast(T.Stmt, _rewrite(s, respell)) for s in body), tx.name, names))
    if warp_group:  # once, after the kernel's first `warp` (all its threads are there to broadcast)
        # a Thread IR leaf in a tir.Expr tree, as cexpr.builtin's
        broadcast = cast(tir.Expr, T.Intrin("warp_uniform", (tir.BinOp("//", tx, int_(warp_group), I32),), I32))
        at = next(i for i, s in enumerate(out) if isinstance(s, T.Decl) and s.name == warp.name) + 1
        out.insert(at, T.Decl(group.name, I32, init=broadcast, const=True))
    return out


def _after_tx(stmts: tuple[T.Stmt, ...], tx: str, names: tuple[T.Stmt, ...]) -> tuple[T.Stmt, ...]:
    """`stmts` with `names` declared after every declaration of `tx`, nested ones included (a
    persistent kernel's consumers read their thread index again in each tile: lower/kernel.py)."""
    out: list[T.Stmt] = []
    for s in stmts:
        out.append(T.with_bodies(s, lambda body: _after_tx(body, tx, names)))
        if isinstance(s, T.Decl) and s.name == tx:
            out.extend(names)
    return tuple(out)


def _rewrite(node: object, f: Callable[[object], object]) -> object:
    """`node` with `f` applied to it and to every IR node under it, children first. A node none of
    whose children changed is kept as it is (tir.Var and T.Sym are compared by identity). The walk
    is generic on purpose, as emit's `_collect`: a node kind added later is covered."""
    if isinstance(node, tuple):
        items = tuple(_rewrite(x, f) for x in node)
        return node if all(a is b for a, b in zip(items, node)) else items
    names = tir_walk.node_fields(node)
    if not names or isinstance(node, (Span, tir.Buffer)):  # leaves: values, spans, buffers
        return node
    changed = {}
    for name in names:
        value = getattr(node, name)
        new = _rewrite(value, f)
        if new is not value:
            changed[name] = new
    return f(dataclasses.replace(cast(Any, node), **changed) if changed else node)  # `names`: a dataclass
