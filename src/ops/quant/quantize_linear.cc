// QuantizeLinear (opsets 10-24), DequantizeLinear (10-24) and DynamicQuantizeLinear (11): ONNX
// linear quantization, reference kernels (quant_common.h has the arithmetic).
//
// QuantizeLinear: Y = saturate(round_half_even(X / y_scale) + y_zero_point); Y's type is
// y_zero_point's, else `output_dtype` (21+), else uint8. To the 8-bit floats Y = X / y_scale
// converted with `saturate` (19+; the zero point must be 0 and is not added, as ONNX's reference
// does), to float4e2m1 Y = X / y_scale + y_zero_point converted (core/float8.h has the rounding).
// DequantizeLinear: Y = (X - x_zero_point) * x_scale, float32, for every one of those types.
// Scales and zero points per tensor or per axis (`axis`, opset 13+).
// DynamicQuantizeLinear: uint8 with scale = (max(0, max X) - min(0, min X)) / 255 and the zero
// point that maps 0 exactly.
//
// Blocked quantization (`block_size`, opset 21): the scale has X's rank, `axis` dim divided by the
// block size (rounded up). Limits (Unsupported with the reason): float16/bfloat16 scales,
// `precision` (23) and DequantizeLinear's `output_dtype` (23) other than float32; X of
// QuantizeLinear is float32 (int32 X, allowed from 19, is refused; float16 models are lowered to
// float32 first, passes/lower_float16.cc).
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "core/float8.h"
#include "ops/common.h"
#include "ops/op_cases.h"
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

constexpr const char* kQdqTypes =
    "uint8, int8, uint16, int16, uint4, int4, the 8-bit floats and float4e2m1";

// The types QuantizeLinear writes and DequantizeLinear reads besides int32.
bool IsQdqType(DataType t) { return quant::IsQuantType(t) || IsMiniFloat(t); }

// Attributes common to QuantizeLinear and DequantizeLinear.
Status ParseQdqAttrs(const Node& node, int64_t* axis, int64_t* block, DataType* output_dtype) {
  *axis = node.GetInt("axis", 1);
  *block = node.GetInt("block_size", 0);
  if (*block < 0)
    return ir::AttrError(node, "block_size must be >= 0; got " + std::to_string(*block));
  *output_dtype = static_cast<DataType>(node.GetInt("output_dtype", 0));
  return OkStatus();
}

// Where element i of X finds its scale and zero point: per tensor or per axis (QuantAxis), or,
// with a block size (opset 21), in a scale of X's rank whose `axis` dim is ceil(X's / block).
struct ScaleIndex {
  QuantAxis qa;
  int64_t block = 0, axis = 0;
  std::vector<int64_t> x_strides, s_strides;
  int64_t operator()(int64_t i) const {
    if (block == 0) return qa.channel(i);
    int64_t idx = 0;
    for (size_t d = 0; d < x_strides.size(); ++d) {
      int64_t c = i / x_strides[d];
      i %= x_strides[d];
      if (static_cast<int64_t>(d) == axis) c /= block;
      idx += c * s_strides[d];
    }
    return idx;
  }
};

