// cpu.lstm.loop, cpu.gru.loop and cpu.rnn.loop: ONNX's recurrent layers in float32 for the
// activations exporters write: LSTM with its defaults (Sigmoid, Tanh, Tanh; no clip, no coupled
// input/forget gate; peepholes allowed), GRU with its defaults (Sigmoid, Tanh; either
// linear_before_reset) and RNN with Tanh or Relu, any direction, either layout, optional B,
// initial states and sequence_lens (a row past its length, or in reverse not yet at it, is left
// out of the step's gate math: its products are computed with the others' and dropped).
//
// The input projections of every step and both directions, X W^T + Wb (+ Rb where it is simply
// added), are one oneDNN sgemm over all seq x batch rows; then, the two directions of a
// bidirectional layer on two threads, each step is one sgemm of the batch's previous states
// with R^T (GRU without linear_before_reset: two, the second on r . h)
// and the gate math on whole rows, with AVX2 sigmoid and tanh (exp by range reduction and a
// degree-7 Taylor polynomial: relative error below 1e-7 on the reduced range). The states stay
// in float32. The reference kernels (ops/nn/lstm.cc, ops/nn/gru.cc: double accumulation) are
// the oracle they are tested against (kiln_kernel_harness_test: the ops' cases).
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "backends/cpu/onednn_common.h"
#include "core/threading.h"
#include "ops/nn/rnn.h"

namespace kiln::backends::cpu {
namespace {

using runtime::KernelSupport;
using runtime::TensorInfo;

#define KILN_AVX2_FMA __attribute__((target("avx2,fma")))

bool HasAvx2() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
}

// exp(x) for x in [-87, 88] (clamped there): x = n ln2 + r, |r| <= ln2 / 2, exp(r) by its Taylor
// series to r^7 (remainder below 6e-9 relative), times 2^n through the exponent bits.
KILN_AVX2_FMA inline __m256 Exp8(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.f)), _mm256_set1_ps(88.f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  // ln 2 in two parts, so n * ln2_hi is exact.
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.f / 5040.f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.f / 720.f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.f / 120.f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.f / 24.f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.f / 6.f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.f));
  const __m256i e =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

// The AVX2 loops do whole vectors and return how many elements they did; the callers finish.
KILN_AVX2_FMA int64_t SigmoidAvx2(float* x, int64_t n) {
  const __m256 one = _mm256_set1_ps(1.f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 e = Exp8(_mm256_sub_ps(_mm256_setzero_ps(), _mm256_loadu_ps(x + i)));
    _mm256_storeu_ps(x + i, _mm256_div_ps(one, _mm256_add_ps(one, e)));
  }
  return i;
}

// tanh(x) = sign(x) (1 - e) / (1 + e) with e = exp(-2|x|).
KILN_AVX2_FMA int64_t TanhAvx2(float* x, int64_t n) {
  const __m256 one = _mm256_set1_ps(1.f), sign = _mm256_set1_ps(-0.f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256 a = _mm256_andnot_ps(sign, v);
    const __m256 e = Exp8(_mm256_mul_ps(a, _mm256_set1_ps(-2.f)));
    const __m256 t = _mm256_div_ps(_mm256_sub_ps(one, e), _mm256_add_ps(one, e));
    _mm256_storeu_ps(x + i, _mm256_or_ps(t, _mm256_and_ps(sign, v)));
  }
  return i;
}

void Sigmoid(float* x, int64_t n) {
  for (int64_t i = HasAvx2() ? SigmoidAvx2(x, n) : 0; i < n; ++i)
    x[i] = 1.f / (1.f + std::exp(-x[i]));
}

void Tanh(float* x, int64_t n) {
  for (int64_t i = HasAvx2() ? TanhAvx2(x, n) : 0; i < n; ++i) x[i] = std::tanh(x[i]);
}

// c[rows][n] = a[rows][k] (rows `lda` apart) . m[n][k]^T (beta 0).
void RowsTimesMT(int64_t rows, int64_t n, int64_t k, const float* a, int64_t lda, const float* m,
                 float* c) {
  if (rows == 0 || n == 0) return;
  if (k == 0) {
    std::fill(c, c + rows * n, 0.f);
    return;
  }
  dnnl::sgemm('N', 'T', rows, n, k, 1.f, a, lda, m, k, 0.f, c, n);
}

