// cpu.lstm.loop: LSTM with ONNX's default math (Sigmoid, Tanh, Tanh; no clip, no coupled
// input/forget gate), any direction, either layout, optional B, P (peepholes), initial_h and
// initial_c; sequence_lens is declined (the reference runs it). Per direction and batch row, each
// step's four gate pre-activations are float32 dot products of the gate's W row with x_t and R
// row with h_{t-1}, written so the compiler vectorizes them (omp simd reductions); the state stays
// in float32. Single-threaded: the models that use it (Silero VAD: hidden 128, one step per
// chunk) are far too small to split. The reference (ops/nn/lstm.cc, double accumulation) is the
// oracle it is tested against.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backends/cpu/onednn_common.h"
#include "ops/attrs.h"

namespace kiln::backends::cpu {
namespace {

using runtime::KernelSupport;
using runtime::TensorInfo;

inline float Dot(const float* a, const float* b, int64_t n) {
  float acc = 0.f;
#pragma omp simd reduction(+ : acc)
  for (int64_t i = 0; i < n; ++i) acc += a[i] * b[i];
  return acc;
}

inline float Sigmoid(float x) { return 1.f / (1.f + std::exp(-x)); }

class LstmLoop final : public runtime::Kernel {
 public:
  LstmLoop(const ir::Node&, const ir::Op& op) : a_(runtime::AttrsOf<ops::LstmAttrs>(op)) {}

  Status Run(const ir::ComputeContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    const bool bf = a_.layout == 1;
    const int64_t seq = x.shape()[bf ? 1 : 0], batch = x.shape()[bf ? 0 : 1];
    const int64_t in = x.shape()[2];
    const int64_t h = ctx.in(1).shape()[1] / 4;
    const int64_t dirs = a_.directions;
    auto state_at = [&](int64_t d, int64_t b) { return (bf ? b * dirs + d : d * batch + b) * h; };
    std::vector<float> hs(static_cast<size_t>(dirs * batch * h), 0.f), cs(hs.size(), 0.f);
    if (ctx.has(5)) std::copy_n(ctx.in(5).data<float>(), hs.size(), hs.begin());
    if (ctx.has(6)) std::copy_n(ctx.in(6).data<float>(), cs.size(), cs.begin());
    float* y = ctx.outputs.size() > 0 && ctx.outputs[0] ? ctx.out(0).data<float>() : nullptr;
    std::vector<float> gates(static_cast<size_t>(4 * h)), hprev(static_cast<size_t>(h));
    for (int64_t d = 0; d < dirs; ++d) {
      const bool rev = a_.reverse || d == 1;
      const float* w = ctx.in(1).data<float>() + d * 4 * h * in;
      const float* r = ctx.in(2).data<float>() + d * 4 * h * h;
      const float* bias = ctx.has(3) ? ctx.in(3).data<float>() + d * 8 * h : nullptr;
      const float* p = ctx.has(7) ? ctx.in(7).data<float>() + d * 3 * h : nullptr;
      for (int64_t b = 0; b < batch; ++b) {
        float* hb = hs.data() + state_at(d, b);
        float* cb = cs.data() + state_at(d, b);
        for (int64_t k = 0; k < seq; ++k) {
          const int64_t t = rev ? seq - 1 - k : k;
          const float* xt = x.data<float>() + (bf ? b * seq + t : t * batch + b) * in;
          std::copy(hb, hb + h, hprev.begin());
          for (int64_t j = 0; j < 4 * h; ++j)
            gates[j] = (bias ? bias[j] + bias[4 * h + j] : 0.f) + Dot(w + j * in, xt, in) +
                       Dot(r + j * h, hprev.data(), h);
          for (int64_t i = 0; i < h; ++i) {  // gate order i, o, f, c
            const float it = Sigmoid(gates[i] + (p ? p[i] * cb[i] : 0.f));
            const float ft = Sigmoid(gates[2 * h + i] + (p ? p[2 * h + i] * cb[i] : 0.f));
            const float c_new = ft * cb[i] + it * std::tanh(gates[3 * h + i]);
            const float ot = Sigmoid(gates[h + i] + (p ? p[h + i] * c_new : 0.f));
            cb[i] = c_new;
            hb[i] = ot * std::tanh(c_new);
          }
          if (y != nullptr)
            std::copy(hb, hb + h,
                      y + (bf ? (b * seq + t) * dirs + d : (t * dirs + d) * batch + b) * h);
        }
      }
    }
    for (size_t o = 1; o < std::min<size_t>(ctx.outputs.size(), 3); ++o)
      if (ctx.outputs[o] != nullptr)
        std::copy(o == 1 ? hs.begin() : cs.begin(), o == 1 ? hs.end() : cs.end(),
                  ctx.out(o).data<float>());
    return OkStatus();
  }

 private:
  const ops::LstmAttrs& a_;
};

KernelSupport SupportsLstm(const ir::Node&, const ir::Op& op, const std::vector<TensorInfo>& in) {
  const ops::LstmAttrs* a = op.attrs<ops::LstmAttrs>();
  if (a == nullptr) return {false, "no LSTM attributes"};
  if (!a->DefaultMath())
    return {false, "non-default activations, clip or input_forget (the reference runs them)"};
  if (in.size() > 4 && in[4].dtype != DataType::kUndefined)
    return {false, "sequence_lens (the reference runs it)"};
  for (size_t i : {0, 1, 2, 3, 5, 6, 7})
    if (i < in.size() && in[i].dtype != DataType::kUndefined && in[i].dtype != DataType::kFloat)
      return {false, "needs float32 inputs"};
  return {true, ""};
}

KILN_REGISTER_KERNEL(runtime::KernelDef{"cpu.lstm.loop",
                                        "LSTM",
                                        "",
                                        7,
                                        ir::kMaxOpset,
                                        "cpu",
                                        10,
                                        SupportsLstm,
                                        CreateKernel<LstmLoop>,
                                        {}});

}  // namespace
}  // namespace kiln::backends::cpu
