// Ops that create tensors from attributes or from shape-like inputs: Constant, ConstantOfShape,
// Range. Constant's value is built once in the factory and given to inference with
// ctx.SetOutputValue, so consumers see it at prepare time; Compute copies it.
// Constant attributes: value (tensor, decoded by the loader), value_float(s) and value_int(s)
// (opset 12+); sparse_value and string values are not supported.
// ConstantOfShape fills the shape given by its int64 input with the one-element `value` tensor
// (default float32 0). Range: n = max(ceil((limit - start) / delta), 0) elements
// start + i * delta (numpy.arange), for float32/float64/int16/int32/int64; the count is exact in
// integer arithmetic for integer types.
#include <cmath>
#include <cstring>

#include "ops/common.h"
#include "ops/tensor/tensor_util.h"

namespace kiln::ops {
namespace {

using ir::ComputeContext;
using ir::InferContext;
using ir::Node;
using ir::Op;

class ConstantOp : public Op {
 public:
  static StatusOr<std::unique_ptr<Op>> Create(const Node& node) {
    int count = 0;
    for (const char* name : {"value", "value_float", "value_floats", "value_int", "value_ints",
                             "sparse_value", "value_string", "value_strings"})
      count += node.HasAttr(name) ? 1 : 0;
    if (count != 1)
      return ir::AttrError(
          node, "Constant needs exactly one value attribute; got " + std::to_string(count));
    Tensor v;
    if (node.HasAttr("value")) {
      const Tensor* t = node.GetTensor("value");
      if (t == nullptr || !t->defined() || DataTypeSize(t->dtype()) == 0)
        return Unsupported("failed to load " + node.Describe() +
                           ": `value` must be a tensor of a fixed-size type; got " +
                           (t == nullptr ? std::string("a non-tensor attribute")
                                         : std::string(DataTypeName(t->dtype()))));
      v = *t;
    } else if (node.HasAttr("value_float")) {
      v = Tensor::FromVector<float>({node.GetFloat("value_float", 0.f)}, {});
    } else if (node.HasAttr("value_floats")) {
      const auto f = node.GetFloats("value_floats");
      v = Tensor::FromVector<float>(f, {static_cast<int64_t>(f.size())});
    } else if (node.HasAttr("value_int")) {
      v = Tensor::FromVector<int64_t>({node.GetInt("value_int", 0)}, {});
    } else if (node.HasAttr("value_ints")) {
      const auto i = node.GetInts("value_ints");
      v = Tensor::FromVector<int64_t>(i, {static_cast<int64_t>(i.size())});
    } else {
      return Unsupported("failed to load " + node.Describe() +
                         ": sparse and string constants are not supported; got " +
                         (node.HasAttr("sparse_value") ? "sparse_value" : "a string value"));
    }
    return std::unique_ptr<Op>(new ConstantOp(node, std::move(v)));
  }
  Status Infer(InferContext& ctx) const override {
    ctx.SetOutputValue(0, value_);
    return OkStatus();
  }
  Status Compute(const ComputeContext& ctx) const override {
    Tensor& out = ctx.out(0);
    if (out.dtype() != value_.dtype() || out.shape() != value_.shape())
      return RunError("output was allocated as " + std::string(DataTypeName(out.dtype())) +
                      ShapeToString(out.shape()) + "; expected " + DataTypeName(value_.dtype()) +
                      ShapeToString(value_.shape()));
    if (out.raw() != value_.raw() && value_.bytes())
      std::memcpy(out.raw(), value_.raw(), value_.bytes());
    return OkStatus();
  }

 private:
  ConstantOp(const Node& node, Tensor v) : Op(node), value_(std::move(v)) {}
  Tensor value_;
};
KILN_REGISTER_OP("Constant", 1, ir::kMaxOpset, &ConstantOp::Create);

class ConstantOfShapeOp : public Op {
 public:
  static StatusOr<std::unique_ptr<Op>> Create(const Node& node) {
    Tensor v = Tensor::FromVector<float>({0.f}, {1});
    if (node.HasAttr("value")) {
      const Tensor* t = node.GetTensor("value");
      if (t == nullptr || t->numel() != 1 || DataTypeSize(t->dtype()) == 0)
        return ir::AttrError(
            node,
            "`value` must be a one-element tensor of a fixed-size type; got " +
                (t == nullptr ? std::string("a non-tensor attribute")
                              : std::string(DataTypeName(t->dtype())) + ShapeToString(t->shape())));
      v = *t;
    }
    return std::unique_ptr<Op>(new ConstantOfShapeOp(node, std::move(v)));
  }
  std::vector<int> ShapeInputs() const override { return {0}; }
  Status Infer(InferContext& ctx) const override {
    std::vector<int64_t> shape;
    KILN_ASSIGN_OR_RETURN(shape, KnownInts(ctx, 0, "ConstantOfShape's input"));
    if (ctx.rank(0) > 1)
      return ctx.Error("the shape input must be 1-D; got rank " + std::to_string(ctx.rank(0)));
    for (int64_t d : shape)
      if (d < 0) return ctx.Error("shape dims must be >= 0; got " + IntsToString(shape));
    ctx.SetOutput(0, value_.dtype(), shape);
    return OkStatus();
  }
  Status Compute(const ComputeContext& ctx) const override {
    Tensor& out = ctx.out(0);
    if (out.dtype() != value_.dtype())
      return RunError(std::string("output was allocated as ") + DataTypeName(out.dtype()) +
                      "; expected " + DataTypeName(value_.dtype()));
    FillBytes(out.raw(), out.numel(), value_.raw(), DataTypeSize(value_.dtype()));
    return OkStatus();
  }

