// The tensor-core ceiling of the instructions tilec's sm_80 path uses, measured on the GPU at hand.
//
//   nvcc -O3 -gencode arch=compute_90a,code=sm_90a bench/mma_peak.cu -o /tmp/mma_peak && /tmp/mma_peak
//
// Every warp issues mma.sync.m16n8k16 (f16 inputs, f32 accumulators) on `CHAINS` independent
// accumulators from registers only: no memory traffic, no dependent chains longer than the
// instruction's latency allows. The result is the best any mma.sync kernel can reach on this
// chip, the number to put cuBLAS's wgmma time and tilec's kernels next to.
#include <cuda_runtime.h>
#include <stdio.h>

#include <algorithm>
#include <vector>

constexpr int CHAINS = 8;
constexpr int ITERS = 4096;

__global__ void mma_loop(float* out, unsigned seed) {
  unsigned a[4], b[2];
  for (int i = 0; i < 4; ++i) a[i] = seed * (threadIdx.x + 3 * i + 1);
  for (int i = 0; i < 2; ++i) b[i] = seed ^ (threadIdx.x + 7 * i);
  float c[CHAINS][4] = {};
  for (int it = 0; it < ITERS; ++it) {
#pragma unroll
    for (int j = 0; j < CHAINS; ++j) {
      asm volatile(
          "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
          "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
          : "+f"(c[j][0]), "+f"(c[j][1]), "+f"(c[j][2]), "+f"(c[j][3])
          : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    }
  }
  float sum = 0.0f;
  for (int j = 0; j < CHAINS; ++j) sum += c[j][0] + c[j][1] + c[j][2] + c[j][3];
  out[blockIdx.x * blockDim.x + threadIdx.x] = sum;  // keeps the loop alive
}

int main() {
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  for (int warps : {4, 8, 16}) {
    const int threads = 128;
    const int blocks = sms * warps / 4;  // `warps` warps per SM, in 4-warp blocks
    float* out = nullptr;
    cudaMalloc(&out, sizeof(float) * blocks * threads);
    cudaEvent_t start, stop;
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
    for (int i = 0; i < 3; ++i) mma_loop<<<blocks, threads>>>(out, 12345u);  // warm-up
    std::vector<float> ms;
    for (int r = 0; r < 21; ++r) {
      cudaEventRecord(start);
      mma_loop<<<blocks, threads>>>(out, 12345u + r);
      cudaEventRecord(stop);
      cudaEventSynchronize(stop);
      float t = 0.0f;
      cudaEventElapsedTime(&t, start, stop);
      ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    const double flops = 2.0 * 16 * 8 * 16 * CHAINS * (double)ITERS * (blocks * threads / 32);
    printf("mma.sync m16n8k16 f16->f32: %2d warps/SM, %d chains/warp: %.1f TFLOP/s (median of 21)\n",
           warps, CHAINS, flops / (ms[ms.size() / 2] * 1e-3) / 1e12);
    cudaFree(out);
  }
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) {
    printf("error: %s\n", cudaGetErrorString(err));
    return 1;
  }
  return 0;
}
