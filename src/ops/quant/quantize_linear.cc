// QuantizeLinear (opsets 10-24), DequantizeLinear (10-24) and DynamicQuantizeLinear (11): ONNX
// linear quantization, reference kernels (quant_common.h has the arithmetic).
//
// QuantizeLinear: Y = saturate(round_half_even(X / y_scale) + y_zero_point); Y's type is
// y_zero_point's, else `output_dtype` (21+), else uint8. DequantizeLinear: Y = (X - x_zero_point)
// * x_scale, float32. Scales and zero points per tensor or per axis (`axis`, opset 13+).
// DynamicQuantizeLinear: uint8 with scale = (max(0, max X) - min(0, min X)) / 255 and the zero
// point that maps 0 exactly.
//
// Limits (Unsupported with the reason): float8/int4/float4 types, blocked quantization
// (`block_size` > 0), float16/bfloat16 scales, `precision` (23) and DequantizeLinear's
// `output_dtype` (23) other than float32; X of QuantizeLinear is float32 (int32 X, allowed from
// 19, is refused; float16 models are lowered to float32 first, passes/lower_float16.cc).
#include <algorithm>
#include <cmath>
#include <memory>

#include "ops/common.h"
#include "ops/quant/quant_common.h"

namespace kiln::ops {
namespace quant {

std::string ResolveQuantAxis(const Shape& shape, const Shape& scale, const Shape* zero_point,
                             int64_t axis, QuantAxis* out) {
  const int64_t n = NumElements(scale);
  if (zero_point != nullptr && NumElements(*zero_point) != n)
    return "the zero point must have as many elements as the scale (" + std::to_string(n) +
           "); got " + ShapeToString(*zero_point);
  if (n == 1 && scale.size() <= 1) {
    *out = QuantAxis{};
    return "";
  }
  if (scale.size() != 1)
    return "the scale must be a scalar or 1-D; got " + ShapeToString(scale) +
           " (blocked quantization is not supported)";
  const int64_t rank = static_cast<int64_t>(shape.size());
  if (axis < -rank || axis >= rank)
    return "axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank);
  if (axis < 0) axis += rank;
  if (shape[axis] != n)
    return "a per-axis scale needs one element per index of axis " + std::to_string(axis) + " (" +
           std::to_string(shape[axis]) + "); got " + std::to_string(n);
  out->channels = n;
  out->inner = 1;
  for (int64_t d = axis + 1; d < rank; ++d) out->inner *= shape[d];
  return "";
}

}  // namespace quant

namespace {

using ir::ComputeContext;
using ir::InferContext;
using ir::Node;
using ir::Op;
using quant::QuantAxis;

// Attributes common to QuantizeLinear and DequantizeLinear.
Status ParseQdqAttrs(const Node& node, int64_t* axis, DataType* output_dtype) {
  *axis = node.GetInt("axis", 1);
  if (node.GetInt("block_size", 0) != 0)
    return Unsupported("failed to load " + node.Describe() + ": blocked quantization (block_size " +
                       std::to_string(node.GetInt("block_size", 0)) + ") is not supported");
  *output_dtype = static_cast<DataType>(node.GetInt("output_dtype", 0));
  return OkStatus();
}

Status CheckScale(const InferContext& ctx, size_t i, const std::string& describe) {
  if (!ctx.has_input(i)) return ctx.Error("the scale input is required");
  if (ctx.dtype(i) != DataType::kFloat)
    return Unsupported("failed to infer shapes of " + describe +
                       ": kiln supports float32 scales; got " + DataTypeName(ctx.dtype(i)));
  return OkStatus();
}

class QuantizeLinearOp : public Op {
 public:
  static StatusOr<std::unique_ptr<Op>> Create(const Node& node) {
    std::unique_ptr<QuantizeLinearOp> op(new QuantizeLinearOp(node));
    KILN_RETURN_IF_ERROR(ParseQdqAttrs(node, &op->axis_, &op->output_dtype_));
    if (op->output_dtype_ != DataType::kUndefined && !quant::IsQuantType(op->output_dtype_))
      return Unsupported("failed to load " + node.Describe() +
                         ": kiln quantizes to uint8, int8, uint16 and int16; got output_dtype " +
                         std::to_string(static_cast<int>(op->output_dtype_)));
    const int64_t precision = node.GetInt("precision", 0);  // opset 23: x / scale's type
    if (precision != 0 && precision != static_cast<int64_t>(DataType::kFloat))
      return Unsupported("failed to load " + node.Describe() +
                         ": kiln divides in float32; got precision " + std::to_string(precision));
    return std::unique_ptr<Op>(std::move(op));
  }

