"""The cost model: the time of a kernel from what one block does (work.py) on a GPU (peaks.py).

    occupancy  b = min(blocks_per_sm, smem_per_sm // (smem + 1 KiB), regs_per_sm // (regs x threads),
                       threads_per_sm // threads)
    a wave     W = sms x b blocks; the grid runs in ceil(blocks / W) waves, the last one partial
    per wave   t = max(n x flops / (P x active/sms x e_warps), dram / (BW x e_lat),
                       n x bytes / (BW_L2 x active/sms), n x operand bytes / (BW_smem x active/sms),
                       chain) + latency
    chain      trips x LOADED_LATENCY x latency / (stages - 1), or with one stage (nothing in
               flight under the compute) trips x LOADED_LATENCY x latency + the compute time
    total      T = sum over the waves of t

P is the peak of the gemm's instruction (wgmma, warp-level MMA or the CUDA cores) for its operand
width, BW the copy bandwidth. dram counts the L2 reuse of the rasterization: blocks of the
wave that agree on the block variables an access's origin reads (A's tiles: `by` only) read its
data from DRAM once, and of a halo only the part its neighbour does not read too (Access.new).
e_warps = min(1, warps per SM / 4) (one warp per SM sub-partition keeps the tensor cores busy);
e_lat = min(1, bytes in flight / (BW x latency)), Little's law, where a block keeps
`max(1, stages - 1)` issues of its loads in flight. Operand bytes are what warp-level gemms
read from shared memory into registers (work.operand_bytes), BW_smem the banks' rate; trips are
the serial trips of a block's loads (Access.issues), each waiting for its data unless a pipeline
keeps later ones in flight. docs/tune.md has the whole story.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

from tilec.tune.peaks import GPU
from tilec.tune.work import Access, BlockWork

SMEM_RESERVED = 1024  # bytes the hardware reserves per block (sm_80 and later)
REGISTER_OVERHEAD = 16  # registers nvcc adds to the estimate (indices, addresses), per thread
TENSOR_WARPS = 4  # warps per SM that keep the tensor cores issuing (one per sub-partition)
# a load's latency while the memory system is busy, in unloaded latencies (an assumption: queues
# about double it at full bandwidth)
LOADED_LATENCY = 2.0

Raster = Callable[[int], tuple[int, ...]]  # launch index -> block coordinates (x first)


@dataclass(frozen=True, slots=True)
class Resources:
    """What the static analysis found for one kernel of one configuration."""

    smem: int  # bytes of dynamic shared memory per block
    registers: int  # the register estimate per thread (budget.register_estimate)
    instruction: str  # the group of the gemm's instruction: "warp_group", "warp", "thread", "" (no gemm)
    operand_bits: int  # 16 or 8 (the gemm's A type); 16 without a gemm


@dataclass(frozen=True, slots=True)
class Estimate:
    seconds: float
    occupancy: int  # blocks per SM
    waves: float  # blocks / (sms x occupancy)
    bound: str  # the roof of the first wave: "compute", "DRAM", "L2", "shared" or "latency"
    dram_bytes: int  # over the whole grid, after L2 reuse
    flops: int  # over the whole grid (matrix and elementwise)
    limit: str  # what bounds the occupancy: "smem", "registers", "threads", "blocks"


def occupancy(work: BlockWork, res: Resources, gpu: GPU) -> tuple[int, str]:
    """Blocks one SM holds, and which limit decides it."""
    regs = min(255, _round_up(res.registers + REGISTER_OVERHEAD, 8))
    limits = {
        "blocks": gpu.blocks_per_sm,
        "smem": gpu.smem_per_sm // (res.smem + SMEM_RESERVED) if res.smem else gpu.blocks_per_sm,
        "registers": gpu.registers_per_sm // (regs * work.threads),
        "threads": gpu.threads_per_sm // work.threads,
    }
    limit = min(limits, key=lambda k: (limits[k], k))
    return limits[limit], limit


def peak(res: Resources, gpu: GPU) -> float:
    """FLOP/s of the gemm's instruction for its operand width."""
    datasheet = gpu.tensor_flops.get(res.operand_bits, gpu.tensor_flops[16])
    if res.instruction == "warp_group":
        return datasheet * gpu.tensor_fraction
    if res.instruction == "warp":
        return datasheet * gpu.warp_mma_fraction  # a fraction of the datasheet's, as measured
    return gpu.simt_flops


