// The optimizers of the ai.onnx.preview.training domain (opset 1): Adagrad, Adam and Momentum
// (standard and Nesterov), one update step of n tensors at once. Inputs: R (learning rate,
// float scalar), T (update count, int64 scalar), then n X, n G, and per state n V and/or n H;
// outputs: n new X, then the new states in the inputs' order. Reference kernels in double,
// rounded to float32 (or kept double for float64 tensors), as ONNX's definitions read:
//   Adagrad:  r' = R / (1 + T * decay_factor); g = norm_coefficient * X + G; H' = H + g^2;
//             X' = X - r' * g / (sqrt(H') + epsilon)
//   Adam:     g = norm_coefficient * X + G; V' = alpha V + (1 - alpha) g;
//             H' = beta H + (1 - beta) g^2; r' = T > 0 ? R sqrt(1 - beta^T) / (1 - alpha^T) : R;
//             X' = (1 - norm_coefficient_post) (X - r' V' / (sqrt(H') + epsilon))
//   Momentum: g = norm_coefficient * X + G; V' = alpha V + (T > 0 ? beta : 1) g;
//             X' = X - R V' (standard) or X - R (g + alpha V') (nesterov)
// kiln is an inference engine; these run training graphs' update steps as written, on the CPU
// reference only.
#include <cmath>
#include <string>

#include "ops/common.h"
#include "ops/op_cases.h"

namespace kiln::ops {
namespace {

constexpr const char* kDomain = "ai.onnx.preview.training";

enum class Optimizer { kAdagrad, kAdam, kMomentum };

struct OptimizerAttrs : ir::OpAttrs {
  Optimizer kind = Optimizer::kAdagrad;
  int states = 1;  // tensors of state per X: Adagrad H; Adam V, H; Momentum V
  float decay_factor = 0, epsilon = 0, norm_coefficient = 0, norm_coefficient_post = 0;
  float alpha = 0, beta = 0;
  bool nesterov = false;
};

class OptimizerOp final : public ir::Op {
 public:
  static StatusOr<std::unique_ptr<ir::Op>> Create(const ir::Node& node, Optimizer kind) {
    auto op = std::make_unique<OptimizerOp>(node);
    OptimizerAttrs& a = op->a_;
    a.kind = kind;
    a.norm_coefficient = node.GetFloat("norm_coefficient", 0.f);
    if (kind == Optimizer::kAdagrad) {
      a.decay_factor = node.GetFloat("decay_factor", 0.f);
      a.epsilon = node.GetFloat("epsilon", 1e-6f);
    } else if (kind == Optimizer::kAdam) {
      a.states = 2;
      a.alpha = node.GetFloat("alpha", 0.9f);
      a.beta = node.GetFloat("beta", 0.999f);
      a.epsilon = node.GetFloat("epsilon", 1e-6f);
      a.norm_coefficient_post = node.GetFloat("norm_coefficient_post", 0.f);
    } else {
      for (const char* required : {"alpha", "beta", "mode", "norm_coefficient"})
        if (!node.HasAttr(required))
          return ir::AttrError(
              node, std::string("the `") + required + "` attribute is required; got none");
      a.alpha = node.GetFloat("alpha", 0.f);
      a.beta = node.GetFloat("beta", 0.f);
      const std::string mode = node.GetString("mode", "");
      if (mode != "standard" && mode != "nesterov")
        return ir::AttrError(node, "mode must be 'standard' or 'nesterov'; got '" + mode + "'");
      a.nesterov = mode == "nesterov";
    }
    const size_t per = 2 + static_cast<size_t>(a.states);  // X, G and the states
    const size_t n_in = node.inputs.size();
    if (n_in < 2 + per || (n_in - 2) % per != 0)
      return ir::AttrError(node, "needs R, T and " + std::to_string(per) +
                                     " inputs per optimized tensor; got " + std::to_string(n_in) +
                                     " inputs");
    const size_t n = (n_in - 2) / per;
    if (node.outputs.size() != n * (1 + static_cast<size_t>(a.states)))
      return ir::AttrError(node, "needs " + std::to_string(n * (1 + a.states)) + " outputs for " +
                                     std::to_string(n) + " tensors; got " +
                                     std::to_string(node.outputs.size()));
    op->n_ = static_cast<int64_t>(n);
    return std::unique_ptr<ir::Op>(std::move(op));
  }
  explicit OptimizerOp(const ir::Node& node) : Op(node) {}

