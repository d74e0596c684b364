"""Golden diagnostics: each tests/golden/errors/NAME.tile is one user mistake,
NAME.err the exact text tilec prints for it (pytest --update-golden rewrites).
The error may come from any stage: elaboration, or a pass of the pipeline after
it (layout_conflict: infer_layouts; shared_memory_multibuffered: the shared-memory
check after lowering).

A case may start with `# tilec-args: -D NAME=VALUE --arch sm_86` to pass
defines and a target. Paths are relative to the repository root, as a user
running `tilec check tests/golden/errors/NAME.tile` there would see them.
"""

from __future__ import annotations

import pathlib
import shlex

import pytest

from tilec.diagnostics import CompileError, render_all
from tilec.elaborate import elaborate_file
from tilec.pipeline import compile_program

ROOT = pathlib.Path(__file__).resolve().parent.parent
CASES = sorted((ROOT / "tests" / "golden" / "errors").glob("*.tile"))


def _args(text: str) -> tuple[dict[str, str], str]:
    defines: dict[str, str] = {}
    arch = "sm_80"
    first = text.splitlines()[0] if text else ""
    if first.startswith("# tilec-args:"):
        words = shlex.split(first.removeprefix("# tilec-args:"))
        for flag, value in zip(words[::2], words[1::2]):
            if flag == "-D":
                name, _, v = value.partition("=")
                defines[name] = v
            elif flag == "--arch":
                arch = value
    return defines, arch


def test_there_are_enough_cases() -> None:
    assert len(CASES) >= 35


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_error_golden(path: pathlib.Path, golden, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    defines, arch = _args(path.read_text())
    with pytest.raises(CompileError) as info:
        compile_program(elaborate_file(path.relative_to(ROOT).as_posix(), defines, arch=arch), arch)
    golden.check(path.with_suffix(".err"), render_all(info.value.diagnostics))
