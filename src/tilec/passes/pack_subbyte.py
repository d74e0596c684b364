"""Pack sub-byte buffers: every int4 / uint4 / float4_e2m1 tensor and shared tile becomes a buffer of
bytes half as wide, two elements to a byte, the even element in the low nibble; copies of them
become byte copies, element reads nibble extracts.

    A: int4[M, K] global,  A_s: int4[128, 64] shared
    copy A[by * 128 : +128, k * 64 : +64] -> A_s[0:128, 0:64]
    W_f16[i, j] = cast(cast(A_s[i, j], int8), float16)
  ->
    A: int4x2[M, K // 2] global,  A_s: int4x2[128, 32] shared
    copy A[by * 128 : +128, k * 32 : +32] -> A_s[0:128, 0:32]
    W_f16[i, j] = cast(unpack_int4(A_s[i, j // 2], j), float16)

Runs first, so that every later pass sees whole bytes: layouts, vector widths, asynchronous and bulk
copies, bank conflicts and shared-memory sizes are those of uint8 tiles. Only instruction selection
reads the packed type (int4x2): CUDA's 4-bit mma (m16n8k64 .s4) takes, in bytes, the operand
fragments of its 8-bit one (m16n8k32 .s8), so a gemm of int4 tiles is the int8 gemm of their byte
tiles with the 4-bit instruction (backends/cuda/instructions.py).

Elaboration has already refused what has no meaning here (a store of one element, which would
race with the thread writing the other nibble of its byte; int4 fragments; a cast to int4); this
pass refuses the tile ops it cannot turn into byte operations, at the op: a copy that converts to
or from a sub-byte type, a region that starts or ends inside a byte, a fill with a value that is
not a constant, reductions, scans, atomics and prints of sub-byte tiles.
"""

from __future__ import annotations

import dataclasses

from tilec import tir, tir_walk
from tilec.diagnostics import CompileError, Diagnostic, error
from tilec.dtypes import UNPACKED_OF, DType
from tilec.simplify import const, int_, residue, simplify
from tilec.source import Span

I32 = DType.int32

_ELEMENTWISE_HINT = (
    "read the elements in a Parallel loop instead, where they convert: "
    "for i, j in Parallel(...): W_shared[i, j] = cast(W[i, j], float16)"
)


def pack_subbyte(kernel: tir.Kernel) -> tir.Kernel:
    """`kernel` with its sub-byte buffers as packed bytes (itself when it has none)."""
    allocs = [s.buffer for s in tir_walk.stmts(kernel.body) if isinstance(s, tir.Alloc)]
    subbyte = [b for b in (*kernel.tensors, *allocs) if b.dtype.is_subbyte]
    if not subbyte:
        return kernel
    packer = _Packer({b: _packed_buffer(b) for b in subbyte})
    diags: list[Diagnostic] = []
    for s in tir_walk.stmts(kernel.body):
        try:
            packer.check(s)
        except CompileError as e:
            diags.extend(e.diagnostics)
    if diags:
        raise CompileError(diags)
    body = tir_walk.map_stmts(kernel.body, packer.stmt)
    tensors = tuple(packer.buffers.get(t, t) for t in kernel.tensors)
    return dataclasses.replace(kernel, tensors=tensors, body=body)


def logical_dim(packed: tir.Buffer, d: tir.Expr, last: bool) -> tir.Expr:
    """Dimension `d` of a packed tensor as the program wrote it (the ABI's shape): the innermost
    one twice its bytes (`K // 2` is `K`, written so by `_packed_buffer`)."""
    if not (packed.dtype.is_packed and last):
        return d
    match d:
        case tir.IntImm(v, dt):
            return tir.IntImm(2 * v, dt, d.span)
        case tir.BinOp("//", x, tir.IntImm(2)):
            return x
    raise AssertionError(f"{packed.name}: innermost dimension {d} not written by pack_subbyte")


