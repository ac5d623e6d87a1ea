// RunDefaultPasses (see pass_manager.h). Order: expand_qlinear first (QOperator models'
// QLinearConv, QLinearMatMul and com.microsoft QLinear* nodes become DequantizeLinear -> float op
// -> QuantizeLinear, so everything below treats them as QDQ models), then clean-up
// (eliminate_identity, then fold_constants, which turns Constant nodes into constants so the
// fusions see constant weights), reduce_mean_to_pool (a spatial ReduceMean becomes
// GlobalAveragePool, which has fast kernels), then fuse_conv_bn (needs plain Conv), fuse_conv_add
// before fuse_conv_activation (so ResNet's Conv -> Add -> Relu becomes one FusedConv with Z and
// Relu, while Conv -> Relu -> Add keeps its Add), fuse_bn_activation after fuse_conv_bn (only the
// normalizations no convolution absorbed), fuse_matmul_add, fuse_layernorm, fuse_gelu (the GELUs
// no producer absorbed), then qdq_int8_to_uint8
// (asymmetric int8 activations become uint8, exactly, so the next two see zero point 0 after a
// ReLU), fuse_qdq_conv (QDQ models: DequantizeLinear -> Conv or FusedConv becomes an int8 QConv,
// after the conv fusions so it keeps their activation and residual), fuse_qdq_matmul
// (DequantizeLinear -> MatMul/Gemm becomes an int8 QMatMul), fuse_qdq_add (a residual Add with Q/DQ
// on every side becomes an int8 QAdd, and DequantizeLinear -> MaxPool -> QuantizeLinear of one
// scale a MaxPool on the 8-bit values), fuse_qconv_add (a QConv read only by a QAdd becomes one
// QConvAdd: the residual sum as the convolution writes), fuse_qconv_dw (a 1x1 QConv read only by a
// 3x3 depthwise QConv becomes one QConvDw: the depthwise convolution as the 1x1 one writes). A
// second round catches what one rewrite exposes to an earlier pass (e.g. an Identity between Conv
// and BatchNormalization); the loop stops at the first round without changes, after kMaxRounds at
// most.
#include "passes/pass_manager.h"

#include <algorithm>
#include <memory>

#include "passes/pass.h"

namespace kiln::passes {
namespace {

constexpr int kMaxRounds = 4;

std::vector<std::unique_ptr<Pass>> DefaultPasses() {
  std::vector<std::unique_ptr<Pass>> p;
  p.push_back(MakeExpandQLinearPass());
  p.push_back(MakeEliminateIdentityPass());
  p.push_back(MakeFoldConstantsPass());
  p.push_back(MakeReduceMeanToPoolPass());
  p.push_back(MakeFuseConvBnPass());
  p.push_back(MakeFuseConvAddPass());
  p.push_back(MakeFuseConvActivationPass());
  p.push_back(MakeFuseBnActivationPass());
  p.push_back(MakeFuseMatMulAddPass());
  p.push_back(MakeFuseLayerNormPass());
  p.push_back(MakeFuseGeluPass());
  p.push_back(MakeQdqInt8ToUint8Pass());
  p.push_back(MakeFuseQdqConvPass());
  p.push_back(MakeFuseQdqMatMulPass());
  p.push_back(MakeFuseQdqAddPass());
  p.push_back(MakeFuseQConvAddPass());
  p.push_back(MakeFuseQConvDwPass());
  return p;
}

}  // namespace

std::vector<std::string> DefaultPassNames() {
  std::vector<std::string> names;
  for (const auto& p : DefaultPasses()) names.push_back(p->name());
  return names;
}

Status RunDefaultPasses(ir::Graph& graph, const SessionOptions& options,
                        std::vector<std::string>* log) {
  const std::vector<std::string> known = DefaultPassNames();
  for (const std::string& name : options.disabled_passes) {
    if (std::find(known.begin(), known.end(), name) != known.end()) continue;
    std::string list;
    for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
    return InvalidArgument("disabled_passes: no pass is named '" + name + "'; the passes are " +
                           list);
  }
  std::vector<std::unique_ptr<Pass>> passes;
  for (auto& p : DefaultPasses()) {
    const auto& off = options.disabled_passes;
    if (std::find(off.begin(), off.end(), p->name()) == off.end()) passes.push_back(std::move(p));
  }
  for (int round = 0; round < kMaxRounds; ++round) {
    bool changed = false;
    for (auto& p : passes) {
      auto r = p->Run(graph);
      if (!r.ok()) return Status(r.status()).AddContext("in graph pass " + p->name());
      if (!*r) continue;
      changed = true;
      if (log) log->push_back("pass " + p->name() + ": " + p->summary());
    }
    if (!changed) break;
  }
  return OkStatus();
}

}  // namespace kiln::passes
