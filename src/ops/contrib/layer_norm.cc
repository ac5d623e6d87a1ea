// The layer normalizations of ONNX Runtime's contrib set, as its transformers optimizer and
// exporters write them:
//
//   com.microsoft SkipLayerNormalization (1)   input, skip, gamma, optional beta, optional bias;
//     outputs output, optional mean, inv_std_var, input_skip_bias_sum; `epsilon` (1e-12)
//   com.microsoft SkipSimplifiedLayerNormalization (1)   input, skip, gamma, optional bias; the
//     same outputs (mean is written as 0: the RMS form has none); `epsilon` (1e-12)
//   SimplifiedLayerNormalization (domain "", opset 1 and up: ORT registers it there)   X, scale;
//     outputs Y, optional inv_std_var; `axis` (-1), `epsilon` (1e-5), `stash_type` (1)
//   LayerNormalization (domain "", opsets 1-16: ORT's contrib form before ONNX's opset 17; also
//     accepted as com.microsoft LayerNormalization 1)   X, Scale, optional B; outputs Y, Mean,
//     InvStdDev; `axis`, `epsilon` (1e-5), `stash_type`
//
// Skip forms: input [B, S, H] or [T, H]; skip has input's shape, or [1, S, H] / [S, H] (added to
// every batch); gamma, beta, bias [H]. v = input + skip (+ bias) in float32 (ORT's order), then
// y = (v - mean) / sqrt(var + eps) * gamma + beta over H (RMS form: v / sqrt(mean(v^2) + eps) *
// gamma). The axis forms normalize dims axis.. of X; scale and B have as many elements. Mean and
// inverse standard deviation outputs have X's shape with the normalized dims set to 1.
//
// Reference kernel: statistics and the normalization in double (two passes), rounded to
// float32; stash_type accepted (1 or 11) and changes nothing here. float32 only.
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "ops/common.h"
#include "ops/op_cases.h"

namespace kiln::ops {
namespace {

using ir::ComputeContext;
using ir::InferContext;
using ir::Node;

class MsNormOp final : public ir::Op {
 public:
  static StatusOr<std::unique_ptr<ir::Op>> Create(const Node& node) {
    std::unique_ptr<MsNormOp> op(new MsNormOp(node));
    const std::string& t = node.op_type;
    op->skip_ = t.rfind("Skip", 0) == 0;
    op->simplified_ = t.find("Simplified") != std::string::npos;
    op->epsilon_ = node.GetFloat("epsilon", op->skip_ ? 1e-12f : 1e-5f);
    if (!(op->epsilon_ >= 0.f))
      return ir::AttrError(node, "epsilon must be >= 0; got " + std::to_string(op->epsilon_));
    op->axis_ = node.GetInt("axis", -1);
    const int64_t stash = node.GetInt("stash_type", 1);
    if (stash != 1 && stash != 11)
      return ir::AttrError(
          node, "stash_type must be 1 (float) or 11 (double); got " + std::to_string(stash));
    // Input slots: beta (-1: none in this form) and bias.
    op->beta_ = op->skip_ ? (op->simplified_ ? -1 : 3) : (op->simplified_ ? -1 : 2);
    op->bias_ = op->skip_ ? (op->simplified_ ? 3 : 4) : -1;
    const size_t most = op->skip_ ? (op->simplified_ ? 4 : 5) : (op->simplified_ ? 2 : 3);
    const size_t least = op->skip_ ? 3 : 2;
    const size_t n = node.num_explicit_inputs();
    if (n < least || n > most)
      return ir::AttrError(node, t + " takes " + std::to_string(least) + " to " +
                                     std::to_string(most) + " inputs; got " + std::to_string(n));
    return std::unique_ptr<ir::Op>(std::move(op));
  }

