"""The CDNA matrix instructions' fragments (MFMA, wave64), as fragment_algebra maps.

    mfma_16x16x16_c()   C (16 x 16), 64 lanes, slot i = the i-th float of the float4 result:
        lane, (i,) -> (4 * (lane // 16) + i, lane % 16)

The AMD ISA (CDNA2/CDNA3 "Matrix Core" tables): for v_mfma_f32_16x16x16{f16,bf16_1k}
lane l holds A[l % 16][4 (l / 16) + i] and B[4 (l / 16) + i][l % 16], i = 0..3 (one
64-bit register of four 16-bit values each), and D[4 (l / 16) + i][l % 16]; for
v_mfma_f32_32x32x8{f16,bf16_1k} A[l % 32][4 (l / 32) + i], B[4 (l / 32) + i][l % 32] and
D[8 (i / 4) + 4 (l / 32) + i % 4][l % 32], i = 0..15. The integer forms
(v_mfma_i32_16x16x16i8, 32x32x8i8 on gfx90a) have the same maps with four int8 in one
32-bit register; gfx942's 8-bit forms (int8, FNUZ fp8 and bf8) are twice as deep, eight
K-consecutive elements per lane in one 64-bit register: v_mfma_*_16x16x32 lane l holds
A[l % 16][8 (l / 16) + i], v_mfma_*_32x32x16 A[l % 32][8 (l / 32) + i], i = 0..7 (the same
mfma_a map at twice the depth), with the accumulators of the shallow forms.
Every map is one wave's: WAVE_SIZE lanes, also the HIP targets' Target.warp_size.
"""

from __future__ import annotations

from tilec import tir
from tilec.dtypes import DType
from tilec.fragment_algebra import FragmentMap, elements
from tilec.layout_algebra import Layout, apply_tile, bank_conflicts
from tilec.simplify import int_, simplify

WAVE_SIZE = 64  # lanes of a CDNA wavefront: the threads of one MFMA

_I = DType.int32


def _var(name: str, kind: tir.VarKind = "loop") -> tir.Var:
    return tir.Var(name, _I, kind)


def _bin(op: tir.BinOpName, a: tir.Expr, b: tir.Expr | int) -> tir.Expr:
    return tir.BinOp(op, a, int_(b) if isinstance(b, int) else b, _I)


def mfma_a(m: int, k: int) -> FragmentMap:
    """A (m x k) of an m x m x k MFMA: lane l, slot i -> (l % m, (k / (64 / m)) (l / m) + i)."""
    lane, i = _var("lane", "thread"), _var("i")
    per_lane = k * m // WAVE_SIZE
    col = _bin("+", _bin("*", _bin("//", lane, m), per_lane), i)
    return FragmentMap((m, k), lane, WAVE_SIZE, (i,), (per_lane,), (_bin("%", lane, m), simplify(col)), int_(0))


def mfma_b(n: int, k: int) -> FragmentMap:
    """B (k x n): lane l, slot i -> ((k / (64 / n)) (l / n) + i, l % n): A's map, transposed."""
    lane, i = _var("lane", "thread"), _var("i")
    per_lane = k * n // WAVE_SIZE
    row = _bin("+", _bin("*", _bin("//", lane, n), per_lane), i)
    return FragmentMap((k, n), lane, WAVE_SIZE, (i,), (per_lane,), (simplify(row), _bin("%", lane, n)), int_(0))


def mfma_c(m: int) -> FragmentMap:
    """C/D (m x m), slots (b, i) of m * m / 64 floats: row 8 b + 4 (l / m) + i (16x16: b = 0 only,
    rows 4 (l / 16) + i), column l % m. Four consecutive rows of one column per group of 4 slots."""
    lane, b, i = _var("lane", "thread"), _var("b"), _var("i")
    groups = m * m // WAVE_SIZE // 4
    row = _bin("+", _bin("+", _bin("*", b, 4 * WAVE_SIZE // m), _bin("*", _bin("//", lane, m), 4)), i)
    return FragmentMap((m, m), lane, WAVE_SIZE, (b, i), (groups, 4), (simplify(row), _bin("%", lane, m)), int_(0))


def mfma_16x16x16_a() -> FragmentMap:
    return mfma_a(16, 16)


def mfma_16x16x16_b() -> FragmentMap:
    return mfma_b(16, 16)


def mfma_16x16_c() -> FragmentMap:
    return mfma_c(16)


def mfma_32x32x8_a() -> FragmentMap:
    return mfma_a(32, 8)


def mfma_32x32x8_b() -> FragmentMap:
    return mfma_b(32, 8)


def mfma_32x32_c() -> FragmentMap:
    return mfma_c(32)


def mfma_16x16x32_a() -> FragmentMap:
    return mfma_a(16, 32)


def mfma_16x16x32_b() -> FragmentMap:
    return mfma_b(16, 32)


def mfma_32x32x16_a() -> FragmentMap:
    return mfma_a(32, 16)


def mfma_32x32x16_b() -> FragmentMap:
    return mfma_b(32, 16)


# LDS has 32 banks of 4 bytes and serves one access a bank a clock (ROCm blog "Avoiding LDS Bank
# Conflicts on AMD GPUs Using CK-Tile"); a wave's access is split into phases by instruction width
# (CK-Tile's "Understanding AMD GPU LDS and Bank Conflicts": 8 lanes a phase for b128), so
# 128 / width lanes a phase: 16 for ds_read_b64, 32 (a half wave) for ds_read_b32 and narrower.
LDS_CLOCK_BYTES = 128  # 32 banks x 4 bytes: what LDS serves a clock, so the lanes of one phase


def lane_read_conflicts(a: FragmentMap, shape: tuple[int, int], smem: Layout, elem_bytes: int, k_inner: bool) -> int:
    """The worst n-way bank conflict (1: conflict free) of the per-lane LDS reads (cdna.load) of an
    MFMA operand whose A fragment is `a` (B's is its transpose), stored as a (rows, cols) tile with
    layout `smem`: (MN, K) when `k_inner` (one read of a lane's K-consecutive elements), else
    (K, MN) (one read per element), at every (MN, K) origin of a whole fragment."""
    table = elements(a)
    m, k, per_lane = a.shape[0], a.shape[1], a.slot_shape[0]
    reads = [0] if k_inner else list(range(per_lane))
    width = per_lane * elem_bytes if k_inner else elem_bytes
    phase = min(WAVE_SIZE, LDS_CLOCK_BYTES // max(width, 4))
    mn_extent, k_extent = shape if k_inner else shape[::-1]
    worst = 0
    for mn0 in range(0, mn_extent - m + 1, m):
        for k0 in range(0, k_extent - k + 1, k):
            for i in reads:
                addrs = []
                for lane in range(WAVE_SIZE):
                    rc = table[(lane, (i,))]
                    assert rc is not None, "an MFMA operand fragment has no padding"
                    idx = (mn0 + rc[0], k0 + rc[1])
                    addrs.append(apply_tile(smem, idx if k_inner else idx[::-1]) * elem_bytes)
                worst = max([worst] + [bank_conflicts(addrs[p : p + phase], width) for p in range(0, WAVE_SIZE, phase)])
    return worst + 1
