"""Compile-work budgets: limits the front end checks early, each with a located
diagnostic, so that no input keeps tilec busy for long or makes it write code
that nvcc would take minutes over.

    x = alloc_fragment((65536, 64), float32)     error: fragment 'x' needs 32768 registers per
                                                 thread; tilec allows 1020 (4 x the 255 a thread has)

- Nesting (parse.py): an expression at most MAX_EXPR_NESTING operators, calls
  and subscripts deep, statements at most MAX_BLOCK_NESTING blocks deep, macro
  calls at most MAX_MACRO_NESTING deep (elaborate.py). The compiler walks
  these trees recursively; the limits keep it well inside Python's stack.
- Statements (elaborate.py): a kernel holds at most MAX_STATEMENTS statements
  once macros are inlined; compile time is linear in them, and exponential
  macro expansion stops there.
- Registers (elaborate.py): the fragments and alloc_local arrays of a kernel
  need at most REGISTER_FACTOR times the registers a thread can have. The
  per-element work of lowering and the size of the generated code are bounded
  by the elements per thread, so this bounds both; a kernel between 1x and
  REGISTER_FACTOR x spills (slow, but nvcc builds it).
- Shared memory: the target's limit, checked per allocation as soon as it is
  made and for the whole kernel at its end (elaborate.py).
"""

from __future__ import annotations

import math

from tilec.dtypes import DType

MAX_EXPR_NESTING = 100
MAX_BLOCK_NESTING = 32
MAX_MACRO_NESTING = 16
MAX_STATEMENTS = 10_000
REGISTER_FACTOR = 4
INT32_MAX = 2**31 - 1


def register_limit(registers_per_thread: int) -> int:
    """Registers per thread a kernel's fragments may need in all."""
    return REGISTER_FACTOR * registers_per_thread


def registers(elements: int, dtype: DType) -> int:
    """32-bit registers holding `elements` values of `dtype`."""
    return math.ceil(elements * dtype.bytes / 4)
