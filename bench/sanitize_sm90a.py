"""compute-sanitizer's target for the sm_90a GEMMs (run on the GPU machine, from the repo root):

    compute-sanitizer --tool memcheck python3 bench/sanitize_sm90a.py

Small calls of each prebuilt sm_90a GEMM variant (the example GEMM, its k32 build, the ReLU
example): the warp-role kernel at 256x256x256, at 2000x3000x200 (more tiles than multiprocessors:
persistent blocks walk two, the TMA-store epilogue reuses its stage) and at 384x264x136 (three
tile rows: with clusters, the last pair's second block runs the main loop alone), its
cp.async fallback at 129x77x45; then the split-K example on warp roles, with empty splits; prints
each one's largest error against float64."""

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src"))
from tilec import runtime  # noqa: E402

for variant, kernel in (("gemm-sm90a", "gemm"), ("gemm-sm90a-k32", "gemm"), ("gemm_relu-sm90a", "gemm_relu")):
    mod = runtime.load(os.path.join(os.environ.get("TILEC_PREBUILT", ".gpu"), f"{variant}.cu"))
    for m, n, k in ((256, 256, 256), (2000, 3000, 200), (384, 264, 136), (129, 77, 45)):
        a = torch.randn(m, k, device="cuda", dtype=torch.float16)
        b = torch.randn(k, n, device="cuda", dtype=torch.float16)
        c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
        getattr(mod, kernel)(a, b, c)
        torch.cuda.synchronize()
        ref = a.double() @ b.double()
        err = (c.double() - (ref.relu() if kernel == "gemm_relu" else ref)).abs().max().item()
        print(f"{variant} {m}x{n}x{k}: max abs error {err:.3g}", flush=True)

# split-K on warp roles (it adds to C): K=50 leaves the last splits an empty range, K=1000 does not
if os.environ.get("TILEC_SANITIZE_SPLITK", "1") == "1":
    mod = runtime.load(os.path.join(os.environ.get("TILEC_PREBUILT", ".gpu"), "gemm_splitk-sm90a.cu"))
    for m, n, k in ((200, 130, 50), (256, 256, 1000)):
        a = torch.randn(m, k, device="cuda", dtype=torch.float16)
        b = torch.randn(k, n, device="cuda", dtype=torch.float16)
        c0 = torch.randn(m, n, device="cuda", dtype=torch.float32)
        c = c0.clone()
        mod.gemm_splitk(a, b, c)
        torch.cuda.synchronize()
        err = (c.double() - (c0.double() + a.double() @ b.double())).abs().max().item()
        print(f"gemm_splitk-sm90a {m}x{n}x{k}: max abs error {err:.3g}", flush=True)
