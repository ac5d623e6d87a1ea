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

class LstmOp final : public ir::Op {
 public:
  explicit LstmOp(const Node& node) : ir::Op(node) {}
  const ir::OpAttrs* attributes() const override { return &a_; }

  static StatusOr<std::unique_ptr<ir::Op>> Create(const Node& node) {
    auto op = std::unique_ptr<LstmOp>(new LstmOp(node));
    op->a_.input_forget = node.GetInt("input_forget", 0) != 0;
    KILN_RETURN_IF_ERROR(ParseRnnAttrs(node, {"Sigmoid", "Tanh", "Tanh"}, &op->a_));
    return std::unique_ptr<ir::Op>(std::move(op));
  }

  Status Infer(InferContext& ctx) const override {
    int64_t h = 0;
    KILN_RETURN_IF_ERROR(InferRnnCommon(ctx, a_, 4, &h));
    for (size_t i : {6, 7})
      if (ctx.has_input(i)) KILN_RETURN_IF_ERROR(ctx.ExpectDtype(i, {DataType::kFloat}));
    const Shape& x = ctx.shape(0);
    const Shape state = a_.layout ? Shape{x[0], a_.directions, h} : Shape{a_.directions, x[1], h};
    if (ctx.has_input(6) && ctx.shape(6) != state)
      return ctx.Error("initial_c must be " + ShapeToString(state) + "; got " +
                       ShapeToString(ctx.shape(6)));
    if (ctx.has_input(7) && ctx.shape(7) != Shape{a_.directions, 3 * h})
      return ctx.Error("P must be " + ShapeToString({a_.directions, 3 * h}) + "; got " +
                       ShapeToString(ctx.shape(7)));
    if (ctx.num_outputs() > 2) ctx.SetOutput(2, DataType::kFloat, state);
    return OkStatus();
  }

  Status Compute(const ComputeContext& ctx) const override {
    const int64_t in = ctx.in(0).shape()[2], h = ctx.in(1).shape()[1] / 4;
    std::vector<double> gates(static_cast<size_t>(4 * h));
    auto step = [&](int64_t d, const double* hprev, const float* xt, double* hb, double* cb) {
      const float* B = ctx.has(3) ? ctx.in(3).data<float>() + d * 8 * h : nullptr;
      const float* P = ctx.has(7) ? ctx.in(7).data<float>() + d * 3 * h : nullptr;
      const RnnActivation& f = a_.acts[3 * d];
      const RnnActivation& g = a_.acts[3 * d + 1];
      const RnnActivation& hact = a_.acts[3 * d + 2];
      for (int64_t j = 0; j < 4 * h; ++j)
        gates[j] = B ? static_cast<double>(B[j]) + B[4 * h + j] : 0.0;
      AddRowDots(ctx.in(1).data<float>() + d * 4 * h * in, 4 * h, in, xt, gates.data());
      AddRowDots(ctx.in(2).data<float>() + d * 4 * h * h, 4 * h, h, hprev, gates.data());
      for (int64_t i = 0; i < h; ++i) {  // gate order i, o, f, c
        const double gi = gates[i] + (P ? P[i] * cb[i] : 0.0);
        const double gf = gates[2 * h + i] + (P ? P[2 * h + i] * cb[i] : 0.0);
        const double it = ApplyRnnActivation(f, RnnClip(a_, gi));
        const double ft = a_.input_forget ? 1.0 - it : ApplyRnnActivation(f, RnnClip(a_, gf));
        const double ct = ApplyRnnActivation(g, RnnClip(a_, gates[3 * h + i]));
        const double c_new = ft * cb[i] + it * ct;
        const double go = gates[h + i] + (P ? P[h + i] * c_new : 0.0);
        const double ot = ApplyRnnActivation(f, RnnClip(a_, go));
        cb[i] = c_new;
        hb[i] = ot * ApplyRnnActivation(hact, c_new);
      }
    };
    return RunRnnReference(*this, ctx, a_, 4, true, step);
  }

 private:
  LstmAttrs a_;
};

KILN_REGISTER_OP("LSTM", 7, ir::kMaxOpset, &LstmOp::Create);

