// Normalizations: BatchNormalization (opsets 1, 6, 7, 9, 14, 15), InstanceNormalization (1, 6),
// LayerNormalization (17; also domain "kiln" opset 1). Reference kernels; float32 tensors,
// statistics in double.
//
// BatchNormalization, inference: y = (x - mean) / sqrt(var + epsilon) * scale + B per channel of
// X [N, C, D1..Dn], folded into one double scale and shift per channel. The parameters are [C]
// or, for opset < 9 models exported with spatial=0, the per-activation shape [C, D1..Dn] (taken
// from the parameter shapes, so the spatial attribute itself is ignored, as are is_test and
// consumed_inputs). With training_mode=1 (opset 14+) Y is normalized with the batch's own mean
// and population variance, and the optional outputs running_mean and running_var are
// input * momentum + batch * (1 - momentum); the opset < 14 training outputs (the saved
// statistics) are Unsupported.
//
// InstanceNormalization: per (n, c) plane, mean and variance (two passes, population) over the
// spatial dims. LayerNormalization: per row of X viewed as [prod(X[:axis]), prod(X[axis:])];
// Scale and B broadcast unidirectionally to X[axis:]; optional Mean and InvStdDev outputs have
// shape X[:axis] + [1]*(rank - axis). Only stash_type=1 (float) is supported.
//
// GroupNormalization (18, 21): X [N, C, D1..Dn] split into num_groups groups of C / num_groups
// consecutive channels; each (n, group) is normalized with its own mean and population variance,
// then scaled and shifted: per group at opset 18 (scale, bias [num_groups]), per channel from
// opset 21 (scale, bias [C]; stash_type 1 only).
#include "ops/nn/norm.h"

#include <cmath>
#include <memory>
#include <vector>

#include "ops/common.h"
#include "ops/op_cases.h"

namespace kiln::ops {
namespace {

using ir::ComputeContext;
using ir::InferContext;
using ir::Node;
using ir::Op;

// Number of outputs of the node that are present (not omitted) after output 0.
size_t ExtraOutputs(const Node& node) {
  size_t n = 0;
  for (size_t i = 1; i < node.outputs.size(); ++i) n += node.outputs[i] >= 0 ? 1 : 0;
  return n;
}

// Mean and population variance of n floats, two-pass in double.
void MeanVar(const float* x, int64_t n, int64_t stride, double* mean, double* var) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += x[i * stride];
  const double m = n > 0 ? s / static_cast<double>(n) : 0.0;
  double v = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = x[i * stride] - m;
    v += d * d;
  }
  *mean = m;
  *var = n > 0 ? v / static_cast<double>(n) : 0.0;
}

// The `epsilon` attribute every normalization has (default 1e-5, >= 0).
Status ParseEpsilon(const Node& node, NormAttrs* a) {
  a->epsilon = node.GetFloat("epsilon", 1e-5f);
  if (!(a->epsilon >= 0.f))
    return ir::AttrError(node, "epsilon must be >= 0; got " + std::to_string(a->epsilon));
  return OkStatus();
}

class BatchNormalizationOp : public Op {
 public:
  const ir::OpAttrs* attributes() const override { return &a_; }
  static StatusOr<std::unique_ptr<Op>> Create(const Node& node) {
    std::unique_ptr<BatchNormalizationOp> op(new BatchNormalizationOp(node));
    KILN_RETURN_IF_ERROR(ParseEpsilon(node, &op->a_));
    const int64_t tm = node.opset >= 14 ? node.GetInt("training_mode", 0) : 0;
    if (tm != 0 && tm != 1)
      return ir::AttrError(node, "training_mode must be 0 or 1; got " + std::to_string(tm));
    op->a_.training = tm == 1;
    op->a_.momentum = node.GetFloat("momentum", 0.9f);
    return std::unique_ptr<Op>(std::move(op));
  }

