"""Mutation fuzzing: every example, mutated many ways (bench/fuzz.py's mutator: tokens and
lines deleted, duplicated, swapped, replaced), must end in success or a CompileError -- never
another exception (that would be an internal error a user sees as a traceback), and never run
past its budget. The front end on many mutants here, whole builds on a few through `make fuzz`'s
worker processes (which runs 10,000). Deterministic: seeded `random.Random`.
"""

from __future__ import annotations

import pathlib
import random

import pytest

from bench_scripts import load_bench
from tilec.diagnostics import CompileError, render_all
from tilec.elaborate import elaborate_file

ROOT = pathlib.Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.tile"))
MUTANTS_PER_FILE = 60
fuzz = load_bench("fuzz")


def test_examples_exist() -> None:
    assert EXAMPLES, "no examples/*.tile to fuzz"


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_mutants_end_in_a_diagnostic(path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    rel = path.relative_to(ROOT).as_posix()
    text = path.read_text()
    rng = random.Random(f"tilec-fuzz-{path.name}")
    for n in range(MUTANTS_PER_FILE):
        mutant = fuzz.mutate(text, rng)
        try:
            elaborate_file(rel, {}, text=mutant)
        except CompileError as e:
            assert e.diagnostics, "CompileError without diagnostics"
            render_all(e.diagnostics)  # rendering must not fail either
        except Exception as e:  # pragma: no cover - the failure report
            pytest.fail(f"mutant {n} of {rel} raised {type(e).__name__}: {e}\n--- mutant ---\n{mutant}")


def test_whole_builds_of_mutants_end_in_text_or_a_diagnostic() -> None:
    """Two mutants of each example through every pass, the emitter and clang-format, as
    `make fuzz` builds them (worker processes, 10 s each)."""
    n = 2 * len(fuzz.EXAMPLES)
    results = fuzz.run(n, jobs=1, seed="tilec-fuzz-ci", budget=10.0, memory=4.0)
    assert [r.index for r in results] == list(range(n))
    bad = [(r.index, r.outcome, r.detail) for r in results if r.outcome not in ("compiled", "diagnostic")]
    assert not bad, bad
    assert {r.outcome for r in results} == {"compiled", "diagnostic"}


def test_a_build_past_its_budget_is_killed_and_the_next_goes_on() -> None:
    results = fuzz.run(3, jobs=1, seed="tilec-fuzz-ci", budget=0.001, memory=4.0)
    assert [(r.index, r.outcome) for r in results] == [(i, "over budget") for i in range(3)]
    assert all("over 0.001 s" in r.detail for r in results)
