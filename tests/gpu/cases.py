"""The GPU checks: every example (and variant) against a torch reference, at tile-multiple and at
ragged sizes, on seeded random inputs, with poisoned and guarded outputs.

Each case is (variant, label, check function, sizes); a check function takes the loaded module, a
seeded torch.Generator and the sizes, runs the kernel(s) and returns `harness.compare(...)`'s dict.
References are computed in float64 on the GPU. Used by test_examples.py (pytest) and run_all.py.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import harness
import torch
import torch.nn.functional as F
from harness import compare, guarded_input, guarded_output, randn, sync, tol_for

f16, f32, f64 = torch.float16, torch.float32, torch.float64


@dataclass(frozen=True)
class Case:
    variant: str
    label: str
    fn: Callable[..., dict]
    sizes: dict[str, Any] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{self.variant}[{self.label}]"

    def run(self, mod: Any) -> dict:
        gen = torch.Generator(device=harness.DEVICE)
        gen.manual_seed(zlib.crc32(self.id.encode()))
        res = self.fn(mod, gen, **self.sizes)
        sync()
        return res


FP8_WGMMA_TOL = 2e-3  # relative norm error of a float8 GEMM on wgmma (check_gemm_8bit)
FP8_ACCUM_ULP = 2.0**-13  # what one float8 wgmma's accumulation keeps: about 14 bits (check_gemm_8bit)


def _finish(out_g, ref, extra_guards=()) -> dict:
    sync()
    return compare(out_g.tensor, ref, tol_for(out_g.tensor), [out_g, *extra_guards])


# ---------------------------------------------------------------- elementwise


def check_elementwise_add(mod, gen, N):
    a, b = randn((N,), f16, gen), randn((N,), f16, gen)
    ag, bg = guarded_input(a), guarded_input(b)
    c = guarded_output((N,), f16)
    mod.elementwise_add(ag.tensor, bg.tensor, c.tensor)
    return _finish(c, a.double() + b.double())


# ---------------------------------------------------------------- GEMM family


def check_gemm(mod, gen, M, N, K, kernel="gemm", relu=False, dtype=f16):
    a, b = randn((M, K), dtype, gen), randn((K, N), dtype, gen)
    c = guarded_output((M, N), dtype)
    getattr(mod, kernel)(guarded_input(a).tensor, guarded_input(b).tensor, c.tensor)
    ref = a.double() @ b.double()
    if relu:
        ref = ref.clamp_min(0)
    return _finish(c, ref)


def check_gemm_transposed(mod, gen, M, N, K, trans_a=False, trans_b=False):
    """C = op(A) @ op(B) with A stored (K, M) when trans_a (gemm_tn) or B stored (N, K) when
    trans_b (gemm_nt)."""
    a = randn((K, M) if trans_a else (M, K), f16, gen)
    b = randn((N, K) if trans_b else (K, N), f16, gen)
    c = guarded_output((M, N), f16)
    kernel = "gemm_tn" if trans_a else "gemm_nt"
    getattr(mod, kernel)(guarded_input(a).tensor, guarded_input(b).tensor, c.tensor)
    a64, b64 = a.double(), b.double()
    return _finish(c, (a64.T if trans_a else a64) @ (b64.T if trans_b else b64))


def check_bmm_bias(mod, gen, Batch, M, N, K):
    """C[b] = A[b] @ B[b] + bias, the bias (N,) added to every row; ragged M and K must not let one
    batch's rows leak into another's."""
    a, b = randn((Batch, M, K), f16, gen), randn((Batch, K, N), f16, gen)
    bias = randn((N,), f16, gen)
    c = guarded_output((Batch, M, N), f16)
    mod.bmm_bias(guarded_input(a).tensor, guarded_input(b).tensor, guarded_input(bias).tensor, c.tensor)
    return _finish(c, a.double() @ b.double() + bias.double())


def check_gemm_8bit(mod, gen, M, N, K, dtype="int8", out=None):
    """C = A @ B^T with B stored (N, K): int8/uint8 (`dtype`) -> int32 (exact), or float8 ("e4m3",
    "e5m2") -> float32 (each product is exact in float32, only the sums round), written as `out`
    (a torch dtype; the accumulator's by default)."""
    if dtype in ("int8", "uint8"):
        low, high = (-128, 128) if dtype == "int8" else (0, 256)
        t = getattr(torch, dtype)
        a = torch.randint(low, high, (M, K), generator=gen, device=harness.DEVICE, dtype=t)
        b = torch.randint(low, high, (N, K), generator=gen, device=harness.DEVICE, dtype=t)
        out = out or torch.int32
    else:
        t = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}[dtype]
        a, b = randn((M, K), t, gen), randn((N, K), t, gen)
    c = guarded_output((M, N), out or f32)
    mod.gemm_int8(guarded_input(a).tensor, guarded_input(b).tensor, c.tensor)
    ref = a.double() @ b.double().T
    if dtype in ("int8", "uint8") or c.tensor.dtype != f32:
        return _finish(c, ref)
    # wgmma's float8 products are summed in fewer bits than float32 (cuBLASLt's "fast accumulation"):
    # on the H200 the relative error grew with K to 5.3e-4 at K=1000, and tilec's 8192^3 output
    # equals torch._scaled_mm's with use_fast_accum=True (bench/run.py gemm-fp8). Per element, each
    # k32 wgmma may lose up to FP8_ACCUM_ULP of the accumulator, which is at most sum_k |a b|; the
    # error norm is held to FP8_WGMMA_TOL as before.
    sync()
    steps = -(-K // 32)
    bound = steps * FP8_ACCUM_ULP * (a.double().abs() @ b.double().abs().T)
    return compare(c.tensor, ref, FP8_WGMMA_TOL, [c], bound=bound)


def check_gemm_splitk(mod, gen, M, N, K):
    a, b = randn((M, K), f16, gen), randn((K, N), f16, gen)
    c0 = randn((M, N), f32, gen)  # the kernel adds to C: start from random values, not zeros
    c = guarded_output((M, N), f32)
    c.tensor.copy_(c0)
    mod.gemm_splitk(guarded_input(a).tensor, guarded_input(b).tensor, c.tensor)
    return _finish(c, c0.double() + a.double() @ b.double())


def check_dequant_gemm(mod, gen, M, N, K):
    assert K % 2 == 0
    a = randn((M, K), f16, gen)
    codes = torch.randint(0, 16, (N, K), generator=gen, device=harness.DEVICE, dtype=torch.int32)
    packed = (codes[:, 0::2] | (codes[:, 1::2] << 4)).to(torch.uint8).contiguous()
    scale = (torch.rand((N,), generator=gen, device=harness.DEVICE) * 0.1 + 0.01).to(f16)
    c = guarded_output((M, N), f16)
    mod.dequant_gemm(guarded_input(a).tensor, packed, guarded_input(scale).tensor, c.tensor)
    w = (codes.double() - 8) * scale.double()[:, None]
    return _finish(c, a.double() @ w.T)


# ---------------------------------------------------------------- row-wise


def check_softmax(mod, gen, M, N):
    x = randn((M, N), f16, gen, scale=4.0)
    y = guarded_output((M, N), f16)
    mod.softmax(guarded_input(x).tensor, y.tensor)
    return _finish(y, torch.softmax(x.double(), dim=-1))


def check_rmsnorm(mod, gen, M, N, eps=1e-6):
    x = randn((M, N), f16, gen, scale=2.0, shift=0.5)
    w = randn((N,), f16, gen, shift=1.0)
    y = guarded_output((M, N), f16)
    mod.rmsnorm(guarded_input(x).tensor, guarded_input(w).tensor, y.tensor, eps)
    x64 = x.double()
    ref = x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + eps) * w.double()
    return _finish(y, ref)