// Kernel cases (ops/op_cases.h), after the former hand-written kernel tests (LstmLoop) and
// the former selftest cases: 5 steps of 7 inputs; each direction, both layouts, hidden sizes 6
// and 19 (cpu.lstm.loop's 8-wide gate vectors and their tails), with and without B, initial
// states, peepholes and sequence_lens ({5, 2, 0}: a full row, a short one, an empty one), one to
// three outputs, weights constant or computed, a batch of 1, LSTM-7; and what the loop declines
// (clip, input_forget, other activations), for the reference.
struct LstmShape {
  const char* direction;
  int64_t layout, batch, h;
  bool bias;
  std::vector<int32_t> lens;  // empty: no sequence_lens
  bool h0, c0, peepholes;
  int outputs;
  bool const_weights;
};

OpCase LstmCase(const LstmShape& s, int opset, uint32_t seed) {
  const int64_t seq = 5, in = 7, h = s.h;
  const int64_t dirs = std::string(s.direction) == "bidirectional" ? 2 : 1;
  const Shape xs = s.layout ? Shape{s.batch, seq, in} : Shape{seq, s.batch, in};
  const Shape ss = s.layout ? Shape{s.batch, dirs, h} : Shape{dirs, s.batch, h};
  OpCase c(std::string(s.direction) + " layout " + std::to_string(s.layout) + " batch " +
               std::to_string(s.batch) + " H " + std::to_string(h) + (s.bias ? " B" : "") +
               (s.lens.empty() ? "" : " sequence_lens") + (s.h0 ? " initial_h" : "") +
               (s.c0 ? " initial_c" : "") + (s.peepholes ? " P" : "") + ", " +
               std::to_string(s.outputs) + (s.outputs == 1 ? " output" : " outputs") +
               (s.const_weights ? "" : ", W computed"),
           opset);
  const bool w = s.const_weights;
  c.inputs = {
      {CaseTensor(xs, seed), false},
      {CaseTensor({dirs, 4 * h, in}, seed + 1), w},
      {CaseTensor({dirs, 4 * h, h}, seed + 2), w},
      {s.bias ? CaseTensor({dirs, 8 * h}, seed + 3) : Tensor(), w},
      {s.lens.empty() ? Tensor()
                      : Tensor::FromVector<int32_t>(s.lens, {static_cast<int64_t>(s.lens.size())}),
       false},
      {s.h0 ? CaseTensor(ss, seed + 4) : Tensor(), false},
      {s.c0 ? CaseTensor(ss, seed + 5) : Tensor(), false},
      {s.peepholes ? CaseTensor({dirs, 3 * h}, seed + 6) : Tensor(), w}};
  while (!c.inputs.back().value.defined()) c.inputs.pop_back();
  c.Str("direction", s.direction).Int("hidden_size", h).Outputs(s.outputs);
  if (opset >= 14) c.Int("layout", s.layout);
  return c;
}

std::vector<OpCase> LstmCases() {
  const LstmShape shapes[] = {
      {"bidirectional", 0, 3, 6, true, {}, true, true, true, 3, true},
      {"bidirectional", 1, 3, 19, true, {5, 2, 0}, true, true, true, 3, false},
      {"forward", 0, 1, 8, false, {}, false, false, false, 1, true},
      {"reverse", 0, 3, 19, true, {3, 5, 1}, true, false, false, 2, true},
      {"forward", 1, 2, 6, true, {}, false, true, false, 3, false},
      {"bidirectional", 0, 2, 6, true, {}, true, true, false, 3, true},
  };
  std::vector<OpCase> cases;
  uint32_t seed = 40;
  for (const LstmShape& s : shapes) {
    cases.push_back(LstmCase(s, 14, seed));
    seed += 7;
  }
  cases.push_back(LstmCase(shapes[2], 7, seed));
  cases.back().name = "LSTM-7 " + cases.back().name;
  const LstmShape plain = {"forward", 0, 3, 6, true, {}, true, true, false, 3, true};
  OpCase clip = LstmCase(plain, 14, seed + 7).Float("clip", 0.5f).Int("input_forget", 1);
  clip.name += ", clip 0.5, input_forget";
  cases.push_back(std::move(clip));
  OpCase acts = LstmCase(plain, 14, seed + 14);
  acts.attrs["activations"].type = ir::Attribute::Type::kStrings;
  acts.attrs["activations"].strings = {"HardSigmoid", "Tanh", "Relu"};
  acts.name += ", activations HardSigmoid Tanh Relu";
  cases.push_back(std::move(acts));
  return cases;
}
KILN_REGISTER_OP_CASES("", "LSTM", &LstmCases);

}  // namespace
}  // namespace kiln::ops