  Status Infer(InferContext& ctx) const override {
    for (size_t i = 0; i < 5; ++i) {
      if (!ctx.has_input(i))
        return ctx.Error("inputs X, scale, B, mean and var are all required; input " +
                         std::to_string(i) + " is missing");
      KILN_RETURN_IF_ERROR(ctx.ExpectDtype(i, {DataType::kFloat}));
    }
    const size_t extra = ExtraOutputs(ctx.node());
    if (extra > 0 && opset() < 14)
      return Unsupported("failed to infer shapes of " + describe() +
                         ": the training outputs of opsets before 14 (saved mean and variance) "
                         "are not supported; got " +
                         std::to_string(extra + 1) + " outputs");
    if (extra > 2)
      return ctx.Error("at most 3 outputs (Y, running_mean, running_var); got " +
                       std::to_string(extra + 1));
    if (extra > 0 && !a_.training)
      return ctx.Error("outputs running_mean and running_var require training_mode=1; got " +
                       std::to_string(extra + 1) + " outputs with training_mode=0");
    const Shape& x = ctx.shape(0);
    if (x.size() < 2)
      return ctx.Error("X must be [N, C, ...]; got rank " + std::to_string(x.size()));
    const int64_t c = x[1];
    const Shape per_activation(x.begin() + 1, x.end());
    for (size_t i = 1; i < 5; ++i) {
      const Shape& p = ctx.shape(i);
      const bool per_channel = p.size() == 1 && p[0] == c;
      if (!per_channel && !(opset() < 9 && !a_.training && p == per_activation))
        return ctx.Error("input " + std::to_string(i) + " must have shape [" + std::to_string(c) +
                         "] (X's channels); got " + ShapeToString(p));
    }
    ctx.SetOutput(0, DataType::kFloat, x);
    for (size_t o = 1; o <= extra; ++o) ctx.SetOutput(o, DataType::kFloat, {c});
    return OkStatus();
  }

  Status Compute(const ComputeContext& ctx) const override {
    const Tensor& xt = ctx.in(0);
    const int64_t n_batch = xt.shape()[0], c_dim = xt.shape()[1];
    const int64_t plane = n_batch * c_dim > 0 ? xt.numel() / (n_batch * c_dim) : 0;
    const float* x = xt.data<float>();
    const float* scale = ctx.in(1).data<float>();
    const float* bias = ctx.in(2).data<float>();
    const float* mean = ctx.in(3).data<float>();
    const float* var = ctx.in(4).data<float>();
    float* y = ctx.out(0).data<float>();
    // Per-channel scale a and shift b, or per (c, position) when some parameter is
    // per-activation (old spatial=0; Infer checked each is [C] or [C, D1..Dn]).
    bool per_act = false;
    for (size_t i = 1; i < 5; ++i) per_act = per_act || ctx.in(i).numel() != c_dim;
    auto at = [&](size_t input, const float* p, int64_t c, int64_t i) {
      return static_cast<double>(ctx.in(input).numel() == c_dim ? p[c] : p[c * plane + i]);
    };
    // Channel by channel (no buffer: a warm run allocates nothing): the batch statistics first
    // when training, then y = x * a + b with a, b per channel or per (c, position).
    for (int64_t c = 0; c < c_dim; ++c) {
      double bm = 0, bv = 0;
      if (a_.training) {  // batch mean and population variance over N and the spatial dims
        double s = 0, ss = 0;
        for (int64_t n = 0; n < n_batch; ++n) {
          const float* xp = x + (n * c_dim + c) * plane;
          for (int64_t i = 0; i < plane; ++i) s += xp[i];
        }
        const double cnt = static_cast<double>(n_batch * plane);
        bm = cnt > 0 ? s / cnt : 0.0;
        for (int64_t n = 0; n < n_batch; ++n) {
          const float* xp = x + (n * c_dim + c) * plane;
          for (int64_t i = 0; i < plane; ++i) ss += (xp[i] - bm) * (xp[i] - bm);
        }
        bv = cnt > 0 ? ss / cnt : 0.0;
        // running = input * momentum + batch * (1 - momentum)
        const double mom = a_.momentum;
        if (ctx.outputs.size() > 1 && ctx.outputs[1] != nullptr)
          ctx.out(1).data<float>()[c] = static_cast<float>(mean[c] * mom + bm * (1 - mom));
        if (ctx.outputs.size() > 2 && ctx.outputs[2] != nullptr)
          ctx.out(2).data<float>()[c] = static_cast<float>(var[c] * mom + bv * (1 - mom));
      }
      auto coefficients = [&](int64_t i, double* a, double* b) {
        const double m = a_.training ? bm : at(3, mean, c, i);
        const double v = a_.training ? bv : at(4, var, c, i);
        *a = at(1, scale, c, i) / std::sqrt(v + static_cast<double>(a_.epsilon));
        *b = at(2, bias, c, i) - m * *a;
      };
      double a = 0, b = 0;
      if (!per_act) coefficients(0, &a, &b);
      for (int64_t n = 0; n < n_batch; ++n) {
        const float* xp = x + (n * c_dim + c) * plane;
        float* yp = y + (n * c_dim + c) * plane;
        for (int64_t i = 0; i < plane; ++i) {
          if (per_act) coefficients(i, &a, &b);
          yp[i] = static_cast<float>(xp[i] * a + b);
        }
      }
    }
    return OkStatus();
  }

