// Helpers shared by op definitions and reference kernels: ONNX multidirectional broadcasting,
// axis normalisation, strides, dtype dispatch and reading shape-carrying int tensors.
#pragma once

#include <cstdint>
#include <string>
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

// Calls f.template operator()<T>() for the tensor's dtype among float, int32, int64, bool,
// uint8, int8; returns Unsupported otherwise.
#define KILN_DISPATCH_ALL(dtype, describe, ...)                                         \
  switch (dtype) {                                                                      \
    case ::kiln::DataType::kFloat: {                                                    \
      using T = float;                                                                  \
      __VA_ARGS__;                                                                      \
      break;                                                                            \
    }                                                                                   \
    case ::kiln::DataType::kInt32: {                                                    \
      using T = int32_t;                                                                \
      __VA_ARGS__;                                                                      \
      break;                                                                            \
    }                                                                                   \
    case ::kiln::DataType::kInt64: {                                                    \
      using T = int64_t;                                                                \
      __VA_ARGS__;                                                                      \
      break;                                                                            \
    }                                                                                   \
    case ::kiln::DataType::kBool: {                                                     \
      using T = bool;                                                                   \
      __VA_ARGS__;                                                                      \
      break;                                                                            \
    }                                                                                   \
    case ::kiln::DataType::kUInt8: {                                                    \
      using T = uint8_t;                                                                \
      __VA_ARGS__;                                                                      \
      break;                                                                            \
    }                                                                                   \
    case ::kiln::DataType::kInt8: {                                                     \
      using T = int8_t;                                                                 \
      __VA_ARGS__;                                                                      \
      break;                                                                            \
    }                                                                                   \
    default:                                                                            \
      return ::kiln::Unsupported(std::string("failed to run ") + (describe) +           \
                                 ": unsupported dtype " + ::kiln::DataTypeName(dtype)); \
  }

// Numeric types only (float, int32, int64).
#define KILN_DISPATCH_NUMERIC(dtype, describe, ...)                                     \
  switch (dtype) {                                                                      \
    case ::kiln::DataType::kFloat: {                                                    \
      using T = float;                                                                  \
      __VA_ARGS__;                                                                      \
      break;                                                                            \
    }                                                                                   \
    case ::kiln::DataType::kInt32: {                                                    \
      using T = int32_t;                                                                \
      __VA_ARGS__;                                                                      \
      break;                                                                            \
    }                                                                                   \
    case ::kiln::DataType::kInt64: {                                                    \
      using T = int64_t;                                                                \
      __VA_ARGS__;                                                                      \
      break;                                                                            \
    }                                                                                   \
    default:                                                                            \
      return ::kiln::Unsupported(std::string("failed to run ") + (describe) +           \
                                 ": unsupported dtype " + ::kiln::DataTypeName(dtype)); \
  }

}  // namespace kiln::ops
