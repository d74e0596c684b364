"""Backends: one package per language (cuda/, later hip/), one module per target family.

A backend module holds what only that target knows: the spellings of its
built-ins, barriers and launch (the target record), the inline helpers it
emits, and its lowerings of the tile ops that map to its own instructions
(the gemm, global->shared copies). Everything else is shared.
"""

# Inline helpers whose text is the same in CUDA C++ and HIP (both dialects have these intrinsics).
SHARED_HELPERS: dict[str, str] = {
    "atomic_float_minmax": """
// Atomic max / min of floats, which the hardware lacks: a compare-and-swap loop on the value's
// bits that stops as soon as the stored value is no longer below (above) v; returns the old value.
// A NaN v changes nothing (every comparison with it is false).
__device__ __forceinline__ float tilec_atomic_max(float* p, float v) {
  int old = __float_as_int(*p);
  while (__int_as_float(old) < v) {
    const int seen = atomicCAS(reinterpret_cast<int*>(p), old, __float_as_int(v));
    if (seen == old) break;
    old = seen;
  }
  return __int_as_float(old);
}
__device__ __forceinline__ float tilec_atomic_min(float* p, float v) {
  int old = __float_as_int(*p);
  while (v < __int_as_float(old)) {
    const int seen = atomicCAS(reinterpret_cast<int*>(p), old, __float_as_int(v));
    if (seen == old) break;
    old = seen;
  }
  return __int_as_float(old);
}
__device__ __forceinline__ double tilec_atomic_max(double* p, double v) {
  unsigned long long old = __double_as_longlong(*p);
  while (__longlong_as_double(old) < v) {
    const unsigned long long seen =
        atomicCAS(reinterpret_cast<unsigned long long*>(p), old, __double_as_longlong(v));
    if (seen == old) break;
    old = seen;
  }
  return __longlong_as_double(old);
}
__device__ __forceinline__ double tilec_atomic_min(double* p, double v) {
  unsigned long long old = __double_as_longlong(*p);
  while (v < __longlong_as_double(old)) {
    const unsigned long long seen =
        atomicCAS(reinterpret_cast<unsigned long long*>(p), old, __double_as_longlong(v));
    if (seen == old) break;
    old = seen;
  }
  return __longlong_as_double(old);
}""",
}
