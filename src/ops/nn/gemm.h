// The typed attributes of the matrix products, parsed and checked by the ops (gemm.cc, matmul.cc,
// ops/fused/fused_matmul.cc, ops/quant/qmatmul.cc) and read by their fast kernels
// (backends/cpu/matmul_onednn.cc, backends/cpu/qmatmul_onednn.cc,
// backends/cuda/ops/matmul_cublas.cc).
#pragma once

#include "ir/op.h"
#include "ops/activation.h"

namespace kiln::ops {

// Gemm, MatMul (the defaults) and FusedMatMul (domain kiln: MatMul's operands plus bias and act).
// kiln.QMatMul (ops/quant/qmatmul.cc) returns it too.
struct GemmAttrs : ir::OpAttrs {
  bool trans_a = false, trans_b = false;
  float alpha = 1.f, beta = 1.f;
  Activation act;
};

}  // namespace kiln::ops
