// TopK: the K largest (or, with largest=0, smallest) elements along `axis` (default -1) and their
// int64 indices. TopK-1 reads `k` from an attribute; TopK-10+ reads K from input 1 (a 1-element
// int64 tensor, a shape input: its value fixes the output shape); TopK-11 adds `largest` and
// `sorted`. Output order: best first; equal values keep the smaller index first (as the ONNX
// reference). sorted=0 leaves the order unspecified, and this kernel returns it sorted anyway.
// NaN ranks above every number (numpy's sort puts NaN last), so it comes first for largest=1
// and last for largest=0.
// Reference algorithm: per (outer, inner) line, partial_sort of the n indices with a comparator
// that breaks ties by index. O(n log K) per line, single-threaded.
// Dtypes: float32, float64 and the 8/16/32/64-bit signed and unsigned integers. Limits:
// 0 <= K <= size of the axis.
#include <algorithm>
#include <cmath>
#include <numeric>
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

// Strict "a comes before b in ascending order" with NaN above every number.
template <typename T>
bool AscLess(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a)) return false;
    if (std::isnan(b)) return true;
  }
  return a < b;
}

class TopKOp : public Op {
 public:
  explicit TopKOp(const Node& node)
      : Op(node),
        axis_(node.GetInt("axis", -1)),
        k_attr_(node.GetInt("k", -1)),
        largest_(node.opset < 11 || node.GetInt("largest", 1) != 0) {}

  static StatusOr<std::unique_ptr<Op>> Create(const Node& node) {
    if (node.opset < 10) {
      if (!node.HasAttr("k"))
        return ir::AttrError(node, "TopK-1 requires the `k` attribute; got none");
      if (node.GetInt("k", -1) < 0)
        return ir::AttrError(node, "k must be >= 0; got " + std::to_string(node.GetInt("k", -1)));
    }
    if (node.opset < 11 && node.GetInt("axis", -1) < -1)
      return ir::AttrError(node, "axis must be >= -1 before opset 11; got " +
                                     std::to_string(node.GetInt("axis", -1)));
    for (const char* name : {"largest", "sorted"}) {
      const int64_t v = node.GetInt(name, 1);
      if (v != 0 && v != 1)
        return ir::AttrError(node, std::string(name) + " must be 0 or 1; got " + std::to_string(v));
    }
    return std::unique_ptr<Op>(new TopKOp(node));
  }

  std::vector<int> ShapeInputs() const override {
    return opset() >= 10 ? std::vector<int>{1} : std::vector<int>{};
  }

