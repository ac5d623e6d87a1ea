// ReverseSequence (opset 10): input [any fixed-size dtype, rank >= 2], sequence_lens int64
// [batch]. batch_axis and time_axis are 0 and 1 (either way round; default time 0, batch 1).
// For batch entry b the first sequence_lens[b] steps along the time axis are reversed and the
// rest copied; each length must be in [0, time steps] (checked when the node runs).
#include <cstring>
#include <memory>

#include "ops/common.h"
#include "ops/op_cases.h"
#include "ops/tensor/tensor_util.h"

namespace kiln::ops {
namespace {

struct ReverseSequenceAttrs : ir::OpAttrs {
  int64_t batch_axis = 1, time_axis = 0;
};

class ReverseSequenceOp final : public ir::Op {
 public:
  static StatusOr<std::unique_ptr<ir::Op>> Create(const ir::Node& node) {
    std::unique_ptr<ReverseSequenceOp> op(new ReverseSequenceOp(node));
    op->a_.batch_axis = node.GetInt("batch_axis", 1);
    op->a_.time_axis = node.GetInt("time_axis", 0);
    const int64_t b = op->a_.batch_axis, t = op->a_.time_axis;
    if (!((b == 0 && t == 1) || (b == 1 && t == 0)))
      return ir::AttrError(node, "batch_axis and time_axis must be 0 and 1 in some order; got " +
                                     std::to_string(b) + " and " + std::to_string(t));
    return std::unique_ptr<ir::Op>(std::move(op));
  }

  Status Infer(ir::InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ExpectFixedSize(ctx, 0));
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(1, {DataType::kInt64}));
    if (ctx.rank(0) < 2)
      return ctx.Error("input must have rank >= 2; got shape " + ShapeToString(ctx.shape(0)));
    const int64_t batch = ctx.shape(0)[a_.batch_axis];
    if (ctx.shape(1) != Shape{batch})
      return ctx.Error("sequence_lens must be [" + std::to_string(batch) +
                       "] (the batch axis); got " + ShapeToString(ctx.shape(1)));
    ctx.SetOutput(0, ctx.dtype(0), ctx.shape(0));
    return OkStatus();
  }

  Status Compute(const ir::ComputeContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    const Shape& s = x.shape();
    const int64_t batch = s[a_.batch_axis], steps = s[a_.time_axis];
    const int64_t inner = NumElements(Shape(s.begin() + 2, s.end()));
    const size_t row = static_cast<size_t>(inner) * DataTypeSize(x.dtype());
    const int64_t* lens = ctx.in(1).data<int64_t>();
    for (int64_t b = 0; b < batch; ++b)
      if (lens[b] < 0 || lens[b] > steps)
        return RunError("sequence_lens must be in [0, " + std::to_string(steps) + "]; got " +
                        std::to_string(lens[b]) + " for batch entry " + std::to_string(b));
    // Element (b, t) as a row of `inner` elements.
    auto at = [&](int64_t b, int64_t t) {
      return static_cast<size_t>(a_.time_axis == 0 ? t * batch + b : b * steps + t) * row;
    };
    const auto* src = static_cast<const unsigned char*>(x.raw());
    auto* dst = static_cast<unsigned char*>(ctx.out(0).raw());
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t t = 0; t < steps; ++t)
        std::memcpy(dst + at(b, t), src + at(b, t < lens[b] ? lens[b] - 1 - t : t), row);
    return OkStatus();
  }

  const ir::OpAttrs* attributes() const override { return &a_; }

 private:
  explicit ReverseSequenceOp(const ir::Node& node) : Op(node) {}
  ReverseSequenceAttrs a_;
};
KILN_REGISTER_OP("ReverseSequence", 10, ir::kMaxOpset, &ReverseSequenceOp::Create);

// Cases: both axis orders, lengths 0, 1, partial and full, trailing dims, int64 data.
std::vector<OpCase> ReverseSequenceCases() {
  std::vector<OpCase> cases;
  cases.push_back(OpCase("time-major [5,4,3]", 10)
                      .In(CaseTensor({5, 4, 3}, 1))
                      .In(CaseInt64s({5, 0, 1, 3}))
                      .Int("batch_axis", 1)
                      .Int("time_axis", 0));
  cases.push_back(OpCase("batch-major [3,6]", 10)
                      .In(CaseTensor({3, 6}, 2))
                      .In(CaseInt64s({2, 6, 4}))
                      .Int("batch_axis", 0)
                      .Int("time_axis", 1));
  cases.push_back(OpCase("int64 default axes [4,1,2]", 10)
                      .In(CaseInts(DataType::kInt64, {4, 1, 2}, 3, -50, 50))
                      .In(CaseInt64s({3})));
  return cases;
}
KILN_REGISTER_OP_CASES("", "ReverseSequence", &ReverseSequenceCases);

}  // namespace
}  // namespace kiln::ops
