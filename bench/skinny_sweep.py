"""Skinny-M GEMMs (M = 16, 64, 128 rows x 8192 x 8192, fp16) through every .cu of a folder
(examples/gemm.tile at the -D values its name gives), each checked against torch.matmul with the
output poisoned, then timed beside cuBLAS (bench/run.py's bench, cuBLAS before and after) and
against the copy bandwidth of the same run.

    # here: one build per configuration (bench/README, "Skinny-M configurations")
    .venv/bin/tilec build examples/gemm.tile --arch sm_90a -D block_M=64 -D block_N=32 \
        -D block_K=128 -D num_stages=8 -D threads=128 -o .skinny/m64-n32-k128-s8-t128.cu
    # on the GPU machine, .skinny carried
    python3 bench/skinny_sweep.py .skinny
"""

import glob
import os
import sys

import torch

sys.path.insert(0, "src")
sys.path.insert(0, "bench")
from run import bench, rel_err, timed  # noqa: E402

from tilec import runtime  # noqa: E402

N = K = 8192


def copy_bandwidth() -> float:
    """GB/s of torch's copy of 1 GiB (bytes read and written), as the GEMM table measures it."""
    x = torch.empty(1 << 29, device="cuda", dtype=torch.float16)
    y = torch.empty_like(x)
    ms = bench([lambda: y.copy_(x)])["ms"]
    return 2 * x.numel() * 2 / ms / 1e6


def cell(M: int, mods: dict, copy_gbs: float) -> None:
    g = torch.Generator(device="cuda").manual_seed(M)

    def rnd(*shape):
        return torch.randn(*shape, device="cuda", dtype=torch.float16, generator=g)

    sets = [(rnd(M, K), rnd(K, N)) for _ in range(2)]
    nbytes = 2 * (M * K + K * N + M * N)
    outs = [torch.empty(M, N, device="cuda", dtype=torch.float16) for _ in sets]
    cub = [timed([lambda a=a, b=b: torch.matmul(a, b) for a, b in sets])["ms"]]
    rows = []
    for name, mod in mods.items():
        a, b = sets[0]
        out = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float16)
        mod.gemm(a, b, out)
        torch.cuda.synchronize()
        err = rel_err(out, torch.matmul(a.float(), b.float()))
        if not err <= 1e-2:
            rows.append((name, None, err))
            continue
        t = timed([lambda a=a, b=b, o=o, m=mod: m.gemm(a, b, o) for (a, b), o in zip(sets, outs)])
        rows.append((name, t["ms"], err))  # back to back, as cuBLAS is timed
    cub.append(timed([lambda a=a, b=b: torch.matmul(a, b) for a, b in sets])["ms"])
    c = sum(cub) / 2
    print(
        f"\nM={M}: cuBLAS {c:.4f} ms ({nbytes / c / 1e6:.0f} GB/s, {nbytes / c / 1e6 / copy_gbs:.0%} of copy; "
        f"runs {cub[0]:.4f} {cub[1]:.4f})"
    )
    for name, ms, err in sorted(rows, key=lambda r: r[1] or 1e9):
        if ms is None:
            print(f"  {name:24s} WRONG rel err {err:.2e}")
            continue
        gbs = nbytes / ms / 1e6
        print(
            f"  {name:24s} {ms:.4f} ms {gbs:6.0f} GB/s {gbs / copy_gbs:4.0%} of copy  "
            f"speed {c / ms:.2f}x cuBLAS  (rel {err:.1e})"
        )


def main() -> None:
    torch.backends.cuda.matmul.allow_tf32 = False
    copy_gbs = copy_bandwidth()
    print(f"copy of 1 GiB: {copy_gbs:.0f} GB/s")
    mods = {os.path.basename(p)[:-3]: runtime.load(p) for p in sorted(glob.glob(f"{sys.argv[1]}/*.cu"))}
    for M in (16, 64, 128):
        cell(M, mods, copy_gbs)


if __name__ == "__main__":
    main()
