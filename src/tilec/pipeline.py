"""The compiler's passes in order, from a checked program to C++ text.

    compile_program(program, arch="sm_80", emit="cuda", after=None, verify=None) -> str
    compile_with_warnings(...) -> Output          (the text and the warnings found on the way)

`PASSES` is the list, one line per pass with why it sits where it does; each
kernel goes through them in order, then `emit` prints the module. Every pass
runs through one hook, `_run`, which

- times it (`timing.phase(name)`; `tilec build --time` prints one row per pass),
- verifies the IR it leaves when asked: `tir_print.verify` after a Tile IR pass,
  `thread_verify.verify_kernel` after a Thread IR pass (on in the tests; in
  builds when `TILEC_VERIFY=1` is set); the elaborated Tile IR is verified
  before the first pass, and a pass that hands its IR on unchanged (an
  analysis, a check) leaves nothing new to verify,
- and stops the pipeline after the pass `after` names, whose IR is then the
  output (`tilec build k.tile --emit thread --after lower` prints the Thread IR
  as lowering leaves it, before clean-up; `--after elaborate`, the Tile IR as
  elaboration leaves it, before any pass).

Adding a pass is one line in `PASSES`: a name, the IR it leaves, a function
`Unit -> Unit`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Literal

from tilec import thread_ir as T
from tilec import tir, tir_walk
from tilec.budget import ADDRESS_REGISTERS, register_estimate
from tilec.diagnostics import CompileError, Diagnostic, Note, error
from tilec.lower import lower_kernel
from tilec.lower.cleanup import drop_unused
from tilec.lower.kernel import two_blocks_fit
from tilec.passes.decide_masks import decide_masks
from tilec.passes.fuse_clears import fuse_clears
from tilec.passes.infer_layouts import Layouts, infer_layouts
from tilec.passes.pack_subbyte import pack_subbyte
from tilec.passes.plan_pipeline import plan_pipeline
from tilec.passes.select import select_kernel
from tilec.passes.warn import warnings
from tilec.shared_plan import declared_bytes, nbytes, plan_shared, sequential_bytes
from tilec.sync import place_barriers
from tilec.targets import TARGETS, Target, get_target
from tilec.timing import phase
from tilec.uniformity import per_thread, thread_varying

IR = Literal["tir", "thread"]


@dataclass(frozen=True, slots=True)
class Unit:
    """One kernel on its way down: its Tile IR, what the analyses found so far,
    and its Thread IR once lowered."""

    kernel: tir.Kernel
    target: Target
    layouts: Layouts | None = None
    lowered: T.Kernel | None = None
    warnings: tuple[Diagnostic, ...] = ()  # collected, never raised (passes/warn.py)


@dataclass(frozen=True, slots=True)
class Output:
    """What compiling a program gives: the text `emit` asked for, and its warnings."""

    text: str
    warnings: tuple[Diagnostic, ...]


@dataclass(frozen=True, slots=True)
class Pass:
    name: str
    leaves: IR  # the IR the pass leaves: the one verified after it and printed by --emit IR --after NAME
    run: Callable[[Unit], Unit]


def _pack_subbyte(u: Unit) -> Unit:
    return replace(u, kernel=pack_subbyte(u.kernel))


def _decide_masks(u: Unit) -> Unit:
    return replace(u, kernel=decide_masks(u.kernel))


def _fuse_clears(u: Unit) -> Unit:
    return replace(u, kernel=fuse_clears(u.kernel))


def _select(u: Unit) -> Unit:
    return replace(u, kernel=select_kernel(u.kernel, u.target))


def _infer_layouts(u: Unit) -> Unit:
    kernel, layouts = infer_layouts(u.kernel, u.target)
    return replace(u, kernel=kernel, layouts=layouts)


def _plan_pipeline(u: Unit) -> Unit:
    # staging tiles as declared: their pads give way to the plan (`_unpad_staging`)
    rows = u.layouts.without_staging().row if u.layouts is not None else None
    fragments = u.layouts.buffers if u.layouts is not None else None
    return replace(u, kernel=plan_pipeline(u.kernel, u.target, rows, fragments))


def _warn(u: Unit) -> Unit:
    assert u.layouts is not None, "warn runs after infer_layouts"
    return replace(u, warnings=u.warnings + warnings(u.kernel, u.layouts, u.target))


def _lower(u: Unit) -> Unit:
    assert u.layouts is not None, "lower runs after infer_layouts"
    return replace(u, lowered=lower_kernel(u.kernel, u.layouts, u.target))


def _plan_shared(u: Unit) -> Unit:
    return replace(u, lowered=plan_shared(_lowered(u), u.target.smem_limit))


def _place_barriers(u: Unit) -> Unit:
    return replace(u, lowered=place_barriers(_lowered(u)))


def _cleanup(u: Unit) -> Unit:
    k = _lowered(u)
    return replace(u, lowered=replace(k, body=tuple(drop_unused(list(k.body)))))


def _unpad_staging(u: Unit) -> Unit:
    """The kernel lowered and packed again with its staging tiles row-major (Layouts.staging:
    padded only to spare the stores into them bank conflicts) where their pads would change more
    than those rows: put the kernel over the target's shared memory, make it pack tiles by lifetime
    where it did not, or leave a warp-role kernel one block per multiprocessor where it had two."""
    assert u.layouts is not None, "unpad_staging runs after infer_layouts"
    if not u.layouts.staging or not _pads_may_cost(u):
        return u
    plain = _plan_shared(_lower(replace(u, layouts=u.layouts.without_staging())))
    padded, unpadded, limit = _lowered(u), _lowered(plain), u.target.smem_limit
    packs = _sequential(padded) > limit >= _sequential(unpadded)
    costs = packs or padded.dynamic_smem > limit or unpadded.min_blocks > padded.min_blocks
    return plain if costs else u


def _pads_may_cost(u: Unit) -> bool:
    """Whether the pads may cost what `_unpad_staging` checks, before lowering again: the views
    without them end at most the pads' bytes and the widest view alignment earlier."""
    assert u.layouts is not None
    k, layouts = _lowered(u), u.layouts
    pads = 0
    for s in tir_walk.stmts(u.kernel.body):
        if isinstance(s, tir.Alloc) and s.buffer in layouts.staging:
            cols = s.buffer.const_shape[-1]
            pads += s.stages * declared_bytes(s.buffer) // cols * (layouts.row(s.buffer) - cols)
    least = _sequential(k) - pads - max(layouts.align.values(), default=16)
    return _sequential(k) > u.target.smem_limit or (k.min_blocks == 1 and two_blocks_fit(least, u.target))