def estimate(work: BlockWork, res: Resources, gpu: GPU, raster: Raster | None = None) -> Estimate:
    """The modelled time of the whole grid; `raster` maps a launch index to block coordinates
    (row_major, or panels for `use_swizzle`)."""
    occ, limit = occupancy(work, res, gpu)
    if occ < 1:
        return Estimate(math.inf, 0, math.inf, "resources", 0, 0, limit)
    raster = raster or functools.partial(row_major, work.grid)
    per_wave = gpu.sms * occ
    full, tail = divmod(work.blocks, per_wave)
    seconds, dram, bound = 0.0, 0, ""
    for start, n, count in ((0, per_wave, full), (full * per_wave, tail, 1)):
        if not n or not count:
            continue
        shared = any(a.load and len(a.depends) < len(work.grid) for a in work.accesses)
        # the wave's coordinates matter only to a load some of its blocks share (else: any n)
        blocks = [raster(i) for i in range(start, start + n)] if shared else [(0,) * len(work.grid)] * n
        wave_dram = dram_bytes(work.accesses, blocks)
        times = _wave_times(work, res, gpu, occ, n, wave_dram)
        seconds += count * (max(times.values()) + gpu.dram_latency)
        dram += count * wave_dram
        bound = bound or max(times, key=lambda k: times[k])
    flops = work.blocks * (work.flops + work.simt_flops)
    return Estimate(seconds, occ, work.blocks / per_wave, bound, dram, flops, limit)


def _wave_times(work: BlockWork, res: Resources, gpu: GPU, occ: int, n: int, dram: int) -> dict[str, float]:
    """Seconds of a wave of `n` blocks at each roof: "compute", "DRAM", "L2"."""
    active = min(gpu.sms, math.ceil(n / occ))
    share = active / gpu.sms
    warps = min(occ, n) * work.threads / work.warp_size
    e_warps = min(1.0, warps / TENSOR_WARPS) if res.instruction in ("warp", "warp_group") else 1.0
    t_compute = n * work.flops / (peak(res, gpu) * share * e_warps)
    t_compute += n * work.simt_flops / (gpu.simt_flops * share)
    loads = sum(a.per_issue for a in work.accesses if a.load)
    in_flight = active * min(occ, n) * max(1, work.stages - 1) * loads
    e_lat = min(1.0, in_flight / (gpu.copy_bandwidth * gpu.dram_latency)) if in_flight else 1.0
    l2 = n * sum(a.bytes for a in work.accesses)
    times = {"compute": t_compute, "DRAM": dram / (gpu.copy_bandwidth * e_lat), "L2": l2 / (gpu.l2_bandwidth * share)}
    if work.operand_bytes and gpu.smem_bandwidth:
        times["shared"] = n * work.operand_bytes / (gpu.smem_bandwidth * share)
    serial = max((a.issues for a in work.accesses if a.load), default=0)
    if serial > 1:  # a block's chain of dependent trips, each waiting for its loads under load
        wait = serial * LOADED_LATENCY * gpu.dram_latency
        # unpipelined, a trip computes only once its data is in: the waits and the compute add up;
        # a pipeline of s stages keeps s - 1 trips' loads in flight under the compute
        times["latency"] = wait + t_compute if work.stages <= 1 else wait / (work.stages - 1)
    return times


def dram_bytes(accesses: tuple[Access, ...], blocks: list[tuple[int, ...]]) -> int:
    """Bytes a wave of `blocks` moves to and from DRAM: a load is read once per distinct value of
    the block variables it depends on (L2 serves the other blocks); every store is written."""
    total = 0
    for a in accesses:
        if a.load:
            every = blocks and len(a.depends) == len(blocks[0])  # each block its own origin
            distinct = len(blocks) if every else len({tuple(b[d] for d in a.depends) for b in blocks})
            total += round(distinct * a.bytes * a.new)
        else:
            total += len(blocks) * a.bytes
    return total


def row_major(grid: tuple[int, ...], i: int) -> tuple[int, ...]:
    """The coordinates of the block launched `i`-th without rasterization: x fastest."""
    out = []
    for n in grid:
        out.append(i % n)
        i //= n
    return tuple(out)


def panels(grid: tuple[int, ...], panel: int, order: str, i: int) -> tuple[int, ...]:
    """The coordinates of the block launched `i`-th under `use_swizzle(panel, order)`, as
    lower/kernel.py computes them: tiles walk `panel` rows (order row) column by column."""
    if len(grid) < 2:
        return row_major(grid, i)
    first, second = (0, 1) if order == "row" else (1, 0)
    g_first, g_second = grid[first], grid[second]
    plane = g_first * g_second
    tile, z = i % plane, i // plane
    in_panel, p = tile % (panel * g_first), tile // (panel * g_first)
    rows = min(panel, g_second - p * panel)
    coord = [0] * len(grid)
    coord[second] = p * panel + in_panel % rows
    coord[first] = in_panel // rows
    if len(grid) > 2:
        coord[2] = z
    return tuple(coord)


def _round_up(x: int, m: int) -> int:
    return -(-x // m) * m
