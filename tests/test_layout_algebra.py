"""Property tests of the layout algebra (layout_algebra.py, fragment_algebra.py, arith.py) and of
the PTX fragments (backends/cuda/fragments.py)."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilec import arith, layout, tir
from tilec import fragment_algebra as fa
from tilec import layout_algebra as la
from tilec.backends.cuda import fragments as ptx
from tilec.backends.cuda.instructions import MMA_M16N8K16, MMA_M16N8K32
from tilec.dtypes import DType
from tilec.emit import expr_text
from tilec.lower.cexpr import split_index, swizzled_offset

I32 = DType.int32
needs_tvm = pytest.mark.skipif(not arith.available(), reason="apache-tvm not importable")
FAST = settings(max_examples=40, deadline=None)


def var(name: str) -> tir.Var:
    return tir.Var(name, I32, "loop")


# ---------------------------------------------------------------- layouts


@st.composite
def swizzled_tiles(draw: st.DrawFn) -> tuple[la.Layout, int, int]:
    sw_bytes = draw(st.sampled_from([32, 64, 128]))
    elem = draw(st.sampled_from([1, 2, 4]))
    chunks = draw(st.integers(1, 16))  # 16-byte chunks per row
    cols = chunks * 16 // elem
    group = 1 << (la.swizzle_for(sw_bytes, elem).base + la.swizzle_for(sw_bytes, elem).bits)
    rows_unit = group // math.gcd(group, cols)
    shape = (draw(st.integers(1, 4)) * rows_unit, cols)
    if draw(st.booleans()) and shape[0] % 2 == 0:
        shape = (2, shape[0] // 2, cols)  # rank 3: a stage dimension in front
    return la.swizzled(shape, elem, sw_bytes), elem, sw_bytes


@FAST
@given(swizzled_tiles())
def test_every_swizzle_is_a_bijection_on_its_tile(case: tuple[la.Layout, int, int]) -> None:
    lay, _, _ = case
    assert sorted(lay.offsets()) == list(range(lay.size))
    assert la.is_bijective(lay) and la.is_injective(lay)
    inv = la.inverse(lay)
    for ix in la.indices(lay.shape):
        assert inv.apply(lay.apply(ix)) == ix


@FAST
@given(swizzled_tiles(), st.data())
def test_expr_and_inverse_expr_agree_with_apply(case: tuple[la.Layout, int, int], data: st.DataObject) -> None:
    lay, _, _ = case
    vs = [var(f"i{d}") for d in range(len(lay.shape))]
    o = var("o")
    ix = tuple(data.draw(st.integers(0, n - 1)) for n in lay.shape)
    assert la.evaluate(lay.expr(vs), dict(zip(vs, ix))) == lay.apply(ix)
    back = la.inverse(lay).expr(o)
    assert tuple(la.evaluate(x, {o: lay.apply(ix)}) for x in back) == ix


def test_swizzle_is_an_involution_and_matches_the_docstring() -> None:
    sw = la.swizzle_for(128, 2)
    assert (sw.bits, sw.base, sw.shift) == (3, 3, 3)
    lay = la.swizzled((8, 64), 2, 128)
    assert lay.apply((1, 0)) == 72 and lay.apply((1, 8)) == 64
    assert all(sw.apply(sw.apply(o)) == o for o in range(4096))
    assert la.swizzle_for(32, 1) == la.Swizzle(1, 4, 3) and la.swizzle_for(64, 4) == la.Swizzle(2, 2, 3)


@st.composite
def strided(draw: st.DrawFn) -> la.Layout:
    shape = tuple(draw(st.lists(st.integers(1, 6), min_size=1, max_size=3)))
    strides = tuple(draw(st.integers(1, 40)) for _ in shape)
    return la.Layout(shape, strides)


@FAST
@given(strided())
def test_injective_and_bijective_checks_match_enumeration(lay: la.Layout) -> None:
    offs = lay.offsets()
    assert la.is_injective(lay) == (len(set(offs)) == len(offs))
    assert la.is_bijective(lay) == (sorted(offs) == list(range(lay.size)))


def test_padded_permuted_and_errors() -> None:
    pad = la.padded((16, 64), 72)
    assert pad.apply((2, 5)) == 149 and la.is_injective(pad) and not la.is_bijective(pad)
    assert pad.cosize == 15 * 72 + 64
    t = la.permute(la.row_major((4, 8)), (1, 0))
    assert t.shape == (8, 4) and t.apply((3, 2)) == la.row_major((4, 8)).apply((2, 3))
    with pytest.raises(ValueError, match="not a bijection"):
        la.inverse(pad)
    with pytest.raises(ValueError, match="whole 16-byte chunks"):
        la.swizzled((8, 12), 2, 128)
    with pytest.raises(ValueError, match="shift >= bits"):
        la.Swizzle(3, 3, 2)


@st.composite
def swizzle_offsets(draw: st.DrawFn) -> tuple[la.Swizzle, tir.Expr, dict[tir.Var, int], tir.Var, tir.Var]:
    """A swizzle and an offset shaped like generated code's: thread-index bit fields
    (tx % m * 2**a, tx // d % m * 2**a), a bounded loop counter, an unbounded one, a constant."""
    sw = la.swizzle_for(draw(st.sampled_from([32, 64, 128])), draw(st.sampled_from([1, 2, 4])))
    tx, g, k = var("tx"), var("g"), var("k")
    offset: tir.Expr = tir.IntImm(draw(st.integers(0, 4 * sw.block)), I32)
    for _ in range(draw(st.integers(0, 4))):
        base = draw(st.sampled_from([tx, tir.BinOp("//", tx, tir.IntImm(draw(st.sampled_from([2, 8, 16])), I32), I32)]))
        field = tir.BinOp("%", base, tir.IntImm(draw(st.sampled_from([2, 4, 8, 16])), I32), I32)
        scale = draw(st.sampled_from([1, 2, 3, 8, 64, 256, sw.block, 3 * sw.block]))
        offset = tir.BinOp("+", offset, tir.BinOp("*", field, tir.IntImm(scale, I32), I32), I32)
    for v in (g, k):
        if draw(st.booleans()):
            offset = tir.BinOp(
                "+", offset, tir.BinOp("*", v, tir.IntImm(draw(st.sampled_from([8, sw.block])), I32), I32), I32
            )
    return sw, offset, {tx: 255, g: 3}, g, k


@given(swizzle_offsets())
@FAST
def test_strength_reduced_swizzle_equals_the_swizzle(case: tuple) -> None:
    sw, offset, bounds, g, k = case
    fast = swizzled_offset(sw, offset, bounds)
    tx = next(v for v in bounds if v.name == "tx")
    fast_of, offset_of = fa.compile_int(fast, (tx, g, k)), fa.compile_int(offset, (tx, g, k))
    for t in range(256):
        for gv in range(4):
            for kv in (0, 5):
                assert fast_of(t, gv, kv) == sw.apply(offset_of(t, gv, kv)), (expr_text(fast), t, gv, kv)


@given(swizzle_offsets(), st.sampled_from([32, 64, 128]))
@FAST
def test_column_split_is_divmod(case: tuple, width: int) -> None:
    _, offset, bounds, g, k = case
    q, r = split_index(offset, width, bounds)
    tx = next(v for v in bounds if v.name == "tx")
    q_of, r_of, offset_of = (fa.compile_int(e, (tx, g, k)) for e in (q, r, offset))
    for t in range(0, 256, 3):
        for gv in range(4):
            for kv in (0, 5):
                assert (q_of(t, gv, kv), r_of(t, gv, kv)) == divmod(offset_of(t, gv, kv), width)


def test_strength_reduced_swizzle_keeps_only_the_thread_part_inside() -> None:
    """ldmatrix of a 128-byte-swizzled fp16 tile: rows 16 apart and the stage come out of the
    swizzle as added blocks, the lane's chunk and the k step's +16 columns (bits the swizzle XORs
    into, not bits it reads) as XORs; only the row stays inside, where the swizzle of tx % 16 * 64
    simplifies to tx % 8 * 8."""
    sw, tx, stage = la.swizzle_for(128, 2), var("tx"), var("stage")
    row = tir.BinOp("+", tir.BinOp("%", tx, tir.IntImm(16, I32), I32), tir.IntImm(16, I32), I32)
    lane_chunk = tir.BinOp("//", tir.BinOp("%", tx, tir.IntImm(32, I32), I32), tir.IntImm(16, I32), I32)
    col = tir.BinOp("+", tir.BinOp("*", lane_chunk, tir.IntImm(8, I32), I32), tir.IntImm(16, I32), I32)
    offset = la.row_major((3, 64, 64)).strided_expr((stage, row, col))
    text = expr_text(swizzled_offset(sw, offset, {tx: 127}))
    assert text == "(tx % 16 * 64 ^ tx % 8 * 8 ^ tx % 32 / 16 * 8 ^ 16) + stage * 4096 + 1024", text


def test_column_blocks_split_without_division() -> None:
    """A 64-column block index and the column inside it, for a warp's block-aligned offset plus a
    lane's chunk, and for a k step that crosses blocks (kk * 16 over 64-column blocks)."""
    tx, kk = var("tx"), var("kk")
    warp = tir.BinOp(
        "*",
        tir.BinOp("%", tir.BinOp("//", tx, tir.IntImm(32, I32), I32), tir.IntImm(4, I32), I32),
        tir.IntImm(64, I32),
        I32,
    )
    chunk = tir.BinOp(
        "*",
        tir.BinOp("//", tir.BinOp("%", tx, tir.IntImm(32, I32), I32), tir.IntImm(16, I32), I32),
        tir.IntImm(8, I32),
        I32,
    )
    step = tir.BinOp("*", kk, tir.IntImm(16, I32), I32)
    c = tir.BinOp("+", tir.BinOp("+", warp, chunk, I32), step, I32)
    q, r = split_index(c, 64, {tx: 255, kk: 31})
    assert (expr_text(q), expr_text(r)) == ("tx / 32 % 4 + kk / 4", "tx % 32 / 16 * 8 + kk % 4 * 16")
    for t in range(256):
        for k in range(32):
            env = {tx: t, kk: k}
            assert (la.evaluate(q, env), la.evaluate(r, env)) == divmod(la.evaluate(c, env), 64)


# ---------------------------------------------------------------- bank conflicts


@pytest.mark.parametrize(("cols", "sw_bytes", "plain_conflicts"), [(64, 128, 7), (32, 64, 3), (16, 32, 1)])
def test_ldmatrix_on_the_matching_swizzle_is_conflict_free(cols: int, sw_bytes: int, plain_conflicts: int) -> None:
    rows = 64
    swz, plain = la.swizzled((rows, cols), 2, sw_bytes), la.row_major((rows, cols))
    for r0 in range(0, rows - 15, 8):
        for c0 in range(0, cols - 15, 8):
            assert ptx.ldmatrix_x4_conflicts(swz, 2, (r0, c0)) == [0, 0, 0, 0], (r0, c0)
    # Plain row-major: rows 128 / row-bytes apart share banks (8-way for 128-byte rows).
    assert ptx.ldmatrix_x4_conflicts(plain, 2, (0, 0)) == [plain_conflicts] * 4


@pytest.mark.parametrize(("rows", "cols"), [(64, 256), (32, 128), (128, 512)])
def test_wide_rows_swizzled_in_column_blocks_are_a_conflict_free_bijection(rows: int, cols: int) -> None:
    blocks = la.swizzled_blocks((rows, cols), 2, 128)
    assert la.is_bijective(blocks)

    for r0 in range(0, rows - 15, 8):
        for c0 in range(0, cols - 15, 8):  # the tile's 2-D index through the blocks' 3-D one
            assert ptx.ldmatrix_x4_conflicts(blocks, 2, (r0, c0)) == [0, 0, 0, 0], (r0, c0)
    # the flat-row swizzle reads only the low bits of the row when a row spans several lines
    assert ptx.ldmatrix_x4_conflicts(la.swizzled((rows, cols), 2, 128), 2, (0, 0)) != [0, 0, 0, 0]


def test_row_major_64_wide_f16_conflicts_8_way_and_padding_fixes_it() -> None:
    assert ptx.ldmatrix_x4_conflicts(la.row_major((64, 64)), 2, (16, 16)) == [7, 7, 7, 7]
    assert ptx.ldmatrix_x4_conflicts(la.padded((64, 64), 72), 2, (16, 16)) == [0, 0, 0, 0]


def test_bank_conflict_counting() -> None:
    assert la.bank_conflicts([i * 4 for i in range(32)], 4) == 0
    assert la.bank_conflicts([0] * 32, 4) == 0  # broadcast
    assert la.bank_conflicts([i * 128 for i in range(8)], 16) == 7
    assert la.bank_conflicts([0, 128], 4) == 1


def test_wavefronts_serve_a_warp_in_phases_of_128_bytes() -> None:
    assert la.wavefronts([i * 4 for i in range(32)], 4) == 1  # one phase of 32 lanes
    assert la.wavefronts([i * 16 for i in range(32)], 16) == 4  # four phases of 8 lanes
    # an mma accumulator's 4-byte stores: lanes at rows lane / 4, columns 2 * (lane % 4) halves
    rows_128 = [(lane // 4) * 128 + (lane % 4) * 4 for lane in range(32)]
    rows_144 = [(lane // 4) * 144 + (lane % 4) * 4 for lane in range(32)]
    assert (la.wavefronts(rows_128, 4), la.wavefronts(rows_144, 4)) == (8, 1)


# ---------------------------------------------------------------- fragments from layout.py


@st.composite
def tiles(draw: st.DrawFn) -> tuple[tuple[int, ...], int, int]:
    rank = draw(st.integers(1, 3))
    shape = tuple(draw(st.sampled_from([1, 2, 3, 4, 8, 12, 16, 32, 64])) for _ in range(rank))
    if math.prod(shape) > 4096:
        shape = shape[:-1] + (4,)
    return shape, draw(st.sampled_from([1, 32, 64, 128, 256])), draw(st.sampled_from([1, 2, 4]))


@FAST
@given(tiles())
def test_default_fragments_cover_each_element_once_per_replica(case: tuple[tuple[int, ...], int, int]) -> None:
    shape, threads, elem = case
    frag = layout.default(shape, threads, elem)
    m = fa.from_fragment(frag)
    assert fa.cover_errors(m) == []
    assert m.threads == threads and m.slots == frag.local_size


@FAST
@given(tiles(), st.data())
def test_from_fragment_agrees_with_layout_tile_index(
    case: tuple[tuple[int, ...], int, int], data: st.DataObject
) -> None:
    shape, threads, elem = case
    frag = layout.default(shape, threads, elem)
    m = fa.from_fragment(frag)
    t = data.draw(st.integers(0, threads - 1))
    digits = [la.evaluate(x, {m.thread: t}) for x in layout.thread_coords(frag, m.thread)]
    table = fa.elements(m)
    for local in layout.local_digits(frag):
        want = tuple(x.value for x in layout.tile_index(frag, [tir.IntImm(d) for d in digits], local))
        inside = all(0 <= i < n for i, n in zip(want, shape))
        assert table[(t, local)] == (want if inside else None)


@FAST
@given(tiles(), st.data())
def test_reduce_and_project_match_layout_py(case: tuple[tuple[int, ...], int, int], data: st.DataObject) -> None:
    shape, threads, elem = case
    frag = layout.default(shape, threads, elem)
    m = fa.from_fragment(frag)
    dim = data.draw(st.integers(0, len(shape) - 1))
    red = fa.reduce(m, dim)
    assert fa.flat_elements(red) == fa.flat_elements(fa.from_fragment(layout.reduced(frag, dim)))
    assert fa.cover_errors(red) == []
    dims = tuple(data.draw(st.permutations(range(len(shape))))[: data.draw(st.integers(1, len(shape)))])
    proj = fa.project(m, dims)
    assert fa.flat_elements(proj) == fa.flat_elements(fa.from_fragment(layout.projected(frag, dims)))
    assert fa.cover_errors(proj) == []


@FAST
@given(st.sampled_from([8, 16, 32, 64, 128]), st.sampled_from([8, 16, 64, 128]), st.sampled_from([32, 64, 128, 256]))
def test_accumulators_and_their_reductions_cover(m: int, n: int, threads: int) -> None:
    acc = fa.from_fragment(layout.accumulator((m, n), threads))
    assert fa.cover_errors(acc) == []
    for dim in (0, 1):
        assert fa.cover_errors(fa.reduce(acc, dim)) == []
    assert fa.cover_errors(fa.replicate(acc, 2)) == []
    assert fa.cover_errors(fa.permute(acc, (1, 0))) == []


# ---------------------------------------------------------------- tensor-core fragments

# A, B and C of every tensor-core instruction record (backends/cuda/instructions.py)
MMA = {f"{r.name}_{part}": make for r in (MMA_M16N8K16, MMA_M16N8K32) for part, make in zip("abc", r.fragments)}


@pytest.mark.parametrize("name", sorted(MMA))
def test_mma_fragments_hold_each_element_exactly_once(name: str) -> None:
    frag = MMA[name]()
    assert fa.cover_errors(frag) == [] and fa.is_bijective(frag)
    assert frag.threads * frag.slots == math.prod(frag.shape)
    assert len(fa.locate(frag)) == math.prod(frag.shape)


def test_mma_fragments_match_the_ptx_tables() -> None:
    where_a = fa.locate(ptx.mma_m16n8k16_a())
    assert where_a[(0, 0)] == (0, 0) and where_a[(0, 1)] == (0, 1) and where_a[(8, 0)] == (0, 2)
    assert where_a[(0, 8)] == (0, 4) and where_a[(15, 15)] == (31, 7) and where_a[(2, 5)] == (10, 1)
    where_b = fa.locate(ptx.mma_m16n8k16_b())
    assert where_b[(1, 0)] == (0, 1) and where_b[(8, 0)] == (0, 2) and where_b[(2, 3)] == (13, 0)
    where_c = fa.locate(ptx.mma_m16n8k16_c())
    assert where_c[(0, 1)] == (0, 1) and where_c[(8, 0)] == (0, 2) and where_c[(5, 7)] == (23, 1)


def test_ldmatrix_x4_feeds_mma_a_and_reads_each_element_once() -> None:
    assert fa.flat_elements(ptx.ldmatrix_x4_regs()) == fa.flat_elements(ptx.mma_m16n8k16_a())
    rows = ptx.ldmatrix_x4_rows()
    assert fa.cover_errors(rows) == [] and fa.is_bijective(rows)
    table = fa.elements(rows)
    assert [table[(lane, (0,))] for lane in (0, 7, 8, 15, 16, 31)] == [(0, 0), (7, 0), (8, 0), (15, 0), (0, 8), (15, 8)]


def test_mma_c_row_reduction_is_held_by_a_quad() -> None:
    red = fa.reduce(ptx.mma_m16n8k16_c(), 1)
    assert fa.cover_errors(red) == []
    table = fa.holders(red)
    assert sorted(t for _, t, _ in table[(3,)]) == [12, 13, 14, 15] and len(table) == 16


@pytest.mark.parametrize(("slots", "warps"), [((1, 1), (1, 1)), ((2, 4), (2, 2)), ((4, 2), (1, 4)), ((1, 8), (4, 1))])
def test_mma_c_tiled_over_warps_covers_the_block_tile(slots: tuple[int, int], warps: tuple[int, int]) -> None:
    frag = fa.tile_threads(fa.tile_slots(ptx.mma_m16n8k16_c(), slots), warps)
    assert frag.shape == (16 * slots[0] * warps[0], 8 * slots[1] * warps[1])
    assert frag.threads == 32 * math.prod(warps)
    assert fa.cover_errors(frag) == [] and fa.is_bijective(frag)


# ---------------------------------------------------------------- TVM


def _random_points(bounds: dict[tir.Var, int], n: int, seed: int) -> list[dict[tir.Var, int]]:
    rng = random.Random(seed)
    return [{v: rng.randrange(e) for v, e in bounds.items()} for _ in range(n)]


@needs_tvm
@settings(max_examples=15, deadline=None)
@given(swizzled_tiles(), st.sampled_from(sorted(MMA)), st.integers(0, 2**16))
def test_tvm_simplified_addresses_equal_integer_evaluation(
    case: tuple[la.Layout, int, int], name: str, seed: int
) -> None:
    lay, _, _ = case
    frag = MMA[name]()
    if len(lay.shape) != 2 or lay.shape[0] < frag.shape[0] or lay.shape[1] < frag.shape[1]:
        lay = la.swizzled((64, 64), 2, 128)
    raw = fa.addresses(lay, frag)
    simple = arith.simplify(raw, frag.bounds)
    for env in _random_points(frag.bounds, 30, seed):
        assert la.evaluate(simple, env) == la.evaluate(raw, env)


@needs_tvm
def test_tvm_simplifies_the_swizzle_line_to_the_row() -> None:
    i, j = var("i"), var("j")
    e = la.swizzled((16, 64), 2, 128).expr((i, j))
    assert expr_text(arith.simplify(e, {i: 16, j: 64})) == "i * 64 + j ^ i % 8 * 8"
    lane = tir.Var("lane", I32, "thread")
    g = tir.BinOp("//", lane, tir.IntImm(4), I32)
    col = tir.BinOp("*", tir.BinOp("%", lane, tir.IntImm(4), I32), tir.IntImm(2), I32)
    line = tir.BinOp("//", tir.BinOp("+", tir.BinOp("*", g, tir.IntImm(64), I32), col, I32), tir.IntImm(64), I32)
    sel = tir.BinOp("*", tir.BinOp("%", line, tir.IntImm(8), I32), tir.IntImm(8), I32)
    assert expr_text(arith.simplify(sel, {lane: 32})) == "lane / 4 * 8"  # the arith.py docstring example
    assert arith.can_prove(tir.BinOp("<", tir.BinOp("+", g, tir.IntImm(8), I32), tir.IntImm(16), I32), {lane: 32})
    assert not arith.can_prove(tir.BinOp("<", g, tir.IntImm(7), I32), {lane: 32})
    assert arith.prove_equal(
        tir.BinOp("%", tir.BinOp("+", tir.BinOp("*", g, tir.IntImm(64), I32), g, I32), tir.IntImm(64), I32),
        g,
        {lane: 32},
    )


@needs_tvm
@pytest.mark.parametrize("make", [*MMA.values(), ptx.ldmatrix_x4_rows, ptx.ldmatrix_x4_regs])
def test_tvm_proves_tensor_core_fragments_bijective(make: object) -> None:
    frag = make()  # type: ignore[operator]
    assert arith.prove_bijective(frag.index, frag.bounds)
    assert not arith.prove_bijective(fa.reduce(frag, 1).index, fa.reduce(frag, 1).bounds) or frag.shape[1] == 1


@needs_tvm
def test_tvm_simplify_of_tiled_fragment_is_equal_on_random_points() -> None:
    frag = fa.tile_threads(fa.tile_slots(ptx.mma_m16n8k16_c(), (2, 4)), (2, 2))
    for x in frag.index:
        simple = arith.simplify(x, frag.bounds)
        assert arith.prove_equal(simple, x, frag.bounds)
        for env in _random_points(frag.bounds, 50, 7):
            assert la.evaluate(simple, env) == la.evaluate(x, env)
