// FusedMatMul (domain "kiln", opset 1): Y = act(MatMul(A, B) + bias), written by the graph
// optimizer (src/passes/fuse_matmul_add.cc) in place of MatMul -> Add -> [activation]. Reference
// kernel.
//
// Inputs: A [..., M, K] (rank >= 1, numpy matmul rules), B [K, N] (2-D), bias [N] (1-D, added to
// every row). Attributes: `activation`, `activation_alpha`, `activation_beta`
// (ops/activation.h), applied after the bias.
//
// Algorithm: the MatMul reference routine (ops/nn/matmul.h, double accumulation, rounded to
// float), then y += bias in float and the activation, so the result equals the unfused graph's.
// Limits: float32 only.
#include <memory>

#include "ops/common.h"
#include "ops/nn/gemm.h"
#include "ops/nn/matmul.h"
#include "ops/op_cases.h"

namespace kiln::ops {
namespace {

using ir::ComputeContext;
using ir::InferContext;
using ir::Node;
using ir::Op;

class FusedMatMulOp : public Op {
 public:
  static StatusOr<std::unique_ptr<Op>> Create(const Node& node) {
    std::unique_ptr<FusedMatMulOp> op(new FusedMatMulOp(node));
    KILN_RETURN_IF_ERROR(ParseActivation(node, &op->a_.act));
    return std::unique_ptr<Op>(std::move(op));
  }

  const ir::OpAttrs* attributes() const override { return &a_; }

  Status Infer(InferContext& ctx) const override {
    for (size_t i = 0; i < 3; ++i) {
      if (!ctx.has_input(i)) return ctx.Error("inputs A, B and bias are required");
      KILN_RETURN_IF_ERROR(ctx.ExpectDtype(i, {DataType::kFloat}));
    }
    if (ctx.rank(1) != 2) return ctx.Error("B must be 2-D");
    auto d = nn::ComputeMatMulDims(ctx.shape(0), ctx.shape(1));
    if (!d.ok()) return ctx.Error(d.status().message());
    if (ctx.shape(2) != Shape{d->n})
      return ctx.Error("bias must be 1-D with B's columns (" + std::to_string(d->n) + ")");
    ctx.SetOutput(0, DataType::kFloat, d->out);
    return OkStatus();
  }

  Status Compute(const ComputeContext& ctx) const override {
    auto d = nn::ComputeMatMulDims(ctx.in(0).shape(), ctx.in(1).shape());
    if (!d.ok()) return RunError(d.status().message());
    if (ctx.in(1).rank() != 2 || ctx.in(2).shape() != Shape{d->n})
      return RunError("B must be 2-D and bias [" + std::to_string(d->n) + "]; got " +
                      ShapeToString(ctx.in(1).shape()) + " and " +
                      ShapeToString(ctx.in(2).shape()));
    Tensor& y = ctx.out(0);
    float* yp = y.data<float>();
    nn::MatMulFloat(ctx.in(0).data<float>(), ctx.in(1).data<float>(), yp, *d);
    const float* bias = ctx.in(2).data<float>();
    const int64_t n = d->n, rows = d->n > 0 ? y.numel() / d->n : 0;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < n; ++j) yp[r * n + j] += bias[j];
    ApplyActivation(a_.act, yp, y.numel());
    return OkStatus();
  }

 private:
  explicit FusedMatMulOp(const Node& node) : Op(node) {}
  GemmAttrs a_;
};

KILN_REGISTER_OP_DOMAIN("kiln", "FusedMatMul", 1, 1, &FusedMatMulOp::Create);

// Kernel cases (ops/op_cases.h), as fuse_matmul_add writes the node: A an input, B [K, N] and the
// bias [N] constants (cpu.fusedmatmul.onednn prepacks them), `activation` with its alpha and
// beta. A 3-D A (folded into M), 2-D, M = 1, N = 64 (oneDNN pads B's rows), every fusable
// activation, a computed B (cuBLAS, not oneDNN) and a 1-D A (the reference only).
std::vector<OpCase> FusedMatMulCases() {
  struct Fused {
    Shape a;
    int64_t n;
    const char* act;
    float alpha, beta;
    bool b_const;
  };
  const Fused shapes[] = {
      {{4, 6, 10}, 12, "", 0, 0, true},
      {{7, 9}, 5, "Relu", 0, 0, true},
      {{1, 1, 17}, 64, "Gelu", 0, 0, true},
      {{2, 5, 24}, 64, "GeluTanh", 0, 0, true},
      {{3, 11}, 13, "Silu", 0, 0, true},
      {{3, 11}, 13, "HardSwish", 0, 0, true},
      {{3, 11}, 13, "LeakyRelu", 0.1f, 0, true},
      {{3, 11}, 13, "Clip", -0.5f, 0.75f, true},
      {{3, 11}, 13, "Sigmoid", 0, 0, true},
      {{3, 11}, 13, "Tanh", 0, 0, true},
      {{3, 11}, 13, "HardSigmoid", 0.3f, 0.4f, true},
      {{3, 11}, 13, "Elu", 0.7f, 0, true},
      {{2, 3, 7}, 6, "Relu", 0, 0, false},
      {{10}, 12, "Relu", 0, 0, true},
  };
  std::vector<OpCase> cases;
  uint32_t seed = 500;
  for (const Fused& f : shapes) {
    const int64_t k = f.a.back();
    OpCase c(ShapeToString(f.a) + " x [" + std::to_string(k) + "," + std::to_string(f.n) +
                 "] + bias" + (*f.act ? std::string(", ") + f.act : "") +
                 (f.b_const ? "" : " (B computed)"),
             1);
    c.In(CaseTensor(f.a, seed++));
    Tensor b = CaseTensor({k, f.n}, seed++);
    if (f.b_const)
      c.Const(b);
    else
      c.In(b);
    c.Const(CaseTensor({f.n}, seed++));
    if (*f.act) c.Str("activation", f.act);
    if (f.alpha != 0) c.Float("activation_alpha", f.alpha);
    if (f.beta != 0) c.Float("activation_beta", f.beta);
    cases.push_back(std::move(c));
  }
  return cases;
}
KILN_REGISTER_OP_CASES("kiln", "FusedMatMul", &FusedMatMulCases);

}  // namespace
}  // namespace kiln::ops
