"""The search space: every configuration of a file's candidate sets, each analysed statically.

    param block_M = 128 in (64, 128, 256)
    param block_K = 64 in (32, 64)          -> 6 points (block_M=64 block_K=32, ...), plus the
                                               default build's if it is none of them
    analyse(point, M=N=K=8192)              -> Candidate(estimate=...) or Candidate(pruned="shared
                                               memory: 245760 bytes > 232448 on sm_90a")

A point is elaborated with the shape's dimensions fixed (`-D M=8192`) and taken through the Tile
IR passes (instruction selection, layouts, pipeline plan), which is enough for the shared memory
of its tiles, the register estimate and the work of a block; the full pipeline (lowering,
barriers) runs later on the best ones only (search.py). `prune_relative` then drops the points
that lose to another on their face: tiles that overhang the shape when others divide it, a
gemm on the CUDA cores when others get a matrix instruction.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from tilec import tir, tir_walk
from tilec.diagnostics import CompileError
from tilec.layout import warp_rows
from tilec.pipeline import Unit
from tilec.targets import Target, instruction_named
from tilec.tune import model
from tilec.tune.peaks import GPU
from tilec.tune.work import BlockWork, NotConstant, block_work

Point = tuple[tuple[str, str], ...]  # (param, value) per candidate set, as -D takes them


@dataclass(frozen=True, slots=True)
class KernelModel:
    name: str
    work: BlockWork
    resources: model.Resources
    estimate: model.Estimate


@dataclass(frozen=True, slots=True)
class Candidate:
    point: Point
    default: bool  # the default build's configuration
    pruned: str | None = None  # why it is out of the running
    kernels: tuple[KernelModel, ...] = ()

    @property
    def seconds(self) -> float:
        return sum(k.estimate.seconds for k in self.kernels)

    @property
    def label(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.point) or "(no candidate sets)"


def points(sets: Sequence[tir.CandidateSet], fixed: Mapping[str, str]) -> list[tuple[Point, bool]]:
    """Every combination of the candidate sets not fixed by -D, in source order (the first
    set varies slowest), each with whether it is the default build's; the default build's own
    configuration comes first if it is none of them."""
    free = [c for c in sets if c.param not in fixed]
    default = tuple((c.param, c.value) for c in free)
    combos = [
        tuple(zip((c.param for c in free), values)) for values in itertools.product(*(c.candidates for c in free))
    ]
    out = [(p, p == default) for p in combos]
    return out if default in combos else [(default, True), *out]


def analyse(program: tir.Program, point: Point, default: bool, arch: str, gpu: GPU) -> Candidate:
    """The static facts and the model's estimate of one point (`program`: elaborated with the
    point's values and the shape's dimensions)."""
    from tilec.budget import register_estimate
    from tilec.explain import declared_smem
    from tilec.pipeline import run_passes, tile_ir_passes

    c = Candidate(point, default)
    try:
        # each point as written: one the build would widen (pipeline._widened) builds as the point
        # of twice its threads, which a space of `threads in (128, 256)` has; modelled as written
        # it is pruned for its registers, and the space is modelled in half the passes
        units = run_passes(program, arch, tile_ir_passes(), widen=False)
    except CompileError as e:
        return replace(c, pruned=f"compile error: {e.diagnostics[0].message}")
    kernels = []
    for u in units:
        assert u.layouts is not None, "infer_layouts is a Tile IR pass"
        smem = declared_smem(u.kernel, u.layouts.without_staging())  # staging pads give way (pipeline.py)
        regs = register_estimate(u.kernel, u.layouts, u.target).total
        reason = _limits(u.kernel.name, smem, regs, u.target)
        if reason:
            return replace(c, pruned=reason)
        try:
            work = block_work(u.kernel, u.target.warp_size, functools.partial(_warp_grid, u))
        except NotConstant:
            return replace(c, pruned=f"kernel '{u.kernel.name}': an extent the shape does not fix")
        res = model.Resources(smem, regs, *_instruction(u.kernel, u.target))
        est = model.estimate(work, res, gpu, _raster(u.kernel, work.grid))
        if est.occupancy < 1:
            return replace(c, pruned=f"occupancy: one block of '{u.kernel.name}' needs more {est.limit} than an SM has")
        kernels.append(KernelModel(u.kernel.name, work, res, est))
    return replace(c, kernels=tuple(kernels))


def _limits(name: str, smem: int, regs: int, target: Target) -> str | None:
    if smem > target.smem_limit:
        return f"shared memory: kernel '{name}' needs {smem} bytes, {target.arch} allows {target.smem_limit}"
    if regs > target.max_registers:
        return f"registers: kernel '{name}' needs ~{regs} per thread, more than {target.max_registers}"
    return None


def _instruction(kernel: tir.Kernel, target: Target) -> tuple[str, int]:
    """(thread group of the biggest gemm's instruction, its operand bits); ("", 16) without a gemm."""
    gemms = [s for s in tir_walk.stmts(kernel.body) if isinstance(s, tir.Gemm)]
    if not gemms:
        return "", 16
    g = max(gemms, key=lambda s: _region_elems(s.c))
    return instruction_named(target, g.instruction).group, g.a.buffer.dtype.bits


def _warp_grid(unit: Unit, g: tir.Gemm) -> tuple[int, int] | None:
    """(warp rows, warp cols) tiling a warp-level MMA's accumulator (layout.mma_accumulator), or
    None for any other gemm (warp groups, the CUDA cores, AMD's MFMA tilings)."""
    assert unit.layouts is not None
    if unit.target.language != "cuda" or instruction_named(unit.target, g.instruction).group != "warp":
        return None
    frag = unit.layouts.buffers.get(g.c.buffer)
    if frag is None:
        return None
    rows = warp_rows(frag)
    return rows, unit.kernel.threads // unit.target.warp_size // rows


def _region_elems(r: tir.Region) -> int:
    n = 1
    for e in r.extents:
        n *= e.value if isinstance(e, tir.IntImm) else 1
    return n


def _raster(kernel: tir.Kernel, grid: tuple[int, ...]) -> model.Raster:
    """Launch order: the kernel's `use_swizzle` panels, else x fastest."""
    sw = next((s for s in tir_walk.stmts(kernel.body) if isinstance(s, tir.UseSwizzle)), None)
    if sw is None:
        return functools.partial(model.row_major, grid)
    return functools.partial(model.panels, grid, sw.panel_size, sw.order)


def prune_relative(cands: list[Candidate]) -> list[Candidate]:
    """Drop ragged tiles when some point divides the shape, and gemms on the CUDA cores when
    some point gets a matrix instruction."""
    alive = [c for c in cands if c.pruned is None]
    divides = any(_ragged(c) is None for c in alive)
    tensor = any(_simt(c) is None for c in alive)
    out = []
    for c in cands:
        if c.pruned is None and divides and _ragged(c):
            c = replace(c, pruned=f"divisibility: {_ragged(c)}")
        elif c.pruned is None and tensor and _simt(c):
            c = replace(c, pruned=f"instruction shape: {_simt(c)}")
        out.append(c)
    return out


def _ragged(c: Candidate) -> str | None:
    return next((a.ragged for k in c.kernels for a in k.work.accesses if a.ragged), None)


def _simt(c: Candidate) -> str | None:
    for k in c.kernels:
        if k.resources.instruction == "thread" and k.work.flops:
            return f"the gemm of '{k.name}' falls back to the CUDA cores (no matrix instruction fits its tiles)"
    return None