def check_index_limit(mod, gen, N=32768, eps=1e-6):
    """32-bit offsets at their edge: an X of 2^31 - N elements is normalized whole (every row of Y
    written; the first and last 64 rows against float64), one of 2^31 + N is refused by
    tilec.runtime (ValueError) and, called around it, by the launcher itself (cudaErrorInvalidValue,
    Y left as poisoned)."""
    import ctypes

    M = 2**31 // N - 1
    x = torch.randn((M, N), dtype=f16, device=harness.DEVICE, generator=gen)
    w = randn((N,), f16, gen, shift=1.0)
    y = torch.full((M, N), math.nan, dtype=f16, device=harness.DEVICE)
    mod.rmsnorm(x, w, y, eps)
    sync()
    problems = [] if not bool(torch.isnan(y).any()) else ["an element of Y below the limit was not written"]
    rows = torch.cat([torch.arange(64), torch.arange(M - 64, M)]).to(harness.DEVICE)
    x64 = x[rows].double()
    ref = x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + eps) * w.double()
    res = compare(y[rows], ref, tol_for(y), [])
    del x, y
    big = torch.zeros((M + 2, N), dtype=f16, device=harness.DEVICE)
    out = torch.full((M + 2, N), math.nan, dtype=f16, device=harness.DEVICE)
    try:
        mod.rmsnorm(big, w, out, eps)
        problems.append("tilec.runtime launched on 2^31 + N elements")
    except ValueError as e:
        if "32-bit" not in str(e):
            problems.append(f"runtime refusal without the reason: {e}")
    kernel = mod.kernels["rmsnorm"]
    stream = torch.cuda.current_stream().cuda_stream
    status = kernel._fn(big.data_ptr(), w.data_ptr(), out.data_ptr(), ctypes.c_float(eps), M + 2, N, stream)
    sync()
    if status != 1:  # cudaErrorInvalidValue
        problems.append(f"the launcher returned {status} on 2^31 + N elements, not cudaErrorInvalidValue (1)")
    if not bool(torch.isnan(out[::4096]).all()):
        problems.append("the refused launch wrote Y")
    res["ok"] = res["ok"] and not problems
    if problems:
        res["where"] = "; ".join(problems)
    return res


def check_layernorm(mod, gen, M, N, eps=1e-5):
    x = randn((M, N), f16, gen, scale=2.0, shift=1.0)
    w = randn((N,), f16, gen, shift=1.0)
    bias = randn((N,), f16, gen)
    y = guarded_output((M, N), f16)
    mod.layernorm(guarded_input(x).tensor, guarded_input(w).tensor, guarded_input(bias).tensor, y.tensor, eps)
    ref = F.layer_norm(x.double(), (N,), w.double(), bias.double(), eps)
    return _finish(y, ref)


# ---------------------------------------------------------------- halos


def conv1d_causal_ref(x, w):
    """Causal depthwise conv1d in float64: y[b, t, c] = sum_k w[k, c] * x[b, t - (K - 1) + k, c],
    x being 0 before t = 0; x is (B, L, C), w (K, C)."""
    K = w.shape[0]
    xt = F.pad(x.double().transpose(1, 2), (K - 1, 0))  # (B, C, K - 1 + L)
    return F.conv1d(xt, w.double().T.unsqueeze(1), groups=w.shape[1]).transpose(1, 2)


def check_conv1d_halo(mod, gen, B, L, C, K):
    """The first tile of each sequence reads K - 1 rows before it: they must read as 0 (guarded
    inputs put NaN before X, and the previous sequence's rows are not 0)."""
    x, w = randn((B, L, C), f16, gen), randn((K, C), f16, gen)
    y = guarded_output((B, L, C), f16)
    mod.conv1d_halo(guarded_input(x).tensor, guarded_input(w).tensor, y.tensor)
    return _finish(y, conv1d_causal_ref(x, w))


def stencil_ref(x, alpha: float, beta: float):
    """The 5-point stencil in float64 with x taken as 0 outside its (H, W) grid."""
    p = F.pad(x.double(), (1, 1, 1, 1))
    near = p[:-2, 1:-1] + p[2:, 1:-1] + p[1:-1, :-2] + p[1:-1, 2:]
    return alpha * p[1:-1, 1:-1] + beta * near


def check_stencil(mod, gen, H, W, alpha=0.5, beta=0.25):
    """Every edge of the grid: row -1 lies before X (NaN in a guarded input), column -1 and
    column W are the neighbouring rows' elements, row H after X; all must read as 0."""
    x = randn((H, W), f16, gen)
    y = guarded_output((H, W), f16)
    mod.stencil(guarded_input(x).tensor, y.tensor, alpha, beta)
    return _finish(y, stencil_ref(x, alpha, beta))


def check_row_bits(mod, gen, M):
    """reduce_bitand/bitor/bitxor along rows of random 32-bit patterns (some rows all ones in
    their low bits, so that AND is not always 0)."""
    import functools

    x = torch.randint(-(2**31), 2**31 - 1, (M, 256), device=harness.DEVICE, dtype=torch.int32, generator=gen)
    x[::3] |= 0x0F0F  # AND keeps these bits in every third row
    outs = [guarded_output((M,), torch.int32) for _ in range(3)]
    mod.row_bits(guarded_input(x).tensor, *(o.tensor for o in outs))
    refs = [functools.reduce(op, x.unbind(1)) for op in (torch.bitwise_and, torch.bitwise_or, torch.bitwise_xor)]
    sync()
    results = [compare(o.tensor, r, 0.0, [o]) for o, r in zip(outs, refs)]
    return next((r for r in results if not r["ok"]), results[0])


def check_row_argmax(mod, gen, M):
    """reduce_argmax / reduce_argmin along rows with many ties (values on a grid of quarters): the
    first index of the largest (smallest) value, as torch.argmax / argmin give it, and the values."""
    x = (torch.randint(-8, 8, (M, 1000), device=harness.DEVICE, generator=gen) / 4).to(f16)
    k = torch.randint(-50, 50, (M, 96), device=harness.DEVICE, dtype=torch.int32, generator=gen)
    i, v, j = guarded_output((M,), torch.int32), guarded_output((M,), f32), guarded_output((M,), torch.int32)
    ki, kw = guarded_output((M,), torch.int32), guarded_output((M,), torch.int32)
    mod.row_argmax(guarded_input(x).tensor, i.tensor, v.tensor, j.tensor)
    mod.int_argmin(guarded_input(k).tensor, ki.tensor, kw.tensor)
    sync()
    refs = [
        (i, x.argmax(1).int()), (v, x.float().amax(1)), (j, x.argmin(1).int()),
        (ki, k.argmin(1).int()), (kw, k.amin(1)),
    ]  # fmt: skip
    results = [compare(o.tensor, r, 0.0, [o]) for o, r in refs]
    return next((r for r in results if not r["ok"]), results[0])


def check_frag_scan(mod, gen, M):
    """Scans of fragments: cumsum (then doubled in registers) and a reversed cummax along rows, a
    cummin down each block's 4 rows (rows past M are zeros in the tile, and only those before a
    row count for it)."""
    x = randn((M, 64), f16, gen)
    s, r, c = (guarded_output((M, 64), f32) for _ in range(3))
    mod.frag_scan(guarded_input(x).tensor, s.tensor, r.tensor, c.tensor)
    xd = x.double()
    blocks = torch.cat([xd, xd.new_zeros((-M % 4, 64))]).reshape(-1, 4, 64)
    refs = [2 * xd.cumsum(1), xd.flip(1).cummax(1).values.flip(1), blocks.cummin(1).values.reshape(-1, 64)[:M]]
    sync()
    results = [compare(o.tensor, ref, tol_for(o.tensor), [o]) for o, ref in zip((s, r, c), refs)]
    return next((res for res in results if not res["ok"]), results[0])


def check_paged_gather(mod, gen, P, NB, T):
    """A pipelined loop through a page table: C[b] = sum over k of A[Table[b, k]] @ B, the pages
    drawn at random (repeats included), T from below the stage count to several times it."""
    a, b = randn((P, 16, 64), f16, gen), randn((64, 64), f16, gen)
    table = torch.randint(0, P, (NB, T), device=harness.DEVICE, dtype=torch.int32, generator=gen)
    c = guarded_output((NB, 16, 64), f32)
    mod.paged_gather(guarded_input(a).tensor, guarded_input(table).tensor, guarded_input(b).tensor, c.tensor)
    ref = torch.einsum("btij,jk->bik", a.double()[table.long()], b.double())
    return _finish(c, ref)


