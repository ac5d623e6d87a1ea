// Gather: out = data indexed along `axis` by int32/int64 `indices` (negative indices count from
// the end); out shape = data[:axis] + indices.shape + data[axis+1:]. The kernel copies one
// contiguous block of prod(data[axis+1:]) elements per (outer row, index) with memcpy, so any
// fixed-size dtype works. An index outside [-dim, dim) is an InvalidArgument error at run time
// (at inference when the indices are known).
#include <cstring>

#include "ops/attrs.h"
#include "ops/common.h"
#include "ops/tensor/tensor_util.h"

namespace kiln::ops {
namespace {

using ir::ComputeContext;
using ir::InferContext;
using ir::Node;
using ir::Op;

class GatherOp : public Op {
 public:
  const ir::OpAttrs* attributes() const override { return &a_; }
  explicit GatherOp(const Node& node) : Op(node) { a_.axis = node.GetInt("axis", 0); }
  Status Infer(InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ExpectFixedSize(ctx, 0));
    if (!ctx.has_input(1)) return ctx.Error("indices (input 1) are required; got none");
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(1, {DataType::kInt64, DataType::kInt32}));
    const int64_t r = ctx.rank(0);
    if (r == 0) return ctx.Error("data must have rank >= 1; got a scalar");
    if (a_.axis < -r || a_.axis >= r)
      return ctx.Error("axis must be in [" + std::to_string(-r) + ", " + std::to_string(r) +
                       "); got " + std::to_string(a_.axis));
    const int64_t axis = a_.axis < 0 ? a_.axis + r : a_.axis;
    const Shape& data = ctx.shape(0);
    Shape out(data.begin(), data.begin() + axis);
    out.insert(out.end(), ctx.shape(1).begin(), ctx.shape(1).end());
    out.insert(out.end(), data.begin() + axis + 1, data.end());
    if (ctx.value(1) != nullptr) {
      const int64_t dim = data[axis];
      for (int64_t i : ReadInts(*ctx.value(1)))
        if (i < -dim || i >= dim)
          return ctx.Error("indices must be in [" + std::to_string(-dim) + ", " +
                           std::to_string(dim) + ") for axis " + std::to_string(axis) + "; got " +
                           std::to_string(i));
    }
    ctx.SetOutput(0, ctx.dtype(0), out);
    return OkStatus();
  }
  Status Compute(const ComputeContext& ctx) const override {
    const Tensor& data = ctx.in(0);
    const Tensor& indices = ctx.in(1);
    const int64_t axis = a_.axis < 0 ? a_.axis + data.rank() : a_.axis;
    const Shape& s = data.shape();
    const size_t esz = DataTypeSize(data.dtype());
    int64_t outer = 1, block = static_cast<int64_t>(esz);
    for (int64_t d = 0; d < data.rank(); ++d) {
      if (d < axis) outer *= s[d];
      if (d > axis) block *= s[d];
    }
    const int64_t dim = s[axis];
    const int64_t n = indices.numel();
    std::vector<int64_t> idx;
    KILN_ASSIGN_OR_RETURN(idx, RunInts(*this, indices, "indices"));
    for (int64_t& i : idx) {
      if (i < -dim || i >= dim)
        return RunError("indices must be in [" + std::to_string(-dim) + ", " + std::to_string(dim) +
                        ") for axis " + std::to_string(axis) + "; got " + std::to_string(i));
      if (i < 0) i += dim;
    }
    if (block == 0) return OkStatus();
    const auto* src = static_cast<const unsigned char*>(data.raw());
    auto* dst = static_cast<unsigned char*>(ctx.out(0).raw());
    for (int64_t o = 0; o < outer; ++o) {
      const unsigned char* row = src + o * dim * block;
      for (int64_t j = 0; j < n; ++j) {
        std::memcpy(dst, row + idx[j] * block, block);
        dst += block;
      }
    }
    return OkStatus();
  }

 private:
  AxisAttrs a_;
};
KILN_REGISTER_OP("Gather", 1, ir::kMaxOpset, &ir::MakeOp<GatherOp>);

}  // namespace
}  // namespace kiln::ops
