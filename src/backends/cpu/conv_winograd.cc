// cpu.conv.winograd / cpu.fusedconv.winograd: 3x3 stride-1 convolutions (Conv and kiln.FusedConv,
// Y = act(Conv(X, W) + B + Z)) by Winograd's minimal filtering F(4x4, 3x3) (Lavin and Gray, "Fast
// Algorithms for Convolutional Neural Networks", 2015), float32, on AVX2 with FMA.
//
// Each 4x4 output tile is computed from a 6x6 input tile with 36 multiplications per input
// channel instead of 144: the input tile becomes V = B^T d B, the weights U = G g G^T (once, in
// Prepare, in double; shared by the session's plans through its weight cache), and for each of
// the 36 positions xi the sums over the input channels are one matrix product M[xi] = V[xi]
// (tiles x C) . U[xi] (C x K), on an AVX2 6x16 register-tile micro-kernel; the output tile is
// A^T M A, to which the bias, the residual Z and the activation are applied as it is stored.
// Tiles go in chunks: with transformed weights up to kThreadWeightBytes (64-128 channels) each
// thread runs whole chunks of its own (kThreadChunkBytes of V and M, which stay in its cache; no
// barrier between the steps); larger weights (512 x 512: 38 MB) are read once per chunk, so the
// chunks are large (kChunkBytes) and shared, each step spread over the threads.
// Memory: U is 4x the size of W, plus the chunks' V and M in the arena's scratch: ResNet-18's
// peak RSS in `kiln bench` is 154 MB against 126 MB without this kernel at batch 1 (its 512-channel
// layers decline: too few tiles) and 387 against 265 MB at batch 32.
//
// Activations are kept in oneDNN's 8-channel blocked layout (aBcd8b), which is what oneDNN's
// AVX2 convolutions around it read and write, so one transform step loads and stores whole
// 8-channel vectors; an input in another layout is reordered into it first.
//
// Where it is used: on CPUs with AVX2 and FMA but without AVX-512 (there oneDNN's AVX-512 direct
// convolutions are kept: this kernel is not measured against them), for C and K multiples of 8,
// at least kMinChannels of each, and at least kMinTiles tiles per run (few tiles cannot pay for
// reading the transformed weights). It computes in float32 only (KernelDef::precisions {kFp32}):
// under --precision bf16 the selector passes it over for the next kernel (oneDNN's).
// KILN_WINOGRAD=force lifts the CPU and tile conditions (tests);
// KILN_DISABLE_KERNELS=cpu.conv.winograd,cpu.fusedconv.winograd turns it off.
//
// Accuracy: the transforms' constants (1/4, 1/6, 1/12, 1/24 in G; up to 8 in A) make float32
// rounding errors about 10x those of a direct sum: measured against the double reference,
// within 1e-4 absolute + 1e-4 relative on the op's cases (kiln_kernel_harness_test) and on
// tests/kernels/onednn_fusion_test.cc's ConvWinograd.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "backends/cpu/onednn_common.h"
#include "core/threading.h"
#include "ops/activation.h"
#include "ops/nn/conv.h"
#include "runtime/session_resources.h"

