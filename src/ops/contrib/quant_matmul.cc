// The dynamic-quantization matmuls of ONNX Runtime's "com.microsoft" domain (opset 1), as ORT's
// quantize_dynamic writes them:
//
//   MatMulIntegerToFloat   A, B (uint8/int8 each), a_scale, b_scale, optional a_zero_point,
//                          b_zero_point, bias:
//                          Y[.., m, n] = sum_k (A - a_zp)(B - b_zp[n]) * (a_scale * b_scale[n])
//                                        + bias[n]
//   DynamicQuantizeMatMul  A float32, B (uint8/int8), b_scale, optional b_zero_point, bias: A is
//                          quantized to uint8 per tensor exactly as DynamicQuantizeLinear does
//                          (kiln's own op computes it), then as MatMulIntegerToFloat.
//
// A is [..., M, K] and B [..., K, N] with numpy matmul rules. a_scale and a_zero_point have one
// element; b_scale and b_zero_point one, or N (1-D: per column of B); bias is [N].
//
// Reference kernel: the integer products and sums in double (exact), the sum rounded to float32
// and multiplied by the float32 scale product a_scale * b_scale[n], plus the bias, in float32
// (ORT's order). float32 output.
#include <memory>
#include <string>
#include <vector>

#include "ops/common.h"
#include "ops/nn/matmul.h"
#include "ops/op_cases.h"
#include "ops/quant/quant_common.h"

namespace kiln::ops {
namespace {

using ir::ComputeContext;
using ir::InferContext;
using ir::Node;

class MsQuantMatMulOp final : public ir::Op {
 public:
  static StatusOr<std::unique_ptr<ir::Op>> Create(const Node& node) {
    std::unique_ptr<MsQuantMatMulOp> op(new MsQuantMatMulOp(node));
    op->dynamic_ = node.op_type == "DynamicQuantizeMatMul";
    const size_t n = node.num_explicit_inputs();
    const size_t least = op->dynamic_ ? 3 : 4, most = op->dynamic_ ? 5 : 7;
    if (n < least || n > most)
      return ir::AttrError(node, node.op_type + " takes " + std::to_string(least) + " to " +
                                     std::to_string(most) + " inputs; got " + std::to_string(n));
    if (op->dynamic_) {
      op->b_scale_ = 2, op->b_zp_ = 3, op->bias_ = 4;
      Node dql;
      dql.name = node.name;
      dql.op_type = "DynamicQuantizeLinear";
      dql.opset = 11;
      dql.inputs = {0};
      dql.outputs = {1, 2, 3};
      const ir::OpDef* def = ir::OpRegistry::Global().Find("", dql.op_type, dql.opset);
      if (def == nullptr) return Internal(node.Describe() + ": kiln has no DynamicQuantizeLinear");
      auto made = def->create(dql);
      if (!made.ok()) return Status(made.status()).AddContext("in " + node.Describe());
      op->quantize_ = std::move(*made);
    }
    return std::unique_ptr<ir::Op>(std::move(op));
  }

