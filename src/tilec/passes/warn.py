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
- single-buffer: a register-staged Pipelined loop (HIP) whose tiles keep one LDS buffer each,
  num_stages of them being over the target's LDS (`plan_pipeline._single_buffered`);
- simt-gemm: a gemm on SIMT FMA although a tensor-core record of the target takes
  its types (`select.simt_refusal`);
- annotated-operand: a gemm kept off the target's descriptor instruction (wgmma, which lays
  out its operand tiles itself) only by an `annotate_layout` of an operand
  (`select.annotation_refusal`);
- register-spill: a kernel whose register estimate (budget.register_estimate)
  passes Target.max_registers;
- bank-conflict: a gemm whose matrix loads of a shared operand (warp matrix loads on CUDA, per-lane
  LDS reads on HIP) have an n-way bank conflict (n > 1) under the layout the tile got
  (mostly an `annotate_layout`): the instruction record's `load_conflicts` counts it with
  the backend's fragment tables and layout_algebra.bank_conflicts.

    A_shared = alloc_shared((128, 64), float16)
    annotate_layout(A_shared, "row_major")
    gemm(A_shared, B_shared, C_local)  ->  warning: <matrices> loads of 'A_shared' have 8-way
                                           bank conflicts under its annotated layout ... [-Wbank-conflict]