  Status Infer(InferContext& ctx) const override {
    const size_t n = ctx.num_inputs();
    for (size_t i = 0; i < n; ++i)
      if (ctx.has_input(i)) KILN_RETURN_IF_ERROR(ctx.ExpectDtype(i, {DataType::kFloat}));
    const Shape& x = ctx.shape(0);
    const int64_t rank = static_cast<int64_t>(x.size());
    int64_t axis = 0;
    if (skip_) {
      if (rank != 2 && rank != 3)
        return ctx.Error("input must be 3-D [B, S, H] or 2-D [T, H]; got " + ShapeToString(x));
      const Shape& s = ctx.shape(1);
      const bool same = s == x;
      const bool per_batch =
          rank == 3 && ((s.size() == 3 && s[0] == 1 && s[1] == x[1] && s[2] == x[2]) ||
                        (s.size() == 2 && s[0] == x[1] && s[1] == x[2]));
      if (!same && !per_batch)
        return ctx.Error("skip must have input's shape " + ShapeToString(x) +
                         " or [1, S, H] / [S, H]; got " + ShapeToString(s));
      axis = rank - 1;
    } else {
      auto a = NormalizeAxis(axis_, rank);
      if (!a.ok())
        return ctx.Error("axis " + std::to_string(axis_) + " is out of range for X " +
                         ShapeToString(x));
      axis = *a;
    }
    int64_t inner = 1;
    for (int64_t d = axis; d < rank; ++d) inner *= x[d];
    for (int slot : {skip_ ? 2 : 1, beta_, bias_}) {
      if (slot < 0 || !ctx.has_input(slot)) continue;
      const Shape& p = ctx.shape(slot);
      const bool ok = skip_ ? (p.size() == 1 && p[0] == inner) : NumElements(p) == inner;
      if (!ok)
        return ctx.Error("input " + std::to_string(slot) + " must have the " +
                         std::to_string(inner) + " elements of the normalized dims of " +
                         ShapeToString(x) + "; got " + ShapeToString(p));
    }
    Shape stats = x;
    for (int64_t d = axis; d < rank; ++d) stats[d] = 1;
    ctx.SetOutput(0, DataType::kFloat, x);
    if (skip_) {
      for (size_t o = 1; o < std::min<size_t>(ctx.num_outputs(), 3); ++o)
        ctx.SetOutput(o, DataType::kFloat, stats);
      if (ctx.num_outputs() > 3) ctx.SetOutput(3, DataType::kFloat, x);
    } else {
      for (size_t o = 1; o < ctx.num_outputs(); ++o) ctx.SetOutput(o, DataType::kFloat, stats);
    }
    return OkStatus();
  }

  Status Compute(const ComputeContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    const Shape& xs = x.shape();
    const int64_t rank = static_cast<int64_t>(xs.size());
    const int64_t axis = skip_ ? rank - 1 : (axis_ < 0 ? axis_ + rank : axis_);
    int64_t inner = 1;
    for (int64_t d = axis; d < rank; ++d) inner *= xs[d];
    const int64_t rows = inner == 0 ? 0 : x.numel() / inner;
    const float* xp = x.data<float>();
    const float* skip = skip_ ? ctx.in(1).data<float>() : nullptr;
    const int64_t skip_n = skip_ ? ctx.in(1).numel() : 1;
    const float* gamma = ctx.in(skip_ ? 2 : 1).data<float>();
    const float* beta = beta_ >= 0 && ctx.has(beta_) ? ctx.in(beta_).data<float>() : nullptr;
    const float* bias = bias_ >= 0 && ctx.has(bias_) ? ctx.in(bias_).data<float>() : nullptr;
    float* y = ctx.out(0).data<float>();
    // Outputs: mean and inverse std (the simplified axis form has only the inverse std).
    auto out = [&](size_t o) -> float* {
      return o < ctx.outputs.size() && ctx.outputs[o] ? ctx.out(o).data<float>() : nullptr;
    };
    float* mean_out = simplified_ && !skip_ ? nullptr : out(1);
    float* inv_out = simplified_ && !skip_ ? out(1) : out(2);
    float* sum_out = skip_ ? out(3) : nullptr;
    std::vector<float> v(static_cast<size_t>(inner));
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t base = r * inner;
      for (int64_t i = 0; i < inner; ++i) {
        float s = xp[base + i];
        if (skip != nullptr) s += skip[(base + i) % skip_n];
        if (bias != nullptr) s += bias[i];
        v[i] = s;
      }
      double mean = 0.0, var = 0.0;
      if (!simplified_) {
        for (int64_t i = 0; i < inner; ++i) mean += v[i];
        mean /= static_cast<double>(inner);
      }
      for (int64_t i = 0; i < inner; ++i) var += (v[i] - mean) * (v[i] - mean);
      var /= static_cast<double>(inner);
      const double inv = 1.0 / std::sqrt(var + static_cast<double>(epsilon_));
      for (int64_t i = 0; i < inner; ++i) {
        double o = (v[i] - mean) * inv * gamma[i];
        if (beta != nullptr) o += beta[i];
        y[base + i] = static_cast<float>(o);
      }
      if (sum_out != nullptr) std::copy(v.begin(), v.end(), sum_out + base);
      if (mean_out != nullptr) mean_out[r] = static_cast<float>(mean);
      if (inv_out != nullptr) inv_out[r] = static_cast<float>(inv);
    }
    return OkStatus();
  }