namespace kiln::backends::cpu {
namespace {

using dnnl::memory;
using runtime::KernelSupport;
using runtime::TensorInfo;

#define KILN_AVX2_FMA __attribute__((target("avx2,fma")))
#define KILN_AVX2_INLINE __attribute__((target("avx2,fma"), always_inline)) inline

constexpr int kPos = 36;              // 6x6 transformed positions
constexpr int64_t kMinChannels = 16;  // C and K
constexpr int64_t kMinTiles = 8;      // tiles per run (N * ceil(OH/4) * ceil(OW/4)); twice as many
                                      // for transformed weights above kThreadWeightBytes
constexpr int64_t kChunkBytes = 16 << 20;         // V and M of one shared chunk of tiles
constexpr int64_t kThreadChunkBytes = 512 << 10;  // V and M of one thread's chunk
constexpr int64_t kThreadWeightBytes = 4 << 20;   // transformed weights for per-thread chunks
constexpr int64_t kMaxKc = 256;                   // input channels per pass of the products
constexpr int kMr = 6;                            // tiles per product micro-kernel
constexpr int kNr = 16;                           // output channels per product micro-kernel

// F(4x4, 3x3) with the interpolation points 0, 1, -1, 1/2, -2 and infinity, which in float32
// give about 0.6x the error of the common 0, 1, -1, 2, -2 (a simulation over random tiles:
// relative RMS error 2.0e-6 against 3.1e-6 with 256 channels; a direct sum gives 0.8e-6).
// B^T (6x6), G (6x3) and A^T (4x6) from the Toom-Cook construction for these points.
constexpr float kBt[6][6] = {{1, -1.5f, -2, 1.5f, 1, 0}, {0, -1, 0.5f, 2.5f, 1, 0},
                             {0, 1, -2.5f, 0.5f, 1, 0},  {0, -2, -1, 2, 1, 0},
                             {0, 0.5f, -1, -0.5f, 1, 0}, {0, 1, -1.5f, -2, 1.5f, 1}};
constexpr double kG[6][3] = {{1, 0, 0},
                             {1.0 / 3, 1.0 / 3, 1.0 / 3},
                             {-1.0 / 3, 1.0 / 3, -1.0 / 3},
                             {-16.0 / 15, -8.0 / 15, -4.0 / 15},
                             {1.0 / 15, -2.0 / 15, 4.0 / 15},
                             {0, 0, 1}};
constexpr float kAt[4][6] = {
    {1, 1, 1, 1, 1, 0}, {0, 1, -1, 0.5f, -2, 0}, {0, 1, 1, 0.25f, 4, 0}, {0, 1, -1, 0.125f, -8, 1}};

// r[i] = sum_j t[i][j] x[j] over the vectors x[0..N): with the tables above as constants and the
// loops unrolled, the compiler drops the zero terms and the unit multiplications.
template <int R, int N>
KILN_AVX2_INLINE void Transform(const float (&t)[R][N], const __m256* x, __m256* r) {
#pragma GCC unroll 6
  for (int i = 0; i < R; ++i) {
    __m256 acc = _mm256_setzero_ps();
    bool first = true;
#pragma GCC unroll 6
    for (int j = 0; j < N; ++j) {
      const float c = t[i][j];
      if (c == 0.f) continue;
      if (first) {
        acc = c == 1.f ? x[j] : _mm256_mul_ps(_mm256_set1_ps(c), x[j]);
        first = false;
      } else if (c == 1.f) {
        acc = _mm256_add_ps(acc, x[j]);
      } else if (c == -1.f) {
        acc = _mm256_sub_ps(acc, x[j]);
      } else {
        acc = _mm256_fmadd_ps(_mm256_set1_ps(c), x[j], acc);
      }
    }
    r[i] = acc;
  }
}

KILN_AVX2_INLINE void InputTransform6(const __m256* x, __m256* r) { Transform(kBt, x, r); }
KILN_AVX2_INLINE void OutputTransform6(const __m256* m, __m256* o) { Transform(kAt, m, o); }

// Geometry of one prepared shape.
struct Geo {
  int64_t n = 0, c = 0, h = 0, w = 0, k = 0, oh = 0, ow = 0, pt = 0, pl = 0;
  int64_t th = 0, tw = 0, tiles = 0;  // tiles per column, per row, in all
  int64_t chunk = 0;                  // tiles per chunk (a multiple of kMr, or all)
  int64_t panels = 0;                 // ceil(K / kNr)
  int64_t kc = 0;                     // input channels per pass of the products
  int64_t workers = 0;                // > 1: chunks per thread; else each step split
};

// Input transform of tile `t` (global index), channels [cb * 8, cb * 8 + 8), into
// v[xi * v_stride] for each position xi. x is aBcd8b.
KILN_AVX2_FMA void InputTile(const Geo& g, const float* x, int64_t t, int64_t cb, float* v,
                             int64_t v_stride) {
  const int64_t per_image = g.th * g.tw;
  const int64_t n = t / per_image, ty = (t % per_image) / g.tw, tx = t % g.tw;
  const int64_t y0 = ty * 4 - g.pt, x0 = tx * 4 - g.pl;
  const float* plane = x + ((n * (g.c / 8) + cb) * g.h) * g.w * 8;
  __m256 d[6][6];
  const bool inside = y0 >= 0 && x0 >= 0 && y0 + 6 <= g.h && x0 + 6 <= g.w;
  for (int i = 0; i < 6; ++i) {
    const int64_t yy = y0 + i;
    for (int j = 0; j < 6; ++j) {
      const int64_t xx = x0 + j;
      d[i][j] = inside || (yy >= 0 && yy < g.h && xx >= 0 && xx < g.w)
                    ? _mm256_loadu_ps(plane + (yy * g.w + xx) * 8)
                    : _mm256_setzero_ps();
    }
  }
  __m256 col[6], r[6], t1[6][6];
  for (int j = 0; j < 6; ++j) {
    for (int i = 0; i < 6; ++i) col[i] = d[i][j];
    InputTransform6(col, r);
    for (int i = 0; i < 6; ++i) t1[i][j] = r[i];
  }
  for (int i = 0; i < 6; ++i) {
    InputTransform6(t1[i], r);
    for (int j = 0; j < 6; ++j) _mm256_storeu_ps(v + (i * 6 + j) * v_stride, r[j]);
  }
}

// c[MR x 8*NV] = a[MR x kc] . b[kc x 8*NV]: rows of a `lda` apart, b packed kc rows of 8*NV,
// c's rows `ldc` apart.
template <int MR, int NV>
KILN_AVX2_FMA void Micro(const float* a, int64_t lda, const float* b, int64_t kc, float* c,
                         int64_t ldc, bool add) {
  __m256 acc[MR][NV];
#pragma GCC unroll 6
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 2
    for (int j = 0; j < NV; ++j)
      acc[r][j] = add ? _mm256_loadu_ps(c + r * ldc + j * 8) : _mm256_setzero_ps();
  for (int64_t p = 0; p < kc; ++p) {
    __m256 bv[NV];
#pragma GCC unroll 2
    for (int j = 0; j < NV; ++j) bv[j] = _mm256_loadu_ps(b + (p * NV + j) * 8);
#pragma GCC unroll 6
    for (int r = 0; r < MR; ++r) {
      const __m256 av = _mm256_broadcast_ss(a + r * lda + p);
#pragma GCC unroll 2
      for (int j = 0; j < NV; ++j) acc[r][j] = _mm256_fmadd_ps(av, bv[j], acc[r][j]);
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 2
    for (int j = 0; j < NV; ++j) _mm256_storeu_ps(c + r * ldc + j * 8, acc[r][j]);
}

template <int NV>
KILN_AVX2_FMA void MicroRows(int rows, const float* a, int64_t lda, const float* b, int64_t kc,
                             float* c, int64_t ldc, bool add) {
  switch (rows) {
    case 6:
      return Micro<6, NV>(a, lda, b, kc, c, ldc, add);
    case 5:
      return Micro<5, NV>(a, lda, b, kc, c, ldc, add);
    case 4:
      return Micro<4, NV>(a, lda, b, kc, c, ldc, add);
    case 3:
      return Micro<3, NV>(a, lda, b, kc, c, ldc, add);
    case 2:
      return Micro<2, NV>(a, lda, b, kc, c, ldc, add);
    default:
      return Micro<1, NV>(a, lda, b, kc, c, ldc, add);
  }
}

// M[xi] (rows x K) = V[xi] (rows x C) . U[xi] (C x K) for one position and one panel of
// output channels.
KILN_AVX2_FMA void ProductPanel(const Geo& g, const float* v, const float* u, int64_t rows,
                                int64_t panel, float* m) {
  const int64_t k0 = panel * kNr;
  const int64_t width = std::min<int64_t>(kNr, g.k - k0);
  const float* b = u + k0 * g.c;  // panel `panel` of this position: C rows of `width`
  for (int64_t c0 = 0; c0 < g.c; c0 += g.kc) {
    const int64_t kc = std::min(g.kc, g.c - c0);
    for (int64_t r = 0; r < rows; r += kMr) {
      const int rr = static_cast<int>(std::min<int64_t>(kMr, rows - r));
      if (width == 16)
        MicroRows<2>(rr, v + r * g.c + c0, g.c, b + c0 * 16, kc, m + r * g.k + k0, g.k, c0 > 0);
      else
        MicroRows<1>(rr, v + r * g.c + c0, g.c, b + c0 * 8, kc, m + r * g.k + k0, g.k, c0 > 0);
    }
  }
}

// Output transform of tile `t`, channels [kb * 8, kb * 8 + 8), from m[xi * m_stride], plus bias
// and residual, activation, into y (aBcd8b). `z` (aBcd8b) may be y itself.
KILN_AVX2_FMA void OutputTile(const Geo& g, const float* m, int64_t m_stride, int64_t t, int64_t kb,
                              const float* bias, const float* z, float* y,
                              const ops::Activation& act) {
  const int64_t per_image = g.th * g.tw;
  const int64_t n = t / per_image, ty = (t % per_image) / g.tw, tx = t % g.tw;
  __m256 t1[4][6], col[6], r[6];
  for (int j = 0; j < 6; ++j) {
    for (int i = 0; i < 6; ++i) col[i] = _mm256_loadu_ps(m + (i * 6 + j) * m_stride);
    OutputTransform6(col, r);
    for (int i = 0; i < 4; ++i) t1[i][j] = r[i];
  }
  const __m256 b = bias != nullptr ? _mm256_loadu_ps(bias + kb * 8) : _mm256_setzero_ps();
  const int64_t plane = (n * (g.k / 8) + kb) * g.oh * g.ow * 8;
  const int64_t rows = std::min<int64_t>(4, g.oh - ty * 4),
                cols = std::min<int64_t>(4, g.ow - tx * 4);
  const bool relu = act.kind == ops::ActivationKind::kRelu;
  const bool clip = act.kind == ops::ActivationKind::kClip;
  const bool other = !relu && !clip && act.kind != ops::ActivationKind::kNone;
  const __m256 lo = _mm256_set1_ps(clip ? act.alpha : 0.f), hi = _mm256_set1_ps(act.beta);
  for (int i = 0; i < rows; ++i) {
    __m256 o[4];
    OutputTransform6(t1[i], o);
    const int64_t at = plane + ((ty * 4 + i) * g.ow + tx * 4) * 8;
    for (int j = 0; j < cols; ++j) {
      __m256 val = _mm256_add_ps(o[j], b);
      if (z != nullptr) val = _mm256_add_ps(val, _mm256_loadu_ps(z + at + j * 8));
      if (relu) val = _mm256_max_ps(val, _mm256_setzero_ps());
      if (clip) val = _mm256_min_ps(_mm256_max_ps(val, lo), hi);
      _mm256_storeu_ps(y + at + j * 8, val);
    }
    if (other) ops::ApplyActivation(act, y + at, cols * 8);
  }
}

bool Forced() {
  const char* v = std::getenv("KILN_WINOGRAD");
  return v != nullptr && std::string(v) == "force";
}

bool CpuFits() {
  static const bool fits = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return fits;
}

bool PreferOneDnn() {
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  return avx512;
}

class ConvWinograd final : public runtime::Kernel {
 public:
  ConvWinograd(const ir::Node& node, const ir::Op& op)
      : node_(node), a_(runtime::AttrsOf<ops::ConvAttrs>(op)) {}

  bool AcceptsLayout(size_t input) const override { return input == 0 || input == 3; }

  // The residual may share the output's buffer when it arrives blocked: each output tile reads
  // its residual pixels before writing them.
  int InPlaceInput() const override { return has_sum_ && !z_reorder_ ? 3 : -1; }

  size_t ScratchBytes() const override { return SrcBytes() + ZBytes() + ChunkBytes(); }

  Status Prepare(runtime::PrepareContext* ctx) override {
    return Guard(node_, [&] { DoPrepare(ctx); });
  }

  Status Run(const ir::ComputeContext& ctx) const override {
    return Guard(node_, [&] {
      char* scratch = static_cast<char*>(ctx.scratch);
      const float* x = static_cast<const float*>(
          InputAs(src_reorder_, src_in_desc_, blocked_src_, ctx.in(0).raw(), scratch));
      float* y = ctx.out(0).data<float>();
      const float* z = nullptr;
      if (has_sum_)
        z = static_cast<const float*>(
            InputAs(z_reorder_, z_desc_, blocked_dst_, ctx.in(3).raw(), scratch + SrcBytes()));
      float* work = reinterpret_cast<float*>(scratch + SrcBytes() + ZBytes());
      const float* u = packed_.data<float>();
      const float* bias = has_bias_ ? bias_.data<float>() : nullptr;
      const int64_t cb = g_.c / 8, kb = g_.k / 8;
      // One chunk of `rows` tiles from t0, its V and M at v and m, either on the calling thread
      // alone (`split` false) or with each step spread over the threads.
      auto chunk = [&](int64_t t0, int64_t rows, float* v, float* m, bool split) {
        const int64_t v_stride = rows * g_.c, m_stride = rows * g_.k;
        auto inputs = [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) {
            const int64_t c = i / rows, t = i % rows;  // along a plane's rows: prefetched
            InputTile(g_, x, t0 + t, c, v + t * g_.c + c * 8, v_stride);
          }
        };
        auto products = [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) {
            const int64_t xi = i / g_.panels, p = i % g_.panels;
            ProductPanel(g_, v + xi * v_stride, u + xi * g_.c * g_.k, rows, p, m + xi * m_stride);
          }
        };
        auto outputs = [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) {
            const int64_t k = i / rows, t = i % rows;
            OutputTile(g_, m + t * g_.k + k * 8, m_stride, t0 + t, k, bias, z, y, a_.act);
          }
        };
        if (split) {
          ParallelFor(rows * cb, 8, inputs);
          ParallelFor(kPos * g_.panels, 1, products);
          ParallelFor(rows * kb, 8, outputs);
        } else {
          inputs(0, rows * cb);
          products(0, kPos * g_.panels);
          outputs(0, rows * kb);
        }
      };
      const int64_t chunk_floats = kPos * g_.chunk * (g_.c + g_.k);
      if (g_.workers > 1) {
        // Each worker takes every workers-th chunk with its own V and M: no barrier between the
        // steps, and a chunk's data stays in the cache of the core that made it.
        ParallelFor(g_.workers, 1, [&](int64_t b, int64_t e) {
          for (int64_t w = b; w < e; ++w) {
            float* v = work + w * chunk_floats;
            for (int64_t t0 = w * g_.chunk; t0 < g_.tiles; t0 += g_.workers * g_.chunk)
              chunk(t0, std::min(g_.chunk, g_.tiles - t0), v, v + kPos * g_.chunk * g_.c, false);
          }
        });
      } else {
        for (int64_t t0 = 0; t0 < g_.tiles; t0 += g_.chunk)
          chunk(t0, std::min(g_.chunk, g_.tiles - t0), work, work + kPos * g_.chunk * g_.c, true);
      }
    });
  }

