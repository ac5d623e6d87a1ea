// cpu.convinteger.onednn: ConvInteger (Y int32 = conv(X - x_zero_point, W - w_zero_point)), what
// ONNX Runtime's quantize_dynamic writes for every Conv, on oneDNN's int8 convolution. X
// uint8/int8 (plain) with a scalar zero point that may be computed at run time
// (DynamicQuantizeLinear's), constant W int8/uint8 with a constant zero point per tensor or per
// output channel; 1-3 spatial dims, any group count.
//
// Exact, as the op is (the reasoning of cpu.matmulinteger.onednn): without VNNI, oneDNN sums
// pairs of uint8 x int8 products in 16 bits (vpmaddubsw), which saturate once |W| exceeds 64 with
// full-range X. W - w_zero_point (constant, folded at Prepare) is split into p parts of at most 64
// in magnitude, stacked along the input channels of each group: W' = [W1 | ... | Wp] with p Cg
// channels per group, and X's channels are repeated p times per group into X', so
// conv(X', W') = conv(X, W1 + ... + Wp) in one convolution with no sum saturating (p = 2 for
// int8 weights). Depthwise convolutions keep p = 1 while |W - w_zero_point| <= 127: oneDNN's
// depthwise int8 kernels widen to 32 bits before multiplying (cpu.qconv.onednn's note); so do all
// kernels with VNNI. A depthwise convolution that needs splitting anyway (uint8 W without a zero
// point) is a grouped one after it, whose parts keep to 64 without VNNI.
//
// X' is built in scratch channels-last (what oneDNN 2.6's int8 convolutions read without a
// reorder), in one pass that also repeats the channels and turns an int8 X into uint8 (v + 128,
// zero point + 128: exact; oneDNN's int8 source with a zero point is a reference kernel). The
// zero point is oneDNN's run-time source zero point; padding contributes nothing (pads hold the
// zero point). The int32 result is written plain, through a reorder from scratch when the
// primitive wants another layout.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "backends/cpu/onednn_common.h"
#include "core/threading.h"
#include "ops/nn/conv.h"
#include "ops/quant/quant_common.h"

namespace kiln::backends::cpu {
namespace {

using dnnl::memory;
using runtime::KernelSupport;
using runtime::TensorInfo;

class ConvIntegerOneDnn final : public runtime::Kernel {
 public:
  ConvIntegerOneDnn(const ir::Node& node, const ir::Op& op)
      : node_(node), a_(runtime::AttrsOf<ops::ConvAttrs>(op)) {}

  Status Prepare(runtime::PrepareContext* ctx) override {
    return Guard(node_, [&] { DoPrepare(ctx); });
  }

  // Scratch: X' (channels-last uint8, channels repeated), the int32 result when the primitive
  // writes it in another layout, then oneDNN's scratchpad.
  size_t ScratchBytes() const override {
    return XBytes() + DstBytes() + descs_.scratchpad.get_size();
  }

  std::string variant() const override {
    return parts_ == 1 ? "" : std::to_string(parts_) + " weight parts";
  }

  Status Run(const ir::ComputeContext& ctx) const override {
    return Guard(node_, [&] {
      char* scratch = static_cast<char*>(ctx.scratch);
      const Tensor& x = ctx.in(0);
      int32_t zero = node_.HasInput(2) ? ops::quant::ReadQuant(ctx.in(2), 0) : 0;
      const uint8_t flip = x.dtype() == DataType::kInt8 ? 0x80 : 0;
      if (flip != 0) zero += 128;
      BuildX(static_cast<const uint8_t*>(x.raw()), flip, reinterpret_cast<uint8_t*>(scratch));
      void* dst_data = dst_reorder_ ? scratch + XBytes() : ctx.out(0).raw();
      RunMemory xm(descs_.src, scratch), y(descs_.dst, dst_data),
          sp(descs_.scratchpad, scratch + XBytes() + DstBytes());
      RunMemory zm(zero_desc_, &zero);
      Execute(prim_, {{DNNL_ARG_SRC, xm.get()},
                      {DNNL_ARG_WEIGHTS, weights_.get()},
                      {DNNL_ARG_DST, y.get()},
                      {DNNL_ARG_SCRATCHPAD, sp.get()},
                      {DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, has_zero_ ? zm.get() : nullptr}});
      if (dst_reorder_) {
        RunMemory plain(plain_dst_, ctx.out(0).raw());
        Execute(dst_reorder_, {{DNNL_ARG_FROM, y.get()}, {DNNL_ARG_TO, plain.get()}});
      }
      ThreadStream().wait();
    });
  }

