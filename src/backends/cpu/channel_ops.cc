// Squeeze-excite's two memory-bound steps as plain vectorized loops, because oneDNN 2.6's
// primitives are slow at these shapes (EfficientNet-B0 at batch 1, 2 threads, measured with
// ONEDNN_VERBOSE): its binary multiply of x[1,32,112,112] by a per-channel scale[1,32,1,1] in the
// channels-last layout takes 155 us, a loop 18 us; its global average pooling 70 us, a loop 28 us.
//   cpu.mul.channel_scale: Mul(x[N,C,...], s[N|1,C,1,...]) (either operand order), x plain or
//     channels-last (oneDNN's acdb family), s plain or channels-last (the same memory order when
//     its spatial dims are 1); the output takes x's layout and may overwrite x.
//   cpu.globalaveragepool.channels: GlobalAveragePool of x plain or channels-last; the output
//     [N,C,1,...] gets the layout oneDNN's pooling would give it (channels-last for a
//     channels-last input), so the consumers' plans are unchanged.
// Any other layout (blocked nChw16c, bf16) is declined and goes to the oneDNN kernels.
#include <algorithm>

#include "backends/cpu/onednn_common.h"
#include "core/threading.h"
#include "ops/common.h"

namespace kiln::backends::cpu {
namespace {

using dnnl::memory;
using runtime::KernelSupport;
using runtime::TensorInfo;

// Channels-last descriptor for a rank-3..5 shape [N,C,spatial...].
memory::desc ChannelsLastDesc(const Shape& s) {
  static const memory::format_tag tags[] = {memory::format_tag::acb, memory::format_tag::acdb,
                                            memory::format_tag::acdeb};
  return memory::desc(Dims(s), memory::data_type::f32, tags[s.size() - 3]);
}

enum class Order { kPlain, kChannelsLast, kOther };

Order OrderOf(const TensorInfo& t) {
  if (t.shape.size() < 3 || t.shape.size() > 5) return t.layout ? Order::kOther : Order::kPlain;
  if (!t.layout) return Order::kPlain;
  return InputDesc(t) == ChannelsLastDesc(t.shape) ? Order::kChannelsLast : Order::kOther;
}

int64_t Spatial(const Shape& s) {
  int64_t p = 1;
  for (size_t i = 2; i < s.size(); ++i) p *= s[i];
  return p;
}

// Which input is x (the full-size operand) when the node is a per-channel scale, or -1.
int ScaledInput(const std::vector<TensorInfo>& in) {
  for (int x = 0; x < 2; ++x) {
    const Shape& xs = in[x].shape;
    const Shape& ss = in[1 - x].shape;
    if (xs.size() < 3 || xs.size() > 5 || ss.size() != xs.size()) continue;
    if (ss[0] != 1 && ss[0] != xs[0]) continue;
    if (ss[1] != xs[1] || Spatial(ss) != 1 || Spatial(xs) == 1) continue;
    return x;
  }
  return -1;
}

KernelSupport SupportsChannelScale(const ir::Node& node, const ir::Op&,
                                   const std::vector<TensorInfo>& in) {
  if (!AllFloat(in, {0, 1})) return {false, "needs float32 inputs"};
  const int x = ScaledInput(in);
  if (x < 0) return {false, "not a per-channel scale x[N,C,...] * s[N|1,C,1,...]"};
  if (OrderOf(in[x]) == Order::kOther) return {false, "x is neither plain nor channels-last"};
  // s's spatial dims are 1, so plain and channels-last store it the same way.
  if (OrderOf(in[1 - x]) == Order::kOther) return {false, "s is neither plain nor channels-last"};
  return {true, ""};
}

class ChannelScale final : public runtime::Kernel {
 public:
  explicit ChannelScale(const ir::Node&) {}
  bool AcceptsLayout(size_t input) const override { return input < 2; }
  int InPlaceInput() const override { return x_; }

  Status Prepare(runtime::PrepareContext* ctx) override {
    x_ = ScaledInput(ctx->inputs);
    const TensorInfo& x = ctx->inputs[x_];
    n_ = x.shape[0];
    c_ = x.shape[1];
    p_ = Spatial(x.shape);
    scale_per_sample_ = ctx->inputs[1 - x_].shape[0] != 1;
    channels_last_ = OrderOf(x) == Order::kChannelsLast;
    ctx->outputs[0].layout = x.layout;
    return OkStatus();
  }

  Status Run(const ir::ComputeContext& ctx) const override {
    const float* x = ctx.in(x_).data<float>();
    const float* s = ctx.in(1 - x_).data<float>();
    float* y = ctx.out(0).data<float>();
    const int64_t c = c_, p = p_;
    if (channels_last_) {
      // Rows of C values, one per pixel.
      ParallelFor(n_ * p, 256, [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; ++r) {
          const float* sc = s + (scale_per_sample_ ? r / p * c : 0);
          const float* xr = x + r * c;
          float* yr = y + r * c;
#pragma omp simd
          for (int64_t i = 0; i < c; ++i) yr[i] = xr[i] * sc[i];
        }
      });
    } else {
      // Planes of P values, one per (n, c).
      ParallelFor(n_ * c, std::max<int64_t>(1, 4096 / p), [&](int64_t b, int64_t e) {
        for (int64_t q = b; q < e; ++q) {
          const float v = s[scale_per_sample_ ? q : q % c];
          const float* xr = x + q * p;
          float* yr = y + q * p;
#pragma omp simd
          for (int64_t i = 0; i < p; ++i) yr[i] = xr[i] * v;
        }
      });
    }
    return OkStatus();
  }

