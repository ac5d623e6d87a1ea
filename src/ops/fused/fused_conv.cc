// FusedConv (domain "kiln", opset 1): Y = act(Conv(X, W) + B + Z), written by the graph optimizer
// (src/passes/fuse_conv_add.cc, fuse_conv_activation.cc) in place of Conv -> [Add] -> [activation]
// chains. Reference kernel.
//
// Attributes: every Conv attribute (auto_pad, kernel_shape, strides, dilations, pads, group) with
// Conv's meaning, plus `activation`, `activation_alpha`, `activation_beta`
// (ops/activation.h). Inputs: X, W, optional B (as Conv), optional Z: the residual summand,
// which must have exactly Y's shape (no broadcasting). The activation is applied after adding Z
// (ResNet's Conv -> Add -> Relu).
//
// Algorithm: the Conv reference routine (ops/nn/conv.h, double accumulation, rounded to float),
// then y += z in float and the activation, so the result equals the unfused graph's.
// Limits: those of Conv (float32, 1 to 3 spatial dims).
#include <memory>

#include "ops/common.h"
#include "ops/nn/conv.h"
#include "ops/op_cases.h"

namespace kiln::ops {
namespace {

using ir::ComputeContext;
using ir::InferContext;
using ir::Node;
using ir::Op;

class FusedConvOp : public Op {
 public:
  static StatusOr<std::unique_ptr<Op>> Create(const Node& node) {
    std::unique_ptr<FusedConvOp> op(new FusedConvOp(node));
    KILN_RETURN_IF_ERROR(nn::ParseConvParams(node, &op->a_.conv));
    KILN_RETURN_IF_ERROR(ParseActivation(node, &op->a_.act));
    if (node.inputs.size() > 4)
      return ir::AttrError(node, "FusedConv takes at most 4 inputs (X, W, B, Z); got " +
                                     std::to_string(node.inputs.size()));
    return std::unique_ptr<Op>(std::move(op));
  }

  const ir::OpAttrs* attributes() const override { return &a_; }

  Status Infer(InferContext& ctx) const override {
    KILN_ASSIGN_OR_RETURN(Shape y, nn::InferConvShape(a_.conv, ctx, describe()));
    if (ctx.has_input(3)) {
      KILN_RETURN_IF_ERROR(ctx.ExpectDtype(3, {DataType::kFloat}));
      if (ctx.shape(3) != y)
        return ctx.Error("Z must have exactly the convolution's output shape " + ShapeToString(y) +
                         "; got " + ShapeToString(ctx.shape(3)));
    }
    ctx.SetOutput(0, DataType::kFloat, y);
    return OkStatus();
  }

  Status Compute(const ComputeContext& ctx) const override {
    Tensor& y = ctx.out(0);
    std::string err =
        nn::ConvReference(a_.conv, ctx.in(0), ctx.in(1), ctx.has(2) ? &ctx.in(2) : nullptr, &y);
    if (!err.empty()) return RunError(err);
    err = nn::AddResidualAndActivate(a_.act, ctx.has(3) ? &ctx.in(3) : nullptr, &y);
    return err.empty() ? OkStatus() : RunError(err);
  }

