"""How fast this machine runs Python, against the machine the tests' time bars were set on.

The compile-time bars (tune under a second, a hostile program rejected within two) are CPU
seconds on the development machine. CI's machines of the same size have run the whole suite at
half that speed, and a bar set in absolute seconds then fails for the machine, not the compiler.
`scale()` times a fixed piece of compiler-like Python (building, hashing and walking expression
trees, tilec's own code untouched, so a slower compiler cannot slow the yardstick) and returns how
many times slower than the reference this machine runs it, at least 1: a bar of `1.0 * scale()`
seconds is still one second on the reference machine, and the compiler must stay within it.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass

# The yardstick's best CPU time on the development machine (2 cores, Python 3.11; 2026-12-07).
REFERENCE_SECONDS = 0.09


@dataclass(frozen=True, slots=True)
class _Node:
    op: str
    a: object
    b: object


def _yardstick() -> int:
    table: dict[object, int] = {}
    total = 0
    for i in range(6000):
        e: object = i
        for k in range(12):
            e = _Node("+*"[k % 2], e, k)
        table[e] = i
        stack = [e]
        while stack:
            n = stack.pop()
            if isinstance(n, _Node):
                stack += (n.a, n.b)
            else:
                assert isinstance(n, int)
                total += n
    return total + len(table)


@functools.cache
def scale() -> float:
    """This machine's slowness against the reference (>= 1), from the best of five runs."""
    best = float("inf")
    for _ in range(5):
        start = time.process_time()
        _yardstick()
        best = min(best, time.process_time() - start)
    return max(1.0, best / REFERENCE_SECONDS)
