// QAdd (domain "kiln", opset 1): an elementwise sum of two int8 tensors, written by the graph
// optimizer (src/passes/fuse_qdq_add.cc) in place of the residual Add of QDQ models, whose two
// inputs are dequantized and whose result is quantized again (ONNX Runtime's quantize_static):
//
//   Y = QuantizeLinear(act(DequantizeLinear(A, a_scale, a_zero_point) +
//                          DequantizeLinear(B, b_scale, b_zero_point)), y_scale, y_zero_point)
//
// Inputs: 0 A (uint8 or int8), 1 a_scale (float32, one element), 2 a_zero_point (optional, A's
// type, one element), 3 B (uint8 or int8, A's shape), 4 b_scale, 5 b_zero_point (optional, B's
// type), 6 y_scale (float32, one element), 7 y_zero_point (uint8 or int8, one element: Y's type).
// Attribute: `activation` ("" or "Relu"; the fused ops' spelling, ops/activation.h) between the
// sum and the quantization. No broadcasting: the pass fuses only operands of one shape.
//
// Reference kernel: the DequantizeLinear, Add, Relu and QuantizeLinear reference arithmetic in
// float32, element by element: the result of the unfused QDQ graph, bit for bit.
#include <memory>
#include <string>
#include <vector>

#include "ops/activation.h"
#include "ops/common.h"
#include "ops/op_cases.h"
#include "ops/quant/quant_common.h"

namespace kiln::ops {
namespace {

using ir::ComputeContext;
using ir::InferContext;
using ir::Node;
using ir::Op;

class QAddOp : public Op {
 public:
  static StatusOr<std::unique_ptr<Op>> Create(const Node& node) {
    std::unique_ptr<QAddOp> op(new QAddOp(node));
    KILN_RETURN_IF_ERROR(ParseActivation(node, &op->a_.act));
    if (op->a_.act.kind != ActivationKind::kNone && op->a_.act.kind != ActivationKind::kRelu)
      return ir::AttrError(node, std::string("QAdd's activation must be \"\" or \"Relu\"; got \"") +
                                     ActivationName(op->a_.act.kind) + "\"");
    if (node.inputs.size() != 8)
      return ir::AttrError(node, "QAdd takes 8 inputs; got " + std::to_string(node.inputs.size()));
    return std::unique_ptr<Op>(std::move(op));
  }

  const ir::OpAttrs* attributes() const override { return &a_; }

  Status Infer(InferContext& ctx) const override {
    for (int x : {0, 3}) {
      if (!ctx.has_input(x) || !quant::Is8Bit(ctx.dtype(x)))
        return ctx.Error(std::string(x == 0 ? "A" : "B") + " must be uint8 or int8");
      const int s = x + 1, z = x + 2;
      KILN_RETURN_IF_ERROR(ctx.ExpectDtype(s, {DataType::kFloat}));
      if (NumElements(ctx.shape(s)) != 1)
        return ctx.Error(std::string(x == 0 ? "a" : "b") + "_scale must have one element");
      if (ctx.has_input(z) && (ctx.dtype(z) != ctx.dtype(x) || NumElements(ctx.shape(z)) != 1))
        return ctx.Error(std::string(x == 0 ? "a_zero_point must be one element of A's type"
                                            : "b_zero_point must be one element of B's type"));
    }
    if (ctx.shape(0) != ctx.shape(3))
      return ctx.Error("A and B must have one shape; got " + ShapeToString(ctx.shape(0)) + " and " +
                       ShapeToString(ctx.shape(3)));
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(6, {DataType::kFloat}));
    if (NumElements(ctx.shape(6)) != 1) return ctx.Error("y_scale must have one element");
    if (!ctx.has_input(7) || !quant::Is8Bit(ctx.dtype(7)) || NumElements(ctx.shape(7)) != 1)
      return ctx.Error("y_zero_point must be one uint8 or int8 element");
    ctx.SetOutput(0, ctx.dtype(7), ctx.shape(0));
    return OkStatus();
  }