"""

from __future__ import annotations

from tilec import tir, tir_walk
from tilec.budget import register_estimate, registers
from tilec.diagnostics import Diagnostic, Note, warning
from tilec.layout_algebra import Layout, padded, row_major
from tilec.passes.infer_layouts import Layouts
from tilec.passes.plan_pipeline import Refusal, loop_refusal, producers, refusals
from tilec.passes.select import annotation_refusal, simt_refusal
from tilec.targets import Target, instruction_named

LARGEST_SHOWN = 3  # fragments a register-spill warning points at


def warnings(kernel: tir.Kernel, layouts: Layouts, target: Target) -> tuple[Diagnostic, ...]:
    """Every warning of `kernel`, in source order within each kind."""
    found = [*lost_pipelines(kernel), *single_buffers(kernel, target)]
    found += [*simt_gemms(kernel, target), *annotated_operands(kernel, target)]
    found += register_spill(kernel, layouts, target)
    found += bank_conflicts(kernel, layouts, target)
    return tuple(found)


def lost_pipelines(kernel: tir.Kernel) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    for loop in tir_walk.stmts(kernel.body, into_parallel=False):
        if isinstance(loop, tir.For) and loop.kind == "pipelined" and loop.num_stages >= 2:
            out += _lost_pipeline(loop)
    return out


def single_buffers(kernel: tir.Kernel, target: Target) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    for loop in tir_walk.stmts(kernel.body, into_parallel=False):
        if isinstance(loop, tir.For) and loop.single_buffered:
            tiles = ", ".join(f"'{c.dst.buffer.name}'" for c in producers(loop))
            message = (
                f"Pipelined loop with num_stages={loop.num_stages} keeps one LDS buffer of {tiles}: "
                f"{loop.num_stages} of them are over {target.arch}'s {target.smem_limit} bytes, so the next "
                "iteration's copies wait in registers"
            )
            hint = "smaller tiles fit more stages; the single buffer costs a second barrier per iteration"
            out.append(warning(loop.span, "single-buffer", message, hint=hint))
    return out


def _lost_pipeline(loop: tir.For) -> list[Diagnostic]:
    whole = loop_refusal(loop)
    if whole is not None and loop.schedule is not None and loop.schedule.honoured:
        return []  # a manual schedule without copies still runs by its stages
    if whole is not None:
        why, hint = whole
        message = f"Pipelined loop with num_stages={loop.num_stages} runs as a plain loop: {why}"
        return [warning(loop.span, "lost-pipeline", message, hint=hint)]
    return [_lost_copy(loop, copy, r) for copy, r in refusals(loop)]


def _lost_copy(loop: tir.For, copy: tir.Copy, r: Refusal) -> Diagnostic:
    honoured = loop.schedule is not None and loop.schedule.honoured
    plain = "" if producers(loop) or honoured else f", so the loop at line {loop.span.line} runs as a plain loop"
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


def annotated_operands(kernel: tir.Kernel, target: Target) -> list[Diagnostic]:
    stmts = list(tir_walk.stmts(kernel.body, into_parallel=False))
    annotations = {s.buffer: s for s in stmts if isinstance(s, tir.AnnotateLayout)}
    out = []
    for g in stmts:
        if not isinstance(g, tir.Gemm):
            continue
        record = annotation_refusal(g, kernel.threads, target, set(annotations))
        if record is None:
            continue
        named = list(dict.fromkeys(b for b in (g.a.buffer, g.b.buffer) if b in annotations))
        chosen = instruction_named(target, g.instruction).name
        which = " and ".join(f"'{b.name}'" for b in named)
        message = (
            f"gemm runs on {chosen}, not {record.name}: {record.name} lays out its operand tiles itself, "
            f"and {which} {'has its own layout' if len(named) == 1 else 'have their own layouts'} (annotate_layout)"
        )
        notes = tuple(Note(annotations[b].span, f"'{b.name}' is annotated here") for b in named)
        hint = f"drop the annotate_layout for {target.arch}: layout inference gives the tiles the swizzle it reads"
        out.append(warning(g.span, "annotated-operand", message, hint=hint, notes=notes))
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


def bank_conflicts(kernel: tir.Kernel, layouts: Layouts, target: Target) -> list[Diagnostic]:
    annotations = {s.buffer: s for s in tir_walk.stmts(kernel.body) if isinstance(s, tir.AnnotateLayout)}
    out = []
    for g in tir_walk.stmts(kernel.body, into_parallel=False):
        if isinstance(g, tir.Gemm):
            count = instruction_named(target, g.instruction).load_conflicts
            if count is None:
                continue
            operands = [(g.b.buffer, g.transpose_b)]
            operands = ([] if g.a_from_registers else [(g.a.buffer, not g.transpose_a)]) + operands
            for buf, k_inner in operands:
                if buf.scope != "shared" or len(buf.shape) != 2:
                    continue
                shape = (buf.const_shape[0], buf.const_shape[1])
                degree = count(shape, shared_layout(buf, layouts), buf.dtype.bytes, k_inner)
                if degree > 1:
                    out.append(_bank_conflict(g, buf, degree, annotations.get(buf), target))
    return out


def shared_layout(buf: tir.Buffer, layouts: Layouts) -> Layout:
    """The layout infer_layouts gave a shared tile: its swizzle, its padded rows, else row-major."""
    if buf in layouts.swizzle:
        return layouts.swizzle[buf]
    if buf in layouts.pitch:
        return padded(buf.const_shape, layouts.pitch[buf])
    return row_major(buf.const_shape)


def _bank_conflict(
    g: tir.Gemm, buf: tir.Buffer, degree: int, annotation: tir.AnnotateLayout | None, target: Target
) -> Diagnostic:
    loads = target.spelling.explain["matrices"]
    if annotation is not None:
        under = f"its annotated layout '{annotation.layout}'"
        hint = "drop the annotate_layout: layout inference pads or swizzles the tile's rows to avoid conflicts"
        notes: tuple[Note, ...] = (Note(annotation.span, f"'{buf.name}' is annotated '{annotation.layout}' here"),)
    else:
        under, notes = "the layout it was given", ()
        hint = "pad the tile's rows, or give it a 64-element inner dimension (which takes the 128-byte swizzle)"
    message = (
        f"{loads} loads of '{buf.name}' have {degree}-way shared-memory bank conflicts under {under} "
        f"(the worst is served in {degree} passes, not 1)"
    )
    return warning(g.span, "bank-conflict", message, hint=hint, notes=notes)
