// cpu.layernormalization.onednn: LayerNormalization (ai.onnx opset 17, and the kiln-domain node
// the optimizer makes from PyTorch's decomposed form) on oneDNN's layer_normalization_forward,
// float32, plain layout. The normalized axes [axis, rank) are flattened into one trailing dim, so
// any axis works; Scale (and B) must be constants of exactly that many elements; the optional
// Mean/InvStdDev outputs are declined (reference kernel).
#include "backends/cpu/onednn_common.h"
#include "ops/common.h"
#include "ops/nn/norm.h"

namespace kiln::backends::cpu {
namespace {

using dnnl::memory;
using runtime::KernelSupport;
using runtime::TensorInfo;

class LayerNormOneDnn final : public runtime::Kernel {
 public:
  LayerNormOneDnn(const ir::Node& node, const ir::Op& op)
      : node_(node), a_(runtime::AttrsOf<ops::NormAttrs>(op)) {}

  Status Prepare(runtime::PrepareContext* ctx) override {
    return Guard(node_, [&] {
      const Shape& xs = ctx->inputs[0].shape;
      const int64_t r = static_cast<int64_t>(xs.size());
      int64_t axis = a_.axis;
      if (axis < 0) axis += r;
      int64_t inner = 1;
      for (int64_t i = axis; i < r; ++i) inner *= xs[i];
      const int64_t outer = NumElements(xs) / inner;
      data_ = memory::desc({outer, inner}, memory::data_type::f32, memory::format_tag::ab);
      auto flags = dnnl::normalization_flags::use_scale;
      scale_copy_ = ctx->constants[1]->Clone();
      if (node_.HasInput(2)) {
        flags = flags | dnnl::normalization_flags::use_shift;
        shift_copy_ = ctx->constants[2]->Clone();
      }
      dnnl::primitive_attr attr;
      attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
      dnnl::layer_normalization_forward::desc d(dnnl::prop_kind::forward_inference, data_,
                                                a_.epsilon, flags);
      pd_ = dnnl::layer_normalization_forward::primitive_desc(d, attr, Engine());
      prim_ = dnnl::layer_normalization_forward(pd_);
      descs_ = PdDescs(pd_);
      memory::desc vec({inner}, memory::data_type::f32, memory::format_tag::x);
      scale_ = memory(vec, Engine(), scale_copy_.raw());
      if (shift_copy_.defined()) shift_ = memory(vec, Engine(), shift_copy_.raw());
    });
  }

  size_t ScratchBytes() const override { return pd_.scratchpad_desc().get_size(); }

  Status Run(const ir::ComputeContext& ctx) const override {
    return Guard(node_, [&] {
      RunMemory src(data_, ctx.in(0).raw()), dst(data_, ctx.out(0).raw()),
          sp(descs_.scratchpad, ctx.scratch);
      Execute(prim_, {{DNNL_ARG_SRC, src.get()},
                      {DNNL_ARG_DST, dst.get()},
                      {DNNL_ARG_SCALE, scale_.get(true)},
                      {DNNL_ARG_SHIFT, shift_.get(true)},
                      {DNNL_ARG_SCRATCHPAD, sp.get()}});
      ThreadStream().wait();
    });
  }

 private:
  ir::Node node_;
  ops::NormAttrs a_;
  memory::desc data_;
  dnnl::layer_normalization_forward::primitive_desc pd_;
  PdDescs descs_;
  dnnl::layer_normalization_forward prim_;
  Tensor scale_copy_, shift_copy_;
  memory scale_, shift_;
};

KernelSupport SupportsLayerNorm(const ir::Node& node, const ir::Op& op,
                                const std::vector<TensorInfo>& in) {
  const ops::NormAttrs& a = runtime::AttrsOf<ops::NormAttrs>(op);
  if (!AllFloat(in, {0, 1})) return {false, "needs float32 X and Scale"};
  if (node.HasInput(2) && in[2].dtype != DataType::kFloat) return {false, "needs float32 B"};
  for (size_t o = 1; o < node.outputs.size(); ++o)
    if (node.outputs[o] >= 0) return {false, "Mean/InvStdDev outputs requested"};
  if (a.stash_type != 1) return {false, "stash_type != 1"};
  const Shape& xs = in[0].shape;
  const int64_t r = static_cast<int64_t>(xs.size());
  int64_t axis = a.axis;
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r) return {false, "axis out of range"};
  int64_t inner = 1;
  for (int64_t i = axis; i < r; ++i) inner *= xs[i];
  if (NumElements(in[1].shape) != inner) return {false, "Scale must have one value per element"};
  if (node.HasInput(2) && NumElements(in[2].shape) != inner)
    return {false, "B must have one value per element"};
  return {true, ""};
}

KILN_REGISTER_KERNEL(runtime::KernelDef{"cpu.layernormalization.onednn",
                                        "LayerNormalization",
                                        "",
                                        17,
                                        ir::kMaxOpset,
                                        Backend::kCpu,
                                        10,
                                        SupportsLayerNorm,
                                        CreateKernel<LayerNormOneDnn>,
                                        {1, 2}});
KILN_REGISTER_KERNEL(runtime::KernelDef{"cpu.layernormalization.onednn",
                                        "LayerNormalization",
                                        "kiln",
                                        1,
                                        1,
                                        Backend::kCpu,
                                        10,
                                        SupportsLayerNorm,
                                        CreateKernel<LayerNormOneDnn>,
                                        {1, 2}});

}  // namespace
}  // namespace kiln::backends::cpu
