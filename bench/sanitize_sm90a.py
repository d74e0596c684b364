"""compute-sanitizer's target for the sm_90a GEMMs (run on the GPU machine, from the repo root):

    compute-sanitizer --tool memcheck python3 bench/sanitize_sm90a.py

Small calls of each prebuilt sm_90a GEMM variant (the example GEMM, its k32 build, the ReLU
example): the warp-role kernel at 256x256x256 and at 2000x3000x200 (more tiles than
multiprocessors: persistent blocks walk two, the TMA-store epilogue reuses its stage), its
cp.async fallback at 129x77x45; prints each one's largest error against float64."""

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src"))
from tilec import runtime  # noqa: E402

for variant, kernel in (("gemm-sm90a", "gemm"), ("gemm-sm90a-k32", "gemm"), ("gemm_relu-sm90a", "gemm_relu")):
    mod = runtime.load(os.path.join(os.environ.get("TILEC_PREBUILT", ".gpu"), f"{variant}.cu"))
    for m, n, k in ((256, 256, 256), (2000, 3000, 200), (129, 77, 45)):
        a = torch.randn(m, k, device="cuda", dtype=torch.float16)
        b = torch.randn(k, n, device="cuda", dtype=torch.float16)
        c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
        getattr(mod, kernel)(a, b, c)
        torch.cuda.synchronize()
        ref = a.double() @ b.double()
        err = (c.double() - (ref.relu() if kernel == "gemm_relu" else ref)).abs().max().item()
        print(f"{variant} {m}x{n}x{k}: max abs error {err:.3g}", flush=True)
