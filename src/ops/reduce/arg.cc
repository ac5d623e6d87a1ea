// ArgMax and ArgMin: the index (int64) of the largest / smallest element along `axis`
// (default 0; negative from opset 11), keeping the axis as size 1 when `keepdims` (default 1).
// Ties resolve to the first index, or to the last with `select_last_index` (opset 12+). A NaN
// counts as the extreme value (the first NaN wins, or the last with select_last_index), as numpy's
// argmax/argmin do. The reduced axis must not be empty.
// Reference algorithm: a plain scan over the (outer, n, inner) split of the input.
// Dtypes: float32, float64 and the 8/16/32/64-bit signed and unsigned integers.
#include <cmath>
#include <type_traits>

#include "ops/common.h"
#include "ops/op_cases.h"
#include "ops/reduce/axis_split.h"
#include "ops/tensor/tensor_util.h"

namespace kiln::ops {
namespace {

using ir::ComputeContext;
using ir::InferContext;
using ir::Node;
using ir::Op;

class ArgOp : public Op {
 public:
  ArgOp(const Node& node, bool is_max)
      : Op(node),
        is_max_(is_max),
        axis_(node.GetInt("axis", 0)),
        keepdims_(node.GetInt("keepdims", 1) != 0),
        select_last_(node.opset >= 12 && node.GetInt("select_last_index", 0) != 0) {}

  static StatusOr<std::unique_ptr<Op>> Create(const Node& node, bool is_max) {
    const int64_t keepdims = node.GetInt("keepdims", 1);
    if (keepdims != 0 && keepdims != 1)
      return ir::AttrError(node, "keepdims must be 0 or 1; got " + std::to_string(keepdims));
    const int64_t last = node.GetInt("select_last_index", 0);
    if (last != 0 && last != 1)
      return ir::AttrError(node, "select_last_index must be 0 or 1; got " + std::to_string(last));
    if (node.opset < 11 && node.GetInt("axis", 0) < 0)
      return ir::AttrError(node, "axis must be non-negative before opset 11; got " +
                                     std::to_string(node.GetInt("axis", 0)));
    return std::unique_ptr<Op>(new ArgOp(node, is_max));
  }

  Status Infer(InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ExpectNumeric(ctx, 0));
    const int64_t rank = ctx.rank(0);
    if (rank == 0) return ctx.Error("the input must have rank >= 1; got a scalar");
    if (axis_ < -rank || axis_ >= rank)
      return ctx.Error("axis must be in [" + std::to_string(-rank) + ", " +
                       std::to_string(rank - 1) + "]; got " + std::to_string(axis_));
    const int64_t axis = axis_ < 0 ? axis_ + rank : axis_;
    if (ctx.shape(0)[axis] == 0)
      return ctx.Error("the reduced axis must not be empty; got size 0 at axis " +
                       std::to_string(axis));
    Shape out;
    for (int64_t d = 0; d < rank; ++d) {
      if (d != axis)
        out.push_back(ctx.shape(0)[d]);
      else if (keepdims_)
        out.push_back(1);
    }
    ctx.SetOutput(0, DataType::kInt64, std::move(out));
    return OkStatus();
  }

  Status Compute(const ComputeContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    const int64_t axis = axis_ < 0 ? axis_ + x.rank() : axis_;
    const AxisSplit s = SplitAtAxis(x.shape(), axis);
    int64_t* dst = ctx.out(0).data<int64_t>();
    KILN_DISPATCH_NUMERIC(x.dtype(), describe(), Scan(x.data<T>(), s, dst));
    return OkStatus();
  }

 private:
  // True when v should replace the current best b: a NaN beats any number, and equal values
  // (two NaNs included) replace the earlier one only with select_last_index.
  template <typename T>
  bool Better(T v, T b) const {
    if (IsNan(b)) return select_last_ && IsNan(v);
    if (IsNan(v)) return true;
    if (v == b) return select_last_;
    return is_max_ ? v > b : v < b;
  }

  template <typename T>
  void Scan(const T* src, const AxisSplit& s, int64_t* dst) const {
    for (int64_t o = 0; o < s.outer; ++o) {
      for (int64_t k = 0; k < s.inner; ++k) {
        const T* p = src + o * s.n * s.inner + k;
        int64_t best = 0;
        for (int64_t i = 1; i < s.n; ++i)
          if (Better(p[i * s.inner], p[best * s.inner])) best = i;
        dst[o * s.inner + k] = best;
      }
    }
  }

  bool is_max_;
  int64_t axis_;
  bool keepdims_;
  bool select_last_;
};

StatusOr<std::unique_ptr<Op>> CreateArgMax(const Node& node) { return ArgOp::Create(node, true); }
StatusOr<std::unique_ptr<Op>> CreateArgMin(const Node& node) { return ArgOp::Create(node, false); }
KILN_REGISTER_OP("ArgMax", 1, ir::kMaxOpset, &CreateArgMax);
KILN_REGISTER_OP("ArgMin", 1, ir::kMaxOpset, &CreateArgMin);

// Reference cases: ties (few distinct values) with and without select_last_index, keepdims 0, a
// negative axis, a size-1 axis, and float64, uint16 and int64 inputs.
std::vector<OpCase> ArgCases(const std::string& op) {
  using D = DataType;
  auto ints = [](D t, const Shape& s, uint32_t seed) {
    return CastCopy(CaseInts(D::kInt64, s, seed, 0, 3), t);
  };
  std::vector<OpCase> cases;
  cases.push_back(
      OpCase(op + " float32[3,1,7] axis 2", 13).Int("axis", 2).In(CaseTensor({3, 1, 7}, 311)));
  cases.push_back(OpCase(op + " int64[4,5] ties, select_last_index, keepdims 0", 13)
                      .Int("axis", 1)
                      .Int("keepdims", 0)
                      .Int("select_last_index", 1)
                      .In(ints(D::kInt64, {4, 5}, 312)));
  cases.push_back(OpCase(op + " uint16[2,3,4] ties, axis -2", 13)
                      .Int("axis", -2)
                      .In(ints(D::kUInt16, {2, 3, 4}, 313)));
  cases.push_back(OpCase(op + " float64[3,1,7] size-1 axis 1", 13)
                      .Int("axis", 1)
                      .In(CastCopy(CaseTensor({3, 1, 7}, 314), D::kDouble)));
  return cases;
}
std::vector<OpCase> ArgMaxCases() { return ArgCases("ArgMax"); }
std::vector<OpCase> ArgMinCases() { return ArgCases("ArgMin"); }
KILN_REGISTER_OP_CASES("", "ArgMax", &ArgMaxCases);
KILN_REGISTER_OP_CASES("", "ArgMin", &ArgMinCases);

}  // namespace
}  // namespace kiln::ops
