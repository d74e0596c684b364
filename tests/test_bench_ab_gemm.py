"""bench/ab_gemm.py's arithmetic (the GPU parts run on the GPU machine only)."""

from __future__ import annotations

from bench_scripts import load_bench

ab = load_bench("ab_gemm")


def test_each_build_runs_first_in_turn() -> None:
    names = ["cuBLAS", "old", "new"]
    orders = [ab.rotated(names, r) for r in range(3)]
    assert [o[0] for o in orders] == names and all(sorted(o) == sorted(names) for o in orders)
    assert ab.rotated([], 5) == []


def test_the_speed_ratio_is_taken_round_by_round() -> None:
    # the clocks fall by half between rounds: the per-round ratio sees through it, pooled medians do not
    reference = [1.0, 2.0, 2.0]
    build = [0.9, 1.8, 1.8]
    assert abs(ab.speed_ratio(reference, build) - 1.0 / 0.9) < 1e-12


def test_batches_last_about_the_same_time_at_every_size() -> None:
    assert ab.calls_per_batch(8192) == 9 and ab.calls_per_batch(4096) == 71
    assert ab.calls_per_batch(65536) == 1 and ab.calls_per_batch(256) == 200
    assert ab.quartiles([4.0, 1.0, 3.0, 2.0]) == (2.0, 4.0)
