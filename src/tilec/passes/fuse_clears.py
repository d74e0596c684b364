"""A tile zeroed just before a gemm accumulates into it: the gemm clears it itself (clear_accum).

    for i, j in parallel(128, 128):               # or: fill acc_s[0 : +128, 0 : +128] = 0.0
      acc_s[i, j] = 0.0
    gemm Q_s[...], K_s[...] -> acc_s[0 : +128, 0 : +128] (..., clear_accum=False)

becomes

    gemm Q_s[...], K_s[...] -> acc_s[0 : +128, 0 : +128] (..., clear_accum=True)

which wgmma does for free (its first k step reads no accumulator) where the zeros cost a store
per register. TileLang's attention programs start each key tile's scores at zero this way, or
at their mask, which `decide_masks` turns into zeros on the tiles wholly inside it.
"""

from __future__ import annotations

import dataclasses

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
        if isinstance(s, tir.Gemm) and not positions_fixed and _clears(s, out[-1] if out else None):
            out[-1] = dataclasses.replace(s, clear_accum=True)
        else:
            out.append(s)
    return body if len(out) == len(body) and all(a is b for a, b in zip(out, body)) else tuple(out)


def _clears(s: tir.Gemm, before: tir.Stmt | None) -> bool:
    """Whether gemm `s` can clear its accumulator in place of `before`'s zeros: not when it reads
    the accumulator as an operand too (the zeros come first there)."""
    if s.clear_accum or before is None:
        return False
    return s.c.buffer not in (s.a.buffer, s.b.buffer) and _zeroes(before, s.c)


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