 private:
  size_t SrcBytes() const { return ReorderedBytes(src_reorder_, blocked_src_); }
  size_t ZBytes() const { return has_sum_ ? ReorderedBytes(z_reorder_, blocked_dst_) : 0; }
  size_t ChunkBytes() const {
    return Align64(
        static_cast<size_t>(std::max<int64_t>(g_.workers, 1) * kPos * g_.chunk * (g_.c + g_.k)) *
        sizeof(float));
  }

  void DoPrepare(runtime::PrepareContext* ctx) {
    const Shape& xs = ctx->inputs[0].shape;
    const Shape& ws = ctx->inputs[1].shape;
    const Shape& ys = ctx->outputs[0].shape;
    const ConvGeometry geo = ConvGeometryFor(a_.conv, xs, ws);
    g_.n = xs[0];
    g_.c = xs[1];
    g_.h = xs[2];
    g_.w = xs[3];
    g_.k = ws[0];
    g_.oh = ys[2];
    g_.ow = ys[3];
    g_.pt = geo.pad_begin[0];
    g_.pl = geo.pad_begin[1];
    g_.th = (g_.oh + 3) / 4;
    g_.tw = (g_.ow + 3) / 4;
    g_.tiles = g_.n * g_.th * g_.tw;
    g_.panels = (g_.k + kNr - 1) / kNr;
    // Transformed weights that stay in the last-level cache (ResNet's 64-256 channels): each
    // thread runs whole chunks of about kThreadChunkBytes of V and M, which stay in its L2.
    // Larger ones (512 x 512: 38 MB) are read from memory once per chunk, so the chunks are
    // large (kChunkBytes) and shared by all threads, step by step.
    const int64_t per_tile = kPos * (g_.c + g_.k) * static_cast<int64_t>(sizeof(float));
    const int64_t u_bytes = kPos * g_.c * g_.k * static_cast<int64_t>(sizeof(float));
    const int64_t threads = std::max(1, ctx->num_threads);
    g_.kc = std::min<int64_t>(g_.c, kMaxKc);
    if (threads > 1 && u_bytes <= kThreadWeightBytes && g_.tiles >= 8 * kMr * threads) {
      g_.workers = threads;
      g_.chunk = std::max<int64_t>(2 * kMr, kThreadChunkBytes / per_tile / kMr * kMr);
      // Every worker gets some tiles.
      const int64_t share = (g_.tiles + threads - 1) / threads;
      g_.chunk = std::min(g_.chunk, (share + kMr - 1) / kMr * kMr);
    } else {
      g_.workers = 1;
      g_.chunk = std::max<int64_t>(kMr, kChunkBytes / per_tile / kMr * kMr);
    }
    g_.chunk = std::min(g_.chunk, g_.tiles);

    blocked_src_ = memory::desc(Dims(xs), memory::data_type::f32, memory::format_tag::aBcd8b);
    blocked_dst_ = memory::desc(Dims(ys), memory::data_type::f32, memory::format_tag::aBcd8b);
    src_in_desc_ = InputDesc(ctx->inputs[0]);
    if (src_in_desc_ != blocked_src_) src_reorder_ = MakeReorder(src_in_desc_, blocked_src_);
    has_sum_ = node_.domain == "kiln" && node_.HasInput(3);
    if (has_sum_) {
      z_desc_ = InputDesc(ctx->inputs[3]);
      if (z_desc_ != blocked_dst_) z_reorder_ = MakeReorder(z_desc_, blocked_dst_);
    }
    has_bias_ = node_.HasInput(2);
    if (has_bias_) bias_ = ctx->constants[2]->Clone();

    // U[xi][panel][c][width]: G g G^T in double, per (k, c), stored per position and panel.
    const Tensor& w = *ctx->constants[1];
    const int64_t c = g_.c, k = g_.k;
    auto pack = [&]() -> StatusOr<Tensor> {
      Tensor t = Tensor::Empty(DataType::kFloat, {kPos, c, k});
      float* u = t.data<float>();
      const float* wd = w.data<float>();
      for (int64_t ko = 0; ko < k; ++ko) {
        const int64_t panel = ko / kNr, width = std::min<int64_t>(kNr, k - panel * kNr);
        for (int64_t ci = 0; ci < c; ++ci) {
          const float* g = wd + (ko * c + ci) * 9;
          double gg[6][3];  // G g
          for (int i = 0; i < 6; ++i)
            for (int j = 0; j < 3; ++j)
              gg[i][j] = kG[i][0] * g[j] + kG[i][1] * g[3 + j] + kG[i][2] * g[6 + j];
          for (int i = 0; i < 6; ++i)
            for (int j = 0; j < 6; ++j) {
              const double val = gg[i][0] * kG[j][0] + gg[i][1] * kG[j][1] + gg[i][2] * kG[j][2];
              u[(i * 6 + j) * c * k + panel * kNr * c + ci * width + (ko - panel * kNr)] =
                  static_cast<float>(val);
            }
        }
      }
      return t;
    };
    if (ctx->weights != nullptr) {
      StatusOr<Tensor> t = ctx->weights->GetOrPack(w, "winograd-f43", pack);
      if (!t.ok()) throw dnnl::error(dnnl_runtime_error, t.status().message().c_str());
      packed_ = *t;
    } else {
      packed_ = *pack();
    }
    ctx->outputs[0].layout = LayoutFor(blocked_dst_, ys);
  }

