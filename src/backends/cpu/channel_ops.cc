// Squeeze-excite's two memory-bound steps as plain vectorized loops, because oneDNN 2.6's
// primitives are slow at these shapes. EfficientNet-B0 at batch 1 on 2 threads
// (`kiln bench --profile`, 2026-11-22): its 16 multiplies by a per-channel scale took 0.79 ms per
// run in oneDNN's binary primitive and take 0.16 ms here; its 17 global average poolings 0.36 ms
// in oneDNN's pooling and 0.12 ms here.
//   cpu.mul.channel_scale: Mul(x[N,C,...], s[N|1,C,1,...]) (either operand order), x plain or
//     channels-last (oneDNN's acdb family), s plain or channels-last (the same memory order when
//     its spatial dims are 1); the output takes x's layout and may overwrite x.
//   cpu.globalaveragepool.channels: GlobalAveragePool of x plain or channels-last; the output
//     [N,C,1,...] gets the layout oneDNN's pooling would give it (channels-last for a
//     channels-last input), so the consumers' plans are unchanged.
// Both read and write float32 or, under --precision bf16 at batch 1, bfloat16 storage (rounded to
// nearest even, as oneDNN does). Any other layout (blocked nChw16c) is declined and goes to the
// oneDNN kernels.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "backends/cpu/onednn_common.h"
#include "core/threading.h"
#include "ops/common.h"
#include "ops/nn/norm.h"

namespace kiln::backends::cpu {
namespace {

using dnnl::memory;
using runtime::KernelSupport;
using runtime::TensorInfo;

// bfloat16 storage (under --precision bf16 the activations between oneDNN kernels are bf16).
struct Bf16 {
  uint16_t bits;
};

inline float Load(float v) { return v; }
inline float Load(Bf16 v) {
  const uint32_t b = static_cast<uint32_t>(v.bits) << 16;
  float f;
  std::memcpy(&f, &b, sizeof(f));
  return f;
}
inline void Store(float* p, float v) { *p = v; }
// Round to nearest even, as oneDNN converts; NaNs stay (quiet) NaNs.
inline void Store(Bf16* p, float v) {
  uint32_t b;
  std::memcpy(&b, &v, sizeof(b));
  const uint32_t rounded = (b + 0x7FFFu + ((b >> 16) & 1u)) >> 16;
  const bool nan = (b & 0x7FFFFFFFu) > 0x7F800000u;
  p->bits = static_cast<uint16_t>(nan ? (b >> 16) | 0x40u : rounded);
}

enum class Order { kPlain, kChannelsLast, kOther };
struct Storage {
  Order order = Order::kOther;
  bool bf16 = false;
};

Storage StorageOf(const TensorInfo& t) {
  if (!t.layout) return {Order::kPlain, false};
  if (t.shape.size() < 3 || t.shape.size() > 5) return {};
  const memory::desc d = InputDesc(t);
  for (auto dt : {memory::data_type::f32, memory::data_type::bf16})
    if (d == ChannelsLastDesc(t.shape, dt))
      return {Order::kChannelsLast, dt == memory::data_type::bf16};
  return {};
}

int64_t Spatial(const Shape& s) {
  int64_t p = 1;
  for (size_t i = 2; i < s.size(); ++i) p *= s[i];
  return p;
}

// The loops, as templates over the storage types, instantiated below into functions that GCC
// clones for AVX-512 and AVX2 (chosen once at load; the baseline build targets plain x86-64).
#define KILN_CHANNEL_CLONES __attribute__((target_clones("default", "avx2", "arch=x86-64-v4")))
#define KILN_INLINE inline __attribute__((always_inline))

// out[i] = scale * sum over `rows` rows of x[r * c + i], i < c: 64 channels at a time held in
// registers across all rows (a running sum kept in memory would wait on store-to-load
// forwarding at every row).
template <typename TX, typename TY>
KILN_INLINE void SumRowsT(const TX* x, int64_t rows, int64_t c, float scale, TY* out) {
  constexpr int64_t kBlock = 64;
  for (int64_t c0 = 0; c0 < c; c0 += kBlock) {
    const int64_t len = std::min(kBlock, c - c0);
    float acc[kBlock] = {};
    if (len == kBlock) {
      for (int64_t r = 0; r < rows; ++r) {
        const TX* xr = x + r * c + c0;
#pragma omp simd
        for (int64_t i = 0; i < kBlock; ++i) acc[i] += Load(xr[i]);
      }
    } else {
      for (int64_t r = 0; r < rows; ++r) {
        const TX* xr = x + r * c + c0;
#pragma omp simd
        for (int64_t i = 0; i < len; ++i) acc[i] += Load(xr[i]);
      }
    }
    for (int64_t i = 0; i < len; ++i) Store(out + c0 + i, acc[i] * scale);
  }
}

// y[r * c + i] = x[r * c + i] * s[i] over `rows` rows (x == y allowed).
template <typename TX, typename TS>
KILN_INLINE void ScaleRowsT(const TX* x, int64_t rows, int64_t c, const TS* s, TX* y) {
  for (int64_t r = 0; r < rows; ++r) {
    const TX* xr = x + r * c;
    TX* yr = y + r * c;
#pragma omp simd
    for (int64_t i = 0; i < c; ++i) Store(yr + i, Load(xr[i]) * Load(s[i]));
  }
}

KILN_CHANNEL_CLONES void SumRows(const float* x, int64_t r, int64_t c, float k, float* o) {
  SumRowsT(x, r, c, k, o);
}
KILN_CHANNEL_CLONES void SumRows(const Bf16* x, int64_t r, int64_t c, float k, float* o) {
  SumRowsT(x, r, c, k, o);
}
KILN_CHANNEL_CLONES void SumRows(const Bf16* x, int64_t r, int64_t c, float k, Bf16* o) {
  SumRowsT(x, r, c, k, o);
}
template <typename TX, typename TS>
void ScaleRows(const TX* x, int64_t rows, int64_t c, const TS* s, TX* y);
#define KILN_SCALE_ROWS(TX, TS)                                                                 \
  template <>                                                                                   \
  KILN_CHANNEL_CLONES void ScaleRows<TX, TS>(const TX* x, int64_t rows, int64_t c, const TS* s, \
                                             TX* y) {                                           \
    ScaleRowsT(x, rows, c, s, y);                                                               \
  }
// y[i] = x[i] * v over n values (x == y allowed): a plain [N,C,H,W] plane.
template <typename TX>
KILN_INLINE void ScaleSpanT(const TX* x, int64_t n, float v, TX* y) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) Store(y + i, Load(x[i]) * v);
}
KILN_CHANNEL_CLONES void ScaleSpan(const float* x, int64_t n, float v, float* y) {
  ScaleSpanT(x, n, v, y);
}
// Plain tensors are always float32; this overload only lets the templates below compile.
void ScaleSpan(const Bf16* x, int64_t n, float v, Bf16* y) { ScaleSpanT(x, n, v, y); }

