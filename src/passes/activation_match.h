// Recognising an activation applied to a value, for the fusions that fold it into the producer
// (fuse_conv_activation.cc, fuse_matmul_add.cc). The result uses the attribute spelling of kiln's
// fused ops (ops/activation.h).
//
// Recognised on value x: Relu, Clip (opset < 11 attributes, or constant scalar min/max inputs),
// LeakyRelu, Sigmoid, HardSigmoid, HardSwish, Tanh, each as x's only consumer; Silu as
// Mul(x, Sigmoid(x)); HardSwish also as Mul(x, HardSigmoid(x, alpha=1/6, beta=0.5)); Gelu in
// PyTorch's erf form 0.5 * x * (1 + Erf(x / 1.4142135)) (Div by sqrt(2) or Mul by 1/sqrt(2); the
// two Muls in any order; operands of Add/Mul either way round); HardSwish also as PaddlePaddle
// writes it, x * Clip(x + 3, 0, 6) / 6 (or * (1/6)). Every intermediate value must be
// read only inside the pattern and must not be a graph output; x itself must not be a graph output.
// Float32 only (the caller checks the producer's dtype).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ops/activation.h"
#include "passes/graph_edit.h"

namespace kiln::passes {

struct ActivationMatch {
  ops::Activation act;     // kiln's one activation type (ops/activation.h)
  std::vector<int> nodes;  // the activation's nodes, to remove
  int output = -1;         // the value the activation produces
};

std::optional<ActivationMatch> MatchActivation(const GraphEditor& ed, int x);

// Writes `activation`, `activation_alpha`, `activation_beta` on a fused node.
void SetActivationAttrs(const ActivationMatch& m, ir::Node* node);

// True when v is a one-element constant within `tol` of `want`.
bool IsScalarNear(const GraphEditor& ed, int v, double want, double tol = 1e-5);

}  // namespace kiln::passes