def _sequential(k: T.Kernel) -> int:
    """The shared memory of `k`'s views one after the other (before packing by lifetime)."""
    return sequential_bytes([v for v in k.body if isinstance(v, T.SharedView)])


def _check_shared_memory(u: Unit) -> Unit:
    k, target = _lowered(u), u.target
    if k.dynamic_smem <= target.smem_limit:
        return u
    message = (
        f"kernel '{u.kernel.name}' needs {k.dynamic_smem} bytes of shared memory once its pipelines are "
        f"multi-buffered; {target.arch} allows {target.smem_limit}"
    )
    larger = [t for t in TARGETS.values() if t.language == target.language and t.smem_limit > target.smem_limit]
    hint = "use fewer num_stages or smaller tiles"
    if larger:  # the target of the most shared memory, where it has more
        most = max(larger, key=lambda t: t.smem_limit).arch
        hint = f"use fewer num_stages, smaller tiles, or a target with more shared memory (--arch {most})"
    notes = _largest_shared(u.kernel, k)
    raise CompileError([Diagnostic(u.kernel.span, message, hint, notes, limit="shared memory")])


def _largest_shared(kernel: tir.Kernel, lowered: T.Kernel) -> tuple[Note, ...]:
    """A note at each of the (at most 4) largest shared tiles of `kernel`, with the bytes its view
    spans in `lowered` (every stage, padded rows included)."""
    views = {v.name: nbytes(v) for v in lowered.body if isinstance(v, T.SharedView)}
    allocs = [s for s in tir_walk.stmts(kernel.body) if isinstance(s, tir.Alloc) and s.buffer.scope == "shared"]
    sized = [(s, views.get(s.buffer.name, declared_bytes(s.buffer) * s.stages)) for s in allocs]
    largest = sorted(sized, key=lambda item: -item[1])[:4]
    return tuple(Note(s.buffer.span, _tile_note(s, n)) for s, n in largest)


