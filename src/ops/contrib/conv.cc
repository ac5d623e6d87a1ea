// The convolutions of ONNX Runtime's "com.microsoft" domain (opset 1):
//
//   FusedConv   X, W, optional B, optional Z: Y = act(Conv(X, W) + B + Z), what ORT's graph
//               optimizer writes for Conv -> [Add] -> activation. Conv's attributes plus
//               `activation` (Relu, Tanh, Sigmoid, LeakyRelu, Clip, HardSigmoid; absent: none)
//               and `activation_params` (LeakyRelu: alpha; Clip: min, max; HardSigmoid: alpha,
//               beta; required for those three, as ORT requires them). Z has Y's shape.
//   NhwcConv    Conv on channels-last tensors, as ORT's transformers tool (fusion_nhwc_conv.py)
//               writes it: X [N, D1..Dn, C], W [M, k1..kn, C/group] (the weight transposed to
//               channels-last too), optional B [M], Y [N, O1..On, M]; Conv's attributes, whose
//               kernel_shape, pads, strides and dilations name the spatial dims in order.
//
// Reference kernels: FusedConv is kiln's own FusedConv (domain "kiln"; the Conv reference routine,
// then Z added in float and the activation) made from the node; NhwcConv transposes X and W to
// channels-first, runs the Conv reference routine (ops/nn/conv.h, double accumulation, rounded
// to float32) and transposes Y back. float32, 1 to 3 spatial dims (Conv's limits).
#include "ops/nn/conv.h"

#include <memory>
#include <string>
#include <vector>

#include "ops/common.h"
#include "ops/op_cases.h"

namespace kiln::ops {
namespace {

using ir::ComputeContext;
using ir::InferContext;
using ir::Node;

// ORT's `activation` + `activation_params` as kiln's Activation.
Status ParseMsActivation(const Node& node, Activation* act) {
  const std::string name = node.GetString("activation", "");
  const std::vector<float> p = node.GetFloats("activation_params");
  struct Kind {
    const char* name;
    ActivationKind kind;
    size_t params;
  };
  static const Kind kKinds[] = {
      {"Relu", ActivationKind::kRelu, 0},       {"Tanh", ActivationKind::kTanh, 0},
      {"Sigmoid", ActivationKind::kSigmoid, 0}, {"LeakyRelu", ActivationKind::kLeakyRelu, 1},
      {"Clip", ActivationKind::kClip, 2},       {"HardSigmoid", ActivationKind::kHardSigmoid, 2}};
  *act = Activation{};
  if (name.empty()) return OkStatus();
  for (const Kind& k : kKinds) {
    if (name != k.name) continue;
    if (p.size() < k.params)
      return ir::AttrError(node, "activation " + name + " needs " + std::to_string(k.params) +
                                     " activation_params; got " + std::to_string(p.size()));
    act->kind = k.kind;
    if (k.params > 0) act->alpha = p[0];
    if (k.params > 1) act->beta = p[1];
    return OkStatus();
  }
  return ir::AttrError(node,
                       "activation must be Relu, Tanh, Sigmoid, LeakyRelu, Clip or HardSigmoid; "
                       "got '" +
                           name + "'");
}

// Shape with the last dim moved to position 1 ([N, D.., C] -> [N, C, D..]), or back.
Shape ChannelsFirst(const Shape& s) {
  Shape r = {s[0], s.back()};
  r.insert(r.end(), s.begin() + 1, s.end() - 1);
  return r;
}
Shape ChannelsLast(const Shape& s) {
  Shape r = {s[0]};
  r.insert(r.end(), s.begin() + 2, s.end());
  r.push_back(s[1]);
  return r;
}

// Copies src [A, P, C] (P the product of the middle dims) to dst [A, C, P] when `to_first`, or
// src [A, C, P] to dst [A, P, C].
void MoveChannels(const float* src, float* dst, int64_t outer, int64_t plane, int64_t channels,
                  bool to_first) {
  for (int64_t a = 0; a < outer; ++a)
    for (int64_t p = 0; p < plane; ++p)
      for (int64_t c = 0; c < channels; ++c) {
        const int64_t last = (a * plane + p) * channels + c;
        const int64_t first = (a * channels + c) * plane + p;
        if (to_first)
          dst[first] = src[last];
        else
          dst[last] = src[first];
      }
}

Tensor ToChannelsFirst(const Tensor& t) {
  const Shape& s = t.shape();
  Tensor r = Tensor::Empty(DataType::kFloat, ChannelsFirst(s));
  const int64_t plane = s[0] * s.back() == 0 ? 0 : t.numel() / (s[0] * s.back());
  MoveChannels(t.data<float>(), r.data<float>(), s[0], plane, s.back(), true);
  return r;
}

class NhwcConvOp final : public ir::Op {
 public:
  static StatusOr<std::unique_ptr<ir::Op>> Create(const Node& node) {
    std::unique_ptr<NhwcConvOp> op(new NhwcConvOp(node));
    KILN_RETURN_IF_ERROR(nn::ParseConvParams(node, &op->a_.conv));
    if (node.num_explicit_inputs() > 3)
      return ir::AttrError(node, "NhwcConv takes at most 3 inputs (X, W, B); got " +
                                     std::to_string(node.num_explicit_inputs()));
    op->node_ = node;
    return std::unique_ptr<ir::Op>(std::move(op));
  }
  const ir::OpAttrs* attributes() const override { return &a_; }

