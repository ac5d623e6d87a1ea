// cpu.conv.onednn: Conv and kiln.FusedConv (Y = act(Conv(X, W) + B + Z)) on oneDNN's
// convolution_forward, float32, 1-3 spatial dims, any group count (depthwise included).
// Prepare creates the primitive for the concrete shapes, lets oneDNN choose the weight and output
// layouts (format_tag::any), and reorders the constant weights once. The input is read in the
// layout its producer left it in (a oneDNN blocked layout or plain); if the primitive wants
// another, it is reordered at run time. The residual Z becomes a sum post-op (copied or reordered
// into the output first), the activation an eltwise post-op. Needs W (and B) constant.
// With SessionOptions::tune, a 1x1 stride-1 unpadded convolution whose activations oneDNN keeps in
// NHWC (acdb) is also built as a matmul [N*H*W, Cin] x [Cin, Cout] with the same post-ops (the
// same bytes in and out); Prepare times both on scratch data and keeps the faster (kernel name
// suffix "[matmul]"). bench/kernels/conv1x1_bench.cc measured the matmul 0.67x-1.5x of the
// convolution depending on the shape, so the choice is per shape and by measurement.
// KILN_TUNE_PICK=conv|matmul forces the choice (tests).
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "backends/cpu/onednn_common.h"
#include "ops/nn/conv.h"

namespace kiln::backends::cpu {
namespace {

using dnnl::memory;
using runtime::KernelSupport;
using runtime::TensorInfo;

class ConvOneDnn final : public runtime::Kernel {
 public:
  ConvOneDnn(const ir::Node& node, const ir::Op& op)
      : node_(node), a_(runtime::AttrsOf<ops::ConvAttrs>(op)) {}

  bool AcceptsLayout(size_t input) const override { return input == 0 || input == 3; }

  Status Prepare(runtime::PrepareContext* ctx) override {
    return Guard(node_, [&] { DoPrepare(ctx); });
  }

  // The residual Z may share the output's buffer when it has the output's layout: the sum
  // post-op then accumulates onto it directly.
  int InPlaceInput() const override { return has_sum_ && z_desc_ == pd_.dst_desc() ? 3 : -1; }

  // Scratch: the reordered input (when the primitive wants another layout), then oneDNN's
  // scratchpad.
  size_t ScratchBytes() const override {
    return SrcTmpBytes() + std::max(pd_.scratchpad_desc().get_size(),
                                    use_matmul_ ? mm_pd_.scratchpad_desc().get_size() : 0);
  }

  std::string variant() const override { return use_matmul_ ? "matmul" : ""; }

  Status Run(const ir::ComputeContext& ctx) const override {
    return Guard(node_, [&] {
      char* scratch = static_cast<char*>(ctx.scratch);
      const void* src_data =
          InputAs(src_reorder_, src_in_desc_, descs_.src, ctx.in(0).raw(), scratch);
      if (has_sum_) StageResidual(ctx.in(3), &ctx.out(0), z_desc_, descs_.dst, z_reorder_);
      if (use_matmul_) {
        RunMemory msrc(mm_descs_.src, src_data), mdst(mm_descs_.dst, ctx.out(0).raw()),
            sp(mm_descs_.scratchpad, scratch + SrcTmpBytes());
        ExecuteWeighted(mm_prim_, msrc, mm_weights_, mm_bias_, mdst, sp);
        return;
      }
      RunMemory src(descs_.src, src_data), dst(descs_.dst, ctx.out(0).raw()),
          sp(descs_.scratchpad, scratch + SrcTmpBytes());
      ExecuteWeighted(prim_, src, weights_, bias_, dst, sp);
    });
  }

 private:
  size_t SrcTmpBytes() const { return ReorderedBytes(src_reorder_, descs_.src); }

  void DoPrepare(runtime::PrepareContext* ctx) {
    const TensorInfo& x = ctx->inputs[0];
    const Shape& ws = ctx->inputs[1].shape;
    const Shape& ys = ctx->outputs[0].shape;
    const ConvGeometry geo = ConvGeometryFor(a_.conv, x.shape, ws);
    const int64_t group = a_.conv.group;
    const memory::dims& wdims = geo.wdims;
    const memory::dims &strides = geo.strides, &dil = geo.dilations, &pl = geo.pad_begin,
                       &pr = geo.pad_end;

    dnnl::post_ops ops;
    has_sum_ = node_.domain == "kiln" && node_.HasInput(3);
    if (has_sum_) ops.append_sum(1.f);
    if (node_.domain == "kiln") AppendActivation(a_.act, &ops);
    dnnl::primitive_attr attr;
    attr.set_post_ops(ops);
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);