 private:
  explicit BatchNormalizationOp(const Node& node) : Op(node) {}
  NormAttrs a_;
};

class InstanceNormalizationOp : public Op {
 public:
  const ir::OpAttrs* attributes() const override { return &a_; }
  static StatusOr<std::unique_ptr<Op>> Create(const Node& node) {
    std::unique_ptr<InstanceNormalizationOp> op(new InstanceNormalizationOp(node));
    KILN_RETURN_IF_ERROR(ParseEpsilon(node, &op->a_));
    return std::unique_ptr<Op>(std::move(op));
  }

  Status Infer(InferContext& ctx) const override {
    for (size_t i = 0; i < 3; ++i) {
      if (!ctx.has_input(i))
        return ctx.Error("inputs input, scale and B are all required; input " + std::to_string(i) +
                         " is missing");
      KILN_RETURN_IF_ERROR(ctx.ExpectDtype(i, {DataType::kFloat}));
    }
    const Shape& x = ctx.shape(0);
    if (x.size() < 3)
      return ctx.Error("input must be [N, C, D1, ...] with at least one spatial dim; got rank " +
                       std::to_string(x.size()));
    for (size_t i = 1; i < 3; ++i)
      if (ctx.shape(i) != Shape{x[1]})
        return ctx.Error("input " + std::to_string(i) + " must have shape [" +
                         std::to_string(x[1]) + "] (the channels); got " +
                         ShapeToString(ctx.shape(i)));
    ctx.SetOutput(0, DataType::kFloat, x);
    return OkStatus();
  }

  Status Compute(const ComputeContext& ctx) const override {
    const Tensor& xt = ctx.in(0);
    const int64_t c_dim = xt.shape()[1], planes = xt.shape()[0] * c_dim;
    const int64_t plane = planes > 0 ? xt.numel() / planes : 0;
    const float* scale = ctx.in(1).data<float>();
    const float* bias = ctx.in(2).data<float>();
    for (int64_t p = 0; p < planes; ++p) {
      const float* xp = xt.data<float>() + p * plane;
      float* yp = ctx.out(0).data<float>() + p * plane;
      double mean, var;
      MeanVar(xp, plane, 1, &mean, &var);
      const double a = scale[p % c_dim] / std::sqrt(var + static_cast<double>(a_.epsilon));
      const double b = bias[p % c_dim] - mean * a;
      for (int64_t i = 0; i < plane; ++i) yp[i] = static_cast<float>(xp[i] * a + b);
    }
    return OkStatus();
  }

 private:
  explicit InstanceNormalizationOp(const Node& node) : Op(node) {}
  NormAttrs a_;
};

class GroupNormalizationOp : public Op {
 public:
  const ir::OpAttrs* attributes() const override { return &a_; }
  static StatusOr<std::unique_ptr<Op>> Create(const Node& node) {
    std::unique_ptr<GroupNormalizationOp> op(new GroupNormalizationOp(node));
    KILN_RETURN_IF_ERROR(ParseEpsilon(node, &op->a_));
    if (!node.HasAttr("num_groups"))
      return ir::AttrError(node, "the num_groups attribute is required; got none");
    op->groups_ = node.GetInt("num_groups", 0);
    if (op->groups_ < 1)
      return ir::AttrError(node, "num_groups must be >= 1; got " + std::to_string(op->groups_));
    op->a_.stash_type = node.opset >= 21 ? node.GetInt("stash_type", 1) : 1;
    if (op->a_.stash_type != 1)
      return Unsupported("failed to load " + node.Describe() +
                         ": only stash_type=1 (float32 statistics) is supported; got " +
                         std::to_string(op->a_.stash_type));
    return std::unique_ptr<Op>(std::move(op));
  }