// One direction's working state: the batch's states and this step's recurrent products.
struct DirState {
  float *h = nullptr, *c = nullptr;  // [batch, h]
  float* g = nullptr;                // [batch, gates * h]
  float* tmp = nullptr;              // [batch, 2 * h]: the kernel's own use
};

// What one layer's loop works on, all of it in the run's scratch (planned from the shapes, so a
// warm run allocates nothing): the dims, the input projections of both directions, their
// biases, each batch row's length and each direction's state.
struct LoopState {
  ops::RnnDims dm;
  int64_t gh;
  float* xw = nullptr;     // [seq x batch rows, dirs * gates * h]
  float* bias = nullptr;   // [dirs * gates * h]
  int64_t* len = nullptr;  // [batch]
  DirState dir[2];

  // Scratch bytes for a layer of these dims: the blocks the constructor carves, each 64-byte
  // aligned.
  static size_t Bytes(const ops::RnnDims& dm, int64_t gates) {
    size_t bytes = 0;
    Carve(dm, gates * dm.h, nullptr, &bytes);
    return bytes;
  }
  LoopState(const ir::ComputeContext& ctx, const ops::RnnAttrs& a, int64_t gates, void* scratch)
      : dm(ctx.in(0).shape(), ctx.in(1).shape()[1] / gates, a), gh(gates * dm.h) {
    size_t bytes = 0;
    Carve(dm, gh, this, &bytes, static_cast<char*>(scratch));
  }
  // xw = X W^T + Wb, plus Rb on each direction's first `rb_cols` columns: both directions' W are
  // one [dirs * gates * h, in] matrix, so this is one product.
  void Project(const ir::ComputeContext& ctx, int64_t rb_cols) {
    const int64_t n = dm.dirs * gh, rows = dm.seq * dm.batch;
    RowsTimesMT(rows, n, dm.in, ctx.in(0).data<float>(), dm.in, ctx.in(1).data<float>(), xw);
    if (!ctx.has(3)) return;
    for (int64_t d = 0; d < dm.dirs; ++d) {
      const float* wb = ctx.in(3).data<float>() + d * 2 * gh;
      for (int64_t j = 0; j < gh; ++j) bias[d * gh + j] = wb[j] + (j < rb_cols ? wb[gh + j] : 0.f);
    }
    for (int64_t r = 0; r < rows; ++r) {
      float* row = xw + r * n;
      for (int64_t j = 0; j < n; ++j) row[j] += bias[j];
    }
  }
  // Loads (or zeroes) direction d's states from input `index`.
  void LoadState(const ir::ComputeContext& ctx, size_t index, int64_t d, float* s) const {
    for (int64_t b = 0; b < dm.batch; ++b) {
      float* dst = s + b * dm.h;
      if (ctx.has(index))
        std::copy_n(ctx.in(index).data<float>() + dm.State(d, b), dm.h, dst);
      else
        std::fill(dst, dst + dm.h, 0.f);
    }
  }
  // Stores direction d's states into output `index` when it is wanted.
  void StoreState(const ir::ComputeContext& ctx, size_t index, int64_t d, const float* s) const {
    if (ctx.outputs.size() <= index || ctx.outputs[index] == nullptr) return;
    for (int64_t b = 0; b < dm.batch; ++b)
      std::copy_n(s + b * dm.h, dm.h, ctx.out(index).data<float>() + dm.State(d, b));
  }
  // Each batch row's length: sequence_lens (input 4, checked against seq) or seq. Row b takes
  // part in the steps t < len[b] (forward from 0, reverse from len[b] - 1); at the others its
  // state stays and its Y rows are zeros.
  Status ReadLens(const ir::Op& op, const ir::ComputeContext& ctx) {
    for (int64_t b = 0; b < dm.batch; ++b) {
      len[b] = dm.seq;
      if (ctx.has(4)) {
        KILN_ASSIGN_OR_RETURN(len[b], ops::RnnSeqLen(op, ctx, b, dm.seq));
      }
    }
    return OkStatus();
  }
  bool Active(int64_t t, int64_t b) const { return t < len[b]; }

  const float* XwAt(int64_t t, int64_t b, int64_t d) const {
    return xw + dm.Row(t, b) * dm.dirs * gh + d * gh;
  }

