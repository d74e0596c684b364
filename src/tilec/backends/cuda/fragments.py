"""The PTX ISA's fragments of the CUDA matrix instructions (sm_80+), as fragment_algebra maps.

    mma_m16n8k16_c()   C (16 x 8), 32 lanes, slots (i1, i0) = c0..c3:
        lane, (i1, i0) -> (lane // 4 + i1 * 8, lane % 4 * 2 + i0)

The instruction records (instructions.py) name the mma.sync A/B/C fragments;
the ldmatrix.x4 maps (address side, register side, bank conflicts of a
shared tile) specify the operand loads (the `ldmatrix` helper of
spelling.py). Every one is one warp's: WARP_SIZE lanes, which is also the CUDA
targets' Target.warp_size (targets.py reads it here).
"""

from __future__ import annotations

import functools

from tilec import tir
from tilec.dtypes import DType
from tilec.fragment_algebra import FragmentMap, elements
from tilec.layout_algebra import Layout, apply_tile, bank_conflicts
from tilec.simplify import int_, simplify

WARP_SIZE = 32  # lanes of a CUDA warp: the threads of one mma.sync and of one ldmatrix

_I = DType.int32


def _var(name: str, kind: tir.VarKind = "loop") -> tir.Var:
    return tir.Var(name, _I, kind)


def _bin(op: tir.BinOpName, a: tir.Expr, b: tir.Expr | int) -> tir.Expr:
    return tir.BinOp(op, a, int_(b) if isinstance(b, int) else b, _I)


def _lane() -> tuple[tir.Var, tir.Expr, tir.Expr]:
    lane = _var("lane", "thread")
    return lane, _bin("//", lane, 4), _bin("%", lane, 4)  # the PTX ISA's groupID and threadID_in_group


def mma_m16n8k16_a() -> FragmentMap:
    """A (16 x 16, f16/bf16): registers a0..a7 = slots (i2, i1, i0); row groupID (+8 when i1),
    column 2 * threadID_in_group + i0 (+8 when i2). Four .f16x2 registers: (a0,a1) ... (a6,a7)."""
    lane, g, q = _lane()
    i2, i1, i0 = _var("i2"), _var("i1"), _var("i0")
    row = _bin("+", g, _bin("*", i1, 8))
    col = _bin("+", _bin("+", _bin("*", q, 2), i0), _bin("*", i2, 8))
    return FragmentMap((16, 16), lane, WARP_SIZE, (i2, i1, i0), (2, 2, 2), (row, col), int_(0))


def mma_m16n8k16_b() -> FragmentMap:
    """B (16 x 8 = K x N, f16/bf16): b0..b3 = slots (i1, i0); row 2 * threadID_in_group + i0
    (+8 when i1), column groupID. Two .f16x2 registers: (b0,b1), (b2,b3)."""
    lane, g, q = _lane()
    i1, i0 = _var("i1"), _var("i0")
    row = _bin("+", _bin("+", _bin("*", q, 2), i0), _bin("*", i1, 8))
    return FragmentMap((16, 8), lane, WARP_SIZE, (i1, i0), (2, 2), (row, g), int_(0))


def mma_m16n8k16_c() -> FragmentMap:
    """C/D (16 x 8): c0..c3 = slots (i1, i0); row groupID (+8 when i1), column
    2 * threadID_in_group + i0. f32: four registers; f16: two .f16x2 (c0,c1), (c2,c3)."""
    lane, g, q = _lane()
    i1, i0 = _var("i1"), _var("i0")
    row = _bin("+", g, _bin("*", i1, 8))
    col = _bin("+", _bin("*", q, 2), i0)
    return FragmentMap((16, 8), lane, WARP_SIZE, (i1, i0), (2, 2), (row, col), int_(0))


def mma_m16n8k32_a() -> FragmentMap:
    """A (16 x 32, 8-bit: s8, e4m3, e5m2): a0..a15 = slots (i3, i2, i0); row groupID (+8 when
    i2), column 4 * threadID_in_group + i0 (+16 when i3). Four .b32 registers of four elements:
    in 32-bit words it is m16n8k16's A, so ldmatrix (b16) loads it untransposed."""
    lane, g, q = _lane()
    i3, i2, i0 = _var("i3"), _var("i2"), _var("i0")
    row = _bin("+", g, _bin("*", i2, 8))
    col = _bin("+", _bin("+", _bin("*", q, 4), i0), _bin("*", i3, 16))
    return FragmentMap((16, 32), lane, WARP_SIZE, (i3, i2, i0), (2, 2, 4), (row, col), int_(0))


def mma_m16n8k32_b() -> FragmentMap:
    """B (32 x 8 = K x N, 8-bit): b0..b7 = slots (i1, i0); row 4 * threadID_in_group + i0
    (+16 when i1), column groupID. Two .b32 registers; C/D is m16n8k16's (mma_m16n8k16_c)."""
    lane, g, q = _lane()
    i1, i0 = _var("i1"), _var("i0")
    row = _bin("+", _bin("+", _bin("*", q, 4), i0), _bin("*", i1, 16))
    return FragmentMap((32, 8), lane, WARP_SIZE, (i1, i0), (2, 4), (row, g), int_(0))


# ldmatrix.x4 (m8n8, b16): lanes 8k .. 8k+7 give the row addresses of matrix k; matrix k lands in
# each lane's register k, lane l holding row l // 4, columns 2 * (l % 4) and +1 of it. Placing the
# four 8x8 matrices of a 16x16 tile as below makes the registers exactly mma's A operand.
LDMATRIX_X4_ORIGINS = ((0, 0), (8, 0), (0, 8), (8, 8))  # matrix k -> (row, column) in the 16x16 tile


