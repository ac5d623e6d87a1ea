// Activation parsing and the host reference loop (see activation.h).
#include "ops/activation.h"

#include <algorithm>
#include <cmath>

namespace kiln::ops {
namespace {

struct Entry {
  const char* name;
  ActivationKind kind;
};
// The fusable kinds, by their attribute spelling (also the ONNX op type, except Silu and
// GeluTanh: Gelu-20 with approximate="tanh").
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
    {"GeluTanh", ActivationKind::kGeluTanh},
    {"Elu", ActivationKind::kElu},
};

constexpr double kSqrtHalf = 0.70710678118654752440;
constexpr double kSqrtTwoOverPi = 0.79788456080286535588;

}  // namespace

const char* ActivationName(ActivationKind kind) {
  for (const Entry& e : kActivations)
    if (e.kind == kind) return e.name;
  return "";
}

Status ParseActivation(const ir::Node& node, Activation* act, const std::string& prefix) {
  const std::string name = node.GetString(prefix + "activation", "");
  const Entry* found = nullptr;
  for (const Entry& e : kActivations)
    if (name == e.name) found = &e;
  if (found == nullptr) {
    std::string known;
    for (const Entry& e : kActivations)
      if (*e.name) known += std::string(known.empty() ? "" : ", ") + e.name;
    return ir::AttrError(
        node, prefix + "activation must be empty or one of " + known + "; got '" + name + "'");
  }
  *act = DefaultActivation(found->kind);
  act->alpha = node.GetFloat(prefix + "activation_alpha", act->alpha);
  act->beta = node.GetFloat(prefix + "activation_beta", act->beta);
  return OkStatus();
}

bool ActivationOfNode(const ir::Node& node, const std::vector<const Tensor*>& constants,
                      Activation* act) {
  const bool kiln_gelu = node.domain == "kiln" && node.op_type == "Gelu";  // fuse_gelu's
  if (!node.domain.empty() && node.domain != "ai.onnx" && !kiln_gelu) return false;
  const std::string& t = node.op_type;
  ActivationKind kind = ActivationKind::kNone;
  for (const Entry& e : kActivations)
    if (*e.name && t == e.name && e.kind != ActivationKind::kSilu &&
        e.kind != ActivationKind::kGeluTanh)
      kind = e.kind;
  if (kind == ActivationKind::kNone) return false;
  if (kind == ActivationKind::kGelu) {  // Gelu-20: approximate = "none" | "tanh"
    const std::string approximate = node.GetString("approximate", "none");
    if (approximate == "tanh")
      kind = ActivationKind::kGeluTanh;
    else if (approximate != "none")
      return false;
  }
  *act = DefaultActivation(kind);
  switch (kind) {
    case ActivationKind::kLeakyRelu:
    case ActivationKind::kElu:
      act->alpha = node.GetFloat("alpha", act->alpha);
      break;
    case ActivationKind::kHardSigmoid:
      act->alpha = node.GetFloat("alpha", act->alpha);
      act->beta = node.GetFloat("beta", act->beta);
      break;
    case ActivationKind::kClip:
      if (node.opset < 11) {
        act->alpha = node.GetFloat("min", act->alpha);
        act->beta = node.GetFloat("max", act->beta);
        break;
      }
      for (size_t i = 1; i < 3; ++i) {
        if (!node.HasInput(i)) continue;
        const Tensor* c = i < constants.size() ? constants[i] : nullptr;
        if (c == nullptr || c->dtype() != DataType::kFloat || c->numel() != 1) return false;
        (i == 1 ? act->alpha : act->beta) = c->data<float>()[0];
      }
      break;
    default:
      if (node.inputs.size() > 1) return false;
      break;
  }
  return true;
}

bool UnaryOfNode(const ir::Node& node, const std::vector<const Tensor*>& constants,
                 Activation* act) {
  static const std::pair<const char*, ActivationKind> kMath[] = {
      {"Erf", ActivationKind::kErf},
      {"Exp", ActivationKind::kExp},
      {"Log", ActivationKind::kLog},
      {"Sqrt", ActivationKind::kSqrt},
      {"Neg", ActivationKind::kNeg},
      {"Abs", ActivationKind::kAbs},
      {"Reciprocal", ActivationKind::kReciprocal}};
  if (node.domain.empty() || node.domain == "ai.onnx")
    for (const auto& [op, kind] : kMath)
      if (node.op_type == op) {
        *act = DefaultActivation(kind);
        return true;
      }
  return ActivationOfNode(node, constants, act);
}

double ActivateDouble(const Activation& a, double x) {
  const double alpha = a.alpha, beta = a.beta;
  switch (a.kind) {
    case ActivationKind::kNone:
      return x;
    case ActivationKind::kRelu:
      return x > 0.0 ? x : 0.0;
    case ActivationKind::kClip:
      return std::min(beta, std::max(alpha, x));
    case ActivationKind::kLeakyRelu:
      return x >= 0.0 ? x : alpha * x;
    case ActivationKind::kSigmoid:
      return 1.0 / (1.0 + std::exp(-x));
    case ActivationKind::kHardSigmoid:
      return std::max(0.0, std::min(1.0, alpha * x + beta));
    case ActivationKind::kHardSwish:
      return x * std::min(1.0, std::max(0.0, x / 6.0 + 0.5));
    case ActivationKind::kTanh:
      return std::tanh(x);
    case ActivationKind::kSilu:
      return x / (1.0 + std::exp(-x));
    case ActivationKind::kGelu:
      return 0.5 * x * (1.0 + std::erf(x * kSqrtHalf));
    case ActivationKind::kGeluTanh:
      return 0.5 * x * (1.0 + std::tanh(kSqrtTwoOverPi * (x + 0.044715 * x * x * x)));
    case ActivationKind::kElu:
      return x >= 0.0 ? x : alpha * std::expm1(x);
    case ActivationKind::kErf:
      return std::erf(x);
    case ActivationKind::kExp:
      return std::exp(x);
    case ActivationKind::kLog:
      return std::log(x);
    case ActivationKind::kSqrt:
      return std::sqrt(x);
    case ActivationKind::kNeg:
      return -x;
    case ActivationKind::kAbs:
      return std::fabs(x);
    case ActivationKind::kReciprocal:
      return 1.0 / x;
  }
  return x;
}

void ApplyActivation(const Activation& act, float* data, int64_t n) {
  switch (act.kind) {
    case ActivationKind::kNone:
      return;
    case ActivationKind::kGelu:
    case ActivationKind::kGeluTanh:
      for (int64_t i = 0; i < n; ++i) data[i] = static_cast<float>(ActivateDouble(act, data[i]));
      return;
    default:
      for (int64_t i = 0; i < n; ++i) data[i] = Activate(act, data[i]);
      return;
  }
}

}  // namespace kiln::ops
