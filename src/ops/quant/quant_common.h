// Helpers shared by the quantization ops (src/ops/quant/), the calibrator (src/quant/) and the
// int8 kernels: the ONNX linear-quantization arithmetic in one place.
//
//   q = saturate(round_half_even(x / scale) + zero_point)      (QuantizeLinear)
//   x = (q - zero_point) * scale                               (DequantizeLinear)
//
// computed in float32 as ONNX's reference does (x / scale is a float division, not a multiply by
// the reciprocal), so results match the ONNX backend tests bit for bit. Scales and zero points are
// per tensor (one element) or per axis (1-D, one per index of `axis`).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "ir/op.h"
#include "kiln/status.h"
#include "kiln/tensor.h"

namespace kiln::ops::quant {

// The integer types kiln quantizes to or from: uint8, int8, uint16, int16, uint4, int4 (and int32
// for DequantizeLinear's input). (QuantizeLinear/DequantizeLinear also take the 8-bit floats and
// float4e2m1, core/float8.h.)
inline bool IsQuantType(DataType t) {
  return t == DataType::kUInt8 || t == DataType::kInt8 || t == DataType::kUInt16 ||
         t == DataType::kInt16 || t == DataType::kUInt4 || t == DataType::kInt4;
}

// uint8 or int8: what the int8 kernels and fusions take.
inline bool Is8Bit(DataType t) { return t == DataType::kUInt8 || t == DataType::kInt8; }

// [lo, hi] of a quantized type.
inline void QuantRange(DataType t, double* lo, double* hi) {
  switch (t) {
    case DataType::kUInt8:
      *lo = 0, *hi = 255;
      return;
    case DataType::kInt8:
      *lo = -128, *hi = 127;
      return;
    case DataType::kUInt16:
      *lo = 0, *hi = 65535;
      return;
    case DataType::kInt16:
      *lo = -32768, *hi = 32767;
      return;
    case DataType::kUInt4:
      *lo = 0, *hi = 15;
      return;
    case DataType::kInt4:
      *lo = -8, *hi = 7;
      return;
    default:
      *lo = std::numeric_limits<int32_t>::min(), *hi = std::numeric_limits<int32_t>::max();
  }
}

// round_half_even(x / scale) + zp, saturated to [lo, hi]; NaN maps to zp (ONNX leaves it open).
inline int32_t QuantizeValue(float x, float scale, int32_t zp, float lo, float hi) {
  float v = std::nearbyint(x / scale);
  if (std::isnan(v)) return zp;
  v += static_cast<float>(zp);
  v = v < lo ? lo : (v > hi ? hi : v);
  return static_cast<int32_t>(v);
}

// Reads element i of an integer tensor (uint8, int8, uint16, int16, int32; uint4 and int4 held one
// per byte) as int32.
inline int32_t ReadQuant(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DataType::kUInt8:
    case DataType::kUInt4:
      return static_cast<const uint8_t*>(t.raw())[i];
    case DataType::kInt8:
    case DataType::kInt4:
      return static_cast<const int8_t*>(t.raw())[i];
    case DataType::kUInt16:
      return static_cast<const uint16_t*>(t.raw())[i];
    case DataType::kInt16:
      return static_cast<const int16_t*>(t.raw())[i];
    case DataType::kInt32:
      return static_cast<const int32_t*>(t.raw())[i];
    default:
      return 0;
  }
}

// Writes v (already saturated) as element i of a quantized tensor.
inline void WriteQuant(Tensor* t, int64_t i, int32_t v) {
  switch (t->dtype()) {
    case DataType::kUInt8:
    case DataType::kUInt4:
      static_cast<uint8_t*>(t->raw())[i] = static_cast<uint8_t>(v);
      return;
    case DataType::kInt8:
    case DataType::kInt4:
      static_cast<int8_t*>(t->raw())[i] = static_cast<int8_t>(v);
      return;
    case DataType::kUInt16:
      static_cast<uint16_t*>(t->raw())[i] = static_cast<uint16_t>(v);
      return;
    case DataType::kInt16:
      static_cast<int16_t*>(t->raw())[i] = static_cast<int16_t>(v);
      return;
    case DataType::kInt32:
      static_cast<int32_t*>(t->raw())[i] = v;
      return;
    default:
      return;
  }
}

// y = QuantizeLinear(x, scale, zp) per tensor: x holds y's numel() float32 values; y is 8- or
// 16-bit.
inline void QuantizeTensor(const float* x, float scale, int32_t zp, Tensor* y) {
  double lo, hi;
  QuantRange(y->dtype(), &lo, &hi);
  for (int64_t i = 0, n = y->numel(); i < n; ++i)
    WriteQuant(y, i,
               QuantizeValue(x[i], scale, zp, static_cast<float>(lo), static_cast<float>(hi)));
}

// How element i of a tensor of `shape` finds its scale and zero point: per tensor (channels 1)
// or along `axis`: channel = (i / inner) % channels.
struct QuantAxis {
  int64_t channels = 1, inner = 1;
  int64_t channel(int64_t i) const { return channels == 1 ? 0 : (i / inner) % channels; }
};

// Checks scale (and the optional zero point) against `shape`: one element (per tensor, any rank
// of size 1 up to opset 13's scalar rule) or 1-D with shape[axis] elements. `what` prefixes
// errors ("y_scale"). Returns the rule violated, "" when fine.
std::string ResolveQuantAxis(const Shape& shape, const Shape& scale, const Shape* zero_point,
                             int64_t axis, QuantAxis* out);

}  // namespace kiln::ops::quant
