// NegativeLogLikelihoodLoss (opset 12, 13, 22) and SoftmaxCrossEntropyLoss (opset 12, 13): the
// two versions after 12 only widen the type lists (bfloat16), so one op serves every opset.
//
// input x [N, C, d1..dk] (k >= 0; float32 or float64, float16 models computed in float32 by
// passes/lower_float16.h), target [N, d1..dk] (int32 or int64), weights [C] (optional, x's dtype).
// Per element e = (n, d1..dk) with class c = target[e]:
//   NegativeLogLikelihoodLoss: loss[e] = -x[n, c, d1..dk] * w[c]
//   SoftmaxCrossEntropyLoss:   loss[e] = -log_softmax(x[n, :, d1..dk])[c] * w[c]
// with w[c] = 1 when weights are absent, and loss[e] = 0, w = 0 where c equals ignore_index.
// reduction "none": loss (target's shape); "sum": sum(loss) (a scalar); "mean" (default):
// sum(loss) / sum(w over the elements), which is ReduceMean(loss) without weights or ignore_index.
// When that weight sum is 0 (every element ignored, or no element) the mean is 0/0 = NaN, as
// ONNX's function body (ReduceSum(loss) / ReduceSum(w)) and PyTorch give. SCE's optional second
// output is log_softmax(x) along dim 1, x's shape.
//
// Reference algorithm: one pass over the N * d1..dk elements; SCE takes each class vector's
// maximum and its sum of exponentials in double (log_softmax = x - max - log(sum)). Sums of losses
// and weights accumulate in double, and the result is stored in x's dtype. A target outside
// [0, C) that is not ignore_index is a run-time InvalidArgument naming the value and where it is.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "ops/common.h"
#include "ops/op_cases.h"

namespace kiln::ops {
namespace {

enum class LossReduction { kNone, kSum, kMean };

struct LossAttrs : ir::OpAttrs {
  LossReduction reduction = LossReduction::kMean;
  bool has_ignore_index = false;
  int64_t ignore_index = 0;  // meaningful when has_ignore_index
};

class LossOp final : public ir::Op {
 public:
  template <bool kSoftmax>
  static StatusOr<std::unique_ptr<ir::Op>> Create(const ir::Node& node) {
    auto op = std::make_unique<LossOp>(node, kSoftmax);
    const std::string r = node.GetString("reduction", "mean");
    if (r == "none")
      op->a_.reduction = LossReduction::kNone;
    else if (r == "sum")
      op->a_.reduction = LossReduction::kSum;
    else if (r == "mean")
      op->a_.reduction = LossReduction::kMean;
    else
      return ir::AttrError(node, "reduction must be 'none', 'sum' or 'mean'; got '" + r + "'");
    op->a_.has_ignore_index = node.HasAttr("ignore_index");
    op->a_.ignore_index = node.GetInt("ignore_index", 0);
    return std::unique_ptr<ir::Op>(std::move(op));
  }
  LossOp(const ir::Node& node, bool softmax) : Op(node), softmax_(softmax) {}

  Status Infer(ir::InferContext& ctx) const override {
    if (!ctx.has_input(0)) return ctx.Error("input (input 0) is required; got none");
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(0, {DataType::kFloat, DataType::kDouble}));
    const Shape& x = ctx.shape(0);
    if (x.size() < 2)
      return ctx.Error("input must have rank >= 2 ([N, C, d1..dk]); got shape " + ShapeToString(x));
    if (!ctx.has_input(1)) return ctx.Error("target (input 1) is required; got none");
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(1, {DataType::kInt64, DataType::kInt32}));
    Shape want = x;
    want.erase(want.begin() + 1);
    if (ctx.shape(1) != want)
      return ctx.Error("target must have input's shape without dim 1 (" + ShapeToString(want) +
                       "); got " + ShapeToString(ctx.shape(1)));
    if (ctx.has_input(2)) {
      if (ctx.dtype(2) != ctx.dtype(0))
        return ctx.Error(std::string("weights must have input's dtype ") +
                         DataTypeName(ctx.dtype(0)) + "; got " + DataTypeName(ctx.dtype(2)));
      if (ctx.shape(2) != Shape{x[1]})
        return ctx.Error("weights must have shape [C] = [" + std::to_string(x[1]) + "]; got " +
                         ShapeToString(ctx.shape(2)));
    }
    if (!softmax_ && ctx.num_outputs() > 1)
      return ctx.Error("NegativeLogLikelihoodLoss has 1 output; got " +
                       std::to_string(ctx.num_outputs()));
    ctx.SetOutput(0, ctx.dtype(0), a_.reduction == LossReduction::kNone ? want : Shape{});
    if (softmax_ && ctx.num_outputs() > 1) ctx.SetOutput(1, ctx.dtype(0), x);
    return OkStatus();
  }

