"""Barrier placement: which shared tiles a tile op reads and writes, and the
tracker that puts a `__syncthreads()` between a write and a later read (or a
read and a later overwrite) of the same tile.

    copy(A[..], A_shared)        writes A_shared
    __syncthreads();             <- A_shared written, now read
    gemm(A_shared, B_shared, C)  reads A_shared
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tilec import thread_ir as T
from tilec import tir, tir_walk
from tilec.dtypes import DType


@dataclass
class Barriers:
    """Shared buffers read and written since the last __syncthreads()."""

    reads: set[str] = field(default_factory=set)
    writes: set[str] = field(default_factory=set)

    def before(self, reads: set[str], writes: set[str]) -> list[T.Stmt]:
        hazard = (reads & self.writes) or (writes & (self.reads | self.writes))
        out: list[T.Stmt] = [syncthreads()] if hazard else []
        if hazard:
            self.reads, self.writes = set(), set()
        self.reads |= reads
        self.writes |= writes
        return out

    def flush(self) -> list[T.Stmt]:
        if self.reads or self.writes:
            self.reads, self.writes = set(), set()
            return [syncthreads()]
        return []


def syncthreads() -> T.Call:
    return T.Call(T.Intrin("__syncthreads", (), DType.int32))


def shared_reads_writes(s: tir.Stmt) -> tuple[set[tir.Buffer], set[tir.Buffer]]:
    """Shared buffers a tile op reads and writes."""
    reads: set[tir.Buffer] = set()
    writes: set[tir.Buffer] = set()

    def rd(e: tir.Expr) -> None:
        reads.update(x.buffer for x in tir_walk.loads(e) if x.buffer.scope == "shared")

    def region(r: tir.Region | None, out: set[tir.Buffer]) -> None:
        if r is None:
            return
        for e in (*r.starts, *r.extents):  # indices may read shared memory too (a gather's table)
            rd(e)
        if r.buffer.scope == "shared":
            out.add(r.buffer)

    def walk(x: tir.Stmt) -> None:
        match x:
            case tir.Copy(src, dst):
                region(src, reads)
                region(dst, writes)
            case tir.Gemm(a, b):
                region(a, reads)
                region(b, reads)
            case tir.Fill(dst, v):
                region(dst, writes)
                rd(v)
            case tir.Reduce(src=src, dst=dst):
                region(src, reads)
                region(dst, writes)
            case tir.CumSum(src=src, dst=dst):
                region(src, reads)
                region(dst, writes)
            case tir.AtomicAdd(dst, src, value):
                region(src, reads)
                if value is not None:
                    rd(value)
            case tir.Store(buf, idx, value):
                if buf.scope == "shared":
                    writes.add(buf)
                for i in idx:
                    rd(i)
                rd(value)
            case tir.Let(_, value):
                rd(value)
            case tir.If(cond, then, orelse):
                rd(cond)
                for t in then + orelse:
                    walk(t)
            case tir.For(start=start, stop=stop, body=body):
                rd(start)
                rd(stop)
                for t in body:
                    walk(t)
            case tir.Parallel(body=body):
                for t in body:
                    walk(t)
            case tir.Print(value=value):
                if isinstance(value, tir.Region):
                    region(value, reads)
                else:
                    rd(value)
            case tir.DeviceAssert(cond=cond):
                rd(cond)
            case _:
                pass

    walk(s)
    return reads, writes


def touches_shared(stmts: tuple[tir.Stmt, ...]) -> bool:
    for s in stmts:
        r, w = shared_reads_writes(s)
        if r or w or isinstance(s, (tir.Reduce, tir.Gemm)):
            return True
    return False
