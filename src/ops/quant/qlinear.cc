// The integer convolutions and matmuls of the ONNX domain, reference kernels: QLinearConv (10),
// ConvInteger (10), QLinearMatMul (10, 21) and MatMulInteger (10).
//
//   ConvInteger / MatMulInteger:  Y(int32) = op(X - x_zero_point, W - w_zero_point)
//   QLinearConv:   Y = saturate(round_half_even((op(X - zx, W - zw) + B) * sx * sw / sy) + zy)
//   QLinearMatMul: Y = saturate(round_half_even(op(A - za, B - zb) * sa * sb / sy) + zy)
//
// Algorithm: the operands, zero points subtracted, are widened to double and run through the
// float routines' loops (ops/nn/conv.h, matmul.h): products of 8/16-bit integers and their sums
// are exact in double, so the accumulation is the integer one; the rescale is done in double.
// Zero points and scales of W are per tensor or per output channel (QLinearConv: axis 0;
// QLinearMatMul: B's last axis; MatMulInteger: a_zero_point per row of A, b_zero_point per
// column of B). Limits: those of Conv (1 to 3 spatial dims); uint8/int8 operands.
#include <cmath>
#include <memory>
#include <vector>

#include "ops/attrs.h"
#include "ops/common.h"
#include "ops/nn/conv.h"
#include "ops/nn/matmul.h"
#include "ops/quant/quant_common.h"

namespace kiln::ops {
namespace {

using ir::ComputeContext;
using ir::InferContext;
using ir::Node;
using ir::Op;

using quant::Is8Bit;

Status Expect8Bit(const InferContext& ctx, size_t i, const std::string& describe,
                  const char* what) {
  if (!ctx.has_input(i)) return ctx.Error(std::string(what) + " is required");
  if (!Is8Bit(ctx.dtype(i)))
    return Unsupported("failed to infer shapes of " + describe + ": " + what +
                       " must be uint8 or int8; got " + DataTypeName(ctx.dtype(i)));
  return OkStatus();
}

// Element count 1, or `n` (per channel).
Status ExpectPerTensorOr(const InferContext& ctx, size_t i, int64_t n, const char* what) {
  if (!ctx.has_input(i)) return OkStatus();
  const int64_t e = NumElements(ctx.shape(i));
  if (e != 1 && !(ctx.rank(i) == 1 && e == n))
    return ctx.Error(std::string(what) + " must have 1 element or " + std::to_string(n) + "; got " +
                     ShapeToString(ctx.shape(i)));
  return OkStatus();
}

// x - zp as doubles; `zp` per tensor or per channel along axis with `inner` elements after it.
std::vector<double> Centered(const Tensor& x, const Tensor* zp, int64_t channels, int64_t inner) {
  const int64_t n = x.numel();
  std::vector<double> out(static_cast<size_t>(n));
  const bool per_channel = zp != nullptr && zp->numel() > 1;
  for (int64_t i = 0; i < n; ++i) {
    int32_t z = 0;
    if (zp != nullptr) z = quant::ReadQuant(*zp, per_channel ? (i / inner) % channels : 0);
    out[i] = static_cast<double>(quant::ReadQuant(x, i) - z);
  }
  return out;
}

double ScaleAt(const Tensor& s, int64_t c) {
  return static_cast<double>(s.data<float>()[s.numel() > 1 ? c : 0]);
}

// round_half_even(v) + zp, saturated to the type of `y`, stored as element i.
void StoreRequantized(double v, int32_t zp, Tensor* y, int64_t i) {
  double lo, hi;
  quant::QuantRange(y->dtype(), &lo, &hi);
  double r = std::nearbyint(v) + zp;
  r = r < lo ? lo : (r > hi ? hi : r);
  quant::WriteQuant(y, i, static_cast<int32_t>(r));
}

// Conv shapes through Conv's own checks, on a context holding X, W and B at Conv's positions.
StatusOr<Shape> IntConvShape(const nn::ConvParams& params, const InferContext& ctx, size_t xi,
                             size_t wi, const std::string& describe) {
  InferContext sub(ctx.node(), {DataType::kFloat, DataType::kFloat}, {ctx.shape(xi), ctx.shape(wi)},
                   {nullptr, nullptr});
  return nn::InferConvShape(params, sub, describe);
}

class QLinearConvOp : public Op {
 public:
  // integer_output: ConvInteger (inputs x, w, x_zp, w_zp; int32 out); else QLinearConv.
  static StatusOr<std::unique_ptr<Op>> Create(const Node& node, bool integer_output) {
    std::unique_ptr<QLinearConvOp> op(new QLinearConvOp(node, integer_output));
    KILN_RETURN_IF_ERROR(nn::ParseConvParams(node, &op->a_.conv));
    return std::unique_ptr<Op>(std::move(op));
  }
  static StatusOr<std::unique_ptr<Op>> CreateQLinear(const Node& node) {
    return Create(node, false);
  }
  static StatusOr<std::unique_ptr<Op>> CreateInteger(const Node& node) {
    return Create(node, true);
  }
  const ir::OpAttrs* attributes() const override { return &a_; }