    src_in_desc_ = InputDesc(x);
    const memory::data_type dt = ComputeType(ctx->precision);
    memory::desc src_any(Dims(x.shape), dt, memory::format_tag::any);
    memory::desc w_any(wdims, dt, memory::format_tag::any);
    const memory::desc dst_any = DstDescFor(ys, dt);
    const bool has_bias = node_.HasInput(2);
    memory::desc b_desc({ws[0]}, memory::data_type::f32, memory::format_tag::x);
    auto desc = has_bias
                    ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                                      dnnl::algorithm::convolution_direct, src_any,
                                                      w_any, b_desc, dst_any, strides, dil, pl, pr)
                    : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                                      dnnl::algorithm::convolution_direct, src_any,
                                                      w_any, dst_any, strides, dil, pl, pr);
    pd_ = dnnl::convolution_forward::primitive_desc(desc, attr, Engine());
    prim_ = dnnl::convolution_forward(pd_);
    descs_ = PdDescs(pd_);
    if (pd_.src_desc() != src_in_desc_) src_reorder_ = MakeReorder(src_in_desc_, pd_.src_desc());

    // Prepack the constant weights into the layout the primitive chose.
    const Tensor& w = *ctx->constants[1];
    const memory::desc w_plain = geo.PlainWeights(ws, group, memory::data_type::f32);
    packed_src_w_ = w;  // the plain weights, for the matmul variant (tune)
    weights_ = PackWeights(w_plain, w, pd_.weights_desc(), &packed_w_, ctx->weights);
    if (has_bias) {
      bias_copy_ = ctx->constants[2]->Clone();
      bias_ = memory(b_desc, Engine(), bias_copy_.raw());
    }
    if (has_sum_) {
      z_desc_ = InputDesc(ctx->inputs[3]);
      if (z_desc_ != pd_.dst_desc()) z_reorder_ = MakeReorder(z_desc_, pd_.dst_desc());
    }
    ctx->outputs[0].layout = LayoutFor(pd_.dst_desc(), ys);
    if (ctx->tune) TuneOneByOne(attr, x.shape, ws, ys, has_bias, ctx->cached_variant);
  }

  // SessionOptions::tune: the same 1x1 convolution as a matmul over NHWC rows, kept when it runs
  // faster on this shape (see the file comment).
  void TuneOneByOne(const dnnl::primitive_attr& attr, const Shape& xs, const Shape& ws,
                    const Shape& ys, bool has_bias, const std::string* cached) {
    if (ws.size() != 4 || ws[2] != 1 || ws[3] != 1 || a_.conv.group != 1) return;
    for (int64_t v : a_.conv.window.strides)
      if (v != 1) return;
    for (int64_t v : a_.conv.window.pads)
      if (v != 0) return;
    for (int64_t v : a_.conv.window.dilations)
      if (v != 1) return;
    const memory::data_type sdt = pd_.src_desc().data_type(), ddt = pd_.dst_desc().data_type();
    if (pd_.src_desc() != memory::desc(Dims(xs), sdt, memory::format_tag::acdb) ||
        pd_.dst_desc() != memory::desc(Dims(ys), ddt, memory::format_tag::acdb))
      return;
    const memory::dim rows = xs[0] * xs[2] * xs[3], ic = ws[1], oc = ws[0];
    memory::desc src({rows, ic}, sdt, memory::format_tag::ab);
    memory::desc dst({rows, oc}, ddt, memory::format_tag::ab);
    memory::desc w_any({ic, oc}, pd_.weights_desc().data_type(), memory::format_tag::any);
    memory::desc b({1, oc}, memory::data_type::f32, memory::format_tag::ab);
    auto desc =
        has_bias ? dnnl::matmul::desc(src, w_any, b, dst) : dnnl::matmul::desc(src, w_any, dst);
    dnnl::matmul::primitive_desc mpd;
    try {
      mpd = dnnl::matmul::primitive_desc(desc, attr, Engine());
    } catch (const dnnl::error&) {
      return;  // no matmul for these post-ops: keep the convolution
    }
    dnnl::matmul mprim(mpd);
    Tensor mw = Tensor::Empty(DataType::kUInt8, {}, mpd.weights_desc().get_size());
    memory mweights(mpd.weights_desc(), Engine(), mw.raw());
    memory wsrc(memory::desc({ic, oc}, memory::data_type::f32, memory::format_tag::ba), Engine(),
                const_cast<void*>(packed_src_w_.raw()));
    dnnl::reorder(wsrc, mweights).execute(ThreadStream(), wsrc, mweights);
    ThreadStream().wait();
    memory mbias;
    if (has_bias) mbias = memory(b, Engine(), bias_copy_.raw());

    const char* pick = std::getenv("KILN_TUNE_PICK");
    bool matmul = false;
    if (pick != nullptr && std::string(pick) == "matmul") {
      matmul = true;
    } else if (pick == nullptr && cached != nullptr) {
      matmul = *cached == "matmul";  // the plan cache's earlier measurement
    } else if (pick == nullptr || std::string(pick) != "conv") {
      // Time both on zeroed scratch data: one warm-up and three timed runs each, best of three.
      Tensor in = Tensor::Empty(DataType::kUInt8, {}, pd_.src_desc().get_size());
      Tensor out = Tensor::Empty(DataType::kUInt8, {}, pd_.dst_desc().get_size());
      Tensor sp = Tensor::Empty(
          DataType::kUInt8, {},
          std::max(pd_.scratchpad_desc().get_size(), mpd.scratchpad_desc().get_size()) + 1);
      dnnl::stream& s = ThreadStream();
      auto best = [&](auto&& run) {
        double t = 1e30;
        for (int i = 0; i < 4; ++i) {
          auto t0 = std::chrono::steady_clock::now();
          run();
          s.wait();
          if (i > 0)
            t = std::min(
                t, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        }
        return t;
      };
      std::unordered_map<int, memory> cargs = {
          {DNNL_ARG_SRC, memory(pd_.src_desc(), Engine(), in.raw())},
          {DNNL_ARG_WEIGHTS, weights_},
          {DNNL_ARG_DST, memory(pd_.dst_desc(), Engine(), out.raw())},
          {DNNL_ARG_SCRATCHPAD, memory(pd_.scratchpad_desc(), Engine(), sp.raw())}};
      std::unordered_map<int, memory> margs = {
          {DNNL_ARG_SRC, memory(mpd.src_desc(), Engine(), in.raw())},
          {DNNL_ARG_WEIGHTS, mweights},
          {DNNL_ARG_DST, memory(mpd.dst_desc(), Engine(), out.raw())},
          {DNNL_ARG_SCRATCHPAD, memory(mpd.scratchpad_desc(), Engine(), sp.raw())}};
      if (bias_) {
        cargs[DNNL_ARG_BIAS] = bias_;
        margs[DNNL_ARG_BIAS] = mbias;
      }
      const double tc = best([&] { prim_.execute(s, cargs); });
      const double tm = best([&] { mprim.execute(s, margs); });
      matmul = tm < 0.97 * tc;  // a clear win only: the timings are noisy
    }
    if (!matmul) return;
    use_matmul_ = true;
    mm_pd_ = mpd;
    mm_prim_ = mprim;
    mm_descs_ = PdDescs(mm_pd_);
    mm_packed_w_ = mw;
    mm_weights_ = mweights;
    mm_bias_ = mbias;
  }

  ir::Node node_;
  ops::ConvAttrs a_;
  dnnl::convolution_forward::primitive_desc pd_;
  PdDescs descs_;
  dnnl::convolution_forward prim_;
  memory::desc src_in_desc_, z_desc_;
  dnnl::reorder src_reorder_, z_reorder_;
  Tensor packed_w_, bias_copy_;
  memory weights_, bias_;
  bool has_sum_ = false;
  // The matmul variant of a tuned 1x1 convolution.
  Tensor packed_src_w_, mm_packed_w_;
  bool use_matmul_ = false;
  dnnl::matmul::primitive_desc mm_pd_;
  PdDescs mm_descs_;
  dnnl::matmul mm_prim_;
  memory mm_weights_, mm_bias_;
};

