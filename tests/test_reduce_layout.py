"""The free layout of a tile reduced along its rows (layout.row_reduced, chosen by
infer_layouts._free_layout): threads on the rows first, each row on as few lanes as still move
whole 32-byte sectors, so that a row reduction takes fewer shuffles than under the default."""

from __future__ import annotations

import math
import pathlib

from hypothesis import given, settings
from hypothesis import strategies as st

from tilec import fragment_algebra as fa
from tilec import layout as L
from tilec.driver import compile_file
from tilec.elaborate import elaborate_file
from tilec.layout import Part
from tilec.pipeline import Unit, run_passes

ROOT = pathlib.Path(__file__).resolve().parent.parent


def lanes_per_row(frag: L.Fragment) -> int:
    return math.prod(p.extent for p in frag.thread_parts if p.dim == 1)


def shuffles(frag: L.Fragment) -> int:
    """Shuffle levels a thread runs to reduce its rows: rows held x log2(lanes a row)."""
    rows = math.prod(p.extent for p in frag.local_parts if p.dim == 0)
    return rows * int(math.log2(lanes_per_row(frag)))


def test_topk_gives_each_thread_one_row_on_two_lanes() -> None:
    frag = L.row_reduced((64, 128), 128, 4)
    assert frag.thread_parts == (Part(2, 1, 4), Part(64, 0, 1))  # lane pairs share a row
    assert frag.local_parts == (Part(16, 1, 8), Part(4, 1, 1))  # 16 vectors of 4, interleaved
    assert shuffles(frag) == 1 and shuffles(L.default((64, 128), 128, 4)) == 16 * 5
    # a lane pair's first vectors are one 32-byte run of row 0: whole sectors
    tile = fa.elements(fa.from_fragment(frag))
    assert [tile[(t, (0, e))] for t in (0, 1) for e in range(4)] == [(0, j) for j in range(8)]


def test_one_row_keeps_the_default() -> None:
    for shape, threads, elem in [((1, 2048), 256, 4), ((1, 8192), 128, 2), ((1, 512), 128, 4)]:
        assert L.row_reduced(shape, threads, elem) == L.default(shape, threads, elem)


def test_more_rows_than_threads_leave_two_lanes_a_row() -> None:
    frag = L.row_reduced((256, 128), 128, 4)
    assert frag.thread_parts == (Part(2, 1, 4), Part(64, 0, 1))
    assert frag.local_parts == (Part(4, 0, 64), Part(16, 1, 8), Part(4, 1, 1))  # four rows a thread
    assert shuffles(frag) == 4


def test_rows_that_do_not_divide_take_no_padded_row_group() -> None:
    # 48 rows on 32 threads would pad a second group of 32 rows: 16 threads hold 3 rows each
    frag = L.row_reduced((48, 128), 128, 4)
    assert frag.thread_parts == (Part(8, 1, 4), Part(16, 0, 1))
    assert frag.local_size == L.default((48, 128), 128, 4).local_size == 48


def test_a_block_of_threads_not_a_power_of_two_keeps_the_default() -> None:
    assert L.row_reduced((64, 128), 96, 4) == L.default((64, 128), 96, 4)


def test_narrow_vectors_keep_a_sector_of_lanes_a_row() -> None:
    # 4 x 32 float32 on 128 threads: 1-element vectors, 8 lanes fill 32 bytes; every thread is used
    frag = L.row_reduced((4, 32), 128, 4)
    assert frag == L.default((4, 32), 128, 4) and not frag.replicated


@st.composite
def reduced_tiles(draw: st.DrawFn) -> tuple[tuple[int, int], int, int]:
    rows = draw(st.sampled_from([1, 2, 3, 4, 6, 8, 16, 48, 64, 256]))
    cols = draw(st.sampled_from([1, 4, 8, 32, 96, 128, 1000, 1024]))
    if rows * cols > 16384:
        cols = 64
    return (rows, cols), draw(st.sampled_from([1, 32, 64, 128, 256])), draw(st.sampled_from([1, 2, 4, 8]))


@settings(max_examples=60, deadline=None)
@given(reduced_tiles())
def test_rows_first_covers_each_element_once_and_costs_no_more_than_the_default(
    case: tuple[tuple[int, int], int, int],
) -> None:
    shape, threads, elem = case
    frag, plain = L.row_reduced(shape, threads, elem), L.default(shape, threads, elem)
    m = fa.from_fragment(frag)
    assert fa.cover_errors(m) == [] and m.threads == threads
    assert fa.cover_errors(fa.reduce(m, 1)) == []
    assert frag.local_size <= plain.local_size and shuffles(frag) <= shuffles(plain)
    vector = frag.local_parts[-1].extent if frag.local_parts and frag.local_parts[-1].dim == 1 else 1
    whole_row = lanes_per_row(frag) * vector >= shape[1]
    assert lanes_per_row(frag) * vector * elem >= L.SECTOR_BYTES or whole_row or frag == plain


