// The 8-bit floats, float4e2m1 and the 4-bit integers of ONNX: element encoding and decoding,
// shared by Cast, QuantizeLinear/DequantizeLinear, the TensorProto reader and the test runner.
// kiln holds these types one element per byte (include/kiln/tensor.h).
//
// Encoding rounds to nearest even (as ml_dtypes, which ONNX's reference uses). Values past the
// largest finite number: with `saturate` (Cast's default since opset 19) they become it, +-inf
// included; without, E4M3FN and the FNUZ types give NaN and E5M2 gives +-inf. NaN stays NaN.
// float4e2m1 has neither inf nor NaN: it always saturates, and NaN becomes a zero of the
// opposite sign (ml_dtypes' choice, which ONNX's test data records). FNUZ types have no -0 (it
// becomes +0; their only NaN is 0x80). E8M0 (an unsigned power of two, 2^(e-127), 0xFF NaN) rounds
// by `mode`: "up" (ONNX's default), "down" or "nearest".
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kiln/tensor.h"

namespace kiln {

struct MiniFloatFormat {
  int mantissa_bits;
  int bias;
  bool ieee;  // E5M2: exponent all ones is inf (mantissa 0) or NaN
  bool fnuz;  // no -0, 0x80 is the only NaN
  bool nan;   // has a NaN at all (float4e2m1 does not)
  double max;
};

inline bool IsMiniFloat(DataType t) {
  switch (t) {
    case DataType::kFloat8E4M3FN:
    case DataType::kFloat8E4M3FNUZ:
    case DataType::kFloat8E5M2:
    case DataType::kFloat8E5M2FNUZ:
    case DataType::kFloat4E2M1:
      return true;
    default:
      return false;
  }
}

inline MiniFloatFormat MiniFloatFormatOf(DataType t) {
  switch (t) {
    case DataType::kFloat8E4M3FN:
      return {3, 7, false, false, true, 448.0};
    case DataType::kFloat8E4M3FNUZ:
      return {3, 8, false, true, true, 240.0};
    case DataType::kFloat8E5M2:
      return {2, 15, true, false, true, 57344.0};
    case DataType::kFloat8E5M2FNUZ:
      return {2, 16, false, true, true, 57344.0};
    default:  // kFloat4E2M1
      return {1, 1, false, false, false, 6.0};
  }
}

// Decodes one element of a mini-float type (the code in the low 8 or 4 bits).
inline float MiniFloatToFloat(uint8_t code, DataType t) {
  const MiniFloatFormat f = MiniFloatFormatOf(t);
  const int total = t == DataType::kFloat4E2M1 ? 4 : 8;
  const int sign_bit = total - 1, exp_bits = total - 1 - f.mantissa_bits;
  const int exp_mask = (1 << exp_bits) - 1, mant_mask = (1 << f.mantissa_bits) - 1;
  const bool neg = (code >> sign_bit) & 1;
  const int e = (code >> f.mantissa_bits) & exp_mask, m = code & mant_mask;
  const float nan = neg ? -std::nanf("") : std::nanf("");  // NaN keeps the sign bit (0x80: -NaN)
  if (f.fnuz && code == 0x80) return nan;
  if (f.ieee && e == exp_mask) return m ? nan : (neg ? -INFINITY : INFINITY);
  if (!f.ieee && !f.fnuz && f.nan && e == exp_mask && m == mant_mask) return nan;
  double v = e == 0 ? std::ldexp(static_cast<double>(m), 1 - f.bias - f.mantissa_bits)
                    : std::ldexp(static_cast<double>(m | (1 << f.mantissa_bits)),
                                 e - f.bias - f.mantissa_bits);
  return static_cast<float>(neg ? -v : v);
}

// Encodes x (a float32 or float16 value, exact in double) into a mini-float type.
inline uint8_t FloatToMiniFloat(double x, DataType t, bool saturate) {
  const MiniFloatFormat f = MiniFloatFormatOf(t);
  const int total = t == DataType::kFloat4E2M1 ? 4 : 8;
  const int exp_bits = total - 1 - f.mantissa_bits;
  const uint8_t sign = std::signbit(x) ? static_cast<uint8_t>(1u << (total - 1)) : 0;
  const uint8_t exp_all = static_cast<uint8_t>(((1 << exp_bits) - 1) << f.mantissa_bits);
  const uint8_t mant_all = static_cast<uint8_t>((1 << f.mantissa_bits) - 1);
  const uint8_t nan_code = f.fnuz   ? 0x80
                           : f.ieee ? static_cast<uint8_t>(sign | exp_all | (mant_all & 0x2))
                                    : static_cast<uint8_t>(sign | exp_all | mant_all);
  const uint8_t inf_code = static_cast<uint8_t>(sign | exp_all);
  if (std::isnan(x)) return f.nan ? nan_code : sign ^ 0x8;  // float4: NaN -> a zero
  double a = std::fabs(x);
  const bool always_saturate = !f.nan;
  if (saturate || always_saturate)
    a = std::fmin(a, f.max);  // +-inf included
  else if (std::isinf(a))
    return f.ieee ? inf_code : nan_code;
  if (a == 0) return f.fnuz ? 0 : sign;
  const int min_exp = 1 - f.bias;  // the smallest normal's exponent
  int e2;
  std::frexp(a, &e2);  // a = g * 2^e2, g in [0.5, 1)
  const int e = e2 - 1 < min_exp ? min_exp : e2 - 1;
  const double q = std::ldexp(1.0, e - f.mantissa_bits);  // the spacing of values near a
  const double r = std::nearbyint(a / q) * q;             // round to nearest even
  if (r > f.max) return f.ieee ? inf_code : nan_code;     // only without saturation
  if (r == 0) return f.fnuz ? 0 : sign;
  int re2;
  std::frexp(r, &re2);
  int re = re2 - 1;
  uint32_t field, mant;
  if (re < min_exp) {  // subnormal
    field = 0;
    mant = static_cast<uint32_t>(r / std::ldexp(1.0, min_exp - f.mantissa_bits));
  } else {
    field = static_cast<uint32_t>(re + f.bias);
    mant =
        static_cast<uint32_t>(r / std::ldexp(1.0, re - f.mantissa_bits)) - (1u << f.mantissa_bits);
  }
  uint8_t code = static_cast<uint8_t>(sign | (field << f.mantissa_bits) | mant);
  if (f.fnuz && code == 0x80) code = 0;
  return code;
}

// E8M0: 2^(code-127); 0xFF is NaN.
inline float E8M0ToFloat(uint8_t code) {
  if (code == 0xFF) return std::nanf("");
  return std::ldexp(1.0f, static_cast<int>(code) - 127);
}

// ONNX's E8M0 encoding reads the float32's exponent field and rounds by the mantissa: "up" when
// any mantissa bit is set, "nearest" on the top mantissa bit (ties up unless the exponent is 0),
// "down" never; with `saturate` never past 0xFE. Sign is ignored; NaN and inf give 0xFF.
inline uint8_t FloatToE8M0(float x, bool saturate, int mode /*0 up, 1 down, 2 nearest*/) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  uint32_t e = (bits >> 23) & 0xFF;
  if (e == 0xFF) return 0xFF;
  bool up = false;
  if (mode == 0) {
    // Any mantissa bit set. (ONNX 1.19's reference, numpy_helper.to_float8e8m0, tests bits 22
    // and 0-19 only, 0x4FFFFF, so it rounds 2^e * (1 + k/2^21), k in 1..3, down: kiln follows
    // the operator's definition; tests/core/minifloat_check.py checks exactly that difference.)
    up = (bits & 0x7FFFFF) != 0;
  } else if (mode == 2) {
    const bool g = bits & 0x400000, r = bits & 0x200000, s = (bits & 0x1FFFFF) != 0;
    up = g && (r || s || e > 0);
  }
  if (up && saturate && e == 0xFE) up = false;
  if (up) ++e;
  return static_cast<uint8_t>(e);
}

// 4-bit integers: kiln keeps int4 sign-extended in an int8, uint4 in a uint8. Casting wraps (two's
// complement, as for the wider integers); quantization saturates (it clamps before storing).
inline int8_t WrapToInt4(int64_t v) {
  const int64_t low = v & 0xF;
  return static_cast<int8_t>(low >= 8 ? low - 16 : low);
}
inline uint8_t WrapToUInt4(int64_t v) { return static_cast<uint8_t>(v & 0xF); }

// Reads element i of a packed 4-bit buffer (two per byte, low nibble first) into kiln's form.
inline uint8_t UnpackNibble(const uint8_t* packed, int64_t i, DataType t) {
  const uint8_t nib = (packed[i / 2] >> ((i % 2) * 4)) & 0xF;
  if (t == DataType::kInt4) return static_cast<uint8_t>(WrapToInt4(nib));
  return nib;
}

}  // namespace kiln
