"""bench/run.py's timing order beside a previous build: one timing thrown away, then A B B A, each
build's time the mean of its two (a penalty on a pair's first timing and a drift of the GPU's clocks
within the pair fall on both alike); one build is timed once."""

from __future__ import annotations

from bench_scripts import load_bench

run = load_bench("run")


def test_a_build_and_its_previous_build_are_timed_in_turns_after_a_warm_up() -> None:
    assert run.in_turns(["tilec", "baseline"]) == [None, "tilec", "baseline", "baseline", "tilec"]
    assert run.in_turns(["tilec"]) == ["tilec"]
    assert run.in_turns([]) == []


def test_a_build_timed_twice_reports_the_mean_and_both() -> None:
    first = {"ms": 1.0, "min": 0.9, "reps": 50, "inner": 1, "sets": 2}
    second = {"ms": 1.2, "min": 0.8, "reps": 40, "inner": 1, "sets": 2}
    assert run.mean_of_runs([first]) == first
    assert run.mean_of_runs([first, second]) == {**first, "ms": 1.1, "min": 0.8, "ms_runs": [1.0, 1.2]}


def ratio(times: list[float]) -> float:
    """New over previous time of two builds of equal speed timed in turns at `times`."""
    it = iter(times)
    runs: dict[str, list[dict]] = {"tilec": [], "baseline": []}
    for step in run.in_turns(["tilec", "baseline"]):
        t = {"ms": next(it), "min": 0.0}
        if step is not None:
            runs[step].append(t)
    new, previous = (run.mean_of_runs(runs[k])["ms"] for k in ("tilec", "baseline"))
    return new / previous


def test_a_steady_drift_falls_on_both_builds() -> None:
    """Clocks falling 3% a timing (new then previous alone would say the previous is 3% slower)."""
    assert abs(ratio([0.97, 1.0, 1.03, 1.06, 1.09]) - 1) < 1e-12


def test_a_penalty_on_the_first_timing_falls_on_the_warm_up() -> None:
    """The first timing of a pair 6% slow (runs 06l and 06m) and the rest even."""
    assert abs(ratio([1.06, 1.0, 1.0, 1.0, 1.0]) - 1) < 1e-12
