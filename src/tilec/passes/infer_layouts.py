"""Infer a Fragment layout for every register tile and every Parallel loop.

Three levels, as in TileLang:

- strict: a gemm accumulator gets the accumulator layout of its instruction
  (the record passes/select.py named on the gemm) and shape;
- common: layouts flow through reduce (the reduced dim becomes replication),
  fragment-to-fragment copies, and Parallel loops (a loop takes the layout of
  a fragment indexed by all its variables; every other fragment it touches
  must then be placed to match) until nothing changes;
- free: a fragment still without a layout gets the default (16-byte vectors
  along the last dim, threads on the last dim first), or, when a reduce folds it
  along its rows, threads on the rows first (layout.row_reduced: fewer shuffles),
  then propagation runs again.

Before, no layouts:

    C_local = alloc_fragment((128, 128), float32)
    m = alloc_fragment((128,), float32)
    gemm(A_s, B_s, C_local)
    reduce_max(C_local, m, dim=1)

After: C_local -> threads [8@0 x 16@1] vec [1, 1]; m -> threads [8@0 x 16] (a
row maximum is replicated over the 16 threads sharing the row).

A free 2-D fragment that a reduce folds along its rows gets threads on its rows
first (128 threads):

    x = alloc_fragment((64, 128), float32)
    copy(X[bx * 64, 0], x)
    reduce_max(x, m, dim=1)

x -> threads [2@1/4 64@0/1] regs [16@1/8 4@1/1]: two lanes a row, one shuffle
per row; the default (threads [32@1/4 4@0/1]) takes five for each of 16 rows.

A fragment that two statements want placed differently is a user error
naming both statements, with the staging-through-shared hint.

Shared tiles come next: gemm operands loaded as matrices get swizzled or
padded rows (conflict-free loads), a halo window's tile shifted columns (its
16-byte chunks aligned), and a staging tile that a fragment is copied into
padded rows where its copies then take fewer shared-memory wavefronts:

    copy(C_local, C_shared)   # C_shared [128, 256] float16: rows padded to 264,
    copy(C_shared, C[..])     # the accumulator's stores 8 wavefronts -> 1
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field, fields, replace
from typing import assert_never

from tilec import layout as L
from tilec import tir, tir_walk
from tilec.diagnostics import Diagnostic, Note
from tilec.instructions import Instruction
from tilec.layout_algebra import Layout, padded, row_major, swizzled, swizzled_blocks, wavefronts, widest_swizzle
from tilec.passes.plan_pipeline import main_loop_gemm
from tilec.simplify import const, residue
from tilec.source import NO_SPAN, Span
from tilec.targets import Target, instruction_named


@dataclass
class Layouts:
    """The layouts of buffers (a Parallel loop's layout, and whether a gemm reads A from registers,
    are on those nodes: Parallel.layout, Gemm.a_from_registers)."""

    buffers: dict[tir.Buffer, L.Fragment] = field(default_factory=dict)
    origin: dict[tir.Buffer, Span] = field(default_factory=dict)  # statement that fixed it
    pitch: dict[tir.Buffer, int] = field(default_factory=dict)  # padded row length of shared tiles
    shift: dict[tir.Buffer, int] = field(default_factory=dict)  # padded tiles whose column 0 is this far into a row
    swizzle: dict[tir.Buffer, Layout] = field(default_factory=dict)  # XOR-swizzled shared tiles (flat)
    fixed: set[tir.Buffer] = field(default_factory=set)  # shared tiles whose layout the user chose
    tight: set[tir.Buffer] = field(default_factory=set)  # padded, not swizzled, for the registers' sake
    align: dict[tir.Buffer, int] = field(default_factory=dict)  # bytes, where more than 16 (descriptor swizzles)
    staging: set[tir.Buffer] = field(default_factory=set)  # padded for a fragment copy's stores (`_place_staging`)
    rows_first: set[tir.Buffer] = field(default_factory=set)  # fragments placed by layout.row_reduced (`_free_layout`)

    def row(self, buf: tir.Buffer) -> int:
        """Elements from one row of a shared tile to the next: its pitch, or its last extent."""
        return self.pitch.get(buf, buf.const_shape[-1])

    def without_staging(self) -> Layouts:
        """A copy of these layouts with the staging tiles row-major: the pads they give up where
        the kernel would otherwise need more shared memory (pipeline.py, `unpad_staging`)."""
        copied = {f.name: copy.copy(getattr(self, f.name)) for f in fields(self)}  # lowering adds to them
        pitch = {b: p for b, p in self.pitch.items() if b not in self.staging}
        return replace(self, **{**copied, "pitch": pitch, "staging": set()})


class _Conflict(Exception):
    def __init__(self, diag: Diagnostic):
        self.diag = diag


def infer_layouts(kernel: tir.Kernel, target: Target) -> tuple[tir.Kernel, Layouts]:
    """Layouts of every fragment and shared tile of `kernel` (raises CompileError on conflict),
    and `kernel` with each Parallel loop's layout and each gemm's `a_from_registers` on the node;
    its gemms carry their instructions (passes/select.py), records of `target`."""
    from tilec.diagnostics import CompileError

    state = _State(kernel.threads, Layouts())
    stmts = list(tir_walk.stmts(kernel.body))
    gemms = [(s, instruction_named(target, s.instruction)) for s in stmts if isinstance(s, tir.Gemm)]
    warp_rows: dict[int, int] = {}  # M -> warp rows of the first warp-tiled accumulator with that M
    try:
        for s in stmts:  # strict: what the user wrote down first
            if isinstance(s, tir.AnnotateLayout):
                _annotate(s, state.out)
        for g, record in gemms:
            state.set(g.c.buffer, _gemm_layout(g, record, kernel.threads, warp_rows), g.span)
        for read, span in _scalar_reads(kernel.body):  # every thread may read any element: all of it
            state.set(read, L.replicated_all(read.const_shape, kernel.threads), span)
        while True:
            while any([state.propagate(s) for s in stmts]):
                pass
            buf = _first_unplaced(stmts, state.out.buffers)
            if buf is None:
                break
            state.set(buf, _free_layout(buf, stmts, kernel.threads, state.out), buf.span)
        for s in stmts:
            if isinstance(s, tir.Parallel) and id(s) not in state.loops:
                state.loops[id(s)] = L.default(s.extents, kernel.threads, _loop_bytes(s))
    except _Conflict as c:
        raise CompileError([c.diag]) from None
    a_registers = {id(g) for g, record in gemms if _a_from_accumulator(g, record, state.out)}
    tight = fragment_registers(state.out) > SWIZZLE_REGISTER_BUDGET
    main_loop = _main_loop_tiles(stmts, target)
    for g, record in gemms:
        if record.operand_pitch is not None:
            for operand in (g.a.buffer, g.b.buffer):
                if operand.scope == "shared" and operand not in state.out.fixed:
                    state.out.pitch[operand] = record.operand_pitch(operand)
        elif record.load == "matrices":
            for operand in (g.a.buffer, g.b.buffer):
                if operand.scope == "shared" and operand not in state.out.fixed:
                    _place_operand(operand, state.out, tight, operand in main_loop)
        elif record.load == "descriptors":  # select made sure neither is annotated, both fit
            for operand in (g.a.buffer, g.b.buffer):
                if operand.scope == "shared":  # not a register A (wgmma's register form)
                    place_descriptor_operand(operand, state.out)
    for s in stmts:
        if isinstance(s, tir.Copy):
            _align_halo_tile(s, stmts, state.out)
    for s in stmts:
        if isinstance(s, tir.Copy) and s.src.buffer.scope == "fragment" and s.dst.buffer.scope == "shared":
            _place_staging(s.dst.buffer, stmts, state.out, kernel.threads, target.warp_size)

    def decided(s: tir.Stmt) -> tir.Stmt:
        if isinstance(s, tir.Parallel):
            return replace(s, layout=state.loops[id(s)])
        if isinstance(s, tir.Gemm) and id(s) in a_registers:
            return replace(s, a_from_registers=True)
        return s

    return tir_walk.map_kernel(kernel, decided), state.out


def _main_loop_tiles(stmts: list[tir.Stmt], target: Target) -> set[tir.Buffer]:
    """The operand tiles of GEMM main loops (plan_pipeline.main_loop_gemm), loops that their
    tiles' copies limit."""
    out: set[tir.Buffer] = set()
    for s in stmts:
        gemm = main_loop_gemm(s, target) if isinstance(s, tir.For) else None
        if gemm is not None:
            out |= {gemm.a.buffer, gemm.b.buffer}
    return out