// y = x * a + b per channel, then max(y, 0) with `relu`: rows of C values (channels-last) or one
// plane per channel (plain).
KILN_CHANNEL_CLONES void AffineRows(const float* x, int64_t rows, int64_t c, const float* a,
                                    const float* b, bool relu, float* y) {
  const float lo = relu ? 0.f : -std::numeric_limits<float>::infinity();
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * c;
    float* yr = y + r * c;
#pragma omp simd
    for (int64_t i = 0; i < c; ++i) yr[i] = std::max(xr[i] * a[i] + b[i], lo);
  }
}
KILN_CHANNEL_CLONES void AffineSpan(const float* x, int64_t n, float a, float b, bool relu,
                                    float* y) {
  const float lo = relu ? 0.f : -std::numeric_limits<float>::infinity();
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = std::max(x[i] * a + b, lo);
}

KILN_SCALE_ROWS(float, float)
KILN_SCALE_ROWS(float, Bf16)
KILN_SCALE_ROWS(Bf16, float)
KILN_SCALE_ROWS(Bf16, Bf16)

// bf16 above batch 1 stays with oneDNN: there our rounding to bf16 (a dozen vector instructions
// per 16 values, where oneDNN uses AVX512-BF16's conversion) makes the loops compute-bound.
// EfficientNet-B0 at batch 32: multiplies 9.4 vs 8.2 ms, poolings 5.9 vs 4.7 ms per run; at batch
// 1 they win (0.45 vs 0.64 ms).
constexpr const char* kBf16Batch = "bf16 above batch 1: oneDNN's kernel measured faster";

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
  if (StorageOf(in[x]).order == Order::kOther)
    return {false, "x is neither plain nor channels-last (f32/bf16)"};
  // s's spatial dims are 1, so plain and channels-last store it the same way.
  if (StorageOf(in[1 - x]).order == Order::kOther)
    return {false, "s is neither plain nor channels-last (f32/bf16)"};
  if (StorageOf(in[x]).bf16 && in[x].shape[0] > 1) return {false, kBf16Batch};
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
    x_storage_ = StorageOf(x);
    s_bf16_ = StorageOf(ctx->inputs[1 - x_]).bf16;
    ctx->outputs[0].layout = x.layout;
    return OkStatus();
  }

  Status Run(const ir::ComputeContext& ctx) const override {
    const void* x = ctx.in(x_).raw();
    const void* s = ctx.in(1 - x_).raw();
    void* y = ctx.out(0).raw();
    if (x_storage_.bf16) {
      if (s_bf16_) return Scale<Bf16, Bf16>(x, s, y);
      return Scale<Bf16, float>(x, s, y);
    }
    if (s_bf16_) return Scale<float, Bf16>(x, s, y);
    return Scale<float, float>(x, s, y);
  }

 private:
  template <typename TX, typename TS>
  Status Scale(const void* xv, const void* sv, void* yv) const {
    const TX* x = static_cast<const TX*>(xv);
    const TS* s = static_cast<const TS*>(sv);
    TX* y = static_cast<TX*>(yv);
    const int64_t c = c_, p = p_;
    if (x_storage_.order == Order::kChannelsLast) {
      // Rows of C values, one per pixel; a chunk never straddles two samples' scales.
      ParallelFor(n_ * p, 256, [&](int64_t b, int64_t e) {
        while (b < e) {
          const int64_t n = b / p, end = std::min(e, (n + 1) * p);
          ScaleRows<TX, TS>(x + b * c, end - b, c, s + (scale_per_sample_ ? n * c : 0), y + b * c);
          b = end;
        }
      });
    } else {
      // Planes of P values, one per (n, c).
      ParallelFor(n_ * c, std::max<int64_t>(1, 4096 / p), [&](int64_t b, int64_t e) {
        for (int64_t q = b; q < e; ++q)
          ScaleSpan(x + q * p, p, Load(s[scale_per_sample_ ? q : q % c]), y + q * p);
      });
    }
    return OkStatus();
  }

  int x_ = 0;
  int64_t n_ = 0, c_ = 0, p_ = 0;
  bool scale_per_sample_ = false, s_bf16_ = false;
  Storage x_storage_;
};
KernelSupport SupportsGlobalAverage(const ir::Node&, const ir::Op&,
                                    const std::vector<TensorInfo>& in) {
  if (!AllFloat(in, {0})) return {false, "needs float32 input"};
  if (in[0].shape.size() < 3 || in[0].shape.size() > 5) return {false, "rank must be 3..5"};
  if (StorageOf(in[0]).order == Order::kOther)
    return {false, "input is neither plain nor channels-last (f32/bf16)"};
  if (StorageOf(in[0]).bf16 && in[0].shape[0] > 1) return {false, kBf16Batch};
  return {true, ""};
}

