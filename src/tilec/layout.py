"""Fragment layouts: where each element of a register tile lives.

A `Fragment` distributes a tile of shape S over the T threads of a block.
Both the thread id and the per-thread register slot are mixed-radix numbers
whose digits ("parts") each step one tile dimension by a fixed stride:

    tile (4, 16) float16, 8 threads, 2-element vectors:
      thread parts (least significant first): 4 x (dim 1, stride 2), 2 x (dim 0, stride 1)
      local parts  (most significant first):  2 x (dim 0, stride 2), 2 x (dim 1, stride 8), 2 x (dim 1, stride 1)
    thread t = c0 + 4 * c1 with registers (r0, r1, r2) holds element
      (i, j) = (c1 + 2 * r0, 2 * c0 + 8 * r1 + r2),   slot = 4 * r0 + 2 * r1 + r2

A thread part with no dimension is replication: those threads hold the same
values (a row maximum after a reduce over columns). Simple cyclic layouts
(`default`), the SIMT gemm accumulator and a warp's m16n8k16 matrix accumulator
are all instances, so one lowering of loops, copies and reductions serves
them all. Layouts are plain data; inference (passes/infer_layouts.py)
decides them, lowering reads them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from tilec import tir
from tilec.dtypes import DType
from tilec.layout_algebra import widest_swizzle
from tilec.simplify import int_, simplify

I32 = DType.int32


@dataclass(frozen=True, slots=True)
class Part:
    extent: int
    dim: int | None  # the tile dimension this digit steps; None = replication (thread parts only)
    stride: int  # tile-index step per unit of this digit


@dataclass(frozen=True, slots=True)
class Fragment:
    shape: tuple[int, ...]
    thread_parts: tuple[Part, ...]  # least significant first; extents multiply to the block's threads
    local_parts: tuple[Part, ...]  # most significant first (row-major register order)

    @property
    def threads(self) -> int:
        return math.prod(p.extent for p in self.thread_parts)

    @property
    def local_size(self) -> int:
        return math.prod(p.extent for p in self.local_parts)

    @property
    def replicated(self) -> bool:
        return any(p.dim is None and p.extent > 1 for p in self.thread_parts)

    def thread_stride(self, index: int) -> int:
        """Thread-id stride of thread part `index`."""
        return math.prod(p.extent for p in self.thread_parts[:index])

    def padded(self, dim: int) -> bool:
        """True when some (thread, register) pairs fall past the tile along `dim`."""
        top = sum((p.extent - 1) * p.stride for p in (*self.thread_parts, *self.local_parts) if p.dim == dim)
        return top >= self.shape[dim]

    def describe(self) -> str:
        def show(parts: tuple[Part, ...]) -> str:
            return " ".join(f"{p.extent}{'' if p.dim is None else f'@{p.dim}/{p.stride}'}" for p in parts)

        return f"threads [{show(self.thread_parts)}] regs [{show(self.local_parts)}]"


# ---------------------------------------------------------------- evaluation


def thread_coords(frag: Fragment, tid: tir.Expr) -> list[tir.Expr]:
    """The digit of each thread part for thread id `tid` (0 for extent 1)."""
    out: list[tir.Expr] = []
    stride = 1
    for part in frag.thread_parts:
        if part.extent == 1:
            out.append(int_(0))
            continue
        expr = tid if stride == 1 else tir.BinOp("//", tid, int_(stride), tid.dtype)
        if stride * part.extent < frag.threads:
            expr = tir.BinOp("%", expr, int_(part.extent), tid.dtype)
        out.append(simplify(expr))
        stride *= part.extent
    return out


def tile_index(frag: Fragment, threads: list[tir.Expr], locals_: Sequence[tir.Expr | int]) -> tuple[tir.Expr, ...]:
    """Tile index held by thread digits `threads` in the register with digits
    `locals_` (terms summed largest stride first, the way one reads them)."""
    out = []
    digits = list(zip((*frag.thread_parts, *frag.local_parts), (*threads, *locals_)))
    for d in range(len(frag.shape)):
        terms = sorted(((p, g) for p, g in digits if p.dim == d and p.extent > 1), key=lambda pg: -pg[0].stride)
        total: tir.Expr = int_(0)
        for part, digit in terms:
            step = int_(digit) if isinstance(digit, int) else digit
            total = tir.BinOp("+", total, tir.BinOp("*", step, int_(part.stride), I32), I32)
        out.append(simplify(total))
    return tuple(out)


def slot(frag: Fragment, digits: list[tir.Expr] | tuple[int, ...]) -> tir.Expr:
    """Register slot (mixed radix over the local parts) of local digits."""
    total: tir.Expr = int_(0)
    for part, digit in zip(frag.local_parts, digits):
        step = int_(digit) if isinstance(digit, int) else digit
        total = tir.BinOp("+", tir.BinOp("*", total, int_(part.extent), I32), step, I32)
    return simplify(total)


def local_digits(frag: Fragment) -> list[tuple[int, ...]]:
    """Every register's local digits, in slot order."""
    out: list[tuple[int, ...]] = [()]
    for part in frag.local_parts:
        out = [prefix + (i,) for prefix in out for i in range(part.extent)]
    return out


