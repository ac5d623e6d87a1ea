// The activations kiln's fused ops (FusedConv, FusedMatMul; domain "kiln", opset 1) apply last,
// after their bias and residual add. A fused node names its activation in the string attribute
// `activation` ("" or absent: none; "Relu", "Clip", "LeakyRelu", "Sigmoid", "HardSigmoid",
// "HardSwish", "Tanh", "Silu", "Gelu") with float parameters `activation_alpha` and
// `activation_beta`: Clip min and max, LeakyRelu alpha, HardSigmoid alpha and beta (others ignore
// them). Silu is x * sigmoid(x); Gelu is the erf form 0.5 * x * (1 + erf(x / sqrt(2))).
//
// The formulas match the reference kernels of the unfused ONNX ops (ops/elementwise/unary.cc) so
// a fused graph computes what the original computes. Fast kernels map Activation to their own
// post-ops (oneDNN eltwise).
#pragma once

#include <cstdint>
#include <string>

#include "ir/op.h"

namespace kiln::ops {

enum class ActivationKind {
  kNone,
  kRelu,
  kClip,
  kLeakyRelu,
  kSigmoid,
  kHardSigmoid,
  kHardSwish,
  kTanh,
  kSilu,
  kGelu,
};

struct Activation {
  ActivationKind kind = ActivationKind::kNone;
  float alpha = 0.f;
  float beta = 0.f;
};

// Reads `activation`, `activation_alpha`, `activation_beta`; unset parameters take the ONNX op's
// defaults (Clip: the float range; LeakyRelu: 0.01; HardSigmoid: 0.2, 0.5). InvalidModel naming
// the node for an unknown activation.
Status ParseActivation(const ir::Node& node, Activation* act);

// The attribute spelling of `kind` ("" for kNone).
const char* ActivationName(ActivationKind kind);

// data[i] = act(data[i]) for i < n.
void ApplyActivation(const Activation& act, float* data, int64_t n);

}  // namespace kiln::ops