 private:
  size_t XBytes() const { return Align64(static_cast<size_t>(n_ * spatial_ * channels_ * parts_)); }
  size_t DstBytes() const { return dst_reorder_ ? Align64(descs_.dst.get_size()) : 0; }

  // X [N, C, S] (S: the spatial dims, flattened) into X' [N, S, G, p, Cg] (channels-last, each
  // group's channels p times), xor `flip`. Tiles of spatial positions, so reads are contiguous
  // runs of each channel's plane and writes stay within a few cache-resident rows.
  void BuildX(const uint8_t* x, uint8_t flip, uint8_t* out) const {
    constexpr int64_t kTile = 64;
    const int64_t tiles = (spatial_ + kTile - 1) / kTile, cg = channels_ / group_;
    const int64_t row = channels_ * parts_;
    ParallelFor(n_ * tiles, 1, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        const int64_t n = t / tiles, s0 = (t % tiles) * kTile, s1 = std::min(spatial_, s0 + kTile);
        for (int64_t c = 0; c < channels_; ++c) {
          const uint8_t* src = x + (n * channels_ + c) * spatial_;
          const int64_t g = c / cg, base = g * parts_ * cg + c % cg;
          for (int64_t p = 0; p < parts_; ++p) {
            uint8_t* dst = out + n * spatial_ * row + base + p * cg;
            for (int64_t s = s0; s < s1; ++s) dst[s * row] = src[s] ^ flip;
          }
        }
      }
    });
  }

