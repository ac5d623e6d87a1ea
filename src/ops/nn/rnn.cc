#include "ops/nn/rnn.h"

#include <algorithm>
#include <cmath>

#include "ops/common.h"

namespace kiln::ops {

Status ParseRnnAttrs(const ir::Node& node, const std::vector<std::string>& defaults, RnnAttrs* a) {
  const std::string dir = node.GetString("direction", "forward");
  if (dir != "forward" && dir != "reverse" && dir != "bidirectional")
    return ir::AttrError(node,
                         "direction must be forward, reverse or bidirectional; got '" + dir + "'");
  a->directions = dir == "bidirectional" ? 2 : 1;
  a->reverse = dir == "reverse";
  a->hidden_size = node.GetInt("hidden_size", -1);
  a->layout = node.GetInt("layout", 0);
  if (a->layout != 0 && a->layout != 1)
    return ir::AttrError(node, "layout must be 0 or 1; got " + std::to_string(a->layout));
  if (node.HasAttr("clip")) {
    a->clip = node.GetFloat("clip", 0.f);
    if (!(a->clip > 0))
      return ir::AttrError(node, "clip must be > 0; got " + std::to_string(a->clip));
  }
  const size_t per_dir = defaults.size();
  std::vector<std::string> names;
  if (node.HasAttr("activations")) names = node.attrs.at("activations").strings;
  if (names.empty())
    for (int64_t d = 0; d < a->directions; ++d)
      names.insert(names.end(), defaults.begin(), defaults.end());
  if (names.size() != per_dir * a->directions)
    return ir::AttrError(node, "activations must list " + std::to_string(per_dir) +
                                   " per direction (" + std::to_string(per_dir * a->directions) +
                                   "); got " + std::to_string(names.size()));
  const std::vector<float> alphas = node.GetFloats("activation_alpha");
  const std::vector<float> betas = node.GetFloats("activation_beta");
  size_t next_alpha = 0, next_beta = 0;  // the lists hold values only for kinds that take them
  a->acts.clear();
  for (const std::string& n : names) {
    RnnActivation act;
    if (n == "Sigmoid") {
      act.kind = RnnActivation::kSigmoid;
    } else if (n == "Tanh") {
      act.kind = RnnActivation::kTanh;
    } else if (n == "Relu") {
      act.kind = RnnActivation::kRelu;
    } else if (n == "HardSigmoid") {
      act.kind = RnnActivation::kHardSigmoid;
      act.alpha = next_alpha < alphas.size() ? alphas[next_alpha++] : 0.2;
      act.beta = next_beta < betas.size() ? betas[next_beta++] : 0.5;
    } else if (n == "LeakyRelu") {
      act.kind = RnnActivation::kLeakyRelu;
      act.alpha = next_alpha < alphas.size() ? alphas[next_alpha++] : 0.01;
    } else {
      return ir::AttrError(node, "activation '" + n +
                                     "' is not supported (Sigmoid, Tanh, Relu, HardSigmoid, "
                                     "LeakyRelu are)");
    }
    a->acts.push_back(act);
  }
  return OkStatus();
}

double ApplyRnnActivation(const RnnActivation& a, double x) {
  switch (a.kind) {
    case RnnActivation::kSigmoid:
      return 1.0 / (1.0 + std::exp(-x));
    case RnnActivation::kTanh:
      return std::tanh(x);
    case RnnActivation::kRelu:
      return std::max(0.0, x);
    case RnnActivation::kHardSigmoid:
      return std::clamp(a.alpha * x + a.beta, 0.0, 1.0);
    case RnnActivation::kLeakyRelu:
      return x >= 0 ? x : a.alpha * x;
  }
  return x;
}

Status InferRnnCommon(ir::InferContext& ctx, const RnnAttrs& a, int64_t gates, int64_t* hidden) {
  for (size_t i : {0, 1, 2, 3, 5})
    if (ctx.has_input(i)) KILN_RETURN_IF_ERROR(ctx.ExpectDtype(i, {DataType::kFloat}));
  if (ctx.has_input(4)) KILN_RETURN_IF_ERROR(ctx.ExpectDtype(4, {DataType::kInt32}));
  if (!ctx.has_input(1) || !ctx.has_input(2)) return ctx.Error("W and R are required");
  if (ctx.rank(0) != 3) return ctx.Error("X must have rank 3; got " + ShapeToString(ctx.shape(0)));
  const int64_t seq = ctx.shape(0)[a.layout ? 1 : 0], batch = ctx.shape(0)[a.layout ? 0 : 1];
  const int64_t in = ctx.shape(0)[2];
  const Shape& w = ctx.shape(1);
  const std::string g = std::to_string(gates);
  if (w.size() != 3 || w[0] != a.directions || w[1] % gates != 0 || w[2] != in)
    return ctx.Error("W must be [" + std::to_string(a.directions) + ", " + g + "*hidden, " +
                     std::to_string(in) + "]; got " + ShapeToString(w));
  const int64_t h = w[1] / gates;
  if (a.hidden_size >= 0 && h != a.hidden_size)
    return ctx.Error("W gives hidden size " + std::to_string(h) + ", hidden_size is " +
                     std::to_string(a.hidden_size));
  if (ctx.shape(2) != Shape{a.directions, gates * h, h})
    return ctx.Error("R must be " + ShapeToString({a.directions, gates * h, h}) + "; got " +
                     ShapeToString(ctx.shape(2)));
  auto expect = [&](size_t i, const Shape& want, const char* name) -> Status {
    if (ctx.has_input(i) && ctx.shape(i) != want)
      return ctx.Error(std::string(name) + " must be " + ShapeToString(want) + "; got " +
                       ShapeToString(ctx.shape(i)));
    return OkStatus();
  };
  KILN_RETURN_IF_ERROR(expect(3, {a.directions, 2 * gates * h}, "B"));
  KILN_RETURN_IF_ERROR(expect(4, {batch}, "sequence_lens"));
  const Shape state = a.layout ? Shape{batch, a.directions, h} : Shape{a.directions, batch, h};
  KILN_RETURN_IF_ERROR(expect(5, state, "initial_h"));
  if (ctx.num_outputs() > 0)
    ctx.SetOutput(
        0, DataType::kFloat,
        a.layout ? Shape{batch, seq, a.directions, h} : Shape{seq, a.directions, batch, h});
  if (ctx.num_outputs() > 1) ctx.SetOutput(1, DataType::kFloat, state);
  *hidden = h;
  return OkStatus();
}

StatusOr<int64_t> RnnSeqLen(const ir::Op& op, const ir::ComputeContext& ctx, int64_t b,
                            int64_t seq) {
  if (!ctx.has(4)) return seq;
  const int64_t len = ctx.in(4).data<int32_t>()[b];
  if (len < 0 || len > seq)
    return op.RunError("sequence_lens[" + std::to_string(b) + "] must be in [0, " +
                       std::to_string(seq) + "]; got " + std::to_string(len));
  return len;
}

}  // namespace kiln::ops