KernelSupport SupportsConv(const ir::Node& node, const ir::Op& op,
                           const std::vector<TensorInfo>& in) {
  if (!AllFloat(in, {0, 1})) return {false, "needs float32 X and W"};
  if (in[0].shape.size() < 3 || in[0].shape.size() > 5) return {false, "needs 1-3 spatial dims"};
  if (node.HasInput(2) && in[2].dtype != DataType::kFloat) return {false, "needs float32 B"};
  const ops::Activation& act = runtime::AttrsOf<ops::ConvAttrs>(op).act;
  dnnl::post_ops probe;
  if (!AppendActivation(act, &probe))
    return {false, std::string("activation '") + ops::ActivationName(act.kind) +
                       "' has no oneDNN post-op"};
  return {true, ""};
}

// W and B (inputs 1, 2) must be constant so Prepare can prepack them.
KILN_REGISTER_KERNEL(runtime::KernelDef{"cpu.conv.onednn",
                                        "Conv",
                                        "",
                                        1,
                                        ir::kMaxOpset,
                                        Backend::kCpu,
                                        10,
                                        SupportsConv,
                                        CreateKernel<ConvOneDnn>,
                                        {1, 2},
                                        {},
                                        {Precision::kFp32, Precision::kBf16}});
KILN_REGISTER_KERNEL(runtime::KernelDef{"cpu.fusedconv.onednn",
                                        "FusedConv",
                                        "kiln",
                                        1,
                                        1,
                                        Backend::kCpu,
                                        10,
                                        SupportsConv,
                                        CreateKernel<ConvOneDnn>,
                                        {1, 2},
                                        {},
                                        {Precision::kFp32, Precision::kBf16}});

}  // namespace
}  // namespace kiln::backends::cpu