  Status Compute(const ir::ComputeContext& ctx) const override {
    if (ctx.in(0).dtype() == DataType::kDouble) return Run<double>(ctx);
    if (ctx.in(0).dtype() == DataType::kFloat) return Run<float>(ctx);
    return RunError(std::string("input must be float32 or float64; got ") +
                    DataTypeName(ctx.in(0).dtype()));
  }

  const ir::OpAttrs* attributes() const override { return &a_; }

 private:
  template <typename T>
  Status Run(const ir::ComputeContext& ctx) const {
    const Tensor& input = ctx.in(0);
    const Shape& shape = input.shape();
    const int64_t n = shape[0], c = shape[1];
    const int64_t inner = NumElements(Shape(shape.begin() + 2, shape.end()));
    const T* x = input.data<T>();
    const std::vector<int64_t> target = ReadInts(ctx.in(1));
    const T* w = ctx.has(2) ? ctx.in(2).data<T>() : nullptr;
    T* log_prob = softmax_ && ctx.outputs.size() > 1 && ctx.outputs[1] != nullptr
                      ? ctx.outputs[1]->data<T>()
                      : nullptr;
    T* loss = ctx.out(0).data<T>();
    const bool keep = a_.reduction == LossReduction::kNone;
    double loss_sum = 0, weight_sum = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < inner; ++j) {
        const int64_t e = i * inner + j;
        const int64_t base = i * c * inner + j;  // x[i, 0, j]; class k at base + k * inner
        double shift = 0;                        // SCE: log_softmax(x)[k] = x[k] - shift
        if (softmax_) {
          shift = LogSumExp(x + base, c, inner);
          if (log_prob != nullptr)
            for (int64_t k = 0; k < c; ++k)
              log_prob[base + k * inner] =
                  static_cast<T>(static_cast<double>(x[base + k * inner]) - shift);
        }
        const int64_t label = target[e];
        double value = 0, weight = 0;
        if (!(a_.has_ignore_index && label == a_.ignore_index)) {
          if (label < 0 || label >= c) return RunError(TargetRule(label, c, e, ctx.in(1).shape()));
          weight = w != nullptr ? static_cast<double>(w[label]) : 1.0;
          value = -(static_cast<double>(x[base + label * inner]) - shift) * weight;
        }
        if (keep) loss[e] = static_cast<T>(value);
        loss_sum += value;
        weight_sum += weight;
      }
    if (a_.reduction == LossReduction::kSum) loss[0] = static_cast<T>(loss_sum);
    // 0/0 (nothing counted) is NaN, as ONNX's Div gives.
    if (a_.reduction == LossReduction::kMean)
      loss[0] = weight_sum != 0 ? static_cast<T>(loss_sum / weight_sum)
                                : std::numeric_limits<T>::quiet_NaN();
    return OkStatus();
  }

  // max + log(sum exp(v - max)) of c values spaced `stride` apart: shifting by the maximum keeps
  // exp from overflowing; a non-finite maximum shifts by 0 (the result is then inf or NaN either
  // way, as in Softmax). c == 0 gives -inf (never read: every target is then out of range).
  template <typename T>
  static double LogSumExp(const T* v, int64_t c, int64_t stride) {
    double max = -std::numeric_limits<double>::infinity();
    for (int64_t k = 0; k < c; ++k) max = std::max(max, static_cast<double>(v[k * stride]));
    const double m = std::isfinite(max) ? max : 0.0;
    double sum = 0;
    for (int64_t k = 0; k < c; ++k) sum += std::exp(static_cast<double>(v[k * stride]) - m);
    return m + std::log(sum);
  }

  std::string TargetRule(int64_t label, int64_t c, int64_t e, const Shape& tshape) const {
    std::vector<int64_t> at(tshape.size());
    for (int64_t d = static_cast<int64_t>(tshape.size()) - 1, r = e; d >= 0; --d) {
      at[d] = tshape[d] == 0 ? 0 : r % tshape[d];
      r = tshape[d] == 0 ? 0 : r / tshape[d];
    }
    std::string where = "[";
    for (size_t d = 0; d < at.size(); ++d) where += (d ? "," : "") + std::to_string(at[d]);
    std::string rule = "target values must be in [0, C) = [0, " + std::to_string(c) + ")";
    if (a_.has_ignore_index) rule += " or equal ignore_index " + std::to_string(a_.ignore_index);
    return rule + "; got " + std::to_string(label) + " at target" + where + "]";
  }

  bool softmax_;
  LossAttrs a_;
};
KILN_REGISTER_OP("NegativeLogLikelihoodLoss", 12, ir::kMaxOpset, &LossOp::Create<false>);
KILN_REGISTER_OP("SoftmaxCrossEntropyLoss", 12, ir::kMaxOpset, &LossOp::Create<true>);