std::string ResolveScaleIndex(const Shape& x, const Shape& scale, const Shape* zero_point,
                              int64_t axis, int64_t block, ScaleIndex* out) {
  out->block = block;
  if (block == 0) return quant::ResolveQuantAxis(x, scale, zero_point, axis, &out->qa);
  const int64_t rank = static_cast<int64_t>(x.size());
  if (axis < -rank || axis >= rank)
    return "axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank);
  out->axis = axis < 0 ? axis + rank : axis;
  bool ok = scale.size() == x.size();
  for (int64_t d = 0; ok && d < rank; ++d)
    ok = scale[d] == (d == out->axis ? (x[d] + block - 1) / block : x[d]);
  if (!ok)
    return "blocked quantization (block_size " + std::to_string(block) + ", axis " +
           std::to_string(out->axis) + ") needs a scale of X's shape " + ShapeToString(x) +
           " with that dim divided by the block size, rounded up; got " + ShapeToString(scale);
  if (zero_point != nullptr && *zero_point != scale)
    return "the zero point must have the scale's shape " + ShapeToString(scale) + "; got " +
           ShapeToString(*zero_point);
  out->x_strides = Strides(x);
  out->s_strides = Strides(scale);
  return "";
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
    KILN_RETURN_IF_ERROR(ParseQdqAttrs(node, &op->axis_, &op->block_, &op->output_dtype_));
    if (op->output_dtype_ != DataType::kUndefined && !IsQdqType(op->output_dtype_))
      return Unsupported("failed to load " + node.Describe() + ": kiln quantizes to " + kQdqTypes +
                         "; got output_dtype " +
                         std::to_string(static_cast<int>(op->output_dtype_)));
    const int64_t sat = node.GetInt("saturate", 1);
    if (sat != 0 && sat != 1)
      return ir::AttrError(node, "saturate must be 0 or 1; got " + std::to_string(sat));
    op->saturate_ = sat == 1;
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
      if (!IsQdqType(ctx.dtype(2)))
        return Unsupported("failed to infer shapes of " + describe() + ": kiln quantizes to " +
                           kQdqTypes + "; got y_zero_point of type " + DataTypeName(ctx.dtype(2)));
      if (output_dtype_ != DataType::kUndefined && output_dtype_ != ctx.dtype(2))
        return ctx.Error(std::string("output_dtype must match y_zero_point's type; got ") +
                         DataTypeName(output_dtype_) + " and " + DataTypeName(ctx.dtype(2)));
      out = ctx.dtype(2);
    }
    ScaleIndex qa;
    std::string err = ResolveScaleIndex(
        ctx.shape(0), ctx.shape(1), ctx.has_input(2) ? &ctx.shape(2) : nullptr, axis_, block_, &qa);
    if (!err.empty()) return ctx.Error(err);
    ctx.SetOutput(0, out, ctx.shape(0));
    return OkStatus();
  }

  Status Compute(const ComputeContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    const Tensor& scale = ctx.in(1);
    Tensor& y = ctx.out(0);
    ScaleIndex qa;
    std::string err = ResolveScaleIndex(
        x.shape(), scale.shape(), ctx.has(2) ? &ctx.in(2).shape() : nullptr, axis_, block_, &qa);
    if (!err.empty()) return RunError(err);
    const float* xp = x.data<float>();
    const float* sp = scale.data<float>();
    const int64_t n = x.numel();
    if (IsMiniFloat(y.dtype())) {
      uint8_t* yp = static_cast<uint8_t*>(y.raw());
      const bool add_zp = y.dtype() == DataType::kFloat4E2M1 && ctx.has(2);
      for (int64_t i = 0; i < n; ++i) {
        const int64_t c = qa(i);
        float v = xp[i] / sp[c];
        if (add_zp)
          v += MiniFloatToFloat(static_cast<const uint8_t*>(ctx.in(2).raw())[c], y.dtype());
        yp[i] = FloatToMiniFloat(v, y.dtype(), saturate_);
      }
      return OkStatus();
    }
    double lo, hi;
    quant::QuantRange(y.dtype(), &lo, &hi);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t c = qa(i);
      const int32_t zp = ctx.has(2) ? quant::ReadQuant(ctx.in(2), c) : 0;
      quant::WriteQuant(
          &y, i,
          quant::QuantizeValue(xp[i], sp[c], zp, static_cast<float>(lo), static_cast<float>(hi)));
    }
    return OkStatus();
  }

 private:
  explicit QuantizeLinearOp(const Node& node) : Op(node) {}
  int64_t axis_ = 1, block_ = 0;
  DataType output_dtype_ = DataType::kUndefined;
  bool saturate_ = true;
};

class DequantizeLinearOp : public Op {
 public:
  static StatusOr<std::unique_ptr<Op>> Create(const Node& node) {
    std::unique_ptr<DequantizeLinearOp> op(new DequantizeLinearOp(node));
    DataType output_dtype;
    KILN_RETURN_IF_ERROR(ParseQdqAttrs(node, &op->axis_, &op->block_, &output_dtype));
    if (output_dtype != DataType::kUndefined && output_dtype != DataType::kFloat)
      return Unsupported("failed to load " + node.Describe() +
                         ": kiln dequantizes to float32; got output_dtype " +
                         std::to_string(static_cast<int>(output_dtype)));
    return std::unique_ptr<Op>(std::move(op));
  }

