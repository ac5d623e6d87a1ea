// FusedBatchNormalization (domain "kiln", opset 1): Y = act(BatchNormalization(X, scale, B, mean,
// var)) in inference, written by the graph optimizer (src/passes/fuse_bn_activation.cc) in place
// of BatchNormalization -> activation where the normalization cannot be folded into a
// convolution (DenseNet's pre-activation BN -> ReLU -> Conv). Reference kernel.
//
// Attributes: `epsilon` as BatchNormalization's, plus `activation`, `activation_alpha`,
// `activation_beta` (ops/activation.h). Inputs: those of BatchNormalization.
// Algorithm: the BatchNormalization-15 reference op (training_mode 0), then the activation, so the
// result equals the unfused graph's.
#include <memory>

#include "ops/common.h"
#include "ops/nn/norm.h"
#include "ops/op_cases.h"

namespace kiln::ops {
namespace {

using ir::ComputeContext;
using ir::InferContext;
using ir::Node;
using ir::Op;

class FusedBatchNormOp : public Op {
 public:
  static StatusOr<std::unique_ptr<Op>> Create(const Node& node) {
    std::unique_ptr<FusedBatchNormOp> op(new FusedBatchNormOp(node));
    KILN_RETURN_IF_ERROR(ParseActivation(node, &op->a_.act));
    if (node.inputs.size() != 5)
      return ir::AttrError(node,
                           "FusedBatchNormalization takes 5 inputs (X, scale, B, mean, "
                           "var); got " +
                               std::to_string(node.inputs.size()));
    // The normalization itself is ONNX's BatchNormalization-15 with the same inputs and epsilon.
    Node bn = node;
    bn.domain = "";
    bn.op_type = "BatchNormalization";
    bn.opset = 15;
    bn.attrs.clear();
    if (node.HasAttr("epsilon")) bn.attrs["epsilon"] = node.attrs.at("epsilon");
    op->a_.epsilon = node.GetFloat("epsilon", 1e-5f);
    const ir::OpDef* def = ir::OpRegistry::Global().Find("", "BatchNormalization", 15);
    if (def == nullptr) return Internal("BatchNormalization-15 is not registered");
    KILN_ASSIGN_OR_RETURN(op->bn_, def->create(bn));
    return std::unique_ptr<Op>(std::move(op));
  }

  Status Infer(InferContext& ctx) const override { return bn_->Infer(ctx); }
  const ir::OpAttrs* attributes() const override { return &a_; }

  Status Compute(const ComputeContext& ctx) const override {
    KILN_RETURN_IF_ERROR(bn_->Compute(ctx));
    Tensor& y = ctx.out(0);
    ApplyActivation(a_.act, y.data<float>(), y.numel());
    return OkStatus();
  }

 private:
  explicit FusedBatchNormOp(const Node& node) : Op(node) {}
  std::unique_ptr<Op> bn_;
  NormAttrs a_;
};

KILN_REGISTER_OP_DOMAIN("kiln", "FusedBatchNormalization", 1, 1, &FusedBatchNormOp::Create);

// Kernel cases (ops/op_cases.h), as fuse_bn_activation writes the node (activation Relu, the
// parameters constants; cpu.fusedbatchnormalization.channels folds them at Prepare): rank 2 to 5,
// a single channel, epsilon; without activation; and LeakyRelu (the kernel declines: the
// reference only).
std::vector<OpCase> FusedBatchNormalizationCases() {
  struct Fbn {
    Shape x;
    const char* act;
  };
  const Fbn shapes[] = {{{3, 7}, "Relu"},           {{2, 5, 9}, "Relu"},    {{2, 6, 5, 7}, "Relu"},
                        {{1, 4, 3, 2, 5}, "Relu"},  {{2, 1, 3, 1}, "Relu"}, {{2, 6, 5, 7}, ""},
                        {{2, 6, 5, 7}, "LeakyRelu"}};
  std::vector<OpCase> cases;
  uint32_t seed = 140;
  for (const Fbn& f : shapes) {
    const Shape p = {f.x[1]};
    OpCase c(ShapeToString(f.x) + (*f.act ? std::string(", ") + f.act : ", no activation"), 1);
    c.In(CaseTensor(f.x, seed, -2.f, 2.f));
    for (uint32_t i = 1; i <= 3; ++i) c.Const(CaseTensor(p, seed + i));
    c.Const(CaseTensor(p, seed + 4, 0.5f, 1.5f));
    c.Float("epsilon", 1e-3f);
    if (*f.act) c.Str("activation", f.act);
    cases.push_back(std::move(c));
    seed += 5;
  }
  return cases;
}
KILN_REGISTER_OP_CASES("kiln", "FusedBatchNormalization", &FusedBatchNormalizationCases);

}  // namespace
}  // namespace kiln::ops
