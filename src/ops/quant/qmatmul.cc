// QMatMul (domain "kiln", opset 1): a matrix product on int8 data, written by the graph optimizer
// (src/passes/fuse_qdq_matmul.cc) in place of DequantizeLinear -> MatMul / Gemm in QDQ models:
//
//   Y = act(DequantizeLinear(Aq, a_scale, a_zero_point) @ (Bq * b_scale[n]) + bias)
//
// Inputs: 0 Aq (uint8 or int8, [..., M, K], rank >= 2), 1 a_scale (float32, one element),
// 2 a_zero_point (optional, Aq's type, one element: any value), 3 Bq (int8 [K, N]), 4 b_scale
// (float32 [N]: symmetric, one scale per column), 5 bias (optional float32 [N]), 6 y_scale and
// 7 y_zero_point (optional, one element each: the output is then quantized, Y =
// QuantizeLinear(result, y_scale, y_zero_point), uint8/int8: the QuantizeLinear that followed
// fused in). Attribute: FusedMatMul's activation. Output float32 [..., M, N], or y_zero_point's
// type.
//
// Reference kernel: dequantizes A and B to float32 (exactly the DequantizeLinear arithmetic),
// the MatMul reference routine (double accumulation), + bias, activation, then QuantizeLinear's
// arithmetic: the result of the unfused QDQ graph.
#include <memory>

#include "ops/attrs.h"
#include "ops/common.h"
#include "ops/nn/matmul.h"
#include "ops/quant/quant_common.h"

namespace kiln::ops {
namespace {

using ir::ComputeContext;
using ir::InferContext;
using ir::Node;
using ir::Op;

class QMatMulOp : public Op {
 public:
  static StatusOr<std::unique_ptr<Op>> Create(const Node& node) {
    std::unique_ptr<QMatMulOp> op(new QMatMulOp(node));
    KILN_RETURN_IF_ERROR(ParseActivation(node, &op->a_.act));
    if (node.inputs.size() < 5 || node.inputs.size() > 8)
      return ir::AttrError(
          node, "QMatMul takes 5 to 8 inputs; got " + std::to_string(node.inputs.size()));
    return std::unique_ptr<Op>(std::move(op));
  }

  const ir::OpAttrs* attributes() const override { return &a_; }

  Status Infer(InferContext& ctx) const override {
    if (!ctx.has_input(0) || (ctx.dtype(0) != DataType::kUInt8 && ctx.dtype(0) != DataType::kInt8))
      return ctx.Error("Aq must be uint8 or int8");
    if (ctx.rank(0) < 2) return ctx.Error("Aq must have rank >= 2");
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(1, {DataType::kFloat}));
    if (NumElements(ctx.shape(1)) != 1) return ctx.Error("a_scale must have one element");
    if (ctx.has_input(2) && (ctx.dtype(2) != ctx.dtype(0) || NumElements(ctx.shape(2)) != 1))
      return ctx.Error("a_zero_point must be one element of Aq's type");
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(3, {DataType::kInt8}));
    if (ctx.rank(3) != 2) return ctx.Error("Bq must be 2-D");
    auto d = nn::ComputeMatMulDims(ctx.shape(0), ctx.shape(3));
    if (!d.ok()) return ctx.Error(d.status().message());
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(4, {DataType::kFloat}));
    if (ctx.shape(4) != Shape{d->n})
      return ctx.Error("b_scale must be [N] with N = " + std::to_string(d->n) + "; got " +
                       ShapeToString(ctx.shape(4)));
    if (ctx.has_input(5)) {
      KILN_RETURN_IF_ERROR(ctx.ExpectDtype(5, {DataType::kFloat}));
      if (ctx.shape(5) != Shape{d->n})
        return ctx.Error("bias must be [N] with N = " + std::to_string(d->n));
    }
    if (ctx.has_input(6)) {
      KILN_RETURN_IF_ERROR(ctx.ExpectDtype(6, {DataType::kFloat}));
      if (NumElements(ctx.shape(6)) != 1 || !ctx.has_input(7) || NumElements(ctx.shape(7)) != 1 ||
          (ctx.dtype(7) != DataType::kUInt8 && ctx.dtype(7) != DataType::kInt8))
        return ctx.Error(
            "y_scale and y_zero_point must be one element each, uint8/int8 zero point");
      ctx.SetOutput(0, ctx.dtype(7), d->out);
      return OkStatus();
    }
    ctx.SetOutput(0, DataType::kFloat, d->out);
    return OkStatus();
  }

  Status Compute(const ComputeContext& ctx) const override {
    const Tensor& aq = ctx.in(0);
    const Tensor& bq = ctx.in(3);
    auto d = nn::ComputeMatMulDims(aq.shape(), bq.shape());
    if (!d.ok()) return RunError(d.status().message());
    const float sa = ctx.in(1).data<float>()[0];
    const int32_t za = ctx.has(2) ? quant::ReadQuant(ctx.in(2), 0) : 0;
    Tensor a = Tensor::Empty(DataType::kFloat, aq.shape());
    float* ap = a.data<float>();
    for (int64_t i = 0; i < aq.numel(); ++i)
      ap[i] = static_cast<float>(quant::ReadQuant(aq, i) - za) * sa;
    const float* sb = ctx.in(4).data<float>();
    const int64_t n = d->n;
    Tensor b = Tensor::Empty(DataType::kFloat, bq.shape());
    float* bp = b.data<float>();
    const int8_t* bqp = bq.data<int8_t>();
    for (int64_t i = 0; i < bq.numel(); ++i) bp[i] = static_cast<float>(bqp[i]) * sb[i % n];
    const bool quantized = ctx.has(6);
    Tensor yf = quantized ? Tensor::Empty(DataType::kFloat, ctx.out(0).shape()) : Tensor();
    Tensor& y = quantized ? yf : ctx.out(0);
    float* yp = y.data<float>();
    nn::MatMulFloat(ap, bp, yp, *d);
    if (ctx.has(5)) {
      const float* bias = ctx.in(5).data<float>();
      for (int64_t i = 0; i < y.numel(); ++i) yp[i] += bias[i % n];
    }
    ApplyActivation(a_.act, yp, y.numel());
    if (quantized) {
      double lo, hi;
      quant::QuantRange(ctx.out(0).dtype(), &lo, &hi);
      const float sy = ctx.in(6).data<float>()[0];
      const int32_t zy = quant::ReadQuant(ctx.in(7), 0);
      for (int64_t i = 0; i < y.numel(); ++i)
        quant::WriteQuant(
            &ctx.out(0), i,
            quant::QuantizeValue(yp[i], sy, zy, static_cast<float>(lo), static_cast<float>(hi)));
    }
    return OkStatus();
  }

 private:
  explicit QMatMulOp(const Node& node) : Op(node) {}
  GemmAttrs a_;
};

KILN_REGISTER_OP_DOMAIN("kiln", "QMatMul", 1, 1, &QMatMulOp::Create);

}  // namespace
}  // namespace kiln::ops
