"""`tilec explain`: what the compiler decided for each kernel, as tables.

For every kernel: the layout of every buffer, the instruction chosen for
every tile op, the pipeline plan of every `Pipelined` loop, and totals
(dynamic shared memory, an estimate of registers per thread):

    tilec explain examples/gemm.tile
  ->
    kernel gemm (gemm.tile:10): 128 threads, grid ((N + 127) / 128, (M + 127) / 128), sm_80
    Buffers
    name     scope     dtype    shape       layout                                        per thread
    C_local  fragment  float32  [128, 128]  threads [8@0 x 16@1] vec [1, 1] local [16, 8]  128 regs
    ...
    Tile ops
    where         op                                   instruction
    gemm.tile:19  gemm(A_shared, B_shared, C_local)    SIMT FMA (CUDA cores), micro-tile 16x8 per thread ...

Everything here is data and plain text (pure functions, deterministic); the
CLI renders the same `Table`s with rich on a terminal. A gemm's instruction is
the record the select pass stored on it (its `explain` name), and the target names the
other operations it mentions (Spelling.explain: the async copy, the operand load, ...); the rest is
derived from the Tile IR and the inferred layouts the way lower/ reads them
today. The kernels go through pipeline.py's passes (`run_passes`): the report
reads the Tile IR the Tile IR passes leave, and the Thread IR only for the
shared-memory total, which lowering alone knows.

`fragment_svg` draws a fragment's thread-to-element map: a grid of the tile,
each cell labelled with its owning thread(s) and register slot.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import assert_never

from tilec import layout as L
from tilec import thread_ir as T
from tilec import tir, tir_walk
from tilec.budget import RegisterEstimate, register_estimate
from tilec.dtypes import UNPACKED_OF
from tilec.instructions import Instruction, explain_name
from tilec.lower.context import backend_of
from tilec.passes.infer_layouts import Layouts, fragment_registers
from tilec.passes.pack_subbyte import logical_dim
from tilec.passes.plan_pipeline import (
    loop_refusal,
    overlap,
    pair_shared,
    producers,
    refusals,
    ring_guard,
    ring_stages,
    runs_products,
    skeleton,
)
from tilec.pipeline import Unit, run_passes, tile_ir_passes
from tilec.shared_plan import sequential_bytes, sharing_notes
from tilec.simplify import add, int_, substitute
from tilec.targets import Target, instruction_named
from tilec.tir_print import expr_text

Words = Mapping[str, str]  # Spelling.explain: the target's names of neutral operations


@dataclass(frozen=True, slots=True)
class Table:
    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    caption: str = ""  # a line under the title


@dataclass(frozen=True, slots=True)
class KernelReport:
    name: str
    heading: str
    tables: tuple[Table, ...]
    notes: tuple[str, ...]  # lines printed after the tables


# ---------------------------------------------------------------- fragment facts
#
# Explain reads a Fragment's thread parts (least significant first) and
# register parts (most significant first), each (extent, dim, stride): digit k
# of the thread id (or register slot) steps tile dimension `dim` by `stride`
# (dim None: replication).

Part = L.Part


def parts(frag: L.Fragment) -> tuple[tuple[Part, ...], tuple[Part, ...]]:
    """(thread parts, least significant first; register parts, most significant first)."""
    return frag.thread_parts, frag.local_parts


def _digits(value: int, ps: tuple[Part, ...]) -> list[int]:
    out = []
    for p in ps:
        out.append(value % p.extent)
        value //= p.extent
    return out


@functools.lru_cache(maxsize=64)
def ownership(frag: L.Fragment) -> dict[tuple[int, ...], tuple[tuple[int, ...], int]]:
    """Element index -> (threads holding it, increasing; its register slot), by evaluating the layout."""
    tparts, lparts = parts(frag)
    nthreads = math.prod(p.extent for p in tparts)
    nslots = math.prod(p.extent for p in lparts)
    held: dict[tuple[int, ...], tuple[list[int], int]] = {}
    for slot in range(nslots):
        ldig = list(reversed(_digits(slot, tuple(reversed(lparts)))))
        for tid in range(nthreads):
            index = [0] * len(frag.shape)
            for p, digit in zip((*tparts, *lparts), (*_digits(tid, tparts), *ldig)):
                if p.dim is not None:
                    index[p.dim] += digit * p.stride
            if all(i < n for i, n in zip(index, frag.shape)):
                held.setdefault(tuple(index), ([], slot))[0].append(tid)
    return {k: (tuple(sorted(t)), s) for k, (t, s) in sorted(held.items())}


def owners(frag: L.Fragment, index: tuple[int, ...]) -> tuple[tuple[int, ...], int]:
    """(threads holding element `index`, in increasing order; its register slot)."""
    return ownership(frag)[index]


def replication(frag: L.Fragment) -> int:
    return math.prod(p.extent for p in parts(frag)[0] if p.dim is None)


def vec_last(frag: L.Fragment) -> int:
    """Elements of the last dim a thread holds contiguously in consecutive registers (the vector width)."""
    local = parts(frag)[1]
    last = len(frag.shape) - 1
    return local[-1].extent if local and local[-1].dim == last and local[-1].stride == 1 else 1


def regs_along(frag: L.Fragment, dim: int) -> int:
    """Registers a thread spends along tile dimension `dim`."""
    return math.prod(p.extent for p in parts(frag)[1] if p.dim == dim)


def threads_along(frag: L.Fragment, dim: int) -> tuple[int, int]:
    """(threads splitting `dim`, thread-id stride of the lowest such digit)."""
    tparts = parts(frag)[0]
    count, stride, seen = 1, 0, 1
    for p in tparts:
        if p.dim == dim and p.extent > 1:
            stride = stride or seen
            count *= p.extent
        seen *= p.extent
    return count, stride or 1


def whole_tile_per_thread(shape: tuple[int, ...], threads: int, vec: int) -> L.Fragment:
    """Every thread holds the whole tile (how a tile op touching alloc_local runs)."""
    return L.replicated_all(shape, threads, vec)


# ---------------------------------------------------------------- instructions


def _squeezed(region: tir.Region) -> tuple[int, ...]:
    ext = tuple(e.value if isinstance(e, tir.IntImm) else 0 for e in region.extents)
    return tuple(e for e in ext if e != 1) or (1,)


def _pow2_vec(last: int, elem_bytes: int) -> int:
    v = max(1, 16 // elem_bytes)
    while v > 1 and last % v:
        v //= 2
    return v


def op_layout(kernel: tir.Kernel, layouts: Layouts, regions: list[tir.Region]) -> L.Fragment:
    """The layout a copy/fill/atomic_add tile op runs under (as lowering picks it)."""
    for r in regions:
        if r.buffer.scope == "fragment":
            return layouts.buffers[r.buffer]
    shape = _squeezed(regions[-1]) if any(e != 1 for e in _squeezed(regions[-1])) else _squeezed(regions[0])
    widest = max(r.buffer.dtype.bytes for r in regions)
    if any(r.buffer.scope in ("local", "var") for r in regions):
        return whole_tile_per_thread(shape, kernel.threads, _pow2_vec(shape[-1], widest))
    return L.default(shape, kernel.threads, widest)


def _elements_apart(regions: list[tir.Region]) -> str | None:
    """Why a tile op on a tensor whose last stride is not 1 goes element by element, or None."""
    for r in regions:
        if not tir.unit_innermost(r.buffer):
            return f"element by element (the last stride of {r.buffer.name} is not 1), bounds masks on tensor edges"
    return None


def _vector_text(frag: L.Fragment, regions: list[tir.Region]) -> str:
    memory = [r.buffer for r in regions if r.buffer.scope in ("global", "shared")]
    v = vec_last(frag)
    if not memory:
        return "register moves, element by element"
    apart = _elements_apart(regions)
    if apart is not None:
        return apart
    if v == 1:
        return "scalar ld/st (layout vec 1), bounds masks on tensor edges"
    sizes = ", ".join(dict.fromkeys(f"{v} x {b.dtype.tile_name}" for b in memory))
    nbytes = sorted({v * b.dtype.bytes for b in memory})
    width = "/".join(f"{n}-byte" for n in nbytes)
    return f"{width} vector ld/st when aligned ({sizes}), scalar tail with bounds masks"


def atomic_instruction(kernel: tir.Kernel, target: Target, layouts: Layouts, s: tir.Atomic) -> str:
    """An atomic tile op: per element (by thread 0 for a single element), or for a tile's add into
    a tensor's rows on a target with vector atomic adds (the backend's ATOMIC_ADD_LANES), a few
    lanes per instruction where aligned, per element at the edges (as lower/loops.py does)."""
    atomic = target.spelling.explain[f"atomic_{s.op}"]
    if s.op != "add" and s.dst.buffer.dtype.is_float:
        atomic = "compare-and-swap loop (atomicCAS)"
    if s.src is None:
        return f"{atomic} by thread 0"
    dst = s.dst.buffer
    width = vec_last(op_layout(kernel, layouts, [s.src]))
    last = s.dst.extents[-1]
    rows = dst.scope == "global" and tir.unit_innermost(dst) and not (isinstance(last, tir.IntImm) and last.value == 1)
    lanes = next((n for n in backend_of(target).ATOMIC_ADD_LANES.get(dst.dtype, ()) if width % n == 0), None)
    if s.op != "add" or not rows or lanes is None:
        return f"{atomic} per element"
    return f"vector atomic adds of {lanes} x {dst.dtype.tile_name} when aligned, {atomic} per element at the edges"


def spread(frag: L.Fragment) -> str:
    """How a tile op's elements are spread: per thread, over how many threads."""
    owners_ = frag.threads // replication(frag)
    rep = f", x{replication(frag)} replicas" if replication(frag) > 1 else ""
    return f"{frag.local_size} el x {owners_} threads{rep}"