def _ldmatrix_origin(k: tir.Expr) -> tuple[tir.Expr, tir.Expr]:
    return _bin("*", _bin("%", k, 2), 8), _bin("*", _bin("//", k, 2), 8)


def ldmatrix_x4_rows() -> FragmentMap:
    """The address side: lane -> the 16-byte row (8 b16 elements, slot j) it points at."""
    lane = _var("lane", "thread")
    j = _var("j")
    r0, c0 = _ldmatrix_origin(_bin("//", lane, 8))
    row = simplify(_bin("+", r0, _bin("%", lane, 8)))
    return FragmentMap((16, 16), lane, WARP_SIZE, (j,), (8,), (row, simplify(_bin("+", c0, j))), int_(0))


def ldmatrix_x4_regs() -> FragmentMap:
    """The register side: lane, (register k = 2 * kc + kr, half h) -> element of the 16x16 tile;
    register k holds matrix k, at rows 8 * kr and columns 8 * kc."""
    lane = _var("lane", "thread")
    kc, kr, h = _var("kc"), _var("kr"), _var("h")
    row = _bin("+", _bin("*", kr, 8), _bin("//", lane, 4))
    col = _bin("+", _bin("*", kc, 8), _bin("+", _bin("*", _bin("%", lane, 4), 2), h))
    return FragmentMap((16, 16), lane, WARP_SIZE, (kc, kr, h), (2, 2, 2), (row, col), int_(0))


@functools.cache
def _ldmatrix_x4_row_starts() -> tuple[tuple[int, int], ...]:
    """(row, b16 column) of the 16x16 block that each lane's 16-byte row starts at."""
    table = elements(ldmatrix_x4_rows())
    starts = [table[(lane, (0,))] for lane in range(WARP_SIZE)]
    assert all(rc is not None for rc in starts), "ldmatrix rows cover the 16x16 block"
    return tuple((rc[0], rc[1]) for rc in starts if rc is not None)


def ldmatrix_x4_conflicts(smem: Layout, elem_bytes: int, origin: tuple[int, int]) -> list[int]:
    """Extra wavefronts of each of the 4 phases (one 8x8 matrix each) of an ldmatrix.x4 reading
    the 16x16 block of b16 words at `origin` (in elements) of a shared tile with layout `smem`
    (8-bit elements: two to a b16 column, as the m16n8k32 operands are loaded)."""
    phases: list[list[int]] = [[] for _ in range(4)]
    for lane, (r, c) in enumerate(_ldmatrix_x4_row_starts()):
        col = origin[1] + c * 2 // elem_bytes
        phases[lane // 8].append(apply_tile(smem, (origin[0] + r, col)) * elem_bytes)
    return [bank_conflicts(p, 16) for p in phases]


@functools.lru_cache(maxsize=256)  # a pure count, asked again for every candidate `tilec tune` compiles
def ldmatrix_conflict_degree(shape: tuple[int, int], smem: Layout, elem_bytes: int, k_inner: bool) -> int:
    """The worst n-way bank conflict (1: conflict free) of the ldmatrix.x4 loads of a gemm operand
    stored as a (rows, cols) tile with layout `smem`: every 16x16 block of b16 words at a multiple
    of 8 rows and 8 words. ldmatrix reads 16-byte rows of the stored tile either way (.trans
    transposes in registers), so `k_inner` does not matter."""
    rows, cols = shape
    width = 32 // elem_bytes  # elements of a block's 16 b16 columns
    step = width // 2
    worst = [
        max(ldmatrix_x4_conflicts(smem, elem_bytes, (r0, c0)))
        for r0 in range(0, rows - 15, 8)
        for c0 in range(0, cols - width + 1, step)
    ]
    return max(worst, default=0) + 1


WARP_GROUP = 4 * WARP_SIZE  # the threads of one wgmma: four consecutive warps, the first a multiple of 4


def wgmma_m64k16_a() -> FragmentMap:
    """A (64 x 16) of wgmma m64nNk16 from registers: warp w of the warp group holds rows
    16 w .. 16 w + 15 exactly as mma.sync m16n8k16's A (a0..a7 = slots (i2, i1, i0): row groupID
    (+8 when i1), column 2 * threadID_in_group + i0 (+8 when i2)), four .f16x2 registers."""
    lane = _var("lane", "thread")
    within = _bin("%", lane, WARP_SIZE)
    i2, i1, i0 = _var("i2"), _var("i1"), _var("i0")
    row = _bin("+", _bin("+", _bin("*", _bin("//", lane, WARP_SIZE), 16), _bin("//", within, 4)), _bin("*", i1, 8))
    col = _bin("+", _bin("+", _bin("*", _bin("%", within, 4), 2), i0), _bin("*", i2, 8))
    return FragmentMap((64, 16), lane, WARP_GROUP, (i2, i1, i0), (2, 2, 2), (simplify(row), simplify(col)), int_(0))


def wgmma_m64n8k16_c() -> FragmentMap:
    """D (64 x 8) of wgmma m64nNk16 for one 8-column slice: warp w of the warp group holds rows
    16 w .. 16 w + 15 exactly as mma's C (d0..d3 = slots (i1, i0)); an N-wide D repeats the
    slice N / 8 times along the columns, d[4 j + ...] holding slice j."""
    lane = _var("lane", "thread")
    within = _bin("%", lane, WARP_SIZE)
    i1, i0 = _var("i1"), _var("i0")
    row = _bin("+", _bin("+", _bin("*", _bin("//", lane, WARP_SIZE), 16), _bin("//", within, 4)), _bin("*", i1, 8))
    col = _bin("+", _bin("*", _bin("%", within, 4), 2), i0)
    return FragmentMap((64, 8), lane, WARP_GROUP, (i1, i0), (2, 2), (simplify(row), simplify(col)), int_(0))
