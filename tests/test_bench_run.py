"""bench/run.py's timing order beside a previous build: A B B A, each build's time the mean of its
two (a drift of the GPU's clocks within the pair falls on both alike); one build is timed once."""

from __future__ import annotations

from bench_scripts import load_bench

run = load_bench("run")


def test_a_build_and_its_previous_build_are_timed_in_turns() -> None:
    assert run.in_turns(["tilec", "baseline"]) == ["tilec", "baseline", "baseline", "tilec"]
    assert run.in_turns(["tilec"]) == ["tilec"]
    assert run.in_turns([]) == []


def test_a_build_timed_twice_reports_the_mean_and_both() -> None:
    first = {"ms": 1.0, "min": 0.9, "reps": 50, "inner": 1, "sets": 2}
    second = {"ms": 1.2, "min": 1.1, "reps": 40, "inner": 1, "sets": 2}
    assert run.mean_of_runs([first]) == first
    assert run.mean_of_runs([first, second]) == {**first, "ms": 1.1, "ms_runs": [1.0, 1.2]}


def test_the_ratio_of_a_drifting_pair_is_the_drift_free_one() -> None:
    """Two builds of equal speed timed while the clocks fall 3% a timing: A B B A gives each the
    same mean (times 1, 1.03, 1.06, 1.09: A 1.045, B 1.045), where A B alone says B is 3% slower."""
    times = iter([1.0, 1.03, 1.06, 1.09])
    runs: dict[str, list[dict]] = {"tilec": [], "baseline": []}
    for kind in run.in_turns(["tilec", "baseline"]):
        runs[kind].append({"ms": next(times)})
    a, b = (run.mean_of_runs(runs[k])["ms"] for k in ("tilec", "baseline"))
    assert abs(a / b - 1) < 1e-12
