// kiln's one Activation type: its kinds, its parameters and its math, in one header that host and
// device code both compile (KILN_HD). The reference kernels of the unfused ops
// (ops/elementwise/unary.cc), the fused ops' epilogue (ops/activation.cc), the fusion passes
// (passes/activation_match.cc), the oneDNN post-op mapping and the CUDA kernels all use it, so an
// activation's defaults and formula are written once.
//
// Parameters: Clip (alpha = min, beta = max), LeakyRelu and Elu (alpha), HardSigmoid (alpha, beta);
// the other kinds ignore them. DefaultActivation() gives the ONNX defaults. Silu is x * sigmoid(x);
// Gelu is the erf form 0.5 * x * (1 + erf(x / sqrt(2))) (GeluTanh the tanh approximation), in float
// here (the host reference loop, ApplyActivation, evaluates it in double).
//
// The kinds after kElu are unary math that the CUDA elementwise kernel runs through the same
// switch; they are not fusable activations (ParseActivation refuses them). Values are stable:
// CUDA launchers take the kind as int.
#pragma once

#include <cfloat>
#include <cmath>

#include "core/hd.h"

namespace kiln::ops {

enum class ActivationKind : int {
  kNone = 0,  // identity
  kRelu,
  kClip,
  kLeakyRelu,
  kSigmoid,
  kHardSigmoid,
  kHardSwish,
  kTanh,
  kSilu,
  kGelu,
  kGeluTanh,
  kElu,
  kErf,
  kExp,
  kLog,
  kSqrt,
  kNeg,
  kAbs,
  kReciprocal,
};

struct Activation {
  ActivationKind kind = ActivationKind::kNone;
  float alpha = 0.f;
  float beta = 0.f;
};

// The ONNX defaults of a kind's parameters: Clip the whole float range, LeakyRelu 0.01,
// HardSigmoid 0.2 and 0.5; zero otherwise.
KILN_HD Activation DefaultActivation(ActivationKind kind) {
  switch (kind) {
    case ActivationKind::kClip:
      return {kind, -FLT_MAX, FLT_MAX};
    case ActivationKind::kLeakyRelu:
      return {kind, 0.01f, 0.f};
    case ActivationKind::kHardSigmoid:
      return {kind, 0.2f, 0.5f};
    case ActivationKind::kElu:
      return {kind, 1.f, 0.f};
    default:
      return {kind, 0.f, 0.f};
  }
}

KILN_HD float Relu(float x) { return x > 0.f ? x : 0.f; }
KILN_HD float Sigmoid(float x) { return 1.f / (1.f + expf(-x)); }
KILN_HD float HardSigmoid(float x, float alpha, float beta) {
  return fmaxf(0.f, fminf(1.f, alpha * x + beta));
}
KILN_HD float HardSwish(float x) { return x * fminf(1.f, fmaxf(0.f, x / 6.f + 0.5f)); }
KILN_HD float Silu(float x) { return x * Sigmoid(x); }
KILN_HD float Clip(float x, float lo, float hi) { return fminf(hi, fmaxf(lo, x)); }
KILN_HD float LeakyRelu(float x, float alpha) { return x >= 0.f ? x : alpha * x; }
KILN_HD float Elu(float x, float alpha) { return x >= 0.f ? x : alpha * (expf(x) - 1.f); }
KILN_HD float Gelu(float x) { return 0.5f * x * (1.f + erff(x * 0.70710678118654752440f)); }
// Gelu-20's approximate="tanh": 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))).
KILN_HD float GeluTanh(float x) {
  return 0.5f * x * (1.f + tanhf(0.79788456080286535588f * (x + 0.044715f * x * x * x)));
}

KILN_HD float ActivationValue(ActivationKind kind, float x, float alpha, float beta) {
  switch (kind) {
    case ActivationKind::kNone:
      return x;
    case ActivationKind::kRelu:
      return Relu(x);
    case ActivationKind::kClip:
      return Clip(x, alpha, beta);
    case ActivationKind::kLeakyRelu:
      return LeakyRelu(x, alpha);
    case ActivationKind::kSigmoid:
      return Sigmoid(x);
    case ActivationKind::kHardSigmoid:
      return HardSigmoid(x, alpha, beta);
    case ActivationKind::kHardSwish:
      return HardSwish(x);
    case ActivationKind::kTanh:
      return tanhf(x);
    case ActivationKind::kSilu:
      return Silu(x);
    case ActivationKind::kGelu:
      return Gelu(x);
    case ActivationKind::kGeluTanh:
      return GeluTanh(x);
    case ActivationKind::kElu:
      return Elu(x, alpha);
    case ActivationKind::kErf:
      return erff(x);
    case ActivationKind::kExp:
      return expf(x);
    case ActivationKind::kLog:
      return logf(x);
    case ActivationKind::kSqrt:
      return sqrtf(x);
    case ActivationKind::kNeg:
      return -x;
    case ActivationKind::kAbs:
      return x < 0.f ? -x : x;
    case ActivationKind::kReciprocal:
      return 1.f / x;
  }
  return x;
}

KILN_HD float Activate(const Activation& a, float x) {
  return ActivationValue(a.kind, x, a.alpha, a.beta);
}

}  // namespace kiln::ops