@dataclass(frozen=True, slots=True)
class Roles:
    """What a kernel with warp roles does differently (read from its Thread IR): the copies its
    producer warp group issues, and the bulk-copy maps the launcher builds, by tensor."""

    producer_copies: frozenset[int]  # id() of the copies of warp-specialized loops
    maps: Mapping[str, tuple[T.TensorMap, ...]]


def _roles(kernel: tir.Kernel, lowered: T.Kernel) -> Roles | None:
    if not lowered.consumer_threads:
        return None
    loops = [s for s in _walk(kernel.body) if isinstance(s, tir.For) and s.warp_specialized]
    maps: dict[str, tuple[T.TensorMap, ...]] = {}
    for m in lowered.tensor_maps:
        maps[m.tensor] = (*maps.get(m.tensor, ()), m)
    return Roles(frozenset(id(c) for loop in loops for c in producers(loop)), maps)


def _boxes(m: T.TensorMap, count: int) -> str:
    plural = "es" if count > 1 else ""
    return f"{count} box{plural} of {m.box[0]}x{m.box[1]} ({m.swizzle}-byte swizzle, map {m.name})"


def _pointer(buf: tir.Buffer) -> str:
    """The tensor parameter whose memory a buffer is (a view's tensor), as tensor maps name it."""
    return (buf.view_of or buf).name


def _bulk_copy_text(s: tir.Copy, layouts: Layouts, roles: Roles | None, words: Words) -> str | None:
    """A producer's copy by bulk copies, or a fragment's store through the staging tile."""
    if roles is None:
        return None
    kind = f"{s.src.buffer.scope} -> {s.dst.buffer.scope}"
    if id(s) in roles.producer_copies:
        m = roles.maps[_pointer(s.src.buffer)][0]
        count = s.dst.buffer.const_shape[-1] // m.box[0]
        return f"{kind}: {words['bulk_copy']}, {_boxes(m, count)}, by the producer warp group; zeros outside"
    stores = roles.maps.get(_pointer(s.dst.buffer), ())
    if not stores or s.src.buffer.scope != "fragment":
        return None
    frag = layouts.buffers[s.src.buffer]
    count = frag.shape[-1] // stores[0].box[0]
    if L.staged_columns(frag, s.dst.buffer.dtype.bytes)[1] is not None:  # sm90.bulk_store: a block at a time
        return (
            f"{kind}: a column block at a time through the two halves of a swizzled shared staging tile "
            f"and {words['bulk_store']} ({_boxes(stores[0], count)}), which drain while the next block is "
            "written and the next tile runs; clipped to the tensor"
        )
    return (
        f"{kind}: through a swizzled shared staging tile and {words['bulk_store']} "
        f"({_boxes(stores[0], count)}), which drain while the next tile runs; clipped to the tensor"
    )


def copy_instruction(
    kernel: tir.Kernel, layouts: Layouts, s: tir.Copy, words: Words, roles: Roles | None = None
) -> str:
    bulk = _bulk_copy_text(s, layouts, roles, words)
    if bulk is not None:
        return bulk
    frag = op_layout(kernel, layouts, [s.src, s.dst])
    kind = f"{s.src.buffer.scope} -> {s.dst.buffer.scope}"
    once = "; one replica stores" if replication(frag) > 1 and s.dst.buffer.scope in ("global", "shared") else ""
    early = s.pipeline == "early"
    apart = _elements_apart([s.src, s.dst])
    if apart is not None:
        return f"{kind}: {apart}{once}"
    if s.pipeline is not None:
        width = vec_last(frag)
        dtype = s.dst.buffer.dtype
        vector = f"{words['async_copy']} {width * dtype.bytes} B ({width} x {dtype.tile_name})"
        when = "issued before the pipelined loop, which waits for it" if early else "issued ahead"
        return f"{kind}: {vector}, {when}; zero-filled scalar tail{once}"
    return f"{kind}: {_vector_text(frag, [s.src, s.dst])}{once}"


