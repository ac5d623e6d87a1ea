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
#include <random>
#include <vector>

#include "ops/common.h"
#include "ops/nn/conv.h"
#include "ops/nn/matmul.h"
#include "ops/op_cases.h"
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

// Kernel cases (ops/op_cases.h) of ConvInteger and MatMulInteger: full-range 8-bit values, so a
// 16-bit sum of products that saturates (oneDNN without VNNI) shows; int32 outputs, compared
// exactly. The weights and their zero point are constants (the oneDNN kernels fold and split
// them at Prepare); the input's zero point is an input (DynamicQuantizeLinear's, at run time).

// Full-range values of an 8-bit type.
Tensor Full8Bit(DataType t, const Shape& s, uint32_t seed) {
  return t == DataType::kUInt8 ? CaseInts(t, s, seed, 0, 255) : CaseInts(t, s, seed, -128, 127);
}

// After the former hand-written kernel tests (ConvIntegerIsExact): ONNX Runtime's
// quantize_dynamic form (uint8 X with its zero point, int8 W), int8 X with and without a zero
// point, uint8 W with a per-channel zero point, groups, strides, asymmetric pads, dilation, 1-D,
// depthwise (one weight part for int8 W; uint8 W without a zero point split), a 3-D conv.
std::vector<OpCase> ConvIntegerCases() {
  struct IntConv {
    DataType x, w;
    bool x_zero;
    int w_zero;  // -1: none; -2: per output channel
    Shape xs, ws;
    int64_t group, stride, dilation;
    std::vector<int64_t> pads;
  };
  const DataType u8 = DataType::kUInt8, i8 = DataType::kInt8;
  const IntConv shapes[] = {
      {u8, i8, true, -1, {2, 70, 9, 7}, {6, 70, 3, 3}, 1, 1, 1, {1, 1, 1, 1}},
      {i8, u8, true, -2, {1, 8, 10, 11}, {6, 4, 3, 2}, 2, 2, 1, {0, 1, 2, 0}},
      {i8, i8, false, -1, {1, 9, 6, 6}, {5, 9, 1, 1}, 1, 1, 1, {0, 0, 0, 0}},
      {u8, i8, true, 3, {1, 5, 13}, {4, 5, 3}, 1, 1, 2, {2, 1}},
      {u8, i8, true, -1, {1, 16, 8, 8}, {16, 1, 3, 3}, 16, 1, 1, {1, 1, 1, 1}},
      {u8, u8, true, -1, {1, 16, 8, 8}, {16, 1, 3, 3}, 16, 2, 1, {1, 1, 1, 1}},
      {u8, i8, false, 5, {1, 3, 4, 5, 3}, {2, 3, 2, 3, 2}, 1, 1, 1, {0, 1, 0, 1, 0, 1}},
  };
  std::vector<OpCase> cases;
  uint32_t seed = 900;
  for (const IntConv& k : shapes) {
    const size_t spatial = k.xs.size() - 2;
    OpCase c(std::string(k.x == u8 ? "uint8" : "int8") + " x" + ShapeToString(k.xs) +
                 (k.x_zero ? " with zero point, " : ", ") + (k.w == u8 ? "uint8" : "int8") + " w" +
                 ShapeToString(k.ws) +
                 (k.w_zero == -2  ? " zero point per channel"
                  : k.w_zero >= 0 ? " zero point " + std::to_string(k.w_zero)
                                  : "") +
                 " group " + std::to_string(k.group) + " stride " + std::to_string(k.stride) +
                 " dilation " + std::to_string(k.dilation) + " pads " + ShapeToString(k.pads),
             10);
    c.In(Full8Bit(k.x, k.xs, seed)).Const(Full8Bit(k.w, k.ws, seed + 1));
    if (k.x_zero)
      c.In(Full8Bit(k.x, {}, seed + 2));
    else if (k.w_zero != -1)
      c.Omitted();
    if (k.w_zero == -2) c.Const(Full8Bit(k.w, {k.ws[0]}, seed + 3));
    if (k.w_zero >= 0) c.Const(CaseInts(k.w, {}, seed, k.w_zero, k.w_zero));
    c.Int("group", k.group)
        .Ints("strides", std::vector<int64_t>(spatial, k.stride))
        .Ints("dilations", std::vector<int64_t>(spatial, k.dilation))
        .Ints("pads", k.pads);
    cases.push_back(std::move(c));
    seed += 4;
  }
  return cases;
}
KILN_REGISTER_OP_CASES("", "ConvInteger", &ConvIntegerCases);