  Status Infer(ir::InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(0, {DataType::kFloat, DataType::kDouble}));
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(1, {DataType::kInt64}));
    if (NumElements(ctx.shape(0)) != 1 || NumElements(ctx.shape(1)) != 1)
      return ctx.Error("R and T must be scalars; got " + ShapeToString(ctx.shape(0)) + " and " +
                       ShapeToString(ctx.shape(1)));
    const int64_t per = 2 + a_.states;
    for (int64_t i = 0; i < n_; ++i) {
      const size_t x = static_cast<size_t>(2 + i);
      KILN_RETURN_IF_ERROR(ctx.ExpectDtype(x, {DataType::kFloat, DataType::kDouble}));
      for (int64_t k = 1; k < per; ++k) {
        const size_t j = static_cast<size_t>(2 + k * n_ + i);
        if (ctx.dtype(j) != ctx.dtype(x) || ctx.shape(j) != ctx.shape(x))
          return ctx.Error("input " + std::to_string(j) + " must have X" + std::to_string(i) +
                           "'s dtype and shape " + ShapeToString(ctx.shape(x)) + "; got " +
                           DataTypeName(ctx.dtype(j)) + ShapeToString(ctx.shape(j)));
      }
      for (int64_t k = 0; k <= a_.states; ++k)
        ctx.SetOutput(static_cast<size_t>(k * n_ + i), ctx.dtype(x), ctx.shape(x));
    }
    return OkStatus();
  }

  Status Compute(const ir::ComputeContext& ctx) const override {
    const double r = ReadScalarAsDouble(ctx.in(0), 0);
    const int64_t t = ctx.in(1).data<int64_t>()[0];
    for (int64_t i = 0; i < n_; ++i) {
      const Tensor& x = ctx.in(static_cast<size_t>(2 + i));
      if (x.dtype() == DataType::kDouble)
        Step<double>(ctx, i, r, t);
      else
        Step<float>(ctx, i, r, t);
    }
    return OkStatus();
  }

  const ir::OpAttrs* attributes() const override { return &a_; }

 private:
  template <typename T>
  void Step(const ir::ComputeContext& ctx, int64_t i, double r, int64_t t) const {
    const OptimizerAttrs& a = a_;
    auto in = [&](int64_t k) { return ctx.in(static_cast<size_t>(2 + k * n_ + i)).data<T>(); };
    auto out = [&](int64_t k) { return ctx.out(static_cast<size_t>(k * n_ + i)).data<T>(); };
    const T *x = in(0), *g = in(1), *s1 = in(2), *s2 = a.states > 1 ? in(3) : nullptr;
    T *x_new = out(0), *s1_new = out(1), *s2_new = a.states > 1 ? out(2) : nullptr;
    const int64_t count = ctx.in(static_cast<size_t>(2 + i)).numel();
    const double td = static_cast<double>(t);
    for (int64_t e = 0; e < count; ++e) {
      const double xe = x[e], gr = a.norm_coefficient * xe + static_cast<double>(g[e]);
      if (a.kind == Optimizer::kAdagrad) {
        const double h = static_cast<double>(s1[e]) + gr * gr;
        const double rate = r / (1 + td * a.decay_factor);
        x_new[e] = static_cast<T>(xe - rate * gr / (std::sqrt(h) + a.epsilon));
        s1_new[e] = static_cast<T>(h);
      } else if (a.kind == Optimizer::kAdam) {
        const double v = a.alpha * static_cast<double>(s1[e]) + (1 - a.alpha) * gr;
        const double h = a.beta * static_cast<double>(s2[e]) + (1 - a.beta) * gr * gr;
        const double rate = t > 0 ? r * std::sqrt(1 - std::pow(static_cast<double>(a.beta), td)) /
                                        (1 - std::pow(static_cast<double>(a.alpha), td))
                                  : r;
        const double stepped = xe - rate * (v / (std::sqrt(h) + a.epsilon));
        x_new[e] = static_cast<T>((1 - a.norm_coefficient_post) * stepped);
        s1_new[e] = static_cast<T>(v);
        s2_new[e] = static_cast<T>(h);
      } else {
        const double v = a.alpha * static_cast<double>(s1[e]) + (t > 0 ? a.beta : 1.0) * gr;
        x_new[e] = static_cast<T>(a.nesterov ? xe - r * (gr + a.alpha * v) : xe - r * v);
        s1_new[e] = static_cast<T>(v);
      }
    }
  }

