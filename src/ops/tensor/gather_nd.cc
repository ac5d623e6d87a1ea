// GatherND (opset 11, 12 batch_dims, 13): data [r dims], indices [q dims] whose last dim k holds
// index tuples into data's dims b..b+k-1 (b = batch_dims; the first b dims of data and indices
// are shared batch dims). Output: indices.shape[:-1] + data.shape[b+k:], each index tuple copying
// one contiguous slice of prod(data.shape[b+k:]) elements (memcpy, any fixed-size dtype).
// Negative coordinates count from the end; one outside [-dim, dim) is a run-time InvalidArgument.
#include <cstring>

#include "ops/common.h"
#include "ops/op_cases.h"
#include "ops/tensor/indexing.h"
#include "ops/tensor/tensor_util.h"

namespace kiln::ops {
namespace {

struct GatherNDAttrs : ir::OpAttrs {
  int64_t batch_dims = 0;
};

class GatherNDOp final : public ir::Op {
 public:
  static StatusOr<std::unique_ptr<ir::Op>> Create(const ir::Node& node) {
    auto op = std::make_unique<GatherNDOp>(node);
    op->a_.batch_dims = node.GetInt("batch_dims", 0);
    if (op->a_.batch_dims < 0)
      return ir::AttrError(node,
                           "batch_dims must be >= 0; got " + std::to_string(op->a_.batch_dims));
    if (op->a_.batch_dims != 0 && node.opset < 12)
      return ir::AttrError(node,
                           "batch_dims needs opset >= 12; got opset " + std::to_string(node.opset));
    return std::unique_ptr<ir::Op>(std::move(op));
  }
  explicit GatherNDOp(const ir::Node& node) : Op(node) {}

  Status Infer(ir::InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ExpectFixedSize(ctx, 0));
    if (!ctx.has_input(1)) return ctx.Error("indices (input 1) are required; got none");
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(1, {DataType::kInt64, DataType::kInt32}));
    const Shape& data = ctx.shape(0);
    const Shape& ind = ctx.shape(1);
    const int64_t r = ctx.rank(0), q = ctx.rank(1), b = a_.batch_dims;
    if (r < 1 || q < 1)
      return ctx.Error("data and indices must have rank >= 1; got ranks " + std::to_string(r) +
                       " and " + std::to_string(q));
    if (b >= std::min(r, q))
      return ctx.Error("batch_dims must be < min(rank(data), rank(indices)) = " +
                       std::to_string(std::min(r, q)) + "; got " + std::to_string(b));
    for (int64_t d = 0; d < b; ++d)
      if (data[d] != ind[d])
        return ctx.Error("the first batch_dims dims of data and indices must match; got " +
                         ShapeToString(data) + " and " + ShapeToString(ind));
    const int64_t k = ind.back();
    if (k < 1 || k > r - b)
      return ctx.Error("indices.shape[-1] must be in [1, rank(data) - batch_dims] = [1, " +
                       std::to_string(r - b) + "]; got " + std::to_string(k));
    Shape out(ind.begin(), ind.end() - 1);
    out.insert(out.end(), data.begin() + b + k, data.end());
    ctx.SetOutput(0, ctx.dtype(0), out);
    return OkStatus();
  }

  Status Compute(const ir::ComputeContext& ctx) const override {
    const Tensor& data = ctx.in(0);
    const Shape& s = data.shape();
    const Shape& ind = ctx.in(1).shape();
    std::vector<int64_t> idx;
    KILN_ASSIGN_OR_RETURN(idx, RunInts(*this, ctx.in(1), "indices"));
    const int64_t b = a_.batch_dims, k = ind.back();
    const int64_t batches = NumElements(Shape(s.begin(), s.begin() + b));
    const int64_t per_batch = NumElements(Shape(ind.begin() + b, ind.end() - 1));
    const std::vector<int64_t> strides = Strides(s);
    const int64_t batch_stride = b == 0 ? 0 : strides[b - 1];
    const size_t esz = DataTypeSize(data.dtype());
    const size_t block = NumElements(Shape(s.begin() + b + k, s.end())) * esz;
    const auto* src = static_cast<const unsigned char*>(data.raw());
    auto* dst = static_cast<unsigned char*>(ctx.out(0).raw());
    for (int64_t n = 0; n < batches; ++n)
      for (int64_t t = 0; t < per_batch; ++t) {
        const int64_t* tuple = idx.data() + (n * per_batch + t) * k;
        int64_t at = n * batch_stride;
        for (int64_t j = 0; j < k; ++j) {
          int64_t i = tuple[j];
          if (!WrapIndex(i, s[b + j])) return RunError(IndexRule(s[b + j], b + j, tuple[j]));
          at += i * strides[b + j];
        }
        if (block > 0) std::memcpy(dst, src + at * esz, block);
        dst += block;
      }
    return OkStatus();
  }

  const ir::OpAttrs* attributes() const override { return &a_; }

 private:
  GatherNDAttrs a_;
};
KILN_REGISTER_OP("GatherND", 11, ir::kMaxOpset, &GatherNDOp::Create);

// Reference cases: element and slice gathers, negative coordinates, batch_dims 1 and 2, uint8.
std::vector<OpCase> GatherNDCases() {
  std::vector<OpCase> cases;
  cases.push_back(OpCase("slices: float32[3,4,2] indices [2,2]", 13)
                      .In(CaseTensor({3, 4, 2}, 31))
                      .In(Tensor::FromVector<int64_t>({2, -1, -3, 0}, {2, 2})));
  cases.push_back(OpCase("batch_dims 1: uint8[2,3,5] indices [2,4,1]", 13)
                      .Int("batch_dims", 1)
                      .In(CaseInts(DataType::kUInt8, {2, 3, 5}, 32, 0, 255))
                      .In(Tensor::FromVector<int64_t>({0, 2, -1, 1, 1, 1, -3, 2}, {2, 4, 1})));
  cases.push_back(OpCase("batch_dims 2: float32[2,2,3] indices [2,2,1]", 12)
                      .Int("batch_dims", 2)
                      .In(CaseTensor({2, 2, 3}, 33))
                      .In(Tensor::FromVector<int64_t>({2, 0, -1, 1}, {2, 2, 1})));
  return cases;
}
KILN_REGISTER_OP_CASES("", "GatherND", &GatherNDCases);

}  // namespace
}  // namespace kiln::ops
