// CenterCropPad (opset 18): input_data [any fixed-size dtype], shape (int32/int64, one entry per
// axis in `axes`, default every axis; must be known: it sets the output shape). Along each listed
// axis the output has the given size: a smaller size keeps the centered window (starting at
// floor((dim - size) / 2)), a larger one places the input centered (starting at
// floor((size - dim) / 2)) with zeros around it. Axes may be negative and must not repeat.
#include <algorithm>
#include <cstring>
#include <memory>

#include "ops/common.h"
#include "ops/op_cases.h"
#include "ops/tensor/tensor_util.h"

namespace kiln::ops {
namespace {

struct CenterCropPadAttrs : ir::OpAttrs {
  std::vector<int64_t> axes;  // as written; empty: every axis
};

class CenterCropPadOp final : public ir::Op {
 public:
  explicit CenterCropPadOp(const ir::Node& node) : Op(node) { a_.axes = node.GetInts("axes"); }

  std::vector<int> ShapeInputs() const override { return {1}; }

  Status Infer(ir::InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ExpectFixedSize(ctx, 0));
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> sizes, KnownInts(ctx, 1, "CenterCropPad's shape"));
    const int64_t r = ctx.rank(0);
    std::vector<int64_t> axes = a_.axes;
    if (axes.empty())
      for (int64_t d = 0; d < r; ++d) axes.push_back(d);
    if (sizes.size() != axes.size())
      return ctx.Error("shape must have one entry per axis (" + std::to_string(axes.size()) +
                       "); got " + IntsToString(sizes));
    Shape out = ctx.shape(0);
    std::vector<bool> seen(r, false);
    for (size_t i = 0; i < axes.size(); ++i) {
      if (axes[i] < -r || axes[i] >= r)
        return ctx.Error("axes must be in [" + std::to_string(-r) + ", " + std::to_string(r - 1) +
                         "]; got " + IntsToString(a_.axes));
      const int64_t a = axes[i] < 0 ? axes[i] + r : axes[i];
      if (seen[a]) return ctx.Error("axes must not repeat; got " + IntsToString(a_.axes));
      seen[a] = true;
      if (sizes[i] < 0) return ctx.Error("shape must be >= 0; got " + IntsToString(sizes));
      out[a] = sizes[i];
    }
    ctx.SetOutput(0, ctx.dtype(0), out);
    return OkStatus();
  }

  // Copies the overlap of input and output, each dim's start in each found from the sizes.
  Status Compute(const ir::ComputeContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    Tensor& y = ctx.out(0);
    const Shape& xs = x.shape();
    const Shape& ys = y.shape();
    const size_t r = xs.size(), esz = DataTypeSize(x.dtype());
    std::memset(y.raw(), 0, y.bytes());
    Shape overlap(r);
    int64_t x_off = 0, y_off = 0;
    const std::vector<int64_t> xst = Strides(xs), yst = Strides(ys);
    for (size_t d = 0; d < r; ++d) {
      overlap[d] = std::min(xs[d], ys[d]);
      x_off += (xs[d] > ys[d] ? (xs[d] - ys[d]) / 2 : 0) * xst[d];
      y_off += (ys[d] > xs[d] ? (ys[d] - xs[d]) / 2 : 0) * yst[d];
    }
    const int64_t n = NumElements(overlap);
    const auto* src = static_cast<const unsigned char*>(x.raw());
    auto* dst = static_cast<unsigned char*>(y.raw());
    std::vector<int64_t> idx(r, 0);
    for (int64_t i = 0; i < n; ++i) {
      int64_t xo = x_off, yo = y_off;
      for (size_t d = 0; d < r; ++d) {
        xo += idx[d] * xst[d];
        yo += idx[d] * yst[d];
      }
      std::memcpy(dst + yo * esz, src + xo * esz, esz);
      for (int64_t d = static_cast<int64_t>(r) - 1; d >= 0; --d) {
        if (++idx[d] < overlap[d]) break;
        idx[d] = 0;
      }
    }
    return OkStatus();
  }

  const ir::OpAttrs* attributes() const override { return &a_; }

 private:
  CenterCropPadAttrs a_;
};
KILN_REGISTER_OP("CenterCropPad", 18, ir::kMaxOpset, &ir::MakeOp<CenterCropPadOp>);

// Cases: crop and pad by even and odd amounts on one tensor, axes (negative too), a size-1 dim
// padded, int64 data.
std::vector<OpCase> CenterCropPadCases() {
  std::vector<OpCase> cases;
  cases.push_back(
      OpCase("[9,6,3] to [4,9,3]", 18).In(CaseTensor({9, 6, 3}, 1)).Const(CaseInt64s({4, 9, 3})));
  cases.push_back(OpCase("[3,7,8] axes [1,2] to [4,11]", 18)
                      .In(CaseTensor({3, 7, 8}, 2))
                      .Const(CaseInt64s({4, 11}))
                      .Ints("axes", {1, 2}));
  cases.push_back(OpCase("[5,1,4] axes [-2,-3] to [3,2]", 18)
                      .In(CaseTensor({5, 1, 4}, 3))
                      .Const(CaseInt64s({3, 2}))
                      .Ints("axes", {-2, -3}));
  cases.push_back(OpCase("int64 [4,5] to [7,2]", 18)
                      .In(CaseInts(DataType::kInt64, {4, 5}, 4, -100, 100))
                      .Const(CaseInt64s({7, 2})));
  return cases;
}
KILN_REGISTER_OP_CASES("", "CenterCropPad", &CenterCropPadCases);

}  // namespace
}  // namespace kiln::ops