  Status Infer(InferContext& ctx) const override {
    for (size_t i = 0; i < 3; ++i) {
      if (!ctx.has_input(i))
        return ctx.Error("inputs X, scale and bias are all required; input " + std::to_string(i) +
                         " is missing");
      KILN_RETURN_IF_ERROR(ctx.ExpectDtype(i, {DataType::kFloat}));
    }
    const Shape& x = ctx.shape(0);
    if (x.size() < 2)
      return ctx.Error("X must be [N, C, ...]; got rank " + std::to_string(x.size()));
    if (x[1] % groups_ != 0)
      return ctx.Error("the channels (" + std::to_string(x[1]) +
                       ") must divide into num_groups = " + std::to_string(groups_));
    const int64_t per = PerChannel() ? x[1] : groups_;
    for (size_t i = 1; i < 3; ++i)
      if (ctx.shape(i) != Shape{per})
        return ctx.Error("input " + std::to_string(i) + " must have shape [" + std::to_string(per) +
                         "] (" +
                         (PerChannel() ? "the channels, opset 21" : "num_groups, opset 18") +
                         "); got " + ShapeToString(ctx.shape(i)));
    ctx.SetOutput(0, DataType::kFloat, x);
    return OkStatus();
  }

  Status Compute(const ComputeContext& ctx) const override {
    const Tensor& xt = ctx.in(0);
    const int64_t n = xt.shape()[0], c = xt.shape()[1];
    const int64_t plane = n * c > 0 ? xt.numel() / (n * c) : 0;
    const int64_t per_group = c / groups_;
    const float* scale = ctx.in(1).data<float>();
    const float* bias = ctx.in(2).data<float>();
    for (int64_t b = 0; b < n; ++b) {
      for (int64_t g = 0; g < groups_; ++g) {
        const int64_t offset = (b * c + g * per_group) * plane;
        const float* xp = xt.data<float>() + offset;
        float* yp = ctx.out(0).data<float>() + offset;
        double mean, var;
        MeanVar(xp, per_group * plane, 1, &mean, &var);
        const double inv = 1.0 / std::sqrt(var + static_cast<double>(a_.epsilon));
        for (int64_t k = 0; k < per_group; ++k) {
          const int64_t p = PerChannel() ? g * per_group + k : g;
          const double a = scale[p] * inv, sh = bias[p] - mean * a;
          for (int64_t i = 0; i < plane; ++i)
            yp[k * plane + i] = static_cast<float>(xp[k * plane + i] * a + sh);
        }
      }
    }
    return OkStatus();
  }

 private:
  explicit GroupNormalizationOp(const Node& node) : Op(node) {}
  bool PerChannel() const { return opset() >= 21; }
  NormAttrs a_;
  int64_t groups_ = 1;
};

class LayerNormalizationOp : public Op {
 public:
  const ir::OpAttrs* attributes() const override { return &a_; }
  static StatusOr<std::unique_ptr<Op>> Create(const Node& node) {
    std::unique_ptr<LayerNormalizationOp> op(new LayerNormalizationOp(node));
    op->a_.axis = node.GetInt("axis", -1);
    KILN_RETURN_IF_ERROR(ParseEpsilon(node, &op->a_));
    const int64_t stash = node.GetInt("stash_type", 1);
    if (stash != 1)
      return Unsupported("failed to load " + node.Describe() +
                         ": only stash_type=1 (float32 statistics) is supported; got " +
                         std::to_string(stash));
    return std::unique_ptr<Op>(std::move(op));
  }

  Status Infer(InferContext& ctx) const override {
    if (!ctx.has_input(0) || !ctx.has_input(1)) return ctx.Error("inputs X and Scale are required");
    for (size_t i = 0; i < 3; ++i) KILN_RETURN_IF_ERROR(ctx.ExpectDtype(i, {DataType::kFloat}));
    const Shape& x = ctx.shape(0);
    auto axis = NormalizeAxis(a_.axis, static_cast<int64_t>(x.size()));
    if (!axis.ok() || x.empty())
      return ctx.Error("axis must be in [-rank, rank) of X; got " + std::to_string(a_.axis));
    const Shape inner(x.begin() + *axis, x.end());
    for (size_t i = 1; i < 3; ++i) {
      if (!ctx.has_input(i)) continue;
      auto b = BroadcastShapes({inner, ctx.shape(i)});
      if (!b.ok() || *b != inner)
        return ctx.Error("input " + std::to_string(i) + " must broadcast to X's normalized dims " +
                         ShapeToString(inner) + "; got " + ShapeToString(ctx.shape(i)));
    }
    ctx.SetOutput(0, DataType::kFloat, x);
    Shape stat(x.begin(), x.begin() + *axis);
    stat.resize(x.size(), 1);
    ctx.SetOutput(1, DataType::kFloat, stat);
    ctx.SetOutput(2, DataType::kFloat, stat);
    return OkStatus();
  }

