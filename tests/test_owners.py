"""Owner maps (lower/owners.py): which thread touches each element of a shared tile in one op."""

from __future__ import annotations

import pathlib

from tilec import layout as L
from tilec import tir
from tilec.driver import compile_file
from tilec.dtypes import DType
from tilec.lower.owners import owner_map

ROOT = pathlib.Path(__file__).resolve().parent.parent
I32 = DType.int32


def _vars(n: int) -> tuple[tir.Var, ...]:
    return tuple(tir.Var(f"v{k}", I32, "loop") for k in range(n))


def test_an_owner_map_gives_each_element_its_one_thread() -> None:
    layout = L.default((32, 32), 128, 4)
    i, j = _vars(2)
    owners = owner_map(layout, (i, j), ((i, j),))
    assert owners is not None and len(owners) == 32 * 32
    assert len({t for _, t in owners}) == 128  # all threads, 8 elements each
    # a region starting at a constant offset: the same threads, elements shifted
    shifted = owner_map(layout, (i, j), ((tir.BinOp("+", i, tir.IntImm(4, I32), I32), j),))
    assert shifted is not None and shifted != owners


def test_no_owner_map_for_shared_elements_or_unknown_indices() -> None:
    i, j = _vars(2)
    rows = L.replicated_all((4, 32), 128)  # every thread holds every element
    assert owner_map(rows, (i, j), ((i, j),)) is None
    layout = L.default((32, 32), 128, 4)
    neighbour = (i, tir.BinOp("%", tir.BinOp("+", j, tir.IntImm(1, I32), I32), tir.IntImm(32, I32), I32))
    assert owner_map(layout, (i, j), ((i, j), neighbour)) is None  # element j + 1 is another thread's too
    k = tir.Var("k", I32, "loop")  # not one of the loop's variables
    assert owner_map(layout, (i, j), ((i, tir.BinOp("+", j, k, I32)),)) is None


def test_elementwise_add_as_tilelang_writes_it_needs_no_barrier(monkeypatch) -> None:
    # copy A and B into shared tiles, add them in a Parallel loop, copy out through a shared tile:
    # every thread touches only the elements it wrote (TileLang's example program)
    monkeypatch.chdir(ROOT)
    cu = compile_file("tests/corpus/tilelang/elementwise_add.tile", {}, "sm_90a")
    assert "__syncthreads" not in cu
