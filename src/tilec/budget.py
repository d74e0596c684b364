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
- Registers again, once layouts are inferred (`register_estimate`, after the
  pipeline plan): what the fragments, locals and gemm operand sets of a kernel
  hold per thread. `tilec explain` prints it; past Target.max_registers it is
  the `-Wregister-spill` warning (passes/warn.py).
- Shared memory: the target's limit, checked per allocation as soon as it is
  made and for the whole kernel at its end (elaborate.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, assert_never

from tilec import tir
from tilec.dtypes import DType
from tilec.targets import Target, instruction_named
from tilec.tir_walk import Node, children, stmts

if TYPE_CHECKING:
    from tilec.passes.infer_layouts import Layouts

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


@dataclass(frozen=True, slots=True)
class RegisterEstimate:
    """32-bit registers per thread of the data lowering keeps in registers, by kind."""

    fragments: int
    locals: int
    gemm_operands: int  # the widest gemm's A and B fragments (two sets when loaded a step ahead)

    @property
    def total(self) -> int:
        return self.fragments + self.locals + self.gemm_operands

    @property
    def parts(self) -> str:
        return f"fragments {self.fragments} + locals {self.locals} + gemm operands {self.gemm_operands}"


def register_estimate(kernel: tir.Kernel, layouts: Layouts, target: Target) -> RegisterEstimate:
    """Registers per thread of `kernel` under `layouts` (after the pipeline plan, which
    decides which gemms load their fragments a step ahead): an estimate, as nvcc adds
    indices, addresses and temporaries and may reuse a dead tile's registers. A gemm whose
    operands `target`'s instruction reads through descriptors (wgmma) holds none of them."""
    frags = locals_ = gemm = 0
    for s in stmts(kernel.body, into_parallel=False):
        match s:
            case tir.Alloc(buffer=b) if b.scope == "fragment":
                frags += registers(layouts.buffers[b].local_size, b.dtype)
            case tir.Alloc(buffer=b) if b.scope in ("local", "var"):
                locals_ += registers(math.prod(b.const_shape), b.dtype)
            case tir.Gemm() if instruction_named(target, s.instruction).load == "descriptors":
                pass
            case tir.Gemm(c=c):
                acc = layouts.buffers[c.buffer]
                sets = 2 if s.fragments_ahead else 1  # fragments loaded a step ahead: two register sets
                along = (math.prod(p.extent for p in acc.local_parts if p.dim == d) for d in range(len(acc.shape)))
                gemm = max(gemm, sets * sum(along))
            case (
                tir.Alloc()  # shared memory
                | tir.Let()
                | tir.Store()
                | tir.Copy()
                | tir.Fill()
                | tir.Reduce()
                | tir.CumSum()
                | tir.AtomicAdd()
                | tir.For()
                | tir.While()
                | tir.Break()
                | tir.SyncThreads()
                | tir.Parallel()
                | tir.If()
                | tir.Print()
                | tir.DeviceAssert()
                | tir.UseSwizzle()
                | tir.AnnotateLayout()
            ):
                pass  # no registers that last
            case _:
                assert_never(s)
    return RegisterEstimate(frags, locals_, gemm)