 private:
  explicit MsNormOp(const Node& node) : Op(node) {}
  bool skip_ = false, simplified_ = false;
  float epsilon_ = 1e-5f;
  int64_t axis_ = -1;
  int beta_ = -1, bias_ = -1;
};

StatusOr<std::unique_ptr<ir::Op>> CreateMsNorm(const Node& node) { return MsNormOp::Create(node); }

KILN_REGISTER_OP_DOMAIN("com.microsoft", "SkipLayerNormalization", 1, 1, &CreateMsNorm);
KILN_REGISTER_OP_DOMAIN("com.microsoft", "SkipSimplifiedLayerNormalization", 1, 1, &CreateMsNorm);
KILN_REGISTER_OP_DOMAIN("com.microsoft", "LayerNormalization", 1, 1, &CreateMsNorm);
KILN_REGISTER_OP("SimplifiedLayerNormalization", 1, ir::kMaxOpset, &CreateMsNorm);
KILN_REGISTER_OP("LayerNormalization", 1, 16, &CreateMsNorm);

// Kernel cases: 3-D and 2-D inputs, skip of input's shape, [1, S, H] and [S, H], with and without
// beta and bias, all four outputs, H of 1; the axis forms over one and two trailing dims.
OpCase SkipCase(const std::string& name, const Shape& x, const Shape& skip, bool beta, bool bias,
                bool simplified, int outputs, uint32_t seed) {
  const int64_t h = x.back();
  OpCase c(name, 1);
  c.In(CaseTensor(x, seed)).In(CaseTensor(skip, seed + 1)).Const(CaseTensor({h}, seed + 2));
  if (!simplified) {
    if (beta)
      c.Const(CaseTensor({h}, seed + 3));
    else if (bias)
      c.Omitted();
  }
  if (bias) c.Const(CaseTensor({h}, seed + 4));
  return c.Outputs(outputs);
}
std::vector<OpCase> SkipLayerNormCases() {
  return {
      SkipCase("[2,3,7] skip same, beta, bias, 4 outputs", {2, 3, 7}, {2, 3, 7}, true, true, false,
               4, 51),
      SkipCase("[2,3,7] skip [1,3,7], no beta, bias", {2, 3, 7}, {1, 3, 7}, false, true, false, 1,
               56),
      SkipCase("[3,1,5] skip [1,5], beta, 3 outputs", {3, 1, 5}, {1, 5}, true, false, false, 3, 61),
      SkipCase("[4,9] 2-D, beta", {4, 9}, {4, 9}, true, false, false, 4, 66),
      SkipCase("[2,3,1] H 1", {2, 3, 1}, {2, 3, 1}, true, true, false, 4, 71)
          .Float("epsilon", 1e-5f)};
}
std::vector<OpCase> SkipSimplifiedCases() {
  return {SkipCase("[2,3,7] skip same, bias, 4 outputs", {2, 3, 7}, {2, 3, 7}, false, true, true, 4,
                   81),
          SkipCase("[2,3,7] skip [3,7]", {2, 3, 7}, {3, 7}, false, false, true, 1, 86),
          SkipCase("[5,6] 2-D, epsilon 1e-6", {5, 6}, {5, 6}, false, true, true, 3, 91)
              .Float("epsilon", 1e-6f)};
}
std::vector<OpCase> SimplifiedCases() {
  return {OpCase("[2,3,7] axis -1, inv_std_var", 1)
              .In(CaseTensor({2, 3, 7}, 101))
              .Const(CaseTensor({7}, 102))
              .Outputs(2),
          OpCase("[2,3,5] axis 1", 1)
              .In(CaseTensor({2, 3, 5}, 103))
              .Const(CaseTensor({3, 5}, 104))
              .Int("axis", 1)
              .Outputs(2),
          OpCase("[4,1] axis -1 epsilon 1e-3", 17)
              .In(CaseTensor({4, 1}, 105))
              .Const(CaseTensor({1}, 106))
              .Float("epsilon", 1e-3f)};
}
std::vector<OpCase> ContribLayerNormCases() {
  return {OpCase("[2,3,7] axis -1, 3 outputs", 1)
              .In(CaseTensor({2, 3, 7}, 111))
              .Const(CaseTensor({7}, 112))
              .Const(CaseTensor({7}, 113))
              .Outputs(3),
          OpCase("[2,3,5] axis 1 no B", 1)
              .In(CaseTensor({2, 3, 5}, 114))
              .Const(CaseTensor({3, 5}, 115))
              .Int("axis", 1)
              .Outputs(3)};
}
KILN_REGISTER_OP_CASES("com.microsoft", "SkipLayerNormalization", &SkipLayerNormCases);
KILN_REGISTER_OP_CASES("com.microsoft", "SkipSimplifiedLayerNormalization", &SkipSimplifiedCases);
KILN_REGISTER_OP_CASES("", "SimplifiedLayerNormalization", &SimplifiedCases);
KILN_REGISTER_OP_CASES("com.microsoft", "LayerNormalization", &ContribLayerNormCases);

}  // namespace
}  // namespace kiln::ops
