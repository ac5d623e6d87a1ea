// GRU and RNN (opsets 7-24; 14 adds `layout`; 22 only widens the types): ONNX's gated recurrent
// unit and its simple recurrent layer, forward, reverse or bidirectional, with the attributes,
// checks, `clip` and per-batch `sequence_lens` semantics of LSTM (ops/nn/rnn.h: steps past a
// sequence's length output zeros and leave its state alone; reverse runs from its last valid
// step).
//
// GRU, gate order z, r, h in W [dirs, 3H, in], R [dirs, 3H, H] and B [dirs, 6H] (Wb then Rb);
// activations f, g (default Sigmoid, Tanh) per direction:
//   z = f(x W_z + h R_z + Wb_z + Rb_z),  r = f(x W_r + h R_r + Wb_r + Rb_r)
//   linear_before_reset 0: h~ = g(x W_h + (r . h) R_h + Rb_h + Wb_h)
//   linear_before_reset 1: h~ = g(x W_h + r . (h R_h + Rb_h) + Wb_h)   (PyTorch's nn.GRU)
//   h' = (1 - z) . h~ + z . h
// RNN, W [dirs, H, in], R [dirs, H, H], B [dirs, 2H]; activation f (default Tanh):
//   h' = f(x W + h R + Wb + Rb)
// Outputs Y [seq, dirs, batch, H] (layout 1: [batch, seq, dirs, H]) and Y_h [dirs, batch, H]
// (layout 1: [batch, dirs, H]); each optional.
// Reference algorithm: per direction, batch row and step, every dot product accumulated in
// double, the state kept in double; float32 only; single-threaded.
#include <algorithm>
#include <string>
#include <vector>

#include "ops/common.h"
#include "ops/nn/rnn.h"
#include "ops/op_cases.h"

namespace kiln::ops {
namespace {

using ir::ComputeContext;
using ir::InferContext;
using ir::Node;

class GruOp final : public ir::Op {
 public:
  explicit GruOp(const Node& node) : ir::Op(node) {}
  const ir::OpAttrs* attributes() const override { return &a_; }

  static StatusOr<std::unique_ptr<ir::Op>> Create(const Node& node) {
    auto op = std::unique_ptr<GruOp>(new GruOp(node));
    op->a_.linear_before_reset = node.GetInt("linear_before_reset", 0) != 0;
    KILN_RETURN_IF_ERROR(ParseRnnAttrs(node, {"Sigmoid", "Tanh"}, &op->a_));
    return std::unique_ptr<ir::Op>(std::move(op));
  }

  Status Infer(InferContext& ctx) const override {
    int64_t h = 0;
    return InferRnnCommon(ctx, a_, 3, &h);
  }

  Status Compute(const ComputeContext& ctx) const override {
    const int64_t in = ctx.in(0).shape()[2], h = ctx.in(1).shape()[1] / 3;
    std::vector<double> g(static_cast<size_t>(3 * h)), rh(static_cast<size_t>(h)),
        hr(static_cast<size_t>(h));
    auto step = [&](int64_t d, const double* hprev, const float* xt, double* hb, double*) {
      const float* W = ctx.in(1).data<float>() + d * 3 * h * in;
      const float* R = ctx.in(2).data<float>() + d * 3 * h * h;
      const float* Wb = ctx.has(3) ? ctx.in(3).data<float>() + d * 6 * h : nullptr;
      const float* Rb = Wb != nullptr ? Wb + 3 * h : nullptr;
      const RnnActivation& f = a_.acts[2 * d];
      const RnnActivation& gact = a_.acts[2 * d + 1];
      // g = x W^T + Wb for the three gates; z and r also get h R^T + Rb.
      for (int64_t j = 0; j < 3 * h; ++j)
        g[j] = Wb != nullptr ? static_cast<double>(Wb[j]) + (j < 2 * h ? Rb[j] : 0.0) : 0.0;
      AddRowDots(W, 3 * h, in, xt, g.data());
      AddRowDots(R, 2 * h, h, hprev, g.data());
      for (int64_t i = 0; i < 2 * h; ++i) g[i] = ApplyRnnActivation(f, RnnClip(a_, g[i]));
      const double* z = g.data();
      const double* r = g.data() + h;
      // hr = (linear_before_reset ? h : r . h) R_h^T + Rb_h
      for (int64_t i = 0; i < h; ++i) {
        rh[i] = a_.linear_before_reset ? hprev[i] : r[i] * hprev[i];
        hr[i] = Rb != nullptr ? Rb[2 * h + i] : 0.0;
      }
      AddRowDots(R + 2 * h * h, h, h, rh.data(), hr.data());
      for (int64_t i = 0; i < h; ++i) {
        const double pre = g[2 * h + i] + (a_.linear_before_reset ? r[i] * hr[i] : hr[i]);
        const double cand = ApplyRnnActivation(gact, RnnClip(a_, pre));
        hb[i] = (1.0 - z[i]) * cand + z[i] * hprev[i];
      }
    };
    return RunRnnReference(*this, ctx, a_, 3, false, step);
  }

