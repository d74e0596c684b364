"""Seconds per phase of this process, summed over files: the driver's phases
("import front end", "elaborate", "clang-format", ...) and every compiler pass
(pipeline.py times each through its hook). `tilec build --time` prints them.

    with phase("elaborate"):
        program = elaborate_file(...)
    TIMES  ->  {"elaborate": 0.031, "infer_layouts": 0.004, ...}
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

TIMES: dict[str, float] = {}


@contextmanager
def phase(name: str) -> Iterator[None]:
    start = time.perf_counter()
    try:
        yield
    finally:
        TIMES[name] = TIMES.get(name, 0.0) + time.perf_counter() - start
