"""GPU checks: skipped where torch or a CUDA GPU is missing (CI), and a pass/fail table at the end.

On the GPU machine: `TILEC_PREBUILT=.gpu PYTHONPATH=src python -m pytest tests/gpu` (the .cu files
from tests/gpu/prebuild.py), or `python tests/gpu/run_all.py`, which isolates crashes per case.
"""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import RESULTS, gpu_available  # noqa: E402


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "test_examples.py")
    gpu_items = [it for it in items if str(it.path) == here]
    if not gpu_items:
        return
    why = gpu_available()
    if why:
        marker = pytest.mark.skip(reason=f"GPU checks skipped: {why}")
        for it in gpu_items:
            it.add_marker(marker)


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    if not RESULTS:
        return
    tr = terminalreporter
    tr.section("tilec GPU checks")
    width = max(len(r[0]) for r in RESULTS)
    for case_id, status, detail in RESULTS:
        tr.write_line(f"{status:5s} {case_id:{width}s} {detail}")
    npass = sum(r[1] == "PASS" for r in RESULTS)
    tr.write_line(f"{npass}/{len(RESULTS)} passed")
