"""The compiler's passes in order, from a checked program to C++ text.

    compile_program(program, arch="sm_80", emit="cuda") -> str

Each step has one line saying why it sits where it does.
"""

from __future__ import annotations

import dataclasses
import os

from tilec import thread_ir as T
from tilec import tir
from tilec.diagnostics import error
from tilec.emit import emit_module
from tilec.lower import lower_kernel
from tilec.passes.infer_layouts import Layouts, infer_layouts
from tilec.passes.plan_pipeline import plan_pipeline
from tilec.passes.select import select
from tilec.sync import place_barriers
from tilec.targets import Target, get_target


def lower_program(program: tir.Program, arch: str) -> T.Module:
    target = get_target(arch)
    # Instructions first: every later pass reads which record each gemm runs on.
    program = select(program, target)
    kernels = []
    for kernel in program.kernels:
        kernel, layouts = _tile_passes(kernel, target)
        # Tile ops become per-thread code under those layouts and that plan.
        lowered = lower_kernel(kernel, layouts, target)
        # Barriers from those records: every op, loop and pipeline of the kernel is known by now.
        lowered = place_barriers(lowered)
        # Shared memory again, now with padding, pipeline stages and scratch.
        _check_shared_memory(kernel, lowered, target)
        kernels.append(lowered)
    source = os.path.basename(program.files[0]) if program.files else "<input>"
    helpers = tuple(sorted({h for k in kernels for h in k.helpers}))
    return T.Module(tuple(kernels), helpers, target.headers, source)


def _tile_passes(kernel: tir.Kernel, target: Target) -> tuple[tir.Kernel, Layouts]:
    """The Tile IR passes after select: `kernel` with their decisions on its nodes, and the
    buffers' layouts."""
    # Layouts next: lowering reads where every fragment element lives.
    kernel, layouts = infer_layouts(kernel, target)
    # Pipelines next: which copies run ahead, which shared tiles get one copy per stage.
    return plan_pipeline(kernel, target), layouts


def _check_shared_memory(kernel: tir.Kernel, lowered: T.Kernel, target: Target) -> None:
    if lowered.dynamic_smem <= target.smem_limit:
        return
    raise error(
        kernel.span,
        f"kernel '{kernel.name}' needs {lowered.dynamic_smem} bytes of shared memory once its pipelines are "
        f"multi-buffered; {target.arch} allows {target.smem_limit}",
        hint="use fewer num_stages, smaller tiles, or a target with more shared memory (--arch sm_90a)",
    )


def compile_program(program: tir.Program, arch: str = "sm_80", emit: str = "cuda") -> str:
    if emit == "tir":
        from tilec.tir_print import print_program

        target = get_target(arch)
        kernels = tuple(_tile_passes(k, target)[0] for k in select(program, target).kernels)
        return print_program(dataclasses.replace(program, kernels=kernels))  # with every pass's decisions
    module = lower_program(program, arch)
    if emit == "thread":
        from tilec.emit import thread_text

        return thread_text(module)
    return emit_module(module, get_target(arch))
