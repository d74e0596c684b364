"""`tilec tune --measure`: time the model's best configurations on the GPUs, one worker per GPU.

    pool = Pool(gpus=[0, 1, 2, 3], runner=gpu_runner(...))
    pool.run(jobs, on_result)       # each job on the first idle GPU; on_result(job, Timing) as each ends

A job is one configuration's CUDA source; its runner (on its GPU) builds it through
`tilec.runtime`, runs it on random inputs, checks every tensor against what the default
configuration's build wrote on the same inputs (a mismatch is a failure, never a timing), and
times it (median of CUDA-event timings after warm-up). The pool is a thread per GPU pulling from
one queue, so N GPUs take about 1/N of the time; the runner is a parameter, which is how the tests
drive N fake GPUs with a stub timing function. The progress display (rich, on a terminal) shows
the jobs done and the best time so far.

bench/tune_all.py runs it on the H200 over every candidate of the tuning programs (docs/tune.md);
the tests drive the pool with fake runners.
"""

from __future__ import annotations

import functools
import math
import queue
import statistics
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Job:
    label: str  # the configuration, as report.py prints it
    source: str  # its CUDA C++ (tilec build's output)


@dataclass(frozen=True, slots=True)
class Timing:
    label: str
    gpu: int
    seconds: float | None  # the median; None when it failed
    error: str | None = None  # the failure (a mismatch with the default, a launch error)


Runner = Callable[[int, Job], float]  # (gpu index, job) -> seconds; raises on a failure


class Pool:
    """One worker thread per GPU; jobs go to whichever GPU is idle."""

    def __init__(self, gpus: Sequence[int], runner: Runner):
        assert gpus, "a pool needs at least one GPU"
        self.gpus, self.runner = list(gpus), runner

    def run(self, jobs: Sequence[Job], on_result: Callable[[Timing], None] | None = None) -> list[Timing]:
        """Every job's timing, in the order of `jobs`."""
        todo: queue.Queue[tuple[int, Job]] = queue.Queue()
        for item in enumerate(jobs):
            todo.put(item)
        results: dict[int, Timing] = {}
        lock = threading.Lock()
        workers = [threading.Thread(target=self._work, args=(g, todo, results, lock, on_result)) for g in self.gpus]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        return [results[i] for i in range(len(jobs))]

    def _work(self, gpu: int, todo: queue.Queue, results: dict[int, Timing], lock: threading.Lock, on_result) -> None:
        while True:
            try:
                i, job = todo.get_nowait()
            except queue.Empty:
                return
            timing = self._one(gpu, job)
            with lock:
                results[i] = timing
                if on_result is not None:
                    on_result(timing)

    def _one(self, gpu: int, job: Job) -> Timing:
        try:
            return Timing(job.label, gpu, self.runner(gpu, job))
        except Exception as e:  # noqa: BLE001 - a failing configuration is a result, not a crash
            return Timing(job.label, gpu, None, f"{type(e).__name__}: {e}")


def visible_gpus() -> list[int]:
    """The CUDA devices torch sees; none when torch or a GPU is missing."""
    try:
        import torch
    except ImportError:
        return []
    return list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []


# ---------------------------------------------------------------- the GPU runner


def gpu_runner(reference: str, dims: Mapping[str, int], arch: str, warmup: int = 3, reps: int = 20) -> Runner:
    """A runner timing jobs on real GPUs: inputs random (seeded), checked against the build
    `reference` (the default configuration's source) on the same inputs, then timed."""

    def run(gpu: int, job: Job) -> float:
        import torch

        with torch.cuda.device(gpu):
            expect = _outputs(reference, dims, arch)
            got = _outputs(job.source, dims, arch)
            for name, (a, b) in _pairs(expect, got):
                if not torch.allclose(a.float(), b.float(), rtol=2e-2, atol=2e-2):
                    raise ValueError(f"{name} differs from the default configuration's")
            return _time(job.source, dims, arch, warmup, reps)

    return run


SCALAR_VALUE = 0.5  # every float scalar argument (an eps, a weight); integer ones get 1


