"""Dry run of the GPU checks' own code on the CPU: every case of cases.py against torch stand-ins
for the kernels (so the references, signatures, guards and comparisons are right before any
device time is spent), and a few planted bugs that the checks must catch. Needs torch (CPU is
enough); skipped without it.
"""

from __future__ import annotations

import math
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

torch = pytest.importorskip("torch")

import harness  # noqa: E402
from variants import BY_NAME  # noqa: E402

f32 = torch.float32


@pytest.fixture(autouse=True)
def on_cpu(monkeypatch):
    monkeypatch.setattr(harness, "DEVICE", "cpu")


class Fake:
    """torch stand-ins with the launchers' signatures; `bug` plants a fault."""

    def __init__(self, defines: dict[str, str], bug: str | None = None):
        self.d = defines
        self.bug = bug

    def _store(self, out, value):
        out.copy_(value.to(out.dtype))
        if self.bug == "unwritten":
            out.view(-1)[-1] = math.nan
        elif self.bug == "overrun":
            torch.as_strided(out, (out.numel() + 1,), (1,), out.storage_offset())[-1] = 0
        elif self.bug == "wrong":
            out.view(-1)[out.numel() // 2] += 1

    def elementwise_add(self, a, b, c):
        self._store(c, a.float() + b.float())

    def gemm(self, a, b, c):
        self._store(c, a.float() @ b.float())

    def matmul_persistent(self, a, b, c):  # tests/corpus/tilelang/gemm_persistent.tile
        self._store(c, a.float() @ b.float())

    def gemm_waves(self, a, b, c):
        self._store(c, a.float() @ b.float())

    def gemm_tn(self, a, b, c):  # A stored (K, M)
        self._store(c, a.float().T @ b.float())

    def gemm_nt(self, a, b, c):  # B stored (N, K)
        self._store(c, a.float() @ b.float().T)

    def bmm_bias(self, a, b, bias, c):
        self._store(c, a.float() @ b.float() + bias.float())

    def gemm_relu(self, a, b, c):
        self._store(c, (a.float() @ b.float()).clamp_min(0))

    def gemm_int8(self, a, b, c):  # B stored (N, K); int8 sums exactly in float64
        self._store(c, a.double() @ b.double().T)

    def gemm_splitk(self, a, b, c):
        self._store(c, c + a.float() @ b.float())

    def dequant_gemm(self, a, packed, scale, c):
        lo, hi = (packed & 15).int(), (packed >> 4).int()
        codes = torch.stack([lo, hi], dim=-1).reshape(packed.shape[0], -1)
        w = ((codes - 8).float() * scale.float()[:, None]).half().float()
        self._store(c, a.float() @ w.T)

    def softmax(self, x, y):
        self._store(y, torch.softmax(x.float(), -1))

    def rmsnorm(self, x, w, y, eps):
        xf = x.float()
        self._store(y, xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.float())

    def layernorm(self, x, w, b, y, eps):
        self._store(y, torch.nn.functional.layer_norm(x.float(), (x.shape[-1],), w.float(), b.float(), eps))

    def flash_attention(self, q, k, v, o):
        from cases import attention_ref

        self._store(o, attention_ref(q, k, v, self.d.get("is_causal") == "True").float())

    def attention_schedule(self, q, k, v, o):
        from cases import attention_ref

        self._store(o, attention_ref(q, k, v, False).float())

    def gemm_schedule(self, a, b, c):
        self._store(c, a.float() @ b.float())

    def conv1d_halo(self, x, w, y):
        B, L, C = x.shape
        K = w.shape[0]
        if self.bug == "halo":  # no lower-edge guard: the K - 1 rows before each sequence are read
            rows = _around(x, (K - 1) * C, 0).view(-1, C)
            xp = torch.stack([rows[b * L : b * L + L + K - 1] for b in range(B)])
        else:
            xp = torch.nn.functional.pad(x.float(), (0, 0, K - 1, 0))
        self._store(y, sum(w[k].float() * xp[:, k : k + L].float() for k in range(K)))

    def stencil(self, x, y, alpha, beta):
        H, W = x.shape
        if self.bug == "halo":  # no lower-edge guard: row -1 and column -1 are the memory before
            xp = torch.as_strided(x, (H + 2, W + 2), (W, 1), x.storage_offset() - W - 1).float()
        else:
            xp = torch.nn.functional.pad(x.float(), (1, 1, 1, 1))
        near = xp[:-2, 1:-1] + xp[2:, 1:-1] + xp[1:-1, :-2] + xp[1:-1, 2:]
        self._store(y, alpha * xp[1:-1, 1:-1] + beta * near)

    def block_histogram(self, codes, hist, top):
        kept = codes.clamp(0, 255)
        hist.copy_(hist + torch.bincount(kept.long(), minlength=256).to(hist.dtype))
        self._store(top, torch.maximum(top, kept.amax().reshape(1)))

    def extern_gelu(self, x, y):
        t = 3 * x.float() + 0.5
        self._store(y, 0.5 * t * (1 + torch.tanh(0.7978845608028654 * (t + 0.044715 * t**3))))

    def row_bits(self, x, a, o, y):
        import functools

        for out, op in ((a, torch.bitwise_and), (o, torch.bitwise_or), (y, torch.bitwise_xor)):
            self._store(out, functools.reduce(op, x.unbind(1)))

    def frag_scan(self, x, s, r, c):
        xf = x.float()
        M = x.shape[0]
        blocks = torch.cat([xf, xf.new_zeros((-M % 4, 64))]).reshape(-1, 4, 64)
        self._store(s, 2 * xf.cumsum(1))
        self._store(r, xf.flip(1).cummax(1).values.flip(1))
        self._store(c, blocks.cummin(1).values.reshape(-1, 64)[:M])

    def paged_gather(self, a, table, b, c):
        self._store(c, torch.einsum("btij,jk->bik", a.float()[table.long()], b.float()))

    def kv_scores(self, q, k, o):
        self._store(o, torch.einsum("bhid,bshd->bhis", q.float(), k.float()))

    def scale_rows(self, x, bias, y):
        if y.stride(0) != y.shape[1] + 8:
            raise ValueError(f"scale_rows: Y.stride(0) must be N + 8 = {y.shape[1] + 8}, got {y.stride(0)}")
        self._store(y, 2 * x.float() + bias.float())

    def gemm_ld(self, a, b, c):
        self._store(c, a.float() @ b.float())

    def bmm_ld(self, a, b, c):
        self._store(c, a.float() @ b.float())

    def flat_gemm(self, a, b, c):
        self._store(c, a.float() @ b.float())

    def row_argmax(self, x, i, v, j):
        xf = x.float()
        self._store(i, xf.argmax(1).int())
        self._store(v, xf.amax(1))
        self._store(j, xf.argmin(1).int())

    def int_argmin(self, x, j, w):
        self._store(j, x.argmin(1).int())
        self._store(w, x.amin(1))

    def col_max(self, x, mx):
        self._store(mx, torch.maximum(mx, x.amax(0)))

    def col_min(self, x, mn, i, imax, imin):
        mn.copy_(torch.minimum(mn, x.amin(0)))
        imax.copy_(torch.maximum(imax, i.amax(0)))
        self._store(imin, torch.minimum(imin, i.amin(0)))

    def row_scan(self, x, s, mx, mn, r):
        xf = x.float()
        self._store(s, xf.cumsum(1))
        self._store(mx, xf.cummax(1).values)
        self._store(mn, xf.cummin(1).values)
        self._store(r, xf.flip(1).cummax(1).values.flip(1))

    # MLA: the tile algorithm itself (splits of whole tiles, exp2 domain), in float32
    def mla_decode_partial(self, q, q_pe, kv, k_pe, lse, o_part):
        dim, pe_dim = q.shape[-1], q_pe.shape[-1]
        num_split, block_n = lse.shape[-1], int(self.d.get("block_N", 32))
        scale = (1.0 / (dim + pe_dim)) ** 0.5 * 1.4426950408889634
        S = kv.shape[1]
        tiles = math.ceil(S / block_n)
        per = math.ceil(tiles / num_split)
        s_all = torch.einsum("bhd,bsd->bhs", q.float(), kv.float()) + torch.einsum(
            "bhd,bsd->bhs", q_pe.float(), k_pe.float()
        )
        for z in range(num_split):
            lo, hi = z * per * block_n, min((z * per + per) * block_n, S)
            if lo >= hi:
                lse[:, :, z] = -math.inf
                o_part[:, :, z, :] = 0
                continue
            s = s_all[:, :, lo:hi]
            m = s.amax(-1, keepdim=True)
            p = torch.exp2(s * scale - m * scale)
            ls = p.sum(-1)
            o_part[:, :, z, :] = torch.einsum("bhs,bsd->bhd", p, kv[:, lo:hi].float()) / ls[..., None]
            lse[:, :, z] = torch.log2(ls) + m[..., 0] * scale

    def mla_decode_combine(self, lse, o_part, o):
        lmax = lse.amax(-1, keepdim=True)
        w = torch.exp2(lse - lmax)
        w = w / w.sum(-1, keepdim=True)
        self._store(o, (o_part * w[..., None]).sum(-2))


def _around(t, before: int, after: int):
    """The memory of `t` (contiguous) with `before` elements ahead of it and `after` past it, as one
    flat tensor: what a kernel without bound checks would read."""
    return torch.as_strided(t, (before + t.numel() + after,), (1,), t.storage_offset() - before)


def _cases():
    from cases import CASES

    return CASES


@pytest.mark.parametrize("case", [c for c in _cases() if c.label != "runtime API"], ids=lambda c: c.id)
def test_case_passes_with_correct_standin(case):
    res = case.run(Fake(BY_NAME[case.variant].defines))
    assert res["ok"], harness.summarize(res)


@pytest.mark.parametrize("bug", ["unwritten", "overrun", "wrong"])
@pytest.mark.parametrize(
    "variant",
    [
        "gemm",
        "softmax",
        "flash_attention-causal",
        "mla_decode",
        "gemm_splitk",
        "gemm_tn",
        "gemm_nt",
        "bmm_bias",
        "conv1d_halo",
        "stencil",
    ],
)
def test_planted_bug_is_caught(bug, variant):
    case = next(c for c in _cases() if c.variant == variant)
    res = case.run(Fake(BY_NAME[variant].defines, bug))
    assert not res["ok"], f"{bug} in {variant} went unnoticed: {harness.summarize(res)}"


@pytest.mark.parametrize("variant", ["gemm_tn", "gemm_nt", "bmm_bias"])
def test_layout_mistake_is_caught(variant):
    """A kernel that ignores the stored layout (reads A or B untransposed, or adds no bias) fails."""

    class Wrong(Fake):
        def gemm_tn(self, a, b, c):
            self._store(c, a.float() @ b.float())  # square case: the shapes fit, the values do not

        def gemm_nt(self, a, b, c):
            self._store(c, a.float() @ b.float())

        def bmm_bias(self, a, b, bias, c):
            self._store(c, a.float() @ b.float())

    square = ("256x256x256", "B3 256x256x256")
    case = next(c for c in _cases() if c.variant == variant and c.label in square)
    res = case.run(Wrong(BY_NAME[variant].defines))
    assert not res["ok"], f"a layout mistake in {variant} went unnoticed: {harness.summarize(res)}"


@pytest.mark.parametrize(
    "case", [c for c in _cases() if c.variant.startswith(("conv1d_halo", "stencil"))], ids=lambda c: c.id
)
def test_unguarded_halo_is_caught(case):
    """A kernel that reads its halo without the lower-edge check (the memory before the tensor, or
    the previous sequence's rows) fails every case of the halo examples."""
    res = case.run(Fake(BY_NAME[case.variant].defines, "halo"))
    assert not res["ok"], f"an unguarded halo in {case.id} went unnoticed: {harness.summarize(res)}"


def _dense(t):
    """The memory of view `t` read as if `t` were contiguous: what a kernel that ignored its
    tensor's strides would read."""
    strides = [1]
    for n in reversed(t.shape[1:]):
        strides.insert(0, strides[0] * n)
    return torch.as_strided(t, t.shape, strides, t.storage_offset())


@pytest.mark.parametrize(
    "case",
    [
        c
        for c in _cases()
        if c.variant == "strided_views"
        and not c.label.endswith(("contiguous", "one row"))
        and not c.label.startswith("flat gemm")  # (views inside the kernel, of contiguous tensors)
    ],
    ids=lambda c: c.id,
)
def test_ignored_strides_are_caught(case):
    """A kernel that reads its views as if they were contiguous fails every case of the strided
    views' check whose inputs are real views (the whole cache, or one row of a transpose, are not)."""

    class Dense(Fake):
        def kv_scores(self, q, k, o):
            super().kv_scores(q, _dense(k), o)

        def scale_rows(self, x, bias, y):
            super().scale_rows(_dense(x), bias, y)

        def gemm_ld(self, a, b, c):
            super().gemm_ld(_dense(a), _dense(b), c)

        def bmm_ld(self, a, b, c):
            super().bmm_ld(_dense(a), b, c)

    res = case.run(Dense(BY_NAME[case.variant].defines))
    assert not res["ok"], f"ignored strides in {case.id} went unnoticed: {harness.summarize(res)}"