def check_blocksparse_gemm(mod, gen, M, N, K, bm, bn, bk):
    """Block-sparse GEMM (tests/gpu/programs/blocksparse_gemm.tile): C = the sum over K tiles kb of
    A[:, kb] @ B[kb, :] on the (M tile, N tile) blocks whose mask entry for kb is set, the copies
    running ahead under the mask. A random mask, half set, with its first M tile's entries all
    false (those rows of C stay 0) and another tile's all true; M and N tiles past the mask's
    M // bm, N // bn read as false (zero rows and columns). On sm_90a (warp roles) a tile whose
    entries are all false takes no stage of the ring; with more tiles than persistent blocks, the
    block's next tile goes on from the same ring position."""
    a, b = randn((M, K), f16, gen), randn((K, N), f16, gen)
    mb, nb, kb = M // bm, N // bn, (K + bk - 1) // bk
    mask = torch.rand((mb, nb, kb), generator=gen, device=harness.DEVICE) < 0.5
    mask[0] = False
    if mb > 1:
        mask[mb - 1, nb - 1] = True
    c = guarded_output((M, N), f32)
    mod.blocksparse_gemm(guarded_input(a).tensor, guarded_input(b).tensor, guarded_input(mask).tensor, c.tensor)
    ref = torch.zeros((M, N), dtype=torch.float64, device=harness.DEVICE)
    for t in range(kb):
        part = a[:, t * bk : (t + 1) * bk].double() @ b[t * bk : (t + 1) * bk].double()
        on = torch.zeros((M, N), dtype=torch.bool, device=harness.DEVICE)
        on[: mb * bm, : nb * bn] = mask[:, :, t].repeat_interleave(bm, 0).repeat_interleave(bn, 1)
        ref += torch.where(on, part, 0.0)
    return _finish(c, ref)


def check_scaled_gemm(mod, gen, M, N):
    """A register A into a gemm two ways (tests/gpu/programs/scaled_gemm.tile): scaled row by row in
    a Parallel loop (staged to shared memory first), and an accumulator cast to float16 (on sm_90a
    wgmma's register form); each against float64 of the same float16 roundings (a misplaced
    element is off by O(1))."""
    a, b = randn((M, 64), f16, gen), randn((64, N), f16, gen)
    sc = randn((M,), f32, gen)
    w, d = randn((64, 64), f16, gen), randn((64, N), f16, gen)
    c1, c2 = guarded_output((M, N), f32), guarded_output((M, N), f32)
    ag = guarded_input(a)
    mod.scaled_gemm(ag.tensor, guarded_input(b).tensor, guarded_input(sc).tensor, c1.tensor)
    mod.chained_gemm(ag.tensor, guarded_input(w).tensor, guarded_input(d).tensor, c2.tensor)
    scaled = (a.float() * sc[:, None]).half().double()
    p = (a.double() @ w.double()).float().half().double()
    first = _finish(c1, scaled @ b.double())
    if not first["ok"]:
        return first
    # P is rounded to float16 from the tensor cores' float32 sums, which can round an element of P
    # the other way than float64's sum does (1 to 52 of 65536 outputs off by up to 3e-4 relative
    # in the run of 2026-12-02, sm_80 and sm_90a alike): float16's bound for the second product
    return compare(c2.tensor, p @ d.double(), 2e-3, [c2])


def check_attention_schedule(mod, gen, B, H, S):
    """Attention under a manual pipeline schedule (the next key tile's scores computed beside this
    tile's P V): S from one key tile (no steady state) to ragged lengths."""
    q, k, v = (randn((B, H, S, 64), f16, gen) for _ in range(3))
    o = guarded_output((B, H, S, 64), f16)
    mod.attention_schedule(guarded_input(q).tensor, guarded_input(k).tensor, guarded_input(v).tensor, o.tensor)
    return _finish(o, attention_ref(q, k, v, False))


def check_gemm_schedule(mod, gen, M, N, K):
    """A GEMM main loop under a manual schedule (copies two tiles ahead, issued after the gemm)."""
    a, b = randn((M, K), f16, gen), randn((K, N), f16, gen)
    c = guarded_output((M, N), f32)
    mod.gemm_schedule(guarded_input(a).tensor, guarded_input(b).tensor, c.tensor)
    return _finish(c, a.double() @ b.double())


def pack_nibbles(codes):
    """4-bit codes (..., K), K even -> the packed (..., K / 2) uint8 bytes tilec's sub-byte tensors
    take: element 2b in the low nibble of byte b, 2b + 1 in the high one."""
    c = codes.to(torch.int32) & 0xF
    return (c[..., 0::2] | (c[..., 1::2] << 4)).to(torch.uint8).contiguous()


FP4_E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)  # the magnitudes of codes 0..7 (8..15: negated)


def fp4_values(codes):
    table = torch.tensor(FP4_E2M1 + tuple(-v for v in FP4_E2M1), dtype=f64, device=codes.device)
    return table[codes.long()]