def _tile_note(s: tir.Alloc, n: int) -> str:
    stages = f" ({s.stages} pipeline stages)" if s.stages > 1 else ""
    return f"'{s.buffer.name}' takes {n} bytes{stages}"


def _lowered(u: Unit) -> T.Kernel:
    assert u.lowered is not None, "a Thread IR pass runs after lower"
    return u.lowered


PASSES: tuple[Pass, ...] = (
    # Sub-byte tiles (int4, fp4) become byte tiles first: every later pass then moves whole bytes.
    Pass("pack_subbyte", "tir", _pack_subbyte),
    # Zeros just before a gemm into the same tile become its clear_accum; a mask of 0 / -inf there
    # moves after the gemm (where decide_masks can drop it on the tiles it does not cut).
    Pass("fuse_clears", "tir", _fuse_clears),
    # Masks decided per tile before anything reads the loops: each copy is an ordinary Parallel loop.
    Pass("decide_masks", "tir", _decide_masks),
    # Instructions first: every later pass reads which record each gemm runs on.
    Pass("select", "tir", _select),
    # Layouts next: lowering reads where every fragment element lives.
    Pass("infer_layouts", "tir", _infer_layouts),
    # Pipelines next: which copies run ahead, which shared tiles get one copy per stage.
    Pass("plan_pipeline", "tir", _plan_pipeline),
    # Warnings on what the plan lost (pipelining, tensor cores, registers): every decision is made.
    Pass("warn", "tir", _warn),
    # Tile ops become per-thread code under those layouts.
    Pass("lower", "thread", _lower),
    # Shared memory by lifetime: every view is known now, scratch and staging too, and no barrier
    # is placed yet (sync orders the tiles that come to share bytes as one storage).
    Pass("plan_shared", "thread", _plan_shared),
    # Staging tiles' pads give way where they cost shared memory: every view and the plan are known.
    Pass("unpad_staging", "thread", _unpad_staging),
    # Shared memory again, now with padding, pipeline stages and scratch: before any more work
    # (sync walks a pipeline's prologue once per stage, so 40,000 stages should stop here).
    Pass("check_shared_memory", "thread", _check_shared_memory),
    # Drop the constants nothing reads (lowering names every index; nvcc warns on unused ones).
    Pass("cleanup", "thread", _cleanup),
    # Barriers from the ops' shared-memory records: every op, loop and pipeline is known by now.
    Pass("sync", "thread", _place_barriers),
)

ELABORATE = "elaborate"  # `after=ELABORATE`: the Tile IR before any pass


def pass_names() -> tuple[str, ...]:
    """What `after` may name, in pipeline order."""
    return (ELABORATE, *(p.name for p in PASSES))


# ---------------------------------------------------------------- the hook


def _run(p: Pass, u: Unit, verify: bool) -> Unit:
    with phase(p.name):
        out = p.run(u)
    if verify and _ir(p.leaves, out) is not _ir(p.leaves, u):
        with phase("verify"):
            verify_unit(p.leaves, out)
    return out


def _ir(ir: IR, u: Unit) -> tir.Kernel | T.Kernel | None:
    return u.kernel if ir == "tir" else u.lowered


def verify_unit(ir: IR, u: Unit) -> None:
    """The verifier of `ir` on what `u` holds of it (raises tir_print.VerifyError)."""
    from tilec import thread_verify, tir_print

    if ir == "tir":
        tir_print.verify(tir.Program((u.kernel,), ()))
    else:
        thread_verify.verify_kernel(_lowered(u), u.target)


def verify_by_default() -> bool:
    """Builds verify when `TILEC_VERIFY=1` (the tests set it); see docs/architecture.md."""
    return os.environ.get("TILEC_VERIFY") == "1"


def tile_ir_passes() -> tuple[Pass, ...]:
    """The passes up to lowering: those leaving Tile IR (what `tilec explain` reports on)."""
    return tuple(p for p in PASSES if p.leaves == "tir")


