"""The MFMA fragments (backends/hip/fragments.py) hold each element once, the accumulator layout
of the records matches the C fragment tiled over a wave's tiles, and the padded operand rows are
free of LDS bank conflicts for the per-lane reads (layout_algebra.bank_conflicts)."""

from __future__ import annotations

import pytest

from tilec import fragment_algebra as fa
from tilec import layout_algebra as la
from tilec import tir
from tilec.backends.hip import fragments as amd
from tilec.backends.hip.instructions import MFMA_16X16X16, MFMA_16X16X32, MFMA_32X32X8, MFMA_32X32X16, operand_pitch
from tilec.dtypes import DType

MAPS = [amd.mfma_16x16x16_a, amd.mfma_16x16x16_b, amd.mfma_16x16_c, amd.mfma_32x32x8_a, amd.mfma_32x32x8_b]
MAPS += [amd.mfma_32x32_c, amd.mfma_16x16x32_a, amd.mfma_16x16x32_b, amd.mfma_32x32x16_a, amd.mfma_32x32x16_b]
RECORDS = [MFMA_16X16X16, MFMA_32X32X8, MFMA_16X16X32, MFMA_32X32X16]  # the last two: gfx942's 8-bit forms


@pytest.mark.parametrize("make", MAPS, ids=lambda f: f.__name__)
def test_mfma_fragments_hold_each_element_exactly_once(make: object) -> None:
    frag = make()  # type: ignore[operator]
    assert frag.threads == 64 and fa.cover_errors(frag) == [] and fa.is_bijective(frag)


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: r.name)
def test_the_accumulator_of_one_wave_tile_is_the_c_fragment(record: object) -> None:
    tile = record.shape[0]  # type: ignore[attr-defined]
    frag = record.accumulator((tile, tile), 64, "Square", None)  # type: ignore[attr-defined]
    assert fa.flat_elements(fa.from_fragment(frag)) == fa.flat_elements(record.fragments[2]())  # type: ignore[attr-defined]


@pytest.mark.parametrize("shape", [(128, 64), (64, 32), (32, 16), (64, 128)])
@pytest.mark.parametrize("k_inner", [True, False])
def test_padded_operand_rows_read_without_bank_conflicts(shape: tuple[int, int], k_inner: bool) -> None:
    buf = tir.Buffer("A_s", tuple(tir.IntImm(n, DType.int32) for n in shape), DType.float16, "shared")
    lay = la.padded(shape, operand_pitch(buf, 16, 4))
    frag = amd.mfma_16x16x16_a()
    table = fa.elements(frag)
    for i in range(4):  # one read per element when K is strided, one 8-byte read for all four
        addrs = []
        for lane in range(64):
            r, c = table[(lane, (i if not k_inner else 0,))]  # type: ignore[misc]
            idx = (r, c) if k_inner else (c, r)  # a (K, M) tile: rows are K
            addrs.append(lay.apply(idx) * 2)
        width, phase = (8, 16) if k_inner else (2, 32)  # LDS serves 128 bytes a clock
        for p in range(0, 64, phase):
            assert la.bank_conflicts(addrs[p : p + phase], width) == 0, (shape, k_inner, i, p)
        if k_inner:
            break
    unpadded = la.row_major(shape)
    rows = [unpadded.apply(table[(lane, (0,))]) * 2 for lane in range(16)]  # type: ignore[arg-type]
    assert la.bank_conflicts(rows, 8) > 0 or shape[1] * 2 % 128  # without the pad, 128-byte rows collide


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: r.name)
@pytest.mark.parametrize("shape", [(128, 64), (64, 32), (32, 64), (64, 128), (32, 16)])
@pytest.mark.parametrize("k_inner", [True, False])
def test_int8_operand_rows_read_without_bank_conflicts(record: object, shape: tuple[int, int], k_inner: bool) -> None:
    """int8 lanes read 4 bytes (K-contiguous) or 1 (K-strided), 32 lanes a phase: the record's
    pitch keeps the rows of a phase in distinct banks, for both MFMA shapes (16 rows x 2 K groups
    for 16x16x16, 32 rows for 32x32x8), as the counter -Wbank-conflict uses sees it; gfx942's
    k-deep forms read 8 bytes, 16 lanes (rows) a phase, as 16-bit types do."""
    tile = record.shape[0]  # type: ignore[attr-defined]
    if shape[0] % tile or shape[1] % record.shape[2]:  # type: ignore[attr-defined]
        pytest.skip("not whole fragments")
    buf = tir.Buffer("A_s", tuple(tir.IntImm(n, DType.int32) for n in shape), DType.int8, "shared")
    pitch = record.operand_pitch(buf)  # type: ignore[attr-defined]
    assert record.load_conflicts(shape, la.padded(shape, pitch), 1, k_inner) == 1, pitch  # type: ignore[attr-defined]
    unpadded = record.load_conflicts(shape, la.row_major(shape), 1, k_inner)  # type: ignore[attr-defined]
    assert unpadded > 1 or not k_inner or shape[1] % 128  # dense 128-byte rows collide


def test_int8_pitch_differs_by_record_and_16_bit_does_not() -> None:
    """32 rows a phase (32x32x8 int8) need an odd word stride, 16 rows x 2 K groups (16x16x16) an
    odd 8-byte one; 16-bit reads are 8 bytes, 16 lanes a phase, one pitch for both."""
    shape = tuple(tir.IntImm(n, DType.int32) for n in (128, 64))
    i8, f16 = tir.Buffer("A_s", shape, DType.int8, "shared"), tir.Buffer("A_s", shape, DType.float16, "shared")
    assert (operand_pitch(i8, 16, 4), operand_pitch(i8, 32, 4)) == (72, 68)
    assert operand_pitch(f16, 16, 4) == operand_pitch(f16, 32, 4) == 68  # 136 bytes, as before
    assert MFMA_16X16X32.operand_pitch(i8) == MFMA_32X32X16.operand_pitch(i8) == 72  # 8-byte reads: 16 j + 8
