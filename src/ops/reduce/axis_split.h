// Splitting a row-major shape around one axis into (outer, n, inner), the layout every
// single-axis reduction in this directory (ArgMax/ArgMin, TopK, Softmax) iterates over: element
// (o, i, k) lives at o * n * inner + i * inner + k. Header-only, no state.
#pragma once

#include <cstdint>

#include "kiln/tensor.h"

namespace kiln::ops {

struct AxisSplit {
  int64_t outer = 1;  // product of dims before the axis
  int64_t n = 1;      // the axis' extent (or the flattened trailing extent, see below)
  int64_t inner = 1;  // product of dims after the axis
};

// `axis` must already be normalised into [0, rank) (or 0 for a scalar). With `flatten_tail` the
// axis and every dim after it are folded into n (inner = 1): the opset < 13 Softmax coercion.
// An empty shape (a dim of 0 anywhere) gives {0, 0, 0}: nothing to iterate, and the other dims
// are not multiplied, since their product may overflow ([0, 2^62, 115] is a valid empty tensor;
// the session fuzzer's ArgMin on one overflowed, then looped). Every caller's output is empty
// then (ArgMax/ArgMin refuse an empty reduced axis when inferring shapes).
inline AxisSplit SplitAtAxis(const Shape& shape, int64_t axis, bool flatten_tail = false) {
  AxisSplit s;
  for (int64_t d : shape)
    if (d == 0) return AxisSplit{0, 0, 0};
  const int64_t rank = static_cast<int64_t>(shape.size());
  for (int64_t d = 0; d < rank; ++d) {
    if (d < axis)
      s.outer *= shape[d];
    else if (d == axis || flatten_tail)
      s.n *= shape[d];
    else
      s.inner *= shape[d];
  }
  return s;
}

}  // namespace kiln::ops
