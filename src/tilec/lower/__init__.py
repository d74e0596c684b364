"""Lower Tile IR to Thread IR: what each thread of the block does.

Every tile op becomes a `Scope` of Thread IR headed by the `.tile` line it
came from. Most ops are reduced to one mechanism, a *distributed loop*: a
loop nest over a tile whose elements are spread over the threads by a
Fragment layout (layout.py). A `Parallel` loop runs its body under its
inferred layout; `copy`, `fill` and `atomic_add` of tiles build such a body
(`dst[i, j] = src[i, j]`) and run it the same way, which gives every one of
them bounds checks against tensor edges and 16-byte vector accesses:

    copy(A[by * 128, k * 32], A_shared)     # 128 threads, float16
  ->
    for (int g0 = 0; g0 < 4; ++g0) {          // 4 rows per thread
      if (vec_ok && by * 128 + ... < M && ... + 8 <= K) {
        A_shared[g0 * 32 + tx / 4][tx % 4 * 8 : +8] = A[...];   // one 16-byte move
      } else { ... element by element, zero outside the tensor ... }
    }

gemm (SIMT FMA over the accumulator's micro-tile here; the instructions of a
warp in the target's backend module, e.g. backends/cuda/sm80.py), reduce
(in-thread, then warp shuffles, then shared memory across warps) and cumsum
have their own lowerings (ops.py). Each op's Scope records the shared tiles it
reads and writes (T.SharedAccess); barriers are placed afterwards, from those
records, by the sync pass (sync.py). Pipelines (pipelined.py) place their own
asynchronous-copy waits and barriers as T.Barrier nodes, part of their schedule.

Every lowering is a function of the kernel's `LowerContext` (context.py) and
the statement: `lower_copy(ctx, s)`, `lower_gemm(ctx, s)`, ... The context's
inputs (the kernel with the passes' decisions on its nodes, the buffers'
layouts, the target and its backend module) never change; what lowering
builds up (names, shared views, flags, ...) is `ctx.state`.

    kernel.py     lower_kernel: the statement walk, dispatching each statement; the kernel's head
    context.py    LowerContext: the inputs and the mutable state; the backend protocol
    ops.py        one function per tile op
    pipelined.py  software-pipelined loops, the GEMM main loop, early async copies
    loops.py      distributed loops, their per-element code and 16-byte vectorization
    exprs.py      the C form of expressions (value_of, ref_of)
    cexpr.py      small builders of C-ready expressions
    lanes.py      `lane` / `warp` names for tx % warp_size and tx / warp_size after lowering
    cleanup.py    drop unused constants after lowering
"""

from tilec.lower.kernel import lower_kernel

__all__ = ["lower_kernel"]
