// cpu.<op>.onednn for MaxPool (without the Indices output), AveragePool, GlobalAveragePool and
// GlobalMaxPool, float32 (MaxPool also uint8/int8: QDQ models, fuse_qdq_add.cc), 1-3 spatial dims,
// on oneDNN's pooling_v2 primitive (dilations). ceil_mode is expressed as extra end padding so
// oneDNN produces the ONNX output size; AveragePool with ceil_mode is declined (its divisor near
// the border differs). Input read in the producer's layout; oneDNN picks the output layout. A
// plain (NCHW) input of a windowed pool is first reordered channels-last into scratch: oneDNN 2.6
// pools plain layouts with a scalar reference loop (simple_nchw: 9 ms for ResNet-50's 64x112x112
// MaxPool where its jit kernel on channels-last takes well under 1 ms with both reorders).
#include "backends/cpu/onednn_common.h"
#include "ops/attrs.h"
#include "ops/nn/spatial.h"

namespace kiln::backends::cpu {
namespace {

using dnnl::memory;
using runtime::KernelSupport;
using runtime::TensorInfo;

class PoolOneDnn final : public runtime::Kernel {
 public:
  PoolOneDnn(const ir::Node& node, const ir::Op& op)
      : node_(node), a_(runtime::AttrsOf<ops::PoolAttrs>(op)) {}
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
      const void* x = InputAs(src_reorder_, src_, descs_.src, ctx.in(0).raw(), scratch);
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
    const bool global = node_.op_type.rfind("Global", 0) == 0;
    const bool is_max = node_.op_type.find("Max") != std::string::npos;
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
    if (x.layout == nullptr && !global) {
      src = ChannelsLastDesc(xs, src_.data_type());
      src_reorder_ = MakeReorder(src_, src);
    }
    memory::desc dst_any(Dims(ys), src_.data_type(), memory::format_tag::any);
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    dnnl::pooling_v2_forward::desc d(dnnl::prop_kind::forward_inference, alg, src, dst_any, strides,
                                     kernel, dil, pl, pr);
    pd_ = dnnl::pooling_v2_forward::primitive_desc(d, attr, Engine());
    prim_ = dnnl::pooling_v2_forward(pd_);
    descs_ = PdDescs(pd_);
    ctx->outputs[0].layout = LayoutFor(pd_.dst_desc(), ys);
  }

  ir::Node node_;
  ops::PoolAttrs a_;
  memory::desc src_;  // as the input arrives
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
                                          "cpu",                    \
                                          10,                       \
                                          SupportsPool,             \
                                          CreateKernel<PoolOneDnn>, \
                                          {}})
KILN_POOL_KERNEL("MaxPool", "maxpool");
KILN_POOL_KERNEL("AveragePool", "averagepool");
KILN_POOL_KERNEL("GlobalAveragePool", "globalaveragepool");
KILN_POOL_KERNEL("GlobalMaxPool", "globalmaxpool");

}  // namespace
}  // namespace kiln::backends::cpu
