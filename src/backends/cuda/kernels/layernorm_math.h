// LayerNormalization arithmetic shared by layernorm.cu and its CPU tests. Layout: X [rows, cols]
// row-major (the caller folds X[:axis] into rows and X[axis:] into cols); gamma and beta are dense
// [cols] (the caller expands a broadcast Scale/B first; beta may be null). Per row, one block
// (reduce_math.h): mean = sum / cols, biased var = sum((x - mean)^2) / cols (two passes),
// inv = 1 / sqrt(var + epsilon), y = (x - mean) * inv * gamma + beta. Float statistics; the
// reference (ops/nn/norm.cc) computes them in double.
#pragma once

#include <cmath>

#include "backends/cuda/kernels/hd.h"

namespace kiln::cuda_math {

KILN_HD float LayerNormInvStd(float sq_dev_sum, int64_t cols, float epsilon) {
  return 1.f / sqrtf(sq_dev_sum / static_cast<float>(cols) + epsilon);
}

// Column j of a row with statistics mean, inv.
KILN_HD float LayerNormOut(float x, float mean, float inv, const float* gamma, const float* beta,
                           int64_t j) {
  return (x - mean) * inv * gamma[j] + (beta != nullptr ? beta[j] : 0.f);
}

}  // namespace kiln::cuda_math