def gemm_instruction(layouts: Layouts, record: Instruction, s: tir.Gemm, words: Words) -> str:
    """The record's name, then how the block runs it (read from the accumulator's layout)."""
    frag = layouts.buffers[s.c.buffer]
    if record.group == "warp_group":  # layout: wgmma_accumulator's parts
        gn, gm = frag.thread_parts[3].extent, frag.thread_parts[4].extent
        mi, width = frag.local_parts[0].extent, frag.shape[1] // gn
        n = min(width, record.shape[1])
        name = explain_name(record, s.a.buffer.dtype, s.c.buffer.dtype, n)
        per_group = f"{mi}x{width // n} wgmma tiles" if (mi, width) != (1, n) else "one wgmma tile"
        text = f"{name}, {gm}x{gn} warp groups, {per_group} per group"
        if s.a_from_registers:
            return f"{text}, A ({s.a.buffer.name}) straight from registers, B by {words[record.load]}"
        staged = "" if s.a.buffer.scope == "shared" else f" ({s.a.buffer.name} staged in the descriptors' swizzle)"
        return f"{text}, operands by {words[record.load]}{staged}"
    name = explain_name(record, s.a.buffer.dtype, s.c.buffer.dtype)
    if record.group != "thread":
        wn, wm = frag.thread_parts[2].extent, frag.thread_parts[3].extent
        mi, ni = frag.local_parts[0].extent, frag.local_parts[1].extent
        text = f"{name}, {wm}x{wn} {words['warps']}, {mi}x{ni} {words['mma_tiles']} per {words['warp']}"
        if s.a_from_registers:
            text += f", A ({s.a.buffer.name}) straight from registers, B by {words[record.load]}"
        else:
            staged = "" if s.a.buffer.scope == "shared" else f" ({s.a.buffer.name} staged)"
            text += f", operands by {words[record.load]}{staged}"
        return text
    lm, ln = (regs_along(frag, 0), regs_along(frag, 1)) if len(frag.shape) == 2 else (1, regs_along(frag, 0))
    a_ext = _squeezed(s.a)
    k = a_ext[0] if s.transpose_a else a_ext[-1]
    text = f"{name}, micro-tile {lm}x{ln} per thread, k={k}"
    if s.a.buffer.scope == "fragment":
        text += f"; A ({s.a.buffer.name}) staged through shared memory first"
    return text


def cross_thread_plan(frag: L.Fragment, dim: int, warp_size: int) -> tuple[int, int, int]:
    """(elements per thread, shuffle lanes, warps via shared memory) of a
    reduce over `dim`, mirroring lowering's shuffle-then-shared split."""
    per_thread = regs_along(frag, dim)
    count, stride = threads_along(frag, dim)
    if count == 1:
        return per_thread, 1, 1
    inner = 1
    while inner < count and stride * inner * 2 <= warp_size:
        inner *= 2
    return per_thread, inner, count // inner


def reduce_instruction(layouts: Layouts, s: tir.Reduce, warp_size: int, words: Words) -> str:
    frag = layouts.buffers[s.src.buffer]
    per_thread, lanes, warps = cross_thread_plan(frag, s.dim, warp_size)
    parts = [f"in-thread over {per_thread}"]
    if lanes > 1:
        stride = threads_along(frag, s.dim)[1]
        parts.append(f"{words['shuffle']} over {lanes} lanes" + (f" (lane stride {stride})" if stride > 1 else ""))
    if warps > 1:
        parts.append(f"shared memory over {warps} {words['warps']}")
    return f"reduce_{s.kind}: " + ", then ".join(parts)


def parallel_instruction(layouts: Layouts, s: tir.Parallel) -> str:
    frag = s.layout
    assert frag is not None, "infer_layouts placed every Parallel loop"
    v = vec_last(frag)
    touches = any(isinstance(t, tir.Store) and t.buffer.scope in ("global", "shared") for t in tir_walk.stmts(s.body))
    loads: list[tir.Load] = []
    for t in tir_walk.stmts(s.body):
        if isinstance(t, tir.Store):
            loads += tir_walk.loads(t.value)
    touches |= any(ld.buffer.scope in ("global", "shared") for ld in loads)
    vec = f", {v}-wide vectors" if v > 1 and touches else (f", {v}-element groups" if v > 1 else "")
    return f"distributed over {frag.threads // replication(frag)} threads{vec}"


def fill_instruction(kernel: tir.Kernel, layouts: Layouts, s: tir.Fill) -> str:
    if s.dst.buffer.scope == "var":
        return "scalar assignment"
    frag = op_layout(kernel, layouts, [s.dst])
    if s.dst.buffer.scope == "fragment":
        return "register stores"
    return _vector_text(frag, [s.dst])


def instruction(
    kernel: tir.Kernel, target: Target, layouts: Layouts, s: tir.Stmt, roles: Roles | None = None
) -> str | None:
    """What lowering emits for tile op `s` today; None for a statement that is not a tile op."""
    match s:
        case tir.Copy():
            return copy_instruction(kernel, layouts, s, target.spelling.explain, roles)
        case tir.Gemm():
            return gemm_instruction(layouts, instruction_named(target, s.instruction), s, target.spelling.explain)
        case tir.Reduce():
            return reduce_instruction(layouts, s, target.warp_size, target.spelling.explain)
        case tir.Parallel():
            return parallel_instruction(layouts, s)
        case tir.Fill():
            return fill_instruction(kernel, layouts, s)
        case tir.CumSum():
            lines = math.prod(e for d, e in enumerate(_squeezed(s.src)) if d != s.dim) if len(s.src.extents) > 1 else 1
            return f"one thread per line ({lines} lines over {kernel.threads} threads), serial scan"
        case tir.Atomic():
            return atomic_instruction(kernel, target, layouts, s)
        case tir.Print():
            return "printf"
        case (
            tir.Alloc()
            | tir.Let()
            | tir.Store()
            | tir.For()
            | tir.While()
            | tir.Break()
            | tir.SyncThreads()
            | tir.If()
            | tir.DeviceAssert()
            | tir.UseSwizzle()
            | tir.AnnotateLayout()
        ):
            return None
        case _:
            assert_never(s)


def layout_of_op(kernel: tir.Kernel, layouts: Layouts, s: tir.Stmt) -> L.Fragment | None:
    """The layout a tile op's per-thread work follows (None when it has no tile layout)."""
    match s:
        case tir.Copy(src=src, dst=dst):
            return op_layout(kernel, layouts, [src, dst])
        case tir.Fill(dst=dst) if dst.buffer.scope != "var":
            return op_layout(kernel, layouts, [dst])
        case tir.Atomic(src=src) if src is not None:
            return op_layout(kernel, layouts, [src])
        case tir.Gemm(c=c):
            return layouts.buffers[c.buffer]
        case tir.Reduce(src=src):
            return layouts.buffers[src.buffer]
        case tir.Parallel():
            return s.layout
        case (
            tir.Fill()
            | tir.Atomic()
            | tir.Alloc()
            | tir.Let()
            | tir.Store()
            | tir.CumSum()
            | tir.For()
            | tir.While()
            | tir.Break()
            | tir.SyncThreads()
            | tir.If()
            | tir.Print()
            | tir.DeviceAssert()
            | tir.UseSwizzle()
            | tir.AnnotateLayout()
        ):
            return None
        case _:
            assert_never(s)