class GlobalAverage final : public runtime::Kernel {
 public:
  explicit GlobalAverage(const ir::Node&) {}
  bool AcceptsLayout(size_t input) const override { return input == 0; }
  size_t ScratchBytes() const override {
    // Partial sums, only for the batch-1 path below (fewer samples than threads).
    return storage_.order == Order::kChannelsLast && n_ < threads_
               ? static_cast<size_t>(threads_ * c_) * sizeof(float)
               : 0;
  }

  Status Prepare(runtime::PrepareContext* ctx) override {
    const TensorInfo& x = ctx->inputs[0];
    n_ = x.shape[0];
    c_ = x.shape[1];
    p_ = Spatial(x.shape);
    storage_ = StorageOf(x);
    threads_ = std::max(1, ctx->num_threads);
    const Shape& ys = ctx->outputs[0].shape;
    return Guard("GlobalAveragePool", [&] {
      // As oneDNN's pooling would store it: channels-last in the input's data type.
      if (storage_.order == Order::kChannelsLast)
        ctx->outputs[0].layout = LayoutFor(
            ChannelsLastDesc(ys, storage_.bf16 ? memory::data_type::bf16 : memory::data_type::f32),
            ys);
    });
  }

  Status Run(const ir::ComputeContext& ctx) const override {
    if (storage_.bf16)
      return Average(static_cast<const Bf16*>(ctx.in(0).raw()),
                     static_cast<Bf16*>(ctx.out(0).raw()), ctx.scratch);
    return Average(static_cast<const float*>(ctx.in(0).raw()),
                   static_cast<float*>(ctx.out(0).raw()), ctx.scratch);
  }

