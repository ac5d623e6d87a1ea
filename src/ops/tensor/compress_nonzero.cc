// Compress (opsets 9, 11) and NonZero (9, 13): ops whose output length is the count of true or
// nonzero input values. Their shapes are inferred from those values (ShapeInputs), so the
// planner folds them when the values are constant and infers them at run time otherwise.
//
// Compress: input [any fixed-size dtype], condition [bool, 1-D]. With `axis` (in [-r, r - 1]),
// the slices along it whose condition entry is true; without, the true elements of the
// flattened input (1-D output). A condition shorter than the axis drops the slices past its end;
// a longer one is an error (as numpy).
// NonZero: X [any fixed-size dtype] gives int64 [rank, count], the index of every nonzero element
// in row-major order, one row per dim (a scalar counts as shape [1], as numpy's atleast_1d).
#include <algorithm>
#include <cstring>
#include <memory>

#include "ops/common.h"
#include "ops/op_cases.h"
#include "ops/tensor/tensor_util.h"

namespace kiln::ops {
namespace {

struct CompressAttrs : ir::OpAttrs {
  bool has_axis = false;
  int64_t axis = 0;  // as written; Infer checks it against the rank
};

int64_t CountTrue(const Tensor& t, int64_t n) {
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i) count += ReadScalarAsDouble(t, i) != 0 ? 1 : 0;
  return count;
}

class CompressOp final : public ir::Op {
 public:
  explicit CompressOp(const ir::Node& node) : Op(node) {
    a_.has_axis = node.HasAttr("axis");
    a_.axis = node.GetInt("axis", 0);
  }

  std::vector<int> ShapeInputs() const override { return {1}; }

  Status Infer(ir::InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ExpectFixedSize(ctx, 0));
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(1, {DataType::kBool}));
    if (ctx.rank(1) != 1)
      return ctx.Error("condition must be 1-D; got shape " + ShapeToString(ctx.shape(1)));
    const Tensor* cond = ctx.value(1);
    if (cond == nullptr) return ctx.Error("condition (input 1) must be known before the node runs");
    const int64_t r = ctx.rank(0);
    if (a_.has_axis && (a_.axis < -r || a_.axis >= r))
      return ctx.Error("axis must be in [" + std::to_string(-r) + ", " + std::to_string(r - 1) +
                       "]; got " + std::to_string(a_.axis));
    const int64_t axis = a_.axis < 0 ? a_.axis + r : a_.axis;
    const int64_t extent = a_.has_axis ? ctx.shape(0)[axis] : NumElements(ctx.shape(0));
    if (cond->numel() > extent)
      return ctx.Error("condition must not be longer than the " +
                       std::string(a_.has_axis ? "axis" : "flattened input") + " (" +
                       std::to_string(extent) + "); got " + std::to_string(cond->numel()));
    const int64_t kept = CountTrue(*cond, cond->numel());
    Shape out = {kept};
    if (a_.has_axis) {
      out = ctx.shape(0);
      out[axis] = kept;
    }
    ctx.SetOutput(0, ctx.dtype(0), out);
    return OkStatus();
  }

  // The input as [outer, extent, inner]; slices with a true condition are copied in order.
  Status Compute(const ir::ComputeContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    const Tensor& cond = ctx.in(1);
    const int64_t r = x.rank();
    const int64_t axis = a_.axis < 0 ? a_.axis + r : a_.axis;
    int64_t outer = 1, extent = x.numel(), inner = 1;
    if (a_.has_axis) {
      const Shape& s = x.shape();
      outer = NumElements(Shape(s.begin(), s.begin() + axis));
      extent = s[axis];
      inner = NumElements(Shape(s.begin() + axis + 1, s.end()));
    }
    const size_t row = static_cast<size_t>(inner) * DataTypeSize(x.dtype());
    const auto* src = static_cast<const unsigned char*>(x.raw());
    auto* dst = static_cast<unsigned char*>(ctx.out(0).raw());
    const int64_t n = std::min(cond.numel(), extent);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < n; ++i)
        if (ReadScalarAsDouble(cond, i) != 0) {
          std::memcpy(dst, src + (o * extent + i) * row, row);
          dst += row;
        }
    return OkStatus();
  }

  const ir::OpAttrs* attributes() const override { return &a_; }

 private:
  CompressAttrs a_;
};
KILN_REGISTER_OP("Compress", 9, ir::kMaxOpset, &ir::MakeOp<CompressOp>);