  Status Compute(const ComputeContext& ctx) const override {
    const Tensor& a = ctx.in(0);
    const Tensor& b = ctx.in(3);
    const float sa = ctx.in(1).data<float>()[0], sb = ctx.in(4).data<float>()[0];
    const int32_t za = ctx.has(2) ? quant::ReadQuant(ctx.in(2), 0) : 0;
    const int32_t zb = ctx.has(5) ? quant::ReadQuant(ctx.in(5), 0) : 0;
    const float sy = ctx.in(6).data<float>()[0];
    const int32_t zy = quant::ReadQuant(ctx.in(7), 0);
    Tensor& y = ctx.out(0);
    const int64_t n = a.numel();
    Tensor sum = Tensor::Empty(DataType::kFloat, a.shape());
    float* s = sum.data<float>();
    for (int64_t i = 0; i < n; ++i)
      s[i] = static_cast<float>(quant::ReadQuant(a, i) - za) * sa +
             static_cast<float>(quant::ReadQuant(b, i) - zb) * sb;
    ApplyActivation(a_.act, s, n);
    quant::QuantizeTensor(s, sy, zy, &y);
    return OkStatus();
  }

 private:
  explicit QAddOp(const Node& node) : Op(node) {}
  ActivationAttrs a_;
};

KILN_REGISTER_OP_DOMAIN("kiln", "QAdd", 1, 1, &QAddOp::Create);

// Kernel cases (ops/op_cases.h) for cpu.qadd.loop: all eight uint8/int8 combinations of A, B and
// Y, zero points present and omitted (Y's is required), with and without Relu, odd and size-1
// dims and a size above the loop's threading grain (16384). Even combinations use power-of-two
// scales, so the sums land exactly on half steps of y_scale (ties: half to even); the others
// ONNX Runtime-like scales, one with a small y_scale (most sums saturate).
template <typename T>
Tensor Scalar(T v) {
  return Tensor::FromVector<T>({v}, {});
}

Tensor EightBit(bool u8, const Shape& shape, uint32_t seed) {
  return u8 ? CaseInts(DataType::kUInt8, shape, seed, 0, 255)
            : CaseInts(DataType::kInt8, shape, seed, -128, 127);
}

Tensor ZeroPoint(bool u8, int u8_value, int s8_value) {
  return u8 ? Scalar(static_cast<uint8_t>(u8_value)) : Scalar(static_cast<int8_t>(s8_value));
}

std::vector<OpCase> QAddCases() {
  const std::vector<Shape> shapes = {{3, 1, 7},    {2, 16, 9, 11},   {1, 1, 1, 1},
                                     {2, 5, 1, 3}, {1, 3, 130, 129}, {7},
                                     {2, 8, 6, 6}, {1, 1, 13}};
  std::vector<OpCase> cases;
  for (int i = 0; i < 8; ++i) {
    const bool a_u8 = i & 4, b_u8 = i & 2, y_u8 = i & 1;
    const bool ties = i % 2 == 0, relu = i % 3 == 1, a_zero = i % 2 == 0, b_zero = i % 3 != 0;
    const float sa = ties ? 0.25f : 0.031f, sb = ties ? 0.125f : 0.017f;
    const float sy = ties ? 0.5f : i == 3 ? 0.004f : 0.043f;
    const Shape& s = shapes[i];
    OpCase c(std::string(a_u8 ? "u8" : "s8") + " + " + (b_u8 ? "u8" : "s8") + " -> " +
                 (y_u8 ? "u8 " : "s8 ") + ShapeToString(s) + (a_zero ? " a_zp" : "") +
                 (b_zero ? " b_zp" : "") + (relu ? " relu" : "") + (ties ? " ties" : "") +
                 (i == 3 ? " saturated" : ""),
             1);
    c.In(EightBit(a_u8, s, 100 + i)).Const(Scalar(sa));
    if (a_zero)
      c.Const(ZeroPoint(a_u8, 100, 16));
    else
      c.Omitted();
    c.In(EightBit(b_u8, s, 200 + i)).Const(Scalar(sb));
    if (b_zero)
      c.Const(ZeroPoint(b_u8, 77, -128));
    else
      c.Omitted();
    c.Const(Scalar(sy)).Const(ZeroPoint(y_u8, i == 1 ? 0 : 128, i == 0 ? 0 : -5));
    if (relu) c.Str("activation", "Relu");
    cases.push_back(std::move(c));
  }
  return cases;
}
KILN_REGISTER_OP_CASES("kiln", "QAdd", &QAddCases);

}  // namespace
}  // namespace kiln::ops
