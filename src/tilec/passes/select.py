"""Select an instruction for every gemm: the first of the target's records (Target.instructions,
instructions.py) that accepts it, stored on the gemm by name.

    gemm A_s[0 : +128, 0 : +32], B_s[0 : +32, 0 : +128] -> acc[0 : +128, 0 : +128] (..., clear_accum=False)
  -> on sm_80, float16 operands, float32 accumulator:
    gemm A_s[...], B_s[...] -> acc[...] (..., clear_accum=False, instruction=mma_sync_m16n8k16)

A record accepts a gemm when it takes the operand and accumulator types on
the target's capability (A and B of one type), K is a whole number of its k
steps, the accumulator is 2-D and its layout tiles over the block's threads, and
the operands sit where its loads need them (`a_in_registers`: A may be a
register tile; `k_contiguous`: A (M, K) and B (N, K); `operands_fit`: the
record's own test, wgmma's swizzle-able whole shared tiles). The last record of
every target (SIMT FMA) accepts any gemm. Runs first: layout inference, the
pipeline plan, lowering and explain all read the choice.

The gemms of one kernel run on one thread group: when a warp-group record
(wgmma) accepts some of a kernel's tensor-core gemms but not all (flash
attention's P V, whose A is a register tile), all of them take the warp
records, whose accumulators share row statistics (layout inference's warp rows).
Likewise one tile shape: when a kernel's warp gemms take records of different M x N tiles (CDNA's
MFMA 32x32x8 for attention's output, 16x16x16 for its narrower scores), all of them take the
first record that accepts every one, so that their accumulators' rows split alike.
"""

from __future__ import annotations

import dataclasses

from tilec import tir, tir_walk
from tilec.diagnostics import CompileError, error
from tilec.dtypes import UNPACKED_OF, DType
from tilec.instructions import Instruction, explain_name, takes
from tilec.targets import Target, instruction_named


def select(program: tir.Program, target: Target) -> tir.Program:
    return dataclasses.replace(program, kernels=tuple(select_kernel(k, target) for k in program.kernels))


def select_kernel(kernel: tir.Kernel, target: Target) -> tir.Kernel:
    stmts = list(tir_walk.stmts(kernel.body))
    annotated = {s.buffer for s in stmts if isinstance(s, tir.AnnotateLayout)}
    gemms = [s for s in stmts if isinstance(s, tir.Gemm)]
    groups = {choose(g, kernel.threads, target, annotated).group for g in gemms}
    # one kernel, one thread group for its tensor-core gemms (module docstring)
    exclude = frozenset({"warp_group"}) if {"warp_group", "warp"} <= groups else frozenset()
    exclude |= _other_shapes(gemms, kernel.threads, target, annotated, exclude)

    def choice(s: tir.Stmt) -> tir.Stmt:
        if isinstance(s, tir.Gemm):
            record = choose(s, kernel.threads, target, annotated, exclude)
            if s.a.buffer.dtype.is_packed and record.operands is None:
                raise _packed_refusal(s, kernel.threads, target)
            return dataclasses.replace(s, instruction=record.name)
        return s  # no instruction to choose (a copy's asynchronous issue is the pipeline plan's)

    return tir_walk.map_kernel(kernel, choice)


def _packed_refusal(g: tir.Gemm, threads: int, target: Target) -> CompileError:
    """The error for a gemm of packed int4 / uint4 tiles (passes/pack_subbyte.py) that no tensor-core
    record takes: SIMT FMA would multiply their bytes, so there is no fallback."""
    packed = g.a.buffer.dtype
    t = UNPACKED_OF[packed].tile_name
    typed = [r for r in target.instructions if r.operands is not None and takes(r, packed, DType.int32, (99, 0))]
    usable = [r for r in typed if takes(r, packed, g.c.buffer.dtype, target.capability)]
    if not typed:
        why = f"{target.arch} has no tensor-core instruction for {t} (the CUDA targets have one)"
        hint = f"dequantize the {t} tiles to int8 or float16 in a Parallel loop first"
        return error(g.span, f"gemm of {t} operands is not supported on {target.arch}: {why}", hint=hint)
    if not usable:
        why = f"the accumulator must be int32, not {g.c.buffer.dtype.tile_name}"
    elif gemm_depth(g) % typed[-1].shape[2]:  # k steps of bytes
        why = f"K = {2 * gemm_depth(g)} is not a multiple of {2 * typed[-1].shape[2]}, its k step"
    else:
        refused = refusal(usable[-1], g, threads, target)
        why = refused[0] if refused is not None else "its operands do not fit it"
    name = explain_name(typed[-1], packed, DType.int32).split(" (")[0]
    return error(
        g.span,
        f"gemm of {t} operands runs only on {name} (no CUDA-core fallback), and {why}",
        hint="A (M, K) and B (N, K) in shared memory with transpose_B=True, K a multiple of 64, an int32 "
        "accumulator that splits over the warps",
    )