  ir::Node node_;
  ops::ConvAttrs a_;
  Geo g_;
  memory::desc blocked_src_, blocked_dst_, src_in_desc_, z_desc_;
  dnnl::reorder src_reorder_, z_reorder_;
  Tensor packed_, bias_;
  bool has_sum_ = false, has_bias_ = false;
};

KernelSupport SupportsWinograd(const ir::Node& node, const ir::Op& op,
                               const std::vector<TensorInfo>& in) {
  if (!AllFloat(in, {0, 1})) return {false, "needs float32 X and W"};
  const Shape& xs = in[0].shape;
  const Shape& ws = in[1].shape;
  if (xs.size() != 4) return {false, "2-D only"};
  if (ws[2] != 3 || ws[3] != 3) return {false, "3x3 kernels only"};
  const auto& a = runtime::AttrsOf<ops::ConvAttrs>(op);
  if (a.conv.group != 1) return {false, "group 1 only"};
  for (int64_t s : a.conv.window.strides)
    if (s != 1) return {false, "stride 1 only"};
  for (int64_t d : a.conv.window.dilations)
    if (d != 1) return {false, "dilation 1 only"};
  if (node.HasInput(2) && in[2].dtype != DataType::kFloat) return {false, "needs float32 B"};
  if (xs[1] % 8 != 0 || ws[0] % 8 != 0 || xs[1] < kMinChannels || ws[0] < kMinChannels)
    return {false, "C and K must be multiples of 8, at least 16"};
  const bool force = Forced();
  if (!CpuFits()) return {false, "needs AVX2 and FMA"};
  // The output size, as the window rules give it (pads may be asymmetric or automatic).
  ConvGeometry geo;
  try {
    geo = ConvGeometryFor(a.conv, xs, ws);
  } catch (const dnnl::error&) {
    return {false, "window does not fit"};
  }
  const int64_t oh = xs[2] + geo.pad_begin[0] + geo.pad_end[0] - 2;
  const int64_t ow = xs[3] + geo.pad_begin[1] + geo.pad_end[1] - 2;
  if (oh < 1 || ow < 1) return {false, "empty output"};
  // The transformed weights are read once per run (more with many tiles): with few tiles that
  // costs more than the direct convolution saves (512 x 512 channels on a 7x7 map: 4 tiles, 2.3
  // against 1.5 ms; 256 x 256 on 14x14: 16 tiles, 0.5 against 1.3 ms; AMD EPYC AVX2, 2 threads).
  const int64_t tiles = xs[0] * ((oh + 3) / 4) * ((ow + 3) / 4);
  const int64_t u_bytes = kPos * xs[1] * ws[0] * static_cast<int64_t>(sizeof(float));
  if (!force && PreferOneDnn()) return {false, "oneDNN's AVX-512 convolution is preferred", true};
  if (!force && (tiles < kMinTiles || (u_bytes > kThreadWeightBytes && tiles < 2 * kMinTiles)))
    return {false, "too few 4x4 output tiles for the transformed weights' size", true};
  return {true, ""};
}

KILN_REGISTER_KERNEL(runtime::KernelDef{"cpu.conv.winograd",
                                        "Conv",
                                        "",
                                        1,
                                        ir::kMaxOpset,
                                        Backend::kCpu,
                                        20,
                                        SupportsWinograd,
                                        CreateKernel<ConvWinograd>,
                                        {1, 2},
                                        {},
                                        {Precision::kFp32}});
KILN_REGISTER_KERNEL(runtime::KernelDef{"cpu.fusedconv.winograd",
                                        "FusedConv",
                                        "kiln",
                                        1,
                                        1,
                                        Backend::kCpu,
                                        20,
                                        SupportsWinograd,
                                        CreateKernel<ConvWinograd>,
                                        {1, 2},
                                        {},
                                        {Precision::kFp32}});

}  // namespace
}  // namespace kiln::backends::cpu