# ---------------------------------------------------------------- walking


def _walk(stmts: tuple[tir.Stmt, ...]) -> Iterator[tir.Stmt]:
    """Statements in source order, into loops and branches but not into Parallel bodies."""
    return tir_walk.stmts(stmts, into_parallel=False)


def where(s: tir.Stmt | tir.Kernel) -> str:
    return f"{os.path.basename(s.span.file.path)}:{s.span.line}"


def op_text(s: tir.Stmt) -> str:
    text = s.span.text.splitlines()[0].strip() if s.span.text else type(s).__name__
    return " ".join(text.split())


# ---------------------------------------------------------------- tables


def _dims(shape: tuple[tir.Expr, ...]) -> str:
    return "[" + ", ".join(expr_text(d) for d in shape) + "]"


def buffer_row(buf: tir.Buffer, layouts: Layouts, words: Words) -> tuple[str, ...]:
    row = _buffer_row(buf, layouts, words)
    if not buf.dtype.is_packed:
        return row
    logical = [logical_dim(buf, d, i == len(buf.shape) - 1) for i, d in enumerate(buf.shape)]
    note = f"; pairs of {UNPACKED_OF[buf.dtype].tile_name}, one a byte: the program's {_dims(tuple(logical))}"
    return (*row[:4], row[4] + note, *row[5:])


def _buffer_row(buf: tir.Buffer, layouts: Layouts, words: Words) -> tuple[str, ...]:
    head = (buf.name, buf.scope, buf.dtype.tile_name, _dims(buf.shape))
    match buf.scope:
        case "fragment":
            frag = layouts.buffers[buf]
            rep = replication(frag)
            regs = math.ceil(frag.local_size * buf.dtype.bytes / 4)
            per = f"{frag.local_size} x {buf.dtype.tile_name} = {regs} regs"
            text = frag.describe() + (" (rows first, for its row reduction)" if buf in layouts.rows_first else "")
            return head + (text, per + (f", replicated x{rep}" if rep > 1 else ""))
        case "shared":
            size = math.prod(buf.const_shape) * buf.dtype.bytes
            if buf in layouts.swizzle:
                sw = layouts.swizzle[buf].swizzle
                assert sw is not None
                aligned = f"conflict-free {words['matrices']}, aligned {words['async_copy']} rows"
                if layouts.align.get(buf, 16) > 16:  # a descriptor operand (infer_layouts)
                    aligned = f"the {words['warp_group_mma']} descriptors' swizzle"
                why = "annotated" if buf in layouts.fixed else aligned
                lay = layouts.swizzle[buf]
                blocks = f" in {lay.shape[-1]}-column blocks" if len(lay.shape) > len(buf.shape) else ""
                text = f"row-major{blocks}, {(1 << sw.bits) * 16}-byte XOR swizzle ({why})"
                return head + (text, f"{size} B shared")
            if buf in layouts.pitch:
                pitch = layouts.pitch[buf]
                size = math.prod(buf.const_shape[:-1]) * pitch * buf.dtype.bytes
                why = f"conflict-free {words['matrices']}"
                if buf in layouts.shift:
                    shift = layouts.shift[buf]
                    why = f"column 0 at element {shift}: the copy's 16-byte chunks line up with the tensor's"
                if buf in layouts.staging:
                    why = "conflict-free stores from a fragment"
                if buf in layouts.tight:
                    why += f"; not swizzled: fragments take {fragment_registers(layouts)} registers per thread"
                return head + (f"row-major, rows padded to {pitch} ({why})", f"{size} B shared")
            return head + ("row-major", f"{size} B shared")
        case "global":
            sym = [expr_text(d) for d in buf.shape if not isinstance(d, tir.IntImm)]
            note = f", symbolic {', '.join(sym)}" if sym else ""
            return head + (f"{_tensor_layout(buf)}{note}", "-")
        case "local":
            n = math.prod(buf.const_shape)
            return head + ("per-thread array", f"{n} x {buf.dtype.tile_name}")
        case "var":
            return head[:3] + ("scalar", "per-thread scalar", f"1 x {buf.dtype.tile_name}")
        case _:
            assert_never(buf.scope)


def _tensor_layout(buf: tir.Buffer) -> str:
    """How a tensor lies in memory: row-major, or the strides it was declared with (and, for a last
    stride that is not the literal 1, what that costs), or as a view of another tensor's memory."""
    if buf.view_of is not None:
        return f"a view of {buf.view_of.name}'s memory, row-major"
    if buf.strides is None:
        return "row-major, contiguous"
    text = f"strides ({', '.join(expr_text(s) for s in buf.strides)})"
    if not tir.unit_innermost(buf):
        text += "; the last stride is not 1: element by element (no vector accesses, no TMA)"
    return text


def buffers_table(kernel: tir.Kernel, layouts: Layouts, words: Words) -> Table:
    bufs = [*kernel.tensors, *kernel.views] + [s.buffer for s in _walk(kernel.body) if isinstance(s, tir.Alloc)]
    rows = tuple(buffer_row(b, layouts, words) for b in bufs)
    return Table("Buffers", ("name", "scope", "dtype", "shape", "layout", "per thread"), rows)


def ops_table(kernel: tir.Kernel, target: Target, layouts: Layouts, roles: Roles | None = None) -> Table:
    rows = []
    decided = decided_masks(kernel)
    for s in _walk(kernel.body):
        chosen = instruction(kernel, target, layouts, s, roles)
        if id(s) in decided:
            chosen = f"{chosen}; {decided[id(s)]}"
        if chosen is not None:
            frag = layout_of_op(kernel, layouts, s)
            work = spread(frag) if frag is not None else "-"
            if roles is not None and id(s) in roles.producer_copies:
                work = "1 producer thread"
            rows.append((where(s), op_text(s), chosen, work))
    return Table("Tile ops", ("where", "op", "instruction", "work"), tuple(rows))


def decided_masks(kernel: tir.Kernel) -> dict[int, str]:
    """Where decide_masks versioned a Parallel loop (an if of the loop's own line around its
    copies): which tiles each copy runs on."""
    out: dict[int, str] = {}
    for s in _walk(kernel.body):
        if not (isinstance(s, tir.If) and s.then and isinstance(s.then[0], tir.Parallel)):
            continue
        if s.then[0].span != s.span:
            continue
        out.setdefault(id(s.then[0]), f"runs on the tiles where {expr_text(s.cond)} (mask decided per tile)")
        rest = s.orelse[0] if len(s.orelse) == 1 else None
        if isinstance(rest, tir.Parallel):
            out.setdefault(id(rest), "on the other tiles, per element")
        elif not s.orelse:
            out[id(s.then[0])] += "; the other tiles need none of it"
    return out


