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
    "int4": """
// Element j of a packed pair of 4-bit values (the even element in the low nibble, the odd one in
// the high nibble): unsigned, and sign-extended (two's complement, -8..7).
__device__ __forceinline__ int tilec_uint4(unsigned char pair, int j) { return (pair >> (j % 2 * 4)) & 15; }
__device__ __forceinline__ int tilec_int4(unsigned char pair, int j) {
  const int n = tilec_uint4(pair, j);
  return n - 2 * (n & 8);
}""",
    "fp4_e2m1": """
// Element j of a packed pair of fp4 (e2m1, MXFP4's element: sign, 2 exponent bits of bias 1, 1
// mantissa bit; the even element in the low nibble) as a float: +-{0, 0.5, 1, 1.5, 2, 3, 4, 6}.
// Codes 2..7 are the float32 bits (code + 252) << 22 (1.0 is 254 << 22); 0 and 1 are 0 and 0.5.
__device__ __forceinline__ float tilec_fp4_e2m1(unsigned char pair, int j) {
  const unsigned code = (pair >> (j % 2 * 4)) & 15u, m = code & 7u;
  const float magnitude = m >= 2u ? __uint_as_float((m + 252u) << 22) : 0.5f * static_cast<float>(m);
  return (code & 8u) ? -magnitude : magnitude;
}""",
    "bitcast": """
// The bits of v as a To (reinterpret(x, dtype)): the same width, copied, never converted.
template <typename To, typename From>
__device__ __forceinline__ To tilec_bitcast(From v) {
  static_assert(sizeof(To) == sizeof(From), "reinterpret between types of one width");
  To out;
  __builtin_memcpy(&out, &v, sizeof(To));
  return out;
}""",
}