 private:
  // Lays the blocks out one after the other from offset 0, counting the bytes; with `st`, points
  // its buffers at them in `base`.
  static void Carve(const ops::RnnDims& dm, int64_t gh, LoopState* st, size_t* bytes,
                    char* base = nullptr) {
    auto take = [&](int64_t floats) {
      float* p = st != nullptr ? reinterpret_cast<float*>(base + *bytes) : nullptr;
      *bytes += static_cast<size_t>((floats * 4 + 63) / 64 * 64);
      return p;
    };
    float* xw = take(dm.seq * dm.batch * dm.dirs * gh);
    float* bias = take(dm.dirs * gh);
    float* len = take(2 * dm.batch);  // int64_t
    DirState dir[2];
    for (int64_t d = 0; d < dm.dirs; ++d) {
      dir[d].h = take(dm.batch * dm.h);
      dir[d].c = take(dm.batch * dm.h);
      dir[d].g = take(dm.batch * gh);
      dir[d].tmp = take(2 * dm.batch * dm.h);
    }
    if (st == nullptr) return;
    st->xw = xw;
    st->bias = bias;
    st->len = reinterpret_cast<int64_t*>(len);
    st->dir[0] = dir[0];
    st->dir[1] = dir[1];
  }
};

// The kernels' shared planning: the scratch a layer of the prepared shapes needs.
class RecurrentKernel : public runtime::Kernel {
 public:
  RecurrentKernel(const ir::Op& op, const ops::RnnAttrs& a, int64_t gates)
      : op_(op), ra_(a), gates_(gates) {}
  Status Prepare(runtime::PrepareContext* ctx) override {
    const ops::RnnDims dm(ctx->inputs[0].shape, ctx->inputs[1].shape[1] / gates_, ra_);
    bytes_ = LoopState::Bytes(dm, gates_);
    return OkStatus();
  }
  size_t ScratchBytes() const override { return bytes_; }

 protected:
  const ir::Op& op_;

 private:
  const ops::RnnAttrs& ra_;
  int64_t gates_;
  size_t bytes_ = 0;
};

// Runs every direction, the two of a bidirectional layer on two threads (each one's products
// then run on its own thread): `step(d, t, s)` advances s.h (and s.c) by one step at time t.
template <typename Step>
void RunDirections(const ir::ComputeContext& ctx, const ops::RnnAttrs& a, LoopState& st,
                   int64_t rb_cols, bool cell, Step&& step) {
  float* y = ctx.outputs.size() > 0 && ctx.outputs[0] ? ctx.out(0).data<float>() : nullptr;
  const int64_t h = st.dm.h;
  st.Project(ctx, rb_cols);
  ParallelFor(st.dm.dirs, 1, [&](int64_t begin, int64_t end) {
    for (int64_t d = begin; d < end; ++d) {
      DirState& s = st.dir[d];
      const bool rev = a.reverse || d == 1;
      st.LoadState(ctx, 5, d, s.h);
      if (cell) st.LoadState(ctx, 6, d, s.c);
      std::fill_n(s.tmp, 2 * st.dm.batch * h, 0.f);
      for (int64_t k = 0; k < st.dm.seq; ++k) {
        const int64_t t = rev ? st.dm.seq - 1 - k : k;
        step(d, t, s);
        if (y != nullptr)
          for (int64_t b = 0; b < st.dm.batch; ++b) {
            float* yt = y + st.dm.Y(t, d, b);
            if (st.Active(t, b))
              std::copy_n(s.h + b * h, h, yt);
            else
              std::fill(yt, yt + h, 0.f);
          }
      }
      st.StoreState(ctx, 1, d, s.h);
      if (cell) st.StoreState(ctx, 2, d, s.c);
    }
  });
}

class LstmLoop final : public RecurrentKernel {
 public:
  LstmLoop(const ir::Node&, const ir::Op& op)
      : RecurrentKernel(op, runtime::AttrsOf<ops::LstmAttrs>(op), 4),
        a_(runtime::AttrsOf<ops::LstmAttrs>(op)) {}

