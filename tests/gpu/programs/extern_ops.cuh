// tests/gpu/programs/extern_ops.cuh — device functions that extern_gelu.tile calls through
// call_extern (built with `tilec build extern_gelu.tile --include extern_ops.cuh`).
#pragma once

// GELU with the tanh approximation, in float32.
__device__ __forceinline__ float user_gelu(float x) {
  const float k = 0.7978845608028654f;  // sqrt(2 / pi)
  return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
}

// a * x + b, with the scale taken as an int (arguments keep their own types).
__device__ __forceinline__ float user_axpb(int a, float x, float b) { return a * x + b; }
