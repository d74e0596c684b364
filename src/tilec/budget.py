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
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tilec import tir
from tilec.dtypes import DType
from tilec.targets import Target, instruction_named
from tilec.tir_walk import Node, children, loads, regions, stmt_exprs, stmts, written

if TYPE_CHECKING:
    from tilec.passes.infer_layouts import Layouts

# Registers a thread needs beside its fragments (indices, addresses, descriptors, the epilogue's
# temporaries): a 128x128 float32 accumulator (128 registers) on one warp group took 168 under
# ptxas (gemm_split_k_stages0, sm_90a).
ADDRESS_REGISTERS = 64

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
    """32-bit registers per thread of the data lowering keeps in registers, by kind, at the
    statement where the most are live."""

    fragments: int  # the fragments live there
    locals: int  # alloc_local arrays and scalars (live throughout)
    gemm_operands: int  # the A and B fragments of the gemm there, if it is one (two sets when loaded a step ahead)

    @property
    def total(self) -> int:
        return self.fragments + self.locals + self.gemm_operands

    @property
    def parts(self) -> str:
        return f"fragments {self.fragments} + locals {self.locals} + gemm operands {self.gemm_operands}"


def register_estimate(kernel: tir.Kernel, layouts: Layouts, target: Target) -> RegisterEstimate:
    """Registers per thread of `kernel` under `layouts` (after the pipeline plan, which
    decides which gemms load their fragments a step ahead): an estimate, as nvcc adds
    indices, addresses and temporaries. A fragment holds its registers from its first use to
    its last (over a whole loop when its value crosses iterations, see `_Liveness`), so two
    tiles that are never live together (attention's scores and the probabilities cast from
    them, a step later) are not counted twice. A gemm whose operands `target`'s instruction
    reads through descriptors (wgmma) holds none of them."""
    locals_ = 0
    sizes: dict[tir.Buffer, int] = {}
    for s in stmts(kernel.body, into_parallel=False):
        if isinstance(s, tir.Alloc) and s.buffer.scope == "fragment":
            sizes[s.buffer] = registers(layouts.buffers[s.buffer].local_size, s.buffer.dtype)
        elif isinstance(s, tir.Alloc) and s.buffer.scope in ("local", "var"):
            locals_ += registers(math.prod(s.buffer.const_shape), s.buffer.dtype)
    live = _Liveness(sizes)
    live.body(kernel.body)
    fragments, operands = live.peak(lambda g: _gemm_operands(g, layouts, target))
    return RegisterEstimate(fragments, locals_, operands)


def _gemm_operands(s: tir.Gemm, layouts: Layouts, target: Target) -> int:
    """Registers of a gemm's A and B fragments (per set: an accumulator row's and column's)."""
    if instruction_named(target, s.instruction).load == "descriptors":
        return 0
    acc = layouts.buffers[s.c.buffer]
    sets = 2 if s.fragments_ahead else 1  # fragments loaded a step ahead: two register sets
    along = (math.prod(p.extent for p in acc.local_parts if p.dim == d) for d in range(len(acc.shape)))
    return sets * sum(along)


class _Liveness:
    """Live ranges of fragments over the kernel's statements in program order (a loop's body
    once, a Parallel loop as one statement, both branches of an If one after the other). A
    fragment is live from its first access to its last; across a whole loop when it is used
    before the loop, or when the loop's first access of it reads it (a value carried over from
    the previous iteration) instead of overwriting it."""

    def __init__(self, sizes: dict[tir.Buffer, int]):
        self.sizes = sizes
        self.pos = 0
        self.first: dict[tir.Buffer, int] = {}
        self.last: dict[tir.Buffer, int] = {}
        self.gemms: list[tuple[int, tir.Gemm]] = []
        self.loops: list[tuple[int, int, dict[tir.Buffer, bool]]] = []  # (start, end, first access overwrites?)
        self._open: list[dict[tir.Buffer, bool]] = []

    def body(self, body: tuple[tir.Stmt, ...]) -> None:
        for s in body:
            if isinstance(s, (tir.For, tir.While)):
                start, firsts = self.pos, dict[tir.Buffer, bool]()
                self._open.append(firsts)
                self.body(s.body)
                self._open.pop()
                self.loops.append((start, self.pos, firsts))
            elif isinstance(s, tir.If):
                self.body(s.then)
                self.body(s.orelse)
            else:
                self.leaf(s)

    def leaf(self, s: tir.Stmt) -> None:
        reads, writes = _fragment_accesses(s, self.sizes)
        for b in reads | writes:
            self.first.setdefault(b, self.pos)
            self.last[b] = self.pos
            overwrites = b in writes and b not in reads and _overwrites(s, b)
            for firsts in self._open:
                firsts.setdefault(b, overwrites)
        if isinstance(s, tir.Gemm):
            self.gemms.append((self.pos, s))
        self.pos += 1

    def peak(self, operands: Callable[[tir.Gemm], int]) -> tuple[int, int]:
        """(fragment registers, gemm operand registers) at the statement where their sum is largest."""
        spans = {b: [self.first[b], self.last[b]] for b in self.first}
        for start, end, firsts in self.loops:
            for b, overwrites in firsts.items():
                if self.first[b] < start or not overwrites:
                    spans[b] = [min(spans[b][0], start), max(spans[b][1], end - 1)]
        at = [0] * (self.pos + 1)
        for b, (lo, hi) in spans.items():
            for p in range(lo, hi + 1):
                at[p] += self.sizes[b]
        ops = [0] * (self.pos + 1)
        for p, g in self.gemms:
            ops[p] = max(ops[p], operands(g))
        best = max(range(self.pos + 1), key=lambda p: (at[p] + ops[p], at[p]))
        return at[best], ops[best]


def _fragment_accesses(s: tir.Stmt, sizes: dict[tir.Buffer, int]) -> tuple[set[tir.Buffer], set[tir.Buffer]]:
    """(fragments `s` reads, fragments it writes); a Parallel loop's whole body counts."""
    inner = list(stmts(s.body)) if isinstance(s, tir.Parallel) else [s]
    reads: set[tir.Buffer] = set()
    writes: set[tir.Buffer] = set()
    for t in inner:
        written_here = set(written(t))
        for e in stmt_exprs(t):
            reads.update(x.buffer for x in loads(e))
        for r in regions(t):
            (writes if r.buffer in written_here else reads).add(r.buffer)
        writes |= written_here
        if isinstance(t, tir.Gemm) and not t.clear_accum:
            reads.add(t.c.buffer)  # accumulates into C
        if isinstance(t, tir.Reduce) and not t.clear:
            reads.add(t.dst.buffer)
    return {b for b in reads if b in sizes}, {b for b in writes if b in sizes}


def _overwrites(s: tir.Stmt, b: tir.Buffer) -> bool:
    """Whether `s` writes every element of `b` without reading it first (its old value dies)."""
    match s:
        case tir.Fill(dst=dst) | tir.Copy(dst=dst) | tir.Reduce(dst=dst) | tir.CumSum(dst=dst) | tir.Gemm(c=dst):
            return dst.buffer is b and _elements(dst.extents) >= math.prod(b.const_shape)
        case tir.Parallel(extents=extents):
            return math.prod(extents) >= math.prod(b.const_shape)
    return False


def _elements(extents: tuple[tir.Expr, ...]) -> int:
    """Elements of a region whose extents are constants (0 when one is not: not known to cover)."""
    if not all(isinstance(e, tir.IntImm) for e in extents):
        return 0
    return math.prod(e.value for e in extents if isinstance(e, tir.IntImm))