  Status Compute(const ComputeContext& ctx) const override {
    const Tensor& xt = ctx.in(0);
    const Shape& xs = xt.shape();
    auto axis = NormalizeAxis(a_.axis, xt.rank());
    if (!axis.ok()) return RunError(axis.status().message());
    const Shape inner_shape(xs.begin() + *axis, xs.end());
    const int64_t inner = NumElements(inner_shape);
    const int64_t outer = inner > 0 ? xt.numel() / inner : 0;
    const std::vector<float> scale = Expand(ctx.in(1), inner_shape, 1.f);
    const std::vector<float> bias =
        ctx.has(2) ? Expand(ctx.in(2), inner_shape, 0.f) : std::vector<float>(inner, 0.f);
    float* mean_out =
        ctx.outputs.size() > 1 && ctx.outputs[1] ? ctx.outputs[1]->data<float>() : nullptr;
    float* inv_out =
        ctx.outputs.size() > 2 && ctx.outputs[2] ? ctx.outputs[2]->data<float>() : nullptr;
    for (int64_t r = 0; r < outer; ++r) {
      const float* xp = xt.data<float>() + r * inner;
      float* yp = ctx.out(0).data<float>() + r * inner;
      double mean, var;
      MeanVar(xp, inner, 1, &mean, &var);
      const double inv = 1.0 / std::sqrt(var + static_cast<double>(a_.epsilon));
      for (int64_t i = 0; i < inner; ++i)
        yp[i] = static_cast<float>((xp[i] - mean) * inv * scale[i] + bias[i]);
      if (mean_out) mean_out[r] = static_cast<float>(mean);
      if (inv_out) inv_out[r] = static_cast<float>(inv);
    }
    return OkStatus();
  }

 private:
  explicit LayerNormalizationOp(const Node& node) : Op(node) {}

  // `t` broadcast to `shape` as a dense vector.
  static std::vector<float> Expand(const Tensor& t, const Shape& shape, float fill) {
    std::vector<float> v(static_cast<size_t>(NumElements(shape)), fill);
    const float* src = t.data<float>();
    ForEachBroadcast2(shape, shape, t.shape(),
                      [&](int64_t i, int64_t, int64_t j) { v[i] = src[j]; });
    return v;
  }

  NormAttrs a_;
};

KILN_REGISTER_OP("BatchNormalization", 1, ir::kMaxOpset, &BatchNormalizationOp::Create);
KILN_REGISTER_OP("InstanceNormalization", 1, ir::kMaxOpset, &InstanceNormalizationOp::Create);
KILN_REGISTER_OP("LayerNormalization", 17, ir::kMaxOpset, &LayerNormalizationOp::Create);
KILN_REGISTER_OP("GroupNormalization", 18, ir::kMaxOpset, &GroupNormalizationOp::Create);
// The same op under domain "kiln" (opset 1), for the graph optimizer's fusion of the decomposed
// LayerNormalization that exporters write at opset <= 16 (src/passes/fuse_layernorm.cc).
KILN_REGISTER_OP_DOMAIN("kiln", "LayerNormalization", 1, 1, &LayerNormalizationOp::Create);

// Kernel cases (ops/op_cases.h).
// BatchNormalization in inference, after the former hand-written kernel tests
// (BatchNormalizationAffine): rank 2 to 5, a single channel, the parameters constant
// (cpu.batchnormalization.channels folds them at Prepare) with var in [0.5, 1.5]; opset 9 and 15;
// and what the kernel declines, for the reference: opset 6, training_mode 1, and opset 7's
// per-activation parameters (spatial=0 exports).
OpCase BatchNormCase(const std::string& name, int opset, const Shape& x, const Shape& params,
                     uint32_t seed) {
  OpCase c(name + " " + ShapeToString(x), opset);
  c.In(CaseTensor(x, seed));
  for (uint32_t i = 1; i <= 3; ++i) c.Const(CaseTensor(params, seed + i));
  c.Const(CaseTensor(params, seed + 4, 0.5f, 1.5f));
  return c.Float("epsilon", 1e-3f);
}