  Status Infer(InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(0, {DataType::kFloat}));
    KILN_RETURN_IF_ERROR(CheckScale(ctx, 1, describe()));
    DataType out = output_dtype_ != DataType::kUndefined ? output_dtype_ : DataType::kUInt8;
    if (ctx.has_input(2)) {
      if (!quant::IsQuantType(ctx.dtype(2)))
        return Unsupported("failed to infer shapes of " + describe() +
                           ": kiln quantizes to uint8, int8, uint16 and int16; got "
                           "y_zero_point of type " +
                           DataTypeName(ctx.dtype(2)));
      if (output_dtype_ != DataType::kUndefined && output_dtype_ != ctx.dtype(2))
        return ctx.Error(std::string("output_dtype must match y_zero_point's type; got ") +
                         DataTypeName(output_dtype_) + " and " + DataTypeName(ctx.dtype(2)));
      out = ctx.dtype(2);
    }
    QuantAxis qa;
    std::string err = quant::ResolveQuantAxis(
        ctx.shape(0), ctx.shape(1), ctx.has_input(2) ? &ctx.shape(2) : nullptr, axis_, &qa);
    if (!err.empty()) return ctx.Error(err);
    ctx.SetOutput(0, out, ctx.shape(0));
    return OkStatus();
  }

  Status Compute(const ComputeContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    const Tensor& scale = ctx.in(1);
    Tensor& y = ctx.out(0);
    QuantAxis qa;
    std::string err = quant::ResolveQuantAxis(
        x.shape(), scale.shape(), ctx.has(2) ? &ctx.in(2).shape() : nullptr, axis_, &qa);
    if (!err.empty()) return RunError(err);
    double lo, hi;
    quant::QuantRange(y.dtype(), &lo, &hi);
    const float* xp = x.data<float>();
    const float* sp = scale.data<float>();
    const int64_t n = x.numel();
    for (int64_t i = 0; i < n; ++i) {
      const int64_t c = qa.channel(i);
      const int32_t zp = ctx.has(2) ? quant::ReadQuant(ctx.in(2), c) : 0;
      quant::WriteQuant(
          &y, i,
          quant::QuantizeValue(xp[i], sp[c], zp, static_cast<float>(lo), static_cast<float>(hi)));
    }
    return OkStatus();
  }

 private:
  explicit QuantizeLinearOp(const Node& node) : Op(node) {}
  int64_t axis_ = 1;
  DataType output_dtype_ = DataType::kUndefined;
};

class DequantizeLinearOp : public Op {
 public:
  static StatusOr<std::unique_ptr<Op>> Create(const Node& node) {
    std::unique_ptr<DequantizeLinearOp> op(new DequantizeLinearOp(node));
    DataType output_dtype;
    KILN_RETURN_IF_ERROR(ParseQdqAttrs(node, &op->axis_, &output_dtype));
    if (output_dtype != DataType::kUndefined && output_dtype != DataType::kFloat)
      return Unsupported("failed to load " + node.Describe() +
                         ": kiln dequantizes to float32; got output_dtype " +
                         std::to_string(static_cast<int>(output_dtype)));
    return std::unique_ptr<Op>(std::move(op));
  }

