// LpNormalization (opsets 1, 22) and MeanVarianceNormalization (9, 13). Reference kernels,
// statistics in double; dtypes float32 (float16 as float32) and float64.
//
// LpNormalization: y = x / (sum along `axis` of |x|^p)^(1/p), p 1 or 2 (default 2), axis
// default -1. A zero norm divides by zero (IEEE: NaN or inf), as ONNX's reference does.
// MeanVarianceNormalization: over the dims in `axes` (default [0, 2, 3]), as ONNX's function
// body: y = (x - E[x]) / (sqrt(E[x^2] - E[x]^2) + 1e-9).
#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "ops/common.h"
#include "ops/op_cases.h"
#include "ops/reduce/axis_split.h"
#include "ops/tensor/tensor_util.h"
#include "ops/typed_dispatch.h"

namespace kiln::ops {
namespace {

using ir::ComputeContext;
using ir::InferContext;
using ir::Node;
using ir::Op;

struct LpNormalizationAttrs : ir::OpAttrs {
  int64_t axis = -1;  // as written; Infer checks it against the rank
  int64_t p = 2;
};

class LpNormalizationOp final : public Op {
 public:
  static StatusOr<std::unique_ptr<Op>> Create(const Node& node) {
    std::unique_ptr<LpNormalizationOp> op(new LpNormalizationOp(node));
    op->a_.axis = node.GetInt("axis", -1);
    op->a_.p = node.GetInt("p", 2);
    if (op->a_.p != 1 && op->a_.p != 2)
      return ir::AttrError(node, "p must be 1 or 2; got " + std::to_string(op->a_.p));
    return std::unique_ptr<Op>(std::move(op));
  }

  Status Infer(InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(0, {DataType::kFloat, DataType::kDouble}));
    const int64_t r = ctx.rank(0);
    if (a_.axis < -r || a_.axis >= r)
      return ctx.Error("axis must be in [" + std::to_string(-r) + ", " + std::to_string(r - 1) +
                       "]; got " + std::to_string(a_.axis));
    ctx.SetOutput(0, ctx.dtype(0), ctx.shape(0));
    return OkStatus();
  }

  Status Compute(const ComputeContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    const int64_t axis = a_.axis < 0 ? a_.axis + x.rank() : a_.axis;
    const AxisSplit s = SplitAtAxis(x.shape(), axis);
    return DispatchFloating(x.dtype(), describe(), [&](auto tag) {
      using T = decltype(tag);
      Run<T>(x.data<T>(), s, ctx.out(0).data<T>());
      return OkStatus();
    });
  }

  const ir::OpAttrs* attributes() const override { return &a_; }

 private:
  explicit LpNormalizationOp(const Node& node) : Op(node) {}

  template <typename T>
  void Run(const T* x, const AxisSplit& s, T* y) const {
    for (int64_t o = 0; o < s.outer; ++o)
      for (int64_t k = 0; k < s.inner; ++k) {
        const int64_t base = o * s.n * s.inner + k;
        double sum = 0;
        for (int64_t i = 0; i < s.n; ++i) {
          const double v = x[base + i * s.inner];
          sum += a_.p == 1 ? std::fabs(v) : v * v;
        }
        const double norm = a_.p == 1 ? sum : std::sqrt(sum);
        for (int64_t i = 0; i < s.n; ++i)
          y[base + i * s.inner] = static_cast<T>(x[base + i * s.inner] / norm);
      }
  }

  LpNormalizationAttrs a_;
};

struct MvnAttrs : ir::OpAttrs {
  std::vector<int64_t> axes = {0, 2, 3};  // as written; Infer checks them against the rank
};

class MeanVarianceNormalizationOp final : public Op {
 public:
  static StatusOr<std::unique_ptr<Op>> Create(const Node& node) {
    std::unique_ptr<MeanVarianceNormalizationOp> op(new MeanVarianceNormalizationOp(node));
    op->a_.axes = node.GetInts("axes", {0, 2, 3});
    return std::unique_ptr<Op>(std::move(op));
  }

  Status Infer(InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(0, {DataType::kFloat, DataType::kDouble}));
    std::vector<bool> reduced;
    const std::string err = Reduced(ctx.rank(0), &reduced);
    if (!err.empty()) return ctx.Error(err);
    ctx.SetOutput(0, ctx.dtype(0), ctx.shape(0));
    return OkStatus();
  }

  Status Compute(const ComputeContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    std::vector<bool> reduced;
    const std::string err = Reduced(x.rank(), &reduced);
    if (!err.empty()) return RunError(err);
    return DispatchFloating(x.dtype(), describe(), [&](auto tag) {
      using T = decltype(tag);
      Run<T>(x, reduced, ctx.out(0).data<T>());
      return OkStatus();
    });
  }

