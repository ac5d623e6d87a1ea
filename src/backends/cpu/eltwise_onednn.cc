// cpu.<op>.onednn for standalone activations (Relu, LeakyRelu, Clip with constant bounds,
// Sigmoid, Tanh, HardSwish, HardSigmoid, Elu, Gelu, Exp, Sqrt, Abs), float32, on oneDNN's eltwise
// primitive. Reads its input in whatever layout the producer used and writes the same layout, so
// activations between oneDNN ops cost no reorder. (Most activations after Conv are fused by the
// optimizer instead; these cover the rest.)
#include "backends/cpu/onednn_common.h"

namespace kiln::backends::cpu {
namespace {

using dnnl::memory;
using runtime::KernelSupport;
using runtime::TensorInfo;

// The node's activation or unary math kind (ops::UnaryOfNode: kiln's one definition of the
// activations and their defaults; Clip's bounds from its constant inputs), as one eltwise.
bool EltwiseAlg(const ir::Node& node, const std::vector<const Tensor*>& constants,
                dnnl::algorithm* alg, float* alpha, float* beta) {
  ops::Activation act;
  return ops::UnaryOfNode(node, constants, &act) && EltwiseOf(act, alg, alpha, beta);
}

class EltwiseOneDnn final : public runtime::Kernel {
 public:
  explicit EltwiseOneDnn(const ir::Node& node) : node_(node) {}
  bool AcceptsLayout(size_t input) const override { return input == 0; }

  Status Prepare(runtime::PrepareContext* ctx) override {
    return Guard(node_, [&] {
      dnnl::algorithm alg;
      float alpha = 0, beta = 0;
      if (!EltwiseAlg(node_, ctx->constants, &alg, &alpha, &beta))
        throw dnnl::error(dnnl_unimplemented, "no eltwise algorithm");
      desc_ = InputDesc(ctx->inputs[0]);
      dnnl::primitive_attr attr;
      attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
      dnnl::eltwise_forward::desc d(dnnl::prop_kind::forward_inference, alg, desc_, alpha, beta);
      pd_ = dnnl::eltwise_forward::primitive_desc(d, attr, Engine());
      prim_ = dnnl::eltwise_forward(pd_);
      descs_ = PdDescs(pd_);
      ctx->outputs[0].layout = ctx->inputs[0].layout;
    });
  }

  int InPlaceInput() const override { return 0; }  // oneDNN supports dst == src
  size_t ScratchBytes() const override { return pd_.scratchpad_desc().get_size(); }

  Status Run(const ir::ComputeContext& ctx) const override {
    return ExecuteSrcDst(node_, prim_, descs_.scratchpad, desc_, desc_, ctx);
  }

 private:
  ir::Node node_;
  memory::desc desc_;
  dnnl::eltwise_forward::primitive_desc pd_;
  PdDescs descs_;
  dnnl::eltwise_forward prim_;
};

KernelSupport SupportsEltwise(const ir::Node& node, const ir::Op&,
                              const std::vector<TensorInfo>& in) {
  // Clip's bounds must be constant: KernelDef::constant_inputs checks them.
  if (!AllFloat(in, {0})) return {false, "needs float32"};
  return {true, ""};
}

#define KILN_ELTWISE_KERNEL(OP, NAME, CONSTS)                                              \
  KILN_REGISTER_KERNEL(runtime::KernelDef{"cpu." NAME ".onednn", OP, "", 1, ir::kMaxOpset, \
                                          Backend::kCpu, 10, SupportsEltwise,              \
                                          CreateKernel<EltwiseOneDnn>, CONSTS})
KILN_ELTWISE_KERNEL("Relu", "relu", {});
KILN_ELTWISE_KERNEL("LeakyRelu", "leakyrelu", {});
KILN_ELTWISE_KERNEL("Clip", "clip", (std::vector<int>{1, 2}));
KILN_ELTWISE_KERNEL("Sigmoid", "sigmoid", {});
KILN_ELTWISE_KERNEL("Tanh", "tanh", {});
KILN_ELTWISE_KERNEL("HardSwish", "hardswish", {});
KILN_ELTWISE_KERNEL("Elu", "elu", {});
KILN_ELTWISE_KERNEL("Gelu", "gelu", {});
KILN_REGISTER_KERNEL(runtime::KernelDef{"cpu.gelu.onednn",
                                        "Gelu",
                                        "kiln",
                                        1,
                                        1,
                                        Backend::kCpu,
                                        10,
                                        SupportsEltwise,
                                        CreateKernel<EltwiseOneDnn>,
                                        {}});
KILN_ELTWISE_KERNEL("Exp", "exp", {});
KILN_ELTWISE_KERNEL("Sqrt", "sqrt", {});
KILN_ELTWISE_KERNEL("Abs", "abs", {});

}  // namespace
}  // namespace kiln::backends::cpu
