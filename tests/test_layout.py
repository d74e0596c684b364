"""layout.py: the Fragment forms lowering reads, checked against definitions
written independently of it (the PTX ISA's mma.m16n8k16 accumulator table)."""

from __future__ import annotations

import pytest

from tilec import fragment_algebra as fa
from tilec import layout as L
from tilec import tir
from tilec.dtypes import DType


def owners(frag: L.Fragment) -> dict[tuple[int, int], tuple[int, ...]]:
    """(thread, register slot) -> tile index, by evaluating the layout."""
    tid = tir.Var("tid", DType.int32, "thread")
    coords = L.thread_coords(frag, tid)  # the thread's digits, as lowering computes them
    out = {}
    for slot, digits in enumerate(L.local_digits(frag)):
        index_of = fa.compile_index(L.tile_index(frag, coords, digits), (tid,))
        for t in range(frag.threads):
            out[(t, slot)] = index_of(t)
    return out


def ptx_accumulator(m: int, n: int, wm: int, wn: int) -> dict[tuple[int, int], tuple[int, int]]:
    """The mma.m16n8k16 f32 accumulator per the PTX ISA: lane l of a warp holds, in c0..c3 of
    each 16x8 tile, rows l/4 and l/4 + 8 and columns 2(l%4) and 2(l%4) + 1; warps tile the
    block (warp w = row * wn + col), each warp repeating the 16x8 tile MI x NI times."""
    mi_n, ni_n = m // (wm * 16), n // (wn * 8)
    out = {}
    for w in range(wm * wn):
        wr, wc = divmod(w, wn)
        for lane in range(32):
            g, t = divmod(lane, 4)
            for mi in range(mi_n):
                for ni in range(ni_n):
                    for r in range(4):
                        row = wr * mi_n * 16 + mi * 16 + g + 8 * (r // 2)
                        col = wc * ni_n * 8 + ni * 8 + 2 * t + r % 2
                        out[(32 * w + lane, (mi * ni_n + ni) * 4 + r)] = (row, col)
    return out


@pytest.mark.parametrize(
    ("m", "n", "threads", "policy"),
    [
        (16, 8, 32, "Square"),
        (64, 64, 128, "FullRow"),
        (128, 128, 128, "Square"),
        (32, 128, 256, "FullCol"),
        (128, 64, 256, "FullRow"),
        (64, 128, 256, "Square"),
    ],
)
def test_mma_accumulator_is_the_ptx_fragment_tiled_over_warps(m: int, n: int, threads: int, policy: str) -> None:
    frag = L.mma_accumulator((m, n), threads, policy)
    assert frag is not None
    wn, wm = frag.thread_parts[2].extent, frag.thread_parts[3].extent
    owned = owners(frag)  # one evaluation of the layout (the slowest part of the fast test path)
    assert owned == ptx_accumulator(m, n, wm, wn)
    assert sorted(owned.values()) == [(i, j) for i in range(m) for j in range(n)]  # each element once


def test_warp_grid_follows_the_policy() -> None:
    assert L.warp_grid(128, 128, 4, "FullRow") == (4, 1)
    assert L.warp_grid(128, 128, 4, "FullCol") == (1, 4)
    assert L.warp_grid(128, 128, 4, "Square") == (2, 2)
    assert L.warp_grid(128, 128, 4, "Square", rows=4) == (4, 1)  # an earlier accumulator's row split wins
    assert L.warp_grid(8, 8, 4, "Square") is None  # smaller than one m16n8 tile


def test_row_statistics_of_an_mma_accumulator_live_in_a_quad() -> None:
    frag = L.mma_accumulator((64, 64), 128, "FullRow")
    assert frag is not None
    rows = L.reduced(frag, 1)
    held: dict[tuple[int, ...], set[int]] = {}
    for (tid, _), index in owners(rows).items():
        held.setdefault(index, set()).add(tid)
    assert held[(9,)] == {4 * 1 + q for q in range(4)}  # row 9: lanes 4..7 of warp 0
    assert all(len(threads) == 4 for threads in held.values())


def test_default_layout_uses_every_thread_on_small_tiles() -> None:
    frag = L.default((128,), 128, 4)  # 128 int32: one per thread, not 4-wide vectors on 32 threads
    assert not frag.replicated and frag.local_size == 1
    frag = L.default((4, 16), 8, 2)
    assert sorted(owners(frag).values()) == [(i, j) for i in range(4) for j in range(16)]