  OptimizerAttrs a_;
  int64_t n_ = 1;
};

StatusOr<std::unique_ptr<ir::Op>> CreateAdagrad(const ir::Node& n) {
  return OptimizerOp::Create(n, Optimizer::kAdagrad);
}
StatusOr<std::unique_ptr<ir::Op>> CreateAdam(const ir::Node& n) {
  return OptimizerOp::Create(n, Optimizer::kAdam);
}
StatusOr<std::unique_ptr<ir::Op>> CreateMomentum(const ir::Node& n) {
  return OptimizerOp::Create(n, Optimizer::kMomentum);
}
KILN_REGISTER_OP_DOMAIN(kDomain, "Adagrad", 1, 1, &CreateAdagrad);
KILN_REGISTER_OP_DOMAIN(kDomain, "Adam", 1, 1, &CreateAdam);
KILN_REGISTER_OP_DOMAIN(kDomain, "Momentum", 1, 1, &CreateMomentum);

// Cases: one and two tensors (odd shapes), T = 0 (no bias correction, Momentum's beta unused)
// and T > 0, each optimizer's attributes set away from their defaults.
OpCase OptimizerCase(const std::string& name, int tensors, int states, int64_t t, uint32_t seed) {
  OpCase c(name, 1);
  c.In(CaseFloats({0.1f}, {})).In(CaseInt64s({t}).Reshaped({}));
  const Shape shapes[] = {{3, 1, 5}, {7}};
  for (int k = 0; k < 2 + states; ++k)
    for (int i = 0; i < tensors; ++i)
      c.In(k >= 2 ? CaseTensor(shapes[i], seed++, 0.f, 1.f) : CaseTensor(shapes[i], seed++));
  return c.Outputs(tensors * (1 + states));
}

std::vector<OpCase> AdagradCases() {
  return {OptimizerCase("one tensor T 0", 1, 1, 0, 1)
              .Float("decay_factor", 0.1f)
              .Float("epsilon", 1e-5f)
              .Float("norm_coefficient", 0.01f),
          OptimizerCase("two tensors T 3", 2, 1, 3, 11).Float("decay_factor", 0.5f)};
}
std::vector<OpCase> AdamCases() {
  return {OptimizerCase("one tensor T 0", 1, 2, 0, 21).Float("epsilon", 1e-7f),
          OptimizerCase("two tensors T 4", 2, 2, 4, 31)
              .Float("alpha", 0.8f)
              .Float("beta", 0.95f)
              .Float("norm_coefficient", 0.001f)
              .Float("norm_coefficient_post", 0.01f)};
}
std::vector<OpCase> MomentumCases() {
  std::vector<OpCase> c;
  for (const char* mode : {"standard", "nesterov"})
    for (int64_t t : {0, 2})
      c.push_back(
          OptimizerCase(std::string(mode) + " T " + std::to_string(t), t == 0 ? 1 : 2, 1, t, 41)
              .Float("alpha", 0.9f)
              .Float("beta", 0.7f)
              .Str("mode", mode)
              .Float("norm_coefficient", 0.02f));
  return c;
}
KILN_REGISTER_OP_CASES(kDomain, "Adagrad", &AdagradCases);
KILN_REGISTER_OP_CASES(kDomain, "Adam", &AdamCases);
KILN_REGISTER_OP_CASES(kDomain, "Momentum", &MomentumCases);

}  // namespace
}  // namespace kiln::ops
