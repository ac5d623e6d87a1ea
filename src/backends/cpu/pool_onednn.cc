// cpu.<op>.onednn for MaxPool (without the Indices output), AveragePool, GlobalAveragePool and
// GlobalMaxPool, float32 (MaxPool also uint8/int8: QDQ models, fuse_qdq_add.cc), 1-3 spatial dims,
// on oneDNN's pooling_v2 primitive (dilations). ceil_mode is expressed as extra end padding so
// oneDNN produces the ONNX output size; AveragePool with ceil_mode is declined (its divisor near
// the border differs). Input read in the producer's layout; oneDNN picks the output layout. A
// plain (NCHW) input of a windowed pool is first reordered channels-last into scratch: oneDNN 2.6
// pools plain layouts with a scalar reference loop (simple_nchw: 9 ms for ResNet-50's 64x112x112
// MaxPool where its jit kernel on channels-last takes well under 1 ms with both reorders).
//
// cpu.qaveragepool.onednn: kiln.QAveragePool (src/ops/quant/qpool.cc), the same primitive on the
// 8-bit values (oneDNN's int8 pooling: int32 sums, the mean in float32), with the requantization
// as one linear post-op before oneDNN rounds to nearest even and saturates:
//   y = alpha * mean(Xq) + beta,  alpha = x_scale / y_scale,  beta = y_zero_point - alpha * x_zp.
// That is the unfused graph's arithmetic in another order: a value can land one step away where
// the exact mean sits within float rounding of a tie (tests bound how often). Needs X and Y of
// one type (oneDNN 2.6 pools int8 to int8 and uint8 to uint8 only) and constant scales and zero
// points. count_include_pad with padding and a non-zero x_zero_point (oneDNN pads with the code 0,
// not the zero point): X is reordered channels-last into a buffer filled with the zero point's
// code and pooled without padding. Plain inputs are reordered channels-last as above.
#include <cstring>

#include "backends/cpu/onednn_common.h"
#include "ops/nn/pool.h"
#include "ops/nn/spatial.h"
#include "ops/quant/qpool.h"
#include "ops/quant/quant_common.h"

namespace kiln::backends::cpu {
namespace {

using dnnl::memory;
using runtime::KernelSupport;
using runtime::TensorInfo;

class PoolOneDnn final : public runtime::Kernel {
 public:
  PoolOneDnn(const ir::Node& node, const ir::Op& op)
      : node_(node),
        a_(runtime::AttrsOf<ops::PoolAttrs>(op)),
        q_global_(runtime::AttrsOf<ops::QPoolAttrs>(op).global) {}
  bool AcceptsLayout(size_t input) const override { return input == 0; }

  Status Prepare(runtime::PrepareContext* ctx) override {
    return Guard(node_, [&] { DoPrepare(ctx); });
  }

  size_t ScratchBytes() const override {
    return ReorderedBytes(src_reorder_, descs_.src) + descs_.scratchpad.get_size();
  }

  Status Run(const ir::ComputeContext& ctx) const override {
    if (!src_reorder_) return ExecuteSrcDst(node_, prim_, descs_.scratchpad, src_, descs_.dst, ctx);
    return Guard(node_, [&] {
      char* scratch = static_cast<char*>(ctx.scratch);
      // Padded by hand (see DoPrepare): the zero point's code around X's values.
      if (pad_fill_) std::memset(scratch, pad_code_, descs_.src.get_size());
      const void* x =
          InputAs(src_reorder_, src_, pad_fill_ ? interior_ : descs_.src, ctx.in(0).raw(), scratch);
      RunMemory s(descs_.src, x), d(descs_.dst, ctx.out(0).raw()),
          sp(descs_.scratchpad, scratch + ReorderedBytes(src_reorder_, descs_.src));
      Execute(prim_,
              {{DNNL_ARG_SRC, s.get()}, {DNNL_ARG_DST, d.get()}, {DNNL_ARG_SCRATCHPAD, sp.get()}});
      ThreadStream().wait();
    });
  }

