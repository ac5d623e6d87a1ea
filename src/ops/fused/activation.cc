// Activation parsing and the reference loop for kiln's fused ops (see activation.h).
#include "ops/fused/activation.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace kiln::ops {
namespace {

struct Entry {
  const char* name;
  ActivationKind kind;
};
constexpr Entry kActivations[] = {
    {"", ActivationKind::kNone},
    {"Relu", ActivationKind::kRelu},
    {"Clip", ActivationKind::kClip},
    {"LeakyRelu", ActivationKind::kLeakyRelu},
    {"Sigmoid", ActivationKind::kSigmoid},
    {"HardSigmoid", ActivationKind::kHardSigmoid},
    {"HardSwish", ActivationKind::kHardSwish},
    {"Tanh", ActivationKind::kTanh},
    {"Silu", ActivationKind::kSilu},
    {"Gelu", ActivationKind::kGelu},
};

constexpr double kSqrtHalf = 0.70710678118654752440;

float Sigmoid(float x) { return 1.f / (1.f + std::exp(-x)); }

}  // namespace

const char* ActivationName(ActivationKind kind) {
  for (const Entry& e : kActivations)
    if (e.kind == kind) return e.name;
  return "";
}

Status ParseActivation(const ir::Node& node, Activation* act) {
  const std::string name = node.GetString("activation", "");
  const Entry* found = nullptr;
  for (const Entry& e : kActivations)
    if (name == e.name) found = &e;
  if (found == nullptr) {
    std::string known;
    for (const Entry& e : kActivations)
      if (*e.name) known += std::string(known.empty() ? "" : ", ") + e.name;
    return ir::AttrError(node,
                         "activation must be empty or one of " + known + "; got '" + name + "'");
  }
  act->kind = found->kind;
  float alpha = 0.f, beta = 0.f;
  switch (act->kind) {
    case ActivationKind::kClip:
      alpha = std::numeric_limits<float>::lowest();
      beta = std::numeric_limits<float>::max();
      break;
    case ActivationKind::kLeakyRelu:
      alpha = 0.01f;
      break;
    case ActivationKind::kHardSigmoid:
      alpha = 0.2f;
      beta = 0.5f;
      break;
    default:
      break;
  }
  act->alpha = node.GetFloat("activation_alpha", alpha);
  act->beta = node.GetFloat("activation_beta", beta);
  return OkStatus();
}

void ApplyActivation(const Activation& act, float* data, int64_t n) {
  const float a = act.alpha, b = act.beta;
  switch (act.kind) {
    case ActivationKind::kNone:
      return;
    case ActivationKind::kRelu:
      for (int64_t i = 0; i < n; ++i) data[i] = data[i] > 0.f ? data[i] : 0.f;
      return;
    case ActivationKind::kClip:
      for (int64_t i = 0; i < n; ++i) data[i] = std::min(b, std::max(a, data[i]));
      return;
    case ActivationKind::kLeakyRelu:
      for (int64_t i = 0; i < n; ++i) data[i] = data[i] >= 0.f ? data[i] : a * data[i];
      return;
    case ActivationKind::kSigmoid:
      for (int64_t i = 0; i < n; ++i) data[i] = Sigmoid(data[i]);
      return;
    case ActivationKind::kHardSigmoid:
      for (int64_t i = 0; i < n; ++i) data[i] = std::max(0.f, std::min(1.f, a * data[i] + b));
      return;
    case ActivationKind::kHardSwish:
      for (int64_t i = 0; i < n; ++i)
        data[i] = data[i] * std::max(0.f, std::min(1.f, data[i] / 6.f + 0.5f));
      return;
    case ActivationKind::kTanh:
      for (int64_t i = 0; i < n; ++i) data[i] = std::tanh(data[i]);
      return;
    case ActivationKind::kSilu:
      for (int64_t i = 0; i < n; ++i) data[i] = data[i] * Sigmoid(data[i]);
      return;
    case ActivationKind::kGelu:
      for (int64_t i = 0; i < n; ++i) {
        const double x = data[i];
        data[i] = static_cast<float>(0.5 * x * (1.0 + std::erf(x * kSqrtHalf)));
      }
      return;
  }
}

}  // namespace kiln::ops