// Reference cases for both ops (no fast kernel yet), each under every reduction: rank 2 without
// weights or ignore_index (int64 targets); rank 4 with weights and an ignore_index that occurs
// (int32 targets); a single class (C = 1) with weights and an ignore_index that never occurs;
// rank 4 with N = 1, a size-1 trailing dim and the ignore_index -100 among the targets; float64.
// SCE also returns log_prob in two of them.
std::vector<OpCase> LossCases(const std::string& op, int opset, uint32_t seed) {
  using D = DataType;
  const bool sce = op == "SoftmaxCrossEntropyLoss";
  std::vector<OpCase> cases;
  for (const char* r : {"none", "sum", "mean"}) {
    const std::string tag = op + "-" + std::to_string(opset) + " " + r + ": ";
    cases.push_back(OpCase(tag + "[5,4] int64 target", opset)
                        .Str("reduction", r)
                        .In(CaseTensor({5, 4}, seed, -3.f, 1.f))
                        .In(CaseInts(D::kInt64, {5}, seed + 1, 0, 3)));
    cases.push_back(OpCase(tag + "[2,3,1,5] int32 target, weights, ignore_index 1 hit", opset)
                        .Str("reduction", r)
                        .Int("ignore_index", 1)
                        .In(CaseTensor({2, 3, 1, 5}, seed + 2, -4.f, 2.f))
                        .In(Tensor::FromVector<int32_t>({1, 0, 2, 1, 2, 0, 1, 1, 2, 0}, {2, 1, 5}))
                        .In(CaseFloats({0.5f, 2.f, 1.25f}, {3}))
                        .Outputs(sce && std::string(r) != "sum" ? 2 : 1));
    cases.push_back(
        OpCase(tag + "[3,1] C = 1, int32 target, weights, ignore_index -1 unused", opset)
            .Str("reduction", r)
            .Int("ignore_index", -1)
            .In(CaseTensor({3, 1}, seed + 3))
            .In(Tensor::FromVector<int32_t>({0, 0, 0}, {3}))
            .In(CaseFloats({0.75f}, {1})));
    cases.push_back(OpCase(tag + "[1,5,3,1] int64 target, ignore_index -100 hit", opset)
                        .Str("reduction", r)
                        .Int("ignore_index", -100)
                        .In(CaseTensor({1, 5, 3, 1}, seed + 4, -2.f, 2.f))
                        .In(Tensor::FromVector<int64_t>({4, -100, 0}, {1, 3, 1}))
                        .Outputs(sce ? 2 : 1));
    seed += 5;
  }
  Tensor x = Tensor::Empty(D::kDouble, {3, 4, 2});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<double>()[i] = std::sin(1.7 * i + seed);
  cases.push_back(OpCase(op + " mean: float64 [3,4,2], weights, ignore_index 3", opset)
                      .Int("ignore_index", 3)
                      .In(x)
                      .In(Tensor::FromVector<int64_t>({0, 3, 1, 2, 3, 3}, {3, 2}))
                      .In(Tensor::FromVector<double>({1.0, 0.5, 2.0, 3.0}, {4}))
                      .Outputs(sce ? 2 : 1));
  return cases;
}
std::vector<OpCase> NllLossCases() {
  std::vector<OpCase> cases = LossCases("NegativeLogLikelihoodLoss", 22, 300);
  for (OpCase& c : LossCases("NegativeLogLikelihoodLoss", 12, 400)) cases.push_back(c);
  return cases;
}
std::vector<OpCase> SceLossCases() { return LossCases("SoftmaxCrossEntropyLoss", 13, 500); }
KILN_REGISTER_OP_CASES("", "NegativeLogLikelihoodLoss", &NllLossCases);
KILN_REGISTER_OP_CASES("", "SoftmaxCrossEntropyLoss", &SceLossCases);

}  // namespace
}  // namespace kiln::ops
