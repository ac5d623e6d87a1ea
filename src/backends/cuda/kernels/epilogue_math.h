// Epilogues that finish a library convolution or GEMM in place, shared by epilogue.cu and its CPU
// tests. Conv (kiln.FusedConv after cuDNN ran without bias): Y [N, C, HW] dense, y = act(y +
// bias[c] + residual[i]); Gemm/MatMul (kiln.FusedMatMul): Y [rows, cols], y = act(y + bias[col]).
// The order is the reference's (ops/fused/fused_conv.cc, fused_matmul.cc): bias, then residual,
// then the activation (activation_math.h; kNone for none). bias and residual may be null.
// The reference adds the conv bias in its double accumulator; here it is a float add after the
// library's float result (one rounding apart). Limits: float32.
#pragma once

#include "backends/cuda/kernels/activation_math.h"
#include "backends/cuda/kernels/cast_math.h"
#include "backends/cuda/kernels/hd.h"

namespace kiln::cuda_math {

struct EpilogueParams {
  Activation activation;
  float alpha;
  float beta;
};

// Element i of Y [N, C, HW]: its channel.
KILN_HD int64_t ChannelOf(int64_t i, int64_t channels, int64_t hw) { return (i / hw) % channels; }

// One element: y plus bias (may be null) at `channel`, plus residual (may be null) at `i`.
template <typename T>
KILN_HD float ConvEpilogueAt(float y, const float* bias, const T* residual, int64_t i,
                             int64_t channel, const EpilogueParams& p) {
  if (bias != nullptr) y += bias[channel];
  if (residual != nullptr) y += ToFloat(residual[i]);
  return Apply(p.activation, y, p.alpha, p.beta);
}

// One element of Y [rows, cols]: column `i % cols`.
KILN_HD float RowBiasEpilogueAt(float y, const float* bias, int64_t i, int64_t cols,
                                const EpilogueParams& p) {
  if (bias != nullptr) y += bias[i % cols];
  return Apply(p.activation, y, p.alpha, p.beta);
}

}  // namespace kiln::cuda_math
