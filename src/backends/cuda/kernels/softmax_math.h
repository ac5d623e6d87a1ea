// Softmax / LogSoftmax arithmetic (ONNX opset-13 semantics) shared by softmax.cu and its CPU
// tests. Layout: X viewed as [outer, n, inner] row-major (opset < 13 callers pass inner = 1 and
// n = the flattened tail); each of the outer * inner vectors has n elements spaced `inner` apart
// and is normalised by one block (reduce_math.h): max, shift = max if finite else 0, sum of
// exp(x - shift), then exp(x - shift) / sum or x - shift - log(sum). A NaN element makes the sum,
// and so the whole vector, NaN, as in the reference. Float accumulation (reference: double); with
// a +inf maximum (shift 0) an element above ~88.7 overflows expf and gives NaN where the double
// reference gives 0.
#pragma once

#include "backends/cuda/kernels/hd.h"
#include "backends/cuda/kernels/reduce_math.h"

namespace kiln::cuda_math {

struct SoftmaxShape {
  int64_t outer, n, inner;
};

// Vector v in [0, outer * inner): offset of its first element (its stride is `inner`).
KILN_HD int64_t SoftmaxVectorBase(const SoftmaxShape& s, int64_t v) {
  const int64_t o = v / s.inner;
  return o * s.n * s.inner + (v - o * s.inner);
}

KILN_HD float SoftmaxShift(float max) { return IsFinite(max) ? max : 0.f; }

KILN_HD float SoftmaxOut(float x, float shift, float sum, bool log_softmax) {
  return log_softmax ? x - shift - logf(sum) : expf(x - shift) / sum;
}

}  // namespace kiln::cuda_math
