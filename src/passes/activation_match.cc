// Activation pattern matching (see activation_match.h).
#include "passes/activation_match.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace kiln::passes {
namespace {

bool IsOp(const GraphEditor& ed, int node, const char* op_type) {
  return IsOnnxOp(ed.node(node), op_type);
}

// The present outputs of `node` besides output 0 are unused.
bool OnlyOutput0(const GraphEditor& ed, int node) {
  const ir::Node& n = ed.node(node);
  if (n.outputs.empty() || n.outputs[0] < 0) return false;
  for (size_t i = 1; i < n.outputs.size(); ++i)
    if (n.outputs[i] >= 0 &&
        (!ed.Consumers(n.outputs[i]).empty() || ed.IsGraphOutput(n.outputs[i])))
      return false;
  return true;
}

// For a binary node reading `a`: its other operand, or -1 when it does not read `a` exactly once.
int OtherOperand(const GraphEditor& ed, int node, int a) {
  const ir::Node& n = ed.node(node);
  if (n.inputs.size() != 2) return -1;
  if (n.inputs[0] == a && n.inputs[1] != a) return n.inputs[1];
  if (n.inputs[1] == a && n.inputs[0] != a) return n.inputs[0];
  return -1;
}

// The sole consumer of v if it is a live `op_type` node with one used output.
int NextOp(const GraphEditor& ed, int v, const char* op_type) {
  const int c = ed.SoleConsumer(v);
  return c >= 0 && IsOp(ed, c, op_type) && OnlyOutput0(ed, c) ? c : -1;
}

std::optional<ActivationMatch> MatchUnary(const GraphEditor& ed, int x) {
  const int c = ed.SoleConsumer(x);
  if (c < 0 || !OnlyOutput0(ed, c) || !ed.node(c).domain.empty()) return std::nullopt;
  const ir::Node& n = ed.node(c);
  if (n.inputs.empty() || n.inputs[0] != x) return std::nullopt;
  ActivationMatch m;
  m.nodes = {c};
  m.output = n.outputs[0];
  std::vector<const Tensor*> constants;
  for (int id : n.inputs) constants.push_back(id >= 0 ? ed.ConstantOf(id) : nullptr);
  if (!ops::ActivationOfNode(n, constants, &m.act)) return std::nullopt;
  return m;
}

// x's consumers are exactly the nodes in `want` (as a multiset of single uses).
bool ConsumersAre(const GraphEditor& ed, int x, std::vector<int> want) {
  std::vector<int> got = ed.Consumers(x);
  std::sort(got.begin(), got.end());
  std::sort(want.begin(), want.end());
  return !ed.IsGraphOutput(x) && got == want;
}

// x * gate(x): Sigmoid -> Silu; HardSigmoid(alpha 1/6, beta 1/2) -> HardSwish (how PyTorch
// exports hardswish below opset 14).
std::optional<ActivationMatch> MatchGated(const GraphEditor& ed, int x) {
  const auto& cons = ed.Consumers(x);
  if (cons.size() != 2) return std::nullopt;
  for (int s : cons) {
    const ir::Node& sn = ed.node(s);
    ops::Activation gate_act;
    ops::ActivationKind kind = ops::ActivationKind::kNone;
    if (ops::ActivationOfNode(sn, {}, &gate_act)) {
      if (gate_act.kind == ops::ActivationKind::kSigmoid) {
        kind = ops::ActivationKind::kSilu;
      } else if (gate_act.kind == ops::ActivationKind::kHardSigmoid &&
                 std::fabs(gate_act.alpha - 1.f / 6.f) <= 1e-6f && gate_act.beta == 0.5f) {
        kind = ops::ActivationKind::kHardSwish;
      }
    }
    if (kind == ops::ActivationKind::kNone || !OnlyOutput0(ed, s) || sn.inputs.size() != 1)
      continue;
    const int gate = sn.outputs[0];
    const int mul = NextOp(ed, gate, "Mul");
    if (mul < 0 || OtherOperand(ed, mul, gate) != x || !ConsumersAre(ed, x, {s, mul})) continue;
    ActivationMatch m;
    m.act = ops::DefaultActivation(kind);
    m.nodes = {s, mul};
    m.output = ed.node(mul).outputs[0];
    return m;
  }
  return std::nullopt;
}

std::optional<ActivationMatch> MatchGelu(const GraphEditor& ed, int x) {
  const auto& cons = ed.Consumers(x);
  if (cons.size() != 2 || ed.IsGraphOutput(x)) return std::nullopt;
  constexpr double kSqrt2 = 1.4142135623730951;
  for (int d : cons) {
    // x / sqrt(2) or x * (1 / sqrt(2)).
    const ir::Node& dn = ed.node(d);
    const bool div = IsOp(ed, d, "Div") && dn.inputs.size() == 2 && dn.inputs[0] == x &&
                     IsScalarNear(ed, dn.inputs[1], kSqrt2, 1e-4);
    const bool mul =
        IsOp(ed, d, "Mul") && IsScalarNear(ed, OtherOperand(ed, d, x), 1 / kSqrt2, 1e-4);
    if ((!div && !mul) || !OnlyOutput0(ed, d)) continue;
    const int erf = NextOp(ed, dn.outputs[0], "Erf");
    if (erf < 0) continue;
    const int add = NextOp(ed, ed.node(erf).outputs[0], "Add");
    if (add < 0 || !IsScalarNear(ed, OtherOperand(ed, add, ed.node(erf).outputs[0]), 1.0)) continue;
    const int a1 = ed.node(add).outputs[0];  // 1 + erf(x / sqrt(2))
    const int k1 = NextOp(ed, a1, "Mul");
    if (k1 < 0) continue;
    const int o = OtherOperand(ed, k1, a1);
    const int k1_out = ed.node(k1).outputs[0];
    ActivationMatch m;
    m.act = ops::DefaultActivation(ops::ActivationKind::kGelu);
    int x_user = -1;  // the other node reading x
    if (o == x) {     // (x * a1) * 0.5
      const int k2 = NextOp(ed, k1_out, "Mul");
      if (k2 < 0 || !IsScalarNear(ed, OtherOperand(ed, k2, k1_out), 0.5)) continue;
      x_user = k1;
      m.nodes = {d, erf, add, k1, k2};
      m.output = ed.node(k2).outputs[0];
    } else if (IsScalarNear(ed, o, 0.5)) {  // x * (a1 * 0.5)
      const int k2 = NextOp(ed, k1_out, "Mul");
      if (k2 < 0 || OtherOperand(ed, k2, k1_out) != x) continue;
      x_user = k2;
      m.nodes = {d, erf, add, k1, k2};
      m.output = ed.node(k2).outputs[0];
    } else {  // (x * 0.5) * a1
      const int h = ed.Producer(o);
      if (h < 0 || !IsOp(ed, h, "Mul") || ed.SoleConsumer(o) != k1 ||
          !IsScalarNear(ed, OtherOperand(ed, h, x), 0.5))
        continue;
      x_user = h;
      m.nodes = {d, erf, add, h, k1};
      m.output = k1_out;
    }
    if (!ConsumersAre(ed, x, {d, x_user})) continue;
    return m;
  }
  return std::nullopt;
}

// Hard-swish as PaddlePaddle exports it (PP-OCR, PP-LCNet): x * Clip(x + 3, 0, 6) / 6, the
// Mul's operands either way round, the last step Div by 6 or Mul by 1/6.
std::optional<ActivationMatch> MatchHardSwishArithmetic(const GraphEditor& ed, int x) {
  const auto& cons = ed.Consumers(x);
  if (cons.size() != 2) return std::nullopt;
  for (int add : cons) {
    if (!IsOp(ed, add, "Add") || !OnlyOutput0(ed, add) ||
        !IsScalarNear(ed, OtherOperand(ed, add, x), 3.0))
      continue;
    const int clip = NextOp(ed, ed.node(add).outputs[0], "Clip");
    if (clip < 0) continue;
    std::vector<const Tensor*> constants;
    for (int id : ed.node(clip).inputs) constants.push_back(id >= 0 ? ed.ConstantOf(id) : nullptr);
    ops::Activation clip_act;
    if (!ops::ActivationOfNode(ed.node(clip), constants, &clip_act) ||
        clip_act.kind != ops::ActivationKind::kClip || clip_act.alpha != 0.f ||
        clip_act.beta != 6.f)
      continue;
    const int gate = ed.node(clip).outputs[0];
    const int mul = NextOp(ed, gate, "Mul");
    if (mul < 0 || OtherOperand(ed, mul, gate) != x || !ConsumersAre(ed, x, {add, mul})) continue;
    const int prod = ed.node(mul).outputs[0];
    if (ed.IsGraphOutput(prod)) continue;
    const int c = ed.SoleConsumer(prod);
    if (c < 0 || !OnlyOutput0(ed, c)) continue;
    const ir::Node& cn = ed.node(c);
    const bool div = IsOp(ed, c, "Div") && cn.inputs.size() == 2 && cn.inputs[0] == prod &&
                     IsScalarNear(ed, cn.inputs[1], 6.0);
    const bool scale = IsOp(ed, c, "Mul") && IsScalarNear(ed, OtherOperand(ed, c, prod), 1 / 6.0);
    if (!div && !scale) continue;
    ActivationMatch m;
    m.act = ops::DefaultActivation(ops::ActivationKind::kHardSwish);
    m.nodes = {add, clip, mul, c};
    m.output = cn.outputs[0];
    return m;
  }
  return std::nullopt;
}

}  // namespace

bool IsScalarNear(const GraphEditor& ed, int v, double want, double tol) {
  if (v < 0) return false;
  const Tensor* t = ed.ConstantOf(v);
  if (t == nullptr || t->dtype() != DataType::kFloat) return false;
  auto s = ed.ScalarOf(v);
  return s && std::fabs(*s - want) <= tol * std::max(1.0, std::fabs(want));
}

std::optional<ActivationMatch> MatchActivation(const GraphEditor& ed, int x) {
  if (x < 0 || ed.IsGraphOutput(x)) return std::nullopt;
  if (auto m = MatchUnary(ed, x)) return m;
  if (auto m = MatchGated(ed, x)) return m;
  if (auto m = MatchHardSwishArithmetic(ed, x)) return m;
  return MatchGelu(ed, x);
}

void SetActivationAttrs(const ActivationMatch& m, ir::Node* node) {
  node->attrs["activation"] = StringAttr(ops::ActivationName(m.act.kind));
  node->attrs["activation_alpha"] = FloatAttr(m.act.alpha);
  node->attrs["activation_beta"] = FloatAttr(m.act.beta);
}

}  // namespace kiln::passes