def pipeline_tables(kernel: tir.Kernel, words: Words, overlapped: bool = False) -> list[Table]:
    """One table per Pipelined loop: which statements run ahead (the plan_pipeline pass);
    `overlapped`: the warp-role loop's consumers overlap its products (T.Kernel.overlapped_products)."""
    out = []
    for s in _walk(kernel.body):
        if isinstance(s, tir.For) and s.kind == "pipelined":
            title = f"Pipeline {where(s)}: {op_text(s)}"
            ahead_copies = producers(s)
            if s.schedule is not None and s.schedule.honoured:
                out.append(_schedule_table(title, s, s.schedule, words))
                continue
            if s.warp_specialized:
                caption = _warp_roles_caption(kernel, s, words, overlapped)
            elif s.single_buffered:
                caption = (
                    f"num_stages={s.num_stages}, one buffer per tile ({s.num_stages} are over the shared memory): "
                    "iteration k + 1's copies are loaded into registers while the rest reads the tiles of "
                    "iteration k, and stored after a second barrier, once every read of them is done"
                )
            elif ahead_copies:
                ahead = s.num_stages - 1
                issue = words["async_copy"]
                caption = (
                    f"num_stages={s.num_stages}: copies issued {ahead} iteration(s) ahead as {issue} into "
                    f"{s.num_stages} copies of their tiles; the rest runs on the tiles of iteration k"
                )
                if any(c.guard is not None for c in ahead_copies):
                    caption += (
                        "; the copies of an `if` are issued only where its condition holds for their iteration, "
                        "and only that `if` reads their tiles"
                    )
                if any(isinstance(t, tir.Gemm) and t.fragments_ahead for t in s.body):
                    caption += (
                        "; GEMM main loop: the gemm's fragments are loaded one k step ahead into a second "
                        "set of registers, and the iteration's barrier sits before its last step"
                    )
            else:
                caption = f"num_stages={s.num_stages}: plain loop"
            caption += _not_ahead(s, bool(ahead_copies))
            if s.schedule is not None:
                caption += "; " + _schedule_note(s.schedule)
            rows = tuple(
                (_stage_label(t, s, bool(ahead_copies)), where(t), op_text(t))
                for t in s.body
                if not isinstance(t, tir.Alloc)
            )
            out.append(Table(title, ("stage", "where", "statement"), rows, caption))
    return out


def _schedule_note(sched: tir.Schedule) -> str:
    """What became of a manual schedule the loop does not follow."""
    if sched.as_inferred:
        return "the manual schedule (order=, stage=) is the inferred pipeline: the code is the same"
    return "the target stages copies through registers: the manual schedule is checked, and the loop runs as inferred"


def _schedule_table(title: str, loop: tir.For, sched: tir.Schedule, words: Words) -> Table:
    """A loop lowered by its manual schedule: each statement's stage, order and the iteration it
    works on in iteration k of the emitted loop."""
    caption = (
        f"num_stages={loop.num_stages}, manual schedule (order=, stage=): iteration k of the loop runs each "
        f"statement on the iteration it works on (stage s: {max(sched.stage)} - s ahead), in the given order; "
        f"copies as {words['async_copy']} into {loop.num_stages} copies of their tiles, those of stage -1 as "
        f"far ahead as that allows; a prologue of {max(sched.ahead)} iteration(s); each iteration's wait "
        f"leaves {sched.pending} group(s) in flight"
    )
    if sched.not_warp_roles:
        caption += "; warp roles follow only the inferred schedule, so this loop runs without them"
    unit_of = {p: u for u, pos in enumerate(sched.units) for p in pos}
    rows = []
    for p, t in enumerate(loop.body):
        u = unit_of.get(p)
        if u is None:
            rows.append(("-", "-", "k (a binding)", where(t), op_text(t)))
            continue
        ahead = sched.ahead[u]
        runs = "k" if ahead == 0 else f"k + {ahead}"
        if isinstance(t, tir.Copy) and t.pipeline == "producer":
            shift = ahead % loop.num_stages
            runs += f" (into stage {f'(k + {shift})' if shift else 'k'} % {loop.num_stages})"
        group = f" (group {u})" if len(sched.units[u]) > 1 else ""
        rows.append((f"{sched.stage[u]}{group}", str(sched.order[u]), runs, where(t), op_text(t)))
    return Table(title, ("stage", "order", "works on", "where", "statement"), tuple(rows), caption)


def _warp_roles_caption(kernel: tir.Kernel, loop: tir.For, words: Words, overlapped: bool = False) -> str:
    ring = ring_stages(loop)
    levels = skeleton(kernel, loop) or []
    lines = ", ".join(str(lv.holder.span.line) for lv in levels[:-1])
    ahead = (
        f"into the loop's next run too (the producer replays the loops and ifs around it, lines {lines}; "
        "the kernel keeps its grid)"
        if lines
        else "into the next tile too"
    )
    asked = (
        f" (num_stages={loop.num_stages} keeps the consumers' iterations apart; the producer's copies "
        f"still fill the other of {ring} stages while they compute)"
        if loop.num_stages < 2
        else f" (num_stages={loop.num_stages}, deepened to {ring}: shared memory has room for them, and the "
        "copies run further ahead of the tensor cores)"
        if loop.num_stages < ring
        else ""
    )
    plan = overlap(loop) if overlapped else None
    consume = (
        f"issue iteration k's {op_text(plan.first)} before iteration k - 1's {op_text(plan.second)} and run "
        f"k's work before line {plan.late[0].span.line if plan.late else plan.second.span.line} while the latter "
        f"is in flight, the rest once it retired; the two products' tiles ride rings of their own, each "
        "stage freed once its product retired"
        if plan is not None
        else f"run the rest as written on each stage's tiles, every product's {words['warp_group_mma']}s finished "
        "before the next statement, and free the stage at the end of its iteration"
        if runs_products(loop)
        else f"run the rest, keeping one {words['warp_group_mma']} group in flight, and free a stage once the "
        "group that read it has retired"
    )
    branch = ring_guard(loop)
    guarded = f" with the guard of the `if` at line {branch.span.line}" if branch is not None else ""
    return (
        f"num_stages={loop.num_stages}, warp roles{guarded}{asked}: one thread of a producer warp group issues the "
        f"copies as {words['bulk_copy']} into a ring of {ring} stages (full and empty "
        f"{words['ring_barrier']}s with phase bits), as far ahead as free stages allow, {ahead}; the consumers "
        f"(the block's threads) {consume}; {words['move_registers']} gives the producer's registers to them"
        f"{_ring_guard_note(branch)}{_cluster_note(kernel, loop)}"
    )


def _cluster_note(kernel: tir.Kernel, loop: tir.For) -> str:
    """What a loop whose blocks run in clusters of two (plan_pipeline.cluster_pairs) does differently."""
    if loop.cluster != 2:
        return ""
    shared = ", ".join(c.dst.buffer.name for c in pair_shared(kernel, producers(loop)))
    y = kernel.block_vars[1].name
    return (
        f"; the blocks run in clusters of two on neighbouring rows ({y} = 2 * pair row + rank), which read the "
        f"same {shared}: each block loads every other box of it into both blocks' stages (TMA multicast), "
        "and a stage is free once both blocks' consumers freed it"
    )


