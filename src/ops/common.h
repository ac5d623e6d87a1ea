// Helpers shared by op definitions and reference kernels: ONNX multidirectional broadcasting,
// axis normalisation, strides, dtype dispatch, wrapping integer arithmetic and reading
// shape-carrying int tensors.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "ir/op.h"
#include "kiln/status.h"
#include "kiln/tensor.h"

namespace kiln::ops {

// Multidirectional (numpy) broadcast of shapes; error names both shapes.
StatusOr<Shape> BroadcastShapes(const std::vector<Shape>& shapes);
// Row-major strides; 0 for broadcast dims when `shape` is aligned to `out` from the right.
std::vector<int64_t> BroadcastStrides(const Shape& shape, const Shape& out);
std::vector<int64_t> Strides(const Shape& shape);
// Maps a possibly negative axis into [0, rank); error when out of range.
StatusOr<int64_t> NormalizeAxis(int64_t axis, int64_t rank);
// Reads an int64 or int32 tensor's values as int64.
std::vector<int64_t> ReadInts(const Tensor& t);
// Reads element i of a tensor of any storable dtype (float16 and bfloat16 decoded) as double.
double ReadScalarAsDouble(const Tensor& t, int64_t i);
// ctx.ExpectDtype(i, ...) over the numeric dtypes: float32, float64 and the 8/16/32/64-bit signed
// and unsigned integers (KILN_DISPATCH_NUMERIC's list), with bool too when `with_bool`
// (KILN_DISPATCH_ALL's).
Status ExpectNumeric(const ir::InferContext& ctx, size_t i, bool with_bool = false);

// Iterates all output indices of a broadcast binary op, calling f(out_index, a_index, b_index).
template <typename F>
void ForEachBroadcast2(const Shape& out, const Shape& a, const Shape& b, F&& f) {
  const int64_t n = NumElements(out);
  if (n == 0) return;
  if (a == out && b == out) {
    for (int64_t i = 0; i < n; ++i) f(i, i, i);
    return;
  }
  const size_t r = out.size();
  auto sa = BroadcastStrides(a, out), sb = BroadcastStrides(b, out);
  std::vector<int64_t> idx(r, 0);
  int64_t ia = 0, ib = 0;
  for (int64_t i = 0; i < n; ++i) {
    f(i, ia, ib);
    for (int64_t d = static_cast<int64_t>(r) - 1; d >= 0; --d) {
      if (++idx[d] < out[d]) {
        ia += sa[d];
        ib += sb[d];
        break;
      }
      ia -= sa[d] * (out[d] - 1);
      ib -= sb[d] * (out[d] - 1);
      idx[d] = 0;
    }
  }
}

// std::isnan for floating types; false for integers and bool.
template <typename T>
bool IsNan(T v) {
  if constexpr (std::is_floating_point_v<T>)
    return v != v;
  else
    return false;
}

// Integer arithmetic with ONNX's (numpy's) semantics: results wrap modulo 2^bits. Computed in an
// unsigned type at least as wide as unsigned int (so uint16 * uint16 does not promote to a signed
// int and overflow), then converted back, which C++20 defines as modular. Floating types compute
// as usual; bool is not arithmetic here.
template <typename T>
using WrapUnsigned =
    std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;
template <typename T>
T WrapAdd(T a, T b) {
  if constexpr (std::is_integral_v<T>)
    return static_cast<T>(static_cast<WrapUnsigned<T>>(a) + static_cast<WrapUnsigned<T>>(b));
  else
    return a + b;
}
template <typename T>
T WrapSub(T a, T b) {
  if constexpr (std::is_integral_v<T>)
    return static_cast<T>(static_cast<WrapUnsigned<T>>(a) - static_cast<WrapUnsigned<T>>(b));
  else
    return a - b;
}
template <typename T>
T WrapMul(T a, T b) {
  if constexpr (std::is_integral_v<T>)
    return static_cast<T>(static_cast<WrapUnsigned<T>>(a) * static_cast<WrapUnsigned<T>>(b));
  else
    return a * b;
}
template <typename T>
T WrapNeg(T a) {
  return WrapSub<T>(T(0), a);
}
// a / b. Integers truncate toward zero; a zero divisor gives 0 (numpy's integer result, with no
// trap) and INT_MIN / -1 wraps to INT_MIN (no SIGFPE).
template <typename T>
T DivideOrZero(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    if (b == 0) return T(0);
    if constexpr (std::is_signed_v<T>)
      if (b == T(-1)) return WrapNeg(a);
    return static_cast<T>(a / b);
  } else {
    return a / b;
  }
}

// One case of a dtype switch: runs the statements with `T` the C++ type of the dtype.
#define KILN_DISPATCH_CASE_(ENUM, TYPE, ...) \
  case ::kiln::DataType::ENUM: {             \
    using T = TYPE;                          \
    __VA_ARGS__;                             \
    break;                                   \
  }
#define KILN_DISPATCH_NUMERIC_CASES_(...)             \
  KILN_DISPATCH_CASE_(kFloat, float, __VA_ARGS__)     \
  KILN_DISPATCH_CASE_(kDouble, double, __VA_ARGS__)   \
  KILN_DISPATCH_CASE_(kInt8, int8_t, __VA_ARGS__)     \
  KILN_DISPATCH_CASE_(kInt16, int16_t, __VA_ARGS__)   \
  KILN_DISPATCH_CASE_(kInt32, int32_t, __VA_ARGS__)   \
  KILN_DISPATCH_CASE_(kInt64, int64_t, __VA_ARGS__)   \
  KILN_DISPATCH_CASE_(kUInt8, uint8_t, __VA_ARGS__)   \
  KILN_DISPATCH_CASE_(kUInt16, uint16_t, __VA_ARGS__) \
  KILN_DISPATCH_CASE_(kUInt32, uint32_t, __VA_ARGS__) \
  KILN_DISPATCH_CASE_(kUInt64, uint64_t, __VA_ARGS__)
#define KILN_DISPATCH_DEFAULT_(dtype, describe)                             \
  default:                                                                  \
    return ::kiln::Unsupported(std::string("failed to run ") + (describe) + \
                               ": unsupported dtype " + ::kiln::DataTypeName(dtype));

// Runs the statements with `T` the C++ type of `dtype` among every type kiln computes on
// (IsSupportedDataType: float32, float64, bool, the 8/16/32/64-bit signed and unsigned integers);
// returns Unsupported naming `describe` otherwise. The statements must compile for each type.
#define KILN_DISPATCH_ALL(dtype, describe, ...)   \
  switch (dtype) {                                \
    KILN_DISPATCH_NUMERIC_CASES_(__VA_ARGS__)     \
    KILN_DISPATCH_CASE_(kBool, bool, __VA_ARGS__) \
    KILN_DISPATCH_DEFAULT_(dtype, describe)       \
  }

// The same without bool: float32, float64 and the signed and unsigned integers.
#define KILN_DISPATCH_NUMERIC(dtype, describe, ...) \
  switch (dtype) {                                  \
    KILN_DISPATCH_NUMERIC_CASES_(__VA_ARGS__)       \
    KILN_DISPATCH_DEFAULT_(dtype, describe)         \
  }

}  // namespace kiln::ops