// B [k, n] of type t as trained weights under a per-tensor scale: within +-60 of the zero point
// (0, or 128 for uint8) but for 3 % of full-range values.
Tensor TrainedWeights(DataType t, int64_t k, int64_t n, uint32_t seed) {
  Tensor b = Full8Bit(t, {k, n}, seed);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> percent(0, 99), near(-60, 60);
  for (int64_t i = 0; i < b.numel(); ++i) {
    if (percent(rng) < 3) continue;
    if (t == DataType::kUInt8)
      b.data<uint8_t>()[i] = static_cast<uint8_t>(near(rng) + 128);
    else
      b.data<int8_t>()[i] = static_cast<int8_t>(near(rng));
  }
  return b;
}

// After the former hand-written kernel tests (MatMulIntegerIsExact): uint8 A with a zero point
// and int8 B (quantize_dynamic's form), int8 A, b_zero_point per column, uint8 B with and without
// a zero point (2 and 4 weight parts without VNNI), trained weights (without VNNI: clamped weights
// plus the sparse correction, 10 rows of A: a block of 8 and a partial one; 150 rows: two rounds
// of blocks), no zero points, a 2-D A; a_zero_point per row (the reference only).
std::vector<OpCase> MatMulIntegerCases() {
  struct IntMatMul {
    DataType a, b;
    int a_zero;  // -1: none; -2: per row of A; else an input scalar
    int b_zero;  // -1: none; -2: per column
    bool trained;
    Shape as;
  };
  const DataType u8 = DataType::kUInt8, i8 = DataType::kInt8;
  const int64_t k = 70, n = 33;
  const IntMatMul shapes[] = {
      {u8, i8, 0, -1, false, {2, 5, k}}, {i8, i8, 0, -2, false, {2, 5, k}},
      {u8, u8, 0, -1, false, {2, 5, k}}, {u8, u8, 0, 128, false, {2, 5, k}},
      {i8, u8, 0, -2, false, {2, 5, k}}, {u8, i8, 0, -1, true, {2, 5, k}},
      {i8, u8, 0, 128, true, {2, 5, k}}, {u8, i8, 0, -1, true, {30, 5, k}},
      {u8, i8, -1, -1, false, {7, k}},   {u8, i8, -2, -1, false, {7, k}},
  };
  std::vector<OpCase> cases;
  uint32_t seed = 950;
  for (const IntMatMul& m : shapes) {
    OpCase c(std::string(m.a == u8 ? "uint8" : "int8") + " A" + ShapeToString(m.as) +
                 (m.a_zero == -2  ? " zero point per row"
                  : m.a_zero >= 0 ? " with zero point"
                                  : "") +
                 ", " + (m.b == u8 ? "uint8" : "int8") + " B[70,33]" +
                 (m.b_zero == -2  ? " zero point per column"
                  : m.b_zero >= 0 ? " zero point " + std::to_string(m.b_zero)
                                  : "") +
                 (m.trained ? " trained" : ""),
             10);
    c.In(Full8Bit(m.a, m.as, seed));
    c.Const(m.trained ? TrainedWeights(m.b, k, n, seed + 1) : Full8Bit(m.b, {k, n}, seed + 1));
    if (m.a_zero >= 0) c.In(Full8Bit(m.a, {}, seed + 2));
    if (m.a_zero == -2) c.In(Full8Bit(m.a, {m.as[m.as.size() - 2]}, seed + 2));
    if (m.a_zero == -1 && m.b_zero != -1) c.Omitted();
    if (m.b_zero == -2) c.Const(Full8Bit(m.b, {n}, seed + 3));
    if (m.b_zero >= 0) c.Const(CaseInts(m.b, {}, seed, m.b_zero, m.b_zero));
    cases.push_back(std::move(c));
    seed += 4;
  }
  return cases;
}
KILN_REGISTER_OP_CASES("", "MatMulInteger", &MatMulIntegerCases);

}  // namespace
}  // namespace kiln::ops