# Swizzled matrix-load addresses cost a few registers per operand tile (one per XOR pattern, where
# padding has immediate offsets). Above this many registers of fragments per thread - the
# 255-register cap less two sets of gemm operand fragments (64) - padding is chosen instead. The
# evidence is one pair (H200, same run): flash attention (244) ran 7% slower swizzled, with
# spills, the 128x256 GEMM (128) 7% faster. (Its wide tiles now stay padded anyway, as tiles
# outside a main loop; the budget still guards 64-wide tiles of register-heavy kernels.)
SWIZZLE_REGISTER_BUDGET = 191


def fragment_registers(out: Layouts) -> int:
    """Registers per thread that the kernel's fragments occupy."""
    return sum(math.ceil(f.local_size * b.dtype.bytes / 4) for b, f in out.buffers.items())


def _gemm_layout(g: tir.Gemm, record: Instruction, threads: int, warp_rows: dict[int, int]) -> L.Fragment:
    """The accumulator layout of `record` (select made sure the shape tiles). Warp-tiled
    accumulators of one kernel with the same M split their rows alike (`warp_rows`), so that
    row statistics of one feed the other (flash attention's softmax)."""
    shape = _shape2(g.c.buffer)
    frag = record.accumulator(shape, threads, g.policy, warp_rows.get(shape[0]))
    assert frag is not None, f"select chose {record.name} for a shape it does not tile"
    if record.group != "thread":
        warp_rows.setdefault(shape[0], L.warp_rows(frag))
    return frag