 private:
  void DoPrepare(runtime::PrepareContext* ctx) {
    const Shape& xs = ctx->inputs[0].shape;
    const Shape& ys = ctx->outputs[0].shape;
    const size_t n = xs.size() - 2;
    const bool quantized = node_.domain == "kiln";  // QAveragePool
    const bool global = quantized ? q_global_ : node_.op_type.rfind("Global", 0) == 0;
    const bool is_max = !quantized && node_.op_type.find("Max") != std::string::npos;
    memory::dims kernel, strides, dil, pl, pr;
    if (global) {
      kernel.assign(xs.begin() + 2, xs.end());
      strides.assign(n, 1);
      dil.assign(n, 0);
      pl.assign(n, 0);
      pr.assign(n, 0);
    } else {
      ops::nn::Window w;
      std::vector<int64_t> in(xs.begin() + 2, xs.end());
      std::string rule = ops::nn::ForwardWindow(a_.window, in, {}, a_.ceil_mode, &w);
      if (!rule.empty()) throw dnnl::error(dnnl_invalid_arguments, rule.c_str());
      for (size_t i = 0; i < n; ++i) {
        kernel.push_back(w.kernel[i]);
        strides.push_back(w.strides[i]);
        dil.push_back(w.dilations[i] - 1);
        pl.push_back(w.pad_begin[i]);
        // End padding that makes oneDNN's floor formula give the ONNX (possibly ceil) size.
        const int64_t keff = (w.kernel[i] - 1) * w.dilations[i] + 1;
        pr.push_back(std::max<int64_t>(
            w.pad_end[i], (ys[2 + i] - 1) * w.strides[i] + keff - xs[2 + i] - w.pad_begin[i]));
      }
    }
    dnnl::algorithm alg = is_max ? dnnl::algorithm::pooling_max
                          : (!global && a_.count_include_pad)
                              ? dnnl::algorithm::pooling_avg_include_padding
                              : dnnl::algorithm::pooling_avg_exclude_padding;
    const TensorInfo& x = ctx->inputs[0];
    src_ = InputDesc(x);
    memory::desc src = src_;
    // count_include_pad with padding and a non-zero x_zero_point: the padding counts as the value
    // 0, the zero point's code, where oneDNN pads with the code 0. X is then reordered
    // (channels-last) into the middle of a buffer filled with that code, pooled without padding.
    const int32_t zx_code =
        quantized && node_.HasInput(2) ? ops::quant::ReadQuant(*ctx->constants[2], 0) : 0;
    bool padding = false;
    for (size_t i = 0; i < pl.size(); ++i) padding = padding || pl[i] != 0 || pr[i] != 0;
    pad_fill_ = alg == dnnl::algorithm::pooling_avg_include_padding && padding && zx_code != 0;
    if (pad_fill_) {
      Shape ps = xs;
      memory::dims offsets(xs.size(), 0);
      for (size_t i = 0; i < n; ++i) {
        ps[2 + i] += pl[i] + pr[i];
        offsets[2 + i] = pl[i];
        pl[i] = pr[i] = 0;
      }
      src = ChannelsLastDesc(ps, src_.data_type());
      interior_ = src.submemory_desc(Dims(xs), offsets);
      src_reorder_ = MakeReorder(src_, interior_);
      pad_code_ = static_cast<unsigned char>(zx_code & 0xff);
    } else if (x.layout == nullptr && (!global || quantized)) {
      src = ChannelsLastDesc(xs, src_.data_type());
      src_reorder_ = MakeReorder(src_, src);
    }
    memory::desc dst_any(Dims(ys), src_.data_type(), memory::format_tag::any);
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    if (quantized) {
      using ops::quant::ReadQuant;
      const float sx = ctx->constants[1]->data<float>()[0];
      const float zx = static_cast<float>(node_.HasInput(2) ? ReadQuant(*ctx->constants[2], 0) : 0);
      const float sy = ctx->constants[3]->data<float>()[0];
      const float zy = static_cast<float>(ReadQuant(*ctx->constants[4], 0));
      const float alpha = sx / sy, beta = zy - alpha * zx;
      if (alpha != 1.f || beta != 0.f) {
        dnnl::post_ops ops;
        ops.append_eltwise(1.f, dnnl::algorithm::eltwise_linear, alpha, beta);
        attr.set_post_ops(ops);
      }
    }
    dnnl::pooling_v2_forward::desc d(dnnl::prop_kind::forward_inference, alg, src, dst_any, strides,
                                     kernel, dil, pl, pr);
    pd_ = dnnl::pooling_v2_forward::primitive_desc(d, attr, Engine());
    prim_ = dnnl::pooling_v2_forward(pd_);
    descs_ = PdDescs(pd_);
    ctx->outputs[0].layout = LayoutFor(pd_.dst_desc(), ys);
  }

