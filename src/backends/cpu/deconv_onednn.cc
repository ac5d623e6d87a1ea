// cpu.convtranspose.onednn: ConvTranspose (1-3 spatial dims, groups, strides, dilations, pads,
// auto_pad, output_padding, output_shape) on oneDNN's deconvolution_forward, float32 or bf16 under
// --precision bf16. Sizes and pads come from the reference op's own rules
// (ops/nn/spatial.h ResolveTransposeWindow); oneDNN's output relation O = (I-1)*s + (k-1)*d + 1 -
// pad_l - pad_r then gives pad_r, and a case that needs a negative pad_r (output_padding larger
// than the end pad, or an output_shape beyond the natural size) is declined (reference kernel).
// W [C, M/g, k...] must be constant: it is prepacked once. The input is read in the producer's
// layout; oneDNN picks the output's.
#include "backends/cpu/onednn_common.h"
#include "core/threading.h"
#include "ops/nn/conv_transpose.h"
#include "ops/nn/spatial.h"

namespace kiln::backends::cpu {
namespace {

using dnnl::memory;
using runtime::KernelSupport;
using runtime::TensorInfo;

// Sizes, pads and oneDNN's right pads for concrete shapes; "" or the reason to decline.
std::string ResolveDeconv(const ops::ConvTransposeAttrs& a, const Shape& x, const Shape& w,
                          ops::nn::Window* win, memory::dims* pad_r) {
  std::string err =
      ops::nn::ResolveTransposeWindow(a.window, a.output_padding, a.output_shape, x, w, win);
  if (!err.empty()) return err;
  pad_r->clear();
  for (size_t i = 0; i < win->in.size(); ++i) {
    const int64_t r = (win->in[i] - 1) * win->strides[i] +
                      (win->kernel[i] - 1) * win->dilations[i] + 1 - win->pad_begin[i] -
                      win->out[i];
    if (r < 0 || win->pad_begin[i] < 0)
      return "output_padding or output_shape reaches beyond oneDNN's padding (negative end pad)";
    pad_r->push_back(r);
  }
  return "";
}

KernelSupport SupportsDeconv(const ir::Node& node, const ir::Op& op,
                             const std::vector<TensorInfo>& in) {
  const ops::ConvTransposeAttrs& a = runtime::AttrsOf<ops::ConvTransposeAttrs>(op);
  if (!AllFloat(in, {0, 1})) return {false, "needs float32 X and W"};
  if (node.HasInput(2) && in[2].dtype != DataType::kFloat) return {false, "needs float32 B"};
  const Shape& x = in[0].shape;
  const Shape& w = in[1].shape;
  if (x.size() < 3 || x.size() > 5 || w.size() != x.size()) return {false, "1-3 spatial dims"};
  const int64_t group = a.group;
  if (group < 1 || x[1] % group != 0 || w[0] != x[1]) return {false, "channels and group"};
  ops::nn::Window win;
  memory::dims pad_r;
  const std::string why = ResolveDeconv(a, x, w, &win, &pad_r);
  if (!why.empty()) return {false, why};
  return {true, ""};
}

class DeconvOneDnn final : public runtime::Kernel {
 public:
  DeconvOneDnn(const ir::Node& node, const ir::Op& op)
      : node_(node), a_(runtime::AttrsOf<ops::ConvTransposeAttrs>(op)) {}
  bool AcceptsLayout(size_t input) const override { return input == 0; }

  Status Prepare(runtime::PrepareContext* ctx) override {
    return Guard(node_, [&] { DoPrepare(ctx); });
  }

  // The reordered input (when the producer's layout differs) first, then oneDNN's scratchpad.
  size_t ScratchBytes() const override { return SrcTmpBytes() + pd_.scratchpad_desc().get_size(); }

