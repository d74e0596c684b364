"""Which thread touches each element of a shared tile in one tile op: the owner map that barrier
placement (sync.py) compares. Two ops that touch the same elements of a tile, each element from
the same thread, need no barrier between them: each thread reads what it wrote itself.

    copy(A[by * 32, bx * 32], A_s)           A_s[i][j] by thread (i % 16) * 8 + j // 4   } the same
    for i, j in Parallel(32, 32): ... A_s[i, j] ...   (the same default layout)         } owners

An owner map is a frozenset of (element, thread) pairs, computed by enumerating the op's layout
(every element of the tile, at most MAX_ELEMENTS); None when some element is touched by two threads
(a replicated layout), when an index is not a function of the loop's own variables, or when the
tile is larger.
"""

from __future__ import annotations

import functools
import math

from tilec import fragment_algebra as fa
from tilec import layout as L
from tilec import tir, tir_walk
from tilec.thread_ir import Owners

MAX_ELEMENTS = 16384  # enumerating more costs compile time; such tiles keep their barriers


@functools.lru_cache(maxsize=256)  # tune compiles many candidates of one program: the same maps
def owner_map(
    layout: L.Fragment, vars: tuple[tir.Var, ...], indices: tuple[tuple[tir.Expr, ...], ...]
) -> Owners | None:
    """element -> the one thread touching it, over the elements `indices` (of the tile, in terms of
    `vars`, the layout's dimensions) take for every element of `layout` a thread runs."""
    if not indices or math.prod(layout.shape) > MAX_ELEMENTS or len(vars) != len(layout.shape):
        return None
    frag = fa.from_fragment(layout)
    if frag.replica_extent > 1:
        return None
    try:
        pairs = fa.touches(frag, vars, indices)
    except (TypeError, ValueError):  # an index reads something besides the loop's variables
        return None
    owner = dict(pairs)
    return frozenset(owner.items()) if len(owner) == len(set(pairs)) else None  # else: two threads, one element


def parallel_indices(body: tuple[tir.Stmt, ...], buf: tir.Buffer) -> list[tuple[tir.Expr, ...]] | None:
    """Every index of `buf` that a Parallel loop's body reads or writes; None when the body reaches
    it in a way an owner map cannot follow (a nested loop, an atomic, a tile op)."""
    out: list[tuple[tir.Expr, ...]] = []
    for s in tir_walk.stmts(body):
        match s:
            case tir.Store(buffer=b, indices=idx) if b is buf:
                out.append(idx)
            case tir.Store() | tir.Let() | tir.If():
                pass
            case _:
                if any(r is buf for r in _buffers_of(s)):
                    return None
        for e in tir_walk.stmt_exprs(s):
            out += [x.indices for x in tir_walk.loads(e) if x.buffer is buf]
    return out


def _buffers_of(s: tir.Stmt) -> list[tir.Buffer]:
    """The buffers a statement other than a store names through its regions or loads."""
    loads = [x.buffer for e in tir_walk.stmt_exprs(s) for x in tir_walk.loads(e)]
    return loads + [r.buffer for r in tir_walk.regions(s)]