std::vector<OpCase> BatchNormalizationCases() {
  std::vector<OpCase> cases;
  uint32_t seed = 120;
  for (const Shape& x :
       std::vector<Shape>{{3, 7}, {2, 5, 9}, {2, 6, 5, 7}, {1, 4, 3, 2, 5}, {2, 1, 3, 1}}) {
    cases.push_back(BatchNormCase("opset 15", 15, x, {x[1]}, seed));
    seed += 5;
  }
  cases.push_back(BatchNormCase("opset 9", 9, {2, 6, 5, 7}, {6}, seed += 5));
  cases.push_back(BatchNormCase("opset 6", 6, {2, 6, 5, 7}, {6}, seed += 5));
  cases.push_back(BatchNormCase("opset 15 training_mode 1", 15, {2, 6, 5, 7}, {6}, seed += 5)
                      .Int("training_mode", 1));
  cases.push_back(BatchNormCase("opset 15 training_mode 1, running statistics, momentum 0.6", 15,
                                {3, 5, 1, 3}, {5}, seed += 5)
                      .Int("training_mode", 1)
                      .Float("momentum", 0.6f)
                      .Outputs(3));
  cases.push_back(
      BatchNormCase("opset 7 per-activation parameters", 7, {2, 3, 2, 4}, {3, 2, 4}, seed += 5));
  return cases;
}
KILN_REGISTER_OP_CASES("", "BatchNormalization", &BatchNormalizationCases);

// LayerNormalization, after the former hand-written kernel tests (LayerNormalization) and
// the former selftest cases: axis -1, 1 and 0 (the normalized dims flattened), Scale and B with
// exactly the normalized dims (as the kernels need them), without B, a size-1 dim, a 768-wide
// row (vector paths and tails), epsilon. ONNX's node only: a Scale broadcast over the normalized
// dims (cpu.layernormalization.onednn declines it), and the Mean and InvStdDev outputs (every
// fast kernel declines them).
std::vector<OpCase> LayerNormShapeCases(int opset) {
  struct Ln {
    Shape x;
    int64_t axis;
    bool bias;
  };
  const Ln shapes[] = {{{2, 5, 48}, -1, true},
                       {{3, 4, 10}, 1, true},
                       {{3, 1, 7}, 0, true},
                       {{3, 1, 7}, -1, false},
                       {{4, 768}, -1, true}};
  std::vector<OpCase> cases;
  uint32_t seed = 160;
  for (const Ln& l : shapes) {
    const int64_t axis = l.axis < 0 ? l.axis + static_cast<int64_t>(l.x.size()) : l.axis;
    const Shape inner(l.x.begin() + axis, l.x.end());
    OpCase c(ShapeToString(l.x) + " axis " + std::to_string(l.axis) + (l.bias ? "" : " no B"),
             opset);
    c.In(CaseTensor(l.x, seed, -2.f, 2.f)).Const(CaseTensor(inner, seed + 1));
    if (l.bias) c.Const(CaseTensor(inner, seed + 2));
    c.Int("axis", l.axis).Float("epsilon", l.x[0] == 4 ? 1e-12f : 1e-5f);
    cases.push_back(std::move(c));
    seed += 3;
  }
  return cases;
}

std::vector<OpCase> LayerNormalizationCases() {
  std::vector<OpCase> cases = LayerNormShapeCases(17);
  cases.push_back(OpCase("[2,3,5] axis 1, Scale and B [5] broadcast", 17)
                      .In(CaseTensor({2, 3, 5}, 180))
                      .Const(CaseTensor({5}, 181))
                      .Const(CaseTensor({5}, 182))
                      .Int("axis", 1));
  cases.push_back(OpCase("[2,5,9] axis -1 with Mean and InvStdDev", 17)
                      .In(CaseTensor({2, 5, 9}, 183))
                      .Const(CaseTensor({9}, 184))
                      .Const(CaseTensor({9}, 185))
                      .Outputs(3));
  return cases;
}
std::vector<OpCase> KilnLayerNormalizationCases() { return LayerNormShapeCases(1); }
KILN_REGISTER_OP_CASES("", "LayerNormalization", &LayerNormalizationCases);
KILN_REGISTER_OP_CASES("kiln", "LayerNormalization", &KilnLayerNormalizationCases);

}  // namespace
}  // namespace kiln::ops