def _a_from_accumulator(g: tir.Gemm, record: Instruction, layouts: Layouts) -> bool:
    """True when gemm's A is a register tile whose mma-accumulator layout
    already is the A fragment of this gemm's warps (the P of P V in flash
    attention): same warp rows, every warp holding whole rows of A."""
    a = g.a.buffer
    if a.scope != "fragment" or g.transpose_a or record.a_registers_helper is None or a.dtype != g.b.buffer.dtype:
        return False
    fa, fc = layouts.buffers[a], layouts.buffers[g.c.buffer]
    if record.a_registers_fit is not None:
        return record.a_registers_fit(fa, fc)
    mma_like = len(fa.thread_parts) == 4 and fa.thread_parts[:2] == fc.thread_parts[:2]
    return (
        mma_like
        and fa.thread_parts[2].extent == 1
        and fa.thread_parts[3] == fc.thread_parts[3]
        and fa.local_parts[0] == fc.local_parts[0]
        and fa.local_parts[1].extent % 2 == 0
    )


def _annotate(a: tir.AnnotateLayout, out: Layouts) -> None:
    """A user's annotate_layout: the named shared-memory layout, or a diagnostic."""
    buf = a.buffer
    if buf in out.fixed:
        raise _Conflict(Diagnostic(a.span, f"'{buf.name}' already has an annotated layout", hint="keep one annotation"))
    out.fixed.add(buf)
    if a.layout == "padded":
        out.pitch[buf] = _conflict_free_pitch(buf)
    elif a.layout.startswith("swizzle_"):  # the checker made sure the swizzle tiles the buffer
        out.swizzle[buf] = swizzled(buf.const_shape, buf.dtype.bytes, int(a.layout.removeprefix("swizzle_")[:-1]))


