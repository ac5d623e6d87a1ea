// A bound on shapes that keeps every kernel's size arithmetic inside int64. A tensor that holds
// elements cannot be large (it must fit in memory), but an empty one can name any dims:
// [0, 2^62, 97] holds nothing, and a kernel multiplying the dims before or after an axis
// overflows (the session fuzzer's Concat and MatMul did). The span of a shape is the product of
// its dims with each 0 counted as 1; kiln refuses a shape whose span exceeds kMaxShapeSpan where
// it first meets it: the loader (initializers), the node evaluator (every inferred output shape)
// and the session (inputs fed). Below the bound, a product of any of a shape's dims times an
// element size (at most 16 bytes) and a further factor of up to 2^10 still fits in int64.
#pragma once

#include <cstdint>

#include "kiln/tensor.h"

namespace kiln {

inline constexpr int64_t kMaxShapeSpan = int64_t{1} << 48;

// True when every dim is >= 0 and the span is at most `bound` (the loader uses a smaller one).
inline bool ShapeSpanFits(const Shape& shape, int64_t bound = kMaxShapeSpan) {
  int64_t span = 1;
  for (int64_t d : shape) {
    if (d < 0) return false;
    const int64_t f = d == 0 ? 1 : d;
    if (span > bound / f) return false;
    span *= f;
  }
  return true;
}

}  // namespace kiln
