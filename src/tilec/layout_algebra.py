"""Shared-memory layouts: logical index of a tile -> physical offset, in elements.

A `Layout` is a strided map (row-major, padded, or any permutation of those)
optionally followed by an XOR swizzle in 16-byte chunks. The same data gives
the offset of a concrete index (`apply`), a `tir` expression for a symbolic
one (`expr`), and, when the map is a bijection, its inverse.

    tile (8, 64) float16, 128-byte swizzle: Swizzle(bits=3, base=3, shift=3)
    (i, j) -> o = i * 64 + j;  o ^ ((o // 64) % 8) * 8
    (1, 0) -> 64 ^ 8 = 72          the row's first chunk moved to chunk 1
    (1, 8) -> 72 ^ 8 = 64          and chunk 1 to chunk 0: eight rows, eight banks
    expr((i, j)) = (i * 64 + j) ^ (i * 64 + j) // 64 % 8 * 8
                 -> (i * 64 + j) ^ i % 8 * 8     after arith.simplify with 0 <= j < 64

The swizzle, in words: cut the offset into bit fields. The lowest `base`
bits address an element inside a 16-byte chunk and are left alone. The next
`bits` bits number a chunk inside a group of 2**bits chunks. The field of the
same width that sits `shift` bits higher (for shift=3: the index of the
128-byte line the element falls in) is added without carry (XOR) into the
chunk number. Each line therefore sees its chunks in a different order, and
the same column of 8 consecutive lines lands in 8 different chunk positions,
which is what spreads a warp's matrix-load phase over all 32 banks. Because the
source field lies above the target field (shift >= bits), applying the
swizzle twice gives back the offset: it is its own inverse.

32/64/128-byte swizzles permute groups of 2/4/8 chunks (bits = 1/2/3); with
elements of e bytes, base = log2(16 / e). This is the pattern TMA and wgmma
call SWIZZLE_32B/64B/128B, and the one a warp's 8x8 matrix loads need to be conflict free.

Everything here is pure Python integer algebra; arith.py (TVM) simplifies
and proves the expressions this module builds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tilec import tir
from tilec.simplify import int_

CHUNK_BYTES = 16  # the unit of swizzles, of matrix-load rows and of 16-byte vector copies
BANKS = 32
BANK_BYTES = 4

# ---------------------------------------------------------------- integer evaluation of index expressions

_INT_OPS = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "//": lambda a, b: int(a / b) if (a < 0) != (b < 0) else a // b,  # C: round toward zero
    "%": lambda a, b: a - b * (int(a / b) if (a < 0) != (b < 0) else a // b),
    "^": lambda a, b: a ^ b,
    "&": lambda a, b: a & b,
    "|": lambda a, b: a | b,
    "<<": lambda a, b: a << b,
    ">>": lambda a, b: a >> b,
    "<": lambda a, b: int(a < b),
    "<=": lambda a, b: int(a <= b),
    ">": lambda a, b: int(a > b),
    ">=": lambda a, b: int(a >= b),
    "==": lambda a, b: int(a == b),
    "!=": lambda a, b: int(a != b),
    "and": lambda a, b: int(bool(a) and bool(b)),
    "or": lambda a, b: int(bool(a) or bool(b)),
}


def evaluate(e: tir.Expr, env: Mapping[tir.Var, int]) -> int:
    """Value of an integer index expression with its variables bound in `env`."""
    match e:
        case tir.IntImm(value) | tir.BoolImm(value):
            return int(value)
        case tir.Var():
            return env[e]
        case tir.BinOp(op, a, b):
            return _INT_OPS[op](evaluate(a, env), evaluate(b, env))
        case tir.Select(cond, a, b):
            return evaluate(a, env) if evaluate(cond, env) else evaluate(b, env)
        case tir.Call("min" | "max" as f, args):
            return (min if f == "min" else max)(evaluate(x, env) for x in args)
        case _:
            raise TypeError(f"not an integer index expression: {e!r}")


# ---------------------------------------------------------------- swizzle


def _log2(n: int, what: str) -> int:
    if n < 1 or n & (n - 1):
        raise ValueError(f"{what} must be a power of two, got {n}")
    return n.bit_length() - 1


@dataclass(frozen=True, slots=True)
class Swizzle:
    """offset ^ (((offset >> (base + shift)) % 2**bits) << base); see the module docstring."""

    bits: int
    base: int
    shift: int

    def __post_init__(self) -> None:
        if self.bits < 0 or self.base < 0 or self.shift < self.bits:
            raise ValueError(f"invalid swizzle {self}: the source field must lie above the target (shift >= bits)")

    @property
    def block(self) -> int:
        """Offsets are permuted inside aligned blocks of this many elements."""
        return 1 << (self.base + self.shift + self.bits)

    def apply(self, offset: int) -> int:
        return offset ^ (((offset >> (self.base + self.shift)) & ((1 << self.bits) - 1)) << self.base)

    def expr(self, offset: tir.Expr) -> tir.Expr:
        if self.bits == 0:
            return offset
        dt = offset.dtype
        line = tir.BinOp("//", offset, int_(1 << (self.base + self.shift)), dt)
        sel = tir.BinOp("*", tir.BinOp("%", line, int_(1 << self.bits), dt), int_(1 << self.base), dt)
        return tir.BinOp("^", offset, sel, dt)


def swizzle_for(swizzle_bytes: int, elem_bytes: int) -> Swizzle:
    """The 32/64/128-byte swizzle for elements of `elem_bytes` bytes."""
    if swizzle_bytes not in (32, 64, 128):
        raise ValueError(f"swizzles are 32, 64 or 128 bytes, got {swizzle_bytes}")
    if elem_bytes not in (1, 2, 4, 8):
        raise ValueError(f"element size must be 1, 2, 4 or 8 bytes, got {elem_bytes}")
    return Swizzle(_log2(swizzle_bytes // CHUNK_BYTES, "chunks"), _log2(CHUNK_BYTES // elem_bytes, "elems"), 3)


# ---------------------------------------------------------------- layout


@dataclass(frozen=True, slots=True)
class Layout:
    """index -> swizzle(sum(index[d] * strides[d])); swizzle None = plain strided."""

    shape: tuple[int, ...]
    strides: tuple[int, ...]
    swizzle: Swizzle | None = None

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def cosize(self) -> int:
        """Elements of storage the layout spans (largest offset + 1)."""
        top = sum((s - 1) * st for s, st in zip(self.shape, self.strides)) + 1
        if self.swizzle is None:
            return top
        return -(-top // self.swizzle.block) * self.swizzle.block

    def apply(self, index: Sequence[int]) -> int:
        _check_rank(self, index)
        offset = sum(i * st for i, st in zip(index, self.strides))
        return offset if self.swizzle is None else self.swizzle.apply(offset)

    def expr(self, index: Sequence[tir.Expr]) -> tir.Expr:
        offset = self.strided_expr(index)
        return offset if self.swizzle is None else self.swizzle.expr(offset)

    def strided_expr(self, index: Sequence[tir.Expr]) -> tir.Expr:
        """The offset before the swizzle: sum(index[d] * strides[d])."""
        _check_rank(self, index)
        offset: tir.Expr | None = None
        for i, st in zip(index, self.strides):
            term = i if st == 1 else tir.BinOp("*", i, int_(st), i.dtype)
            offset = term if offset is None else tir.BinOp("+", offset, term, i.dtype)
        assert offset is not None, "a layout has at least one dimension"
        return offset

    def offsets(self) -> list[int]:
        """Every offset, index in row-major order."""
        return [self.apply(ix) for ix in indices(self.shape)]


def apply_tile(layout: Layout, index: Sequence[int]) -> int:
    """The offset of a tile's `index`, also through the extra dimension of a layout in column
    blocks (`swizzled_blocks`: (r, c) -> (r, c // width, c % width))."""
    if len(layout.shape) == len(index) + 1:
        width = layout.shape[-1]
        index = (*index[:-1], index[-1] // width, index[-1] % width)
    return layout.apply(index)


def _check_rank(layout: Layout, index: Sequence[object]) -> None:
    if len(index) != len(layout.shape):
        raise ValueError(f"index of rank {len(index)} for a layout of shape {layout.shape}")


def indices(shape: Sequence[int]) -> list[tuple[int, ...]]:
    """All indices of a shape, row-major."""
    out: list[tuple[int, ...]] = [()]
    for extent in shape:
        out = [prefix + (i,) for prefix in out for i in range(extent)]
    return out


def row_major(shape: Sequence[int]) -> Layout:
    return padded(shape, shape[-1])


def padded(shape: Sequence[int], pitch: int) -> Layout:
    """Row-major with rows `pitch` elements apart (pitch >= row length): the classic bank-conflict pad."""
    if pitch < shape[-1]:
        raise ValueError(f"pitch {pitch} is shorter than the row ({shape[-1]})")
    strides = [1] * len(shape)
    inner = pitch
    for d in reversed(range(len(shape) - 1)):
        strides[d] = inner
        inner *= shape[d]
    return Layout(tuple(shape), tuple(strides))


def swizzled(shape: Sequence[int], elem_bytes: int, swizzle_bytes: int) -> Layout:
    """Row-major, then the 32/64/128-byte swizzle. Rows must be whole 16-byte chunks and the
    tile whole swizzle groups (so the swizzle permutes the tile onto itself)."""
    sw = swizzle_for(swizzle_bytes, elem_bytes)
    if shape[-1] * elem_bytes % CHUNK_BYTES:
        raise ValueError(f"rows of {shape[-1] * elem_bytes} bytes are not whole 16-byte chunks")
    if math.prod(shape) % (1 << (sw.base + sw.bits)):
        raise ValueError(f"tile {tuple(shape)} is not a whole number of {swizzle_bytes}-byte swizzle groups")
    return Layout(row_major(shape).shape, row_major(shape).strides, sw)


def widest_swizzle(row_bytes: int) -> int | None:
    """The widest swizzle (128, 64 or 32 bytes) whose rows a tile with rows of `row_bytes` can be
    stored in (wider rows in column blocks of 128 bytes: `swizzled_blocks`), or None."""
    if row_bytes % 128 == 0:
        return 128
    return row_bytes if row_bytes in (32, 64) else None


def swizzled_blocks(shape: Sequence[int], elem_bytes: int, swizzle_bytes: int) -> Layout:
    """A 2-D tile whose rows are wider than the swizzle, stored as column blocks one swizzle wide,
    each block row-major and swizzled: the layout of index (row, col // width, col % width), where
    width = swizzle_bytes / elem_bytes. Swizzling the flat rows instead would XOR by only the low
    bits of the row, and a matrix load's eight rows would share banks; in blocks every eight rows of a
    block differ in all swizzled bits, as in a tile exactly one swizzle wide."""
    rows, cols = shape
    width = swizzle_bytes // elem_bytes
    if cols % width or rows % 8:
        raise ValueError(f"tile {tuple(shape)} is not whole {swizzle_bytes}-byte swizzle blocks of 8 rows")
    return Layout((rows, cols // width, width), (width, rows * width, 1), swizzle_for(swizzle_bytes, elem_bytes))


# ---------------------------------------------------------------- composition, checks, inverse


def permute(layout: Layout, perm: Sequence[int]) -> Layout:
    """layout o perm: new index k is old dimension perm[k]; permute(l, (1, 0)) is the transpose view."""
    if sorted(perm) != list(range(len(layout.shape))):
        raise ValueError(f"{tuple(perm)} is not a permutation of {len(layout.shape)} dimensions")
    return Layout(tuple(layout.shape[p] for p in perm), tuple(layout.strides[p] for p in perm), layout.swizzle)


def _compact(layout: Layout) -> bool:
    """The strided part enumerates [0, size) exactly: strides sorted are the mixed-radix place values."""
    place = 1
    for stride, extent in sorted((s, e) for e, s in zip(layout.shape, layout.strides) if e > 1):
        if stride != place:
            return False
        place *= extent
    return True


def is_injective(layout: Layout) -> bool:
    """No two indices share an offset (swizzles are bijections on the integers, so only strides matter)."""
    dims = sorted((s, e) for e, s in zip(layout.shape, layout.strides) if e > 1)
    if all(s > _span(dims[:k]) for k, (s, _) in enumerate(dims)):
        return True  # each stride clears everything the smaller ones reach: a mixed-radix number
    return len(set(layout.offsets())) == layout.size


def _span(dims: Sequence[tuple[int, int]]) -> int:
    return sum(s * (e - 1) for s, e in dims)


def is_bijective(layout: Layout) -> bool:
    """The layout maps the tile onto [0, size) exactly once: a permutation of storage, invertible."""
    if not _compact(layout):
        return False
    if layout.swizzle is None or layout.size % (1 << (layout.swizzle.base + layout.swizzle.bits)) == 0:
        return True
    return sorted(layout.offsets()) == list(range(layout.size))


@dataclass(frozen=True, slots=True)
class Inverse:
    """offset -> index of a bijective Layout (build with `inverse`)."""

    layout: Layout

    def apply(self, offset: int) -> tuple[int, ...]:
        sw = self.layout.swizzle
        plain = offset if sw is None else sw.apply(offset)
        return tuple(self._coord(plain, d) for d in range(len(self.layout.shape)))

    def _coord(self, plain: int, d: int) -> int:
        return plain // self.layout.strides[d] % self.layout.shape[d]

    def expr(self, offset: tir.Expr) -> tuple[tir.Expr, ...]:
        sw = self.layout.swizzle
        plain = offset if sw is None else sw.expr(offset)
        top = max(range(len(self.layout.shape)), key=lambda d: (self.layout.shape[d] > 1, self.layout.strides[d]))
        out: list[tir.Expr] = []
        for d, (extent, stride) in enumerate(zip(self.layout.shape, self.layout.strides)):
            if extent == 1:
                out.append(int_(0))
                continue
            c = plain if stride == 1 else tir.BinOp("//", plain, int_(stride), plain.dtype)
            out.append(c if d == top else tir.BinOp("%", c, int_(extent), plain.dtype))
        return tuple(out)


def inverse(layout: Layout) -> Inverse:
    """The inverse map; a swizzle undoes itself, so the inverse unswizzles with the same Swizzle
    and then splits the plain offset by the strides."""
    if not is_bijective(layout):
        raise ValueError(f"layout {layout} is not a bijection onto [0, {layout.size})")
    return Inverse(layout)


# ---------------------------------------------------------------- shared-memory banks


def bank_conflicts(phase: Sequence[int], access_bytes: int) -> int:
    """Extra shared-memory wavefronts of one access phase: `phase` holds the byte address each
    participating thread accesses, `access_bytes` wide. 0 = conflict free (each bank serves at
    most one distinct 4-byte word; threads reading the same word are a broadcast, not a conflict)."""
    words: dict[int, set[int]] = {}
    for addr in phase:
        for w in range(addr // BANK_BYTES, (addr + access_bytes - 1) // BANK_BYTES + 1):
            words.setdefault(w % BANKS, set()).add(w)
    return max(len(ws) for ws in words.values()) - 1 if words else 0


def wavefronts(addresses: Sequence[int], access_bytes: int) -> int:
    """Shared-memory wavefronts of one warp's access, `addresses` holding each lane's byte address
    in lane order: the lanes are served in phases of 128 bytes' worth (32 lanes of 4-byte accesses,
    8 of 16-byte ones), each phase in 1 + its bank conflicts."""
    lanes = BANKS * BANK_BYTES // max(access_bytes, BANK_BYTES)
    return sum(1 + bank_conflicts(addresses[p : p + lanes], access_bytes) for p in range(0, len(addresses), lanes))