def _other_shapes(
    gemms: list[tir.Gemm], threads: int, target: Target, annotated: set[tir.Buffer], exclude: frozenset[str]
) -> frozenset[str]:
    """The names of the warp records that some of `gemms` would not take, when the records chosen
    otherwise differ in their M x N tile (one tile shape per kernel: module docstring); else none."""
    chosen = [choose(g, threads, target, annotated, exclude) for g in gemms]
    warp = [(g, r) for g, r in zip(gemms, chosen, strict=True) if r.group == "warp" and r.operands is not None]
    if len({r.shape[:2] for _, r in warp}) < 2:
        return frozenset()
    records = [r for r in target.instructions if r.group == "warp" and r.operands is not None]
    return frozenset(r.name for r in records if not all(accepts(r, g, threads, target) for g, _ in warp))


def choose(
    g: tir.Gemm,
    threads: int,
    target: Target,
    annotated: set[tir.Buffer] | None = None,
    exclude: frozenset[str] = frozenset(),
) -> Instruction:
    """The first record of `target` that accepts `g` in a block of `threads` threads, leaving out
    records of the thread groups or names in `exclude` and, for records that lay out their operand tiles
    themselves (descriptors), gemms with an operand in `annotated` (a user's layout)."""
    annotated = annotated or set()

    def allowed(r: Instruction) -> bool:
        if r.group in exclude or r.name in exclude:
            return False
        return r.load != "descriptors" or not ({g.a.buffer, g.b.buffer} & annotated)

    found = next((r for r in target.instructions if allowed(r) and accepts(r, g, threads, target)), None)
    assert found is not None, f"{target.arch}: the last instruction record must accept every gemm"
    return found


def accepts(record: Instruction, g: tir.Gemm, threads: int, target: Target) -> bool:
    return refusal(record, g, threads, target) is None


def refusal(record: Instruction, g: tir.Gemm, threads: int, target: Target) -> tuple[str, str] | None:
    """Why `record` does not take `g` in a block of `threads` threads (a clause: "K = 24 is not a
    multiple of 16, its k step") and what would let it, or None when it does."""
    a, b, c = g.a.buffer, g.b.buffer, g.c.buffer
    if record.operands is None:
        return None
    if a.dtype != b.dtype or not takes(record, a.dtype, c.dtype, target.capability):
        return f"it takes no {a.dtype.tile_name} x {b.dtype.tile_name} -> {c.dtype.tile_name}", "change the types"
    if len(c.shape) != 2:
        return f"the accumulator '{c.name}' is not 2-D", "use a 2-D accumulator"
    k, step = gemm_depth(g), record.shape[2]
    if k % step:
        return f"K = {k} is not a multiple of its k step, {step}", f"use a K tile that is a multiple of {step}"
    if not record.a_in_registers and a.scope != "shared":
        return f"A ('{a.name}') is a {a.scope} tile and it reads A from shared memory", "copy A to a shared tile"
    if record.k_contiguous and (g.transpose_a or not g.transpose_b):
        why = f"its {a.dtype.tile_name} operands must be A (M, K) and B (N, K), with transpose_B=True"
        return why, "store B as (N, K) and pass transpose_B=True, with A (M, K) and transpose_A=False"
    if record.operands_fit is not None and not record.operands_fit(g, threads):
        return "its operands are not whole shared tiles it can address", "use whole shared tiles as operands"
    m, n = c.const_shape
    if record.accumulator((m, n), threads, g.policy, None) is None:
        tile = f"{record.shape[0]}x{record.shape[1]}"
        why = f"the {m}x{n} accumulator does not split into {tile} tiles over the warps of {threads} threads"
        return why, "change the tile shape, the threads or the policy so that each warp gets whole tiles"
    return None


def simt_refusal(g: tir.Gemm, threads: int, target: Target) -> tuple[Instruction, str, str] | None:
    """For a gemm `select` sent to SIMT FMA although a tensor-core record of `target` takes its
    types: the last such record (the most general), why it refused and what would let it; None
    otherwise."""
    if instruction_named(target, g.instruction).operands is not None:
        return None
    a, c = g.a.buffer, g.c.buffer
    typed = [r for r in target.instructions if r.operands is not None and takes(r, a.dtype, c.dtype, target.capability)]
    if not typed or a.dtype != g.b.buffer.dtype:
        return None
    refused = refusal(typed[-1], g, threads, target)
    return (typed[-1], *refused) if refused is not None else None


def annotation_refusal(g: tir.Gemm, threads: int, target: Target, annotated: set[tir.Buffer]) -> Instruction | None:
    """For a gemm that `select` kept off a descriptor record (one that lays out its operand tiles
    itself, wgmma) only because an operand has a user layout (`annotated`): that record; None
    otherwise."""
    chosen = instruction_named(target, g.instruction)
    if chosen.load == "descriptors" or not ({g.a.buffer, g.b.buffer} & annotated):
        return None
    unannotated = choose(g, threads, target)
    return unannotated if unannotated.load == "descriptors" else None


def gemm_depth(g: tir.Gemm) -> int:
    """K of a gemm: A's last non-unit extent (its first when A is transposed)."""
    k_dims = [e.value for e in g.a.extents if isinstance(e, tir.IntImm) and e.value != 1]
    return (k_dims[0] if g.transpose_a else k_dims[-1]) if k_dims else 1
