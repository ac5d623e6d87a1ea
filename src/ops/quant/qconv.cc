// QConv (domain "kiln", opset 1): a convolution on int8 data, written by the graph optimizer
// (src/passes/fuse_qdq_conv.cc) in place of DequantizeLinear -> Conv/FusedConv in QDQ models:
//
//   Y = act(Conv(DequantizeLinear(Xq, x_scale, x_zero_point), Wq * w_scale[m]) + B + Z)
//
// Inputs: 0 Xq (uint8 or int8), 1 x_scale (float32, one element), 2 x_zero_point (optional, Xq's
// type, one element), 3 Wq (int8 [M, C/group, k...]), 4 w_scale (float32 [M]: symmetric, one
// scale per output channel), 5 B (optional float32 [M]), 6 Z (optional float32, Y's shape: the
// residual summand), 7 y_scale and 8 y_zero_point (optional: the output is then quantized,
// Y = QuantizeLinear(result, y_scale, y_zero_point), uint8/int8, the QuantizeLinear that
// followed the convolution fused in; not together with Z; one element each, or [M] each: one per
// output channel, as QuantizeLinear with axis 1). Attributes: Conv's, plus FusedConv's
// activation. Output float32, or y_zero_point's type.
//
// Reference kernel: dequantizes X and W to float32 (exactly the DequantizeLinear arithmetic),
// then the Conv reference routine, + Z, activation: the result of the unfused QDQ graph.
//
// QConvAdd (domain "kiln", opset 1): a QConv with a quantized output followed by QAdd's residual
// sum, written by src/passes/fuse_qconv_add.cc in place of QConv -> QAdd:
//
//   A = QConv(inputs 0-5, y_scale = a_scale (7), y_zero_point = a_zero_point (8))
//   Y = QuantizeLinear(sum_act(DequantizeLinear(A) + DequantizeLinear(R, r_scale, r_zero_point)),
//                      y_scale, y_zero_point)
//
// Inputs 0-5 as QConv's, 6 empty, 7 a_scale and 8 a_zero_point (one element each), 9 R
// (uint8/int8, A's shape), 10 r_scale, 11 r_zero_point (optional, R's type), 12 y_scale, 13
// y_zero_point (uint8/int8: Y's type), one element each. Attributes: QConv's, plus
// `sum_activation` ("" or "Relu"). Reference kernel: QConv's reference to A, then QAdd's
// arithmetic: the unfused graph's result, bit for bit.
//
// QConvDw (domain "kiln", opset 1): a QConv with a quantized output followed by a depthwise
// QConv that reads it, written by src/passes/fuse_qconv_dw.cc in place of QConv -> QConv (a
// MobileNet block's 1x1 expansion and its 3x3 depthwise convolution):
//
//   A = QConv(inputs 0-5, y_scale = a_scale (7), y_zero_point = a_zero_point (8))
//   Y = QConv(A, a_scale, a_zero_point, Wd (9), wd_scale (10), Bd (11), y_scale (12),
//             y_zero_point (13)) with group = M, `dw_strides`, `dw_pads`, `dw_activation`
//
// Inputs 0-5 as QConv's, 6 empty, 7 a_scale and 8 a_zero_point (one element each), 9 Wd (int8
// [M, 1, k...]), 10 wd_scale (float32 [M]), 11 Bd (optional float32 [M]), 12 y_scale and 13
// y_zero_point (one element each). Attributes: QConv's for the first convolution; `dw_strides`,
// `dw_pads` (the depthwise convolution's; dilations 1) and `dw_activation` (with
// `dw_activation_alpha` and `dw_activation_beta`, as FusedConv's `activation`). Reference kernel:
// QConv's reference to A, then QConv's reference again: the unfused graph's result, bit for bit.
#include <algorithm>
#include <memory>

#include "ops/attrs.h"
#include "ops/common.h"
#include "ops/nn/conv.h"
#include "ops/quant/quant_common.h"

