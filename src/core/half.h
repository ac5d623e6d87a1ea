// IEEE float16 and bfloat16 conversions, shared by Cast and the float16 lowering at load
// (passes/lower_float16.cc): float16 -> float exact; double -> float16 rounds to nearest even;
// bfloat16 -> float exact; float -> bfloat16 truncates the low 16 bits (FloatToBf16, what ONNX
// 1.12's test data encodes) or rounds to nearest even (FloatToBf16Rounded, Cast's rule).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace kiln {

inline float HalfToFloat(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  float v;
  if (exp == 0)
    v = std::ldexp(static_cast<float>(mant), -24);
  else if (exp == 31)
    v = mant ? std::nanf("") : INFINITY;
  else
    v = std::ldexp(static_cast<float>(mant | 0x400), static_cast<int>(exp) - 25);
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  bits |= sign;
  std::memcpy(&v, &bits, 4);
  return v;
}

// Round to nearest even, from double so float64 -> float16 rounds once.
inline uint16_t DoubleToHalf(double v) {
  const uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  const double a = std::fabs(v);
  if (std::isnan(v)) return sign | 0x7e00;
  if (a >= 65520.0) return sign | 0x7c00;  // 65520 is halfway between 65504 and 2^16
  if (a < std::ldexp(1.0, -14))
    return sign | static_cast<uint16_t>(std::nearbyint(std::ldexp(a, 24)));
  int e2;
  std::frexp(a, &e2);  // a = f * 2^e2, f in [0.5, 1)
  int e = e2 - 1;
  double mant = std::nearbyint((std::ldexp(a, -e) - 1.0) * 1024.0);
  if (mant >= 1024.0) {
    mant = 0;
    ++e;
  }
  if (e + 15 >= 31) return sign | 0x7c00;
  return sign | static_cast<uint16_t>(((e + 15) << 10) | static_cast<int>(mant));
}

inline float Bf16ToFloat(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
inline uint16_t FloatToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return static_cast<uint16_t>(bits >> 16);
}
// Round to nearest even (Cast since ONNX 1.14's test data, ml_dtypes, ONNX Runtime); NaN stays NaN.
inline uint16_t FloatToBf16Rounded(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if (std::isnan(f)) return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7FFF + ((bits >> 16) & 1);
  return static_cast<uint16_t>(bits >> 16);
}

}  // namespace kiln