  Status Infer(InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ExpectNumeric(ctx, 0));
    const int64_t rank = ctx.rank(0);
    if (rank == 0) return ctx.Error("the input must have rank >= 1; got a scalar");
    if (axis_ < -rank || axis_ >= rank)
      return ctx.Error("axis must be in [" + std::to_string(-rank) + ", " +
                       std::to_string(rank - 1) + "]; got " + std::to_string(axis_));
    const int64_t axis = axis_ < 0 ? axis_ + rank : axis_;
    int64_t k = k_attr_;
    if (opset() >= 10) {
      if (!ctx.has_input(1)) return ctx.Error("the K input (1) is required from opset 10");
      KILN_RETURN_IF_ERROR(ctx.ExpectDtype(1, {DataType::kInt64}));
      const Tensor* kt = ctx.value(1);
      if (!kt) return ctx.Error("the K input (1) must be known to infer the output shape");
      if (kt->numel() != 1 || kt->rank() > 1)
        return ctx.Error("K must be a 1-D tensor with one element; got shape " +
                         ShapeToString(kt->shape()));
      k = ReadInts(*kt)[0];
    }
    const int64_t n = ctx.shape(0)[axis];
    if (k < 0 || k > n)
      return ctx.Error("K must be in [0, " + std::to_string(n) + "] (the size of axis " +
                       std::to_string(axis) + "); got " + std::to_string(k));
    Shape out = ctx.shape(0);
    out[axis] = k;
    ctx.SetOutput(0, ctx.dtype(0), out);
    ctx.SetOutput(1, DataType::kInt64, out);
    return OkStatus();
  }

  Status Compute(const ComputeContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    const int64_t axis = axis_ < 0 ? axis_ + x.rank() : axis_;
    const int64_t k = ctx.out(0).shape()[axis];
    KILN_DISPATCH_NUMERIC(x.dtype(), describe(), Run<T>(x, axis, k, ctx));
    return OkStatus();
  }

 private:
  template <typename T>
  void Run(const Tensor& x, int64_t axis, int64_t k, const ComputeContext& ctx) const {
    const AxisSplit s = SplitAtAxis(x.shape(), axis);
    const T* src = x.data<T>();
    T* values = ctx.out(0).data<T>();
    int64_t* indices =
        ctx.outputs.size() > 1 && ctx.outputs[1] ? ctx.out(1).data<int64_t>() : nullptr;
    std::vector<int64_t> order(static_cast<size_t>(s.n));
    for (int64_t o = 0; o < s.outer; ++o) {
      for (int64_t in = 0; in < s.inner; ++in) {
        const T* line = src + o * s.n * s.inner + in;
        std::iota(order.begin(), order.end(), int64_t{0});
        auto before = [&](int64_t a, int64_t b) {
          const T va = line[a * s.inner], vb = line[b * s.inner];
          if (largest_ ? AscLess(vb, va) : AscLess(va, vb)) return true;
          if (largest_ ? AscLess(va, vb) : AscLess(vb, va)) return false;
          return a < b;
        };
        std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
        for (int64_t j = 0; j < k; ++j) {
          const int64_t dst = o * k * s.inner + j * s.inner + in;
          values[dst] = line[order[j] * s.inner];
          if (indices) indices[dst] = order[j];
        }
      }
    }
  }

  int64_t axis_;
  int64_t k_attr_;
  bool largest_;
};

KILN_REGISTER_OP("TopK", 1, ir::kMaxOpset, &TopKOp::Create);

// Reference cases: largest and smallest with ties (few distinct values), K of 0, 1 and the whole
// axis, the attribute form (TopK-1), and float32, float64, uint64 and int16 inputs.
std::vector<OpCase> TopKCases() {
  using D = DataType;
  auto ints = [](D t, const Shape& s, uint32_t seed) {
    return CastCopy(CaseInts(D::kInt64, s, seed, 0, 4), t);
  };
  std::vector<OpCase> cases;
  cases.push_back(OpCase("TopK float32[3,1,7] k 3", 11)
                      .In(CaseTensor({3, 1, 7}, 321))
                      .Const(CaseInt64s({3}))
                      .Outputs(2));
  cases.push_back(OpCase("TopK uint64[3,5] ties, smallest, axis 0, k 3", 11)
                      .Int("axis", 0)
                      .Int("largest", 0)
                      .In(ints(D::kUInt64, {3, 5}, 322))
                      .Const(CaseInt64s({3}))
                      .Outputs(2));
  cases.push_back(OpCase("TopK int16[2,6] ties, k 1", 11)
                      .In(ints(D::kInt16, {2, 6}, 323))
                      .Const(CaseInt64s({1}))
                      .Outputs(2));
  cases.push_back(OpCase("TopK float64[4,3] k 0", 11)
                      .In(CastCopy(CaseTensor({4, 3}, 324), D::kDouble))
                      .Const(CaseInt64s({0}))
                      .Outputs(2));
  cases.push_back(OpCase("TopK-1 float32[2,5] k 2 attribute", 1)
                      .Int("k", 2)
                      .In(CaseTensor({2, 5}, 325))
                      .Outputs(2));
  return cases;
}
KILN_REGISTER_OP_CASES("", "TopK", &TopKCases);

}  // namespace
}  // namespace kiln::ops