  Status Infer(InferContext& ctx) const override {
    if (!ctx.has_input(0)) return ctx.Error("input x is required");
    if (!quant::IsQuantType(ctx.dtype(0)) && ctx.dtype(0) != DataType::kInt32)
      return Unsupported("failed to infer shapes of " + describe() +
                         ": kiln dequantizes uint8, int8, uint16, int16 and int32; got " +
                         DataTypeName(ctx.dtype(0)));
    KILN_RETURN_IF_ERROR(CheckScale(ctx, 1, describe()));
    if (ctx.has_input(2) && ctx.dtype(2) != ctx.dtype(0))
      return ctx.Error(std::string("x_zero_point must have x's type ") +
                       DataTypeName(ctx.dtype(0)) + "; got " + DataTypeName(ctx.dtype(2)));
    QuantAxis qa;
    std::string err = quant::ResolveQuantAxis(
        ctx.shape(0), ctx.shape(1), ctx.has_input(2) ? &ctx.shape(2) : nullptr, axis_, &qa);
    if (!err.empty()) return ctx.Error(err);
    ctx.SetOutput(0, DataType::kFloat, ctx.shape(0));
    return OkStatus();
  }

  Status Compute(const ComputeContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    const Tensor& scale = ctx.in(1);
    QuantAxis qa;
    std::string err = quant::ResolveQuantAxis(
        x.shape(), scale.shape(), ctx.has(2) ? &ctx.in(2).shape() : nullptr, axis_, &qa);
    if (!err.empty()) return RunError(err);
    const float* sp = scale.data<float>();
    float* yp = ctx.out(0).data<float>();
    const int64_t n = x.numel();
    for (int64_t i = 0; i < n; ++i) {
      const int64_t c = qa.channel(i);
      const int32_t zp = ctx.has(2) ? quant::ReadQuant(ctx.in(2), c) : 0;
      // int32 inputs may span 2^32: subtract in int64, then one rounding to float.
      const float d = static_cast<float>(static_cast<int64_t>(quant::ReadQuant(x, i)) - zp);
      yp[i] = d * sp[c];
    }
    return OkStatus();
  }

 private:
  explicit DequantizeLinearOp(const Node& node) : Op(node) {}
  int64_t axis_ = 1;
};

class DynamicQuantizeLinearOp : public Op {
 public:
  explicit DynamicQuantizeLinearOp(const Node& node) : Op(node) {}

  Status Infer(InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(0, {DataType::kFloat}));
    if (!ctx.has_input(0)) return ctx.Error("input x is required");
    ctx.SetOutput(0, DataType::kUInt8, ctx.shape(0));
    ctx.SetOutput(1, DataType::kFloat, {});
    ctx.SetOutput(2, DataType::kUInt8, {});
    return OkStatus();
  }

  Status Compute(const ComputeContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    const float* xp = x.data<float>();
    const int64_t n = x.numel();
    float lo = 0.f, hi = 0.f;  // the range always includes 0
    for (int64_t i = 0; i < n; ++i) {
      lo = std::min(lo, xp[i]);
      hi = std::max(hi, xp[i]);
    }
    const float scale = (hi - lo) / 255.f;
    int32_t zp = 0;
    if (scale > 0.f) zp = quant::QuantizeValue(0.f - lo, scale, 0, 0.f, 255.f);
    ctx.out(1).data<float>()[0] = scale;
    ctx.out(2).data<uint8_t>()[0] = static_cast<uint8_t>(zp);
    uint8_t* yp = ctx.out(0).data<uint8_t>();
    for (int64_t i = 0; i < n; ++i)
      yp[i] = scale > 0.f ? static_cast<uint8_t>(quant::QuantizeValue(xp[i], scale, zp, 0.f, 255.f))
                          : 0;
    return OkStatus();
  }
};

KILN_REGISTER_OP("QuantizeLinear", 10, ir::kMaxOpset, &QuantizeLinearOp::Create);
KILN_REGISTER_OP("DequantizeLinear", 10, ir::kMaxOpset, &DequantizeLinearOp::Create);
KILN_REGISTER_OP("DynamicQuantizeLinear", 11, ir::kMaxOpset, &ir::MakeOp<DynamicQuantizeLinearOp>);

}  // namespace
}  // namespace kiln::ops
