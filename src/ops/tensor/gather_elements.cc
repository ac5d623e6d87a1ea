// GatherElements (opset 11, 13): out[i_0..i_{r-1}] = data[i_0..idx..i_{r-1}] with idx =
// indices[i_0..i_{r-1}] replacing the coordinate on `axis` (negative indices count from the end).
// data and indices have the same rank; indices' dims other than `axis` may not exceed data's; the
// output has indices' shape and data's dtype. The reference walks the output once, copying one
// element of any fixed-size dtype. An index outside [-dim, dim) is a run-time InvalidArgument.
#include <cstring>

#include "ops/common.h"
#include "ops/op_cases.h"
#include "ops/tensor/indexing.h"
#include "ops/tensor/tensor_util.h"

namespace kiln::ops {
namespace {

struct GatherElementsAttrs : ir::OpAttrs {
  int64_t axis = 0;  // as written; Infer checks it against data's rank
};

class GatherElementsOp final : public ir::Op {
 public:
  explicit GatherElementsOp(const ir::Node& node) : Op(node) { a_.axis = node.GetInt("axis", 0); }

  Status Infer(ir::InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ExpectFixedSize(ctx, 0));
    if (!ctx.has_input(1)) return ctx.Error("indices (input 1) are required; got none");
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(1, {DataType::kInt64, DataType::kInt32}));
    KILN_RETURN_IF_ERROR(CheckElementsIndices(ctx, a_.axis));
    ctx.SetOutput(0, ctx.dtype(0), ctx.shape(1));
    return OkStatus();
  }

  Status Compute(const ir::ComputeContext& ctx) const override {
    const Tensor& data = ctx.in(0);
    const int64_t axis = a_.axis < 0 ? a_.axis + data.rank() : a_.axis;
    std::vector<int64_t> idx;
    KILN_ASSIGN_OR_RETURN(idx, RunInts(*this, ctx.in(1), "indices"));
    const Shape& ishape = ctx.in(1).shape();
    if (idx.empty()) return OkStatus();
    const std::vector<int64_t> strides = Strides(data.shape());
    const int64_t dim = data.shape()[axis];
    const size_t esz = DataTypeSize(data.dtype());
    const auto* src = static_cast<const unsigned char*>(data.raw());
    auto* dst = static_cast<unsigned char*>(ctx.out(0).raw());
    std::vector<int64_t> pos(ishape.size(), 0);
    for (size_t n = 0; n < idx.size(); ++n, NextIndex(pos, ishape)) {
      int64_t i = idx[n];
      if (!WrapIndex(i, dim)) return RunError(IndexRule(dim, axis, idx[n]));
      int64_t at = 0;
      for (size_t d = 0; d < pos.size(); ++d)
        at += (static_cast<int64_t>(d) == axis ? i : pos[d]) * strides[d];
      std::memcpy(dst + n * esz, src + at * esz, esz);
    }
    return OkStatus();
  }

  const ir::OpAttrs* attributes() const override { return &a_; }

 private:
  GatherElementsAttrs a_;
};
KILN_REGISTER_OP("GatherElements", 11, ir::kMaxOpset, &ir::MakeOp<GatherElementsOp>);

}  // namespace
}  // namespace kiln::ops

namespace kiln::ops {
namespace {

// Reference cases (no fast kernel yet): every axis, negative and repeated indices, indices smaller
// than data off the axis, int32 indices, and byte-copied dtypes.
std::vector<OpCase> GatherElementsCases() {
  using D = DataType;
  std::vector<OpCase> cases;
  cases.push_back(OpCase("axis 1, negative: float32[2,3] indices [2,2]", 13)
                      .Int("axis", 1)
                      .In(CaseTensor({2, 3}, 1))
                      .In(Tensor::FromVector<int64_t>({0, -1, 2, 2}, {2, 2})));
  cases.push_back(OpCase("axis -3: int64[3,2,4] indices [2,1,3] int32", 13)
                      .Int("axis", -3)
                      .In(CaseInts(D::kInt64, {3, 2, 4}, 2, -50, 50))
                      .In(Tensor::FromVector<int32_t>({2, -3, 1, 0, 0, -1}, {2, 1, 3})));
  cases.push_back(OpCase("axis 2, uint8[2,2,5] indices [2,2,1]", 11)
                      .Int("axis", 2)
                      .In(CaseInts(D::kUInt8, {2, 2, 5}, 3, 0, 255))
                      .Const(Tensor::FromVector<int64_t>({4, -5, 3, 3}, {2, 2, 1})));
  cases.push_back(OpCase("empty indices: float32[3,4] indices [0,4]", 13)
                      .In(CaseTensor({3, 4}, 4))
                      .In(Tensor::FromVector<int64_t>({}, {0, 4})));
  return cases;
}
KILN_REGISTER_OP_CASES("", "GatherElements", &GatherElementsCases);

}  // namespace
}  // namespace kiln::ops
