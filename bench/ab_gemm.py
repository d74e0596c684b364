"""Interleaved A/B of GEMM builds on the GPU: builds that differ by a few percent, timed so that the
clocks' drift (a power-limited H100 swings its 8192^3 medians by 5% within a minute) falls on all
of them alike.

    PYTHONPATH=src python3 bench/ab_gemm.py old.cu,new.cu [--rounds 30] [--sizes 8192,4096]
        [--tilelang .tilelang/tilelang-site312.tar.xz]

Each argument is a .cu file tilec built from a GEMM program whose kernel is `gemm(A, B, C)` with
A (M, K), B (K, N), C (M, N), fp16 (examples/gemm.tile and its -D variants). Every build is first
checked against torch at square, ragged and small sizes with its output poisoned (NaN); a wrong
build is reported and not timed. Then, per size, R rounds: in each, every build, cuBLAS
(torch.matmul) and TileLang's GEMM example (bench/gemm_table.py's program, when the archive of
/work/shared/anchors/pack-tilelang.sh is there) run one batch of back-to-back calls between CUDA
events, in an order rotated round by round. Reported per build: the median time over rounds,
its quartiles, and the median over rounds of cuBLAS's time in that round over the build's (a
speed ratio; drift within a round cancels). The log goes to stdout (and $OUT/ab_gemm.txt).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "src"))

# (odd numbers of 128-row tiles too: 1152 and 128 rows leave a cluster's second block past the last)
CHECK_SIZES = (
    (4096, 4096, 4096),
    (1000, 1048, 776),
    (256, 256, 64),
    (2048, 512, 8192),
    (1152, 520, 200),
    (128, 256, 64),
)
TOL = 1e-2


def rotated(names: list[str], r: int) -> list[str]:
    """Round r's order: the names rotated by r, so that each runs first, second, ... in turn."""
    k = r % len(names) if names else 0
    return names[k:] + names[:k]


def speed_ratio(reference: list[float], times: list[float]) -> float:
    """Median over rounds of reference time / build time (above 1.0: the build is faster)."""
    return statistics.median(ref / t for ref, t in zip(reference, times, strict=True))


def calls_per_batch(size: int, batch_ms: float = 15.0, rate: float = 650e12) -> int:
    """Calls in one timed batch of a size^3 GEMM: about `batch_ms` at `rate` FLOP/s (an H100's or
    H200's fp16 rate), so that the events' and launches' cost stays small beside it."""
    call_ms = 2 * size**3 / rate * 1e3
    return max(1, min(200, round(batch_ms / call_ms)))


def quartiles(times: list[float]) -> tuple[float, float]:
    ordered = sorted(times)
    return ordered[len(ordered) // 4], ordered[3 * len(ordered) // 4]


def check(mods: dict, torch) -> dict[str, bool]:  # noqa: ANN001 - torch, imported by main
    from run import rel_err

    ok = dict.fromkeys(mods, True)
    g = torch.Generator(device="cuda").manual_seed(11)
    for M, N, K in CHECK_SIZES:
        a = torch.randn(M, K, device="cuda", dtype=torch.float16, generator=g)
        b = torch.randn(K, N, device="cuda", dtype=torch.float16, generator=g)
        ref = a.float() @ b.float()
        for name, mod in mods.items():
            c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float16)
            mod.gemm(a, b, c)
            torch.cuda.synchronize()
            err = rel_err(c, ref)
            ok[name] &= err <= TOL
            print(f"check {M}x{N}x{K} {name}: rel err {err:.1e} {'ok' if err <= TOL else 'WRONG'}", flush=True)
    return ok


def time_rounds(fns: dict, rounds: int, inner: int, torch) -> dict[str, list[float]]:  # noqa: ANN001
    for f in fns.values():  # warm-up
        for _ in range(3):
            f()
    names = list(fns)
    times: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        for n in rotated(names, r):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(inner):
                fns[n]()
            end.record()
            torch.cuda.synchronize()
            times[n].append(start.elapsed_time(end) / inner)
    return times


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("builds", help="comma-separated .cu files")
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--sizes", default="8192,4096", help="square sizes, comma-separated")
    ap.add_argument("--tilelang", default=os.path.join(os.path.dirname(HERE), ".tilelang", "tilelang-site312.tar.xz"))
    args = ap.parse_args()

    import torch
    from gemm_table import tilelang_gemm_program, tilelang_site

    from tilec import runtime

    files = args.builds.split(",")
    mods = {os.path.basename(f).removesuffix(".cu"): runtime.load(f) for f in files}
    ok = check(mods, torch)
    site = tilelang_site(args.tilelang)
    tilelang = None
    if site is not None:
        sys.path.insert(0, site)
        try:
            import tilelang
        except Exception as e:  # noqa: BLE001
            print(f"TileLang does not import: {type(e).__name__}: {str(e)[:200]}")
    lines: list[str] = []
    for size in (int(s) for s in args.sizes.split(",")):
        a, b = (torch.randn(size, size, device="cuda", dtype=torch.float16) for _ in range(2))
        c = torch.empty(size, size, device="cuda", dtype=torch.float16)
        fns = {"cuBLAS": lambda a=a, b=b, c=c: torch.matmul(a, b, out=c)}
        fns |= {n: (lambda m=m, a=a, b=b, c=c: m.gemm(a, b, c)) for n, m in mods.items() if ok[n]}
        if tilelang is not None:
            kernel = tilelang.compile(tilelang_gemm_program(size, size, size), target="cuda")
            fns["TileLang"] = lambda k=kernel, a=a, b=b, c=c: k(a, b, c)
        inner = calls_per_batch(size)
        times = time_rounds(fns, args.rounds, inner, torch)
        flop = 2 * size**3
        lines.append(f"{size}^3, {args.rounds} rounds of {inner} calls each:")
        for n, t in times.items():
            m = statistics.median(t)
            q1, q3 = quartiles(t)
            lines.append(
                f"  {n:12s} median {m:.4f} ms {flop / m / 1e9:5.0f} TFLOP/s  q1/q3 {q1:.4f}/{q3:.4f}  "
                f"speed / cuBLAS (median over rounds) {speed_ratio(times['cuBLAS'], t):.3f}x"
            )
        print("\n".join(lines[-len(times) - 1 :]), flush=True)
    wrong = [n for n, good in ok.items() if not good]
    lines.append(f"wrong builds (not timed): {', '.join(wrong) or 'none'}")
    print(lines[-1])
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "ab_gemm.txt"), "w") as f:
            f.write("\n".join(lines) + "\n")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
