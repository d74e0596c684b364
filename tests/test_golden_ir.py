"""Golden IR texts: the Tile IR (`--emit tir`) and the Thread IR (`--emit thread`) of
two examples, as the last pass leaving each IR hands it on, one directory per target:

    examples/gemm.tile  ->  tests/golden/ir/sm_80/gemm.tir, tests/golden/ir/sm_80/gemm.thread

A pass that changes what it leaves shows up here as a diff of the IR itself, before
the C++ goldens (tests/test_golden_cu.py) show its effect. `pytest --update-golden
tests/test_golden_ir.py` rewrites them; review every diff like code.
"""

from __future__ import annotations

import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
IR_GOLDEN = ROOT / "tests" / "golden" / "ir"
EXAMPLES = ("gemm", "flash_attention")
TARGETS = ("sm_80",)


@pytest.mark.parametrize("emit", ["tir", "thread"])
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("example", EXAMPLES)
def test_ir_golden(example: str, target: str, emit: str, golden, monkeypatch: pytest.MonkeyPatch) -> None:
    from tilec.driver import compile_file

    monkeypatch.chdir(ROOT)
    text = compile_file(f"examples/{example}.tile", arch=target, emit=emit)
    golden.check(IR_GOLDEN / target / f"{example}.{emit}", text)


def test_no_stray_ir_goldens() -> None:
    expected = {f"{t}/{x}.{e}" for t in TARGETS for x in EXAMPLES for e in ("tir", "thread")}
    assert {str(p.relative_to(IR_GOLDEN)) for p in IR_GOLDEN.glob("*/*")} == expected
