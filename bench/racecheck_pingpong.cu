// What compute-sanitizer's racecheck makes of two warp groups taking turns (bar.sync on barrier
// 2 + group, bar.arrive on the other's), the protocol of tilec's overlapped attention consumers
// (backends/cuda/sm90.py, _Turns). After the turns, each thread writes its slot of a shared array
// and, behind a bar.sync of all 256 threads, reads the slot of a thread of the other group: no
// race by construction. bench/racecheck_pingpong.py builds it, checks the output, and runs it
// under racecheck. On an H100 (2026-12-06, CUDA 13.0) racecheck reports a hazard between that write
// and that read, with the output correct: a hazard it reports on code with bar.arrive turns is
// not, by itself, evidence of a race.
#include <cuda_runtime.h>

extern "C" __global__ void __launch_bounds__(256) pingpong_kernel(int* out, int iters) {
  __shared__ int slots[256];
  const int tx = threadIdx.x;
  const int group = tx / 128;
  if (group == 1) asm volatile("bar.arrive %0, %1;" ::"r"(2), "r"(256) : "memory");  // group 0 first
  int acc = 0;
  for (int k = 0; k < iters; ++k) {
    if (group == 0) asm volatile("bar.sync %0, %1;" ::"r"(2), "r"(256) : "memory");  // my turn
    else asm volatile("bar.sync %0, %1;" ::"r"(3), "r"(256) : "memory");
    acc += k * (tx + 1);
    if (group == 0) asm volatile("bar.arrive %0, %1;" ::"r"(3), "r"(256) : "memory");  // yours
    else asm volatile("bar.arrive %0, %1;" ::"r"(2), "r"(256) : "memory");
  }
  if (group == 0) asm volatile("bar.sync %0, %1;" ::"r"(2), "r"(256) : "memory");  // the last hand-over
  asm volatile("bar.sync %0, %1;" ::"r"(1), "r"(256) : "memory");
  slots[tx] = acc;
  asm volatile("bar.sync %0, %1;" ::"r"(1), "r"(256) : "memory");
  out[blockIdx.x * 256 + tx] = slots[(tx + 128) % 256];
}

extern "C" int pingpong(int* out, int iters, int blocks, cudaStream_t stream) {
  pingpong_kernel<<<blocks, 256, 0, stream>>>(out, iters);
  return (int)cudaGetLastError();
}
