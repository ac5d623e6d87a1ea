// OneHot (opset 9, 11): indices [any numeric dtype, shape S], depth (numeric scalar or 1-element,
// must be known: it sets the output shape), values [off, on]. The output inserts a dim of size
// depth at `axis` (in [-r-1, r], r = rank(S)) and holds `on` where the coordinate on that dim
// equals the index, `off` elsewhere, in values' dtype (any fixed-size dtype, copied as bytes).
// Indices are truncated to integers; negative ones count from the end (opset 11; accepted for 9
// too) and ones outside [-depth, depth) give a row of all `off`, as ONNX specifies.
#include <cstring>

#include "ops/common.h"
#include "ops/op_cases.h"
#include "ops/tensor/tensor_util.h"

namespace kiln::ops {
namespace {

struct OneHotAttrs : ir::OpAttrs {
  int64_t axis = -1;  // as written; Infer checks it against the output's rank
};

class OneHotOp final : public ir::Op {
 public:
  explicit OneHotOp(const ir::Node& node) : Op(node) { a_.axis = node.GetInt("axis", -1); }

  std::vector<int> ShapeInputs() const override { return {1}; }

  Status Infer(ir::InferContext& ctx) const override {
    for (size_t i : {0, 1}) KILN_RETURN_IF_ERROR(ExpectNumeric(ctx, i));
    KILN_RETURN_IF_ERROR(ExpectFixedSize(ctx, 2));
    if (NumElements(ctx.shape(2)) != 2 || ctx.rank(2) != 1)
      return ctx.Error("values must be a 1-D tensor [off, on] of 2 elements; got shape " +
                       ShapeToString(ctx.shape(2)));
    if (NumElements(ctx.shape(1)) != 1 || ctx.rank(1) > 1)
      return ctx.Error("depth must be a scalar or a 1-element 1-D tensor; got shape " +
                       ShapeToString(ctx.shape(1)));
    if (ctx.value(1) == nullptr)
      return ctx.Error("depth (input 1) must be known before the node runs; got an unknown value");
    const int64_t depth = TruncToInt64(ReadScalarAsDouble(*ctx.value(1), 0));
    if (depth < 0) return ctx.Error("depth must be >= 0; got " + std::to_string(depth));
    const int64_t r = ctx.rank(0);
    if (a_.axis < -r - 1 || a_.axis > r)
      return ctx.Error("axis must be in [" + std::to_string(-r - 1) + ", " + std::to_string(r) +
                       "]; got " + std::to_string(a_.axis));
    const int64_t axis = a_.axis < 0 ? a_.axis + r + 1 : a_.axis;
    Shape out = ctx.shape(0);
    out.insert(out.begin() + axis, depth);
    ctx.SetOutput(0, ctx.dtype(2), out);
    return OkStatus();
  }

  Status Compute(const ir::ComputeContext& ctx) const override {
    const Tensor& ind = ctx.in(0);
    const Shape& out_shape = ctx.out(0).shape();
    const int64_t axis = a_.axis < 0 ? a_.axis + ind.rank() + 1 : a_.axis;
    const int64_t depth = out_shape[axis];
    const int64_t outer = NumElements(Shape(out_shape.begin(), out_shape.begin() + axis));
    const int64_t inner = NumElements(Shape(out_shape.begin() + axis + 1, out_shape.end()));
    const size_t esz = DataTypeSize(ctx.in(2).dtype());
    const auto* off = static_cast<const unsigned char*>(ctx.in(2).raw());
    const unsigned char* on = off + esz;
    auto* dst = static_cast<unsigned char*>(ctx.out(0).raw());
    FillBytes(dst, ctx.out(0).numel(), off, esz);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        int64_t k = TruncToInt64(ReadScalarAsDouble(ind, o * inner + i));
        if (k < -depth || k >= depth) continue;
        if (k < 0) k += depth;
        std::memcpy(dst + ((o * depth + k) * inner + i) * esz, on, esz);
      }
    return OkStatus();
  }

  const ir::OpAttrs* attributes() const override { return &a_; }

 private:
  OneHotAttrs a_;
};
KILN_REGISTER_OP("OneHot", 9, ir::kMaxOpset, &ir::MakeOp<OneHotOp>);

// Reference cases: every axis, negative and out-of-range indices, float indices, int64 values.
std::vector<OpCase> OneHotCases() {
  std::vector<OpCase> cases;
  for (int64_t axis : {-1, 0, 1, -3})
    cases.push_back(OpCase("float32 values, indices int64[2,3], axis " + std::to_string(axis), 11)
                        .Int("axis", axis)
                        .In(Tensor::FromVector<int64_t>({0, 4, -1, -5, 5, 2}, {2, 3}))
                        .Const(Tensor::FromVector<int64_t>({5}, {}))
                        .In(CaseFloats({-0.5f, 2.f}, {2})));
  cases.push_back(OpCase("float32 indices [4], depth float32 [1], int64 values", 9)
                      .In(CaseFloats({1.7f, -1.2f, 3.f, 0.f}, {4}))
                      .Const(CaseFloats({3.f}, {1}))
                      .In(Tensor::FromVector<int64_t>({7, -9}, {2})));
  return cases;
}
KILN_REGISTER_OP_CASES("", "OneHot", &OneHotCases);

}  // namespace
}  // namespace kiln::ops
