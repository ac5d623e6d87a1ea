// cpu.deformconv.onednn: DeformConv (2-D, float32) as sampled columns times the weights, the
// columns built from a channels-last copy of X and the product on oneDNN's sgemm. X is reordered
// to NHWC once per run (oneDNN; from plain or from the layout a convolution wrote, read as it is
// when it already is NHWC), so that a bilinear sample reads each of its 4 input pixels as a
// contiguous run of channels. Then per image, group and block of output positions:
//   1. for each position and kernel tap, the 4 taps (ops::DeformTaps, the reference kernel's
//      arithmetic in double, the mask folded into the weights) of each offset group, and the
//      column entries of that group's channels: w0 * x[p0][c] + ... + w3 * x[p3][c], vectorized
//      over c (columns [block, kH * kW * C/group], tap-major within a row);
//   2. Y[group's M rows, block] = W'_g [M/group, kH * kW * C/group] x columns^T (+ B), sgemm
//      writing into the NCHW output in place; W' is W with its inner dims in the columns' order
//      (tap-major), packed once when W is constant, else in scratch per run.
// Blocks are sized so that the columns stay within kColumnBytes (written and read back at once,
// from cache). Step 1 spreads positions over the threads; sgemm threads itself. The reference
// kernel accumulates in double, this one in float32 (kiln_kernel_harness_test compares
// them on the op's cases).
#include <algorithm>
#include <cstdint>

#include "backends/cpu/onednn_common.h"
#include "core/threading.h"
#include "ops/nn/deform_conv.h"

namespace kiln::backends::cpu {
namespace {

using runtime::KernelSupport;
using runtime::TensorInfo;

// The columns of one block: 2 MB holds 128 channels x 9 taps x 448 positions.
constexpr int64_t kColumnBytes = 2 << 20;

class DeformConvOneDnn final : public runtime::Kernel {
 public:
  DeformConvOneDnn(const ir::Node& node, const ir::Op& op)
      : node_(node), a_(runtime::AttrsOf<ops::DeformConvAttrs>(op)) {}

  Status Prepare(runtime::PrepareContext* ctx) override {
    const Shape& x = ctx->inputs[0].shape;
    const Shape& w = ctx->inputs[1].shape;
    const std::string why = ops::DeformConvWindow(a_, x, w, &win_);
    if (!why.empty()) return InvalidArgument(node_.Describe() + ": " + why);
    n_ = x[0];
    c_ = x[1];
    h_ = x[2];
    w_ = x[3];
    m_ = w[0];
    taps_ = win_.kernel[0] * win_.kernel[1];
    positions_ = win_.out[0] * win_.out[1];
    cg_ = c_ / a_.group;
    mg_ = m_ / a_.group;
    c_per_og_ = c_ / a_.offset_group;
    k_ = cg_ * taps_;
    block_ = std::clamp<int64_t>(kColumnBytes / (k_ * 4) / 16 * 16, 16, positions_);
    // Rows 2^k bytes apart fall on few cache sets (docs/performance.md, vision transformers).
    ld_ = k_ % 64 == 0 ? k_ + 16 : k_;
    // X as it arrives (plain, or a convolution's blocked layout), reordered to NHWC; already
    // NHWC, read as it is.
    x_plain_ = InputDesc(ctx->inputs[0]);
    x_nhwc_ = ChannelsLastDesc(x, dnnl::memory::data_type::f32);
    return Guard(node_, [&] {
      if (x_plain_ != x_nhwc_) x_reorder_ = MakeReorder(x_plain_, x_nhwc_);
      if (ctx->constants[1] != nullptr) {
        packed_w_ = Tensor::Empty(DataType::kFloat, {m_, k_});
        PackW(ctx->constants[1]->data<float>(), packed_w_.data<float>());
      }
    });
  }

  // X channels-last, the columns, W' when W is computed.
  size_t ScratchBytes() const override {
    return XBytes() + ColumnBytes() +
           (packed_w_.defined() ? 0 : Align64(static_cast<size_t>(m_ * k_) * sizeof(float)));
  }

  std::string variant() const override { return "sgemm"; }

  // X in any layout (reordered to NHWC); the other inputs plain.
  bool AcceptsLayout(size_t input) const override { return input == 0; }

  Status Run(const ir::ComputeContext& ctx) const override {
    char* scratch = static_cast<char*>(ctx.scratch);
    const void* xs = ctx.in(0).raw();
    Status reordered = Guard(node_, [&] {
      xs = InputAs(x_reorder_, x_plain_, x_nhwc_, xs, scratch);
      ThreadStream().wait();
    });
    if (!reordered.ok()) return reordered;
    const float* x = static_cast<const float*>(xs);
    float* cols = reinterpret_cast<float*>(scratch + XBytes());
    const float* wt = packed_w_.defined() ? packed_w_.data<float>() : nullptr;
    if (wt == nullptr) {
      float* w = reinterpret_cast<float*>(scratch + XBytes() + ColumnBytes());
      PackW(ctx.in(1).data<float>(), w);
      wt = w;
    }
    const float* off = ctx.in(2).data<float>();
    const float* bias = ctx.has(3) ? ctx.in(3).data<float>() : nullptr;
    const float* mask = ctx.has(4) ? ctx.in(4).data<float>() : nullptr;
    float* y = ctx.out(0).data<float>();
    for (int64_t b = 0; b < n_; ++b)
      for (int64_t g = 0; g < a_.group; ++g)
        for (int64_t p0 = 0; p0 < positions_; p0 += block_) {
          const int64_t count = std::min(block_, positions_ - p0);
          ParallelFor(count, 16, [&](int64_t begin, int64_t end) {
            for (int64_t q = begin; q < end; ++q)
              Columns(x, off, mask, b, g, p0 + q, cols + q * ld_);
          });
          float* dst = y + (b * m_ + g * mg_) * positions_ + p0;
          if (bias != nullptr)
            for (int64_t mo = 0; mo < mg_; ++mo)
              std::fill_n(dst + mo * positions_, count, bias[g * mg_ + mo]);
          const dnnl::status st =
              dnnl::sgemm('N', 'T', mg_, count, k_, 1.f, wt + g * mg_ * k_, k_, cols, ld_,
                          bias != nullptr ? 1.f : 0.f, dst, positions_);
          if (st != dnnl::status::success)
            return Internal(node_.Describe() + ": oneDNN's sgemm failed with status " +
                            std::to_string(static_cast<int>(st)));
        }
    return OkStatus();
  }