  Status Run(const ir::ComputeContext& ctx) const override {
    return Guard(node_, [&] {
      char* scratch = static_cast<char*>(ctx.scratch);
      RunMemory src(descs_.src,
                    InputAs(src_reorder_, src_in_, descs_.src, ctx.in(0).raw(), scratch));
      RunMemory dst(descs_.dst, ctx.out(0).raw()), sp(descs_.scratchpad, scratch + SrcTmpBytes());
      if (bias_block_ == 0) {
        ExecuteWeighted(prim_, src, weights_, bias_, dst, sp);
        return;
      }
      ExecuteWeighted(prim_, src, weights_, memory(), dst, sp);
      AddChannelBias(ctx.out(0).data<float>());
    });
  }

 private:
  size_t SrcTmpBytes() const { return ReorderedBytes(src_reorder_, descs_.src); }

  void DoPrepare(runtime::PrepareContext* ctx) {
    const TensorInfo& x = ctx->inputs[0];
    const Tensor& w = *ctx->constants[1];
    const Shape& ws = w.shape();
    const Shape& ys = ctx->outputs[0].shape;
    ops::nn::Window win;
    memory::dims pad_r;
    const std::string why = ResolveDeconv(a_, x.shape, ws, &win, &pad_r);
    if (!why.empty()) throw dnnl::error(dnnl_invalid_arguments, why.c_str());
    const int64_t group = a_.group;
    const size_t n = ws.size() - 2;
    // oneDNN's weights: (g,) oc/g, ic/g, k...; ONNX stores [ic][oc/g][k...], i.e. with groups
    // [g][ic/g][oc/g][k...]: the "io" formats.
    memory::dims wdims;
    if (group > 1) wdims.push_back(group);
    wdims.push_back(ws[1]);
    wdims.push_back(ws[0] / group);
    for (size_t i = 0; i < n; ++i) wdims.push_back(ws[2 + i]);
    using tag = memory::format_tag;
    static const tag plain_io[] = {tag::bac, tag::bacd, tag::bacde};
    static const tag group_io[] = {tag::acbd, tag::acbde, tag::acbdef};
    const memory::desc w_onnx(wdims, memory::data_type::f32,
                              group > 1 ? group_io[n - 1] : plain_io[n - 1]);

    memory::dims strides, dil, pad_l;
    for (size_t i = 0; i < n; ++i) {
      strides.push_back(win.strides[i]);
      dil.push_back(win.dilations[i] - 1);  // oneDNN counts the gaps
      pad_l.push_back(win.pad_begin[i]);
    }
    const memory::data_type dt = ComputeType(ctx->precision);
    memory::desc src_any(Dims(x.shape), dt, tag::any);
    memory::desc w_any(wdims, dt, tag::any);
    const memory::desc dst_any = DstDescFor(ys, dt);
    const bool has_bias = node_.HasInput(2);
    memory::desc b_desc({ys[1]}, memory::data_type::f32, tag::x);
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    auto desc =
        has_bias ? dnnl::deconvolution_forward::desc(
                       dnnl::prop_kind::forward_inference, dnnl::algorithm::deconvolution_direct,
                       src_any, w_any, b_desc, dst_any, strides, dil, pad_l, pad_r)
                 : dnnl::deconvolution_forward::desc(dnnl::prop_kind::forward_inference,
                                                     dnnl::algorithm::deconvolution_direct, src_any,
                                                     w_any, dst_any, strides, dil, pad_l, pad_r);
    pd_ = dnnl::deconvolution_forward::primitive_desc(desc, attr, Engine());
    // oneDNN 2.6's direct (jit) deconvolution adds its bias in a separate slow pass (6.1 ms
    // against 0.9 ms without it for PP-OCRv4's 24 -> 24 2x2 stride-2 layer at 320x320, AMD EPYC
    // AVX2; as a binary post-op 120 ms, as a binary primitive with a plain bias 118 ms, oneDNN's
    // reference code): there the deconvolution runs without bias and AddChannelBias adds it,
    // where the output is channel-blocked (nChw8c, nChw16c) with no other blocking.
    if (has_bias && std::string(pd_.impl_info_str()).rfind("jit", 0) == 0) {
      const dnnl::deconvolution_forward::desc no_bias(
          dnnl::prop_kind::forward_inference, dnnl::algorithm::deconvolution_direct, src_any, w_any,
          dst_any, strides, dil, pad_l, pad_r);
      dnnl::deconvolution_forward::primitive_desc pd(no_bias, attr, Engine());
      const auto& d = pd.dst_desc().data;
      const auto& b = d.format_desc.blocking;
      // [N][M / block][spatial...][block], dense: what AddChannelBias walks.
      bool dense =
          d.ndims >= 3 && b.inner_nblks == 1 && b.inner_idxs[0] == 1 && b.inner_blks[0] <= 64;
      int64_t stride = dense ? b.inner_blks[0] : 0;
      for (int i = d.ndims - 1; i >= 0 && dense; --i) {
        dense = b.strides[i] == stride;
        stride *= d.padded_dims[i] / (i == 1 ? b.inner_blks[0] : 1);
      }
      if (dense) {
        pd_ = pd;
        bias_block_ = b.inner_blks[0];
      }
    }
    prim_ = dnnl::deconvolution_forward(pd_);
    descs_ = PdDescs(pd_);
    src_in_ = InputDesc(x);
    if (pd_.src_desc() != src_in_) src_reorder_ = MakeReorder(src_in_, pd_.src_desc());
    weights_ = PackWeights(w_onnx, w, pd_.weights_desc(), &packed_w_, ctx->weights);
    if (has_bias) {
      bias_copy_ = ctx->constants[2]->Clone();  // constant: KernelDef::constant_inputs
      bias_ = memory(b_desc, Engine(), bias_copy_.raw());
    }
    ctx->outputs[0].layout = LayoutFor(pd_.dst_desc(), ys);
  }