  ir::Node node_;
  ops::PoolAttrs a_;
  bool q_global_;     // QAveragePool of a GlobalAveragePool
  memory::desc src_;  // as the input arrives
  // QAveragePool, count_include_pad with padding and a non-zero x_zero_point: X goes into
  // `interior_` of a buffer filled with the zero point's code (`pad_code_`).
  bool pad_fill_ = false;
  unsigned char pad_code_ = 0;
  memory::desc interior_;
  dnnl::reorder src_reorder_;
  dnnl::pooling_v2_forward::primitive_desc pd_;
  PdDescs descs_;
  dnnl::pooling_v2_forward prim_;
};

KernelSupport SupportsPool(const ir::Node& node, const ir::Op& op,
                           const std::vector<TensorInfo>& in) {
  const ops::PoolAttrs& a = runtime::AttrsOf<ops::PoolAttrs>(op);
  const bool int8 = node.op_type == "MaxPool" &&
                    (in[0].dtype == DataType::kUInt8 || in[0].dtype == DataType::kInt8);
  if (!int8 && !AllFloat(in, {0})) return {false, "needs float32 (MaxPool: or uint8/int8)"};
  if (in[0].shape.size() < 3 || in[0].shape.size() > 5) return {false, "needs 1-3 spatial dims"};
  if (node.outputs.size() > 1 && node.outputs[1] >= 0) return {false, "Indices output requested"};
  if (node.op_type == "AveragePool")
    for (int64_t d : a.window.dilations)
      if (d != 1) return {false, "dilated AveragePool (opset 19): the reference kernel"};
  if (node.op_type == "AveragePool" && a.ceil_mode) return {false, "AveragePool with ceil_mode"};
  if (a.col_major_indices) return {false, "storage_order=1"};
  return {true, ""};
}

#define KILN_POOL_KERNEL(OP, NAME)                                  \
  KILN_REGISTER_KERNEL(runtime::KernelDef{"cpu." NAME ".onednn",    \
                                          OP,                       \
                                          "",                       \
                                          1,                        \
                                          ir::kMaxOpset,            \
                                          Backend::kCpu,            \
                                          10,                       \
                                          SupportsPool,             \
                                          CreateKernel<PoolOneDnn>, \
                                          {}})
KILN_POOL_KERNEL("MaxPool", "maxpool");
KILN_POOL_KERNEL("AveragePool", "averagepool");
KILN_POOL_KERNEL("GlobalAveragePool", "globalaveragepool");
KILN_POOL_KERNEL("GlobalMaxPool", "globalmaxpool");

KernelSupport SupportsQAveragePool(const ir::Node& node, const ir::Op& op,
                                   const std::vector<TensorInfo>& in) {
  if (in[0].dtype != in[4].dtype)
    return {false, "X and Y of different types (oneDNN 2.6 pools int8 to int8, uint8 to uint8)"};
  if (in[0].shape.size() < 3 || in[0].shape.size() > 5) return {false, "needs 1-3 spatial dims"};
  const ops::QPoolAttrs& a = runtime::AttrsOf<ops::QPoolAttrs>(op);
  if (!a.global) {
    for (int64_t d : a.window.dilations)
      if (d != 1) return {false, "dilated AveragePool: the reference kernel"};
    if (a.ceil_mode) return {false, "AveragePool with ceil_mode"};
  }
  return {true, ""};
}

KILN_REGISTER_KERNEL(runtime::KernelDef{"cpu.qaveragepool.onednn",
                                        "QAveragePool",
                                        "kiln",
                                        1,
                                        1,
                                        Backend::kCpu,
                                        10,
                                        SupportsQAveragePool,
                                        CreateKernel<PoolOneDnn>,
                                        {1, 2, 3, 4}});

}  // namespace
}  // namespace kiln::backends::cpu