 private:
  size_t XBytes() const { return x_reorder_ ? Align64(x_nhwc_.get_size()) : 0; }
  size_t ColumnBytes() const { return Align64(static_cast<size_t>(block_ * ld_) * sizeof(float)); }

  // W [M, C/group, kH, kW] as W' [M, kH * kW, C/group].
  void PackW(const float* w, float* out) const {
    for (int64_t mo = 0; mo < m_; ++mo)
      for (int64_t ci = 0; ci < cg_; ++ci)
        for (int64_t t = 0; t < taps_; ++t)
          out[(mo * taps_ + t) * cg_ + ci] = w[(mo * cg_ + ci) * taps_ + t];
  }

  // Output position p's column row for group g: for each kernel tap t, the group's channels
  // sampled at that tap (each offset group's channels with its own taps).
  void Columns(const float* x, const float* off, const float* mask, int64_t b, int64_t g, int64_t p,
               float* row) const {
    const int64_t ow = win_.out[1], kw = win_.kernel[1];
    const int64_t py = p / ow, px = p % ow;
    const float* image = x + b * c_ * h_ * w_;
    const int64_t c0 = g * cg_, c1 = c0 + cg_;
    for (int64_t t = 0; t < taps_; ++t) {
      const int64_t i = t / kw, j = t % kw;
      const double base_y =
          static_cast<double>(py * win_.strides[0] - win_.pad_begin[0] + i * win_.dilations[0]);
      const double base_x =
          static_cast<double>(px * win_.strides[1] - win_.pad_begin[1] + j * win_.dilations[1]);
      for (int64_t c = c0; c < c1;) {
        const int64_t og = c / c_per_og_, c_end = std::min(c1, (og + 1) * c_per_og_);
        const int64_t at = (b * a_.offset_group + og) * taps_ + t;
        const double yy = base_y + off[(at * 2) * positions_ + p];
        const double xx = base_x + off[(at * 2 + 1) * positions_ + p];
        const double scale = mask != nullptr ? static_cast<double>(mask[at * positions_ + p]) : 1.0;
        int64_t pos[4];
        double wd[4];
        ops::DeformTaps(yy, xx, h_, w_, scale, pos, wd);
        const float wf[4] = {static_cast<float>(wd[0]), static_cast<float>(wd[1]),
                             static_cast<float>(wd[2]), static_cast<float>(wd[3])};
        float* out = row + t * cg_ + (c - c0);
        const float* pixels[4] = {image + pos[0] * c_ + c, image + pos[1] * c_ + c,
                                  image + pos[2] * c_ + c, image + pos[3] * c_ + c};
        if (wf[0] == 0.f && wf[1] == 0.f && wf[2] == 0.f && wf[3] == 0.f)
          std::fill_n(out, c_end - c, 0.f);
        else
          BlendRows(pixels, wf, 4, c_end - c, out);
        c = c_end;
      }
    }
  }

  ir::Node node_;
  ops::DeformConvAttrs a_;
  ops::nn::Window win_;
  int64_t n_ = 0, c_ = 0, h_ = 0, w_ = 0, m_ = 0, taps_ = 0, positions_ = 0;
  int64_t cg_ = 0, mg_ = 0, c_per_og_ = 0, k_ = 0, block_ = 16, ld_ = 16;
  dnnl::memory::desc x_plain_, x_nhwc_;
  dnnl::reorder x_reorder_;
  Tensor packed_w_;
};

KernelSupport SupportsDeformConv(const ir::Node&, const ir::Op& op,
                                 const std::vector<TensorInfo>& in) {
  if (!AllFloat(in, {0, 1, 2})) return {false, "needs float32 X, W and offset"};
  for (size_t i = 3; i < in.size(); ++i)  // absent optional inputs have no dtype
    if (in[i].dtype != DataType::kUndefined && in[i].dtype != DataType::kFloat)
      return {false, "needs float32 B and mask"};
  const auto* a = op.attrs<ops::DeformConvAttrs>();
  if (a == nullptr) return {false, "no DeformConv attributes"};
  ops::nn::Window win;
  if (!ops::DeformConvWindow(*a, in[0].shape, in[1].shape, &win).empty())
    return {false, "shapes DeformConv refuses"};
  return {true, ""};
}

KILN_REGISTER_KERNEL(runtime::KernelDef{"cpu.deformconv.onednn",
                                        "DeformConv",
                                        "",
                                        19,
                                        ir::kMaxOpset,
                                        Backend::kCpu,
                                        10,
                                        SupportsDeformConv,
                                        CreateKernel<DeformConvOneDnn>,
                                        {}});

}  // namespace
}  // namespace kiln::backends::cpu
