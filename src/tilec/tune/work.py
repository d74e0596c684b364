"""What one block of a kernel does, read from its Tile IR with the dimensions fixed by `--shape`.

    gemm.tile, -D block_M=128 block_N=256 block_K=64, M=N=K=8192
  ->
    BlockWork(grid=(32, 64), flops=2*128*256*8192, stages=3, accesses=(
        Access("A", load, 128*8192*2 bytes, per issue 128*64*2, depends on (1,)),   # by only
        Access("B", load, ..., depends on (0,)),                                    # bx only
        Access("C", store, 128*256*2 bytes, depends on (0, 1))))

Loop trip counts and region extents are evaluated with every symbolic dimension a constant (the
tuner elaborates with `-D M=8192 ...`) and each block variable at the middle of its grid, so a
loop whose extent depends on the block (causal attention) counts its average block. An access's
`depends` are the block variables its origin reads: blocks that agree on them read the same data,
which is what the model's L2 reuse counts (model.py).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from tilec import tir, tir_walk
from tilec.simplify import substitute

Env = Mapping[tir.Var, int]


@dataclass(frozen=True, slots=True)
class Access:
    tensor: str
    load: bool  # a read of global memory (else a write)
    bytes: int  # over the whole block (every loop trip)
    per_issue: int  # bytes of one execution of the statement
    depends: tuple[int, ...]  # the block variables (0 = x, 1 = y, 2 = z) its origin reads
    ragged: str | None = None  # "1000 is not a multiple of 64" when the tiles overhang the tensor
    issues: int = 1  # executions one after another: the trips of the serial loops around it
    new: float = 1.0  # the fraction of `bytes` its neighbour blocks do not also read (a halo's overlap)


@dataclass(frozen=True, slots=True)
class BlockWork:
    grid: tuple[int, ...]
    threads: int
    warp_size: int
    flops: int  # matrix-instruction FLOPs (gemm) of one block
    simt_flops: int  # elementwise work of one block (one per element of a Parallel loop)
    stages: int  # the deepest Pipelined loop's num_stages (1: none)
    accesses: tuple[Access, ...]
    operand_bytes: int = 0  # shared memory its warp-level gemms read into registers (every loop trip)

    @property
    def blocks(self) -> int:
        return math.prod(self.grid)


class NotConstant(Exception):
    """An extent the shape does not fix (a dimension missing from --shape)."""


_OPS: dict[str, Callable[[int, int], int]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "//": lambda a, b: int(a / b) if b else 0,  # C division: round toward zero
    "%": lambda a, b: int(math.fmod(a, b)) if b else 0,
    "<<": operator.lshift,
    ">>": operator.rshift,
}


def evaluate(e: tir.Expr, env: Env) -> int:
    """The integer value of an index expression; NotConstant if it reads anything else."""
    match e:
        case tir.IntImm(value=v):
            return v
        case tir.Var() if e in env:
            return env[e]
        case tir.BinOp(op=op, a=a, b=b) if op in _OPS:
            return _OPS[op](evaluate(a, env), evaluate(b, env))
        case tir.Cast(value=v):
            return evaluate(v, env)
        case tir.Call(func="min" | "max", args=args):
            return (min if e.func == "min" else max)(evaluate(x, env) for x in args)
        case tir.Select(cond=c, a=a, b=b) if isinstance(c, tir.BinOp) and c.op in ("<", "<=", ">", ">=", "==", "!="):
            x, y = evaluate(c.a, env), evaluate(c.b, env)
            taken = {"<": x < y, "<=": x <= y, ">": x > y, ">=": x >= y, "==": x == y, "!=": x != y}[c.op]
            return evaluate(a if taken else b, env)
    raise NotConstant(e)


WarpGrid = Callable[[tir.Gemm], "tuple[int, int] | None"]  # a gemm -> (warp rows, warp cols) of its tiling


def block_work(kernel: tir.Kernel, warp_size: int, warp_grid: WarpGrid | None = None) -> BlockWork:
    """The work of the middle block of `kernel` (its dimensions constants). `warp_grid` says how
    the warps tile a warp-level gemm's accumulator (None: a gemm its warps do not tile, such as a
    warp-group one, whose operands the tensor cores read from shared memory themselves)."""
    grid = tuple(evaluate(g, {}) for g in kernel.grid)
    env = {v: n // 2 for v, n in zip(kernel.block_vars, grid)}
    walker = _Walker(kernel.block_vars, warp_grid or (lambda g: None))
    walker.body(kernel.body, env, 1)
    return BlockWork(
        grid, kernel.threads, warp_size, walker.flops, walker.simt, walker.stages, tuple(walker.accesses),
        walker.operand_bytes,
    )  # fmt: skip


class _Walker:
    """Sums the block's work statement by statement, `trips` the product of the enclosing loops'."""

    def __init__(self, block_vars: tuple[tir.Var, ...], warp_grid: WarpGrid):
        self.block_vars = block_vars
        self.warp_grid = warp_grid
        self.flops = self.simt = self.operand_bytes = 0
        self.stages = 1
        self.accesses: list[Access] = []
        self.lets: dict[tir.Var, tir.Expr] = {}  # each let's value in terms of what it reads (no lets)

    def body(self, stmts: tuple[tir.Stmt, ...], env: dict[tir.Var, int], trips: int) -> None:
        for s in stmts:
            self.stmt(s, env, trips)

    def stmt(self, s: tir.Stmt, env: dict[tir.Var, int], trips: int) -> None:
        match s:
            case tir.For():
                self.loop(s, env, trips)
            case tir.If(then=then):
                self.body(then, env, trips)  # the branch taken when the condition holds
            case tir.Let(var=v, value=value):
                self.lets[v] = substitute(value, self.lets)
                try:
                    env[v] = evaluate(value, env)
                except NotConstant:
                    pass
            case tir.Copy(src=src, dst=dst):
                for region, load in ((src, True), (dst, False)):
                    if region.buffer.scope == "global":
                        self.region(region, load, env, trips)
            case tir.Atomic(dst=dst) if dst.buffer.scope == "global":
                self.region(dst, False, env, trips)
            case tir.Gemm():
                self.flops += trips * gemm_flops(s, env)
                grid = self.warp_grid(s)
                if grid is not None:
                    self.operand_bytes += trips * operand_bytes(s, env, *grid)
            case tir.Parallel():
                self.parallel(s, env, trips)

    def loop(self, s: tir.For, env: dict[tir.Var, int], trips: int) -> None:
        start, stop, step = (evaluate(x, env) for x in (s.start, s.stop, s.step))
        n = max(0, -(-(stop - start) // step)) if step else 0
        if s.kind == "pipelined":
            self.stages = max(self.stages, s.num_stages)
        inner = dict(env)
        inner[s.var] = start + step * (n // 2)
        self.body(s.body, inner, trips * n)

    def region(self, r: tir.Region, load: bool, env: Env, trips: int) -> None:
        elems = math.prod(evaluate(x, env) for x in r.extents)
        issue = elems * r.buffer.dtype.bytes
        ragged = _ragged(r, env)
        starts = tuple(substitute(x, self.lets) for x in r.starts)  # `r0 = by * 32 - 1` reads `by`
        new = _unshared(starts, r.extents, env, self.block_vars) if load else 1.0
        depends = self.depends(starts)
        self.accesses.append(Access(r.buffer.name, load, trips * issue, issue, depends, ragged, trips, new))

    def depends(self, exprs: tuple[tir.Expr, ...]) -> tuple[int, ...]:
        """The block variables `exprs` read, through the lets they read too."""
        exprs = tuple(substitute(x, self.lets) for x in exprs)
        used = set().union(*(tir_walk.variables(e) for e in exprs)) if exprs else set()
        return tuple(i for i, v in enumerate(self.block_vars) if v in used)

    def parallel(self, s: tir.Parallel, env: Env, trips: int) -> None:
        elems = math.prod(s.extents)
        self.simt += trips * elems
        for st in tir_walk.stmts(s.body):
            exprs = tir_walk.stmt_exprs(st)
            for load in (x for e in exprs for x in tir_walk.loads(e) if x.buffer.scope == "global"):
                self.element(load.buffer, load.indices, True, elems, trips)
            if isinstance(st, tir.Store) and st.buffer.scope == "global":
                self.element(st.buffer, st.indices, False, elems, trips)

    def element(self, buf: tir.Buffer, indices: tuple[tir.Expr, ...], load: bool, elems: int, trips: int) -> None:
        """`elems` accesses of one element each (a Parallel's, issued together) per trip."""
        issue = buf.dtype.bytes
        self.accesses.append(Access(buf.name, load, trips * elems * issue, issue, self.depends(indices), issues=trips))


def gemm_flops(s: tir.Gemm, env: Env) -> int:
    """2 m n k of one gemm: m n from C's region, k from A's."""
    c = [evaluate(x, env) for x in s.c.extents]
    a = [evaluate(x, env) for x in s.a.extents]
    mn = math.prod(c)
    k = math.prod(a) // max(1, c[-2] if len(c) > 1 else 1)
    return 2 * mn * k


def operand_bytes(s: tir.Gemm, env: Env, warp_rows: int, warp_cols: int) -> int:
    """Shared-memory bytes one execution of a warp-level gemm reads: each of the warp_rows x
    warp_cols warps loads the rows of A and the columns of B of its own accumulator tile, so A is
    read warp_cols times over and B warp_rows times (an operand in a fragment, in registers, reads none). Fewer
    rows per warp mean more reads per FLOP (the attention of 64 rows on 4 warps: 16 each)."""
    c = [evaluate(x, env) for x in s.c.extents]
    m, n = (c[-2], c[-1]) if len(c) > 1 else (1, c[0])
    k = math.prod(evaluate(x, env) for x in s.a.extents) // max(1, m)
    total = 0
    if s.a.buffer.scope == "shared":
        total += warp_cols * m * k * s.a.buffer.dtype.bytes
    if s.b.buffer.scope == "shared":
        total += warp_rows * n * k * s.b.buffer.dtype.bytes
    return total


def _unshared(
    starts: tuple[tir.Expr, ...], extents: tuple[tir.Expr, ...], env: Env, block_vars: tuple[tir.Var, ...]
) -> float:
    """The fraction of a region (origin `starts`, lets substituted) the block next to it along each
    block variable does not read too: a window that moves by `step` per block but spans
    `extent > step` elements (a stencil's halo) overlaps its neighbour's by `extent - step`, which
    L2 serves. An origin the shape does not fix (read from a tensor: a gather) counts whole."""
    frac = 1.0
    for start, extent in zip(starts, extents):
        for v in block_vars:
            if v not in tir_walk.variables(start):
                continue
            try:
                n = evaluate(extent, env)
                step = evaluate(start, {**env, v: env[v] + 1}) - evaluate(start, env)
            except NotConstant:
                continue
            if 0 < step < n:
                frac *= step / n
    return frac


def _ragged(r: tir.Region, env: Env) -> str | None:
    """Why the region's tiles overhang its tensor, if they do: a dimension the origin steps
    through (it reads a variable) that is not a multiple of the extent."""
    for start, extent, dim in zip(r.starts, r.extents, r.buffer.shape):
        if isinstance(start, tir.IntImm):
            continue
        n, e = evaluate(dim, env), evaluate(extent, env)
        if e > 1 and n % e:
            return f"{r.buffer.name}'s extent {n} is not a multiple of the tile's {e}"
    return None