  Status Run(const ir::ComputeContext& ctx) const override {
    LoopState st(ctx, a_, 4, ctx.scratch);
    KILN_RETURN_IF_ERROR(st.ReadLens(op_, ctx));
    const int64_t h = st.dm.h, gh = st.gh;
    auto step = [&](int64_t d, int64_t t, DirState& s) {
      const float* r = ctx.in(2).data<float>() + d * gh * h;
      const float* p = ctx.has(7) ? ctx.in(7).data<float>() + d * 3 * h : nullptr;
      RowsTimesMT(st.dm.batch, gh, h, s.h, h, r, s.g);
      float* tc = s.tmp;
      for (int64_t b = 0; b < st.dm.batch; ++b) {
        if (!st.Active(t, b)) continue;
        float* g = s.g + b * gh;  // gate order i, o, f, c
        float* hb = s.h + b * h;
        float* cb = s.c + b * h;
        const float* xw = st.XwAt(t, b, d);
        for (int64_t j = 0; j < gh; ++j) g[j] += xw[j];
        if (p != nullptr)
          for (int64_t i = 0; i < h; ++i) {
            g[i] += p[i] * cb[i];
            g[2 * h + i] += p[2 * h + i] * cb[i];
          }
        Sigmoid(g, h);          // i
        Sigmoid(g + 2 * h, h);  // f
        Tanh(g + 3 * h, h);     // c~
        for (int64_t i = 0; i < h; ++i) cb[i] = g[2 * h + i] * cb[i] + g[i] * g[3 * h + i];
        if (p != nullptr)
          for (int64_t i = 0; i < h; ++i) g[h + i] += p[h + i] * cb[i];
        Sigmoid(g + h, h);  // o
        std::copy_n(cb, h, tc);
        Tanh(tc, h);
        for (int64_t i = 0; i < h; ++i) hb[i] = g[h + i] * tc[i];
      }
    };
    RunDirections(ctx, a_, st, gh, true, step);
    return OkStatus();
  }

 private:
  const ops::LstmAttrs& a_;
};

class GruLoop final : public RecurrentKernel {
 public:
  GruLoop(const ir::Node&, const ir::Op& op)
      : RecurrentKernel(op, runtime::AttrsOf<ops::GruAttrs>(op), 3),
        a_(runtime::AttrsOf<ops::GruAttrs>(op)) {}

  Status Run(const ir::ComputeContext& ctx) const override {
    LoopState st(ctx, a_, 3, ctx.scratch);
    KILN_RETURN_IF_ERROR(st.ReadLens(op_, ctx));
    const int64_t h = st.dm.h, gh = st.gh, batch = st.dm.batch;
    const bool lbr = a_.linear_before_reset;
    auto step = [&](int64_t d, int64_t t, DirState& s) {
      // Without linear_before_reset: rh = r . h_{t-1} and hh = rh R_h^T, per batch row.
      float* rh = s.tmp;
      float* hh = rh + batch * h;
      const float* r = ctx.in(2).data<float>() + d * gh * h;
      const float* rb = ctx.has(3) ? ctx.in(3).data<float>() + d * 2 * gh + gh : nullptr;
      // z and r (and with linear_before_reset the h gate's h R_h^T) for every row at once.
      RowsTimesMT(batch, lbr ? gh : 2 * h, h, s.h, h, r, s.g);
      const int64_t gs = lbr ? gh : 2 * h;  // row stride of g
      for (int64_t b = 0; b < batch; ++b) {
        if (!st.Active(t, b)) continue;
        float* g = s.g + b * gs;
        const float* xw = st.XwAt(t, b, d);
        for (int64_t j = 0; j < 2 * h; ++j) g[j] += xw[j];
        Sigmoid(g, 2 * h);  // z, r
        if (!lbr)
          for (int64_t i = 0; i < h; ++i) rh[b * h + i] = g[h + i] * s.h[b * h + i];
      }
      if (!lbr) RowsTimesMT(batch, h, h, rh, h, r + 2 * h * h, hh);
      for (int64_t b = 0; b < batch; ++b) {
        if (!st.Active(t, b)) continue;
        float* g = s.g + b * gs;
        float* hb = s.h + b * h;
        const float* xw = st.XwAt(t, b, d) + 2 * h;
        // pre-activation of h~, into hh (no lbr) or g's h block (lbr)
        float* pre = lbr ? g + 2 * h : hh + b * h;
        for (int64_t i = 0; i < h; ++i) {
          const float rec = pre[i] + (rb != nullptr ? rb[2 * h + i] : 0.f);
          pre[i] = xw[i] + (lbr ? g[h + i] * rec : rec);
        }
        Tanh(pre, h);
        for (int64_t i = 0; i < h; ++i) hb[i] = (1.f - g[i]) * pre[i] + g[i] * hb[i];
      }
    };
    RunDirections(ctx, a_, st, 2 * h, false, step);
    return OkStatus();
  }

 private:
  const ops::GruAttrs& a_;
};