# ---------------------------------------------------------------- constructors


def _pow2_floor(n: int) -> int:
    return 1 << (max(n, 1).bit_length() - 1)


def cyclic(shape: tuple[int, ...], splits: tuple[int, ...], vec: tuple[int, ...], threads: int) -> Fragment:
    """Groups of vec[d] elements dealt to splits[d] threads round-robin along
    each dim, the last dim on the fastest threads; leftover threads replicate."""
    thread_parts = [Part(t, d, v) for d, (t, v) in reversed(list(enumerate(zip(splits, vec)))) if t > 1]
    rest = threads // math.prod(splits)
    if rest > 1:
        thread_parts.append(Part(rest, None, 0))
    local_parts = []
    for d, (s, t, v) in enumerate(zip(shape, splits, vec)):
        groups = math.ceil(s / (v * t))
        if groups > 1:
            local_parts.append(Part(groups, d, v * t))
        if v > 1:
            local_parts.append(Part(v, d, 1))
    return Fragment(shape, tuple(thread_parts), tuple(local_parts))


def _vector(shape: tuple[int, ...], threads: int, elem_bytes: int) -> int:
    """Elements of a free layout's vectors along the last dimension: 16 bytes, narrower where the
    last extent does not divide or the tile is too small to give every thread one."""
    v = _pow2_floor(max(1, 16 // elem_bytes))
    while v > 1 and (shape[-1] % v or math.prod(shape) // v < threads):
        v //= 2
    return v


def default(shape: tuple[int, ...], threads: int, elem_bytes: int) -> Fragment:
    """The free choice: vectors of up to 16 bytes along the last dimension
    (narrower when a tile is too small to give every thread one), threads
    filling the last dimension first, leftover threads replicate."""
    v = _vector(shape, threads, elem_bytes)
    vec = (1,) * (len(shape) - 1) + (v,)
    splits = [1] * len(shape)
    remaining = threads
    for d in reversed(range(len(shape))):
        t = min(remaining, _pow2_floor(max(1, math.ceil(shape[d] / vec[d]))))
        splits[d] = t
        remaining //= t
    return cyclic(shape, tuple(splits), vec, threads)


SECTOR_BYTES = 32  # the unit of a global memory access: a lone 16-byte vector uses half of one


def row_reduced(shape: tuple[int, int], threads: int, elem_bytes: int) -> Fragment:
    """The free choice for a 2-D tile that a reduce folds along its rows (`reduce_max(x, m, dim=1)`):
    threads on the rows first, where `default` puts them on the columns first.

    A row spread over L lanes costs each thread r * log2(L) shuffles for its r rows, and shuffles
    issue at a quarter of the ALU rate, while the row's registers fold in-thread at one ALU op
    each. topk's 64 x 128 float32 on 128 threads: `default` spreads a row over 32 lanes, each
    thread holding 16 rows x 4 columns, 16 x (3 ops + 5 shuffles); here 2 lanes a row, one row
    each, 63 ops + 1 shuffle. The rows take the most threads (a power of two) that leave each row
    `min_lanes`, the fewest lanes whose adjacent vectors fill a 32-byte sector (2 of 16 bytes),
    so that one vector access of a warp still moves whole sectors; the columns take the rest,
    vectors as `default`'s. Rows that do not divide evenly take fewer threads where more would
    pad a row group or leave threads replicating (more registers a thread): of the splits, the one
    of fewest registers, then most threads on the rows. `default` is one of the splits, so this is
    never more registers nor more shuffles than it; one row (rmsnorm, a softmax row) gives it, and
    so does a block of threads not a power of two."""
    if threads & (threads - 1):
        return default(shape, threads, elem_bytes)
    rows, cols = shape
    v = _vector(shape, threads, elem_bytes)
    vectors = _pow2_floor(math.ceil(cols / v))  # the most threads the columns can take
    min_lanes = min(vectors, -(-SECTOR_BYTES // (v * elem_bytes)))
    most = min(_pow2_floor(rows), max(1, threads // min_lanes))
    splits = [(1 << k, min(threads >> k, vectors)) for k in reversed(range(most.bit_length()))]
    return min((cyclic(shape, split, (1, v), threads) for split in splits), key=lambda f: f.local_size)


def replicated_all(shape: tuple[int, ...], threads: int, vec_last: int = 1) -> Fragment:
    """Every thread holds the whole tile (alloc_local buffers)."""
    return cyclic(shape, (1,) * len(shape), (1,) * (len(shape) - 1) + (vec_last,), threads)


def accumulator(shape: tuple[int, int], threads: int) -> Fragment:
    """Layout of a SIMT gemm accumulator: a 2-D thread grid, each thread a
    strided micro-tile. Rows take the square root of the threads, so that two
    accumulators with the same M and threads have the same row mapping (the
    online softmax of flash attention relies on it)."""
    m, n = shape
    tm = min(_pow2_floor(m), 1 << (threads.bit_length() - 1) // 2)
    tn = min(threads // tm, _pow2_floor(n))
    return cyclic(shape, (tm, tn), (1, 1), threads)


def reduced(frag: Fragment, dim: int) -> Fragment:
    """The layout of reduce(frag, dim): `dim` becomes replication."""

    def renumber(p: Part) -> Part:
        if p.dim == dim:
            return Part(p.extent, None, 0)
        if p.dim is not None and p.dim > dim:
            return Part(p.extent, p.dim - 1, p.stride)
        return p

    threads = tuple(renumber(p) for p in frag.thread_parts)
    local = tuple(renumber(p) for p in frag.local_parts if p.dim != dim)
    shape = frag.shape[:dim] + frag.shape[dim + 1 :]
    return Fragment(shape or (1,), threads, local)


def projected(frag: Fragment, dims: tuple[int, ...]) -> Fragment:
    """The layout a fragment indexed by loop variables `dims` (in order) must
    have to be read locally inside a Parallel loop of layout `frag`."""

    def renumber(p: Part) -> Part:
        if p.dim is None or p.dim not in dims:
            return Part(p.extent, None, 0)
        return Part(p.extent, dims.index(p.dim), p.stride)

    threads = tuple(renumber(p) for p in frag.thread_parts)
    local = tuple(renumber(p) for p in frag.local_parts if p.dim in dims)
    return Fragment(tuple(frag.shape[d] for d in dims), threads, local)


def column_blocks(frag: Fragment, width: int) -> Fragment | None:
    """`frag` with its first register digit split so that its upper part steps whole blocks of
    `width` columns (last dimension): a loop over that digit, outermost, visits the fragment one
    column block at a time (sm90.bulk_store stores an accumulator so, a block per staging tile).
    The registers keep their numbering (`merged` of the result is `frag`'s). None where that
    digit does not step columns, or the columns of one block are not all below it.

        regs [32@1/8 2@0/8 2@1/1], width 64  ->  regs [4@1/64 8@1/8 2@0/8 2@1/1]
    """
    last = len(frag.shape) - 1
    local = _drop1(frag.local_parts)
    if not local or local[0].dim != last:
        return None
    top = local[0]
    if width % top.stride or top.stride >= width or top.extent * top.stride != frag.shape[last]:
        return None
    inside = [p for p in (*frag.thread_parts, *local[1:]) if p.dim == last]
    if sum((p.extent - 1) * p.stride for p in inside) >= top.stride:  # another digit reaches past a block
        return None
    split = (Part(top.extent * top.stride // width, last, width), Part(width // top.stride, last, top.stride))
    return Fragment(frag.shape, frag.thread_parts, (*split, *local[1:]))


def staged_columns(frag: Fragment, elem_bytes: int) -> tuple[int, Fragment | None]:
    """How a fragment's store through a swizzled staging tile (sm90.bulk_store) stages it, in
    column blocks of the widest swizzle its rows take: (columns of the staging tile, the
    `column_blocks` layout it is written by), two blocks written a block at a time where the tile
    has an even number of blocks, more than two, and its layout splits so; else (the tile's
    columns, None), the whole tile at once. An even number keeps the halves alternating from one
    tile to the next (a persistent kernel's block stores its tiles back to back, each store
    waited for only before its half is written again)."""
    cols = frag.shape[-1]
    sw = widest_swizzle(cols * elem_bytes)
    width = sw // elem_bytes if sw is not None else 0
    blocks = cols // width if width else 0
    if blocks <= 2 or blocks % 2 or cols % width:
        return cols, None
    split = column_blocks(frag, width)
    return (2 * width, split) if split is not None else (cols, None)


def merged(parts: tuple[Part, ...]) -> tuple[Part, ...]:
    """Register digits with unit ones dropped and each digit merged into the one above it where
    together they step one dimension evenly (the inverse of `column_blocks`'s split)."""
    out: list[Part] = []
    for p in _drop1(parts):
        if out and out[-1].dim == p.dim and p.dim is not None and out[-1].stride == p.stride * p.extent:
            out[-1] = Part(out[-1].extent * p.extent, p.dim, p.stride)
        else:
            out.append(p)
    return tuple(out)


def same_placement(a: Fragment, b: Fragment) -> bool:
    """Equal up to how replication parts are split and unit parts."""
    return (
        a.shape == b.shape
        and _norm(a.thread_parts) == _norm(b.thread_parts)
        and _drop1(a.local_parts) == _drop1(b.local_parts)
    )


def _drop1(parts: tuple[Part, ...]) -> tuple[Part, ...]:
    return tuple(p for p in parts if p.extent > 1)


def _norm(parts: tuple[Part, ...]) -> tuple[Part, ...]:
    out: list[Part] = []
    for p in _drop1(parts):
        if out and p.dim is None and out[-1].dim is None:
            out[-1] = Part(out[-1].extent * p.extent, None, 0)
        else:
            out.append(p)
    return tuple(out)


def warp_grid(m: int, n: int, warps: int, policy: str, rows: int | None = None) -> tuple[int, int] | None:
    """(warp rows, warp cols) tiling an m x n accumulator with m16n8 tiles, or
    None when the shape does not divide. FullRow gives every warp whole rows
    (the softmax of flash attention then stays inside a warp); Square keeps
    each warp's tile as square as possible; FullCol gives whole columns."""
    options = [(wm, warps // wm) for wm in range(1, warps + 1) if warps % wm == 0]
    fits = [(wm, wn) for wm, wn in options if m % (wm * 16) == 0 and n % (wn * 8) == 0]
    if not fits:
        return None
    if rows is not None and any(wm == rows for wm, _ in fits):
        return rows, warps // rows  # match an earlier accumulator's rows (shared row statistics)
    if policy == "FullRow":
        return max(fits)
    if policy == "FullCol":
        return min(fits)
    return min(fits, key=lambda w: (abs(math.log2((m / w[0]) / (n / w[1]))), -w[0]))


def mma_accumulator(shape: tuple[int, int], threads: int, policy: str, rows: int | None = None) -> Fragment | None:
    """The accumulator of a warp's m16n8k16 matrix instruction tiled over the block's warps.

    In one m16n8 tile lane l holds (l / 4, 2 * (l % 4) + e) and the same 8 rows
    lower (c0..c3); warps tile the block by `warp_grid`, each warp repeating
    the m16n8 tile MI x NI times (`rows`: the warp rows to use if they fit,
    so accumulators of one kernel with the same M split their rows alike):
      threads: 4 @ dim 1 stride 2, 8 @ dim 0 stride 1, wn @ dim 1, wm @ dim 0
      regs:    MI @ dim 0 stride 16, NI @ dim 1 stride 8, 2 @ dim 0 stride 8, 2 @ dim 1 stride 1
    """
    m, n = shape
    lanes = (Part(4, 1, 2), Part(8, 0, 1))  # the threads of one m16n8 tile: the instruction's warp
    grid = warp_grid(m, n, threads // math.prod(p.extent for p in lanes), policy, rows)
    if grid is None:
        return None
    wm, wn = grid
    mi, ni = m // (wm * 16), n // (wn * 8)
    thread_parts = (*lanes, Part(wn, 1, ni * 8), Part(wm, 0, mi * 16))
    local_parts = (Part(mi, 0, 16), Part(ni, 1, 8), Part(2, 0, 8), Part(2, 1, 1))
    return Fragment(shape, thread_parts, local_parts)


def warp_rows(frag: Fragment) -> int:
    """The warp rows (wm) of an `mma_accumulator`."""
    return frag.thread_parts[3].extent