  void DoPrepare(runtime::PrepareContext* ctx) {
    const TensorInfo& xi = ctx->inputs[0];
    const Tensor& w = *ctx->constants[1];
    const Shape& ws = w.shape();
    const Shape& ys = ctx->outputs[0].shape;
    const ConvGeometry geo = ConvGeometryFor(a_.conv, xi.shape, ws);
    group_ = std::max<int64_t>(1, a_.conv.group);
    n_ = xi.shape[0];
    channels_ = xi.shape[1];
    spatial_ = 1;
    for (size_t d = 2; d < xi.shape.size(); ++d) spatial_ *= xi.shape[d];
    const int64_t m = ws[0], cg = ws[1], per_m = w.numel() / m;

    // W - w_zero_point (per tensor or per output channel), split into parts (onednn_common.h);
    // W' [M, p Cg, K...] holds part j of input channel c at channel j Cg + c.
    const Tensor* wz = node_.HasInput(3) ? ctx->constants[3] : nullptr;
    const bool depthwise = group_ > 1 && cg == 1 && m == group_;
    auto channel = [per_m](int64_t i) { return i / per_m; };
    SplitWeights sw(w, wz, channel, Int8Vnni() || depthwise ? 127 : 64);
    // A depthwise convolution whose weights need splitting becomes a grouped one (p channels per
    // group), which oneDNN runs on a kernel that does not widen: without VNNI its parts must fit
    // 64 (with oneDNN capped to AVX-512 without VNNI, parts of 127 saturated).
    if (depthwise && sw.parts > 1 && !Int8Vnni()) sw = SplitWeights(w, wz, channel, 64);
    parts_ = sw.parts;
    const int64_t kernel = per_m / cg;
    Shape split_shape = ws;
    split_shape[1] = parts_ * cg;
    Tensor split = Tensor::Empty(DataType::kInt8, split_shape);
    int8_t* sp = split.data<int8_t>();
    for (int64_t o = 0; o < m; ++o)
      for (int64_t c = 0; c < cg; ++c)
        for (int64_t k = 0; k < kernel; ++k)
          for (int p = 0; p < parts_; ++p)
            sp[(o * parts_ * cg + p * cg + c) * kernel + k] = sw.Part((o * cg + c) * kernel + k, p);

    // X' [N, p C, spatial...], channels-last.
    Shape xs = xi.shape;
    xs[1] *= parts_;
    const memory::desc x_desc = ChannelsLastDesc(xs, memory::data_type::u8);
    memory::dims wdims = geo.wdims;
    wdims[group_ > 1 ? 2 : 1] *= parts_;
    const memory::desc w_any(wdims, memory::data_type::s8, memory::format_tag::any);
    const memory::desc y_any(Dims(ys), memory::data_type::s32, memory::format_tag::any);
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    has_zero_ = node_.HasInput(2) || xi.dtype == DataType::kInt8;
    if (has_zero_) attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
    zero_desc_ = memory::desc({1}, memory::data_type::s32, memory::format_tag::x);
    auto desc = dnnl::convolution_forward::desc(
        dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, x_desc, w_any,
        y_any, geo.strides, geo.dilations, geo.pad_begin, geo.pad_end);
    pd_ = dnnl::convolution_forward::primitive_desc(desc, attr, Engine());
    prim_ = dnnl::convolution_forward(pd_);
    descs_ = PdDescs(pd_);
    plain_dst_ = PlainDesc(ys, memory::data_type::s32);
    if (descs_.dst != plain_dst_) dst_reorder_ = MakeReorder(descs_.dst, plain_dst_);

    // The packed weights depend on W, its zero point and the split: all in the cache's key.
    const std::string variant = SplitWeights::Variant("convinteger", parts_, wz);
    ConvGeometry split_geo = geo;
    split_geo.wdims = wdims;
    const memory::desc plain = split_geo.PlainWeights(split_shape, group_, memory::data_type::s8);
    weights_ = PackWeights(plain, w, pd_.weights_desc(), &packed_w_, ctx->weights, &split, variant);
  }

  ir::Node node_;
  ops::ConvAttrs a_;
  int64_t n_ = 0, channels_ = 0, spatial_ = 0, group_ = 1;
  int parts_ = 1;
  bool has_zero_ = false;
  memory::desc zero_desc_, plain_dst_;
  dnnl::convolution_forward::primitive_desc pd_;
  PdDescs descs_;
  dnnl::convolution_forward prim_;
  dnnl::reorder dst_reorder_;
  Tensor packed_w_;
  memory weights_;
};

using ops::quant::Is8Bit;

KernelSupport SupportsConvInteger(const ir::Node& node, const ir::Op&,
                                  const std::vector<TensorInfo>& in) {
  if (!Is8Bit(in[0].dtype) || !Is8Bit(in[1].dtype)) return {false, "needs uint8/int8 X and W"};
  if (in[0].shape.size() < 3 || in[0].shape.size() > 5) return {false, "needs 1-3 spatial dims"};
  if (NumElements(in[0].shape) == 0) return {false, "empty X"};
  if (node.HasInput(2) && NumElements(in[2].shape) != 1) return {false, "x_zero_point per tensor"};
  return {true, ""};
}

// W and w_zero_point must be constant.
KILN_REGISTER_KERNEL(runtime::KernelDef{"cpu.convinteger.onednn",
                                        "ConvInteger",
                                        "",
                                        10,
                                        ir::kMaxOpset,
                                        Backend::kCpu,
                                        10,
                                        SupportsConvInteger,
                                        CreateKernel<ConvIntegerOneDnn>,
                                        {1, 3}});

}  // namespace
}  // namespace kiln::backends::cpu