  const ir::OpAttrs* attributes() const override { return &a_; }

 private:
  explicit MeanVarianceNormalizationOp(const Node& node) : Op(node) {}

  // Which dims are reduced; the violated rule, or "".
  std::string Reduced(int64_t rank, std::vector<bool>* reduced) const {
    reduced->assign(static_cast<size_t>(rank), false);
    for (int64_t a : a_.axes) {
      if (a < -rank || a >= rank)
        return "axes must be in [" + std::to_string(-rank) + ", " + std::to_string(rank - 1) +
               "]; got " + IntsToString(a_.axes);
      (*reduced)[a < 0 ? a + rank : a] = true;
    }
    return "";
  }

  // Each element's group is its index with the reduced dims dropped.
  template <typename T>
  void Run(const Tensor& xt, const std::vector<bool>& reduced, T* y) const {
    const Shape& s = xt.shape();
    const int64_t n = xt.numel();
    std::vector<int64_t> gstride(s.size(), 0);
    int64_t groups = 1;
    for (int64_t d = static_cast<int64_t>(s.size()) - 1; d >= 0; --d)
      if (!reduced[d]) {
        gstride[d] = groups;
        groups *= s[d];
      }
    std::vector<int64_t> group(static_cast<size_t>(n));
    std::vector<int64_t> idx(s.size(), 0);
    for (int64_t i = 0; i < n; ++i) {
      int64_t g = 0;
      for (size_t d = 0; d < s.size(); ++d) g += idx[d] * gstride[d];
      group[i] = g;
      for (int64_t d = static_cast<int64_t>(s.size()) - 1; d >= 0; --d) {
        if (++idx[d] < s[d]) break;
        idx[d] = 0;
      }
    }
    const T* x = xt.data<T>();
    std::vector<double> sum(groups, 0.0), sq(groups, 0.0);
    std::vector<int64_t> count(groups, 0);
    for (int64_t i = 0; i < n; ++i) {
      sum[group[i]] += x[i];
      sq[group[i]] += static_cast<double>(x[i]) * x[i];
      ++count[group[i]];
    }
    for (int64_t g = 0; g < groups; ++g) {
      const double c = count[g] > 0 ? static_cast<double>(count[g]) : 1.0;
      sum[g] /= c;                                                    // E[x]
      sq[g] = std::sqrt(std::max(sq[g] / c - sum[g] * sum[g], 0.0));  // std
    }
    for (int64_t i = 0; i < n; ++i)
      y[i] = static_cast<T>((x[i] - sum[group[i]]) / (sq[group[i]] + 1e-9));
  }

  MvnAttrs a_;
};

KILN_REGISTER_OP("LpNormalization", 1, ir::kMaxOpset, &LpNormalizationOp::Create);
KILN_REGISTER_OP("MeanVarianceNormalization", 9, ir::kMaxOpset,
                 &MeanVarianceNormalizationOp::Create);

std::vector<OpCase> LpNormalizationCases() {
  std::vector<OpCase> cases;
  uint32_t seed = 1;
  for (int64_t p : {1, 2})
    for (int64_t axis : {-1, 0, 1})
      cases.push_back(OpCase("[3,5,7] p " + std::to_string(p) + " axis " + std::to_string(axis), 1)
                          .In(CaseTensor({3, 5, 7}, seed++))
                          .Int("p", p)
                          .Int("axis", axis));
  cases.push_back(OpCase("[1,9] default p and axis", 22).In(CaseTensor({1, 9}, seed++)));
  return cases;
}
KILN_REGISTER_OP_CASES("", "LpNormalization", &LpNormalizationCases);

std::vector<OpCase> MeanVarianceNormalizationCases() {
  std::vector<OpCase> cases;
  cases.push_back(OpCase("[2,3,5,7] default axes", 13).In(CaseTensor({2, 3, 5, 7}, 11, -2.f, 3.f)));
  cases.push_back(OpCase("[3,1,4] axes [-1]", 13).In(CaseTensor({3, 1, 4}, 12)).Ints("axes", {-1}));
  cases.push_back(
      OpCase("[2,5,3] axes [0, 2]", 9).In(CaseTensor({2, 5, 3}, 13)).Ints("axes", {0, 2}));
  return cases;
}
KILN_REGISTER_OP_CASES("", "MeanVarianceNormalization", &MeanVarianceNormalizationCases);

}  // namespace
}  // namespace kiln::ops