def _place_operand(buf: tir.Buffer, out: Layouts, tight: bool, main_loop: bool) -> None:
    """The layout of a shared tile that a warp's matrix loads read. A 16-bit tile with 128-byte rows takes the
    128-byte XOR swizzle: every 16-byte asynchronous-copy chunk of a row lands in an aligned 128-byte line,
    where a padded row straddles two. A wider tile of a GEMM main loop (`main_loop`), whose copies
    limit it, takes the swizzle in 64-column blocks (layout_algebra.swizzled_blocks); elsewhere its
    extra XOR patterns cost more registers than the alignment saves (MLA decode: 0.90 vs 0.71 ms).
    Other tiles, and all tiles of a kernel whose fragments leave too few registers for swizzled
    addresses (`tight`), get rows padded to an odd number of 16-byte chunks. Each layout makes
    the matrix loads conflict-free."""
    shape = buf.const_shape
    layout = None
    if buf.dtype.bytes == 2 and len(shape) == 2 and shape[0] % 8 == 0:
        if shape[-1] == 64:
            layout = swizzled(shape, 2, 128)
        elif shape[-1] % 64 == 0 and main_loop:
            layout = swizzled_blocks(shape, 2, 128)
    if layout is not None and not tight:
        out.swizzle[buf] = layout
        return
    if layout is not None:
        out.tight.add(buf)
    out.pitch[buf] = _conflict_free_pitch(buf)


def place_descriptor_operand(buf: tir.Buffer, out: Layouts) -> None:
    """The layout of a shared tile a matrix descriptor or a bulk tensor copy reads: rows in the widest swizzle
    their bytes allow (128-byte rows in column blocks when wider, as `_place_operand`'s main-loop
    tiles), aligned to the swizzle's 8-row atom, since the hardware swizzles by address bits."""
    shape = buf.const_shape
    sw = widest_swizzle(shape[1] * buf.dtype.bytes)
    assert sw is not None, "select checked the tile's rows fit a swizzle"
    width = sw // buf.dtype.bytes
    layout = swizzled(shape, buf.dtype.bytes, sw) if shape[1] == width else swizzled_blocks(shape, buf.dtype.bytes, sw)
    if out.swizzle.get(buf, layout) != layout:
        raise _Conflict(
            Diagnostic(buf.span, f"'{buf.name}' is read by two gemms that need different layouts", hint="copy it")
        )
    out.swizzle[buf] = layout
    out.align[buf] = 8 * sw


