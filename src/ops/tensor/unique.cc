// Unique (opset 11): X [float32, float64, int32, int64, int8, uint8, bool]. Without `axis`, the
// distinct elements of the flattened X; with `axis` (in [-r, r - 1]), the distinct slices along
// it, compared element by element in row-major order of the other dims (numpy's np.unique with
// axis). sorted = 1 (default): ascending (slices lexicographically); sorted = 0: in order of
// first occurrence. NaNs equal each other and sort last, as numpy's equal_nan.
// Outputs: Y (X's dtype: [count] without axis, X's shape with the axis' extent count), and int64
// indices [count] (each value's first occurrence in X), inverse_indices [extent] (each input
// slice's position in Y), counts [count]. The count is known only by running: the op assigns its
// outputs (ShapesFromRun, as NonMaxSuppression).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <type_traits>

#include "ops/common.h"
#include "ops/op_cases.h"
#include "ops/typed_dispatch.h"

namespace kiln::ops {
namespace {

struct UniqueAttrs : ir::OpAttrs {
  bool has_axis = false;
  int64_t axis = 0;  // as written; checked against the rank when the node runs
  bool sorted = true;
};

// -1, 0, 1 for a < b, a == b, a > b; NaN equals NaN and is greater than any number.
template <typename T>
int Compare(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    const bool na = std::isnan(a), nb = std::isnan(b);
    if (na || nb) return na == nb ? 0 : (na ? 1 : -1);
  }
  return a < b ? -1 : (b < a ? 1 : 0);
}

class UniqueOp final : public ir::Op {
 public:
  static StatusOr<std::unique_ptr<ir::Op>> Create(const ir::Node& node) {
    std::unique_ptr<UniqueOp> op(new UniqueOp(node));
    op->a_.has_axis = node.HasAttr("axis");
    op->a_.axis = node.GetInt("axis", 0);
    const int64_t sorted = node.GetInt("sorted", 1);
    if (sorted != 0 && sorted != 1)
      return ir::AttrError(node, "sorted must be 0 or 1; got " + std::to_string(sorted));
    op->a_.sorted = sorted == 1;
    return std::unique_ptr<ir::Op>(std::move(op));
  }

  bool ShapesFromRun() const override { return true; }
  Status Infer(ir::InferContext& ctx) const override {
    return ctx.Error("its output length depends on the values, known only by running it");
  }

  Status Compute(const ir::ComputeContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    const int64_t r = x.rank();
    if (a_.has_axis && (a_.axis < -r || a_.axis >= r))
      return RunError("axis must be in [" + std::to_string(-r) + ", " + std::to_string(r - 1) +
                      "]; got " + std::to_string(a_.axis));
    return DispatchAmong<float, double, int32_t, int64_t, int8_t, uint8_t, bool>(
        x.dtype(), describe(), [&](auto tag) {
          using T = decltype(tag);
          Run<T>(ctx);
          return OkStatus();
        });
  }

  const ir::OpAttrs* attributes() const override { return &a_; }

 private:
  explicit UniqueOp(const ir::Node& node) : Op(node) {}