  Status Infer(InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(Expect8Bit(ctx, 0, describe(), "x"));
    KILN_RETURN_IF_ERROR(Expect8Bit(ctx, wi(), describe(), "w"));
    KILN_ASSIGN_OR_RETURN(Shape y, IntConvShape(a_.conv, ctx, 0, wi(), describe()));
    const int64_t m = ctx.shape(wi())[0];
    if (integer_output_) {
      KILN_RETURN_IF_ERROR(ExpectPerTensorOr(ctx, 2, 1, "x_zero_point"));
      KILN_RETURN_IF_ERROR(ExpectPerTensorOr(ctx, 3, m, "w_zero_point"));
      ctx.SetOutput(0, DataType::kInt32, y);
      return OkStatus();
    }
    for (size_t i : {1, 4, 6})
      if (!ctx.has_input(i) || ctx.dtype(i) != DataType::kFloat)
        return ctx.Error("x_scale, w_scale and y_scale must be float32");
    KILN_RETURN_IF_ERROR(ExpectPerTensorOr(ctx, 1, 1, "x_scale"));
    KILN_RETURN_IF_ERROR(ExpectPerTensorOr(ctx, 4, m, "w_scale"));
    KILN_RETURN_IF_ERROR(ExpectPerTensorOr(ctx, 5, m, "w_zero_point"));
    KILN_RETURN_IF_ERROR(ExpectPerTensorOr(ctx, 6, 1, "y_scale"));
    if (ctx.has_input(8)) {
      KILN_RETURN_IF_ERROR(ctx.ExpectDtype(8, {DataType::kInt32}));
      KILN_RETURN_IF_ERROR(ExpectPerTensorOr(ctx, 8, m, "B"));
    }
    const DataType out = ctx.has_input(7) ? ctx.dtype(7) : DataType::kUInt8;
    if (!Is8Bit(out)) return ctx.Error("y_zero_point must be uint8 or int8");
    ctx.SetOutput(0, out, y);
    return OkStatus();
  }

  Status Compute(const ComputeContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    const Tensor& w = ctx.in(wi());
    const Tensor* xzp = ctx.has(2) ? &ctx.in(2) : nullptr;
    const Tensor* wzp =
        ctx.has(integer_output_ ? 3 : 5) ? &ctx.in(integer_output_ ? 3 : 5) : nullptr;
    const int64_t m_out = w.shape()[0];
    const std::vector<double> xd = Centered(x, xzp, 1, 1);
    const std::vector<double> wd = Centered(w, wzp, m_out, w.numel() / m_out);
    std::vector<double> bias;
    if (!integer_output_ && ctx.has(8)) {
      const Tensor& b = ctx.in(8);
      for (int64_t i = 0; i < m_out; ++i) bias.push_back(b.data<int32_t>()[b.numel() > 1 ? i : 0]);
    }
    Tensor& y = ctx.out(0);
    const int64_t out_plane = y.numel() / std::max<int64_t>(1, y.shape()[0] * m_out);
    std::vector<double> acc(static_cast<size_t>(y.numel()));
    std::string err =
        nn::ConvReferenceF64(a_.conv, x.shape(), xd.data(), w.shape(), wd.data(),
                             bias.empty() ? nullptr : bias.data(), acc.data(), out_plane);
    if (!err.empty()) return RunError(err);
    const int64_t n = y.numel();
    if (integer_output_) {
      int32_t* yp = y.data<int32_t>();
      for (int64_t i = 0; i < n; ++i) yp[i] = static_cast<int32_t>(acc[i]);
      return OkStatus();
    }
    const double sx = ScaleAt(ctx.in(1), 0), sy = ScaleAt(ctx.in(6), 0);
    const int32_t zy = ctx.has(7) ? quant::ReadQuant(ctx.in(7), 0) : 0;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t m = (i / out_plane) % m_out;
      StoreRequantized(acc[i] * (sx * ScaleAt(ctx.in(4), m) / sy), zy, &y, i);
    }
    return OkStatus();
  }

