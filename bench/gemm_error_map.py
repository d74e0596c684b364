"""Where a GEMM build goes wrong, tile by tile (run on the GPU machine, from the repo root):

    PYTHONPATH=src python3 bench/gemm_error_map.py BUILD.cu [MxNxK ...]

BUILD.cu is a .cu file tilec built from a GEMM program whose kernel is `gemm(A, B, C)` with A
(M, K), B (K, N), C (M, N), fp16 (examples/gemm.tile and its -D variants). At each size (default:
one, two, three and nine 128-row tile rows), C is poisoned with NaN, the build runs once, and a
map prints one cell per 128-row x 64-column block of C: `ok` (relative error at most 1e-2), the
relative error, or `NaN` (not written). A wrong block in the same place of every second tile row,
or in the later column blocks only, points at the part of the kernel that differs there (a
cluster's second block, the epilogue's later stores)."""

from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src"))
from tilec import runtime  # noqa: E402

SIZES = ((128, 256, 64), (256, 256, 64), (384, 264, 136), (1152, 520, 200))


def block_map(c: torch.Tensor, ref: torch.Tensor) -> list[str]:
    """One line per 128-row tile row of C, one cell per 64 columns."""
    lines = []
    for i in range(0, c.shape[0], 128):
        cells = []
        for j in range(0, c.shape[1], 64):
            got, want = c[i : i + 128, j : j + 64].double(), ref[i : i + 128, j : j + 64]
            if torch.isnan(got).any():
                cells.append("NaN ")
                continue
            err = ((got - want).norm() / want.norm()).item()
            cells.append("ok  " if err <= 1e-2 else f"{err:.1f}")
        lines.append(" ".join(cells))
    return lines


def main() -> None:
    mod = runtime.load(sys.argv[1])
    sizes = [tuple(int(x) for x in s.split("x")) for s in sys.argv[2:]] or SIZES
    for m, n, k in sizes:
        g = torch.Generator(device="cuda").manual_seed(0)
        a = torch.randn(m, k, device="cuda", dtype=torch.float16, generator=g)
        b = torch.randn(k, n, device="cuda", dtype=torch.float16, generator=g)
        c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
        mod.gemm(a, b, c)
        torch.cuda.synchronize()
        print(f"{m}x{n}x{k}:", *block_map(c, a.double() @ b.double()), sep="\n  ", flush=True)


if __name__ == "__main__":
    main()
