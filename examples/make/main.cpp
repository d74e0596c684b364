// A host program calling the tilec launchers through the generated headers.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "add.h"
#include "axpy.h"

#define CHECK(call)                                                          \
  do {                                                                       \
    cudaError_t err_ = (call);                                               \
    if (err_ != cudaSuccess) {                                               \
      std::fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(err_));     \
      return 1;                                                              \
    }                                                                        \
  } while (0)

int main() {
  const int n = 100000;  // not a multiple of the tile: the last block is masked
  std::vector<float> x(n), y(n), out(n);
  for (int i = 0; i < n; ++i) {
    x[i] = 0.5f * i;
    y[i] = 1.0f;
  }
  float *dx, *dy, *dout;
  CHECK(cudaMalloc(&dx, n * sizeof(float)));
  CHECK(cudaMalloc(&dy, n * sizeof(float)));
  CHECK(cudaMalloc(&dout, n * sizeof(float)));
  CHECK(cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dy, y.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  cudaStream_t stream;
  CHECK(cudaStreamCreate(&stream));

  CHECK(cudaError_t(add(dx, dy, dout, n, stream)));
  CHECK(cudaMemcpyAsync(out.data(), dout, n * sizeof(float), cudaMemcpyDeviceToHost, stream));
  CHECK(cudaStreamSynchronize(stream));
  for (int i = 0; i < n; ++i) {
    if (std::fabs(out[i] - (x[i] + y[i])) > 1e-5f * std::fabs(x[i] + y[i])) {
      std::fprintf(stderr, "add: out[%d] = %g, expected %g\n", i, out[i], x[i] + y[i]);
      return 1;
    }
  }

  CHECK(cudaError_t(axpy(dx, dy, dout, 2.0f, n, stream)));
  CHECK(cudaMemcpyAsync(out.data(), dout, n * sizeof(float), cudaMemcpyDeviceToHost, stream));
  CHECK(cudaStreamSynchronize(stream));
  for (int i = 0; i < n; ++i) {
    float want = 2.0f * x[i] + y[i];
    if (std::fabs(out[i] - want) > 1e-5f * std::fabs(want)) {
      std::fprintf(stderr, "axpy: out[%d] = %g, expected %g\n", i, out[i], want);
      return 1;
    }
  }
  std::printf("add and axpy: %d elements OK\n", n);
  return 0;
}