 private:
  QLinearConvOp(const Node& node, bool integer_output)
      : Op(node), integer_output_(integer_output) {}
  size_t wi() const { return integer_output_ ? 1 : 3; }
  bool integer_output_;
  ConvAttrs a_;
};

class QLinearMatMulOp : public Op {
 public:
  // integer_output: MatMulInteger (A, B, a_zp, b_zp; int32 out); else QLinearMatMul.
  QLinearMatMulOp(const Node& node, bool integer_output)
      : Op(node), integer_output_(integer_output) {}
  static StatusOr<std::unique_ptr<Op>> CreateQLinear(const Node& node) {
    return std::unique_ptr<Op>(new QLinearMatMulOp(node, false));
  }
  static StatusOr<std::unique_ptr<Op>> CreateInteger(const Node& node) {
    return std::unique_ptr<Op>(new QLinearMatMulOp(node, true));
  }

  Status Infer(InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(Expect8Bit(ctx, 0, describe(), "A"));
    KILN_RETURN_IF_ERROR(Expect8Bit(ctx, bi(), describe(), "B"));
    auto d = nn::ComputeMatMulDims(ctx.shape(0), ctx.shape(bi()));
    if (!d.ok()) return ctx.Error(d.status().message());
    if (integer_output_) {
      KILN_RETURN_IF_ERROR(ExpectPerTensorOr(ctx, 2, d->m, "a_zero_point"));
      KILN_RETURN_IF_ERROR(ExpectPerTensorOr(ctx, 3, d->n, "b_zero_point"));
      ctx.SetOutput(0, DataType::kInt32, d->out);
      return OkStatus();
    }
    for (size_t i : {1, 4, 6})
      if (!ctx.has_input(i) || ctx.dtype(i) != DataType::kFloat)
        return ctx.Error("a_scale, b_scale and y_scale must be float32");
    KILN_RETURN_IF_ERROR(ExpectPerTensorOr(ctx, 1, d->m, "a_scale"));
    KILN_RETURN_IF_ERROR(ExpectPerTensorOr(ctx, 4, d->n, "b_scale"));
    KILN_RETURN_IF_ERROR(ExpectPerTensorOr(ctx, 6, 1, "y_scale"));
    const DataType out = ctx.has_input(7) ? ctx.dtype(7) : DataType::kUInt8;
    if (!Is8Bit(out)) return ctx.Error("y_zero_point must be uint8 or int8");
    ctx.SetOutput(0, out, d->out);
    return OkStatus();
  }

  Status Compute(const ComputeContext& ctx) const override {
    const Tensor& a = ctx.in(0);
    const Tensor& b = ctx.in(bi());
    auto d = nn::ComputeMatMulDims(a.shape(), b.shape());
    if (!d.ok()) return RunError(d.status().message());
    const Tensor* azp = ctx.has(2) ? &ctx.in(2) : nullptr;
    const Tensor* bzp =
        ctx.has(integer_output_ ? 3 : 5) ? &ctx.in(integer_output_ ? 3 : 5) : nullptr;
    // A's zero point runs along rows (axis -2, inner K), B's along columns (axis -1, inner 1).
    const std::vector<double> ad = Centered(a, azp, d->m, d->k);
    const std::vector<double> bd = Centered(b, bzp, d->n, 1);
    Tensor& y = ctx.out(0);
    const int64_t n = y.numel();
    std::vector<double> acc(static_cast<size_t>(n));
    nn::MatMulDouble(ad.data(), bd.data(), acc.data(), *d);
    if (integer_output_) {
      int32_t* yp = y.data<int32_t>();
      for (int64_t i = 0; i < n; ++i) yp[i] = static_cast<int32_t>(acc[i]);
      return OkStatus();
    }
    const double sy = ScaleAt(ctx.in(6), 0);
    const int32_t zy = ctx.has(7) ? quant::ReadQuant(ctx.in(7), 0) : 0;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t row = (i / d->n) % d->m, col = i % d->n;
      // The multiplier in float32, as ONNX's reference computes it.
      const float mult = static_cast<float>(ScaleAt(ctx.in(1), row)) *
                         static_cast<float>(ScaleAt(ctx.in(4), col)) / static_cast<float>(sy);
      StoreRequantized(acc[i] * mult, zy, &y, i);
    }
    return OkStatus();
  }

 private:
  size_t bi() const { return integer_output_ ? 1 : 3; }
  bool integer_output_;
};

KILN_REGISTER_OP("QLinearConv", 10, ir::kMaxOpset, &QLinearConvOp::CreateQLinear);
KILN_REGISTER_OP("ConvInteger", 10, ir::kMaxOpset, &QLinearConvOp::CreateInteger);
KILN_REGISTER_OP("QLinearMatMul", 10, ir::kMaxOpset, &QLinearMatMulOp::CreateQLinear);
KILN_REGISTER_OP("MatMulInteger", 10, ir::kMaxOpset, &QLinearMatMulOp::CreateInteger);

}  // namespace
}  // namespace kiln::ops