 private:
  int x_ = 0;
  int64_t n_ = 0, c_ = 0, p_ = 0;
  bool scale_per_sample_ = false, channels_last_ = false;
};

KernelSupport SupportsGlobalAverage(const ir::Node&, const ir::Op&,
                                    const std::vector<TensorInfo>& in) {
  if (!AllFloat(in, {0})) return {false, "needs float32 input"};
  if (in[0].shape.size() < 3 || in[0].shape.size() > 5) return {false, "rank must be 3..5"};
  if (OrderOf(in[0]) == Order::kOther) return {false, "input is neither plain nor channels-last"};
  return {true, ""};
}

class GlobalAverage final : public runtime::Kernel {
 public:
  explicit GlobalAverage(const ir::Node&) {}
  bool AcceptsLayout(size_t input) const override { return input == 0; }
  size_t ScratchBytes() const override {
    return channels_last_ ? static_cast<size_t>(threads_ * c_) * sizeof(float) : 0;
  }

  Status Prepare(runtime::PrepareContext* ctx) override {
    const TensorInfo& x = ctx->inputs[0];
    n_ = x.shape[0];
    c_ = x.shape[1];
    p_ = Spatial(x.shape);
    channels_last_ = OrderOf(x) == Order::kChannelsLast;
    threads_ = std::max(1, ctx->num_threads);
    const Shape& ys = ctx->outputs[0].shape;
    return Guard("GlobalAveragePool", [&] {
      ctx->outputs[0].layout = channels_last_ ? LayoutFor(ChannelsLastDesc(ys), ys) : nullptr;
    });
  }

  Status Run(const ir::ComputeContext& ctx) const override {
    const float* x = ctx.in(0).data<float>();
    float* y = ctx.out(0).data<float>();
    const int64_t c = c_, p = p_;
    const float inv = 1.0f / static_cast<float>(p);
    if (channels_last_) {
      // Per sample, each thread sums a contiguous range of pixel rows (the rows its core's
      // producer most likely wrote) into its own partial sums in scratch; then they are added.
      float* partial = static_cast<float*>(ctx.scratch);
      const int64_t parts = p >= 64 * threads_ ? threads_ : 1;
      for (int64_t n = 0; n < n_; ++n) {
        const float* xs = x + n * p * c;
        ParallelFor(parts, 1, [&](int64_t b, int64_t e) {
          for (int64_t t = b; t < e; ++t) {
            float* acc = partial + t * c;
            std::fill(acc, acc + c, 0.f);
            const int64_t r0 = p * t / parts, r1 = p * (t + 1) / parts;
            for (int64_t r = r0; r < r1; ++r) {
              const float* xr = xs + r * c;
#pragma omp simd
              for (int64_t i = 0; i < c; ++i) acc[i] += xr[i];
            }
          }
        });
        for (int64_t i = 0; i < c; ++i) {
          float sum = 0.f;
          for (int64_t t = 0; t < parts; ++t) sum += partial[t * c + i];
          y[n * c + i] = sum * inv;
        }
      }
    } else {
      ParallelFor(n_ * c, std::max<int64_t>(1, 4096 / p), [&](int64_t b, int64_t e) {
        for (int64_t q = b; q < e; ++q) {
          const float* xr = x + q * p;
          float acc = 0.f;
#pragma omp simd reduction(+ : acc)
          for (int64_t i = 0; i < p; ++i) acc += xr[i];
          y[q] = acc * inv;
        }
      });
    }
    return OkStatus();
  }

 private:
  int64_t n_ = 0, c_ = 0, p_ = 0, threads_ = 1;
  bool channels_last_ = false;
};

// Priority 20: ahead of the oneDNN kernels (10), which take what these decline.
KILN_REGISTER_KERNEL(runtime::KernelDef{"cpu.mul.channel_scale",
                                        "Mul",
                                        "",
                                        7,
                                        ir::kMaxOpset,
                                        "cpu",
                                        20,
                                        SupportsChannelScale,
                                        CreateKernel<ChannelScale>,
                                        {}});
KILN_REGISTER_KERNEL(runtime::KernelDef{"cpu.globalaveragepool.channels",
                                        "GlobalAveragePool",
                                        "",
                                        1,
                                        ir::kMaxOpset,
                                        "cpu",
                                        20,
                                        SupportsGlobalAverage,
                                        CreateKernel<GlobalAverage>,
                                        {}});

}  // namespace
}  // namespace kiln::backends::cpu
