"""Compile-work budgets: limits the front end checks early, each with a located
diagnostic, so that no input keeps tilec busy for long or makes it write code
that nvcc would take minutes over.

    x = alloc_fragment((65536, 64), float32)     error: fragment 'x' needs 32768 registers per
                                                 thread; tilec allows 1020 (4 x the 255 a thread has)

- Nesting (parse.py): an expression at most MAX_EXPR_NESTING operators, calls
  and subscripts deep, statements at most MAX_BLOCK_NESTING blocks deep, macro
  calls at most MAX_MACRO_NESTING deep (elaborate.py). The compiler walks
  these trees recursively; the limits keep it well inside Python's stack.
- Substituted names (elaborate.py): a name bound before the Kernel block, and
  a macro's argument, stands for its expression wherever it is used; once
  substituted, such an expression has at most MAX_SUBSTITUTED_NODES nodes and
  MAX_EXPR_NESTING levels (`a1 = a0 * a0`, `a2 = a1 * a1`, ... doubles at
  every step).
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

from tilec import tir
from tilec.dtypes import DType
from tilec.tir_walk import Node, children

MAX_EXPR_NESTING = 100
MAX_BLOCK_NESTING = 32
MAX_MACRO_NESTING = 16
MAX_STATEMENTS = 10_000
MAX_SUBSTITUTED_NODES = 10_000
REGISTER_FACTOR = 4
INT32_MAX = 2**31 - 1


def register_limit(registers_per_thread: int) -> int:
    """Registers per thread a kernel's fragments may need in all."""
    return REGISTER_FACTOR * registers_per_thread


def registers(elements: int, dtype: DType) -> int:
    """32-bit registers holding `elements` values of `dtype`."""
    return math.ceil(elements * dtype.bytes / 4)


def tree_size(e: tir.Expr) -> tuple[int, int]:
    """(nodes, depth) of `e` written out as a tree, as the generated code prints
    it: a shared sub-expression counts once per use. Linear in the distinct nodes."""
    done: dict[int, tuple[int, int]] = {}
    stack: list[tuple[Node, bool]] = [(e, False)]
    while stack:
        node, expanded = stack.pop()
        if id(node) in done:
            continue
        kids = children(node)
        if kids and not expanded:
            stack.append((node, True))
            stack += [(k, False) for k in kids]
            continue
        sizes = [done[id(k)] for k in kids]
        done[id(node)] = (1 + sum(n for n, _ in sizes), 1 + max((d for _, d in sizes), default=0))
    return done[id(e)]