  template <typename T>
  void Run(const ir::ComputeContext& ctx) const {
    const Tensor& xt = ctx.in(0);
    const Shape& s = xt.shape();
    const int64_t axis = a_.axis < 0 ? a_.axis + xt.rank() : a_.axis;
    int64_t outer = 1, n = xt.numel(), inner = 1;
    if (a_.has_axis) {
      outer = NumElements(Shape(s.begin(), s.begin() + axis));
      n = s[axis];
      inner = NumElements(Shape(s.begin() + axis + 1, s.end()));
    }
    const T* x = xt.data<T>();
    // Slices i and j compared element by element: (o, k) row-major.
    auto cmp = [&](int64_t i, int64_t j) {
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t k = 0; k < inner; ++k) {
          const int c = Compare(x[(o * n + i) * inner + k], x[(o * n + j) * inner + k]);
          if (c != 0) return c;
        }
      return 0;
    };
    std::vector<int64_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t i, int64_t j) { return cmp(i, j) < 0; });
    // Groups of equal slices in sorted order: first occurrence (stable sort: the group's first)
    // and count; group_of[i] for every slice.
    std::vector<int64_t> first, count, group_of(n);
    for (int64_t p = 0; p < n; ++p) {
      if (p == 0 || cmp(order[p - 1], order[p]) != 0) {
        first.push_back(order[p]);
        count.push_back(0);
      }
      ++count.back();
      group_of[order[p]] = static_cast<int64_t>(first.size()) - 1;
    }
    const int64_t groups = static_cast<int64_t>(first.size());
    // rank[g]: group g's position in the output.
    std::vector<int64_t> by_pos(groups), rank(groups);
    std::iota(by_pos.begin(), by_pos.end(), 0);
    if (!a_.sorted)
      std::sort(by_pos.begin(), by_pos.end(),
                [&](int64_t a, int64_t b) { return first[a] < first[b]; });
    for (int64_t p = 0; p < groups; ++p) rank[by_pos[p]] = p;

    Shape ys = {groups};
    if (a_.has_axis) {
      ys = s;
      ys[axis] = groups;
    }
    Tensor y = Tensor::Empty(xt.dtype(), ys);
    T* yd = y.data<T>();
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t p = 0; p < groups; ++p)
        std::memcpy(yd + (o * groups + p) * inner, x + (o * n + first[by_pos[p]]) * inner,
                    sizeof(T) * static_cast<size_t>(inner));
    auto ints = [](int64_t len, auto&& value) {
      Tensor t = Tensor::Empty(DataType::kInt64, {len});
      for (int64_t i = 0; i < len; ++i) t.data<int64_t>()[i] = value(i);
      return t;
    };
    Tensor outs[4] = {y, ints(groups, [&](int64_t p) { return first[by_pos[p]]; }),
                      ints(n, [&](int64_t i) { return rank[group_of[i]]; }),
                      ints(groups, [&](int64_t p) { return count[by_pos[p]]; })};
    for (size_t o = 0; o < ctx.outputs.size() && o < 4; ++o)
      if (ctx.outputs[o] != nullptr) *ctx.outputs[o] = outs[o];
  }

  UniqueAttrs a_;
};
KILN_REGISTER_OP("Unique", 11, ir::kMaxOpset, &UniqueOp::Create);

// Cases: sorted and not, with and without axis (negative too), repeated slices, NaNs, a single
// element, int64 and uint8.
std::vector<OpCase> UniqueCases() {
  std::vector<OpCase> cases;
  const float nan = std::nanf("");
  for (int sorted : {1, 0}) {
    const std::string tag = sorted ? "sorted" : "unsorted";
    cases.push_back(OpCase(tag + " [9] with NaNs", 11)
                        .In(CaseFloats({2.f, -1.f, nan, 2.f, 0.f, nan, -1.f, 3.f, 2.f}, {9}))
                        .Int("sorted", sorted)
                        .Outputs(4));
    cases.push_back(OpCase(tag + " [4,3] axis 0", 11)
                        .In(CaseFloats({1, 0, 2, 3, 3, 3, 1, 0, 2, 1, 0, 1}, {4, 3}))
                        .Int("axis", 0)
                        .Int("sorted", sorted)
                        .Outputs(4));
    cases.push_back(OpCase(tag + " int64 [2,5,2] axis -2", 11)
                        .In(CaseInts(DataType::kInt64, {2, 5, 2}, 1, 0, 1))
                        .Int("axis", -2)
                        .Int("sorted", sorted)
                        .Outputs(4));
  }
  cases.push_back(OpCase("uint8 [3,7] Y only", 11).In(CaseInts(DataType::kUInt8, {3, 7}, 2, 0, 5)));
  cases.push_back(OpCase("int64 [1]", 11).In(CaseInt64s({7})).Outputs(4));
  return cases;
}
KILN_REGISTER_OP_CASES("", "Unique", &UniqueCases);

}  // namespace
}  // namespace kiln::ops
