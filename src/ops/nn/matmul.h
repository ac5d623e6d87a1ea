// The MatMul reference routine shared by MatMul (matmul.cc) and kiln's FusedMatMul
// (ops/fused/fused_matmul.cc): numpy-matmul shape rules and the float loop. Internal to src/ops/.
#pragma once

#include "kiln/status.h"
#include "kiln/tensor.h"

namespace kiln::ops::nn {

// The operands' matrix views and the broadcast batch shape.
struct MatMulDims {
  Shape batch_a, batch_b, batch;
  int64_t m = 1, k = 1, n = 1, kb = 1;
  Shape out;
};

// Shapes A [..., M, K] and B [..., K, N] (1-D operands as numpy treats them) -> dims and output
// shape; InvalidArgument naming both shapes when they do not match.
StatusOr<MatMulDims> ComputeMatMulDims(const Shape& a, const Shape& b);

// y = a @ b in float32 with double accumulation, y laid out as `d.out`.
void MatMulFloat(const float* a, const float* b, float* y, const MatMulDims& d);

// The same in double (the integer matmuls: QLinearMatMul, MatMulInteger; exact for their values).
void MatMulDouble(const double* a, const double* b, double* y, const MatMulDims& d);

}  // namespace kiln::ops::nn
