// ScatterND (opset 11, 13, 16 reduction add/mul, 18 max/min): out = copy of data [r dims]; indices
// [q dims] holds index tuples of k = indices.shape[-1] <= r coordinates, each selecting a slice
// data[i_0..i_{k-1}, ...] of prod(data.shape[k:]) elements that updates [indices.shape[:-1] +
// data.shape[k:]] combines into with `reduction`, tuples in row-major order (with reduction none
// the last duplicate wins). Negative coordinates count from the end; one outside [-dim, dim) is a
// run-time InvalidArgument.
#include <cstring>

#include "ops/common.h"
#include "ops/op_cases.h"
#include "ops/tensor/indexing.h"
#include "ops/tensor/tensor_util.h"

namespace kiln::ops {
namespace {

class ScatterNDOp final : public ir::Op {
 public:
  static StatusOr<std::unique_ptr<ir::Op>> Create(const ir::Node& node) {
    auto op = std::make_unique<ScatterNDOp>(node);
    KILN_ASSIGN_OR_RETURN(op->a_.reduction, ParseScatterReduction(node));
    return std::unique_ptr<ir::Op>(std::move(op));
  }
  explicit ScatterNDOp(const ir::Node& node) : Op(node) {}

  Status Infer(ir::InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckScatterInputs(ctx));
    const Shape& data = ctx.shape(0);
    const Shape& ind = ctx.shape(1);
    const int64_t r = ctx.rank(0);
    if (r == 0) return ctx.Error("data must have rank >= 1; got a scalar");
    if (ind.empty()) return ctx.Error("indices must have rank >= 1; got a scalar");
    const int64_t k = ind.back();
    if (k > r)
      return ctx.Error("indices.shape[-1] must be <= data's rank " + std::to_string(r) + "; got " +
                       std::to_string(k));
    Shape want(ind.begin(), ind.end() - 1);
    want.insert(want.end(), data.begin() + k, data.end());
    if (ctx.shape(2) != want)
      return ctx.Error("updates must have shape indices.shape[:-1] + data.shape[k:] = " +
                       ShapeToString(want) + "; got " + ShapeToString(ctx.shape(2)));
    ctx.SetOutput(0, ctx.dtype(0), data);
    return OkStatus();
  }

  Status Compute(const ir::ComputeContext& ctx) const override {
    KILN_DISPATCH_ALL(ctx.in(0).dtype(), describe(), return Run<T>(ctx));
    return OkStatus();
  }

  const ir::OpAttrs* attributes() const override { return &a_; }

 private:
  template <typename T>
  Status Run(const ir::ComputeContext& ctx) const {
    const Tensor& data = ctx.in(0);
    const Shape& s = data.shape();
    std::vector<int64_t> idx;
    KILN_ASSIGN_OR_RETURN(idx, RunInts(*this, ctx.in(1), "indices"));
    const int64_t k = ctx.in(1).shape().back();
    T* out = ctx.out(0).data<T>();
    if (data.numel() > 0) std::memcpy(out, data.raw(), data.numel() * sizeof(T));
    int64_t block = 1;
    for (size_t d = k; d < s.size(); ++d) block *= s[d];
    const Shape& ind = ctx.in(1).shape();
    const int64_t tuples = NumElements(Shape(ind.begin(), ind.end() - 1));
    const std::vector<int64_t> strides = Strides(s);
    const T* updates = ctx.in(2).data<T>();
    for (int64_t t = 0; t < tuples; ++t) {
      int64_t at = 0;
      for (int64_t j = 0; j < k; ++j) {
        int64_t i = idx[t * k + j];
        if (!WrapIndex(i, s[j])) return RunError(IndexRule(s[j], j, idx[t * k + j]));
        at += i * strides[j];
      }
      for (int64_t e = 0; e < block; ++e)
        ApplyScatter<T>(a_.reduction, out[at + e], updates[t * block + e]);
    }
    return OkStatus();
  }

  ScatterAttrs a_;
};
KILN_REGISTER_OP("ScatterND", 11, ir::kMaxOpset, &ScatterNDOp::Create);

// Reference cases: element and slice updates, negative coordinates, every reduction, int64 data.
std::vector<OpCase> ScatterNDCases() {
  std::vector<OpCase> cases;
  uint32_t seed = 21;
  for (const char* r : {"none", "add", "mul", "max", "min"}) {
    cases.push_back(OpCase(std::string("reduction ") + r + ": float32[4,3,2] slices", 18)
                        .Str("reduction", r)
                        .In(CaseTensor({4, 3, 2}, seed))
                        .In(Tensor::FromVector<int64_t>({1, -1, 1}, {3, 1}))
                        .In(CaseTensor({3, 3, 2}, seed + 1)));
    seed += 2;
  }
  cases.push_back(OpCase("elements: int64[2,5] indices [3,2]", 13)
                      .In(CaseInts(DataType::kInt64, {2, 5}, seed, -9, 9))
                      .In(Tensor::FromVector<int64_t>({0, 4, -1, -5, 1, 2}, {3, 2}))
                      .In(CaseInts(DataType::kInt64, {3}, seed + 1, -9, 9)));
  return cases;
}
KILN_REGISTER_OP_CASES("", "ScatterND", &ScatterNDCases);

}  // namespace
}  // namespace kiln::ops
