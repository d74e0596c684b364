"""A tile zeroed just before a gemm accumulates into it: the gemm clears it itself (clear_accum).

    for i, j in parallel(128, 128):               # or: fill acc_s[0 : +128, 0 : +128] = 0.0
      acc_s[i, j] = 0.0
    gemm Q_s[...], K_s[...] -> acc_s[0 : +128, 0 : +128] (..., clear_accum=False)

becomes

    gemm Q_s[...], K_s[...] -> acc_s[0 : +128, 0 : +128] (..., clear_accum=True)

which wgmma does for free (its first k step reads no accumulator) where the zeros cost a store
per register. TileLang's attention programs start each key tile's scores at zero this way, or at
their mask of zeros and -inf, which moves after the gemm (adding 0 or -inf to the products is the
same before or after them):

    for i, j in parallel(128, 128):
      acc_s[i, j] = if_then_else(q_idx >= k_idx, 0.0, -infinity(float32))
    gemm Q_s[...], K_s[...] -> acc_s[...] (..., clear_accum=False)

becomes flash_attention.tile's own order, whose mask decide_masks then drops on the tiles it
does not cut (there its copy is `acc_s[i, j] = acc_s[i, j]`):

    gemm Q_s[...], K_s[...] -> acc_s[...] (..., clear_accum=True)
    for i, j in parallel(128, 128):
      acc_s[i, j] = if_then_else(q_idx >= k_idx, acc_s[i, j], -infinity(float32))
"""

from __future__ import annotations

import dataclasses
import math

from tilec import tir, tir_walk


def fuse_clears(kernel: tir.Kernel) -> tir.Kernel:
    body = _body(kernel.body)
    return kernel if body is kernel.body else dataclasses.replace(kernel, body=body)


def _body(body: tuple[tir.Stmt, ...], positions_fixed: bool = False) -> tuple[tir.Stmt, ...]:
    """`positions_fixed`: the body of a loop whose schedule (Pipelined order=, stage=, group=)
    names its statements by position, which must stay where they are."""
    out: list[tir.Stmt] = []
    for s in body:
        fixed = isinstance(s, tir.For) and s.schedule is not None
        s = tir_walk.with_bodies(s, tuple(_body(b, fixed) for b in tir_walk.bodies(s)))
        before = out[-1] if out else None
        if not isinstance(s, tir.Gemm) or positions_fixed or before is None or not _may_clear(s):
            out.append(s)
        elif _zeroes(before, s.c):
            out[-1] = dataclasses.replace(s, clear_accum=True)
        elif (mask := _mask_after(before, s.c)) is not None:
            out[-1:] = [dataclasses.replace(s, clear_accum=True), mask]
        else:
            out.append(s)
    return body if len(out) == len(body) and all(a is b for a, b in zip(out, body)) else tuple(out)


def _may_clear(s: tir.Gemm) -> bool:
    """Whether gemm `s` may take over what is stored into its accumulator before it: not when it
    clears already, nor when it reads the accumulator as an operand too (the store comes first)."""
    return not s.clear_accum and s.c.buffer not in (s.a.buffer, s.b.buffer) and s.c.buffer.scope == "fragment"


def _mask_after(s: tir.Stmt, c: tir.Region) -> tir.Parallel | None:
    """For a Parallel loop storing to every element of `c` a choice among 0 and infinities (a
    mask), the loop that applies the same choice to the gemm's result: 0 keeps the element, an
    infinity replaces it (x + 0 = x; x + inf = inf for every finite product sum); None otherwise."""
    if not _whole(c) or not isinstance(s, tir.Parallel) or not s.body:
        return None
    *body, store = s.body
    lets = [x for x in body if isinstance(x, tir.Let)]
    if len(lets) != len(body) or not isinstance(store, tir.Store):
        return None
    if any(ld.buffer is c.buffer for x in lets for ld in tir_walk.loads(x.value)):
        return None  # a let reading the accumulator would read the products after the move
    if store.buffer != c.buffer or store.indices != s.vars or s.extents != c.buffer.const_shape:
        return None
    if not _choice(store.value, c.buffer):
        return None
    kept = tir.Load(c.buffer, store.indices, store.span)
    value = _kept(store.value, kept)
    return dataclasses.replace(s, body=(*lets, dataclasses.replace(store, value=value)))


def _choice(e: tir.Expr, c: tir.Buffer) -> bool:
    """Whether `e` is a tree of selects whose leaves are 0 or +-inf and whose conditions do not
    read `c`; at least one leaf 0 (a mask, not a fill)."""
    leaves: list[tir.Expr] = []

    def walk(x: tir.Expr) -> bool:
        if isinstance(x, tir.Select):
            reads_c = any(ld.buffer is c for ld in tir_walk.loads(x.cond))
            return not reads_c and walk(x.a) and walk(x.b)
        leaves.append(x)
        return isinstance(x, tir.FloatImm) and (x.value == 0 or math.isinf(x.value))

    return walk(e) and any(_zero(x) for x in leaves)


def _kept(e: tir.Expr, kept: tir.Load) -> tir.Expr:
    if isinstance(e, tir.Select):
        return dataclasses.replace(e, a=_kept(e.a, kept), b=_kept(e.b, kept))
    return kept if _zero(e) else e


def _zeroes(s: tir.Stmt, c: tir.Region) -> bool:
    """Whether `s` writes 0 to every element of region `c` of a fragment and nothing else."""
    if c.buffer.scope != "fragment" or not _whole(c):
        return False
    match s:
        case tir.Fill(dst, value):
            return dst == c and _zero(value)
        case tir.Parallel(vars, extents, (tir.Store(buffer, indices, value),)):
            return buffer == c.buffer and extents == c.buffer.const_shape and indices == vars and _zero(value)
        case _:
            return False


def _whole(r: tir.Region) -> bool:
    shape = r.buffer.const_shape
    return all(
        isinstance(start, tir.IntImm) and start.value == 0 and isinstance(ext, tir.IntImm) and ext.value == n
        for start, ext, n in zip(r.starts, r.extents, shape, strict=True)
    )


def _zero(e: tir.Expr) -> bool:
    return isinstance(e, tir.IntImm | tir.FloatImm) and e.value == 0
