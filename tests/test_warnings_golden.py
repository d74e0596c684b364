"""Golden warnings: each tests/golden/warnings/NAME.tile builds (driver.build, as `tilec build`
does) and loses performance, or its configuration, in one way that tilec warns about; NAME.warn
is the exact text tilec prints for it (pytest --update-golden rewrites). A case may start with
`# tilec-args: --arch sm_90a` (as in tests/golden/errors). Paths are relative to the repository
root, as a user running `tilec build tests/golden/warnings/NAME.tile` there would see them.
"""

from __future__ import annotations

import pathlib
import shlex

import pytest

from tilec import driver
from tilec.diagnostics import WARNINGS, render_all
from tilec.elaborate import elaborate_file
from tilec.pipeline import compile_with_warnings

ROOT = pathlib.Path(__file__).resolve().parent.parent
CASES = sorted((ROOT / "tests" / "golden" / "warnings").glob("*.tile"))


def _arch(text: str) -> str:
    first = text.split("\n", 1)[0]
    words = shlex.split(first.removeprefix("# tilec-args:")) if first.startswith("# tilec-args:") else []
    return words[words.index("--arch") + 1] if "--arch" in words else "sm_80"


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_warning_golden(path: pathlib.Path, golden, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    arch = _arch(path.read_text())
    out = driver.build(path.relative_to(ROOT).as_posix(), {}, arch, cache=False)  # as `tilec build` does
    assert out.warnings, f"{path.name} compiles without warnings"
    golden.check(path.with_suffix(".warn"), render_all(list(out.warnings)))


def test_every_warning_has_a_golden() -> None:
    named = {line.rsplit("[-W", 1)[1].rstrip("]") for p in CASES for line in _first_lines(p.with_suffix(".warn"))}
    assert named == set(WARNINGS)


def _first_lines(path: pathlib.Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if ": warning: " in line]


def test_warnings_come_with_the_build_result(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    result = driver.build("tests/golden/warnings/simt_gemm_k_step.tile", cache=False)
    assert [w.name for w in result.warnings] == ["simt-gemm"]
    assert "gemm_k24_kernel" in result.text  # a warning stops nothing


def test_explain_gives_the_real_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    from tilec.explain import explain_program

    monkeypatch.chdir(ROOT)
    (report,) = explain_program(elaborate_file("tests/golden/warnings/lost_pipeline_loaded_index.tile", {}))
    (caption,) = [t.caption for t in report.tables if t.title.startswith("Pipeline")]
    assert caption == (
        "num_stages=2: plain loop: the copy into 'A_shared' (line 15) cannot run ahead: "
        "its indices use 'row', loaded in the loop body"
    )


INPUTS = sorted((ROOT / "examples").glob("*.tile")) + sorted((ROOT / "tests" / "golden" / "codegen").glob("*.tile"))

# Inputs whose loads the counter finds conflicting, reported rather than silenced (issue 13):
# CUDA swizzles annotated for ldmatrix, read by HIP's per-lane ds_reads.
KNOWN_CONFLICTS = {
    ("codegen/attention_swizzled", "gfx90a"): ["Q_s", "K_s"],
    ("codegen/gemm_swizzled", "gfx90a"): ["A_s"],
}


@pytest.mark.parametrize("arch", ["sm_80", "gfx90a"])
@pytest.mark.parametrize("path", INPUTS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_no_example_has_bank_conflicts(path: pathlib.Path, arch: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The layouts inference chooses (and the inputs' annotations) load every operand conflict-free,
    but for the known findings above."""
    from tilec.diagnostics import CompileError

    monkeypatch.chdir(ROOT)
    try:
        out = compile_with_warnings(elaborate_file(path.relative_to(ROOT).as_posix(), {}, arch=arch), arch)
    except CompileError:
        pytest.skip(f"{path.name} does not compile for {arch}")
    named = [w.message.split("'")[1] for w in out.warnings if w.name == "bank-conflict"]
    assert named == KNOWN_CONFLICTS.get((f"{path.parent.name}/{path.stem}", arch), [])


def test_wno_bank_conflict_silences_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from tilec.diagnostics import WarningOptions, with_options

    monkeypatch.chdir(ROOT)
    path = "tests/golden/warnings/bank_conflict_row_major.tile"
    found = compile_with_warnings(elaborate_file(path, {}), "sm_80").warnings
    assert [w.name for w in found] == ["bank-conflict"]
    assert with_options(found, WarningOptions(disabled=frozenset({"bank-conflict"}))) == []
