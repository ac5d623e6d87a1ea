// Softmax, LogSoftmax and Hardmax.
//
// Opset < 13: the input is coerced to 2-D at `axis` (default 1): [prod(dims[:axis]),
// prod(dims[axis:])], and each row of the flattened trailing part is normalised as one vector.
// Opset >= 13: normalisation runs along the single `axis` (default -1), other dims independent.
//
// Reference algorithm: per (outer, inner) vector of length n, subtract the vector's maximum
// (numerically stable: no overflow for large inputs), exponentiate, sum in double;
// Softmax = e / sum, LogSoftmax = (x - max) - log(sum). Hardmax writes 1 at the first maximum
// and 0 elsewhere. A vector containing NaN gives NaN (Softmax/LogSoftmax). float32 and float64
// (both sum in double).
#include <cmath>
#include <limits>

#include "ops/axis_attrs.h"
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

enum class SoftmaxKind { kSoftmax, kLogSoftmax, kHardmax };

class SoftmaxOp : public Op {
 public:
  const ir::OpAttrs* attributes() const override { return &a_; }
  SoftmaxOp(const Node& node, SoftmaxKind kind) : Op(node), kind_(kind) {
    a_.axis = node.GetInt("axis", node.opset >= 13 ? -1 : 1);
  }

  Status Infer(InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(0, {DataType::kFloat, DataType::kDouble}));
    const int64_t rank = ctx.rank(0);
    // Opset < 13 accepts axis == rank (an empty trailing part); a scalar acts as a 1-element
    // vector.
    const int64_t hi = rank == 0 ? 0 : (opset() < 13 ? rank : rank - 1);
    const int64_t lo = rank == 0 ? -1 : -rank;
    if (a_.axis < lo || a_.axis > hi)
      return ctx.Error("axis must be in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                       "]; got " + std::to_string(a_.axis));
    const bool f64 = ctx.dtype(0) == DataType::kDouble;  // float16 computes as float32
    ctx.SetOutput(0, f64 ? DataType::kDouble : DataType::kFloat, ctx.shape(0));
    return OkStatus();
  }

  Status Compute(const ComputeContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    const int64_t rank = x.rank();
    int64_t axis = a_.axis < 0 ? a_.axis + rank : a_.axis;
    if (rank == 0) axis = 0;
    const AxisSplit s = SplitAtAxis(x.shape(), axis, /*flatten_tail=*/opset() < 13);
    return DispatchFloating(x.dtype(), describe(), [&](auto tag) {
      using T = decltype(tag);
      const T* src = x.data<T>();
      T* dst = ctx.out(0).data<T>();
      for (int64_t o = 0; o < s.outer; ++o)
        for (int64_t in = 0; in < s.inner; ++in) {
          const int64_t base = o * s.n * s.inner + in;
          Vector(src + base, dst + base, s.n, s.inner);
        }
      return OkStatus();
    });
  }

 private:
  // One vector of n elements spaced `stride` apart.
  template <typename T>
  void Vector(const T* src, T* dst, int64_t n, int64_t stride) const {
    if (n == 0) return;
    int64_t arg = 0;
    T max = src[0];
    bool nan = false;
    for (int64_t i = 0; i < n; ++i) {
      const T v = src[i * stride];
      nan = nan || std::isnan(v);
      if (v > max) {
        max = v;
        arg = i;
      }
    }
    if (kind_ == SoftmaxKind::kHardmax) {
      for (int64_t i = 0; i < n; ++i) dst[i * stride] = i == arg ? T(1) : T(0);
      return;
    }
    if (nan) {
      for (int64_t i = 0; i < n; ++i) dst[i * stride] = std::numeric_limits<T>::quiet_NaN();
      return;
    }
    // Shift by 0 when the maximum is not finite (an all -inf vector: the result is NaN either way,
    // an +inf maximum: other elements still get 0).
    const double shift = std::isfinite(max) ? max : 0.0;
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(src[i * stride]) - shift);
    if (kind_ == SoftmaxKind::kSoftmax) {
      for (int64_t i = 0; i < n; ++i)
        dst[i * stride] =
            static_cast<T>(std::exp(static_cast<double>(src[i * stride]) - shift) / sum);
    } else {
      const double log_sum = std::log(sum);
      for (int64_t i = 0; i < n; ++i)
        dst[i * stride] = static_cast<T>(static_cast<double>(src[i * stride]) - shift - log_sum);
    }
  }

  SoftmaxKind kind_;
  AxisAttrs a_;
};