class RnnLoop final : public RecurrentKernel {
 public:
  RnnLoop(const ir::Node&, const ir::Op& op)
      : RecurrentKernel(op, runtime::AttrsOf<ops::RnnAttrs>(op), 1),
        a_(runtime::AttrsOf<ops::RnnAttrs>(op)) {}

  Status Run(const ir::ComputeContext& ctx) const override {
    LoopState st(ctx, a_, 1, ctx.scratch);
    KILN_RETURN_IF_ERROR(st.ReadLens(op_, ctx));
    const int64_t h = st.dm.h;
    auto step = [&](int64_t d, int64_t t, DirState& s) {
      RowsTimesMT(st.dm.batch, h, h, s.h, h, ctx.in(2).data<float>() + d * h * h, s.g);
      const bool relu = a_.acts[d].kind == ops::RnnActivation::kRelu;
      for (int64_t b = 0; b < st.dm.batch; ++b) {
        if (!st.Active(t, b)) continue;
        float* hb = s.h + b * h;
        const float* g = s.g + b * h;
        const float* xw = st.XwAt(t, b, d);
        for (int64_t i = 0; i < h; ++i) hb[i] = relu ? std::max(xw[i] + g[i], 0.f) : xw[i] + g[i];
        if (!relu) Tanh(hb, h);
      }
    };
    RunDirections(ctx, a_, st, h, false, step);
    return OkStatus();
  }

 private:
  const ops::RnnAttrs& a_;
};

KernelSupport SupportsCommon(const std::vector<TensorInfo>& in) {
  if (in.size() > 4 && in[4].dtype != DataType::kUndefined && in[4].dtype != DataType::kInt32)
    return {false, "sequence_lens must be int32"};
  for (size_t i : {0, 1, 2, 3, 5, 6, 7})
    if (i < in.size() && in[i].dtype != DataType::kUndefined && in[i].dtype != DataType::kFloat)
      return {false, "needs float32 inputs"};
  return {true, ""};
}

KernelSupport SupportsLstm(const ir::Node&, const ir::Op& op, const std::vector<TensorInfo>& in) {
  const ops::LstmAttrs* a = op.attrs<ops::LstmAttrs>();
  if (a == nullptr) return {false, "no LSTM attributes"};
  if (!a->DefaultMath())
    return {false, "non-default activations, clip or input_forget (the reference runs them)"};
  return SupportsCommon(in);
}

KernelSupport SupportsGru(const ir::Node&, const ir::Op& op, const std::vector<TensorInfo>& in) {
  const ops::GruAttrs* a = op.attrs<ops::GruAttrs>();
  if (a == nullptr) return {false, "no GRU attributes"};
  if (!a->ActsAre({ops::RnnActivation::kSigmoid, ops::RnnActivation::kTanh}))
    return {false, "non-default activations or clip (the reference runs them)"};
  return SupportsCommon(in);
}

KernelSupport SupportsRnn(const ir::Node&, const ir::Op& op, const std::vector<TensorInfo>& in) {
  const ops::RnnAttrs* a = op.attrs<ops::RnnAttrs>();
  if (a == nullptr) return {false, "no RNN attributes"};
  const bool fits =
      a->clip == 0 && std::all_of(a->acts.begin(), a->acts.end(), [](auto& act) {
        return act.kind == ops::RnnActivation::kTanh || act.kind == ops::RnnActivation::kRelu;
      });
  if (!fits)
    return {false, "activations other than Tanh and Relu, or clip (the reference runs them)"};
  return SupportsCommon(in);
}

KILN_REGISTER_KERNEL(runtime::KernelDef{"cpu.lstm.loop",
                                        "LSTM",
                                        "",
                                        7,
                                        ir::kMaxOpset,
                                        Backend::kCpu,
                                        10,
                                        SupportsLstm,
                                        CreateKernel<LstmLoop>,
                                        {}});
KILN_REGISTER_KERNEL(runtime::KernelDef{"cpu.gru.loop",
                                        "GRU",
                                        "",
                                        7,
                                        ir::kMaxOpset,
                                        Backend::kCpu,
                                        10,
                                        SupportsGru,
                                        CreateKernel<GruLoop>,
                                        {}});
KILN_REGISTER_KERNEL(runtime::KernelDef{"cpu.rnn.loop",
                                        "RNN",
                                        "",
                                        7,
                                        ir::kMaxOpset,
                                        Backend::kCpu,
                                        10,
                                        SupportsRnn,
                                        CreateKernel<RnnLoop>,
                                        {}});

}  // namespace
}  // namespace kiln::backends::cpu
