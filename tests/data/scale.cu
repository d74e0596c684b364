// Hand-written in the shape tilec generates, for the runtime loader's tests.
// tilec-abi: {"kernels": [{"name": "scale", "tensors": [{"name": "X", "dtype": "float32", "shape": ["N", 4]}, {"name": "Y", "dtype": "float32", "shape": ["N", 4]}], "scalars": [{"name": "alpha", "dtype": "float32"}, {"name": "bias", "dtype": "float16"}], "dims": ["N"]}]}
#include <cuda_fp16.h>

extern "C" __global__ void scale_kernel(const float* __restrict__ X, float* __restrict__ Y, float alpha,
                                        half bias, int N) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < N * 4) {
    Y[i] = alpha * X[i] + __half2float(bias);
  }
}

extern "C" int scale(const float* X, float* Y, float alpha, half bias, int N, cudaStream_t stream) {
  int blocks = (N * 4 + 127) / 128;
  if (blocks == 0) {
    return 0;
  }
  scale_kernel<<<blocks, 128, 0, stream>>>(X, Y, alpha, bias, N);
  return (int)cudaGetLastError();
}