StatusOr<std::unique_ptr<Op>> CreateSoftmax(const Node& node) {
  return std::unique_ptr<Op>(new SoftmaxOp(node, SoftmaxKind::kSoftmax));
}
StatusOr<std::unique_ptr<Op>> CreateLogSoftmax(const Node& node) {
  return std::unique_ptr<Op>(new SoftmaxOp(node, SoftmaxKind::kLogSoftmax));
}
StatusOr<std::unique_ptr<Op>> CreateHardmax(const Node& node) {
  return std::unique_ptr<Op>(new SoftmaxOp(node, SoftmaxKind::kHardmax));
}
KILN_REGISTER_OP("Softmax", 1, ir::kMaxOpset, &CreateSoftmax);
KILN_REGISTER_OP("LogSoftmax", 1, ir::kMaxOpset, &CreateLogSoftmax);
KILN_REGISTER_OP("Hardmax", 1, ir::kMaxOpset, &CreateHardmax);

// Kernel cases (ops/op_cases.h) of Softmax and LogSoftmax, after
// the former hand-written kernel tests (SoftmaxAxesAndOpsets) and the former selftest cases:
// opset 11 (the input coerced to 2-D at axis) and 13 (one axis) with axis 0, 1 and -1 on values
// up to +-60 (exp overflows without the maximum subtracted), each opset's default axis, a size-1
// axis, and a row of 1030 (vector paths and tails).
std::vector<OpCase> SoftmaxCases(const std::string& op) {
  std::vector<OpCase> cases;
  uint32_t seed = op == "Softmax" ? 70 : 80;
  for (int opset : {11, 13})
    for (int64_t axis : {0, 1, -1})
      cases.push_back(OpCase(op + "-" + std::to_string(opset) + " [3,4,6] axis " +
                                 std::to_string(axis) + ", values up to 60",
                             opset)
                          .In(CaseTensor({3, 4, 6}, seed++, -60.f, 60.f))
                          .Int("axis", axis));
  for (int opset : {1, 13})
    cases.push_back(OpCase(op + "-" + std::to_string(opset) + " [3,5,7] default axis", opset)
                        .In(CaseTensor({3, 5, 7}, seed++, -4.f, 4.f)));
  cases.push_back(OpCase(op + "-13 [3,1,7] axis 1", 13)
                      .In(CaseTensor({3, 1, 7}, seed++, -4.f, 4.f))
                      .Int("axis", 1));
  cases.push_back(
      OpCase(op + "-13 [2,1030] axis -1", 13).In(CaseTensor({2, 1030}, seed++, -8.f, 8.f)));
  cases.push_back(OpCase(op + "-13 float64 [3,1,7] axis -1", 13)
                      .In(CastCopy(CaseTensor({3, 1, 7}, seed++, -60.f, 60.f), DataType::kDouble)));
  return cases;
}
std::vector<OpCase> SoftmaxOpCases() { return SoftmaxCases("Softmax"); }
std::vector<OpCase> LogSoftmaxOpCases() { return SoftmaxCases("LogSoftmax"); }
KILN_REGISTER_OP_CASES("", "Softmax", &SoftmaxOpCases);
KILN_REGISTER_OP_CASES("", "LogSoftmax", &LogSoftmaxOpCases);

}  // namespace
}  // namespace kiln::ops