  Status Infer(InferContext& ctx) const override {
    for (int i : {0, 1, b_scale_})
      if (!ctx.has_input(i)) return ctx.Error("input " + std::to_string(i) + " is required");
    if (dynamic_) {
      KILN_RETURN_IF_ERROR(ctx.ExpectDtype(0, {DataType::kFloat}));
    } else {
      if (!quant::Is8Bit(ctx.dtype(0))) return ctx.Error("A must be uint8 or int8");
      if (!ctx.has_input(a_scale_) || ctx.dtype(a_scale_) != DataType::kFloat ||
          NumElements(ctx.shape(a_scale_)) != 1)
        return ctx.Error("a_scale must be one float32 element");
      if (ctx.has_input(a_zp_) &&
          (ctx.dtype(a_zp_) != ctx.dtype(0) || NumElements(ctx.shape(a_zp_)) != 1))
        return ctx.Error("a_zero_point must be one element of A's type");
    }
    if (!quant::Is8Bit(ctx.dtype(1))) return ctx.Error("B must be uint8 or int8");
    auto d = nn::ComputeMatMulDims(ctx.shape(0), ctx.shape(1));
    if (!d.ok()) return ctx.Error(d.status().message());
    const int64_t n = d->n;
    auto per_column = [&](int slot, const std::string& what) -> Status {
      const Shape& s = ctx.shape(slot);
      if (NumElements(s) == 1 || (s.size() == 1 && s[0] == n)) return OkStatus();
      return ctx.Error(what + " must have one element or B's " + std::to_string(n) +
                       " columns (1-D); got " + ShapeToString(s));
    };
    if (ctx.dtype(b_scale_) != DataType::kFloat) return ctx.Error("b_scale must be float32");
    KILN_RETURN_IF_ERROR(per_column(b_scale_, "b_scale"));
    if (ctx.has_input(b_zp_)) {
      if (ctx.dtype(b_zp_) != ctx.dtype(1)) return ctx.Error("b_zero_point must have B's type");
      KILN_RETURN_IF_ERROR(per_column(b_zp_, "b_zero_point"));
    }
    if (ctx.has_input(bias_)) {
      KILN_RETURN_IF_ERROR(ctx.ExpectDtype(bias_, {DataType::kFloat}));
      if (ctx.shape(bias_) != Shape{n})
        return ctx.Error("bias must be [" + std::to_string(n) + "]; got " +
                         ShapeToString(ctx.shape(bias_)));
    }
    ctx.SetOutput(0, DataType::kFloat, d->out);
    return OkStatus();
  }

  Status Compute(const ComputeContext& ctx) const override {
    Tensor qa, qa_scale, qa_zp;
    const Tensor* a = &ctx.in(0);
    float a_scale = 1.f;
    int32_t a_zp = 0;
    if (dynamic_) {
      qa = Tensor::Empty(DataType::kUInt8, a->shape());
      qa_scale = Tensor::Empty(DataType::kFloat, {});
      qa_zp = Tensor::Empty(DataType::kUInt8, {});
      ComputeContext q{{a}, {&qa, &qa_scale, &qa_zp}};
      KILN_RETURN_IF_ERROR(quantize_->Compute(q));
      a = &qa;
      a_scale = qa_scale.data<float>()[0];
      a_zp = quant::ReadQuant(qa_zp, 0);
    } else {
      a_scale = ctx.in(a_scale_).data<float>()[0];
      if (ctx.has(a_zp_)) a_zp = quant::ReadQuant(ctx.in(a_zp_), 0);
    }
    const Tensor& b = ctx.in(1);
    auto d = nn::ComputeMatMulDims(a->shape(), b.shape());
    if (!d.ok()) return RunError(d.status().message());
    const int64_t n = d->n;
    const Tensor& bs = ctx.in(b_scale_);
    const Tensor* bz = ctx.has(b_zp_) ? &ctx.in(b_zp_) : nullptr;
    std::vector<double> ad(static_cast<size_t>(a->numel())), bd(static_cast<size_t>(b.numel()));
    for (int64_t i = 0; i < a->numel(); ++i) ad[i] = quant::ReadQuant(*a, i) - a_zp;
    for (int64_t i = 0; i < b.numel(); ++i) {
      const int64_t col = n == 0 ? 0 : i % n;
      const int32_t z = bz == nullptr ? 0 : quant::ReadQuant(*bz, bz->numel() == 1 ? 0 : col);
      bd[i] = quant::ReadQuant(b, i) - z;
    }
    Tensor& y = ctx.out(0);
    std::vector<double> acc(static_cast<size_t>(y.numel()));
    nn::MatMulDouble(ad.data(), bd.data(), acc.data(), *d);
    const float* bias = ctx.has(bias_) ? ctx.in(bias_).data<float>() : nullptr;
    float* yp = y.data<float>();
    for (int64_t i = 0; i < y.numel(); ++i) {
      const int64_t col = i % n;
      const float scale = a_scale * bs.data<float>()[bs.numel() == 1 ? 0 : col];
      float v = static_cast<float>(acc[i]) * scale;
      if (bias != nullptr) v += bias[col];
      yp[i] = v;
    }
    return OkStatus();
  }