def _ring_guard_note(branch: tir.If | None) -> str:
    """What a guarded ring (the copies of an `if`, plan_pipeline.ring_guard) does differently."""
    if branch is None:
        return ""
    return (
        f"; only the iterations where {expr_text(branch.cond)} holds take a stage: the producer fills, and the "
        "consumers wait for and free, the next one only then; both test it, so both walk the ring alike, and a "
        "run that takes none leaves the ring as it was"
    )


def _not_ahead(loop: tir.For, pipelined: bool) -> str:
    """Why a Pipelined loop, or some of its copies, do not run ahead (plan_pipeline's reasons,
    which -Wlost-pipeline reports too)."""
    if loop.num_stages < 2:
        return "" if loop.warp_specialized else " (num_stages < 2)"
    whole = loop_refusal(loop)
    if whole is not None:
        return f": {whole[0]}"
    copies = [
        f"the copy into '{c.dst.buffer.name}' (line {c.span.line}) cannot run ahead: {r.reason}"
        for c, r in refusals(loop)
    ]
    return ("; " if pipelined else ": ") + "; ".join(copies) if copies else ""


def _stage_label(t: tir.Stmt, loop: tir.For, pipelined: bool) -> str:
    """The iteration whose tiles statement `t` of a pipelined loop works on (and, for a copy
    issued after a gemm rather than at the top of the iteration, which gemm); a warp-role
    loop's copies run in the producer."""
    if not (isinstance(t, tir.Copy) and t.pipeline == "producer"):
        return "k" if pipelined else "-"
    if loop.warp_specialized and t.guard is not None:  # ahead by the iterations taken, not by k
        return f"producer if {expr_text(t.guard)} (up to {ring_stages(loop)} stages ahead)"
    if loop.warp_specialized:
        return f"producer (up to k + {ring_stages(loop)})"
    if loop.single_buffered:
        return "k + 1 (registers)"
    label = f"k + {loop.num_stages - 1}"
    if t.guard is not None:  # a copy from the top of an `if`: issued where it holds for that iteration
        later = add(loop.var, int_(loop.num_stages - 1))
        label += f" if {expr_text(substitute(t.guard, {loop.var: later}))}"
    tile = t.dst.buffer
    gemm = next((g for g in loop.body if isinstance(g, tir.Gemm) and tile in g.then_issue), None)
    if gemm is not None:
        label += f", issued after the gemm at line {gemm.span.line}"
    return label


def register_note(estimate: RegisterEstimate) -> str:
    also = "nvcc adds indices, addresses, temporaries"
    return f"~{estimate.total} registers per thread (estimate: {estimate.parts}; {also})"


def declared_smem(kernel: tir.Kernel, layouts: Layouts) -> int:
    """Bytes of the shared tiles as declared: rows padded, one copy per pipeline stage
    (lowering adds reduce/staging scratch and alignment)."""
    declared = 0
    for s in _walk(kernel.body):
        if isinstance(s, tir.Alloc) and s.buffer.scope == "shared":
            shape = s.buffer.const_shape
            declared += s.stages * math.prod(shape[:-1]) * layouts.row(s.buffer) * s.buffer.dtype.bytes
    return declared


def smem_note(kernel: tir.Kernel, layouts: Layouts, lowered: T.Kernel) -> str:
    """Dynamic shared memory, split into the tiles as declared (rows padded, one copy per
    pipeline stage) and what lowering adds (scratch, alignment), before packing by lifetime
    (shared_plan.py); and what packing made of it."""
    declared = declared_smem(kernel, layouts)
    unpacked = sequential_bytes(_views(lowered))
    extra = unpacked - declared
    what = "shared tiles (padded rows, one copy per pipeline stage)"
    tail = f" ({what} {declared} B + reduce/staging scratch and alignment {extra} B)" if extra else ""
    if lowered.dynamic_smem < unpacked:
        tail = f", packed by lifetime from {unpacked}{tail}"
    return f"dynamic shared memory: {lowered.dynamic_smem} bytes{tail}"


def sharing_lines(lowered: T.Kernel) -> tuple[str, ...]:
    """A note per pair of tiles that share bytes, with their lifetimes' source lines."""
    notes = sharing_notes(_views(lowered))
    return tuple(n for name in notes for n in notes[name])


def sync_lines(lowered: T.Kernel) -> tuple[str, ...]:
    """Per loop that synchronizes its threads: what one iteration runs (its own statements and
    tile ops, not its inner loops) - barriers (those of tile ops' own code apart: a cross-warp
    reduction's), proxy fences (sync.py places them where the async proxy may read what was
    written), waits for wgmma groups and for mbarriers."""
    out: list[str] = []

    def count(body: tuple[T.Stmt, ...], in_op: bool, n: dict[str, int]) -> None:
        for x in body:
            match x:
                case T.Barrier(kind="block" | "named"):
                    n["barrier"] += 1
                    n["in_op"] += in_op
                case T.Barrier(kind="fence_proxy_async"):
                    n["fence"] += 1
                case T.Barrier(kind="mbarrier_wait"):
                    n["mbarrier"] += 1
                case T.Call(call=T.Intrin(name=name)) if name.startswith("tilec_wgmma_wait"):
                    n["wgmma"] += 1
                case T.Scope(body=inner):
                    count(inner, True, n)
                case T.IfThen(then=then, orelse=orelse):
                    count(then + orelse, in_op, n)

    def walk(body: tuple[T.Stmt, ...], label: str | None = None) -> None:
        # label: the source line of the next loop, from the comment heading it (and its prologue)
        # or from the tile op it is lowered in
        for x in body:
            match x:
                case T.Comment(text=text) if ".tile:" in text:
                    label = f"the loop at {text.partition(': ')[0]}"
                case T.Loop(body=inner) | T.While(body=inner):
                    n = dict.fromkeys(("barrier", "in_op", "fence", "mbarrier", "wgmma"), 0)
                    count(inner, False, n)
                    if n["barrier"] or n["fence"] or n["wgmma"]:  # (a pipeline's prologue loop leaves the label)
                        var = f"the loop over {x.var.name}" if isinstance(x, T.Loop) else "a while loop"
                        out.append(f"per iteration of {label or var}: " + _sync_counts(n))
                        label = None
                    walk(inner)
                case T.Scope(comment=comment, body=inner):  # a tile op, or a braced block of the loop's
                    walk(inner, f"the loop at {comment.partition(': ')[0]}" if ".tile:" in comment else label)
                case _:
                    for inner in T.bodies(x):
                        walk(inner)

    walk(lowered.body)
    return tuple(out)


def _sync_counts(n: dict[str, int]) -> str:
    barriers = f"{n['barrier']} barrier{'s' * (n['barrier'] != 1)}"
    if n["in_op"]:
        barriers += f" ({n['in_op']} in tile ops' own code)"
    parts = [barriers]
    if n["fence"]:
        parts.append(f"{n['fence']} proxy fence{'s' * (n['fence'] != 1)}")
    if n["wgmma"]:
        parts.append(f"{n['wgmma']} wgmma wait{'s' * (n['wgmma'] != 1)}")
    if n["mbarrier"]:
        parts.append(f"{n['mbarrier']} mbarrier wait{'s' * (n['mbarrier'] != 1)}")
    return ", ".join(parts)