 private:
  template <typename T>
  Status Average(const T* x, T* y, void* scratch) const {
    const int64_t c = c_, p = p_;
    const float inv = 1.0f / static_cast<float>(p);
    if (storage_.order == Order::kChannelsLast) {
      if (n_ >= threads_) {
        // At least as many samples as threads: each thread takes whole samples.
        ParallelFor(n_, 1, [&](int64_t b, int64_t e) {
          for (int64_t n = b; n < e; ++n) SumRows(x + n * p * c, p, c, inv, y + n * c);
        });
        return OkStatus();
      }
      // Fewer samples than threads (batch 1): per sample, each thread sums a contiguous range of
      // pixel rows (the rows its core's producer most likely wrote, so the multiply that
      // follows finds them in that core's cache) into its own partial sums in scratch.
      float* partial = static_cast<float*>(scratch);
      const int64_t parts = p >= 64 * threads_ ? threads_ : 1;
      for (int64_t n = 0; n < n_; ++n) {
        const T* xs = x + n * p * c;
        ParallelFor(parts, 1, [&](int64_t b, int64_t e) {
          for (int64_t t = b; t < e; ++t) {
            const int64_t r0 = p * t / parts, r1 = p * (t + 1) / parts;
            SumRows(xs + r0 * c, r1 - r0, c, 1.0f, partial + t * c);
          }
        });
        for (int64_t i = 0; i < c; ++i) {
          float sum = 0.f;
          for (int64_t t = 0; t < parts; ++t) sum += partial[t * c + i];
          Store(y + n * c + i, sum * inv);
        }
      }
      return OkStatus();
    }
    // Plain (always float32): one reduction per (n, c) plane.
    ParallelFor(n_ * c, std::max<int64_t>(1, 4096 / p), [&](int64_t b, int64_t e) {
      for (int64_t q = b; q < e; ++q) {
        const T* xr = x + q * p;
        float acc = 0.f;
#pragma omp simd reduction(+ : acc)
        for (int64_t i = 0; i < p; ++i) acc += Load(xr[i]);
        Store(y + q, acc * inv);
      }
    });
    return OkStatus();
  }

  int64_t n_ = 0, c_ = 0, p_ = 0, threads_ = 1;
  Storage storage_;
};

// cpu.batchnormalization.channels (and cpu.fusedbatchnormalization.channels, the optimizer's
// BatchNormalization + Relu, with the Relu in the same loop): inference BatchNormalization (opset
// 7+, training_mode 0, only Y) as y = x * a + b per channel, a = scale / sqrt(var + epsilon) and b
// = B - mean * a computed once in double from the constant parameters, on float32 plain or
// channels-last X (the output keeps X's layout and may overwrite it). Graphs with
// BatchNormalization after a convolution have it folded away; this serves the rest (DenseNet's
// pre-activation BN -> ReLU -> Conv: its 62 BatchNormalizations took 4.8 ms per run in the
// reference kernel and 6.1 ms in oneDNN's batch_normalization on plain NCHW input).
KernelSupport SupportsBatchNorm(const ir::Node& node, const ir::Op& op,
                                const std::vector<TensorInfo>& in) {
  if (!AllFloat(in, {0, 1, 2, 3, 4})) return {false, "needs float32 X, scale, B, mean, var"};
  if (node.domain.empty() && node.opset < 7) return {false, "opset < 7 (legacy attributes)"};
  const ops::NormAttrs& a = runtime::AttrsOf<ops::NormAttrs>(op);
  if (a.training) return {false, "training_mode"};
  for (size_t o = 1; o < node.outputs.size(); ++o)
    if (node.outputs[o] >= 0) return {false, "running statistics outputs requested"};
  if (a.act.kind != ops::ActivationKind::kNone && a.act.kind != ops::ActivationKind::kRelu)
    return {false, "activation other than Relu"};
  const Shape& xs = in[0].shape;
  if (xs.size() < 2) return {false, "rank must be >= 2"};
  for (size_t i = 1; i < 5; ++i)
    if (in[i].shape != Shape{xs[1]}) return {false, "parameters must be [C]"};
  const Storage st = StorageOf(in[0]);
  if (st.order == Order::kOther || st.bf16)
    return {false, "X is neither plain nor channels-last f32"};
  return {true, ""};
}