def inputs(kernel: Mapping, dims: Mapping[str, int]) -> list[Any]:
    """The kernel's arguments: seeded random tensors of its ABI's shapes, then its scalars."""
    import torch

    gen = torch.Generator(device="cuda").manual_seed(0)
    out = []
    for t in kernel["tensors"]:
        shape = [dims[d] if isinstance(d, str) else d for d in t["shape"]]
        dtype = getattr(torch, t["dtype"] if t["dtype"] != "float8_e4m3" else "float8_e4m3fn")
        if dtype.is_floating_point:
            x = torch.randn(shape, device="cuda", generator=gen).to(dtype)
        else:
            x = torch.randint(-4, 4, shape, device="cuda", generator=gen).to(dtype)
        out.append(x)
    out += [SCALAR_VALUE if s["dtype"].startswith(("float", "bfloat")) else 1 for s in kernel.get("scalars", [])]
    return out


def _outputs(source: str, dims: Mapping[str, int], arch: str) -> dict[str, Any]:
    """Every tensor of every kernel after one run of each kernel on the seeded inputs."""
    from tilec import runtime

    mod = runtime.compile_source(source, arch)
    tensors: dict[str, Any] = {}
    for kernel in runtime.parse_abi(source)["kernels"]:
        args = inputs(kernel, dims)
        getattr(mod, kernel["name"])(*args)
        tensors |= {f"{kernel['name']}.{t['name']}": a for t, a in zip(kernel["tensors"], args, strict=False)}
    return tensors


def _pairs(a: Mapping[str, Any], b: Mapping[str, Any]):
    return ((k, (a[k], b[k])) for k in a if k in b)


BATCH_SECONDS = 1e-3  # a timed batch of back-to-back calls lasts about this long
QUEUE_CYCLES_PER_CALL = 40_000  # a GPU-side wait queued before a batch, per call in it (20 us at 2 GHz,
# more than the host spends launching one), so that the host launches the batch ahead


def _time(source: str, dims: Mapping[str, int], arch: str, warmup: int, reps: int) -> float:
    """Seconds per call of every kernel of `source` on seeded inputs (`time_calls`)."""
    from tilec import runtime

    mod = runtime.compile_source(source, arch)
    kernels = runtime.parse_abi(source)["kernels"]
    calls = [functools.partial(getattr(mod, k["name"]), *inputs(k, dims)) for k in kernels]
    return time_calls(calls, warmup, reps)


def time_calls(calls: Sequence[Callable[[], Any]], warmup: int = 3, reps: int = 20) -> float:
    """Seconds per round of `calls`: the median over `reps` batches, each of enough back-to-back
    rounds to last about BATCH_SECONDS, timed between CUDA events. A wait queued on the GPU before
    each batch lets the host launch the whole batch ahead, so neither the host's per-call cost nor
    an idle GPU between calls (a short kernel timed alone measures both, +-20% run to run on the
    H200) is in the timing. bench/tune_all.py times torch's operations the same way, so that a
    kernel and its peer are compared under the same clocks: a GPU that waited before each batch
    starts it cooler than one kept busy."""
    import torch

    def batch(inner: int) -> float:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if hasattr(torch.cuda, "_sleep"):
            torch.cuda._sleep(QUEUE_CYCLES_PER_CALL * inner * len(calls))
        start.record()
        for _ in range(inner):
            for call in calls:
                call()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3 / inner

    first = min(batch(1) for _ in range(max(1, warmup)))
    inner = max(1, min(1000, math.ceil(BATCH_SECONDS / max(first, 1e-7))))
    return statistics.median(batch(inner) for _ in range(reps))


def best_so_far(timings: Sequence[Timing]) -> Timing | None:
    ok = [t for t in timings if t.seconds is not None]
    return min(ok, key=lambda t: t.seconds or math.inf) if ok else None


class Progress:
    """The live line: jobs done of all, and the best so far (rich on a terminal, silent elsewhere)."""

    def __init__(self, total: int, live: bool):
        self.total, self.done, self.timings = total, 0, []  # type: ignore[var-annotated]
        self.bar = None
        if live:
            from rich.progress import Progress as RichProgress

            self.bar = RichProgress(transient=True)
            self.task = self.bar.add_task("measuring", total=total)
            self.bar.start()

    def update(self, t: Timing) -> None:
        self.done += 1
        self.timings.append(t)
        if self.bar is not None:
            best = best_so_far(self.timings)
            text = f"best so far {best.label} {best.seconds * 1e3:.3f} ms" if best and best.seconds else "measuring"
            self.bar.update(self.task, advance=1, description=text)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