def _passes_until(emit: str, after: str | None) -> tuple[Pass, ...]:
    """The passes to run for `emit` stopped `after` a pass (None: the last one leaving that IR)."""
    if after is None:
        return PASSES if emit != "tir" else tile_ir_passes()
    if after not in pass_names():
        raise error(None, f"--after {after}: no such pass", hint=f"passes in order: {', '.join(pass_names())}")
    if emit == "cuda":
        raise error(None, f"--after {after} needs --emit tir or --emit thread (C++ comes after every pass)")
    stop = pass_names().index(after)
    leaves = PASSES[stop - 1].leaves if stop else "tir"
    if leaves != emit:
        raise error(None, f"--after {after}: '{after}' leaves {_IR_NAMES[leaves]}", hint=f"use --emit {leaves}")
    return PASSES[:stop]


_IR_NAMES = {"tir": "Tile IR", "thread": "Thread IR"}


# ---------------------------------------------------------------- the program


def run_passes(
    program: tir.Program, arch: str, passes: tuple[Pass, ...] = PASSES, verify: bool = False, widen: bool = True
) -> list[Unit]:
    """Each kernel through `passes`, one kernel after the other (errors in source order). A
    program with candidate sets keeps its pipelines' buffers (Target.single_buffer): where they
    are over the target's limit, the nearest fitting point of its sets is built instead. With
    `widen` false every kernel keeps the threads it wrote (`_widened`: tune's model)."""
    target = get_target(arch)
    if program.candidate_sets:
        target = replace(target, single_buffer=False)
    units = []
    for kernel in program.kernels:
        u = _through(passes, Unit(kernel, target), verify)
        wide = _widened(u, kernel, passes, verify) if widen else None
        if wide is not None:
            u, kernel = wide
        if u.lowered is not None and _has_warp_roles(u.kernel):
            # the same kernel without bulk copies, which the launcher runs for unaligned tensors
            plain = _through(passes, Unit(kernel, replace(target, bulk_copies=False)), verify)
            u = replace(u, lowered=_with_fallback(_lowered(u), _lowered(plain)))
        units.append(u)
    return units


def _through(passes: tuple[Pass, ...], u: Unit, verify: bool) -> Unit:
    if verify:
        with phase("verify"):
            verify_unit("tir", u)
    for p in passes:
        u = _run(p, u, verify)
    return u


# What a program may say about its threads that a second warp group would change: their
# indices, their lanes, data passed among them (device code of its own: tir.EXTERN calls).
_THREAD_AWARE = frozenset({"thread_index", "get_thread_binding", "lane_index", "warp_index", "shfl_xor", "shfl_down"})


def _widened(u: Unit, written: tir.Kernel, passes: tuple[Pass, ...], verify: bool) -> tuple[Unit, tir.Kernel] | None:
    """The kernel of `u` on two consumer warp groups where the program asks for one (Target.warp_group:
    `threads=128` on sm_90a) and its warp roles' fragments would not fit one group's registers beside
    their addresses (budget.ADDRESS_REGISTERS): the tile ops distribute over the threads the
    kernel has, so twice the threads hold half of each accumulator. On an H100, TileLang's
    FP8 GEMM with two accumulators (128x128 each, 128 threads) spilled 736 bytes a thread on one
    group; the flash attention example's 128-thread build took 2.80 ms against 2.26 on two groups
    (`-D threads=256`). None where the kernel keeps its threads: not warp roles, already wider,
    within the registers, or the program's result may depend on its threads (`_thread_aware`).
    Else the widened unit and the kernel as elaborated, with its threads doubled (`written` is
    the kernel before the passes). Decided once the layouts are known, so `--emit tir` shows the
    widened kernel too."""
    kernel, layouts, group = u.kernel, u.layouts, u.target.warp_group
    if layouts is None or not group or kernel.threads != group or not _has_warp_roles(kernel):
        return None
    before = register_estimate(kernel, layouts, u.target).total
    if before + ADDRESS_REGISTERS <= u.target.max_registers or _thread_aware(written):
        return None
    doubled = replace(written, threads=2 * group, threads_written=group)
    wide = _through(passes, Unit(doubled, u.target), verify)
    if wide.layouts is None or not _has_warp_roles(wide.kernel):
        return None
    after = register_estimate(wide.kernel, wide.layouts, wide.target).total
    return (wide, doubled) if after < before else None


