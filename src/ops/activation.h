// Activations as graphs spell them, on top of kiln's one Activation type (activation_math.h):
// - kiln's fused ops (FusedConv, FusedMatMul, FusedBatchNormalization; domain "kiln") name theirs
//   in the string attribute `activation` ("" or absent: none; "Relu", "Clip", "LeakyRelu",
//   "Sigmoid", "HardSigmoid", "HardSwish", "Tanh", "Silu", "Gelu", "GeluTanh", "Elu") with float
//   parameters `activation_alpha` and `activation_beta`; unset parameters take the ONNX defaults;
// - a standalone ONNX activation node (Relu, LeakyRelu, HardSigmoid, Clip, Sigmoid, Tanh,
//   HardSwish, Elu, Gelu-20 with approximate "none" or "tanh"), read by ActivationOfNode, which the
//   reference kernels, the fusion passes and the fast kernels all use, so the defaults agree
//   everywhere. The activation ops (ops/elementwise/unary.cc) return what it reads as
//   ActivationAttrs, and kiln.QAdd (ops/quant/qadd.cc) its `activation` (ParseActivation).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/op.h"
#include "ops/activation_math.h"

namespace kiln::ops {

// The activations (Relu, LeakyRelu, Sigmoid, Tanh, HardSigmoid, HardSwish, Elu) and Clip (whose
// min/max are inputs from opset 11: act then holds the attribute form only).
// Also kiln.QAdd (Relu or none); read by backends/cpu/qdq_loops.cc.
struct ActivationAttrs : ir::OpAttrs {
  Activation act;
};

// Reads `activation`, `activation_alpha`, `activation_beta` of a fused node (each name after
// `prefix`: kiln.QConvDw's depthwise half has "dw_activation", ...). InvalidModel naming the node
// for an unknown activation.
Status ParseActivation(const ir::Node& node, Activation* act, const std::string& prefix = "");

// The activation a standalone ONNX node computes, or false when the node is not one of the
// fusable activations or its parameters are not known: Clip-11+ reads min/max from inputs 1 and
// 2, which must then be one-element float constants (`constants[i]`, nullptr when unknown).
bool ActivationOfNode(const ir::Node& node, const std::vector<const Tensor*>& constants,
                      Activation* act);

// ActivationOfNode, or the kind of a parameterless unary math op (Erf, Exp, Log, Sqrt, Neg, Abs,
// Reciprocal): what the elementwise kernels (oneDNN eltwise, cpu small loops, CUDA) compute for a
// standalone node. False when the node is neither.
bool UnaryOfNode(const ir::Node& node, const std::vector<const Tensor*>& constants,
                 Activation* act);

// The attribute spelling of `kind` ("" for kNone and for the non-fusable math kinds).
const char* ActivationName(ActivationKind kind);

// data[i] = act(data[i]) for i < n: the host reference loop (the Gelus in double).
void ApplyActivation(const Activation& act, float* data, int64_t n);

// act(x) computed in double (host only): the reference for float64 tensors, and for the Gelus of
// ApplyActivation. Same formulas as activation_math.h's float ones.
double ActivateDouble(const Activation& act, double x);

}  // namespace kiln::ops