  Status Infer(InferContext& ctx) const override {
    if (ctx.num_inputs() < 2 || !ctx.has_input(0) || !ctx.has_input(1))
      return ctx.Error("NhwcConv needs inputs X and W");
    if (ctx.rank(0) < 3 || ctx.rank(1) < 3)
      return ctx.Error("X [N, spatial..., C] and W [M, kernel..., C/group] need rank >= 3; got " +
                       ShapeToString(ctx.shape(0)) + " and " + ShapeToString(ctx.shape(1)));
    std::vector<DataType> dtypes;
    std::vector<Shape> shapes;
    for (size_t i = 0; i < std::min<size_t>(ctx.num_inputs(), 3); ++i) {
      dtypes.push_back(ctx.has_input(i) ? ctx.dtype(i) : DataType::kUndefined);
      shapes.push_back(i < 2 ? ChannelsFirst(ctx.shape(i))
                             : (ctx.has_input(i) ? ctx.shape(i) : Shape{}));
    }
    InferContext nchw(node_, dtypes, shapes, std::vector<const Tensor*>(dtypes.size()));
    auto y = nn::InferConvShape(a_.conv, nchw, describe());
    if (!y.ok())
      return Status(y.status())
          .AddContext("in channels-first terms: X " + ShapeToString(shapes[0]) + ", W " +
                      ShapeToString(shapes[1]));
    ctx.SetOutput(0, DataType::kFloat, ChannelsLast(*y));
    return OkStatus();
  }

  Status Compute(const ComputeContext& ctx) const override {
    const Tensor x = ToChannelsFirst(ctx.in(0));
    const Tensor w = ToChannelsFirst(ctx.in(1));
    Tensor& y = ctx.out(0);
    Tensor y_first = Tensor::Empty(DataType::kFloat, ChannelsFirst(y.shape()));
    const std::string err =
        nn::ConvReference(a_.conv, x, w, ctx.has(2) ? &ctx.in(2) : nullptr, &y_first);
    if (!err.empty()) return RunError(err);
    const Shape& s = y.shape();
    const int64_t plane = s[0] * s.back() == 0 ? 0 : y.numel() / (s[0] * s.back());
    MoveChannels(y_first.data<float>(), y.data<float>(), s[0], plane, s.back(), false);
    return OkStatus();
  }

