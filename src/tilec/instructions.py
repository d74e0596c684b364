"""Instructions as records: what a target's matrix instructions take, and how they run.

One record per instruction family, the same type for every target; a target
lists the records it has (`Target.instructions`, in order of preference) and
the `select` pass (passes/select.py) stores the chosen record's name on every
gemm. Layout inference, the pipeline plan, lowering and `tilec explain` read
the record through that name instead of re-deriving the choice:

    MMA_M16N8K16 (backends/cuda/instructions.py)
      name "mma_sync_m16n8k16", shape (16, 8, 16): one warp computes C[16, 8] += A[16, 16] B[16, 8]
      operands float16 -> float32, bfloat16 -> float32, each with the helper holding its call
      load "matrices" (shared -> registers), A also from registers ("pack")
      accumulator layout.mma_accumulator; fragments backends/cuda/fragments.py's mma_m16n8k16_a/b/c

The CUDA records live beside the CUDA backend (backends/cuda/instructions.py);
`simt_fma` builds the per-thread fallback every target ends its list with.
Only the standard library and tilec's layout data are imported: targets.py,
which the runtime reads on the GPU machine, holds these records.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from tilec import layout as L
from tilec import tir
from tilec.dtypes import DType
from tilec.fragment_algebra import FragmentMap
from tilec.layout_algebra import Layout

# Who executes one instruction: a single thread, a warp (Target.warp_size lanes: 32 on CUDA, a
# wave64 on CDNA), or a warp group of four warps (Hopper's wgmma).
ThreadGroup = Literal["thread", "warp", "warp_group"]

# How operands reach the instruction: each thread loads its own elements ("elements"), or the
# warp loads 8x8 matrices of 16-byte rows from shared memory together, conflict-free when the
# tile's rows are swizzled or padded ("matrices"; Spelling.explain names the target's instruction).
# Hopper's wgmma reads A and B straight from swizzled shared tiles through matrix descriptors
# ("descriptors"), with no loads into registers.
OperandLoad = Literal["elements", "matrices", "descriptors"]

# (accumulator shape, threads, GemmPolicy, warp rows of an earlier accumulator with the same M)
# -> the accumulator's layout, or None when the shape does not tile over the threads.
AccumulatorLayout = Callable[[tuple[int, int], int, str, int | None], L.Fragment | None]

# (a shared operand tile's stored shape (rows, cols), its layout, element bytes, whether K is its
# contiguous dimension) -> the worst n-way bank conflict of the record's loads of it (1: none),
# counted by layout_algebra.bank_conflicts over the record's fragment tables (passes/warn.py).
LoadConflicts = Callable[[tuple[int, int], Layout, int, bool], int]


@dataclass(frozen=True, slots=True)
class OperandTypes:
    """One operand type an instruction takes: A and B of `operand`, C of `accumulator`."""

    operand: DType
    accumulator: DType
    helper: str = ""  # the inline helper holding the instruction's call for these types
    call: str = ""  # the call lowering emits (defined in `helper`)
    since: tuple[int, int] = (0, 0)  # the first Target.capability that has these types
    explain: str = ""  # `tilec explain`'s name for these types where the record's does not fit ({c})


@dataclass(frozen=True, slots=True)
class Instruction:
    name: str  # stable: stored on tir.Gemm.instruction, printed by `--emit tir`
    shape: tuple[int, int, int]  # (m, n, k) of one instruction; k is the depth of one k step
    operands: tuple[OperandTypes, ...] | None  # None: any types (computed in the accumulator's type)
    group: ThreadGroup
    load: OperandLoad
    load_helper: str | None  # the inline helper the operand loads call
    a_in_registers: bool  # A may be a register tile (else it must be in shared memory)
    a_registers_helper: str | None  # packs an A laid out as this accumulator into operand registers
    k_contiguous: bool  # A must be (M, K) and B (N, K): the loads cannot transpose (8-bit matrix loads)
    accumulator: AccumulatorLayout
    fragments: tuple[Callable[[], FragmentMap], ...]  # A, B, C of one instruction (none for SIMT; C for wgmma)
    explain: str  # `tilec explain`'s name; {a}, {c}: operand and accumulator types
    # (gemm, block threads) -> whether its operands sit where the record's loads can read them
    operands_fit: Callable[[tir.Gemm, int], bool] | None = None
    # shared operand -> its padded row length, where the record's loads need their own padding
    # (MFMA's per-lane reads); None: infer_layouts' swizzle or padding for warp matrix loads
    operand_pitch: Callable[[tir.Buffer], int] | None = None
    # the bank conflicts of its shared-memory operand loads; None: loads that do not conflict
    # by layout (per-thread elements, descriptors)
    load_conflicts: LoadConflicts | None = None
    # (A's layout, C's layout) -> whether a register A already is the record's A operand in each
    # thread; None: the warp records' test (A laid out as an mma accumulator of C's warp rows)
    a_registers_fit: Callable[[L.Fragment, L.Fragment], bool] | None = None


def takes(record: Instruction, operand: DType, accumulator: DType, capability: tuple[int, int]) -> bool:
    """True when `record` takes A and B of `operand` into C of `accumulator` on a device of `capability`."""
    if record.operands is None:
        return True
    return any((t.operand, t.accumulator) == (operand, accumulator) and capability >= t.since for t in record.operands)


def types_entry(record: Instruction, operand: DType) -> OperandTypes:
    """The record's entry for operands of `operand` (select made sure there is one)."""
    assert record.operands is not None, f"{record.name} has no per-type calls"
    return next(t for t in record.operands if t.operand == operand)


def explain_name(record: Instruction, operand: DType, accumulator: DType, n: int = 0) -> str:
    """`tilec explain`'s name of `record` on `operand` -> `accumulator` (the types' own, if any)."""
    own = next((t.explain for t in record.operands or () if t.operand == operand and t.explain), "")
    if own:
        return own.format(c=accumulator.tile_name)
    return record.explain.format(a=operand.tile_name, c=accumulator.tile_name, n=n)


def group_threads(group: ThreadGroup, warp_size: int) -> int:
    """Threads that execute one instruction of `group` together."""
    return {"thread": 1, "warp": warp_size, "warp_group": 4 * warp_size}[group]


def _simt_accumulator(shape: tuple[int, int], threads: int, policy: str, rows: int | None) -> L.Fragment:
    return L.accumulator(shape, threads)


def simt_fma(explain: str) -> Instruction:
    """The per-thread fallback: every thread multiplies its micro-tile of C (layout.accumulator)
    with fused multiply-adds over every k, from operands in shared memory (a register A is
    staged there first). `explain` names it in the target's words."""
    return Instruction(
        name="simt_fma",
        shape=(1, 1, 1),
        operands=None,
        group="thread",
        load="elements",
        load_helper=None,
        a_in_registers=True,
        a_registers_helper=None,
        k_contiguous=False,
        accumulator=_simt_accumulator,
        fragments=(),
        explain=explain,
    )