 private:
  ConstantOfShapeOp(const Node& node, Tensor v) : Op(node), value_(std::move(v)) {}
  Tensor value_;
};
KILN_REGISTER_OP("ConstantOfShape", 9, ir::kMaxOpset, &ConstantOfShapeOp::Create);

template <typename T>
int64_t RangeCount(T start, T limit, T delta) {
  if constexpr (std::is_integral_v<T>) {
    const auto s = static_cast<int64_t>(start), l = static_cast<int64_t>(limit),
               d = static_cast<int64_t>(delta);
    if (d > 0) return l > s ? (l - s - 1) / d + 1 : 0;
    return s > l ? (s - l - 1) / -d + 1 : 0;
  } else {
    const double n = std::ceil((static_cast<double>(limit) - static_cast<double>(start)) /
                               static_cast<double>(delta));
    return n > 0 ? static_cast<int64_t>(n) : 0;
  }
}

// Calls f(T{}) for Range's dtypes; false for others.
template <typename F>
bool DispatchRange(DataType t, F&& f) {
  switch (t) {
    case DataType::kFloat:
      f(float{});
      return true;
    case DataType::kDouble:
      f(double{});
      return true;
    case DataType::kInt16:
      f(int16_t{});
      return true;
    case DataType::kInt32:
      f(int32_t{});
      return true;
    case DataType::kInt64:
      f(int64_t{});
      return true;
    default:
      return false;
  }
}

class RangeOp : public Op {
 public:
  explicit RangeOp(const Node& node) : Op(node) {}
  std::vector<int> ShapeInputs() const override { return {0, 1, 2}; }
  Status Infer(InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(0, {DataType::kFloat, DataType::kDouble, DataType::kInt16,
                                             DataType::kInt32, DataType::kInt64}));
    for (size_t i = 0; i < 3; ++i) {
      if (!ctx.has_input(i)) return ctx.Error("start, limit and delta are all required");
      if (ctx.dtype(i) != ctx.dtype(0))
        return ctx.Error("start, limit and delta must share a dtype; got " +
                         std::string(DataTypeName(ctx.dtype(i))) + " at input " +
                         std::to_string(i));
      if (NumElements(ctx.shape(i)) != 1)
        return ctx.Error("start, limit and delta must be scalars; got shape " +
                         ShapeToString(ctx.shape(i)) + " at input " + std::to_string(i));
      if (ctx.value(i) == nullptr)
        return ctx.Error("input " + std::to_string(i) + " must be known before the node runs");
    }
    int64_t n = 0;
    bool zero_delta = false;
    DispatchRange(ctx.dtype(0), [&](auto tag) {
      using T = decltype(tag);
      const T delta = ctx.value(2)->data<T>()[0];
      zero_delta = delta == T(0);
      if (!zero_delta)
        n = RangeCount(ctx.value(0)->data<T>()[0], ctx.value(1)->data<T>()[0], delta);
    });
    if (zero_delta) return ctx.Error("delta must be non-zero; got 0");
    ctx.SetOutput(0, ctx.dtype(0), {n});
    return OkStatus();
  }
  Status Compute(const ComputeContext& ctx) const override {
    Tensor& out = ctx.out(0);
    const bool done = DispatchRange(out.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T start = ctx.in(0).data<T>()[0], delta = ctx.in(2).data<T>()[0];
      T* dst = out.data<T>();
      for (int64_t i = 0, n = out.numel(); i < n; ++i)
        dst[i] = static_cast<T>(start + static_cast<T>(i) * delta);
    });
    if (!done) return RunError(std::string("unsupported dtype ") + DataTypeName(out.dtype()));
    return OkStatus();
  }
};
KILN_REGISTER_OP("Range", 11, ir::kMaxOpset, &ir::MakeOp<RangeOp>);

}  // namespace
}  // namespace kiln::ops
