// fuse_bn_activation: an inference BatchNormalization (opset 7+, training_mode 0, only Y used)
// that fuse_conv_bn could not fold into a convolution, followed by a Relu, becomes kiln's
// FusedBatchNormalization with activation Relu (DenseNet's pre-activation BN -> ReLU -> Conv):
// one pass over the tensor instead of two. Only Relu: it is what such models use, and the CPU
// kernel applies it in the same loop.
//
// Fires only when the normalization's output is read by the Relu alone and is not a graph
// output. The fused node takes the normalization's place and produces the Relu's output value.
#include <memory>

#include "passes/graph_edit.h"
#include "passes/pass.h"

namespace kiln::passes {
namespace {

class FuseBnActivationPass : public Pass {
 public:
  std::string name() const override { return "fuse_bn_activation"; }

  StatusOr<bool> Run(ir::Graph& graph) override {
    summary_.clear();
    GraphEditor ed(graph);
    int fused = 0;
    for (int ni = 0; ni < ed.num_nodes(); ++ni) {
      if (!ed.alive(ni)) continue;
      const ir::Node& n = ed.node(ni);
      if (!IsOnnxOp(n, "BatchNormalization") || n.opset < 7 || n.inputs.size() != 5) continue;
      if (n.GetInt("training_mode", 0) != 0 || n.outputs.empty() || n.outputs[0] < 0) continue;
      bool extra_outputs = false;
      for (size_t o = 1; o < n.outputs.size(); ++o) extra_outputs |= n.outputs[o] >= 0;
      if (extra_outputs) continue;
      const int y = n.outputs[0];
      const int relu = ed.SoleConsumer(y);
      if (relu < 0 || ed.IsGraphOutput(y) || !IsOnnxOp(ed.node(relu), "Relu")) continue;
      if (ed.node(relu).outputs.empty() || ed.node(relu).outputs[0] < 0) continue;
      if (!ImportKilnDomain(graph)) return false;
      const int out = ed.node(relu).outputs[0];
      ed.RemoveNode(relu);
      ir::Node& fb = ed.mutable_node(ni);
      fb.op_type = "FusedBatchNormalization";
      fb.domain = "kiln";
      fb.opset = 1;
      for (const char* a : {"momentum", "spatial", "is_test", "consumed_inputs", "training_mode"})
        fb.attrs.erase(a);
      ir::Attribute act;
      act.type = ir::Attribute::Type::kString;
      act.s = "Relu";
      fb.attrs["activation"] = act;
      ed.SetOutput(ni, 0, out);
      ++fused;
    }
    if (fused == 0) return false;
    KILN_RETURN_IF_ERROR(ed.Commit());
    summary_ =
        "fused " + std::to_string(fused) + " BatchNormalization+Relu into FusedBatchNormalization";
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> MakeFuseBnActivationPass() {
  return std::make_unique<FuseBnActivationPass>();
}

}  // namespace kiln::passes
