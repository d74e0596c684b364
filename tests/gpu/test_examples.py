"""Every example and variant against a torch reference on the GPU (see cases.py).

Skipped without torch or a CUDA GPU (conftest.py). The module imports nothing heavy at the top, so
collection in CI without torch is clean.
"""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import RESULTS, gpu_available  # noqa: E402


def _case_ids() -> list[str]:
    if gpu_available():
        return ["skipped"]
    from cases import CASES

    return [c.id for c in CASES]


@pytest.mark.parametrize("case_id", _case_ids())
def test_example(case_id: str) -> None:
    why = gpu_available()
    if why:
        pytest.skip(f"GPU checks skipped: {why}")
    from cases import BY_ID
    from harness import NotBuilt, load, summarize

    case = BY_ID[case_id]
    try:
        mod = load(case.variant)
    except NotBuilt as e:
        RESULTS.append((case_id, "ERROR", f"not built: {str(e)[:200]}"))
        pytest.fail(str(e))
    try:
        res = case.run(mod)
    except Exception as e:
        RESULTS.append((case_id, "ERROR", f"{type(e).__name__}: {str(e)[:200]}"))
        raise
    RESULTS.append((case_id, "PASS" if res["ok"] else "FAIL", summarize(res)))
    assert res["ok"], f"{case_id}: {summarize(res)}"
