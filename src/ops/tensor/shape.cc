// Shape and Size: their outputs follow from the input's shape alone, so Infer produces the value
// (ctx.SetOutputValue) and shape sub-graphs fold at prepare time; Compute writes the same numbers.
// Shape-15+ takes optional start/end attributes: negative values add the rank, then both clamp
// to [0, rank]; start >= end gives an empty result.
#include <cstring>

#include "ops/common.h"
#include "ops/tensor/tensor_util.h"

namespace kiln::ops {
namespace {

using ir::ComputeContext;
using ir::InferContext;
using ir::Node;
using ir::Op;

class ShapeOp : public Op {
 public:
  explicit ShapeOp(const Node& node)
      : Op(node),
        start_(node.GetInt("start", 0)),
        end_(node.GetInt("end", INT64_MAX)),
        has_end_(node.HasAttr("end")) {}
  Status Infer(InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ExpectFixedSize(ctx, 0));
    ctx.SetOutputValue(0, Value(ctx.shape(0)));
    return OkStatus();
  }
  Status Compute(const ComputeContext& ctx) const override {
    const Tensor v = Value(ctx.in(0).shape());
    Tensor& out = ctx.out(0);
    if (out.numel() != v.numel() || out.dtype() != DataType::kInt64)
      return RunError("output was allocated as " + std::string(DataTypeName(out.dtype())) +
                      ShapeToString(out.shape()) + "; expected int64" + ShapeToString(v.shape()));
    if (v.bytes()) std::memcpy(out.raw(), v.raw(), v.bytes());
    return OkStatus();
  }

 private:
  Tensor Value(const Shape& s) const {
    const auto r = static_cast<int64_t>(s.size());
    int64_t start = 0, end = r;
    if (opset() >= 15) {
      auto clamp = [r](int64_t v) {
        if (v < 0) v += r;
        return v < 0 ? 0 : (v > r ? r : v);
      };
      start = clamp(start_);
      end = has_end_ ? clamp(end_) : r;
    }
    std::vector<int64_t> dims;
    for (int64_t d = start; d < end; ++d) dims.push_back(s[d]);
    const auto n = static_cast<int64_t>(dims.size());
    return Tensor::FromVector(dims, {n});
  }
  int64_t start_, end_;
  bool has_end_;
};
KILN_REGISTER_OP("Shape", 1, ir::kMaxOpset, &ir::MakeOp<ShapeOp>);

class SizeOp : public Op {
 public:
  explicit SizeOp(const Node& node) : Op(node) {}
  Status Infer(InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ExpectFixedSize(ctx, 0));
    ctx.SetOutputValue(0, Tensor::FromVector<int64_t>({NumElements(ctx.shape(0))}, {}));
    return OkStatus();
  }
  Status Compute(const ComputeContext& ctx) const override {
    if (ctx.out(0).dtype() != DataType::kInt64 || ctx.out(0).numel() != 1)
      return RunError("output must be an int64 scalar; got " +
                      std::string(DataTypeName(ctx.out(0).dtype())) +
                      ShapeToString(ctx.out(0).shape()));
    ctx.out(0).data<int64_t>()[0] = ctx.in(0).numel();
    return OkStatus();
  }
};
KILN_REGISTER_OP("Size", 1, ir::kMaxOpset, &ir::MakeOp<SizeOp>);

}  // namespace
}  // namespace kiln::ops
