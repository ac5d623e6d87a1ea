// float32 <-> IEEE binary16 conversion shared by the fp16 cast kernels (cast.cu), the host code
// that converts constant weights once at Prepare, and the CPU tests: round to nearest, ties to
// even; overflow to infinity; subnormals kept; NaN stays NaN (quiet). Bit manipulation only, so
// host and device produce identical bits.
#pragma once

#include <cstdint>
#include <cstring>

#include "backends/cuda/kernels/hd.h"

namespace kiln::cuda_math {

KILN_HD uint32_t FloatBits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
#endif
}

KILN_HD float BitsFloat(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
#endif
}

KILN_HD uint16_t FloatToHalf(float f) {
  const uint32_t x = FloatBits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7FFFFFFFu;
  if (abs >= 0x7F800000u)  // inf or NaN
    return static_cast<uint16_t>(sign | 0x7C00u | (abs > 0x7F800000u ? 0x200u : 0u));
  if (abs >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // rounds past 65504
  if (abs < 0x38800000u) {  // below the smallest normal half (2^-14): a subnormal or zero
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);  // <= 2^-25: rounds to zero
    const uint32_t exp = abs >> 23;                             // 102..112
    const uint32_t mant = (abs & 0x7FFFFFu) | 0x800000u;
    const uint32_t shift = 126u - exp;  // 14..24: value = mant * 2^(exp-150) in 2^-24 units
    uint32_t h = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (h & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = ((abs >> 13) - (112u << 10));  // rebias the exponent 127 -> 15
  const uint32_t rem = abs & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // may carry into the exponent: fine
  return static_cast<uint16_t>(sign | h);
}

KILN_HD float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu, mant = h & 0x3FFu;
  if (exp == 0x1Fu) return BitsFloat(sign | 0x7F800000u | (mant << 13));
  if (exp != 0) return BitsFloat(sign | ((exp + 112u) << 23) | (mant << 13));
  if (mant == 0) return BitsFloat(sign);
  // Subnormal: mant * 2^-24, exact in float.
  return (sign ? -1.f : 1.f) * static_cast<float>(mant) * 5.9604644775390625e-8f;
}

// The storage types of float activations: float32, or float16 (precision fp16 between kernels,
// runtime/half_values.h) as its bits. Kernels templated on T compute in float32: ToFloat on
// every load, Store on every write (rounding to nearest even).
struct Half {
  uint16_t bits;
};
KILN_HD float ToFloat(float x) { return x; }
KILN_HD float ToFloat(Half h) { return HalfToFloat(h.bits); }
KILN_HD void Store(float* dst, float v) { *dst = v; }
KILN_HD void Store(Half* dst, float v) { dst->bits = FloatToHalf(v); }

}  // namespace kiln::cuda_math