KERNEL = """kernel k(X: Tensor((M, {cols}), float32), Y: Tensor((M,), float32)):
    with Kernel(ceildiv(M, {rows}), threads=128) as bx:
        x = alloc_fragment(({rows}, {cols}), float32)
        m = alloc_fragment(({out},), float32)
        {load}
        reduce_max(x, m, dim={dim})
        copy(m, Y[bx * {rows}])
"""
GLOBAL = "copy(X[bx * {rows}, 0], x)"
SHARED = "X_s = alloc_shared(({rows}, {cols}), float32)\n        copy(X[bx * {rows}, 0], X_s)\n        copy(X_s, x)"


def unit(tmp_path: pathlib.Path, rows: int = 64, cols: int = 128, dim: int = 1, load: str = GLOBAL) -> Unit:
    path = tmp_path / "k.tile"
    text = KERNEL.format(rows=rows, cols=cols, dim=dim, out=rows if dim == 1 else cols, load=load)
    path.write_text(text.format(rows=rows, cols=cols))
    (u,) = run_passes(elaborate_file(str(path), {}), "sm_90a")
    assert u.layouts is not None
    return u


def x_layout(u: Unit) -> tuple[L.Fragment, bool]:
    assert u.layouts is not None
    (x,) = (b for b in u.layouts.buffers if b.name == "x")
    return u.layouts.buffers[x], x in u.layouts.rows_first


def test_infer_layouts_puts_a_row_reduced_fragment_rows_first(tmp_path: pathlib.Path) -> None:
    assert x_layout(unit(tmp_path)) == (L.row_reduced((64, 128), 128, 4), True)


def test_other_reductions_and_one_row_keep_the_default(tmp_path: pathlib.Path) -> None:
    assert x_layout(unit(tmp_path, dim=0)) == (L.default((64, 128), 128, 4), False)  # down the columns
    assert x_layout(unit(tmp_path, rows=1, cols=2048)) == (L.default((1, 2048), 128, 4), False)


def test_a_fragment_loaded_from_shared_rows_keeps_the_default(tmp_path: pathlib.Path) -> None:
    # lanes on 16 rows of 512 bytes would read the same banks: 16 wavefronts a warp instead of 4
    assert x_layout(unit(tmp_path, load=SHARED)) == (L.default((64, 128), 128, 4), False)


COLUMN = """kernel k(X: Tensor((M, 128), float32), W: Tensor((128,), float32), Y: Tensor((M,), float32)):
    with Kernel(ceildiv(M, 64), threads=128) as bx:
        x = alloc_fragment((64, 128), float32)
        w = alloc_fragment((128,), float32)
        m = alloc_fragment((64,), float32)
        copy(X[bx * 64, 0], x)
        copy(W[0], w)
        for i, j in Parallel(64, 128):
            x[i, j] = x[i, j] * w[j]
        reduce_max(x, m, dim=1)
        copy(m, Y[bx * 64])
"""


def test_a_column_vector_beside_the_tile_keeps_the_default(tmp_path: pathlib.Path) -> None:
    # rows first, each row's two lanes would hold half of w: 64 registers instead of 4
    path = tmp_path / "k.tile"
    path.write_text(COLUMN)
    (u,) = run_passes(elaborate_file(str(path), {}), "sm_90a")
    assert x_layout(u) == (L.default((64, 128), 128, 4), False)


def test_topk_reduces_each_row_with_one_shuffle_and_loads_16_byte_vectors() -> None:
    for arch in ("sm_80", "sm_90a"):
        code = compile_file(str(ROOT / "tests" / "corpus" / "tilelang" / "topk.tile"), arch=arch)
        assert code.count("__shfl_xor_sync") == 2  # one per reduce_max, each over a lane pair
        assert "__shfl_xor_sync(0xffffffffu, red, 1)" in code
        flat = "".join(code.split())  # a lane pair's 16-byte vectors side by side along a row
        assert "reinterpret_cast<constuint4*>(&logits[bx*8192+tx/2*128+g1_1*8+tx%2*4])" in flat


def test_a_tile_reduced_along_both_dims_keeps_the_default(tmp_path: pathlib.Path) -> None:
    # rows first would leave the column sums replicated in every row's lanes (64 registers, not 4)
    both = KERNEL.replace(
        "        reduce_max(x, m, dim={dim})\n",
        "        reduce_max(x, m, dim={dim})\n        c = alloc_fragment(({cols},), float32)\n"
        "        reduce_sum(x, c, dim=0)\n        copy(c, Y[0])\n",
    )
    path = tmp_path / "k.tile"
    path.write_text(both.format(rows=64, cols=128, dim=1, out=64, load=GLOBAL.format(rows=64)))
    (u,) = run_passes(elaborate_file(str(path), {}), "sm_90a")
    assert x_layout(u) == (L.default((64, 128), 128, 4), False)
