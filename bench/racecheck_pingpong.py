"""Build bench/racecheck_pingpong.cu, check its output, and run it again under compute-sanitizer's
racecheck (see the .cu's header). On the GPU machine: `python3 bench/racecheck_pingpong.py`."""

import ctypes
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def run_once() -> bool:
    import torch

    iters, blocks = 7, 4
    out = torch.full((blocks * 256,), -1, dtype=torch.int32, device="cuda")
    lib = ctypes.CDLL("/tmp/tilec-racecheck-pingpong.so")
    rc = lib.pingpong(ctypes.c_void_p(out.data_ptr()), iters, blocks, ctypes.c_void_p(0))
    torch.cuda.synchronize()
    tx = torch.arange(256, device="cuda")
    want = ((tx + 128) % 256 + 1) * sum(range(iters))
    ok = rc == 0 and bool((out.view(blocks, 256) == want).all())
    print("output", "correct" if ok else "WRONG", flush=True)
    return ok


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--once":
        return 0 if run_once() else 1
    src = os.path.join(HERE, "racecheck_pingpong.cu")
    flags = ["-shared", "-Xcompiler", "-fPIC", "-arch=sm_90a", "-O3", "-lineinfo"]
    subprocess.check_call(["nvcc", *flags, src, "-o", "/tmp/tilec-racecheck-pingpong.so"])
    plain = run_once()
    tool = subprocess.run(
        ["compute-sanitizer", "--tool", "racecheck", sys.executable, __file__, "--once"],
        capture_output=True,
        text=True,
    )
    keep = ("Race reported", "access at", "RACECHECK SUMMARY")  # each hazard and the access it pairs with
    hazards = [line for line in tool.stdout.splitlines() if any(k in line for k in keep)]
    print("\n".join(hazards) or tool.stdout[-2000:])
    return 0 if plain else 1


if __name__ == "__main__":
    sys.exit(main())