def _views(lowered: T.Kernel) -> list[T.SharedView]:
    return [s for s in lowered.body if isinstance(s, T.SharedView)]


def thread_level_table(kernel: tir.Kernel, target: Target) -> Table | None:
    """The kernel's thread-level operations as the target spells them: lane and warp indices,
    warp shuffles and explicit block barriers (None when it has none)."""
    words, ws = target.spelling.explain, target.warp_size
    rows: list[tuple[str, str, str]] = []
    for s in tir_walk.stmts(kernel.body):
        if isinstance(s, tir.SyncThreads):
            rows.append(
                (where(s), "sync_threads()", f"{target.spelling.barriers['block'].rstrip(';')} (block barrier)")
            )
            continue
        for e in tir_walk.stmt_exprs(s):
            for x in tir_walk.subexprs(e):
                match x:
                    case tir.Call("lane_index", ()):
                        rows.append((where(s), "lane_index()", f"tx % {ws}: the lane in its {words['warp']}"))
                    case tir.Call("warp_index", ()):
                        rows.append((where(s), "warp_index()", f"tx / {ws}: the {words['warp']} in the block"))
                    case tir.Call("shfl_xor" | "shfl_down" as f, (_, offset)):
                        call = target.spelling.intrinsics[f].split("(")[0]
                        shown = f"{f}(..., {expr_text(offset)})"
                        rows.append((where(s), shown, f"{call} among the {ws} lanes of a {words['warp']}"))
    return Table("Thread-level", ("where", "expression", "instruction"), tuple(rows)) if rows else None


def explain_kernel(u: Unit, arch: str) -> KernelReport:
    """The report on one kernel as the pipeline leaves it: its Tile IR after the Tile IR
    passes (each gemm's instruction, the layouts, the pipeline plan), its Thread IR's
    shared memory."""
    kernel, target, layouts = u.kernel, u.target, u.layouts
    assert layouts is not None and u.lowered is not None, "explain reads a unit after every pass"
    lowered = u.lowered
    roles = _roles(kernel, lowered)
    words = target.spelling.explain
    launch = _launch_text(kernel, lowered, target.warp_size, words)
    heading = f"kernel {kernel.name} ({where(kernel)}): {launch}, {arch}"
    ops = ops_table(kernel, target, layouts, roles)
    thread_level = thread_level_table(kernel, target)
    tables = [buffers_table(kernel, layouts, words), ops, *([thread_level] if thread_level else [])]
    tables += pipeline_tables(kernel, words, lowered.overlapped_products)
    if not any(t.title.startswith("Pipeline") for t in tables):
        tables.append(Table("Pipeline", (), (), "no Pipelined loops"))
    notes = (
        smem_note(kernel, layouts, lowered),
        *sharing_lines(lowered),
        *sync_lines(lowered),
        register_note(register_estimate(kernel, layouts, target)),
    )
    return KernelReport(kernel.name, heading, tuple(tables), notes + _launcher_notes(lowered, words))


def _launch_text(kernel: tir.Kernel, lowered: T.Kernel, warp_size: int, words: Words) -> str:
    """`256 threads, grid (...)` (`256 threads = 4 x wave64, ...` where the target names its warp
    width); a kernel with warp roles names its producer warp group, and a persistent one its walk
    over the tiles."""
    grid = ", ".join(expr_text(g) for g in kernel.grid)
    threads = f"{kernel.threads} threads"
    if kernel.threads_written:
        threads += (
            f" (the program says {kernel.threads_written}: its fragments do not fit one warp group's "
            "registers, so a second one shares them)"
        )
    if words["warp_width"]:
        threads += f" = {-(-kernel.threads // warp_size)} x {words['warp_width']}"
    if lowered.consumer_threads:
        threads += f" + a producer warp group ({lowered.threads} in all)"
    if lowered.cluster:
        return (
            f"{threads}, tiles ({grid}) walked in pairs of rows by clusters of {lowered.cluster} blocks, as many "
            "as run at once (persistent; each pair loads the tiles it shares once, half by each block, "
            "by TMA multicast)"
        )
    if lowered.persistent:
        return f"{threads}, tiles ({grid}) walked by at most one block per multiprocessor (persistent)"
    return f"{threads}, grid ({grid})"


def _launcher_notes(lowered: T.Kernel, words: Words) -> tuple[str, ...]:
    """What the launcher does besides launching: the tensor maps it builds, the fallback kernel,
    the shared memory it pads to keep what blocks read twice in L2."""
    if lowered.reread_bytes:
        return (
            f"each block reads {lowered.reread_bytes} bytes of global memory twice: the launcher pads its "
            "shared memory so that the resident blocks' bytes fit a quarter of the device's L2 "
            "(lower/residency.py)",
        )
    if not lowered.tensor_maps:
        return ()
    names = ", ".join(m.name for m in lowered.tensor_maps)
    notes = [f"the launcher builds the tensor maps {names} at each launch"]
    strided = [m for m in lowered.tensor_maps if m.pitches]
    if strided:
        pitches = "; ".join(f"{m.name}: {', '.join(expr_text(p) for p in m.pitches)}" for m in strided)
        notes.append(f"from the strides the tensors were declared with (pitches in elements, rows first: {pitches})")
    if lowered.fallback is not None:
        why = "a tensor's rows not 16-byte aligned" + (", or a stride not a multiple of 16 bytes" if strided else "")
        notes.append(
            f"when one cannot be built ({why}) it runs {lowered.fallback.name}: "
            f"the same kernel without bulk copies ({words['async_copy']} pipeline, no warp roles)"
        )
    return tuple(notes)


def explain_program(program: tir.Program, arch: str = "sm_80", kernel: str | None = None) -> list[KernelReport]:
    """One report per kernel (only `kernel` when given; KeyError if there is none of that name)."""
    if kernel is not None and all(k.name != kernel for k in program.kernels):
        raise KeyError(kernel)
    units = run_passes(program, arch)
    reports = [explain_kernel(u, arch) for u in units if kernel is None or u.kernel.name == kernel]
    if not program.candidate_sets:
        return reports
    table = candidates_table(program.candidate_sets)
    return [dataclasses.replace(r, tables=(*r.tables, table)) for r in reports]


def candidates_table(sets: tuple[tir.CandidateSet, ...]) -> Table:
    """The params' candidate sets (`param block_M = 128 in (64, 128, 256)`), which `tilec tune` searches."""
    rows = tuple((c.param, c.value, ", ".join(c.candidates)) for c in sets)
    points = math.prod(len(c.candidates) for c in sets)
    return Table("Candidates", ("param", "this build", "tilec tune tries"), rows, f"{points} configurations")


# ---------------------------------------------------------------- plain text