  Status Infer(InferContext& ctx) const override {
    if (!ctx.has_input(0)) return ctx.Error("input x is required");
    if (!IsQdqType(ctx.dtype(0)) && ctx.dtype(0) != DataType::kInt32)
      return Unsupported("failed to infer shapes of " + describe() + ": kiln dequantizes " +
                         kQdqTypes + " and int32; got " + DataTypeName(ctx.dtype(0)));
    KILN_RETURN_IF_ERROR(CheckScale(ctx, 1, describe()));
    if (ctx.has_input(2) && ctx.dtype(2) != ctx.dtype(0))
      return ctx.Error(std::string("x_zero_point must have x's type ") +
                       DataTypeName(ctx.dtype(0)) + "; got " + DataTypeName(ctx.dtype(2)));
    ScaleIndex qa;
    std::string err = ResolveScaleIndex(
        ctx.shape(0), ctx.shape(1), ctx.has_input(2) ? &ctx.shape(2) : nullptr, axis_, block_, &qa);
    if (!err.empty()) return ctx.Error(err);
    ctx.SetOutput(0, DataType::kFloat, ctx.shape(0));
    return OkStatus();
  }

  Status Compute(const ComputeContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    const Tensor& scale = ctx.in(1);
    ScaleIndex qa;
    std::string err = ResolveScaleIndex(
        x.shape(), scale.shape(), ctx.has(2) ? &ctx.in(2).shape() : nullptr, axis_, block_, &qa);
    if (!err.empty()) return RunError(err);
    const float* sp = scale.data<float>();
    float* yp = ctx.out(0).data<float>();
    const int64_t n = x.numel();
    if (IsMiniFloat(x.dtype())) {
      const uint8_t* xp = static_cast<const uint8_t*>(x.raw());
      for (int64_t i = 0; i < n; ++i) {
        const int64_t c = qa(i);
        const float zp =
            ctx.has(2)
                ? MiniFloatToFloat(static_cast<const uint8_t*>(ctx.in(2).raw())[c], x.dtype())
                : 0.f;
        yp[i] = (MiniFloatToFloat(xp[i], x.dtype()) - zp) * sp[c];
      }
      return OkStatus();
    }
    for (int64_t i = 0; i < n; ++i) {
      const int64_t c = qa(i);
      const int32_t zp = ctx.has(2) ? quant::ReadQuant(ctx.in(2), c) : 0;
      // int32 inputs may span 2^32: subtract in int64, then one rounding to float.
      const float d = static_cast<float>(static_cast<int64_t>(quant::ReadQuant(x, i)) - zp);
      yp[i] = d * sp[c];
    }
    return OkStatus();
  }