 private:
  explicit FusedConvOp(const Node& node) : Op(node) {}
  ConvAttrs a_;
};

KILN_REGISTER_OP_DOMAIN("kiln", "FusedConv", 1, 1, &FusedConvOp::Create);

// Kernel cases (ops/op_cases.h), as fuse_conv_add / fuse_conv_activation write the node: X and
// the residual Z inputs, W and B constants, `activation` with its alpha (Clip: min) and beta
// (Clip: max). ResNet's 3x3 and 1x1 blocks (act(conv + B + Z)), MobileNet's depthwise ReLU6,
// a SiLU after a grouped dilated conv, Z without B, 1-D and 3-D, each fusable activation, and
// cpu.fusedconv.winograd's shapes (3x3 stride 1, C and K multiples of 8 from 16, at least 8
// tiles) with its own Relu/Clip path, the generic one (HardSwish, Gelu), and a residual.
OpCase FusedConvCase(const std::string& name, const Shape& x, const Shape& w, bool bias,
                     const Shape& z, const std::string& act, uint32_t seed) {
  OpCase c(name, 1);
  c.In(CaseTensor(x, seed)).Const(CaseTensor(w, seed + 1));
  if (bias)
    c.Const(CaseTensor({w[0]}, seed + 2));
  else if (!z.empty())
    c.Omitted();
  if (!z.empty()) c.In(CaseTensor(z, seed + 3));
  if (!act.empty()) c.Str("activation", act);
  return c;
}

std::vector<OpCase> FusedConvShapeCases() {
  std::vector<OpCase> c;
  c.push_back(FusedConvCase("1x1 + B + Z, Relu, 16->24 [2,16,7,7]", {2, 16, 7, 7}, {24, 16, 1, 1},
                            true, {2, 24, 7, 7}, "Relu", 101));
  c.push_back(FusedConvCase("3x3 stride 2 pads 1 + B, Relu, 8->12 [2,8,13,13]", {2, 8, 13, 13},
                            {12, 8, 3, 3}, true, {}, "Relu", 105)
                  .Ints("strides", {2, 2})
                  .Ints("pads", {1, 1, 1, 1}));
  c.push_back(FusedConvCase("depthwise 3x3 + B, Clip 0..6 [2,16,9,9]", {2, 16, 9, 9}, {16, 1, 3, 3},
                            true, {}, "Clip", 109)
                  .Int("group", 16)
                  .Ints("pads", {1, 1, 1, 1})
                  .Float("activation_alpha", 0.f)
                  .Float("activation_beta", 6.f));
  c.push_back(FusedConvCase("2 groups dilation 2 + B, Silu [2,8,12,12]", {2, 8, 12, 12},
                            {8, 4, 3, 3}, true, {}, "Silu", 113)
                  .Int("group", 2)
                  .Ints("dilations", {2, 2})
                  .Ints("pads", {2, 2, 2, 2}));
  c.push_back(FusedConvCase("3x3 + Z without B, no activation [1,4,6,6]", {1, 4, 6, 6},
                            {6, 4, 3, 3}, false, {1, 6, 4, 4}, "", 117));
  c.push_back(FusedConvCase("1-D k3 stride 2 pads 1 + B + Z, Relu [2,5,23]", {2, 5, 23}, {7, 5, 3},
                            true, {2, 7, 12}, "Relu", 121)
                  .Ints("strides", {2})
                  .Ints("pads", {1, 1}));
  c.push_back(FusedConvCase("3-D 3x3x3 pads 1 + B + Z, Relu [1,3,6,7,5]", {1, 3, 6, 7, 5},
                            {4, 3, 3, 3, 3}, true, {1, 4, 6, 7, 5}, "Relu", 125)
                  .Ints("pads", {1, 1, 1, 1, 1, 1}));
  c.push_back(FusedConvCase("3x2 asymmetric pads 0 1 2 0 + B, Tanh [1,3,10,7]", {1, 3, 10, 7},
                            {5, 3, 3, 2}, true, {}, "Tanh", 129)
                  .Ints("pads", {0, 1, 2, 0}));
  return c;
}

// One small convolution per remaining activation (with its attributes where it has them),
// alternating with and without the residual.
std::vector<OpCase> FusedConvActivationCases() {
  struct Act {
    const char* name;
    float alpha, beta;
  };
  const Act acts[] = {{"Sigmoid", 0, 0},   {"HardSigmoid", 0.3f, 0.4f},
                      {"HardSwish", 0, 0}, {"LeakyRelu", 0.1f, 0},
                      {"Elu", 0.7f, 0},    {"Gelu", 0, 0},
                      {"GeluTanh", 0, 0},  {"Clip", -0.5f, 0.75f}};
  std::vector<OpCase> c;
  uint32_t seed = 140;
  bool z = false;
  for (const Act& a : acts) {
    OpCase k = FusedConvCase(
        std::string("3x3 pads 1 + B") + (z ? " + Z" : "") + ", " + a.name + " [1,3,5,7]",
        {1, 3, 5, 7}, {4, 3, 3, 3}, true, z ? Shape{1, 4, 5, 7} : Shape{}, a.name, seed);
    k.Ints("pads", {1, 1, 1, 1});
    if (a.alpha != 0) k.Float("activation_alpha", a.alpha);
    if (a.beta != 0) k.Float("activation_beta", a.beta);
    c.push_back(std::move(k));
    seed += 4;
    z = !z;
  }
  return c;
}

std::vector<OpCase> FusedConvWinogradCases() {
  std::vector<OpCase> c;
  c.push_back(FusedConvCase("Winograd-sized 3x3 pads 1 + B + Z, Relu (ResNet) [2,16,7,7]",
                            {2, 16, 7, 7}, {16, 16, 3, 3}, true, {2, 16, 7, 7}, "Relu", 201)
                  .Ints("pads", {1, 1, 1, 1}));
  c.push_back(FusedConvCase("Winograd-sized 3x3 no pads + Z without B, Relu [2,32,9,9]",
                            {2, 32, 9, 9}, {32, 32, 3, 3}, false, {2, 32, 7, 7}, "Relu", 205));
  c.push_back(FusedConvCase("Winograd-sized 3x3 pads 0 1 2 1 + B + Z, Clip -0.5..2 [2,16,10,7]",
                            {2, 16, 10, 7}, {16, 16, 3, 3}, true, {2, 16, 10, 7}, "Clip", 209)
                  .Ints("pads", {0, 1, 2, 1})
                  .Float("activation_alpha", -0.5f)
                  .Float("activation_beta", 2.f));
  c.push_back(FusedConvCase("Winograd-sized 3x3 pads 2 + B, LeakyRelu 0.1, 24->40 [2,24,6,5]",
                            {2, 24, 6, 5}, {40, 24, 3, 3}, true, {}, "LeakyRelu", 213)
                  .Ints("pads", {2, 2, 2, 2})
                  .Float("activation_alpha", 0.1f));
  c.push_back(FusedConvCase("Winograd-sized 3x3 pads 1 + B, HardSwish [2,16,9,9]", {2, 16, 9, 9},
                            {16, 16, 3, 3}, true, {}, "HardSwish", 217)
                  .Ints("pads", {1, 1, 1, 1}));
  c.push_back(FusedConvCase("Winograd-sized 3x3 pads 1 + B + Z, Gelu, 16->24 [2,16,8,9]",
                            {2, 16, 8, 9}, {24, 16, 3, 3}, true, {2, 24, 8, 9}, "Gelu", 221)
                  .Ints("pads", {1, 1, 1, 1}));
  return c;
}

std::vector<OpCase> FusedConvCases() {
  std::vector<OpCase> c = FusedConvShapeCases();
  for (OpCase& k : FusedConvActivationCases()) c.push_back(std::move(k));
  for (OpCase& k : FusedConvWinogradCases()) c.push_back(std::move(k));
  return c;
}
KILN_REGISTER_OP_CASES("kiln", "FusedConv", &FusedConvCases);

}  // namespace
}  // namespace kiln::ops
