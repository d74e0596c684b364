"""Mutation fuzzing of the front end: every example, mutated many ways
(tokens and lines deleted, duplicated, swapped, replaced), must end in success
or a CompileError -- never another exception (that would be an internal error
a user sees as a traceback). Deterministic: seeded `random.Random`.
"""

from __future__ import annotations

import pathlib
import random
import re

import pytest

from tilec.diagnostics import CompileError, render_all
from tilec.elaborate import elaborate_file

ROOT = pathlib.Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.tile"))
MUTANTS_PER_FILE = 60
TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\d+\.\d*|\d+|\*\*|//|[-+*/%<>=!]=?|[()\[\],:.]|\n[ ]*|\"[^\"\n]*\"")
SPARE = [
    "(",
    ")",
    ":",
    ",",
    "[",
    "]",
    "=",
    "0",
    "-1",
    "1e9",
    "2 ** 40",
    "float16",
    "x",
    "A",
    "for",
    "if",
    "Parallel(",
    "alloc_shared(",
    "copy",
    "gemm",
    "\n",
    "\n    ",
    "\n        ",
    "import",
    "macro",
    "'s'",
    "True",
    "/",
    "//",
    "not",
    "Kernel",
    "**",
    "1 << 70",
    "-",
]


def _tokens(text: str) -> list[str]:
    out, pos = [], 0
    for m in TOKEN.finditer(text):
        if m.start() > pos:
            out.append(text[pos : m.start()])
        out.append(m.group())
        pos = m.end()
    out.append(text[pos:])
    return out


def _mutate(text: str, rng: random.Random) -> str:
    if rng.random() < 0.3:
        lines = text.split("\n")
        i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
        match rng.randrange(4):
            case 0:
                del lines[i]
            case 1:
                lines.insert(i, lines[j])
            case 2:
                lines[i], lines[j] = lines[j], lines[i]
            case _:
                lines[i] = lines[i][: rng.randrange(len(lines[i]) + 1)]
        return "\n".join(lines)
    toks = _tokens(text)
    if rng.random() < 0.4:
        return _retarget(toks, rng)
    for _ in range(rng.randint(1, 3)):
        if not toks:
            break
        i, j = rng.randrange(len(toks)), rng.randrange(len(toks))
        match rng.randrange(4):
            case 0:
                del toks[i]
            case 1:
                toks.insert(i, toks[j])
            case 2:
                toks[i], toks[j] = toks[j], toks[i]
            case _:
                toks[i] = rng.choice(SPARE)
    return "".join(toks)


def _retarget(toks: list[str], rng: random.Random) -> str:
    """Keep the syntax, change the meaning: swap names for other names of the
    file (or built-ins) and numbers for awkward ones."""
    names = [t for t in toks if t[:1].isalpha() or t[:1] == "_"] + ["float16", "int32", "copy", "gemm", "Parallel"]
    for _ in range(rng.randint(1, 3)):
        i = rng.randrange(len(toks))
        tok = toks[i]
        if tok[:1].isalpha() or tok[:1] == "_":
            toks[i] = rng.choice(names)
        elif tok[:1].isdigit():
            toks[i] = rng.choice(["0", "1", "3", "33", "1024", "100000", "0.5", "-1"])
    return "".join(toks)


def test_examples_exist() -> None:
    assert EXAMPLES, "no examples/*.tile to fuzz"


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_mutants_end_in_a_diagnostic(path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    rel = path.relative_to(ROOT).as_posix()
    text = path.read_text()
    rng = random.Random(f"tilec-fuzz-{path.name}")
    for n in range(MUTANTS_PER_FILE):
        mutant = _mutate(text, rng)
        try:
            elaborate_file(rel, {}, text=mutant)
        except CompileError as e:
            assert e.diagnostics, "CompileError without diagnostics"
            render_all(e.diagnostics)  # rendering must not fail either
        except Exception as e:  # pragma: no cover - the failure report
            pytest.fail(f"mutant {n} of {rel} raised {type(e).__name__}: {e}\n--- mutant ---\n{mutant}")
