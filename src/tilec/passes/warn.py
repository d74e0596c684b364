"""Warn where the plan loses performance that the program asked for or could have had.

An analysis: it reads a kernel as the Tile IR passes leave it (each gemm's
instruction, the layouts, the pipeline plan) and returns warnings
(diagnostics.WARNINGS names them), changing nothing:

    for k in Pipelined(n, num_stages=2):
        row = Idx[k]
        copy(A[row, 0], A_shared)        ->  warning: copy into 'A_shared' does not run ahead: its
                                             indices use 'row', loaded in the loop body, ... [-Wlost-pipeline]

- lost-pipeline: a global -> shared copy of a Pipelined(num_stages >= 2) loop that
  plan_pipeline leaves in its iteration (`plan_pipeline.refusals`), or a whole loop it
  cannot pipeline (`plan_pipeline.loop_refusal`);
- simt-gemm: a gemm on SIMT FMA although a tensor-core record of the target takes
  its types (`select.simt_refusal`);
- register-spill: a kernel whose register estimate (budget.register_estimate)
  passes Target.max_registers.
"""

from __future__ import annotations

from tilec import tir, tir_walk
from tilec.budget import register_estimate, registers
from tilec.diagnostics import Diagnostic, Note, warning
from tilec.passes.infer_layouts import Layouts
from tilec.passes.plan_pipeline import Refusal, loop_refusal, producers, refusals
from tilec.passes.select import simt_refusal
from tilec.targets import Target

LARGEST_SHOWN = 3  # fragments a register-spill warning points at


def warnings(kernel: tir.Kernel, layouts: Layouts, target: Target) -> tuple[Diagnostic, ...]:
    """Every warning of `kernel`, in source order within each kind."""
    found = [*lost_pipelines(kernel), *simt_gemms(kernel, target), *register_spill(kernel, layouts, target)]
    return tuple(found)


def lost_pipelines(kernel: tir.Kernel) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    for loop in tir_walk.stmts(kernel.body, into_parallel=False):
        if isinstance(loop, tir.For) and loop.kind == "pipelined" and loop.num_stages >= 2:
            out += _lost_pipeline(loop)
    return out


def _lost_pipeline(loop: tir.For) -> list[Diagnostic]:
    whole = loop_refusal(loop)
    if whole is not None:
        why, hint = whole
        message = f"Pipelined loop with num_stages={loop.num_stages} runs as a plain loop: {why}"
        return [warning(loop.span, "lost-pipeline", message, hint=hint)]
    return [_lost_copy(loop, copy, r) for copy, r in refusals(loop)]


def _lost_copy(loop: tir.For, copy: tir.Copy, r: Refusal) -> Diagnostic:
    plain = "" if producers(loop) else f", so the loop at line {loop.span.line} runs as a plain loop"
    message = f"copy into '{copy.dst.buffer.name}' does not run ahead: {r.reason}{plain}"
    notes = (Note(r.cause.span, r.cause_note),) if r.cause is not None else ()
    return warning(copy.span, "lost-pipeline", message, hint=r.hint, notes=notes)


def simt_gemms(kernel: tir.Kernel, target: Target) -> list[Diagnostic]:
    out = []
    for g in tir_walk.stmts(kernel.body, into_parallel=False):
        if isinstance(g, tir.Gemm) and (refused := simt_refusal(g, kernel.threads, target)) is not None:
            record, why, hint = refused
            types = f"{g.a.buffer.dtype.tile_name} -> {g.c.buffer.dtype.tile_name}"
            message = f"gemm runs on CUDA cores (SIMT FMA), not tensor cores: {record.name} takes {types} but {why}"
            out.append(warning(g.span, "simt-gemm", message, hint=hint))
    return out


def register_spill(kernel: tir.Kernel, layouts: Layouts, target: Target) -> list[Diagnostic]:
    estimate = register_estimate(kernel, layouts, target)
    if estimate.total <= target.max_registers:
        return []
    message = (
        f"kernel '{kernel.name}' needs ~{estimate.total} registers per thread (estimate: {estimate.parts}); "
        f"a thread has {target.max_registers} on {target.arch}, so nvcc will likely spill to local memory"
    )
    hint = "use smaller tiles or more threads per block (fewer elements per thread); `tilec explain` lists each tile"
    return [warning(kernel.span, "register-spill", message, hint=hint, notes=_largest_fragments(kernel, layouts))]


def _largest_fragments(kernel: tir.Kernel, layouts: Layouts) -> tuple[Note, ...]:
    allocs = [s for s in tir_walk.stmts(kernel.body) if isinstance(s, tir.Alloc) and s.buffer.scope == "fragment"]
    sized = [(registers(layouts.buffers[a.buffer].local_size, a.buffer.dtype), a) for a in allocs]
    sized.sort(key=lambda x: -x[0])  # stable: ties in source order
    return tuple(Note(a.span, f"'{a.buffer.name}' holds {n} registers per thread") for n, a in sized[:LARGEST_SHOWN])
