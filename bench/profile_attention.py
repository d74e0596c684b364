"""Launches of a prebuilt attention variant (B4 H32 S4096, head dim D) for ncu; the first run
outside the profiler builds it (tilec.runtime's cache):

    python3 bench/profile_attention.py .gpu flash_attention-d256-bench-sm90a-n80 256
    ncu --kernel-name regex:flash_attention_kernel --launch-skip 2 --launch-count 1 \
        --section SpeedOfLight --section WarpStateStats --print-details all \
        python3 bench/profile_attention.py .gpu flash_attention-d256-bench-sm90a-n80 256
"""

import sys

import torch

sys.path.insert(0, "src")
from tilec import runtime  # noqa: E402

folder, variant, D = sys.argv[1], sys.argv[2], int(sys.argv[3])
mod = runtime.load(f"{folder}/{variant}.cu")
shape = (4, 32, 4096, D)
q, k, v = (torch.randn(shape, device="cuda", dtype=torch.float16) for _ in range(3))
out = torch.empty(shape, device="cuda", dtype=torch.float16)
for _ in range(3):
    mod.flash_attention(q, k, v, out)
torch.cuda.synchronize()
print("ok", variant)
