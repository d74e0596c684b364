"""Golden `.cu` tests: tests/golden/codegen/NAME.tile -> NAME.cu beside it.

A case may start with a comment line giving build options, e.g.
`# tilec-args: --arch sm_90a -D block_M=64` (as in tests/golden/errors). `pytest --update-golden` rewrites the
goldens; review every diff like code.
"""

from __future__ import annotations

import pathlib
import shlex

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
CASES = sorted((ROOT / "tests" / "golden" / "codegen").glob("*.tile"))


def case_options(text: str) -> tuple[str, dict[str, str]]:
    arch, defines = "sm_80", {}
    first = text.split("\n", 1)[0]
    if first.startswith("# tilec-args:"):
        words = shlex.split(first.removeprefix("# tilec-args:"))
        for flag, value in zip(words[::2], words[1::2], strict=True):
            if flag == "--arch":
                arch = value
            elif flag == "-D":
                name, _, val = value.partition("=")
                defines[name] = val
            else:
                raise ValueError(f"unknown option {flag} in the first line of a golden case")
    return arch, defines


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.stem)
def test_codegen_golden(case: pathlib.Path, golden, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("tilec.pipeline")
    from tilec.driver import compile_file

    monkeypatch.chdir(ROOT)
    arch, defines = case_options(case.read_text())
    golden.check(case.with_suffix(".cu"), compile_file(str(case.relative_to(ROOT)), defines, arch))


def test_case_options() -> None:
    assert case_options("kernel\n") == ("sm_80", {})
    assert case_options("# tilec-args: --arch sm_90a -D a=1 -D b=x\n") == ("sm_90a", {"a": "1", "b": "x"})
