// LSTM (opsets 7-24; 14 adds `layout`): ONNX's long short-term memory layer, forward, reverse or
// bidirectional, gate order i, o, f, c in W, R and B, peepholes P (i, o, f), `clip` on the gate
// pre-activations, `input_forget` (f = 1 - i), per-batch `sequence_lens` (steps past a sequence's
// length output zeros and leave its state alone; reverse runs from its last valid step).
// Activations: f, g, h default Sigmoid, Tanh, Tanh; Sigmoid, Tanh, Relu, HardSigmoid (alpha,
// beta) and LeakyRelu (alpha) are supported per position, others are refused with the reason.
// Outputs Y [seq, dirs, batch, H] (layout 1: [batch, seq, dirs, H]), Y_h and Y_c [dirs, batch, H]
// (layout 1: [batch, dirs, H]); each optional.
// Reference algorithm: per direction, batch and step, each gate's dot products accumulated in
// double; float32 only; single-threaded.
#include <algorithm>
#include <cmath>

#include "ops/attrs.h"
#include "ops/common.h"

namespace kiln::ops {
namespace {

using ir::ComputeContext;
using ir::InferContext;
using ir::Node;

double Apply(const RnnActivation& a, double x) {
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

class LstmOp final : public ir::Op {
 public:
  explicit LstmOp(const Node& node) : ir::Op(node) {}
  const ir::OpAttrs* attributes() const override { return &a_; }

  static StatusOr<std::unique_ptr<ir::Op>> Create(const Node& node) {
    auto op = std::unique_ptr<LstmOp>(new LstmOp(node));
    const std::string dir = node.GetString("direction", "forward");
    if (dir != "forward" && dir != "reverse" && dir != "bidirectional")
      return ir::AttrError(
          node, "direction must be forward, reverse or bidirectional; got '" + dir + "'");
    op->a_.directions = dir == "bidirectional" ? 2 : 1;
    op->a_.reverse = dir == "reverse";
    op->a_.hidden_size = node.GetInt("hidden_size", -1);
    op->a_.layout = node.GetInt("layout", 0);
    if (op->a_.layout != 0 && op->a_.layout != 1)
      return ir::AttrError(node, "layout must be 0 or 1; got " + std::to_string(op->a_.layout));
    op->a_.input_forget = node.GetInt("input_forget", 0) != 0;
    if (node.HasAttr("clip")) {
      op->a_.clip = node.GetFloat("clip", 0.f);
      if (!(op->a_.clip > 0))
        return ir::AttrError(node, "clip must be > 0; got " + std::to_string(op->a_.clip));
    }
    const std::vector<std::string> defaults = {"Sigmoid", "Tanh", "Tanh"};
    std::vector<std::string> names;
    if (node.HasAttr("activations")) names = node.attrs.at("activations").strings;
    if (names.empty())
      for (int d = 0; d < op->a_.directions; ++d)
        names.insert(names.end(), defaults.begin(), defaults.end());
    if (names.size() != static_cast<size_t>(3 * op->a_.directions))
      return ir::AttrError(node, "activations must list 3 per direction (" +
                                     std::to_string(3 * op->a_.directions) + "); got " +
                                     std::to_string(names.size()));
    const std::vector<float> alphas = node.GetFloats("activation_alpha");
    const std::vector<float> betas = node.GetFloats("activation_beta");
    size_t next_alpha = 0, next_beta = 0;  // the lists hold values only for kinds that take them
    for (const std::string& n : names) {
      RnnActivation a;
      if (n == "Sigmoid") {
        a.kind = RnnActivation::kSigmoid;
      } else if (n == "Tanh") {
        a.kind = RnnActivation::kTanh;
      } else if (n == "Relu") {
        a.kind = RnnActivation::kRelu;
      } else if (n == "HardSigmoid") {
        a.kind = RnnActivation::kHardSigmoid;
        a.alpha = next_alpha < alphas.size() ? alphas[next_alpha++] : 0.2;
        a.beta = next_beta < betas.size() ? betas[next_beta++] : 0.5;
      } else if (n == "LeakyRelu") {
        a.kind = RnnActivation::kLeakyRelu;
        a.alpha = next_alpha < alphas.size() ? alphas[next_alpha++] : 0.01;
      } else {
        return ir::AttrError(node, "activation '" + n +
                                       "' is not supported (Sigmoid, Tanh, Relu, HardSigmoid, "
                                       "LeakyRelu are)");
      }
      op->a_.acts.push_back(a);
    }
    return std::unique_ptr<ir::Op>(std::move(op));
  }

  Status Infer(InferContext& ctx) const override {
    for (size_t i : {0, 1, 2, 3, 5, 6, 7})
      if (ctx.has_input(i)) KILN_RETURN_IF_ERROR(ctx.ExpectDtype(i, {DataType::kFloat}));
    if (ctx.has_input(4)) KILN_RETURN_IF_ERROR(ctx.ExpectDtype(4, {DataType::kInt32}));
    if (!ctx.has_input(1) || !ctx.has_input(2)) return ctx.Error("W and R are required");
    if (ctx.rank(0) != 3)
      return ctx.Error("X must have rank 3; got " + ShapeToString(ctx.shape(0)));
    const int64_t seq = ctx.shape(0)[a_.layout ? 1 : 0], batch = ctx.shape(0)[a_.layout ? 0 : 1];
    const int64_t in = ctx.shape(0)[2];
    const Shape& w = ctx.shape(1);
    const Shape& r = ctx.shape(2);
    if (w.size() != 3 || w[0] != a_.directions || w[1] % 4 != 0 || w[2] != in)
      return ctx.Error("W must be [" + std::to_string(a_.directions) + ", 4*hidden, " +
                       std::to_string(in) + "]; got " + ShapeToString(w));
    const int64_t h = w[1] / 4;
    if (a_.hidden_size >= 0 && h != a_.hidden_size)
      return ctx.Error("W gives hidden size " + std::to_string(h) + ", a_.hidden_sizesize is " +
                       std::to_string(a_.hidden_size));
    if (r != Shape{a_.directions, 4 * h, h})
      return ctx.Error("R must be " + ShapeToString({a_.directions, 4 * h, h}) + "; got " +
                       ShapeToString(r));
    auto expect = [&](size_t i, const Shape& want, const char* name) -> Status {
      if (ctx.has_input(i) && ctx.shape(i) != want)
        return ctx.Error(std::string(name) + " must be " + ShapeToString(want) + "; got " +
                         ShapeToString(ctx.shape(i)));
      return OkStatus();
    };
    KILN_RETURN_IF_ERROR(expect(3, {a_.directions, 8 * h}, "B"));
    KILN_RETURN_IF_ERROR(expect(4, {batch}, "sequence_lens"));
    const Shape state = a_.layout ? Shape{batch, a_.directions, h} : Shape{a_.directions, batch, h};
    KILN_RETURN_IF_ERROR(expect(5, state, "initial_h"));
    KILN_RETURN_IF_ERROR(expect(6, state, "initial_c"));
    KILN_RETURN_IF_ERROR(expect(7, {a_.directions, 3 * h}, "P"));
    if (ctx.num_outputs() > 0)
      ctx.SetOutput(
          0, DataType::kFloat,
          a_.layout ? Shape{batch, seq, a_.directions, h} : Shape{seq, a_.directions, batch, h});
    for (size_t o = 1; o < std::min<size_t>(ctx.num_outputs(), 3); ++o)
      ctx.SetOutput(o, DataType::kFloat, state);
    return OkStatus();
  }

  Status Compute(const ComputeContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    const int64_t seq = x.shape()[a_.layout ? 1 : 0], batch = x.shape()[a_.layout ? 0 : 1];
    const int64_t in = x.shape()[2];
    const int64_t h = ctx.in(1).shape()[1] / 4;
    const float* X = x.data<float>();
    auto x_at = [&](int64_t t, int64_t b) {
      return X + (a_.layout ? (b * seq + t) : (t * batch + b)) * in;
    };
    // State index for (direction, batch) in either layout.
    auto st = [&](int64_t d, int64_t b) {
      return (a_.layout ? b * a_.directions + d : d * batch + b) * h;
    };
    float* Y = ctx.outputs.size() > 0 && ctx.outputs[0] ? ctx.out(0).data<float>() : nullptr;
    if (Y != nullptr) std::fill(Y, Y + ctx.out(0).numel(), 0.f);
    std::vector<double> hs(static_cast<size_t>(a_.directions * batch * h), 0.0), cs(hs.size(), 0.0);
    for (int64_t i = 0; i < a_.directions * batch * h; ++i) {
      if (ctx.has(5)) hs[i] = ctx.in(5).data<float>()[i];
      if (ctx.has(6)) cs[i] = ctx.in(6).data<float>()[i];
    }
    std::vector<double> gates(4 * h), hprev(h);
    for (int64_t d = 0; d < a_.directions; ++d) {
      const bool rev = a_.reverse || d == 1;
      const float* W = ctx.in(1).data<float>() + d * 4 * h * in;
      const float* R = ctx.in(2).data<float>() + d * 4 * h * h;
      const float* B = ctx.has(3) ? ctx.in(3).data<float>() + d * 8 * h : nullptr;
      const float* P = ctx.has(7) ? ctx.in(7).data<float>() + d * 3 * h : nullptr;
      const RnnActivation& f = a_.acts[3 * d];
      const RnnActivation& g = a_.acts[3 * d + 1];
      const RnnActivation& hact = a_.acts[3 * d + 2];
      for (int64_t b = 0; b < batch; ++b) {
        int64_t len = seq;
        if (ctx.has(4)) {
          len = ctx.in(4).data<int32_t>()[b];
          if (len < 0 || len > seq)
            return RunError("sequence_lens[" + std::to_string(b) + "] must be in [0, " +
                            std::to_string(seq) + "]; got " + std::to_string(len));
        }
        double* hb = hs.data() + st(d, b);
        double* cb = cs.data() + st(d, b);
        for (int64_t k = 0; k < len; ++k) {
          const int64_t t = rev ? len - 1 - k : k;
          const float* xt = x_at(t, b);
          std::copy(hb, hb + h, hprev.begin());
          for (int64_t j = 0; j < 4 * h; ++j) {
            double acc = B ? static_cast<double>(B[j]) + B[4 * h + j] : 0.0;
            const float* wr = W + j * in;
            for (int64_t i = 0; i < in; ++i) acc += static_cast<double>(wr[i]) * xt[i];
            const float* rr = R + j * h;
            for (int64_t i = 0; i < h; ++i) acc += static_cast<double>(rr[i]) * hprev[i];
            gates[j] = acc;
          }
          auto clip = [&](double v) { return a_.clip > 0 ? std::clamp(v, -a_.clip, a_.clip) : v; };
          for (int64_t i = 0; i < h; ++i) {
            // iofc
            double gi = gates[i] + (P ? P[i] * cb[i] : 0.0);
            double gf = gates[2 * h + i] + (P ? P[2 * h + i] * cb[i] : 0.0);
            const double it = Apply(f, clip(gi));
            const double ft = a_.input_forget ? 1.0 - it : Apply(f, clip(gf));
            const double ct = Apply(g, clip(gates[3 * h + i]));
            const double c_new = ft * cb[i] + it * ct;
            const double go = gates[h + i] + (P ? P[h + i] * c_new : 0.0);
            const double ot = Apply(f, clip(go));
            cb[i] = c_new;
            hb[i] = ot * Apply(hact, c_new);
          }
          if (Y != nullptr) {
            float* yt = Y + (a_.layout ? ((b * seq + t) * a_.directions + d) * h
                                       : ((t * a_.directions + d) * batch + b) * h);
            for (int64_t i = 0; i < h; ++i) yt[i] = static_cast<float>(hb[i]);
          }
        }
      }
    }
    for (size_t o = 1; o < std::min<size_t>(ctx.outputs.size(), 3); ++o) {
      if (ctx.outputs[o] == nullptr) continue;
      const std::vector<double>& src = o == 1 ? hs : cs;
      float* dst = ctx.out(o).data<float>();
      for (size_t i = 0; i < src.size(); ++i) dst[i] = static_cast<float>(src[i]);
    }
    return OkStatus();
  }

 private:
  LstmAttrs a_;
};

KILN_REGISTER_OP("LSTM", 7, ir::kMaxOpset, &LstmOp::Create);

}  // namespace
}  // namespace kiln::ops