def _thread_aware(kernel: tir.Kernel) -> bool:
    """Whether the result of `kernel` may depend on how many threads run it: it reads thread
    indices, lanes or shuffles (`_THREAD_AWARE`) or calls device code of its own; or it keeps
    per-thread state that the thread count changes: a local or var written inside a Parallel
    loop (each thread runs its share of the iterations), or an element atomic outside Parallel
    that lowering issues once per thread (its element or value per-thread, as
    ops.lower_atomic_element decides)."""
    exprs = [x for s in tir_walk.stmts(kernel.body) for x in tir_walk.stmt_exprs(s)]
    calls = {e.func for x in exprs for e in tir_walk.subexprs(x) if isinstance(e, tir.Call)}
    if calls & _THREAD_AWARE or any(f.startswith(tir.EXTERN) for f in calls):
        return True
    varying = thread_varying(kernel.body)
    for s in tir_walk.stmts(kernel.body, into_parallel=False):
        match s:
            case tir.Parallel(body=body):
                if any(b.scope in ("local", "var") for x in tir_walk.stmts(body) for b in tir_walk.written(x)):
                    return True
            case tir.Atomic(src=None, dst=dst, value=value) if value is not None:
                if any(per_thread(e, varying) for e in (*dst.starts, value)):
                    return True
    return False


def _has_warp_roles(kernel: tir.Kernel) -> bool:
    return any(isinstance(s, tir.For) and s.warp_specialized for s in tir_walk.stmts(kernel.body))


def _with_fallback(k: T.Kernel, plain: T.Kernel) -> T.Kernel:
    fallback = replace(plain, name=f"{plain.name}_fallback")
    return replace(k, fallback=fallback, helpers=tuple(sorted({*k.helpers, *plain.helpers})))


def thread_module(units: list[Unit], program: tir.Program, target: Target) -> T.Module:
    kernels = tuple(_lowered(u) for u in units)
    source = os.path.basename(program.files[0]) if program.files else "<input>"
    helpers = tuple(sorted({h for k in kernels for h in k.helpers}))
    return T.Module(kernels, helpers, target.headers, source)


def lower_program(program: tir.Program, arch: str, verify: bool = False) -> T.Module:
    """The Thread IR of every kernel after every pass."""
    return thread_module(run_passes(program, arch, verify=verify), program, get_target(arch))


def compile_program(
    program: tir.Program, arch: str = "sm_80", emit: str = "cuda", after: str | None = None, verify: bool | None = None
) -> str:
    """C++ text (emit="cuda"), or the Tile IR / Thread IR text ("tir" / "thread") as the
    pass `after` leaves it (by default the last pass leaving that IR)."""
    return compile_with_warnings(program, arch, emit, after, verify).text


def compile_with_warnings(
    program: tir.Program,
    arch: str = "sm_80",
    emit: str = "cuda",
    after: str | None = None,
    verify: bool | None = None,
    bounds: bool = False,
) -> Output:
    """`compile_program`'s text and the warnings of every kernel, in kernel order (those of the
    passes that ran: none when `after` stops before `warn`). With `bounds` (`tilec build
    --verify`), every index of the finished Thread IR is proven inside its buffer first
    (bounds_verify.py: raises CompileError, one diagnostic per index it cannot prove)."""
    passes = _passes_until(emit, after)
    units = run_passes(program, arch, passes, verify_by_default() if verify is None else verify)
    if bounds and all(u.lowered is not None for u in units):
        check_bounds(units, program, get_target(arch))
    with phase("emit"):
        text = _emit(emit, units, program, get_target(arch))
    return Output(text, tuple(w for u in units for w in u.warnings))


def check_bounds(units: list[Unit], program: tir.Program, target: Target) -> None:
    """The bounds verifier on every kernel (imports TVM: only `--verify` builds pay for it)."""
    with phase("verify bounds"):
        from tilec.bounds_verify import check_module

        check_module(thread_module(units, program, target))


def _emit(emit: str, units: list[Unit], program: tir.Program, target: Target) -> str:
    if emit == "tir":
        from tilec.tir_print import print_program

        return print_program(tir.Program(tuple(u.kernel for u in units), program.files))
    from tilec.emit import emit_module, thread_text

    module = thread_module(units, program, target)
    return thread_text(module, target) if emit == "thread" else emit_module(module, target)