namespace kiln::ops {
namespace {

using ir::ComputeContext;
using ir::InferContext;
using ir::Node;
using ir::Op;

// Xq as float32: DequantizeLinear's (q - zero_point) * scale, exactly.
Tensor Dequantized(const Tensor& q, float scale, int32_t zero) {
  Tensor x = Tensor::Empty(DataType::kFloat, q.shape());
  float* xp = x.data<float>();
  for (int64_t i = 0; i < q.numel(); ++i)
    xp[i] = static_cast<float>(quant::ReadQuant(q, i) - zero) * scale;
  return x;
}

// Int8 weights [M, ...] as float32, one scale per output channel.
Tensor DequantizedWeights(const Tensor& wq, const float* scales) {
  const int64_t m = wq.shape()[0], per = wq.numel() / std::max<int64_t>(1, m);
  Tensor w = Tensor::Empty(DataType::kFloat, wq.shape());
  float* wp = w.data<float>();
  const int8_t* q = wq.data<int8_t>();
  for (int64_t i = 0; i < wq.numel(); ++i) wp[i] = static_cast<float>(q[i]) * scales[i / per];
  return w;
}

class QConvOp : public Op {
 public:
  static StatusOr<std::unique_ptr<Op>> Create(const Node& node) {
    std::unique_ptr<QConvOp> op(new QConvOp(node));
    KILN_RETURN_IF_ERROR(nn::ParseConvParams(node, &op->a_.conv));
    KILN_RETURN_IF_ERROR(ParseActivation(node, &op->a_.act));
    op->add_ = node.op_type == "QConvAdd";
    op->dw_ = node.op_type == "QConvDw";
    if (op->dw_) {
      if (node.inputs.size() != 14)
        return ir::AttrError(node,
                             "QConvDw takes 14 inputs; got " + std::to_string(node.inputs.size()));
      KILN_RETURN_IF_ERROR(ParseActivation(node, &op->dw_act_, "dw_"));
      nn::WindowAttrs& w = op->dw_conv_.window;
      w.strides = node.GetInts("dw_strides");
      w.pads = node.GetInts("dw_pads");
      for (int64_t v : w.strides)
        if (v < 1) return ir::AttrError(node, "dw_strides must be >= 1");
      for (int64_t v : w.pads)
        if (v < 0) return ir::AttrError(node, "dw_pads must be >= 0");
    } else if (op->add_) {
      const std::string s = node.GetString("sum_activation", "");
      if (s != "" && s != "Relu")
        return ir::AttrError(node, "sum_activation must be \"\" or \"Relu\"; got \"" + s + "\"");
      op->a_.sum_relu = s == "Relu";
      if (node.inputs.size() != 14)
        return ir::AttrError(node,
                             "QConvAdd takes 14 inputs; got " + std::to_string(node.inputs.size()));
    } else if (node.inputs.size() < 5 || node.inputs.size() > 9) {
      return ir::AttrError(node,
                           "QConv takes 5 to 9 inputs; got " + std::to_string(node.inputs.size()));
    }
    return std::unique_ptr<Op>(std::move(op));
  }

  const ir::OpAttrs* attributes() const override { return &a_; }