def _packed_buffer(b: tir.Buffer) -> tir.Buffer:
    *outer, last = b.shape
    half = tir.IntImm(last.value // 2, last.dtype, last.span) if isinstance(last, tir.IntImm) else _half(last)
    return dataclasses.replace(b, shape=(*outer, half), dtype=b.dtype.storage)


def _half(e: tir.Expr) -> tir.Expr:
    return tir.BinOp("//", e, int_(2), I32, e.span)


@dataclasses.dataclass
class _Packer:
    buffers: dict[tir.Buffer, tir.Buffer]

    # ------------------------------------------------------------ checks

    def check(self, s: tir.Stmt) -> None:
        match s:
            case tir.Copy(src, dst, pad=pad):
                self.check_copy(s, src, dst, pad)
            case tir.Gemm(a, b, c):
                self.check_gemm(s, a, b, c)
            case tir.Fill(dst, value) if dst.buffer in self.buffers:
                self.check_region(dst, s.span, "fill")
                if const(value) is None and not isinstance(value, tir.FloatImm):
                    raise error(
                        s.span,
                        f"fill of {dst.buffer.dtype.tile_name} tile '{dst.buffer.name}' needs a constant value",
                        hint="a sub-byte tile is filled byte by byte, with the constant in both nibbles",
                    )
            case tir.Reduce() | tir.CumSum() | tir.Atomic() | tir.Print():
                for r in tir_walk.regions(s):
                    if r.buffer in self.buffers:
                        op = type(s).__name__.lower()
                        raise error(
                            s.span,
                            f"{op} of the {r.buffer.dtype.tile_name} tile '{r.buffer.name}' is not supported",
                            hint=_ELEMENTWISE_HINT,
                        )

    def check_copy(self, s: tir.Copy, src: tir.Region, dst: tir.Region, pad: tir.Expr | None) -> None:
        packed = [r for r in (src, dst) if r.buffer in self.buffers]
        if not packed:
            return
        if src.buffer.dtype != dst.buffer.dtype:
            raise error(
                s.span,
                f"copy from {src.buffer.dtype.tile_name} to {dst.buffer.dtype.tile_name} does not convert "
                "sub-byte types: it copies their bytes",
                hint=_ELEMENTWISE_HINT,
            )
        if pad is not None and const(pad) != 0 and not (isinstance(pad, tir.FloatImm) and pad.value == 0.0):
            raise error(s.span, f"copy of {src.buffer.dtype.tile_name} takes no pad: the bytes outside read as 0")
        for r in packed:
            self.check_region(r, s.span, "copy")

    def check_region(self, r: tir.Region, span: Span, op: str) -> None:
        """The innermost extent of a sub-byte region even, and its start provably even."""
        start, extent = r.starts[-1], r.extents[-1]
        name, t = r.buffer.name, r.buffer.dtype.tile_name
        n = const(extent)
        if n is None or n % 2:
            raise error(
                span,
                f"{op} of '{name}' ({t}) covers {n if n is not None else 'a computed number of'} elements of "
                "its innermost dimension; sub-byte tiles move whole bytes, two elements each",
                hint="make the innermost extent even",
            )
        if residue(start, 2) != 0:
            raise error(
                span,
                f"{op} of '{name}' ({t}) may start inside a byte: its innermost start must be even, "
                "a multiple of 2 the compiler can see (`k * 64`)",
                hint="start sub-byte regions at even elements",
            )

    def check_gemm(self, s: tir.Gemm, a: tir.Region, b: tir.Region, c: tir.Region) -> None:
        packed = [r for r in (a, b, c) if r.buffer in self.buffers]
        if not packed:
            return
        if a.buffer.dtype != b.buffer.dtype or c.buffer in self.buffers:
            types = ", ".join(r.buffer.dtype.tile_name for r in (a, b, c))
            raise error(
                s.span,
                f"gemm of {types}: sub-byte operands need A and B of one type (int4 or uint4) into int32",
                hint="dequantize the other operand's type in a Parallel loop first",
            )
        if a.buffer.dtype == DType.float4_e2m1:
            raise error(
                s.span,
                "gemm of float4_e2m1 operands is not supported: no tensor-core instruction of sm_80 or sm_90a "
                "takes fp4",
                hint="dequantize the tile into a float16 shared tile in a Parallel loop, then gemm that",
            )
        for r in (a, b):
            self.check_region(r, s.span, "gemm")

    # ------------------------------------------------------------ rewriting

    def stmt(self, s: tir.Stmt) -> tir.Stmt:
        s = tir_walk.map_stmt_exprs(s, self.expr)
        match s:
            case tir.Alloc(buffer=b) if b in self.buffers:
                return dataclasses.replace(s, buffer=self.buffers[b])
            case tir.Copy(src, dst):
                return dataclasses.replace(s, src=self.region(src), dst=self.region(dst))
            case tir.Gemm(a, b):
                return dataclasses.replace(s, a=self.region(a), b=self.region(b))
            case tir.Fill(dst, value) if dst.buffer in self.buffers:
                return dataclasses.replace(s, dst=self.region(dst), value=_byte_fill(value, dst.buffer.dtype))
            case tir.AnnotateLayout(buffer=b) if b in self.buffers:
                return dataclasses.replace(s, buffer=self.buffers[b])
        return s

    def region(self, r: tir.Region) -> tir.Region:
        if r.buffer not in self.buffers:
            return r
        starts = (*r.starts[:-1], simplify(_half(r.starts[-1])))
        extents = (*r.extents[:-1], simplify(_half(r.extents[-1])))
        return tir.Region(self.buffers[r.buffer], starts, extents, r.span)

    def expr(self, e: tir.Expr) -> tir.Expr:
        match e:
            case tir.Load(buf, idx) if buf in self.buffers:
                return _unpacked(tir.Load(self.buffers[buf], (*idx[:-1], simplify(_half(idx[-1]))), e.span), idx[-1])
            case tir.Load(buf, idx):
                return tir.Load(buf, tuple(self.expr(i) for i in idx), e.span)
            case tir.BinOp(op, a, b, d):
                return tir.BinOp(op, self.expr(a), self.expr(b), d, e.span)
            case tir.UnaryOp(op, a, d):
                return tir.UnaryOp(op, self.expr(a), d, e.span)
            case tir.Select(c, a, b, d):
                return tir.Select(self.expr(c), self.expr(a), self.expr(b), d, e.span)
            case tir.Cast(v, d):
                inner = self.expr(v)
                return inner if inner.dtype == d else tir.Cast(inner, d, e.span)
            case tir.Call(f, args, d):
                return tir.Call(f, tuple(self.expr(x) for x in args), d, e.span)
        return e


def _unpacked(byte: tir.Load, j: tir.Expr) -> tir.Expr:
    """Element `j` (of the innermost dimension) out of its byte, as its value type: the low nibble
    for an even j, the high one for an odd j; int4 sign-extended, float4_e2m1 decoded (UNPACK:
    the calls, lowered to the inline helpers of lower/exprs.py)."""
    kind = UNPACKED_OF[byte.buffer.dtype]
    return tir.Call(UNPACK[kind], (byte, j), kind.value_type, byte.span)


# element j of a packed pair: (the pair's byte, j) -> its value (int8, uint8, float32)
UNPACK = {DType.int4: "unpack_int4", DType.uint4: "unpack_uint4", DType.float4_e2m1: "unpack_fp4_e2m1"}


def _byte_fill(value: tir.Expr, d: DType) -> tir.Expr:
    """The byte holding the constant `value` of sub-byte type `d` in both nibbles."""
    return tir.IntImm(_code(value, d) * 0x11, d.storage, value.span)


def _code(value: tir.Expr, d: DType) -> int:
    if d == DType.float4_e2m1:
        v = float(value.value) if isinstance(value, (tir.FloatImm, tir.IntImm)) else 0.0
        return fp4_e2m1_code(v)
    c = const(value)
    assert c is not None, "check() made sure the fill value is a constant"
    return c & 15


FP4_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)


def fp4_e2m1_code(v: float) -> int:
    """The e2m1 code nearest to `v` (ties to the even code), saturating at +-6."""
    sign = 8 if v < 0 or (v == 0 and str(v).startswith("-")) else 0
    mag = abs(v)
    best = min(range(8), key=lambda c: (abs(FP4_VALUES[c] - mag), c % 2))
    return sign | best
