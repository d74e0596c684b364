"""Atomic adds into a tensor a few lanes at once (lower/loops.py `_vector_add`, the backends'
ATOMIC_ADD_LANES and atomic_add_vector): where the target has the instruction and the lanes are the
tensor's contiguous last dimension, with one atomicAdd per element as the fallback; everything
else keeps one atomicAdd per element. The goldens atomic_add_vector and atomic_add_pairs show
the code; these pin down what stays scalar."""

from __future__ import annotations

import pytest

from tilec.driver import compile_program_text
from tilec.elaborate import elaborate_file

TILE = """
kernel k(X: Tensor((M, 64), float32), O: Tensor((M, 64), {dtype})):
    with Kernel(ceildiv(M, 16), threads=64) as bx:
        x_s = alloc_shared((16, 64), float32)
        copy(X[bx * 16, 0], x_s)
        {op}(O[bx * 16, 0], x_s)
"""


def build(text: str, arch: str) -> str:
    return compile_program_text(elaborate_file("k.tile", text=text, arch=arch), arch, "cuda", formatted=False)


@pytest.mark.parametrize(
    ("arch", "dtype", "call"),
    [
        ("sm_90a", "float32", "tilec_red_add_f32x4("),
        ("sm_90a", "bfloat16", "tilec_red_add_bf16x4("),
        ("sm_80", "float16", "tilec_atomic_add_f16x2("),
        ("sm_86", "bfloat16", "tilec_atomic_add_bf16x2("),
    ],
)
def test_a_tile_adds_vectors_where_the_target_has_them(arch: str, dtype: str, call: str) -> None:
    cu = build(TILE.format(dtype=dtype, op="atomic_add"), arch)
    assert call in cu
    assert "atomicAdd(&O[" in cu  # the fallback: rows past M, or O not aligned
    assert "O_vec4" in cu


@pytest.mark.parametrize(("arch", "dtype"), [("sm_80", "float32"), ("gfx90a", "float32"), ("gfx942", "float32")])
def test_without_the_instruction_a_tile_adds_element_by_element(arch: str, dtype: str) -> None:
    cu = build(TILE.format(dtype=dtype, op="atomic_add"), arch)
    assert "tilec_red_add" not in cu and "tilec_atomic_add" not in cu and "O_vec" not in cu


def test_atomic_max_stays_per_element() -> None:
    cu = build(TILE.format(dtype="float32", op="atomic_max"), "sm_90a")
    assert "tilec_red_add" not in cu and "tilec_atomic_max(&O[" in cu


def test_shared_destinations_and_reads_of_the_sum_stay_per_element() -> None:
    shared = """
kernel k(X: Tensor((64,), float32), O: Tensor((64,), float32)):
    with Kernel(1, threads=32) as bx:
        s = alloc_shared((64,), float32)
        fill(s, 0.0)
        for i in Parallel(64):
            atomic_add(s[i], X[i])
        copy(s, O)
"""
    assert "tilec_red_add" not in build(shared, "sm_90a")
    read_back = """
kernel k(X: Tensor((64,), float32), O: Tensor((64,), float32), Y: Tensor((64,), float32)):
    with Kernel(1, threads=32) as bx:
        for i in Parallel(64):
            atomic_add(O[i], X[i])
            Y[i] = O[i]
"""
    assert "tilec_red_add" not in build(read_back, "sm_90a")  # the read would move before the add


def test_lanes_across_rows_stay_per_element() -> None:
    """The lanes are a tile's columns, added into a column of O: no contiguous vector there."""
    text = """
kernel k(X: Tensor((16, 64), float32), O: Tensor((64, 16), float32)):
    with Kernel(1, threads=64) as bx:
        for i, j in Parallel(16, 64):
            atomic_add(O[j, i], X[i, j])
"""
    assert "tilec_red_add" not in build(text, "sm_90a")
