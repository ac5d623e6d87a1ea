// What ONNX's recurrent layers (LSTM, GRU, RNN) share: their typed attributes (RnnAttrs: direction,
// hidden_size, layout, clip, activations with their alphas and betas; LstmAttrs and GruAttrs add
// their own), the checks of X, W, R, B, sequence_lens and initial_h, the activations in double,
// and the indexing of X, Y and the states in either layout, and the reference kernels' step loop.
// Used by the reference kernels (ops/nn/lstm.cc, ops/nn/gru.cc, ops/nn/rnn.cc,
// ops/contrib/dynamic_quantize_lstm.cc) and the CPU's float loops (backends/cpu/rnn_loops.cc).
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "ir/op.h"
#include "kiln/status.h"
#include "kiln/tensor.h"

namespace kiln::ops {

// LSTM, GRU and RNN: one activation per position (LSTM f, g, h; GRU f, g; RNN f) per direction.
struct RnnActivation {
  enum Kind { kSigmoid, kTanh, kRelu, kHardSigmoid, kLeakyRelu } kind = kSigmoid;
  double alpha = 0, beta = 0;
};
struct RnnAttrs : ir::OpAttrs {
  int64_t directions = 1;  // 2: bidirectional
  bool reverse = false;    // direction "reverse"
  int64_t hidden_size = -1;
  int64_t layout = 0;               // 1: batch first
  double clip = 0;                  // 0: none
  std::vector<RnnActivation> acts;  // per direction: LSTM 3, GRU 2, RNN 1
  // No clip, and per direction the activations `kinds` (`kinds` lists one direction's).
  bool ActsAre(std::initializer_list<RnnActivation::Kind> kinds) const {
    if (clip > 0 || kinds.size() == 0) return false;
    for (size_t i = 0; i < acts.size(); ++i)
      if (acts[i].kind != kinds.begin()[i % kinds.size()]) return false;
    return true;
  }
};
struct LstmAttrs : RnnAttrs {
  bool input_forget = false;
  // The ONNX defaults: Sigmoid, Tanh, Tanh everywhere, no clip, no coupled input/forget gate.
  bool DefaultMath() const {
    return !input_forget &&
           ActsAre({RnnActivation::kSigmoid, RnnActivation::kTanh, RnnActivation::kTanh});
  }
};
struct GruAttrs : RnnAttrs {
  bool linear_before_reset = false;  // 1: r multiplies (R_h h + Rb_h), PyTorch's form
};

// Parses direction, hidden_size, layout, clip and activations into `a`. `defaults` are one
// direction's activations, used when the attribute is absent; the alphas and betas are consumed
// in order by the kinds that take them (HardSigmoid: alpha 0.2, beta 0.5; LeakyRelu: alpha
// 0.01 by default). Kinds other than Sigmoid, Tanh, Relu, HardSigmoid and LeakyRelu are refused.
Status ParseRnnAttrs(const ir::Node& node, const std::vector<std::string>& defaults, RnnAttrs* a);

// The activation, in double.
double ApplyRnnActivation(const RnnActivation& a, double x);

// `clip` applied to an activation's input (none when clip is 0).
inline double RnnClip(const RnnAttrs& a, double v) {
  return a.clip > 0 ? std::clamp(v, -a.clip, a.clip) : v;
}

// Checks X (0), W (1), R (2), B (3), sequence_lens (4) and initial_h (5) of a layer with `gates`
// gates per hidden unit (LSTM 4, GRU 3, RNN 1) and sets Y (output 0) and Y_h (output 1); *hidden
// is the hidden size read from W.
Status InferRnnCommon(ir::InferContext& ctx, const RnnAttrs& a, int64_t gates, int64_t* hidden);

// Offsets of x_t, y_t and the state of one batch row and direction, in either layout:
// X [seq, batch, in] or [batch, seq, in]; Y [seq, dirs, batch, h] or [batch, seq, dirs, h];
// states [dirs, batch, h] or [batch, dirs, h].
struct RnnDims {
  int64_t seq = 0, batch = 0, in = 0, h = 0, dirs = 1;
  bool batch_first = false;
  RnnDims(const Shape& x, int64_t hidden, const RnnAttrs& a)
      : seq(x[a.layout ? 1 : 0]),
        batch(x[a.layout ? 0 : 1]),
        in(x[2]),
        h(hidden),
        dirs(a.directions),
        batch_first(a.layout == 1) {}
  // Row of x_t for batch row b among X's seq x batch rows.
  int64_t Row(int64_t t, int64_t b) const { return batch_first ? b * seq + t : t * batch + b; }
  int64_t X(int64_t t, int64_t b) const { return Row(t, b) * in; }
  int64_t Y(int64_t t, int64_t d, int64_t b) const {
    return (batch_first ? (b * seq + t) * dirs + d : (t * dirs + d) * batch + b) * h;
  }
  int64_t State(int64_t d, int64_t b) const {
    return (batch_first ? b * dirs + d : d * batch + b) * h;
  }
};

// out[j] += sum_i m[j * cols + i] * v[i] for j in [0, rows), each sum in double: one gate
// block's products with x_t (V float) or h_{t-1} (V double).
template <typename V>
void AddRowDots(const float* m, int64_t rows, int64_t cols, const V* v, double* out) {
  for (int64_t j = 0; j < rows; ++j) {
    double acc = 0.0;
    const float* row = m + j * cols;
    for (int64_t i = 0; i < cols; ++i) acc += static_cast<double>(row[i]) * v[i];
    out[j] += acc;
  }
}

// Batch row b's sequence length: sequence_lens[b] (input 4) when given, checked to be in
// [0, seq], else seq.
StatusOr<int64_t> RnnSeqLen(const ir::Op& op, const ir::ComputeContext& ctx, int64_t b,
                            int64_t seq);

// The reference kernels' step loop. For each direction and batch row (over its sequence length;
// reverse from its last valid step), step(d, hprev, xt, hb, cb) makes the new state hb (and, with
// `cell`, updates the cell state cb) from hprev, a copy of the previous state, and x_t. Y (zeros
// past a row's length), Y_h and, with `cell`, Y_c are written here. States in double, from
// initial_h (input 5) and initial_c (input 6) when given.
template <typename Step>
Status RunRnnReference(const ir::Op& op, const ir::ComputeContext& ctx, const RnnAttrs& a,
                       int64_t gates, bool cell, Step&& step) {
  const RnnDims dm(ctx.in(0).shape(), ctx.in(1).shape()[1] / gates, a);
  const int64_t h = dm.h;
  const float* X = ctx.in(0).data<float>();
  float* Y = ctx.outputs.size() > 0 && ctx.outputs[0] ? ctx.out(0).data<float>() : nullptr;
  if (Y != nullptr) std::fill(Y, Y + ctx.out(0).numel(), 0.f);
  std::vector<double> hs(static_cast<size_t>(dm.dirs * dm.batch * h), 0.0);
  std::vector<double> cs(cell ? hs.size() : 0, 0.0);
  if (ctx.has(5)) std::copy_n(ctx.in(5).data<float>(), hs.size(), hs.begin());
  if (cell && ctx.has(6)) std::copy_n(ctx.in(6).data<float>(), cs.size(), cs.begin());
  std::vector<double> hprev(static_cast<size_t>(h));
  for (int64_t d = 0; d < dm.dirs; ++d) {
    const bool rev = a.reverse || d == 1;
    for (int64_t b = 0; b < dm.batch; ++b) {
      KILN_ASSIGN_OR_RETURN(const int64_t len, RnnSeqLen(op, ctx, b, dm.seq));
      double* hb = hs.data() + dm.State(d, b);
      double* cb = cell ? cs.data() + dm.State(d, b) : nullptr;
      for (int64_t k = 0; k < len; ++k) {
        const int64_t t = rev ? len - 1 - k : k;
        std::copy(hb, hb + h, hprev.begin());
        step(d, hprev.data(), X + dm.X(t, b), hb, cb);
        if (Y != nullptr)
          for (int64_t i = 0; i < h; ++i) Y[dm.Y(t, d, b) + i] = static_cast<float>(hb[i]);
      }
    }
  }
  for (size_t o = 1; o < std::min<size_t>(ctx.outputs.size(), cell ? 3 : 2); ++o) {
    if (ctx.outputs[o] == nullptr) continue;
    const std::vector<double>& src = o == 1 ? hs : cs;
    float* dst = ctx.out(o).data<float>();
    for (size_t i = 0; i < src.size(); ++i) dst[i] = static_cast<float>(src[i]);
  }
  return OkStatus();
}

}  // namespace kiln::ops