 private:
  explicit DequantizeLinearOp(const Node& node) : Op(node) {}
  int64_t axis_ = 1, block_ = 0;
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

// Kernel cases (ops/op_cases.h). QuantizeLinear's input: seeded values over +-`span` steps of
// `scale` (past the 8-bit range when span > 255: saturation at both ends), every third one an exact
// tie (k + 0.5) * scale (x / scale is exactly k + 0.5 for a power-of-two scale: half to even).
Tensor QuantInput(const Shape& shape, uint32_t seed, float scale, float span) {
  Tensor x = CaseTensor(shape, seed, -span * scale, span * scale);
  float* p = x.data<float>();
  for (int64_t i = 0; i < x.numel(); i += 3)
    p[i] = (static_cast<float>(i % 41) - 20.5f + static_cast<float>((i / 41) % 9) * 29.f) * scale;
  return x;
}

// NaN (the zero point) and infinities (saturated) at the start of `x`.
Tensor WithSpecials(Tensor x) {
  float* p = x.data<float>();
  p[1] = std::nanf("");
  p[2] = std::numeric_limits<float>::infinity();
  p[4] = -std::numeric_limits<float>::infinity();
  return x;
}

template <typename T>
Tensor Scalar(T v, const Shape& shape = {}) {
  return Tensor::FromVector<T>({v}, shape);
}

// Per tensor (cpu.quantizelinear.loop): uint8 and int8 with zero points, uint8 and int8 (opset 21's
// output_dtype) without, scalar and [1] scales, ties, saturation, NaN and infinities, a size above
// the loop's threading grain (16384).
std::vector<OpCase> QuantizePerTensorCases() {
  std::vector<OpCase> c;
  c.push_back(OpCase("uint8 zp 117 [2,3,1,17] ties, saturation", 13)
                  .In(QuantInput({2, 3, 1, 17}, 1, 0.0625f, 300.f))
                  .Const(Scalar(0.0625f))
                  .Const(Scalar<uint8_t>(117)));
  c.push_back(OpCase("int8 zp -3 [3,1,7] NaN, inf, saturation", 13)
                  .In(WithSpecials(QuantInput({3, 1, 7}, 2, 0.0371f, 200.f)))
                  .Const(Scalar(0.0371f, {1}))
                  .Const(Scalar<int8_t>(-3, {1})));
  c.push_back(OpCase("uint8 no zero point, opset 10 [5,1,9] ties", 10)
                  .In(QuantInput({5, 1, 9}, 3, 0.5f, 150.f))
                  .Const(Scalar(0.5f)));
  c.push_back(OpCase("int8 by output_dtype, no zero point [1,1,1,33] ties", 21)
                  .In(WithSpecials(QuantInput({1, 1, 1, 33}, 4, 0.25f, 180.f)))
                  .Const(Scalar(0.25f, {1}))
                  .Int("output_dtype", static_cast<int64_t>(DataType::kInt8)));
  c.push_back(OpCase("uint8 zp 0 [1,3,130,129] threaded", 13)
                  .In(QuantInput({1, 3, 130, 129}, 5, 0.02f, 270.f))
                  .Const(Scalar(0.02f))
                  .Const(Scalar<uint8_t>(0)));
  c.push_back(OpCase("int8 zp 127 [4,1,3,3] size-1 axis, scale [1] and zp [1] on axis 1", 13)
                  .In(QuantInput({4, 1, 3, 3}, 6, 0.125f, 260.f))
                  .Const(Scalar(0.125f, {1}))
                  .Const(Scalar<int8_t>(127, {1})));
  return c;
}

// Per channel: axis 1 (cpu.quantizelinear.channels) with uint8 and int8 zero points, axis -1 of a
// rank-2 X (the same axis), a size above the grain; axis 2 and a uint16 output (reference only).
std::vector<OpCase> QuantizePerChannelCases() {
  std::vector<OpCase> c;
  c.push_back(OpCase("uint8 axis 1 [2,5,3,7] per-channel zp, ties, NaN", 13)
                  .In(WithSpecials(QuantInput({2, 5, 3, 7}, 11, 0.125f, 200.f)))
                  .Const(CaseFloats({0.125f, 0.0371f, 0.5f, 0.01f, 0.25f}, {5}))
                  .Const(Tensor::FromVector<uint8_t>({0, 17, 128, 200, 255}, {5})));
  c.push_back(OpCase("int8 axis -1 [3,5] rank 2", 13)
                  .In(QuantInput({3, 5}, 12, 0.0625f, 160.f))
                  .Const(CaseFloats({0.0625f, 0.02f, 0.25f, 0.0371f, 1.f}, {5}))
                  .Const(Tensor::FromVector<int8_t>({0, -128, 5, 127, -7}, {5}))
                  .Int("axis", -1));
  c.push_back(OpCase("int8 axis 1 [1,7,65,67] threaded", 19)
                  .In(QuantInput({1, 7, 65, 67}, 13, 0.03f, 150.f))
                  .Const(CaseFloats({0.03f, 0.015f, 0.0625f, 0.03f, 0.007f, 0.5f, 0.03f}, {7}))
                  .Const(Tensor::FromVector<int8_t>({0, 1, -1, 64, -64, 0, 3}, {7}))
                  .Int("axis", 1));
  c.push_back(OpCase("uint8 axis 2 [2,3,4,5] (reference)", 13)
                  .In(QuantInput({2, 3, 4, 5}, 14, 0.0625f, 200.f))
                  .Const(CaseFloats({0.0625f, 0.02f, 0.25f, 0.0371f}, {4}))
                  .Const(Tensor::FromVector<uint8_t>({0, 100, 128, 255}, {4}))
                  .Int("axis", 2));
  c.push_back(OpCase("uint8 blocked axis 1 block 2 [3,5] (reference)", 21)
                  .In(QuantInput({3, 5}, 16, 0.0625f, 200.f))
                  .Const(CaseTensor({3, 3}, 17, 0.01f, 0.2f))
                  .Const(CaseInts(DataType::kUInt8, {3, 3}, 18, 0, 255))
                  .Int("axis", 1)
                  .Int("block_size", 2));
  Tensor z16 = Tensor::Empty(DataType::kUInt16, {});
  z16.data<uint16_t>()[0] = 30000;
  c.push_back(OpCase("uint16 zp 30000 [3,1,7] (reference)", 13)
                  .In(QuantInput({3, 1, 7}, 15, 0.5f, 70000.f))
                  .Const(Scalar(0.5f))
                  .Const(z16));
  return c;
}

std::vector<OpCase> QuantizeCases() {
  std::vector<OpCase> c = QuantizePerTensorCases();
  for (OpCase& x : QuantizePerChannelCases()) c.push_back(std::move(x));
  return c;
}
KILN_REGISTER_OP_CASES("", "QuantizeLinear", &QuantizeCases);

// DequantizeLinear (cpu.dequantizelinear.loop per tensor): uint8 and int8 over their whole range,
// with and without zero points, scalar and [1] scales, a threaded size; per axis on the reference.
std::vector<OpCase> DequantizeCases() {
  std::vector<OpCase> c;
  c.push_back(OpCase("uint8 zp 117 [2,3,1,17]", 13)
                  .In(CaseInts(DataType::kUInt8, {2, 3, 1, 17}, 21, 0, 255))
                  .Const(Scalar(0.0371f))
                  .Const(Scalar<uint8_t>(117)));
  c.push_back(OpCase("int8 zp -3 [3,1,7], scale [1]", 13)
                  .In(CaseInts(DataType::kInt8, {3, 1, 7}, 22, -128, 127))
                  .Const(Scalar(0.5f, {1}))
                  .Const(Scalar<int8_t>(-3, {1})));
  c.push_back(OpCase("int8 no zero point, opset 10 [5,1,9]", 10)
                  .In(CaseInts(DataType::kInt8, {5, 1, 9}, 23, -128, 127))
                  .Const(Scalar(0.0625f)));
  c.push_back(OpCase("uint8 no zero point [1,1,1,33]", 19)
                  .In(CaseInts(DataType::kUInt8, {1, 1, 1, 33}, 24, 0, 255))
                  .Const(Scalar(0.02f)));
  c.push_back(OpCase("uint8 zp 128 [1,3,130,129] threaded", 13)
                  .In(CaseInts(DataType::kUInt8, {1, 3, 130, 129}, 25, 0, 255))
                  .Const(Scalar(0.013f))
                  .Const(Scalar<uint8_t>(128)));
  c.push_back(OpCase("int8 blocked axis 1 block 3 [2,4,3] (reference)", 21)
                  .In(CaseInts(DataType::kInt8, {2, 4, 3}, 27, -128, 127))
                  .Const(CaseTensor({2, 2, 3}, 28, 0.01f, 0.2f))
                  .Const(CaseInts(DataType::kInt8, {2, 2, 3}, 29, -5, 5))
                  .Int("axis", 1)
                  .Int("block_size", 3));
  c.push_back(OpCase("int8 axis 1 [2,5,3,7] (reference)", 13)
                  .In(CaseInts(DataType::kInt8, {2, 5, 3, 7}, 26, -128, 127))
                  .Const(CaseFloats({0.125f, 0.0371f, 0.5f, 0.01f, 0.25f}, {5}))
                  .Const(Tensor::FromVector<int8_t>({0, -128, 5, 127, -7}, {5})));
  return c;
}
KILN_REGISTER_OP_CASES("", "DequantizeLinear", &DequantizeCases);

// DynamicQuantizeLinear (cpu.dynamicquantizelinear.loop): mixed signs, only positive, only
// negative, all zeros (scale 0), and a NaN in an input of two threaded range chunks (32768).
std::vector<OpCase> DynamicQuantizeCases() {
  Tensor nan = CaseTensor({1, 3, 130, 129}, 35, -3.f, 5.f);
  nan.data<float>()[40000] = std::nanf("");
  return {
      OpCase("mixed [3,1,7]", 11).In(CaseTensor({3, 1, 7}, 31, -2.f, 3.f)).Outputs(3),
      OpCase("positive [2,16,9,11]", 11).In(CaseTensor({2, 16, 9, 11}, 32, 0.5f, 4.f)).Outputs(3),
      OpCase("negative [7,1,1]", 11).In(CaseTensor({7, 1, 1}, 33, -6.f, -0.1f)).Outputs(3),
      OpCase("zeros [5,1,3]", 11).In(CaseFloats(std::vector<float>(15, 0.f), {5, 1, 3})).Outputs(3),
      OpCase("NaN, two chunks [1,3,130,129]", 11).In(nan).Outputs(3)};
}
KILN_REGISTER_OP_CASES("", "DynamicQuantizeLinear", &DynamicQuantizeCases);

}  // namespace
}  // namespace kiln::ops