class NonZeroOp final : public ir::Op {
 public:
  explicit NonZeroOp(const ir::Node& node) : Op(node) {}

  std::vector<int> ShapeInputs() const override { return {0}; }

  Status Infer(ir::InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ExpectFixedSize(ctx, 0));
    const Tensor* x = ctx.value(0);
    if (x == nullptr) return ctx.Error("X (input 0) must be known before the node runs");
    const int64_t rank = std::max<int64_t>(ctx.rank(0), 1);
    ctx.SetOutput(0, DataType::kInt64, {rank, CountTrue(*x, x->numel())});
    return OkStatus();
  }

  Status Compute(const ir::ComputeContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    const Shape s = x.rank() == 0 ? Shape{1} : x.shape();
    const int64_t count = ctx.out(0).shape()[1];
    int64_t* y = ctx.out(0).data<int64_t>();
    std::vector<int64_t> idx(s.size(), 0);
    int64_t k = 0;
    for (int64_t i = 0; i < x.numel(); ++i) {
      if (ReadScalarAsDouble(x, i) != 0 && k < count) {
        for (size_t d = 0; d < s.size(); ++d) y[d * count + k] = idx[d];
        ++k;
      }
      for (int64_t d = static_cast<int64_t>(s.size()) - 1; d >= 0; --d) {
        if (++idx[d] < s[d]) break;
        idx[d] = 0;
      }
    }
    return OkStatus();
  }
};
KILN_REGISTER_OP("NonZero", 9, ir::kMaxOpset, &ir::MakeOp<NonZeroOp>);

// Cases: each axis, no axis, a short condition, a condition with no true entry, int64 data.
Tensor Bools(const std::vector<int>& v) {
  Tensor t = Tensor::Empty(DataType::kBool, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.data<bool>()[i] = v[i] != 0;
  return t;
}

std::vector<OpCase> CompressCases() {
  std::vector<OpCase> cases;
  cases.push_back(OpCase("[3,5,2] axis 1", 11)
                      .In(CaseTensor({3, 5, 2}, 1))
                      .In(Bools({1, 0, 1, 1, 0}))
                      .Int("axis", 1));
  cases.push_back(OpCase("[3,5,2] axis -3, short condition", 11)
                      .In(CaseTensor({3, 5, 2}, 2))
                      .In(Bools({0, 1}))
                      .Int("axis", -3));
  cases.push_back(OpCase("[2,3] no axis", 11).In(CaseTensor({2, 3}, 3)).In(Bools({1, 0, 0, 1, 1})));
  cases.push_back(OpCase("int64 [4,1] axis 1, nothing kept", 11)
                      .In(CaseInts(DataType::kInt64, {4, 1}, 4, -9, 9))
                      .In(Bools({0}))
                      .Int("axis", 1));
  return cases;
}
KILN_REGISTER_OP_CASES("", "Compress", &CompressCases);

std::vector<OpCase> NonZeroCases() {
  std::vector<OpCase> cases;
  cases.push_back(OpCase("int32 [3,1,4]", 13).In(CaseInts(DataType::kInt32, {3, 1, 4}, 5, -1, 1)));
  cases.push_back(OpCase("bool [5]", 13).In(Bools({1, 0, 0, 1, 1})));
  cases.push_back(OpCase("float32 [2,3] (no zero)", 13).In(CaseTensor({2, 3}, 6, 0.5f, 1.f)));
  cases.push_back(
      OpCase("uint8 [2,2,2] all zero", 13).In(CaseInts(DataType::kUInt8, {2, 2, 2}, 7, 0, 0)));
  return cases;
}
KILN_REGISTER_OP_CASES("", "NonZero", &NonZeroCases);

}  // namespace
}  // namespace kiln::ops
