// ScatterElements (opset 11, 13, 16 reduction add/mul, 18 max/min) and the deprecated Scatter
// (opset 9-10, the same op without reduction): out = copy of data, then for every element of
// indices, out[i_0..idx..i_{r-1}] = reduction(out[...], updates[i_0..i_{r-1}]) with idx replacing
// the coordinate on `axis` (negative indices count from the end). Updates apply in row-major order
// of indices, so with reduction none the last duplicate wins. An index outside [-dim, dim) is a
// run-time InvalidArgument.
#include <cstring>

#include "ops/common.h"
#include "ops/op_cases.h"
#include "ops/tensor/indexing.h"
#include "ops/tensor/tensor_util.h"

namespace kiln::ops {
namespace {

class ScatterElementsOp final : public ir::Op {
 public:
  static StatusOr<std::unique_ptr<ir::Op>> Create(const ir::Node& node) {
    auto op = std::make_unique<ScatterElementsOp>(node);
    op->a_.axis = node.GetInt("axis", 0);
    KILN_ASSIGN_OR_RETURN(op->a_.reduction, ParseScatterReduction(node));
    return std::unique_ptr<ir::Op>(std::move(op));
  }
  explicit ScatterElementsOp(const ir::Node& node) : Op(node) {}

  Status Infer(ir::InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckScatterInputs(ctx));
    KILN_RETURN_IF_ERROR(CheckElementsIndices(ctx, a_.axis));
    if (ctx.shape(2) != ctx.shape(1))
      return ctx.Error("updates must have indices' shape " + ShapeToString(ctx.shape(1)) +
                       "; got " + ShapeToString(ctx.shape(2)));
    ctx.SetOutput(0, ctx.dtype(0), ctx.shape(0));
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
    const int64_t axis = a_.axis < 0 ? a_.axis + data.rank() : a_.axis;
    std::vector<int64_t> idx;
    KILN_ASSIGN_OR_RETURN(idx, RunInts(*this, ctx.in(1), "indices"));
    const Shape& ishape = ctx.in(1).shape();
    T* out = ctx.out(0).data<T>();
    if (data.numel() > 0) std::memcpy(out, data.raw(), data.numel() * sizeof(T));
    if (idx.empty()) return OkStatus();
    const T* updates = ctx.in(2).data<T>();
    const std::vector<int64_t> strides = Strides(data.shape());
    const int64_t dim = data.shape()[axis];
    std::vector<int64_t> pos(ishape.size(), 0);
    for (size_t n = 0; n < idx.size(); ++n, NextIndex(pos, ishape)) {
      int64_t i = idx[n];
      if (!WrapIndex(i, dim)) return RunError(IndexRule(dim, axis, idx[n]));
      int64_t at = 0;
      for (size_t d = 0; d < pos.size(); ++d)
        at += (static_cast<int64_t>(d) == axis ? i : pos[d]) * strides[d];
      ApplyScatter<T>(a_.reduction, out[at], updates[n]);
    }
    return OkStatus();
  }

  ScatterAttrs a_;
};
KILN_REGISTER_OP("Scatter", 9, 10, &ScatterElementsOp::Create);
KILN_REGISTER_OP("ScatterElements", 11, ir::kMaxOpset, &ScatterElementsOp::Create);

// Reference cases: every reduction with duplicate and negative indices, Scatter-10, int8 data.
std::vector<OpCase> ScatterElementsCases() {
  std::vector<OpCase> cases;
  uint32_t seed = 11;
  for (const char* r : {"none", "add", "mul", "max", "min"}) {
    cases.push_back(OpCase(std::string("reduction ") + r + ": float32[3,4] axis 1", 18)
                        .Int("axis", 1)
                        .Str("reduction", r)
                        .In(CaseTensor({3, 4}, seed))
                        .In(Tensor::FromVector<int64_t>({0, -1, 0, 3, 2, -4}, {3, 2}))
                        .In(CaseTensor({3, 2}, seed + 1)));
    seed += 2;
  }
  cases.push_back(OpCase("int8[2,3] axis -2 add", 16)
                      .Int("axis", -2)
                      .Str("reduction", "add")
                      .In(CaseInts(DataType::kInt8, {2, 3}, seed, -100, 100))
                      .In(Tensor::FromVector<int32_t>({1, -2, 1}, {1, 3}))
                      .In(CaseInts(DataType::kInt8, {1, 3}, seed + 1, -100, 100)));
  return cases;
}
KILN_REGISTER_OP_CASES("", "ScatterElements", &ScatterElementsCases);

}  // namespace
}  // namespace kiln::ops