class BatchNormAffine final : public runtime::Kernel {
 public:
  BatchNormAffine(const ir::Node& node, const ir::Op& op)
      : node_(node), attrs_(runtime::AttrsOf<ops::NormAttrs>(op)) {}
  bool AcceptsLayout(size_t input) const override { return input == 0; }
  int InPlaceInput() const override { return 0; }

  Status Prepare(runtime::PrepareContext* ctx) override {
    const TensorInfo& x = ctx->inputs[0];
    n_ = x.shape[0];
    c_ = x.shape[1];
    p_ = NumElements(x.shape) / std::max<int64_t>(1, n_ * c_);
    channels_last_ = StorageOf(x).order == Order::kChannelsLast;
    relu_ = attrs_.act.kind == ops::ActivationKind::kRelu;
    const double eps = attrs_.epsilon;
    const float* scale = ctx->constants[1]->data<float>();
    const float* bias = ctx->constants[2]->data<float>();
    const float* mean = ctx->constants[3]->data<float>();
    const float* var = ctx->constants[4]->data<float>();
    a_.resize(static_cast<size_t>(c_));
    b_.resize(static_cast<size_t>(c_));
    for (int64_t i = 0; i < c_; ++i) {
      const double a = scale[i] / std::sqrt(static_cast<double>(var[i]) + eps);
      a_[i] = static_cast<float>(a);
      b_[i] = static_cast<float>(bias[i] - mean[i] * a);
    }
    ctx->outputs[0].layout = x.layout;
    return OkStatus();
  }

  Status Run(const ir::ComputeContext& ctx) const override {
    const float* x = ctx.in(0).data<float>();
    float* y = ctx.out(0).data<float>();
    const int64_t c = c_, p = p_;
    if (channels_last_) {
      ParallelFor(n_ * p, 256, [&](int64_t b, int64_t e) {
        AffineRows(x + b * c, e - b, c, a_.data(), b_.data(), relu_, y + b * c);
      });
    } else {
      ParallelFor(n_ * c, std::max<int64_t>(1, 4096 / std::max<int64_t>(p, 1)),
                  [&](int64_t b, int64_t e) {
                    for (int64_t q = b; q < e; ++q)
                      AffineSpan(x + q * p, p, a_[q % c], b_[q % c], relu_, y + q * p);
                  });
    }
    return OkStatus();
  }

 private:
  ir::Node node_;
  ops::NormAttrs attrs_;
  int64_t n_ = 0, c_ = 0, p_ = 0;
  bool channels_last_ = false, relu_ = false;
  std::vector<float> a_, b_;
};

// Priority 20: ahead of the oneDNN kernels (10), which take what these decline.
KILN_REGISTER_KERNEL(runtime::KernelDef{"cpu.mul.channel_scale",
                                        "Mul",
                                        "",
                                        7,
                                        ir::kMaxOpset,
                                        Backend::kCpu,
                                        20,
                                        SupportsChannelScale,
                                        CreateKernel<ChannelScale>,
                                        {}});
KILN_REGISTER_KERNEL(runtime::KernelDef{"cpu.globalaveragepool.channels",
                                        "GlobalAveragePool",
                                        "",
                                        1,
                                        ir::kMaxOpset,
                                        Backend::kCpu,
                                        20,
                                        SupportsGlobalAverage,
                                        CreateKernel<GlobalAverage>,
                                        {}});
KILN_REGISTER_KERNEL(runtime::KernelDef{"cpu.batchnormalization.channels",
                                        "BatchNormalization",
                                        "",
                                        7,
                                        ir::kMaxOpset,
                                        Backend::kCpu,
                                        20,
                                        SupportsBatchNorm,
                                        CreateKernel<BatchNormAffine>,
                                        {1, 2, 3, 4}});
KILN_REGISTER_KERNEL(runtime::KernelDef{"cpu.fusedbatchnormalization.channels",
                                        "FusedBatchNormalization",
                                        "kiln",
                                        1,
                                        1,
                                        Backend::kCpu,
                                        20,
                                        SupportsBatchNorm,
                                        CreateKernel<BatchNormAffine>,
                                        {1, 2, 3, 4}});

}  // namespace
}  // namespace kiln::backends::cpu
