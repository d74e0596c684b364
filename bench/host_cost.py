"""Where a small GEMM's time goes, on the GPU machine (carry .gpu):

    TILEC_PREBUILT=.gpu PYTHONPATH=src python3 bench/host_cost.py

Per call, tilec's sm_90a GEMM beside torch.matmul: run.py's back-to-back time, the kernel alone
(run.py's graph_ms: a CUDA graph's replay), and the host's cost of one call (launches only, no
sync) through tilec.runtime and through the bare ctypes launcher; then what one
cuTensorMapEncodeTiled costs."""

import ctypes
import os
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "src"))
sys.path.insert(0, HERE)
from run import bench, graph_ms  # noqa: E402

from tilec import runtime  # noqa: E402

PREBUILT = os.environ.get("TILEC_PREBUILT", ".gpu")
SHAPES = (
    ("gemm-sm90a", 1024, 1024, 1024),
    ("gemm-sm90a", 2048, 2048, 2048),
    ("gemm-sm90a-skinny", 16, 8192, 8192),
    ("gemm-sm90a-skinny", 128, 8192, 8192),
    ("gemm", 1024, 1024, 1024),
)


def host_us(fn, n: int = 300) -> float:
    """Microseconds of host time per call, the best of 5 rounds of n launches."""
    fn()
    torch.cuda.synchronize()
    rounds = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        rounds.append((time.perf_counter() - t0) / n * 1e6)
        torch.cuda.synchronize()
    return min(rounds)


def bare_launcher(kernel, *tensors):
    """The ctypes launcher called with its arguments prepared once: no checks, no dims inference."""
    dims = runtime.infer_dims(kernel.abi, [tuple(t.shape) for t in tensors], {})
    args = [t.data_ptr() for t in tensors] + list(dims)
    stream = torch.cuda.current_stream().cuda_stream
    return lambda: kernel._fn(*args, stream)


def encode_us(n: int = 20000) -> float:
    """Microseconds per cuTensorMapEncodeTiled of a 1024x1024 fp16 map, called from Python."""
    encode = ctypes.CDLL("libcuda.so.1").cuTensorMapEncodeTiled
    out = (ctypes.c_byte * 128)()
    dims, pitch = (ctypes.c_uint64 * 2)(1024, 1024), (ctypes.c_uint64 * 1)(2048)
    box, steps = (ctypes.c_uint32 * 2)(64, 128), (ctypes.c_uint32 * 2)(1, 1)
    x = torch.empty(1024 * 1024, device="cuda", dtype=torch.float16)
    base = ctypes.c_void_p(x.data_ptr())
    t0 = time.perf_counter()
    for _ in range(n):
        encode(out, 6, 2, base, dims, pitch, box, steps, 0, 3, 2, 0)  # fp16, 128B swizzle, L2 128B
    return (time.perf_counter() - t0) / n * 1e6


def main() -> None:
    print("| variant | MxNxK | bench us | graph us | host us (runtime) | host us (launcher) "
          "| torch bench us | torch graph us | torch host us |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    for variant, m, n, k in SHAPES:
        mod = runtime.load(os.path.join(PREBUILT, variant + ".cu"))
        a = torch.randn(m, k, device="cuda", dtype=torch.float16)
        b = torch.randn(k, n, device="cuda", dtype=torch.float16)
        c = torch.empty(m, n, device="cuda", dtype=torch.float16)

        def tilec_call(a=a, b=b, c=c, mod=mod):
            mod.gemm(a, b, c)

        def torch_call(a=a, b=b, c=c):
            torch.matmul(a, b, out=c)

        row = [
            bench([tilec_call])["ms"] * 1000, graph_ms([tilec_call]) * 1000, host_us(tilec_call),
            host_us(bare_launcher(mod.gemm, a, b, c)),
            bench([torch_call])["ms"] * 1000, graph_ms([torch_call]) * 1000, host_us(torch_call),
        ]  # fmt: skip
        print(f"| {variant} | {m}x{n}x{k} | " + " | ".join(f"{x:.1f}" for x in row) + " |", flush=True)
    print(f"\ncuTensorMapEncodeTiled from Python: {encode_us():.2f} us per call")


if __name__ == "__main__":
    main()