 private:
  GruAttrs a_;
};

class RnnOp final : public ir::Op {
 public:
  explicit RnnOp(const Node& node) : ir::Op(node) {}
  const ir::OpAttrs* attributes() const override { return &a_; }

  static StatusOr<std::unique_ptr<ir::Op>> Create(const Node& node) {
    auto op = std::unique_ptr<RnnOp>(new RnnOp(node));
    KILN_RETURN_IF_ERROR(ParseRnnAttrs(node, {"Tanh"}, &op->a_));
    return std::unique_ptr<ir::Op>(std::move(op));
  }

  Status Infer(InferContext& ctx) const override {
    int64_t h = 0;
    return InferRnnCommon(ctx, a_, 1, &h);
  }

  Status Compute(const ComputeContext& ctx) const override {
    const int64_t in = ctx.in(0).shape()[2], h = ctx.in(1).shape()[1];
    auto step = [&](int64_t d, const double* hprev, const float* xt, double* hb, double*) {
      const float* Wb = ctx.has(3) ? ctx.in(3).data<float>() + d * 2 * h : nullptr;
      for (int64_t i = 0; i < h; ++i)
        hb[i] = Wb != nullptr ? static_cast<double>(Wb[i]) + Wb[h + i] : 0.0;
      AddRowDots(ctx.in(1).data<float>() + d * h * in, h, in, xt, hb);
      AddRowDots(ctx.in(2).data<float>() + d * h * h, h, h, hprev, hb);
      for (int64_t i = 0; i < h; ++i) hb[i] = ApplyRnnActivation(a_.acts[d], RnnClip(a_, hb[i]));
    };
    return RunRnnReference(*this, ctx, a_, 1, false, step);
  }

