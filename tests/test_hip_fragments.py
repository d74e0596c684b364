"""The MFMA fragments (backends/hip/fragments.py) hold each element once, the accumulator layout
of the records matches the C fragment tiled over a wave's tiles, and the padded operand rows are
free of LDS bank conflicts for the per-lane reads (layout_algebra.bank_conflicts)."""

from __future__ import annotations

import pytest

from tilec import fragment_algebra as fa
from tilec import layout_algebra as la
from tilec import tir
from tilec.backends.hip import fragments as amd
from tilec.backends.hip.instructions import MFMA_16X16X16, MFMA_32X32X8, operand_pitch
from tilec.dtypes import DType

MAPS = [amd.mfma_16x16x16_a, amd.mfma_16x16x16_b, amd.mfma_16x16_c, amd.mfma_32x32x8_a, amd.mfma_32x32x8_b]
MAPS += [amd.mfma_32x32_c, amd.mfma_16x16x32_a, amd.mfma_16x16x32_b]


@pytest.mark.parametrize("make", MAPS, ids=lambda f: f.__name__)
def test_mfma_fragments_hold_each_element_exactly_once(make: object) -> None:
    frag = make()  # type: ignore[operator]
    assert frag.threads == 64 and fa.cover_errors(frag) == [] and fa.is_bijective(frag)


@pytest.mark.parametrize("record", [MFMA_16X16X16, MFMA_32X32X8], ids=lambda r: r.name)
def test_the_accumulator_of_one_wave_tile_is_the_c_fragment(record: object) -> None:
    tile = record.shape[0]  # type: ignore[attr-defined]
    frag = record.accumulator((tile, tile), 64, "Square", None)  # type: ignore[attr-defined]
    assert fa.flat_elements(fa.from_fragment(frag)) == fa.flat_elements(record.fragments[2]())  # type: ignore[attr-defined]


@pytest.mark.parametrize("shape", [(128, 64), (64, 32), (32, 16), (64, 128)])
@pytest.mark.parametrize("k_inner", [True, False])
def test_padded_operand_rows_read_without_bank_conflicts(shape: tuple[int, int], k_inner: bool) -> None:
    buf = tir.Buffer("A_s", tuple(tir.IntImm(n, DType.int32) for n in shape), DType.float16, "shared")
    lay = la.padded(shape, operand_pitch(buf))
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