  Status Infer(InferContext& ctx) const override {
    if (!ctx.has_input(0) || (ctx.dtype(0) != DataType::kUInt8 && ctx.dtype(0) != DataType::kInt8))
      return ctx.Error("Xq must be uint8 or int8");
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(1, {DataType::kFloat}));
    if (NumElements(ctx.shape(1)) != 1) return ctx.Error("x_scale must have one element");
    if (ctx.has_input(2) && (ctx.dtype(2) != ctx.dtype(0) || NumElements(ctx.shape(2)) != 1))
      return ctx.Error("x_zero_point must be one element of Xq's type");
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(3, {DataType::kInt8}));
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(4, {DataType::kFloat}));
    InferContext sub(ctx.node(),
                     {DataType::kFloat, DataType::kFloat,
                      ctx.has_input(5) ? ctx.dtype(5) : DataType::kUndefined},
                     {ctx.shape(0), ctx.shape(3), ctx.has_input(5) ? ctx.shape(5) : Shape{}},
                     {nullptr, nullptr, nullptr});
    KILN_ASSIGN_OR_RETURN(Shape y, nn::InferConvShape(a_.conv, sub, describe()));
    if (ctx.shape(4) != Shape{ctx.shape(3)[0]})
      return ctx.Error("w_scale must be [M] with M = " + std::to_string(ctx.shape(3)[0]) +
                       "; got " + ShapeToString(ctx.shape(4)));
    if (ctx.has_input(6)) {
      KILN_RETURN_IF_ERROR(ctx.ExpectDtype(6, {DataType::kFloat}));
      if (ctx.shape(6) != y)
        return ctx.Error("Z must have exactly the convolution's output shape " + ShapeToString(y) +
                         "; got " + ShapeToString(ctx.shape(6)));
    }
    if (ctx.has_input(7)) {
      if (ctx.has_input(6)) return ctx.Error("a quantized output (y_scale) excludes Z");
      KILN_RETURN_IF_ERROR(ctx.ExpectDtype(7, {DataType::kFloat}));
      const int64_t m = ctx.shape(3)[0];
      const bool one =
          NumElements(ctx.shape(7)) == 1 && ctx.has_input(8) && NumElements(ctx.shape(8)) == 1;
      const bool per_channel =
          ctx.shape(7) == Shape{m} && ctx.has_input(8) && ctx.shape(8) == Shape{m};
      if (!ctx.has_input(8) ||
          (ctx.dtype(8) != DataType::kUInt8 && ctx.dtype(8) != DataType::kInt8) ||
          (!one && !per_channel))
        return ctx.Error("y_scale and y_zero_point must be one element each or [M] each (M = " +
                         std::to_string(m) + "), uint8/int8 zero point");
      if (dw_) return InferDepthwise(ctx, y, one);
      if (!add_) {
        ctx.SetOutput(0, ctx.dtype(8), y);
        return OkStatus();
      }
      if (!one) return ctx.Error("QConvAdd's a_scale and a_zero_point must be one element each");
      if (!ctx.has_input(9) || !quant::Is8Bit(ctx.dtype(9)) || ctx.shape(9) != y)
        return ctx.Error("R must be uint8 or int8 of the convolution's output shape " +
                         ShapeToString(y));
      KILN_RETURN_IF_ERROR(ctx.ExpectDtype(10, {DataType::kFloat}));
      KILN_RETURN_IF_ERROR(ctx.ExpectDtype(12, {DataType::kFloat}));
      if (NumElements(ctx.shape(10)) != 1 || NumElements(ctx.shape(12)) != 1 ||
          (ctx.has_input(11) &&
           (ctx.dtype(11) != ctx.dtype(9) || NumElements(ctx.shape(11)) != 1)) ||
          !ctx.has_input(13) || !quant::Is8Bit(ctx.dtype(13)) || NumElements(ctx.shape(13)) != 1)
        return ctx.Error(
            "r_scale, y_scale (float32) and r_zero_point (R's type), y_zero_point (uint8/int8) "
            "must be one element each");
      ctx.SetOutput(0, ctx.dtype(13), y);
      return OkStatus();
    }
    if (add_ || dw_)
      return ctx.Error(node_type() + " needs a_scale and a_zero_point (inputs 7 and 8)");
    ctx.SetOutput(0, DataType::kFloat, y);
    return OkStatus();
  }

  Status Compute(const ComputeContext& ctx) const override {
    const Tensor& xq = ctx.in(0);
    const Tensor x = Dequantized(xq, ctx.in(1).data<float>()[0],
                                 ctx.has(2) ? quant::ReadQuant(ctx.in(2), 0) : 0);
    const Tensor& wq = ctx.in(3);
    const int64_t m_out = wq.shape()[0];
    const Tensor w = DequantizedWeights(wq, ctx.in(4).data<float>());
    const bool quantized = ctx.has(7);
    Tensor yf = quantized
                    ? Tensor::Empty(DataType::kFloat, dw_ ? FirstOutputShape(xq.shape(), wq.shape())
                                                          : ctx.out(0).shape())
                    : Tensor();
    Tensor& y = quantized ? yf : ctx.out(0);
    std::string err = nn::ConvReference(a_.conv, x, w, ctx.has(5) ? &ctx.in(5) : nullptr, &y);
    if (!err.empty()) return RunError(err);
    float* yp = y.data<float>();
    const int64_t n = y.numel();
    err = nn::AddResidualAndActivate(a_.act, ctx.has(6) ? &ctx.in(6) : nullptr, &y);
    if (!err.empty()) return RunError(err);
    if (quantized) {
      const Tensor& sy = ctx.in(7);
      const int64_t per_channel = sy.numel() > 1;
      // Channel of element i of [N, M, ...]: (i / inner) % M.
      const int64_t inner = n / std::max<int64_t>(1, y.shape()[0] * m_out);
      Tensor a = add_ || dw_ ? Tensor::Empty(ctx.in(8).dtype(), y.shape()) : Tensor();
      Tensor& q = add_ || dw_ ? a : ctx.out(0);
      double lo, hi;
      quant::QuantRange(q.dtype(), &lo, &hi);
      for (int64_t i = 0; i < n; ++i) {
        const int64_t c = per_channel ? (i / inner) % m_out : 0;
        quant::WriteQuant(
            &q, i,
            quant::QuantizeValue(yp[i], sy.data<float>()[c], quant::ReadQuant(ctx.in(8), c),
                                 static_cast<float>(lo), static_cast<float>(hi)));
      }
      if (dw_) return ComputeDepthwise(ctx, a);
      if (add_) {  // QAdd's arithmetic (ops/quant/qadd.cc), in place in yf
        const float sa = sy.data<float>()[0], sr = ctx.in(10).data<float>()[0];
        const int32_t za = quant::ReadQuant(ctx.in(8), 0);
        const int32_t zr = ctx.has(11) ? quant::ReadQuant(ctx.in(11), 0) : 0;
        const Tensor& r = ctx.in(9);
        for (int64_t i = 0; i < n; ++i)
          yp[i] = static_cast<float>(quant::ReadQuant(a, i) - za) * sa +
                  static_cast<float>(quant::ReadQuant(r, i) - zr) * sr;
        if (a_.sum_relu)
          for (int64_t i = 0; i < n; ++i) yp[i] = std::max(yp[i], 0.f);
        quant::QuantizeTensor(yp, ctx.in(12).data<float>()[0], quant::ReadQuant(ctx.in(13), 0),
                              &ctx.out(0));
      }
    }
    return OkStatus();
  }

 private:
  explicit QConvOp(const Node& node) : Op(node) {}

  std::string node_type() const { return dw_ ? "QConvDw" : add_ ? "QConvAdd" : "QConv"; }

  // The first convolution's output shape (A's, QConvDw) for X and W shapes Infer accepted.
  Shape FirstOutputShape(const Shape& x, const Shape& w) const {
    nn::Window win;
    nn::ForwardWindow(a_.conv.window, std::vector<int64_t>(x.begin() + 2, x.end()),
                      std::vector<int64_t>(w.begin() + 2, w.end()), false, &win);
    Shape y = {x[0], w[0]};
    y.insert(y.end(), win.out.begin(), win.out.end());
    return y;
  }

  // The depthwise convolution's parameters for M channels.
  nn::ConvParams DepthwiseParams(int64_t m) const {
    nn::ConvParams p = dw_conv_;
    p.group = m;
    return p;
  }

  // QConvDw: inputs 9-13 and Y's shape from A's (`a`; `one`: a_scale and a_zero_point are one
  // element each).
  Status InferDepthwise(InferContext& ctx, const Shape& a, bool one) const {
    if (!one) return ctx.Error("QConvDw's a_scale and a_zero_point must be one element each");
    const int64_t m = a[1];
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(9, {DataType::kInt8}));
    const Shape& wd = ctx.shape(9);
    if (wd.size() != a.size() || wd[0] != m || wd[1] != 1)
      return ctx.Error("Wd must be int8 [M, 1, k...] with M = " + std::to_string(m) + "; got " +
                       ShapeToString(wd));
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(10, {DataType::kFloat}));
    if (ctx.shape(10) != Shape{m}) return ctx.Error("wd_scale must be [M]");
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(12, {DataType::kFloat}));
    if (NumElements(ctx.shape(12)) != 1 || !ctx.has_input(13) || !quant::Is8Bit(ctx.dtype(13)) ||
        NumElements(ctx.shape(13)) != 1)
      return ctx.Error("y_scale (float32) and y_zero_point (uint8/int8) must be one element each");
    InferContext sub(ctx.node(),
                     {DataType::kFloat, DataType::kFloat,
                      ctx.has_input(11) ? ctx.dtype(11) : DataType::kUndefined},
                     {a, wd, ctx.has_input(11) ? ctx.shape(11) : Shape{}},
                     {nullptr, nullptr, nullptr});
    KILN_ASSIGN_OR_RETURN(Shape y, nn::InferConvShape(DepthwiseParams(m), sub, describe()));
    ctx.SetOutput(0, ctx.dtype(13), y);
    return OkStatus();
  }

  // QConvDw's second half on A as the first half quantized it: QConv's reference arithmetic.
  Status ComputeDepthwise(const ComputeContext& ctx, const Tensor& a) const {
    const Tensor x = Dequantized(a, ctx.in(7).data<float>()[0], quant::ReadQuant(ctx.in(8), 0));
    const int64_t m = ctx.in(9).shape()[0];
    const Tensor w = DequantizedWeights(ctx.in(9), ctx.in(10).data<float>());
    Tensor y = Tensor::Empty(DataType::kFloat, ctx.out(0).shape());
    std::string err =
        nn::ConvReference(DepthwiseParams(m), x, w, ctx.has(11) ? &ctx.in(11) : nullptr, &y);
    if (err.empty()) err = nn::AddResidualAndActivate(dw_act_, nullptr, &y);
    if (!err.empty()) return RunError(err);
    double lo, hi;
    quant::QuantRange(ctx.out(0).dtype(), &lo, &hi);
    const float sy = ctx.in(12).data<float>()[0];
    const int32_t zy = quant::ReadQuant(ctx.in(13), 0);
    const float* yp = y.data<float>();
    for (int64_t i = 0; i < y.numel(); ++i)
      quant::WriteQuant(
          &ctx.out(0), i,
          quant::QuantizeValue(yp[i], sy, zy, static_cast<float>(lo), static_cast<float>(hi)));
    return OkStatus();
  }

  QConvAddAttrs a_;
  bool add_ = false, dw_ = false;
  nn::ConvParams dw_conv_;
  Activation dw_act_;
};

KILN_REGISTER_OP_DOMAIN("kiln", "QConv", 1, 1, &QConvOp::Create);
KILN_REGISTER_OP_DOMAIN("kiln", "QConvAdd", 1, 1, &QConvOp::Create);
KILN_REGISTER_OP_DOMAIN("kiln", "QConvDw", 1, 1, &QConvOp::Create);

}  // namespace
}  // namespace kiln::ops