 private:
  explicit NhwcConvOp(const Node& node) : Op(node) {}
  ConvAttrs a_;
  Node node_;
};

// FusedConv is kiln's own FusedConv (domain "kiln", ops/fused/fused_conv.cc: the same
// act(Conv + B + Z)) made from this node with the activation's parameters renamed.
StatusOr<std::unique_ptr<ir::Op>> CreateMsFusedConv(const Node& node) {
  Activation act;
  KILN_RETURN_IF_ERROR(ParseMsActivation(node, &act));
  if (node.num_explicit_inputs() > 4)
    return ir::AttrError(node, "FusedConv takes at most 4 inputs (X, W, B, Z); got " +
                                   std::to_string(node.num_explicit_inputs()));
  Node inner = node;
  inner.domain = "kiln";
  inner.opset = 1;
  inner.attrs.erase("activation_params");
  auto set_float = [&](const char* name, float v) {
    ir::Attribute a;
    a.type = ir::Attribute::Type::kFloat;
    a.f = v;
    inner.attrs[name] = a;
  };
  if (act.kind != ActivationKind::kNone) {
    set_float("activation_alpha", act.alpha);
    set_float("activation_beta", act.beta);
  }
  const ir::OpDef* def = ir::OpRegistry::Global().Find("kiln", "FusedConv", 1);
  if (def == nullptr) return Internal(node.Describe() + ": kiln has no kiln.FusedConv");
  return def->create(inner);
}
StatusOr<std::unique_ptr<ir::Op>> CreateNhwcConv(const Node& node) {
  return NhwcConvOp::Create(node);
}

KILN_REGISTER_OP_DOMAIN("com.microsoft", "FusedConv", 1, 1, &CreateMsFusedConv);
KILN_REGISTER_OP_DOMAIN("com.microsoft", "NhwcConv", 1, 1, &CreateNhwcConv);

// Kernel cases: each activation with its parameters, with and without B and Z, strides, pads,
// groups and dilations, 1-D, a batch of 1 and odd sizes.
std::vector<OpCase> MsFusedConvCases() {
  struct Act {
    const char* name;
    std::vector<float> params;
  };
  const Act acts[] = {{"", {}},
                      {"Relu", {}},
                      {"Tanh", {}},
                      {"Sigmoid", {}},
                      {"LeakyRelu", {0.2f}},
                      {"Clip", {-0.4f, 0.6f}},
                      {"HardSigmoid", {0.3f, 0.45f}}};
  std::vector<OpCase> cases;
  uint32_t seed = 300;
  int k = 0;
  for (const Act& a : acts) {
    const bool bias = k % 2 == 0, z = k % 3 != 1;
    OpCase c(std::string("3x3 pads 1 ") + (bias ? "+ B " : "") + (z ? "+ Z " : "") +
                 (*a.name ? a.name : "no activation") + " [2,3,5,7]",
             1);
    c.In(CaseTensor({2, 3, 5, 7}, seed)).Const(CaseTensor({4, 3, 3, 3}, seed + 1));
    if (bias)
      c.Const(CaseTensor({4}, seed + 2));
    else if (z)
      c.Omitted();
    if (z) c.In(CaseTensor({2, 4, 5, 7}, seed + 3));
    c.Ints("pads", {1, 1, 1, 1});
    if (*a.name) c.Str("activation", a.name);
    if (!a.params.empty()) c.Floats("activation_params", a.params);
    cases.push_back(std::move(c));
    seed += 4;
    ++k;
  }
  cases.push_back(OpCase("2 groups stride 2 dilation 2 + B, Relu [1,4,9,8]", 1)
                      .In(CaseTensor({1, 4, 9, 8}, 340))
                      .Const(CaseTensor({6, 2, 3, 3}, 341))
                      .Const(CaseTensor({6}, 342))
                      .Int("group", 2)
                      .Ints("strides", {2, 2})
                      .Ints("dilations", {2, 2})
                      .Str("activation", "Relu"));
  cases.push_back(OpCase("1-D k3 + B + Z, LeakyRelu [2,5,11]", 1)
                      .In(CaseTensor({2, 5, 11}, 345))
                      .Const(CaseTensor({3, 5, 3}, 346))
                      .Const(CaseTensor({3}, 347))
                      .In(CaseTensor({2, 3, 9}, 348))
                      .Str("activation", "LeakyRelu")
                      .Floats("activation_params", {0.05f}));
  return cases;
}
std::vector<OpCase> NhwcConvCases() {
  return {OpCase("3x3 pads 1 + B [2,5,7,3] -> 4", 1)
              .In(CaseTensor({2, 5, 7, 3}, 360))
              .Const(CaseTensor({4, 3, 3, 3}, 361))
              .Const(CaseTensor({4}, 362))
              .Ints("pads", {1, 1, 1, 1}),
          OpCase("2 groups stride 2, no B [1,9,8,4] -> 6", 1)
              .In(CaseTensor({1, 9, 8, 4}, 363))
              .Const(CaseTensor({6, 3, 2, 2}, 364))
              .Int("group", 2)
              .Ints("strides", {2, 2}),
          OpCase("1x1 [3,1,1,5] -> 2", 1)
              .In(CaseTensor({3, 1, 1, 5}, 365))
              .Const(CaseTensor({2, 1, 1, 5}, 366))
              .Const(CaseTensor({2}, 367)),
          OpCase("1-D k3 [2,10,3] -> 5", 1)
              .In(CaseTensor({2, 10, 3}, 368))
              .Const(CaseTensor({5, 3, 3}, 369))};
}
KILN_REGISTER_OP_CASES("com.microsoft", "FusedConv", &MsFusedConvCases);
KILN_REGISTER_OP_CASES("com.microsoft", "NhwcConv", &NhwcConvCases);

}  // namespace
}  // namespace kiln::ops
