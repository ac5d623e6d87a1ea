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

#include "ops/attrs.h"
#include "ops/common.h"
#include "ops/nn/conv.h"

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

}  // namespace
}  // namespace kiln::ops