 private:
  RnnAttrs a_;
};

KILN_REGISTER_OP("GRU", 7, ir::kMaxOpset, &GruOp::Create);
KILN_REGISTER_OP("RNN", 7, ir::kMaxOpset, &RnnOp::Create);

// Kernel cases (ops/op_cases.h) of GRU and RNN, after the former hand-written kernel tests
// (GruAndRnnLoops) and the former selftest cases: 5 steps of 7 inputs; each direction, both
// layouts, both linear_before_reset forms, hidden sizes 6 and 21 (the loops' 8-wide gate vectors
// and their tails), with and without B and initial_h, sequence_lens {5, 2, 0}, RNN's Tanh and
// Relu, one or two outputs, weights constant or computed, a batch of 1; and what the loops decline
// (clip, other activations), for the reference.
struct RecurrentShape {
  const char* direction;
  int64_t layout, lbr;  // lbr: GRU's linear_before_reset
  bool bias, h0;
  const char* act;  // RNN: "" (Tanh by default), "Tanh" or "Relu"
  bool lens;        // sequence_lens {5, 2, 0} (batch 3)
  int64_t batch, h;
  int outputs;
  bool const_weights;
};

OpCase RecurrentCase(const std::string& op, const RecurrentShape& s, uint32_t seed) {
  const int64_t seq = 5, in = 7, h = s.h, gates = op == "GRU" ? 3 : 1;
  const int64_t dirs = std::string(s.direction) == "bidirectional" ? 2 : 1;
  const Shape xs = s.layout ? Shape{s.batch, seq, in} : Shape{seq, s.batch, in};
  const Shape ss = s.layout ? Shape{s.batch, dirs, h} : Shape{dirs, s.batch, h};
  OpCase c(op + " " + s.direction + " layout " + std::to_string(s.layout) +
               (op == "GRU" ? " linear_before_reset " + std::to_string(s.lbr) : "") + " batch " +
               std::to_string(s.batch) + " H " + std::to_string(h) + (s.bias ? " B" : "") +
               (s.lens ? " sequence_lens" : "") + (s.h0 ? " initial_h" : "") + (*s.act ? " " : "") +
               s.act + ", " + std::to_string(s.outputs) +
               (s.outputs == 1 ? " output" : " outputs") + (s.const_weights ? "" : ", W computed"),
           14);
  const bool w = s.const_weights;
  c.inputs = {{CaseTensor(xs, seed), false},
              {CaseTensor({dirs, gates * h, in}, seed + 1), w},
              {CaseTensor({dirs, gates * h, h}, seed + 2), w},
              {s.bias ? CaseTensor({dirs, 2 * gates * h}, seed + 3) : Tensor(), w},
              {s.lens ? Tensor::FromVector<int32_t>({5, 2, 0}, {3}) : Tensor(), false},
              {s.h0 ? CaseTensor(ss, seed + 4) : Tensor(), false}};
  while (!c.inputs.back().value.defined()) c.inputs.pop_back();
  c.Str("direction", s.direction).Int("hidden_size", h).Int("layout", s.layout);
  c.Outputs(s.outputs);
  if (op == "GRU") c.Int("linear_before_reset", s.lbr);
  if (*s.act) {
    c.attrs["activations"].type = ir::Attribute::Type::kStrings;
    c.attrs["activations"].strings = std::vector<std::string>(dirs, s.act);
  }
  return c;
}

std::vector<OpCase> GruCases() {
  const RecurrentShape shapes[] = {
      {"bidirectional", 0, 0, true, true, "", false, 3, 21, 2, true},
      {"forward", 1, 1, true, false, "", false, 3, 6, 2, false},
      {"reverse", 0, 1, false, true, "", false, 3, 21, 2, true},
      {"bidirectional", 1, 0, false, false, "", false, 3, 6, 2, true},
      {"bidirectional", 0, 0, true, true, "", true, 3, 21, 2, true},
      {"reverse", 1, 1, true, true, "", true, 3, 6, 2, false},
      {"forward", 0, 0, true, false, "", false, 1, 6, 1, true},
      {"bidirectional", 0, 1, true, true, "", false, 2, 6, 2, true},
  };
  std::vector<OpCase> cases;
  uint32_t seed = 300;
  for (const RecurrentShape& s : shapes) {
    cases.push_back(RecurrentCase("GRU", s, seed));
    seed += 5;
  }
  OpCase clip = RecurrentCase("GRU", shapes[1], seed).Float("clip", 0.5f);
  clip.name += ", clip 0.5";
  cases.push_back(std::move(clip));
  return cases;
}

std::vector<OpCase> RnnCases() {
  const RecurrentShape shapes[] = {
      {"bidirectional", 0, 0, true, true, "", false, 3, 21, 2, true},
      {"reverse", 1, 0, true, false, "Relu", false, 3, 6, 2, true},
      {"forward", 0, 0, false, true, "Tanh", false, 3, 21, 2, false},
      {"bidirectional", 1, 0, true, false, "Tanh", true, 3, 6, 2, true},
      {"forward", 0, 0, true, true, "Relu", true, 3, 6, 1, true},
      {"bidirectional", 0, 0, true, true, "", false, 2, 6, 2, true},
      {"forward", 1, 0, true, true, "Sigmoid", false, 1, 6, 2, true},
  };
  std::vector<OpCase> cases;
  uint32_t seed = 400;
  for (const RecurrentShape& s : shapes) {
    cases.push_back(RecurrentCase("RNN", s, seed));
    seed += 5;
  }
  return cases;
}
KILN_REGISTER_OP_CASES("", "GRU", &GruCases);
KILN_REGISTER_OP_CASES("", "RNN", &RnnCases);

}  // namespace
}  // namespace kiln::ops