def check_subbyte_unpack(mod, gen, M, N):
    """int4 / uint4 / float4_e2m1 tensors passed packed (two codes a byte): their elements as float16,
    int32 and float32 (from shared tiles and from the tensor itself), the int4 tile copied back out
    byte for byte; then a uint8 tensor unpacked by shifts and masks into float16 bits (reinterpret)
    and float32 bits read as int32. Every code of each type appears; exact."""
    dev = harness.DEVICE
    q, u, fc = (torch.randint(0, 16, (M, N), device=dev, dtype=torch.int32, generator=gen) for _ in range(3))
    qv = q - 16 * (q >= 8).int()  # int4 values -8..7 (two's complement codes q)
    outs = {"Qf": guarded_output((M, N), f16), "Ui": guarded_output((M, N), torch.int32)}
    outs |= {"Ff": guarded_output((M, N), f32), "Q_copy": guarded_output((M, N // 2), torch.uint8)}
    packed = [guarded_input(pack_nibbles(t)) for t in (q, u, fc)]
    mod.subbyte_unpack(*(p.tensor for p in packed), *(o.tensor for o in outs.values()))
    refs = {"Qf": qv.double(), "Ui": (u * 16 + qv).double(), "Ff": fp4_values(fc) * 2 + 6}
    refs["Q_copy"] = pack_nibbles(q).double()
    b = torch.randint(0, 256, (M, N // 2), device=dev, dtype=torch.int32, generator=gen)
    x = randn((M, N), f32, gen)
    h, y = guarded_output((M, N), f16), guarded_output((M, N), torch.int32)
    mod.byte_unpack(guarded_input(b.to(torch.uint8)).tensor, guarded_input(x).tensor, h.tensor, y.tensor)
    f4 = torch.stack((b & 15, b >> 4), dim=-1).reshape(M, N)  # TileLang's torch_convert of its fp4 -> f16 bits
    bits = (f4 >> 3) * -32768 + ((((f4 & 6) >> 1) + 14) << 10) + ((f4 & 1) << 9)
    sync()
    results = [compare(o.tensor, refs[k], 0.0, [o]) for k, o in outs.items()]
    results.append(compare(h.tensor, bits.to(torch.int16).view(f16), 0.0, [h]))
    results.append(compare(y.tensor, x.view(torch.int32), 0.0, [y]))
    return next((r for r in results if not r["ok"]), results[0])


def check_gemm_int4(mod, gen, M, N, K):
    """tests/corpus/tilelang/gemm_int4.tile: C = A B^T in int32 of int4 A (M, K) and B (N, K),
    passed packed as TileLang's example packs them (int8 bytes); exact."""
    a = torch.randint(-8, 8, (M, K), device=harness.DEVICE, dtype=torch.int32, generator=gen)
    b = torch.randint(-8, 8, (N, K), device=harness.DEVICE, dtype=torch.int32, generator=gen)
    c = guarded_output((M, N), torch.int32)
    ap, bp = (guarded_input(pack_nibbles(t).view(torch.int8)) for t in (a, b))
    mod.matmul_nt_int4(ap.tensor, bp.tensor, c.tensor)
    sync()
    return compare(c.tensor, (a.double() @ b.double().T), 0.0, [c])


def check_dequant_gemm_mxfp4(mod, gen, M, N, K):
    """examples/dequant_gemm_mxfp4.tile: C = A dequant(W)^T, W fp4 codes (packed two a byte) times
    2^(s - 127) per 32 weights of a row (e8m0 scales s near 127)."""
    a = randn((M, K), f16, gen)
    codes = torch.randint(0, 16, (N, K), device=harness.DEVICE, dtype=torch.int32, generator=gen)
    groups = (K + 31) // 32
    s = torch.randint(124, 130, (N, groups), device=harness.DEVICE, dtype=torch.int32, generator=gen)
    c = guarded_output((M, N), f16)
    w = guarded_input(pack_nibbles(codes))
    mod.dequant_gemm_mxfp4(guarded_input(a).tensor, w.tensor, guarded_input(s.to(torch.uint8)).tensor, c.tensor)
    scale = torch.exp2(s.double() - 127).repeat_interleave(32, dim=1)[:, :K]
    return _finish(c, a.double() @ (fp4_values(codes) * scale).T)


def check_dequant_gemm_w4(mod, gen, M, N, K):
    """tests/gpu/programs/dequant_gemm_w4.tile: C = A dequant(W)^T, W uint4 codes (packed two a byte),
    per 128 weights of a row a float16 scale and a uint8 zero point: (w - zero) * scale."""
    dev = harness.DEVICE
    a = randn((M, K), f16, gen)
    codes = torch.randint(0, 16, (N, K), device=dev, dtype=torch.int32, generator=gen)
    groups = (K + 127) // 128
    scale = (torch.rand((N, groups), device=dev, generator=gen) * 0.1 + 0.01).to(f16)
    zero = torch.randint(0, 16, (N, groups), device=dev, dtype=torch.int32, generator=gen)
    c = guarded_output((M, N), f16)
    args = (guarded_input(t) for t in (a, pack_nibbles(codes), scale, zero.to(torch.uint8)))
    mod.dequant_gemm_w4(*(g.tensor for g in args), c.tensor)
    w = (codes.double() - zero.double().repeat_interleave(128, dim=1)[:, :K]) * scale.double().repeat_interleave(
        128, dim=1
    )[:, :K]
    return _finish(c, a.double() @ w.T)


def check_kv_scores(mod, gen, B, H, S, S_max, D, D_max):
    """Q K^T on torch views as they are: K the slice cache[:, :S, :, :D] of a KV cache of S_max
    positions and D_max columns (everything of the cache outside the slice NaN, so that a read
    past the view shows), O the transposed view of a (B, H, S, 16) buffer (poisoned). D_max not
    a multiple of 8 leaves K's rows unaligned: its copies go element by element."""
    cache = guarded_input(randn((B, S_max, H, D_max), f16, gen))
    cache.tensor[:, S:] = math.nan
    cache.tensor[..., D:] = math.nan
    k = cache.tensor[:, :S, :, :D]
    q = guarded_input(randn((B, H, 16, D), f16, gen))
    out = guarded_output((B, H, S, 16), f32)
    o = out.tensor.transpose(2, 3)
    assert not k.is_contiguous() or S == S_max and D == D_max, "K is a real view"
    mod.kv_scores(q.tensor, k, o)
    ref = torch.einsum("bhid,bshd->bhis", q.tensor.double(), k.double())
    sync()
    return compare(o, ref, tol_for(o), [out, cache])


def check_scale_rows(mod, gen, M, N):
    """Y = 2 X + bias with X a transposed view (both strides symbolic) and Y the first N columns
    of rows N + 8 long (strides written (N + 8, 1): checked by tilec.runtime, which must refuse
    rows of another length, naming the tensor). The 8 columns of padding stay poisoned."""
    xt = guarded_input(randn((N, M), f32, gen))
    bias = guarded_input(randn((N,), f32, gen))
    ybuf = guarded_output((M, N + 8), f32)
    y = ybuf.tensor[:, :N]
    if M > 1:  # (a dimension of extent 1 takes any stride)
        wrong = guarded_output((M, N + 9), f32).tensor[:, :N]
        try:
            mod.scale_rows(xt.tensor.t(), bias.tensor, wrong)
        except ValueError as e:
            assert "Y.stride(0) must be N + 8" in str(e), str(e)
        else:
            raise AssertionError("rows of N + 9 elements were not refused")
    mod.scale_rows(xt.tensor.t(), bias.tensor, y)
    ref = 2 * xt.tensor.t().double() + bias.tensor.double()
    sync()
    res = compare(y, ref, tol_for(y), [ybuf, xt, bias])
    res["guards"] = res["guards"] and bool(ybuf.tensor[:, N:].isnan().all().item())
    res["ok"] = res["ok"] and res["guards"]
    return res


def _columns(g, n):
    """The first n columns of guarded buffer g's rows: a view whose rows are g's rows apart."""
    return g.tensor[..., :n]


def _untouched(g, n) -> bool:
    """Whether the columns of g past n (padding no kernel may write) are still poisoned."""
    return bool(g.tensor[..., n:].isnan().all().item())


def check_gemm_ld(mod, gen, M, N, K, lda, ldb, ldc):
    """C = A @ B with BLAS's leading dimensions: A, B and C the first K, N, N columns of rows lda,
    ldb, ldc long, the rest of each row NaN (read by a tensor map that ignored the strides, or
    written by a store past the view, it shows). Pitches of 16-byte multiples take TMA on sm_90a,
    the others the cp.async fallback kernel."""
    a, b = guarded_input(randn((M, lda), f16, gen)), guarded_input(randn((K, ldb), f16, gen))
    a.tensor[:, K:] = math.nan
    b.tensor[:, N:] = math.nan
    c = guarded_output((M, ldc), f16)
    mod.gemm_ld(_columns(a, K), _columns(b, N), _columns(c, N))
    ref = _columns(a, K).double() @ _columns(b, N).double()
    sync()
    res = compare(_columns(c, N), ref, tol_for(c.tensor), [c, a, b])
    res["guards"] = res["guards"] and _untouched(c, N)
    res["ok"] = res["ok"] and res["guards"]
    return res


def check_bmm_ld(mod, gen, Z, M, N, K, M_max, K_max):
    """A batch of products with A the slice cache[:, :M, :K] of a (Z, M_max, K_max) cache (NaN
    outside the slice) and C the first N columns of rows N + 4 long, in a buffer of M_max rows
    per matrix (the rest poisoned): 3-D tensor maps from the strides on sm_90a where they are
    16-byte multiples."""
    cache = guarded_input(randn((Z, M_max, K_max), f16, gen))
    cache.tensor[:, M:] = math.nan
    cache.tensor[..., K:] = math.nan
    b = guarded_input(randn((K, N), f16, gen))
    c = guarded_output((Z, M_max, N + 4), f32)
    view = c.tensor[:, :M, :N]
    mod.bmm_ld(cache.tensor[:, :M, :K], b.tensor, view)
    ref = cache.tensor[:, :M, :K].double() @ b.tensor.double()
    sync()
    res = compare(view, ref, tol_for(view), [c, cache, b])
    res["guards"] = res["guards"] and _untouched(c, N) and bool(c.tensor[:, M:].isnan().all().item())
    res["ok"] = res["ok"] and res["guards"]
    return res


def check_flat_gemm(mod, gen, Z, M, N, K):
    """A batch of products as one GEMM through views of A and C as (Z * M) rows: a tile of rows
    crosses from one matrix into the next where M is not a multiple of the tile's 128."""
    a, b = randn((Z, M, K), f16, gen), randn((K, N), f16, gen)
    c = guarded_output((Z, M, N), f32)
    mod.flat_gemm(guarded_input(a).tensor, guarded_input(b).tensor, c.tensor)
    return _finish(c, a.double() @ b.double())


def check_atomic_minmax(mod, gen, M):
    """Column maxima and minima by atomic_max / atomic_min from every block: float32 (tile form,
    then element form) and int32 (element form), each destination starting at the identity."""
    x = randn((M, 64), f32, gen)
    i = torch.randint(-(2**31), 2**31 - 1, (M, 64), device=harness.DEVICE, dtype=torch.int32, generator=gen)
    outs = {
        "mx": (guarded_output((64,), f32), -math.inf, x.amax(0)),
        "mn": (guarded_output((64,), f32), math.inf, x.amin(0)),
        "imax": (guarded_output((64,), torch.int32), -(2**31), i.amax(0)),
        "imin": (guarded_output((64,), torch.int32), 2**31 - 1, i.amin(0)),
    }
    for g, start, _ in outs.values():
        g.tensor.fill_(start)
    xg, ig = guarded_input(x), guarded_input(i)
    mod.col_max(xg.tensor, outs["mx"][0].tensor)
    mod.col_min(xg.tensor, outs["mn"][0].tensor, ig.tensor, outs["imax"][0].tensor, outs["imin"][0].tensor)
    sync()
    results = [compare(g.tensor, ref, 0.0, [g]) for g, _, ref in outs.values()]
    return next((r for r in results if not r["ok"]), results[0])


def _accumulator(M, N, dtype, gen, shift):
    """(guarded buffer, (M, N) tensor, its start): random start values in a poisoned buffer; with
    `shift`, the tensor starts one element in (rows not 16-byte aligned: the element atomics), and
    the element skipped stays poisoned."""
    g = guarded_output((M * N + shift,), dtype)
    view = g.tensor[shift:].view(M, N)
    view.copy_(randn((M, N), dtype, gen))
    return g, view, view.double()  # the start, read before the kernel runs


def check_atomic_add_tiles(mod, gen, S, M, N, shift):
    """Tile atomic adds from S blocks into each tile: O += sum of X's S slices (float32, from a
    shared tile), E += 2 * sum (float32, element form from a fragment), P += sum (float16 from a
    shared tile), Q += sum (bfloat16 from a float32 fragment), onto random starts."""
    x32 = randn((S, M, N), f32, gen)
    x16 = randn((S, M, N), f16, gen)
    (o, ov, o0), (e, ev, e0) = (_accumulator(M, N, f32, gen, shift) for _ in range(2))
    p, pv, p0 = _accumulator(M, N, f16, gen, shift)
    q, qv, q0 = _accumulator(M, N, torch.bfloat16, gen, shift)
    mod.add_f32(guarded_input(x32).tensor, ov, ev)
    mod.add_halfs(guarded_input(x16).tensor, pv, qv)
    s32, s16 = x32.double().sum(0), x16.double().sum(0)
    sync()
    results = [
        compare(ov, o0 + s32, tol_for(ov), [o]),
        compare(ev, e0 + 2 * s32, tol_for(ev), [e]),
        compare(pv, p0 + s16, tol_for(pv), [p]),
        compare(qv, q0 + s16, tol_for(qv), [q]),
    ]
    skipped = all(bool(g.tensor[:shift].isnan().all().item()) for g in (o, e, p, q))
    results = [{**r, "guards": r["guards"] and skipped, "ok": r["ok"] and skipped} for r in results]
    return next((r for r in results if not r["ok"]), results[0])


def check_row_scan(mod, gen, M):
    """cumsum, cummax, cummin and a reversed cummax along the rows of a float16 tile in shared memory."""
    x = randn((M, 64), f16, gen)
    outs = [guarded_output((M, 64), f16) for _ in range(4)]
    mod.row_scan(guarded_input(x).tensor, *(o.tensor for o in outs))
    xd = x.double()
    refs = [
        xd.cumsum(1),
        xd.cummax(1).values,
        xd.cummin(1).values,
        xd.flip(1).cummax(1).values.flip(1),
    ]
    sync()
    results = [compare(o.tensor, r, tol_for(o.tensor), [o]) for o, r in zip(outs, refs)]
    return next((r for r in results if not r["ok"]), results[0])


def check_block_histogram(mod, gen, N, lo, hi):
    """Atomics into shared memory, then into global memory: the histogram of N codes drawn from
    [lo, hi) (the kernel clamps them to 0..255) and their maximum."""
    codes = torch.randint(lo, hi, (N,), device=harness.DEVICE, dtype=torch.int32, generator=gen)
    kept = codes.clamp(0, 255)
    hist, top = guarded_output((256,), torch.int32), guarded_output((1,), torch.int32)
    hist.tensor.zero_()
    top.tensor.fill_(-1)
    mod.block_histogram(guarded_input(codes).tensor, hist.tensor, top.tensor)
    sync()
    results = [
        compare(hist.tensor, torch.bincount(kept.long(), minlength=256).to(torch.int32), 0.0, [hist]),
        compare(top.tensor, kept.amax().reshape(1), 0.0, [top]),
    ]
    return next((r for r in results if not r["ok"]), results[0])


def check_extern_gelu(mod, gen, N):
    """call_extern: Y = gelu(3 X + 0.5) through the device functions of extern_ops.cuh."""
    x = randn((N,), f16, gen)
    y = guarded_output((N,), f16)
    mod.extern_gelu(guarded_input(x).tensor, y.tensor)
    t = 3 * x.double() + 0.5
    return _finish(y, 0.5 * t * (1 + torch.tanh(0.7978845608028654 * (t + 0.044715 * t**3))))


# ---------------------------------------------------------------- attention


def attention_ref(q, k, v, causal: bool, scale: float | None = None):
    """softmax(q k^T * scale [+ causal mask]) v in float64, (B, H, S, D) layout."""
    q, k, v = q.double(), k.double(), v.double()
    scale = scale if scale is not None else 1.0 / math.sqrt(q.shape[-1])
    s = (q @ k.transpose(-1, -2)) * scale
    if causal:
        sq, sk = s.shape[-2], s.shape[-1]
        mask = torch.ones(sq, sk, dtype=torch.bool, device=s.device).tril()
        s = s.masked_fill(~mask, -math.inf)
    return torch.softmax(s, dim=-1) @ v


def check_flash_attention(mod, gen, B, H, S, D, causal):
    q, k, v = (randn((B, H, S, D), f16, gen) for _ in range(3))
    o = guarded_output((B, H, S, D), f16)
    mod.flash_attention(guarded_input(q).tensor, guarded_input(k).tensor, guarded_input(v).tensor, o.tensor)
    return _finish(o, attention_ref(q, k, v, causal))


def check_gqa_attention(mod, gen, B, H_kv, S, groups, D=128):
    """Causal grouped-query attention: query head h reads key/value head h // groups."""
    q = randn((B, H_kv * groups, S, D), f16, gen)
    k, v = (randn((B, H_kv, S, D), f16, gen) for _ in range(2))
    o = guarded_output((B, H_kv * groups, S, D), f16)
    mod.gqa_attention(guarded_input(q).tensor, guarded_input(k).tensor, guarded_input(v).tensor, o.tensor)
    ref = attention_ref(q, k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1), True)
    return _finish(o, ref)


def check_mla_decode(mod, gen, B, H, S, dim=512, pe_dim=64, num_split=4):
    q, q_pe = randn((B, H, dim), f16, gen), randn((B, H, pe_dim), f16, gen)
    kv, k_pe = randn((B, S, dim), f16, gen), randn((B, S, pe_dim), f16, gen)
    lse = guarded_output((B, H, num_split), f32)
    o_part = guarded_output((B, H, num_split, dim), f32)
    o = guarded_output((B, H, dim), f16)
    mod.mla_decode_partial(
        guarded_input(q).tensor,
        guarded_input(q_pe).tensor,
        guarded_input(kv).tensor,
        guarded_input(k_pe).tensor,
        lse.tensor,
        o_part.tensor,
    )
    mod.mla_decode_combine(lse.tensor, o_part.tensor, o.tensor)
    scores = (
        torch.einsum("bhd,bsd->bhs", q.double(), kv.double())
        + torch.einsum("bhd,bsd->bhs", q_pe.double(), k_pe.double())
    ) / math.sqrt(dim + pe_dim)
    ref = torch.einsum("bhs,bsd->bhd", torch.softmax(scores, dim=-1), kv.double())
    res = _finish(o, ref, [lse, o_part])
    # every partial must have been written (an empty split writes 0 and -inf, never NaN)
    unwritten = int(torch.isnan(o_part.tensor).sum().item() + torch.isnan(lse.tensor).sum().item())
    if unwritten:
        res["ok"] = False
        res["nan"] += unwritten
        res["where"] = (res["where"] + f" partials: {unwritten} NaN/unwritten").strip()
    return res


# ---------------------------------------------------------------- runtime API


def check_runtime_api(mod, gen):
    """The contract of docs/architecture.md: `tilec.runtime.load(path)` gives a module with one
    callable per kernel, taking tensors then scalars; dims come from the shapes; wrong dtypes,
    shapes, contiguity and argument counts are refused before launch; launches go to torch's
    current stream."""
    import os

    from tilec import runtime

    d = harness.prebuilt_dir()
    if d:  # the documented entry point, on the file itself
        mod = runtime.load(os.path.join(d, "gemm.cu"))
    problems = []
    if "gemm" not in getattr(mod, "kernels", {}):
        problems.append("module has no 'gemm' in .kernels")
    M, N, K = 100, 60, 40
    a, b = randn((M, K), f16, gen), randn((K, N), f16, gen)

    def refused(exc, *args, **kw):
        try:
            mod.gemm(*args, **kw)
        except exc:
            return True
        except Exception as e:  # noqa: BLE001
            problems.append(f"expected {exc.__name__}, got {type(e).__name__}: {e}")
            return True
        return False

    c_bad = torch.empty((M, N), dtype=f16, device=harness.DEVICE)
    for what, exc, args in [
        ("float32 A", TypeError, (a.float(), b, c_bad)),
        ("K mismatch", ValueError, (a, b[:-1], c_bad)),
        ("non-contiguous B", ValueError, (a, torch.empty((N, K), dtype=f16, device=harness.DEVICE).T, c_bad)),
        ("two arguments", TypeError, (a, b)),
    ]:
        if not refused(exc, *args):
            problems.append(f"{what} was not refused")
    # a side stream: the launch must be ordered on torch's current stream
    c = guarded_output((M, N), f16)
    a2, b2 = torch.full_like(a, math.nan), torch.full_like(b, math.nan)
    sync()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        if hasattr(torch.cuda, "_sleep"):
            torch.cuda._sleep(20_000_000)  # keep the side stream busy, so a launch elsewhere reads NaN
        a2.copy_(a)
        b2.copy_(b)
        mod.gemm(a2, b2, c.tensor)
    s.synchronize()
    res = _finish(c, a.double() @ b.double())
    if problems:
        res["ok"] = False
        res["where"] = ("; ".join(problems) + " " + res["where"]).strip()
    return res


# ---------------------------------------------------------------- the list

_ROWS = [
    (256, 4096, "tile multiple"),
    (64, 8192, "2 tiles"),
    (1000, 1000, "ragged < 1 tile"),
    (37, 10000, "ragged, 3 tiles"),
    (3, 1, "N=1"),
]
_ROWS_SMALL = [(256, 1024, "tile multiple"), (1000, 1000, "ragged"), (33, 777, "ragged"), (1, 5, "tiny")]


def _cases() -> list[Case]:
    cs: list[Case] = []

    def add(variant, label, fn, **sizes):
        cs.append(Case(variant, label, fn, sizes))

    for v in ("elementwise_add", "elementwise_add-bench"):
        add(v, "N=2^20", check_elementwise_add, N=1 << 20)
        add(v, "N=1000003", check_elementwise_add, N=1_000_003)
        add(v, "N=100", check_elementwise_add, N=100)

    sm90a = ("gemm-sm90a", "gemm-sm90a-128x128", "gemm-sm90a-k32")
    for v in ("gemm", "gemm-64x64", "gemm-bench-128x128", "gemm-bench-s4", "gemm-bench-k32", *sm90a):
        add(v, "256x256x256", check_gemm, M=256, N=256, K=256)
        add(v, "M=N=K=1000", check_gemm, M=1000, N=1000, K=1000)
    for v in ("gemm", *sm90a):
        add(v, "129x77x45", check_gemm, M=129, N=77, K=45)
        add(v, "1x1x1", check_gemm, M=1, N=1, K=1)
        add(v, "300x520x96 (3 k-tiles)", check_gemm, M=300, N=520, K=96)
        add(v, "1024x2048x4096", check_gemm, M=1024, N=2048, K=4096)
    for M, N, K in ((256, 256, 256), (129, 77, 45), (2000, 3000, 200)):
        add("gemm_bf16-sm90a", f"{M}x{N}x{K}", check_gemm, M=M, N=N, K=K, dtype=torch.bfloat16)
    for v in sm90a:  # persistent blocks: more tiles than multiprocessors, the ring runs on across tiles
        add(v, "2000x3000x200 (1-2 tiles per block)", check_gemm, M=2000, N=3000, K=200)
        add(v, "4096x4096x64 (one k-tile per tile)", check_gemm, M=4096, N=4096, K=64)
        add(v, "4000x8000x16 (ragged k-tile)", check_gemm, M=4000, N=8000, K=16)
    add("gemm-bench-k32", "129x77x45", check_gemm, M=129, N=77, K=45)
    # the GEMM table's forms (bench/gemm_table.py): 1000 and 1024 keep every row 16-byte aligned
    # (TMA on sm_90a, ragged tiles zero-filled); 129x77x45 does not (the launcher's cp.async build)
    table_sizes = [
        (256, 256, 256, "256x256x256"),
        (1000, 1000, 1000, "M=N=K=1000"),
        (129, 77, 45, "129x77x45"),
        (1024, 2048, 4096, "1024x2048x4096"),
        (16, 1024, 4096, "skinny 16x1024x4096"),
    ]
    for v in ("gemm_tn-sm90a", "gemm_tn", "gemm_nt-sm90a", "gemm_nt"):
        ta, tb = v.startswith("gemm_tn"), v.startswith("gemm_nt")
        for M, N, K, what in table_sizes:
            add(v, what, check_gemm_transposed, M=M, N=N, K=K, trans_a=ta, trans_b=tb)
    for v in ("bmm_bias-sm90a", "bmm_bias"):
        add(v, "B3 256x256x256", check_bmm_bias, Batch=3, M=256, N=256, K=256)
        add(v, "B2 M=N=K=1000", check_bmm_bias, Batch=2, M=1000, N=1000, K=1000)
        add(v, "B4 129x77x45", check_bmm_bias, Batch=4, M=129, N=77, K=45)
        add(v, "B8 512x512x512", check_bmm_bias, Batch=8, M=512, N=512, K=512)
        add(v, "B1 1x1x1", check_bmm_bias, Batch=1, M=1, N=1, K=1)
    for v in ("gemm-sm90a-skinny", "gemm-sm90a-skinny-n64", "gemm-sm90a-p10"):
        add(v, "256x256x256", check_gemm, M=256, N=256, K=256)
        add(v, "M=N=K=1000", check_gemm, M=1000, N=1000, K=1000)
        add(v, "129x77x45", check_gemm, M=129, N=77, K=45)
    for v in ("gemm-sm90a", "gemm-sm90a-skinny", "gemm-sm90a-skinny-n64"):
        add(v, "skinny 16x1024x4096", check_gemm, M=16, N=1024, K=4096)
        add(v, "skinny 64x8192x1024", check_gemm, M=64, N=8192, K=1024)
        add(v, "skinny 100x1000x1000", check_gemm, M=100, N=1000, K=1000)
    add("gemm", "runtime API", check_runtime_api)
    # warp roles inside the user's wave loop: the ring's counters run on across waves and skipped
    # slots (tile multiple, ragged M and N, one k step per tile: the ring wraps across tiles);
    # 129x77x45 has unaligned rows (the launcher's cp.async build)
    waves = [(1024, 2048, 512), (1000, 1944, 200), (1000, 1944, 40), (129, 77, 45)]
    for M, N, K in waves:
        add("gemm_persistent-sm90a-waves", f"{M}x{N}x{K}", check_gemm, M=M, N=N, K=K, kernel="matmul_persistent")
    for M, N, K in [(1024, 1024, 512), (600, 1000, 200), (600, 1000, 40), (1, 1, 1)]:
        add("gemm_waves-sm90a", f"{M}x{N}x{K}", check_gemm, M=M, N=N, K=K, kernel="gemm_waves")

    for v in ("gemm_relu", "gemm_relu-sm90a"):
        add(v, "256x256x256", check_gemm, M=256, N=256, K=256, kernel="gemm_relu", relu=True)
        add(v, "M=N=K=1000", check_gemm, M=1000, N=1000, K=1000, kernel="gemm_relu", relu=True)

    eight_bit = [("gemm_int8", {}), ("gemm_int8-sm90a", {}), ("gemm_uint8-sm90a", {"dtype": "uint8"})]
    eight_bit += [("gemm_fp8-sm90a", {"dtype": "e4m3"}), ("gemm_fp8_e5m2-sm90a", {"dtype": "e5m2"})]
    fp8_f16 = {"dtype": "e4m3", "out": f16}
    eight_bit += [(f"gemm_fp8-bench-sm90a{t}", fp8_f16) for t in ("", "-128x256", "-128x256-k64")]
    eight_bit += [(f"gemm_int8-bench-sm90a-{t}", {}) for t in ("128x256", "128x256-k64")]
    for v, kw in eight_bit:
        add(v, "256x256x256", check_gemm_8bit, M=256, N=256, K=256, **kw)
        add(v, "M=N=K=1000", check_gemm_8bit, M=1000, N=1000, K=1000, **kw)  # 1000-byte rows: cp.async build
        add(v, "129x77x45", check_gemm_8bit, M=129, N=77, K=45, **kw)  # likewise, every tile partial
        add(v, "300x520x96", check_gemm_8bit, M=300, N=520, K=96, **kw)  # aligned rows, partial TMA boxes
    add("gemm_int8-sm90a", "1x1x1", check_gemm_8bit, M=1, N=1, K=1)
    add("gemm_int8-sm90a", "1024x2048x4096", check_gemm_8bit, M=1024, N=2048, K=4096)

    for v in ("gemm_splitk", "gemm_splitk-sm90a"):
        add(v, "256x256x1024", check_gemm_splitk, M=256, N=256, K=1024)
        add(v, "M=N=K=1000", check_gemm_splitk, M=1000, N=1000, K=1000)
        add(v, "K=50 (empty splits)", check_gemm_splitk, M=200, N=130, K=50)

    for v, rows in (("softmax", _ROWS), ("softmax-small", _ROWS_SMALL), ("softmax-bench", _ROWS[:4])):
        for M, N, what in rows:
            add(v, f"{M}x{N} {what}", check_softmax, M=M, N=N)
    for v, rows in (("rmsnorm", _ROWS), ("rmsnorm-small", _ROWS_SMALL), ("rmsnorm-bench", _ROWS[:4])):
        for M, N, what in rows:
            add(v, f"{M}x{N} {what}", check_rmsnorm, M=M, N=N)
    add("rmsnorm", "2^31 - 32768 elements, and 2^31 + 32768 refused", check_index_limit)
    for v, rows in (("layernorm", _ROWS), ("layernorm-small", _ROWS_SMALL)):
        for M, N, what in rows:
            add(v, f"{M}x{N} {what}", check_layernorm, M=M, N=N)

    fa_sizes = [
        (2, 4, 256, "S=256"),
        (1, 3, 1000, "S=1000 ragged"),
        (2, 2, 77, "S=77 ragged"),
        (1, 2, 1, "S=1"),
        (1, 1, 4097, "S=4097 ragged"),
        (2, 8, 2048, "S=2048: more tiles than blocks, so a block walks several (its ring counters run on)"),
    ]
    for v, causal in (
        ("flash_attention", False),
        ("flash_attention-causal", True),
        ("flash_attention-sm90a", False),
        ("flash_attention-causal-sm90a", True),
        ("flash_attention-bench-n32", False),
        ("flash_attention-bench-s1", False),
        ("flash_attention-causal-bench-s1", True),
        ("flash_attention-bench-sm90a-t256", False),
        ("flash_attention-causal-bench-sm90a-t256", True),
        ("flash_attention-bench-sm90a-n128", False),
        ("flash_attention-causal-bench-sm90a-n128", True),
    ):
        for B, H, S, what in fa_sizes:
            add(v, f"B{B} H{H} {what}", check_flash_attention, B=B, H=H, S=S, D=128, causal=causal)
    add("flash_attention-d64", "B2 H4 S=300 D=64", check_flash_attention, B=2, H=4, S=300, D=64, causal=False)
    for v, causal in (
        ("flash_attention-sm90a-overlap", False),
        ("flash_attention-causal-sm90a-overlap", True),
        ("flash_attention-d64-bench-sm90a-n64", False),
        ("flash_attention-d64-causal-bench-sm90a-n64", True),
        ("flash_attention-d64-bench-sm90a-m192", False),
        ("flash_attention-d64-causal-bench-sm90a-m192", True),
    ):
        for B, H, S, what in fa_sizes:
            add(v, f"B{B} H{H} {what} D=64", check_flash_attention, B=B, H=H, S=S, D=64, causal=causal)
    for v, causal in (
        ("flash_attention-d256-bench-sm90a", False),
        ("flash_attention-d256-bench-sm90a-n32", False),
        ("flash_attention-d256-causal-bench-sm90a", True),
        ("flash_attention-d256-causal-bench-sm90a-n32", True),
        ("flash_attention-d256-bench-sm90a-n80", False),
        ("flash_attention-d256-causal-bench-sm90a-n80", True),
    ):
        for B, H, S, what in fa_sizes:
            add(v, f"B{B} H{H} {what} D=256", check_flash_attention, B=B, H=H, S=S, D=256, causal=causal)
    for v in ("gqa_attention-sm90a", "gqa_attention-bench-sm90a-n64"):
        for B, H, S, what in fa_sizes:
            add(v, f"B{B} H{4 * H} over {H} {what}", check_gqa_attention, B=B, H_kv=H, S=S, groups=4)

    for v in ("dequant_gemm", "dequant_gemm-sm90a"):
        add(v, "256x256x256", check_dequant_gemm, M=256, N=256, K=256)
        add(v, "M=N=K=1000", check_dequant_gemm, M=1000, N=1000, K=1000)
        add(v, "GEMV M=1 N=512 K=4096", check_dequant_gemm, M=1, N=512, K=4096)

    conv_sizes = [
        (2, 256, 128, "tile multiple"),
        (3, 1000, 100, "ragged, unaligned rows"),
        (4, 67, 72, "ragged"),
        (1, 5, 3, "L < block_L, C < 8"),
        (2, 2, 64, "L < K"),
    ]
    for v, K in (("conv1d_halo", 4), ("conv1d_halo-sm90a", 4), ("conv1d_halo-k7", 7)):
        for B, L, C, what in conv_sizes:
            add(v, f"B{B} L{L} C{C} {what}", check_conv1d_halo, B=B, L=L, C=C, K=K)
    stencil_sizes = [(256, 256, "tile multiple"), (1000, 1000, "ragged"), (33, 65, "ragged, odd W"), (1, 1, "1x1")]
    stencil_sizes += [(130, 2, "W=2")]
    for v in ("stencil", "stencil-sm90a"):
        for H, W, what in stencil_sizes:
            add(v, f"{H}x{W} {what}", check_stencil, H=H, W=W)

    for v in ("atomic_minmax", "atomic_minmax-sm90a"):
        for M, what in ((256, "16 blocks"), (1000, "ragged"), (5, "one ragged block")):
            add(v, f"M={M} {what}", check_atomic_minmax, M=M)
    for N, lo, hi, what in ((65536, 0, 256, "16 blocks"), (10001, -10, 266, "ragged, clamped"), (7, 0, 200, "N=7")):
        add("block_histogram", f"N={N} {what}", check_block_histogram, N=N, lo=lo, hi=hi)
    atomic_sizes = [
        (3, 128, 256, 0, "tile multiple"),
        (4, 100, 72, 0, "ragged, aligned rows"),
        (2, 37, 70, 0, "ragged, rows not 16-byte multiples"),
        (3, 64, 128, 1, "tile multiple, not aligned"),
    ]
    for v in ("atomic_add_tiles", "atomic_add_tiles-sm90a"):
        for S, M, N, shift, what in atomic_sizes:
            add(v, f"S={S} {M}x{N} {what}", check_atomic_add_tiles, S=S, M=M, N=N, shift=shift)
    for N, what in ((4096, "tile multiple"), (1000, "ragged"), (3, "N=3")):
        add("extern_gelu", f"N={N} {what}", check_extern_gelu, N=N)
    for v in ("row_scan", "row_scan-sm90a"):
        for M, what in ((128, "2 blocks"), (100, "ragged"), (1, "one row")):
            add(v, f"M={M} {what}", check_row_scan, M=M)
    for v in ("row_bits", "row_bits-sm90a"):
        for M, what in ((64, "tile multiple"), (37, "ragged"), (1, "one row")):
            add(v, f"M={M} {what}", check_row_bits, M=M)
    for M, what in ((64, "16 blocks"), (37, "ragged"), (1, "one row")):
        add("frag_scan", f"M={M} {what}", check_frag_scan, M=M)
    for v in ("paged_gather", "paged_gather-sm90a"):
        for P, NB, T, what in ((40, 5, 7, "7 pages a block"), (9, 3, 1, "one page: below the stages"), (64, 2, 33, "")):
            add(v, f"P={P} NB={NB} T={T} {what}", check_paged_gather, P=P, NB=NB, T=T)
    schedule_sizes = [(2, 3, 256, "4 key tiles"), (1, 2, 64, "one key tile"), (2, 2, 100, "2 tiles, ragged")]
    schedule_sizes += [(1, 3, 1000, "16 tiles, ragged"), (1, 1, 5, "S=5")]
    for v in ("attention_schedule", "attention_schedule-sm90a"):
        for B, H, S, what in schedule_sizes:
            add(v, f"B{B} H{H} S={S} {what}", check_attention_schedule, B=B, H=H, S=S)
    for v in ("gemm_schedule", "gemm_schedule-sm90a"):
        for M, N, K, what in (
            (256, 256, 256, "8 k tiles"),
            (100, 70, 33, "ragged, 2 k tiles"),
            (64, 64, 32, "1 k tile"),
        ):
            add(v, f"{M}x{N}x{K} {what}", check_gemm_schedule, M=M, N=N, K=K)
        add(v, "1000x1000x1000 ragged", check_gemm_schedule, M=1000, N=1000, K=1000)
    blocksparse = [("blocksparse_gemm", 64, 64), ("blocksparse_gemm-sm90a", 64, 64)]
    blocksparse += [("blocksparse_gemm-sm90a-128x128-s4", 128, 128)]
    for v, bm, bn in blocksparse:
        for mt, nt, K, extra, what in (
            (4, 3, 512, 0, "tile multiple, 16 K tiles"),
            (2, 4, 200, 0, "ragged K"),
            (3, 2, 100, 0, "ragged K, rows not 16-byte aligned"),
            (2, 2, 32, 0, "one K tile: below the stages"),
            (3, 2, 96, 8, "ragged M and N: tiles past the mask"),
            (24, 20, 256, 8, "more tiles than blocks (the ring runs on across a block's tiles), ragged M and N"),
        ):
            M, N = mt * bm + extra, nt * bn + extra
            add(v, f"{M}x{N}x{K} {what}", check_blocksparse_gemm, M=M, N=N, K=K, bm=bm, bn=bn, bk=32)
    for v in ("row_argmax", "row_argmax-sm90a"):
        for M, what in ((64, "tile multiple"), (37, "ragged"), (1, "one row")):
            add(v, f"M={M} {what}", check_row_argmax, M=M)
    for v in ("scaled_gemm", "scaled_gemm-sm90a"):
        for M, N, what in ((256, 256, "tile multiple"), (200, 136, "ragged"), (1, 8, "one row")):
            add(v, f"M={M} N={N} {what}", check_scaled_gemm, M=M, N=N)
    for v in ("subbyte_unpack", "subbyte_unpack-sm90a"):
        for M, N, what in ((64, 128, "tile multiple"), (37, 100, "ragged"), (1, 2, "one byte")):
            add(v, f"{M}x{N} {what}", check_subbyte_unpack, M=M, N=N)
    for v in ("gemm_int4", "gemm_int4-sm90a"):
        add(v, "512x512x512", check_gemm_int4, M=512, N=512, K=512)
        add(v, "ragged 999x1000x1000", check_gemm_int4, M=999, N=1000, K=1000)
        add(v, "GEMV M=1 N=256 K=4098", check_gemm_int4, M=1, N=256, K=4098)
    for v in ("dequant_gemm_w4", "dequant_gemm_w4-sm90a"):
        add(v, "256x256x256", check_dequant_gemm_w4, M=256, N=256, K=256)
        add(v, "ragged 999x1000x1000", check_dequant_gemm_w4, M=999, N=1000, K=1000)
        add(v, "GEMV M=1 N=512 K=4096", check_dequant_gemm_w4, M=1, N=512, K=4096)
    for v in ("dequant_gemm_mxfp4", "dequant_gemm_mxfp4-sm90a"):
        add(v, "256x256x256", check_dequant_gemm_mxfp4, M=256, N=256, K=256)
        add(v, "ragged 999x1000x1000", check_dequant_gemm_mxfp4, M=999, N=1000, K=1000)
        add(v, "GEMV M=1 N=512 K=4096", check_dequant_gemm_mxfp4, M=1, N=512, K=4096)

    kv_sizes = [
        (2, 3, 128, 192, 64, 64, "tile multiple, a slice of the cache"),
        (1, 2, 100, 130, 72, 80, "ragged S and D, B=1"),
        (2, 2, 37, 40, 40, 43, "rows not 16-byte aligned"),
        (3, 1, 64, 64, 32, 32, "the whole cache: contiguous"),
    ]
    for v in ("strided_views", "strided_views-sm90a"):
        for B, H, S, S_max, D, D_max, what in kv_sizes:
            sizes = {"B": B, "H": H, "S": S, "S_max": S_max, "D": D, "D_max": D_max}
            add(v, f"kv B{B} H{H} S{S}/{S_max} D{D}/{D_max} {what}", check_kv_scores, **sizes)
        for M, N, what in ((64, 512, "tile multiple"), (37, 300, "ragged"), (1, 5, "one row")):
            add(v, f"rows M={M} N={N} {what}", check_scale_rows, M=M, N=N)
        for M, N, K, lda, ldb, ldc, what in (
            (256, 256, 256, 264, 264, 264, "tile multiple, 16-byte pitches"),
            (300, 200, 100, 104, 208, 216, "ragged, 16-byte pitches"),
            (300, 200, 100, 101, 203, 205, "ragged, unaligned pitches: fallback"),
        ):
            sizes = {"M": M, "N": N, "K": K, "lda": lda, "ldb": ldb, "ldc": ldc}
            add(v, f"gemm {M}x{N}x{K} ld {lda}/{ldb}/{ldc} {what}", check_gemm_ld, **sizes)
        for Z, M, N, K, M_max, K_max, what in (
            (2, 128, 128, 128, 192, 136, "tile multiple, a slice"),
            (3, 100, 200, 72, 130, 80, "ragged"),
            (2, 37, 50, 40, 40, 43, "unaligned rows: fallback"),
        ):
            sizes = {"Z": Z, "M": M, "N": N, "K": K, "M_max": M_max, "K_max": K_max}
            add(v, f"bmm Z{Z} {M}x{N}x{K} of {M_max}x{K_max} {what}", check_bmm_ld, **sizes)
        for Z, M, N, K, what in (
            (3, 128, 128, 96, "tile multiple"),
            (2, 100, 200, 64, "tiles across matrices"),
            (1, 37, 50, 40, "ragged, unaligned rows"),
        ):
            add(v, f"flat gemm Z{Z} {M}x{N}x{K} {what}", check_flat_gemm, Z=Z, M=M, N=N, K=K)

    add("mla_decode", "B2 H64 S=1024", check_mla_decode, B=2, H=64, S=1024)
    add("mla_decode", "B3 H20 S=1000 ragged", check_mla_decode, B=3, H=20, S=1000)
    add("mla_decode", "B1 H16 S=50 empty splits", check_mla_decode, B=1, H=16, S=50)
    return cs


CASES: list[Case] = _cases()
BY_ID: dict[str, Case] = {c.id: c for c in CASES}
assert len(BY_ID) == len(CASES), "duplicate case ids"