 private:
  explicit MsQuantMatMulOp(const Node& node) : Op(node) {}
  bool dynamic_ = false;
  // Input slots (MatMulIntegerToFloat's; DynamicQuantizeMatMul sets its own in Create).
  int a_scale_ = 2, b_scale_ = 3, a_zp_ = 4, b_zp_ = 5, bias_ = 6;
  std::unique_ptr<ir::Op> quantize_;  // DynamicQuantizeLinear, for DynamicQuantizeMatMul
};

StatusOr<std::unique_ptr<ir::Op>> CreateMsQuantMatMul(const Node& node) {
  return MsQuantMatMulOp::Create(node);
}

KILN_REGISTER_OP_DOMAIN("com.microsoft", "MatMulIntegerToFloat", 1, 1, &CreateMsQuantMatMul);
KILN_REGISTER_OP_DOMAIN("com.microsoft", "DynamicQuantizeMatMul", 1, 1, &CreateMsQuantMatMul);

// Kernel cases: u8 x s8 and s8 x s8 and u8 x u8, per-tensor and per-column scales and zero
// points, with and without bias, a batched A, a single row.
std::vector<OpCase> MatMulIntegerToFloatCases() {
  auto scalar = [](float v) { return Tensor::FromVector<float>({v}, {}); };
  return {OpCase("u8 [2,3,5] x s8 [5,4], per-column b, zero points, bias", 1)
              .In(CaseInts(DataType::kUInt8, {2, 3, 5}, 501, 0, 255))
              .Const(CaseInts(DataType::kInt8, {5, 4}, 502, -128, 127))
              .In(scalar(0.02f))
              .Const(CaseTensor({4}, 503, 0.001f, 0.01f))
              .In(Tensor::FromVector<uint8_t>({131}, {}))
              .Const(CaseInts(DataType::kInt8, {4}, 504, -5, 5))
              .Const(CaseTensor({4}, 505)),
          OpCase("s8 [1,7] x s8 [7,3], per-tensor, no zero points", 1)
              .In(CaseInts(DataType::kInt8, {1, 7}, 506, -128, 127))
              .Const(CaseInts(DataType::kInt8, {7, 3}, 507, -128, 127))
              .In(scalar(0.05f))
              .Const(Tensor::FromVector<float>({0.003f}, {1})),
          OpCase("u8 [4,6] x u8 [6,5], b zero point per tensor, bias", 1)
              .In(CaseInts(DataType::kUInt8, {4, 6}, 508, 0, 255))
              .Const(CaseInts(DataType::kUInt8, {6, 5}, 509, 0, 255))
              .In(scalar(0.01f))
              .Const(scalar(0.02f))
              .Omitted()
              .Const(Tensor::FromVector<uint8_t>({128}, {}))
              .Const(CaseTensor({5}, 510))};
}
std::vector<OpCase> DynamicQuantizeMatMulCases() {
  return {OpCase("[2,3,5] x s8 [5,4], per-column scale and zero point, bias", 1)
              .In(CaseTensor({2, 3, 5}, 520, -3.f, 2.f))
              .Const(CaseInts(DataType::kInt8, {5, 4}, 521, -128, 127))
              .Const(CaseTensor({4}, 522, 0.001f, 0.01f))
              .Const(CaseInts(DataType::kInt8, {4}, 523, -3, 3))
              .Const(CaseTensor({4}, 524)),
          OpCase("[1,6] only positive x u8 [6,3], per-tensor", 1)
              .In(CaseTensor({1, 6}, 525, 0.5f, 2.f))
              .Const(CaseInts(DataType::kUInt8, {6, 3}, 526, 0, 255))
              .Const(Tensor::FromVector<float>({0.004f}, {}))
              .Const(Tensor::FromVector<uint8_t>({120}, {}))};
}
KILN_REGISTER_OP_CASES("com.microsoft", "MatMulIntegerToFloat", &MatMulIntegerToFloatCases);
KILN_REGISTER_OP_CASES("com.microsoft", "DynamicQuantizeMatMul", &DynamicQuantizeMatMulCases);

}  // namespace
}  // namespace kiln::ops