  ir::Node node_;
  ops::ConvTransposeAttrs a_;
  memory::desc src_in_;
  dnnl::deconvolution_forward::primitive_desc pd_;
  PdDescs descs_;
  dnnl::deconvolution_forward prim_;
  dnnl::reorder src_reorder_;
  Tensor packed_w_, bias_copy_;
  memory weights_, bias_;
  // The channel block of the output when the bias is added after the deconvolution, else 0.
  int64_t bias_block_ = 0;

  // Adds the bias to the channel-blocked output: [N][M / block][spatial][block] (padded).
  void AddChannelBias(float* y) const {
    const memory::desc& d = descs_.dst;
    const int64_t n = d.data.dims[0], m = d.data.dims[1], blk = bias_block_;
    const int64_t blocks = (m + blk - 1) / blk;
    int64_t spatial = 1;
    for (int i = 2; i < d.data.ndims; ++i) spatial *= d.data.dims[i];
    const float* bias = bias_copy_.data<float>();
    ParallelFor(n * blocks, 1, [&](int64_t begin, int64_t end) {
      float b[64] = {};
      for (int64_t item = begin; item < end; ++item) {
        const int64_t cb = item % blocks;
        for (int64_t k = 0; k < blk; ++k) b[k] = cb * blk + k < m ? bias[cb * blk + k] : 0.f;
        float* p = y + item * spatial * blk;
        for (int64_t s = 0; s < spatial; ++s)
          for (int64_t k = 0; k < blk; ++k) p[s * blk + k] += b[k];
      }
    });
  }
};

KILN_REGISTER_KERNEL(runtime::KernelDef{"cpu.convtranspose.onednn",
                                        "ConvTranspose",
                                        "",
                                        1,
                                        ir::kMaxOpset,
                                        Backend::kCpu,
                                        10,
                                        SupportsDeconv,
                                        CreateKernel<DeconvOneDnn>,
                                        {1, 2},
                                        {},
                                        {Precision::kFp32, Precision::kBf16}});

}  // namespace
}  // namespace kiln::backends::cpu