def _align_halo_tile(copy: tir.Copy, stmts: list[tir.Stmt], out: Layouts) -> None:
    """Pad the rows of a shared tile that a copy fills from a tensor window whose columns are not
    16-byte aligned (a halo: `X[.., bx * 128 - 1:(bx + 1) * 128 + 1]`), so that the window's
    16-byte chunks land on 16-byte chunks of the tile: column 0 sits `shift` elements into a row
    of `pitch` elements, both chosen from the window's start modulo a chunk. The copy then moves
    whole chunks (lower/ops.py widens it to the padded row, the extra elements landing in the
    pad), instead of one element at a time. Only for a tile that every other statement addresses
    element by element (through lower/exprs.ref_of, which adds the shift): no other tile op writes
    it, and no gemm, reduce, ... reads it."""
    buf, src = copy.dst.buffer, copy.src
    if buf.scope != "shared" or src.buffer.scope != "global":
        return
    if buf in out.pitch or buf in out.swizzle or buf in out.fixed:
        return
    per_chunk = 16 // buf.dtype.bytes
    shape = buf.const_shape
    whole = all(const(st) == 0 for st in copy.dst.starts) and tuple(map(const, copy.dst.extents)) == shape
    start = residue(src.starts[-1], per_chunk)
    if not whole or start is None or const(src.extents[-1]) != shape[-1] or shape[-1] < per_chunk:
        return
    if start == 0 and shape[-1] % per_chunk == 0:
        return  # aligned already
    others = [s for s in stmts if s is not copy and buf in (r.buffer for r in tir_walk.regions(s))]
    if any(not isinstance(s, tir.Copy) or s.dst.buffer is buf for s in others):
        return
    out.shift[buf] = start
    out.pitch[buf] = -(-(start + shape[-1]) // per_chunk) * per_chunk


def _place_staging(buf: tir.Buffer, stmts: list[tir.Stmt], out: Layouts, threads: int, warp: int) -> None:
    """Pad the rows of a shared tile that a fragment copies into and that only copies touch (an
    epilogue's staging tile: `copy(C_local, C_shared)`, then `copy(C_shared, C[..])`), where the
    padding costs those copies fewer shared-memory wavefronts than row-major rows.

    A warp of a tensor-core accumulator stores at the same columns of eight rows (lane / 4); rows
    whose bytes are a multiple of 128 put all eight in the same banks, an 8-way conflict on every
    store (gemm_persistent: C_shared [128, 256] float16). Rows of an odd number of 16-byte chunks
    (`_conflict_free_pitch`) put them in eight different bank groups, and keep every chunk aligned
    for the 16-byte vectors that read the tile out. A 128-byte XOR swizzle in 64-column blocks would
    save the pad (16 bytes a row) but exists only for rows of whole 128 bytes and puts an XOR in
    both copies' addresses; padded addresses stay affine, for any row width. Each copy is counted
    by its warp 0's first access (`_copy_wavefronts`): its other accesses and warps move every
    lane's address alike, which keeps the banks' conflicts. Where the counts tie (a layout whose
    lanes walk one row: the default's, CDNA's MFMA accumulator), the tile stays row-major. The pad
    gives way where it would cost the kernel shared memory it needs (Layouts.staging)."""
    if buf in out.pitch or buf in out.swizzle or buf in out.fixed or len(buf.shape) < 2:
        return
    users = [s for s in stmts if buf in _own_buffers(s)]
    copies = [s for s in users if isinstance(s, tir.Copy)]
    if len(copies) < len(users):
        return  # an element access or another tile op: its accesses are not counted here
    pitch = _conflict_free_pitch(buf)
    plain = _copies_wavefronts(copies, buf, row_major(buf.const_shape), out, threads, warp)
    pad = _copies_wavefronts(copies, buf, padded(buf.const_shape, pitch), out, threads, warp)
    if plain is not None and pad is not None and pad < plain:
        out.pitch[buf] = pitch
        out.staging.add(buf)


def _copies_wavefronts(
    copies: list[tir.Copy], buf: tir.Buffer, layout: Layout, out: Layouts, threads: int, warp: int
) -> int | None:
    """Wavefronts of one warp's first access of `buf` in each of `copies`, laid out as `layout`
    (None when one of them is a copy lowering does not distribute as modelled here)."""
    total = 0
    for s in copies:
        frag = _copy_layout(s, out, threads)
        if frag is None:
            return None
        total += _copy_wavefronts(s, frag, buf, layout, min(threads, warp))
    return total


def _copy_layout(s: tir.Copy, out: Layouts, threads: int) -> L.Fragment | None:
    """The layout lowering distributes copy `s` by (lower/ops.py): its fragment's, else the
    default over the first region's extents without unit dimensions; None for a copy from or to
    per-thread buffers (every thread holds it all) or of extents not constant."""
    regions = (s.dst, s.src)
    frag = next((out.buffers[r.buffer] for r in regions if r.buffer.scope == "fragment"), None)
    if frag is not None:
        return frag
    if any(r.buffer.scope in ("local", "var") for r in regions):
        return None
    for r in regions:
        extents = [n for n in map(const, r.extents) if n is not None]
        if len(extents) < len(r.extents):
            return None
        shape = tuple(n for n in extents if n != 1)
        if shape:
            return L.default(shape, threads, max(r.buffer.dtype.bytes for r in regions))
    return None


def _copy_wavefronts(s: tir.Copy, frag: L.Fragment, buf: tir.Buffer, layout: Layout, lanes: int) -> int:
    """Wavefronts of the first access of `buf` by threads 0..lanes-1 in copy `s`, distributed by
    `frag`: each thread's first element (`buf`'s region taking the copy's non-unit dimensions in
    order), as wide as the elements `frag` gives a thread along a row (16 bytes at most)."""
    region = s.dst if s.dst.buffer is buf else s.src
    last = frag.local_parts[-1] if frag.local_parts else None
    vector = last.extent if last is not None and last.dim == len(frag.shape) - 1 and last.stride == 1 else 1
    width = min(vector * buf.dtype.bytes, 16)
    loop_dims = [d for d, n in enumerate(frag.shape) if n != 1]
    addresses = []
    for lane in range(lanes):
        coords = _lane_coords(frag, lane)
        moving = iter(coords[d] for d in loop_dims)
        index = [0 if const(e) == 1 else next(moving, 0) for e in region.extents]
        addresses.append(layout.apply(index) * buf.dtype.bytes)
    return wavefronts(addresses, width)


def _own_buffers(s: tir.Stmt) -> set[tir.Buffer]:
    """The buffers statement `s` itself reads or writes (not the statements of its bodies)."""
    loaded = {ld.buffer for e in tir_walk.stmt_exprs(s) for ld in tir_walk.loads(e)}
    return {r.buffer for r in tir_walk.regions(s)} | set(tir_walk.written(s)) | loaded


def _lane_coords(frag: L.Fragment, lane: int) -> list[int]:
    """The tile index that thread `lane` holds in its first register."""
    coords = [0] * len(frag.shape)
    for i, part in enumerate(frag.thread_parts):
        if part.dim is not None:
            coords[part.dim] += lane // frag.thread_stride(i) % part.extent * part.stride
    return coords


def _conflict_free_pitch(buf: tir.Buffer) -> int:
    """Row length padded so that a matrix load's eight 16-byte rows fall in
    distinct bank groups: an odd number of 16-byte chunks per row."""
    row = buf.const_shape[-1]
    per_chunk = 16 // buf.dtype.bytes
    chunks = -(-row // per_chunk)
    return (chunks + (chunks % 2 == 0)) * per_chunk


def _shape2(buf: tir.Buffer) -> tuple[int, int]:
    shape = buf.const_shape
    return (shape[0], shape[1]) if len(shape) == 2 else (1, shape[0])


REPLICATED_MOST = 256  # elements of a fragment every thread may hold whole (a mask, a small table)


def _scalar_reads(body: tuple[tir.Stmt, ...]) -> list[tuple[tir.Buffer, Span]]:
    """The fragments that code outside Parallel loops reads an element of (TileLang's 1-D block
    mask, `if block_mask[k] != 0:` in the loop over key tiles), each once, where first read: those
    of at most REPLICATED_MOST elements that only copies and fills write and nothing else places (a
    Parallel loop, a reduction, a gemm, a scan). Others keep lowering's located error."""
    out: dict[tir.Buffer, Span] = {}
    placed: set[tir.Buffer] = set()
    for s in tir_walk.stmts(body):
        match s:
            case tir.Parallel():
                placed |= {buf for buf, _, _ in fragment_accesses(s)}
            case tir.Reduce() | tir.CumSum() | tir.Gemm() | tir.Atomic():
                placed |= {r.buffer for r in tir_walk.regions(s)}
            case tir.Copy(src=src) if src.buffer.scope == "fragment":
                placed.add(src.buffer)
    for s in tir_walk.stmts(body, into_parallel=False):
        if isinstance(s, tir.Parallel):
            continue
        for e in tir_walk.stmt_exprs(s):
            for ld in tir_walk.loads(e):
                buf = ld.buffer
                small = buf.scope == "fragment" and math.prod(buf.const_shape) <= REPLICATED_MOST
                if small and buf not in placed and buf not in out:
                    out[buf] = ld.span if ld.span != NO_SPAN else s.span
    return list(out.items())


def _free_layout(buf: tir.Buffer, stmts: list[tir.Stmt], threads: int, out: Layouts) -> L.Fragment:
    """The free choice for fragment `buf`: threads on the rows first (layout.row_reduced, recorded
    in `out.rows_first` where it differs from the default) for a 2-D tile that a reduce folds
    along its rows, so that each row takes fewer shuffles; else the default. Only the reduce's own
    source: a fragment sharing its layout through a Parallel loop, placed first, keeps the
    default, and the source follows it. The default stays, too, for a tile also reduced along its
    columns (rows first would replicate that reduce's result in every row's lanes), one moved to
    or from shared rows (`_meets_shared_rows`), and one whose Parallel loops would then hold more
    registers (`_loop_registers`: a column vector `w[j]` beside `x[i, j]`, half of it in each
    lane of a row's pair)."""
    shape, elem_bytes = buf.const_shape, _vector_bytes(stmts, buf)
    frag = L.default(shape, threads, elem_bytes)
    dims = {s.dim for s in stmts if isinstance(s, tir.Reduce) and s.src.buffer is buf}
    if len(shape) != 2 or dims != {1} or _meets_shared_rows(buf, stmts):  # a column reduce wants the default
        return frag
    rows = L.row_reduced((shape[0], shape[1]), threads, elem_bytes)
    if rows == frag or _loop_registers(buf, rows, stmts) > _loop_registers(buf, frag, stmts):
        return frag
    out.rows_first.add(buf)
    return rows


def _loop_registers(buf: tir.Buffer, frag: L.Fragment, stmts: list[tir.Stmt]) -> int:
    """Registers a thread holds of `buf` laid out as `frag` and of the other fragments that
    Parallel loops over all of `buf` index, each then placed as `frag` projected on its dims."""
    held = {buf: frag}
    for s in stmts:
        if isinstance(s, tir.Parallel):
            dims = [(b, _var_dims(s, idx)) for b, idx, _ in fragment_accesses(s)]
            if (buf, tuple(range(len(s.vars)))) in dims:
                held |= {b: L.projected(frag, d) for b, d in dims if d is not None and b not in held}
    return sum(math.ceil(f.local_size * b.dtype.bytes / 4) for b, f in held.items())


def _meets_shared_rows(buf: tir.Buffer, stmts: list[tir.Stmt]) -> bool:
    """True when a copy or a Parallel loop moves `buf` to or from a shared tile of rows. The
    default's lanes walk a row there; lanes on the rows first would put a warp's rows in the same
    banks (rows of whole 128 bytes: topk's layout, 16 rows a warp, 4x the wavefronts)."""
    for s in stmts:
        if isinstance(s, tir.Copy | tir.Parallel):
            touched = tir_walk.buffers(s)
            if buf in touched and any(b.scope == "shared" and len(b.shape) > 1 for b in touched):
                return True
    return False


def _first_unplaced(stmts: list[tir.Stmt], placed: dict[tir.Buffer, L.Fragment]) -> tir.Buffer | None:
    for s in stmts:
        if isinstance(s, tir.Alloc) and s.buffer.scope == "fragment" and s.buffer not in placed:
            return s.buffer
    return None


def fragment_accesses(loop: tir.Parallel) -> list[tuple[tir.Buffer, tuple[tir.Expr, ...], Span]]:
    """Every (fragment, indices, span) read or written in a Parallel body."""
    out: list[tuple[tir.Buffer, tuple[tir.Expr, ...], Span]] = []

    def expr(e: tir.Expr) -> None:
        out.extend((x.buffer, x.indices, x.span) for x in tir_walk.loads(e) if x.buffer.scope == "fragment")

    for s in tir_walk.stmts(loop.body, into_parallel=False):
        match s:
            case tir.Store(buf, idx, value):
                if buf.scope == "fragment":
                    out.append((buf, idx, s.span))
                for i in idx:
                    expr(i)
                expr(value)
            case tir.Let(_, value):
                expr(value)
            case tir.If(cond=cond) | tir.DeviceAssert(cond=cond):
                expr(cond)
            case tir.Print(value=value) if not isinstance(value, tir.Region):
                expr(value)
            case tir.Atomic(dst=dst, value=value) if value is not None:
                expr(value)
                for i in dst.starts:
                    expr(i)
            case (
                tir.For()  # its bounds are uniform over the loop; its body follows
                | tir.While()  # its condition reads no tile (uniformity.py); its body follows
                | tir.Break()
                | tir.SyncThreads()
                | tir.Print()
                | tir.Atomic()
                | tir.Alloc()
                | tir.Copy()
                | tir.Gemm()
                | tir.Fill()
                | tir.Reduce()
                | tir.CumSum()
                | tir.Parallel()
                | tir.UseSwizzle()
                | tir.AnnotateLayout()
            ):
                pass  # no fragment element of its own (tile ops here are lowering's error)
            case _:
                assert_never(s)
    return out


def _vector_bytes(stmts: list[tir.Stmt], buf: tir.Buffer) -> int:
    """Element size that sets a free fragment's vector width: the narrowest
    of its own type and the types it is copied from or to, so that a float16
    tensor loaded into a float32 fragment still moves 16 bytes at a time."""
    sizes = [buf.dtype.bytes]
    for s in stmts:
        if isinstance(s, tir.Copy) and buf in (s.src.buffer, s.dst.buffer):
            sizes += [s.src.buffer.dtype.bytes, s.dst.buffer.dtype.bytes]
    return min(sizes)


def _loop_bytes(loop: tir.Parallel) -> int:
    """Element size that sets a loop's vector width: the widest element it touches."""
    widest = 1
    for s in tir_walk.stmts(loop.body):
        if isinstance(s, tir.Store):
            widest = max(widest, s.buffer.dtype.bytes)
    return widest


def _var_dims(loop: tir.Parallel, idx: tuple[tir.Expr, ...]) -> tuple[int, ...] | None:
    dims = []
    for e in idx:
        if not isinstance(e, tir.Var) or e not in loop.vars:
            return None
        dims.append(loop.vars.index(e))
    return tuple(dims) if len(set(dims)) == len(dims) else None


@dataclass
class _State:
    threads: int
    out: Layouts
    loops: dict[int, L.Fragment] = field(default_factory=dict)  # id(tir.Parallel) -> layout, while the pass runs

    def set(self, buf: tir.Buffer, frag: L.Fragment, span: Span) -> bool:
        old = self.out.buffers.get(buf)
        if old is None:
            self.out.buffers[buf] = frag
            self.out.origin[buf] = span
            return True
        if not L.same_placement(old, frag):
            raise _Conflict(
                Diagnostic(
                    span,
                    f"fragment '{buf.name}' is needed in two different layouts",
                    hint=f"copy '{buf.name}' into a shared buffer (alloc_shared) and read it from there here",
                    notes=(
                        Note(self.out.origin[buf], f"'{buf.name}' was given layout {old.describe()} here"),
                        Note(None, f"this statement needs {frag.describe()}"),
                    ),
                )
            )
        return False

    def propagate(self, s: tir.Stmt) -> bool:
        known = self.out.buffers
        match s:
            case tir.Reduce(src=src, dst=dst, dim=dim):
                if src.buffer in known and dst.buffer.scope == "fragment":
                    return self.set(dst.buffer, L.reduced(known[src.buffer], dim), s.span)
            case tir.Copy(src=src, dst=dst) if src.buffer.scope == dst.buffer.scope == "fragment":
                if src.buffer in known:
                    return self.set(dst.buffer, known[src.buffer], s.span)
                if dst.buffer in known:
                    return self.set(src.buffer, known[dst.buffer], s.span)
            case tir.Parallel():
                return self._parallel(s)
            case (
                tir.Reduce()
                | tir.Copy()
                | tir.Alloc()
                | tir.Let()
                | tir.Store()
                | tir.Gemm()  # the strict level placed its accumulator
                | tir.Fill()
                | tir.CumSum()
                | tir.Atomic()
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
                pass  # places nothing
            case _:
                assert_never(s)
        return False

    def _parallel(self, loop: tir.Parallel) -> bool:
        accesses = fragment_accesses(loop)
        for buf, idx, span in accesses:
            if _var_dims(loop, idx) is None:
                raise _Conflict(
                    Diagnostic(
                        span,
                        f"fragment '{buf.name}' is indexed by a computed index inside a Parallel loop",
                        hint="index register fragments by the loop variables only; "
                        "for other access patterns copy the tile to an alloc_shared buffer first",
                    )
                )
        changed = False
        loop_layout = self.loops.get(id(loop))
        if loop_layout is None:
            full = tuple(range(len(loop.vars)))
            for buf, idx, span in accesses:
                if buf in self.out.buffers and _var_dims(loop, idx) == full:
                    loop_layout = self.out.buffers[buf]
                    if loop_layout.shape != loop.extents:
                        raise _Conflict(
                            Diagnostic(
                                span,
                                f"Parallel extents {list(loop.extents)} differ from the shape "
                                f"{list(loop_layout.shape)} of fragment '{buf.name}'",
                                hint="loop over the fragment's whole shape",
                            )
                        )
                    self.loops[id(loop)] = loop_layout
                    changed = True
                    break
        if loop_layout is None:
            return changed
        for buf, idx, span in accesses:
            dims = _var_dims(loop, idx)
            assert dims is not None
            changed |= self.set(buf, L.projected(loop_layout, dims), span)
        return changed
