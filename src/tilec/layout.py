"""Fragment layouts: where each element of a register tile lives.

A `Fragment` distributes a tile of shape S over the T threads of a block. The
threads form a row-major grid; each grid axis either splits one tile
dimension or replicates (the same values held by several threads, as a row
maximum is after a reduce over columns). Along a split dimension d, groups
of `vec[d]` consecutive elements go to consecutive coordinates of that axis,
cyclically:

    tile (4, 16) float16, 8 threads, grid ((2, dim 0), (4, dim 1)), vec (1, 2)
    element (i, j) -> thread (i % 2) * 4 + (j // 2) % 4
                      slot   (i // 2) * 4 + (j // 8) * 2 + j % 2

Each thread then holds a small dense array ("local shape") per fragment, and
a `Parallel` loop over the tile becomes a loop over that array. Layouts are
plain data; inference (passes/infer_layouts.py) decides them, lowering reads
them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tilec import tir
from tilec.simplify import int_, simplify


@dataclass(frozen=True, slots=True)
class Axis:
    extent: int
    dim: int | None  # the tile dimension this axis splits, None = replication


@dataclass(frozen=True, slots=True)
class Fragment:
    shape: tuple[int, ...]
    grid: tuple[Axis, ...]  # outermost first; extents multiply to the block's threads
    vec: tuple[int, ...]  # per tile dimension

    @property
    def threads(self) -> int:
        return math.prod(a.extent for a in self.grid)

    def split(self, dim: int) -> int:
        """How many threads share dimension `dim` (1 if no axis splits it)."""
        return next((a.extent for a in self.grid if a.dim == dim), 1)

    def axis_stride(self, dim: int | None, index: int = 0) -> int:
        """Thread-id stride of the axis splitting `dim` (or the index-th replica axis)."""
        stride = 1
        seen = 0
        for axis in reversed(self.grid):
            if axis.dim == dim:
                if dim is not None or seen == index:
                    return stride
                seen += 1
            stride *= axis.extent
        raise KeyError(dim)

    @property
    def local_shape(self) -> tuple[int, ...]:
        return tuple(math.ceil(s / (v * self.split(d))) * v for d, (s, v) in enumerate(zip(self.shape, self.vec)))

    @property
    def local_size(self) -> int:
        return math.prod(self.local_shape)

    @property
    def exact(self) -> bool:
        """True when every (thread, slot) pair holds a real element (no padding)."""
        return all(s % (v * self.split(d)) == 0 for d, (s, v) in enumerate(zip(self.shape, self.vec)))

    @property
    def replicated(self) -> bool:
        return any(a.dim is None and a.extent > 1 for a in self.grid)

    def describe(self) -> str:
        axes = " x ".join(f"{a.extent}{'' if a.dim is None else f'@{a.dim}'}" for a in self.grid)
        return f"threads [{axes}] vec {list(self.vec)} local {list(self.local_shape)}"


def thread_coords(frag: Fragment, tid: tir.Expr) -> dict[int | None, list[tir.Expr]]:
    """Coordinate expression of each grid axis for thread id `tid`."""
    coords: dict[int | None, list[tir.Expr]] = {}
    stride = 1
    for axis in reversed(frag.grid):
        expr = tid if stride == 1 else tir.BinOp("//", tid, int_(stride), tid.dtype)
        if stride * axis.extent < frag.threads:
            expr = tir.BinOp("%", expr, int_(axis.extent), tid.dtype)
        coords.setdefault(axis.dim, []).insert(0, simplify(expr) if axis.extent > 1 else int_(0))
        stride *= axis.extent
    return coords


def element_index(
    frag: Fragment, coords: dict[int | None, list[tir.Expr]], local: tuple[int, ...]
) -> tuple[tir.Expr, ...]:
    """Tile index held by the thread at `coords` in local slot `local` (a tuple per dim)."""
    out = []
    for d, (lv, v) in enumerate(zip(local, frag.vec)):
        t = frag.split(d)
        base = (lv // v) * v * t + lv % v
        if t == 1:
            out.append(int_(base))
        else:
            c = coords[d][0]
            out.append(simplify(tir.BinOp("+", tir.BinOp("*", c, int_(v), c.dtype), int_(base), c.dtype)))
    return tuple(out)


def local_slot(frag: Fragment, local: tuple[int, ...]) -> int:
    slot = 0
    for lv, extent in zip(local, frag.local_shape):
        slot = slot * extent + lv
    return slot


def local_indices(frag: Fragment) -> list[tuple[int, ...]]:
    """All local slots of a thread, row-major."""
    out: list[tuple[int, ...]] = [()]
    for extent in frag.local_shape:
        out = [prefix + (i,) for prefix in out for i in range(extent)]
    return out


# ---------------------------------------------------------------- constructors


def _pow2_floor(n: int) -> int:
    return 1 << (max(n, 1).bit_length() - 1)


def default(shape: tuple[int, ...], threads: int, elem_bytes: int) -> Fragment:
    """The free choice: vectors of up to 16 bytes along the last dimension
    (narrower when a tile is too small to give every thread one), threads
    filling the last dimension first, leftover threads replicate."""
    rank = len(shape)
    vec = [1] * rank
    last = shape[-1]
    v = _pow2_floor(max(1, 16 // elem_bytes))
    while v > 1 and (last % v or math.prod(shape) // v < threads):
        v //= 2
    vec[-1] = v
    axes: list[Axis] = []
    remaining = threads
    for d in reversed(range(rank)):
        t = min(remaining, _pow2_floor(max(1, math.ceil(shape[d] / vec[d]))))
        if t > 1:
            axes.insert(0, Axis(t, d))
            remaining //= t
    if remaining > 1:
        axes.insert(0, Axis(remaining, None))
    return Fragment(shape, tuple(axes), tuple(vec))


def accumulator(shape: tuple[int, int], threads: int) -> Fragment:
    """Layout of a SIMT gemm accumulator: a 2-D thread grid, each thread a
    strided micro-tile. Rows take the square root of the threads, so that two
    accumulators with the same M and threads have the same row mapping (the
    online softmax of flash attention relies on it)."""
    m, n = shape
    tm = min(_pow2_floor(m), 1 << (threads.bit_length() - 1) // 2)
    tn = min(threads // tm, _pow2_floor(n))
    axes = [Axis(tm, 0), Axis(tn, 1)]
    rest = threads // (tm * tn)
    if rest > 1:
        axes.insert(0, Axis(rest, None))
    return Fragment(shape, tuple(axes), (1, 1))


def reduced(frag: Fragment, dim: int) -> Fragment:
    """The layout of reduce(frag, dim): `dim` becomes replication."""
    grid = []
    for a in frag.grid:
        if a.dim == dim:
            grid.append(Axis(a.extent, None))
        elif a.dim is not None and a.dim > dim:
            grid.append(Axis(a.extent, a.dim - 1))
        else:
            grid.append(a)
    shape = frag.shape[:dim] + frag.shape[dim + 1 :]
    vec = frag.vec[:dim] + frag.vec[dim + 1 :]
    if not shape:
        shape, vec = (1,), (1,)
    return Fragment(shape, tuple(grid), vec)


def projected(frag: Fragment, dims: tuple[int, ...]) -> Fragment:
    """The layout a fragment indexed by loop variables `dims` (in order) must
    have to be read locally inside a Parallel loop of layout `frag`."""
    grid = []
    for a in frag.grid:
        if a.dim is None or a.dim not in dims:
            grid.append(Axis(a.extent, None))
        else:
            grid.append(Axis(a.extent, dims.index(a.dim)))
    shape = tuple(frag.shape[d] for d in dims)
    vec = tuple(frag.vec[d] for d in dims)
    return Fragment(shape, tuple(grid), vec)


def same_placement(a: Fragment, b: Fragment) -> bool:
    """Equal up to how replication axes are split (adjacent replica axes merge)."""
    return a.shape == b.shape and a.vec == b.vec and _merged(a.grid) == _merged(b.grid)


def _merged(grid: tuple[Axis, ...]) -> tuple[Axis, ...]:
    out: list[Axis] = []
    for a in grid:
        if a.extent == 1:
            continue
        if out and a.dim is None and out[-1].dim is None:
            out[-1] = Axis(out[-1].extent * a.extent, None)
        else:
            out.append(a)
    return tuple(out)