def render_table(table: Table) -> str:
    widths = [len(c) for c in table.columns]
    for row in table.rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row)]

    def line(cells: tuple[str, ...]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()

    out = [table.title] + ([table.caption] if table.caption else [])
    if table.columns:
        out += [line(table.columns), line(tuple("-" * w for w in widths))]
        out += [line(r) for r in table.rows] or ["(none)"]
    return "\n".join(out)


def render_report(report: KernelReport) -> str:
    parts = [report.heading, "=" * len(report.heading)]
    parts += [render_table(t) + "\n" for t in report.tables]
    parts.append("Totals")
    parts += [f"  {n}" for n in report.notes]
    return "\n".join(parts) + "\n"


def render_text(reports: list[KernelReport]) -> str:
    return "\n".join(render_report(r) for r in reports) if reports else "no kernels in this file\n"


# ---------------------------------------------------------------- SVG

# Tableau-like, readable with black text; warp w (or thread t) takes entry w % 10.
PALETTE = (
    "#aec7e8",
    "#ffbb78",
    "#98df8a",
    "#ff9896",
    "#c5b0d5",
    "#c49c94",
    "#f7b6d2",
    "#dbdb8d",
    "#9edae5",
    "#d9d9d9",
)


def find_fragment(program: tir.Program, buffer: str, kernel: str | None) -> tuple[tir.Kernel, tir.Buffer]:
    """The kernel and fragment named `buffer` (ValueError with a readable message otherwise)."""
    found = []
    for k in program.kernels:
        if kernel is not None and k.name != kernel:
            continue
        for s in _walk(k.body):
            if isinstance(s, tir.Alloc) and s.buffer.name == buffer:
                found.append((k, s.buffer))
    if not found:
        raise ValueError(f"no buffer '{buffer}'" + (f" in kernel '{kernel}'" if kernel else ""))
    if len({k.name for k, _ in found}) > 1:
        raise ValueError(f"'{buffer}' is in several kernels; pick one with --kernel")
    k, buf = found[0]
    if buf.scope != "fragment":
        raise ValueError(f"'{buffer}' is a {buf.scope} buffer; --svg draws fragments (register tiles)")
    return k, buf


def _esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def _thread_label(tids: tuple[int, ...]) -> str:
    if len(tids) <= 2:
        return ",".join(f"T{t}" for t in tids)
    return f"T{tids[0]},T{tids[1]},…({len(tids)})"


def drawn_region(shape: tuple[int, ...], cap: int) -> tuple[int, int]:
    """(rows, cols) drawn: the top-left block of at most cap x cap (one row of up to 2*cap for 1-D)."""
    if len(shape) == 1:
        return 1, min(shape[0], 2 * cap)
    return min(shape[-2], cap), min(shape[-1], cap)


def fragment_svg(
    kernel: tir.Kernel, buf: tir.Buffer, frag: L.Fragment, color_by: str = "warp", cap: int = 16, *, warp_size: int
) -> str:
    """SVG of `frag`'s thread-to-element map: one cell per drawn element (warps of `warp_size` threads)."""
    rank = len(frag.shape)
    rows, cols = drawn_region(frag.shape, cap)
    cw, ch, left, top = 64, 36, 44, 92
    width, height = max(left + cols * cw + 16, 640), top + rows * ch + 72
    lead = (0,) * max(rank - 2, 0)
    shape = ", ".join(map(str, frag.shape))
    title = f"{kernel.name} · {buf.name}: {buf.dtype.tile_name}[{shape}] fragment, {kernel.threads} threads"
    caption = _caption(frag.shape, rows, cols)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="monospace">',
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="white"/>',
        f'<text x="8" y="22" font-size="15" font-weight="bold">{_esc(title)}</text>',
        f'<text x="8" y="42" font-size="12">{_esc(frag.describe())}</text>',
        f'<text x="8" y="60" font-size="12">cell: owning thread(s) T, register slot r; colour by {color_by}; '
        f"{_esc(caption)}</text>",
    ]
    for j in range(cols):
        out.append(f'<text x="{left + j * cw + cw // 2}" y="{top - 8}" font-size="11" text-anchor="middle">{j}</text>')
    for i in range(rows):
        y = top + i * ch
        if rank > 1:
            out.append(f'<text x="{left - 6}" y="{y + ch // 2 + 4}" font-size="11" text-anchor="end">{i}</text>')
        for j in range(cols):
            index = lead + ((i, j) if rank > 1 else (j,))
            out.append(_cell(frag, index, left + j * cw, y, cw, ch, color_by, warp_size))
    out.append(
        f'<text x="8" y="{height - 42}" font-size="12">{_esc(caption)}; '
        f"{frag.local_size} registers per thread, replication x{replication(frag)}</text>"
    )
    out += _legend(frag, color_by, height - 30, warp_size)
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _legend(frag: L.Fragment, color_by: str, y: int, warp_size: int) -> list[str]:
    if color_by != "warp":
        return []
    out = []
    for w in range(min(math.ceil(frag.threads / warp_size), len(PALETTE))):
        x = 8 + w * 84
        out.append(
            f'<rect x="{x}" y="{y}" width="14" height="14" fill="{PALETTE[w]}" stroke="#555" stroke-width="0.5"/>'
        )
        out.append(f'<text x="{x + 18}" y="{y + 11}" font-size="11">warp {w}</text>')
    return out


def _caption(shape: tuple[int, ...], rows: int, cols: int) -> str:
    whole = "x".join(map(str, shape))
    if rows * cols == math.prod(shape):
        return f"whole tile ({whole})"
    if len(shape) == 1:
        return f"first {cols} of {whole} elements"
    return f"top-left {rows}x{cols} block of {whole}" + (" (leading indices 0)" if len(shape) > 2 else "")


def _cell(
    frag: L.Fragment, index: tuple[int, ...], x: int, y: int, w: int, h: int, color_by: str, warp_size: int
) -> str:
    tids, slot = owners(frag, index)
    key = tids[0] // warp_size if color_by == "warp" else tids[0]
    fill = PALETTE[key % len(PALETTE)]
    idx = ",".join(map(str, index))
    all_t = ",".join(map(str, tids))
    return (
        f'<g class="cell" data-index="{idx}" data-threads="{all_t}" data-slot="{slot}">'
        f"<title>[{idx}] threads {all_t} slot {slot}</title>"
        f'<rect x="{x}" y="{y}" width="{w}" height="{h}" fill="{fill}" stroke="#555" stroke-width="0.5"/>'
        f'<text x="{x + w // 2}" y="{y + 15}" font-size="11" text-anchor="middle">{_esc(_thread_label(tids))}</text>'
        f'<text x="{x + w // 2}" y="{y + 29}" font-size="10" text-anchor="middle" fill="#333">r{slot}</text>'
        "</g>"
    )


def explain_svg(program: tir.Program, buffer: str, kernel: str | None = None, color_by: str = "warp") -> str:
    k, buf = find_fragment(program, buffer, kernel)
    (u,) = run_passes(tir.Program((k,), program.files), "sm_80", tile_ir_passes())
    assert u.layouts is not None, "infer_layouts is a Tile IR pass"
    return fragment_svg(k, buf, u.layouts.buffers[buf], color_by, warp_size=u.target.warp_size)
