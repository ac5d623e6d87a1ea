// fuse_conv_activation: Conv (or a FusedConv without activation, e.g. from fuse_conv_add) followed
// by an activation becomes kiln's FusedConv with `activation` set: Relu, Clip (constant min/max,
// ReLU6), LeakyRelu, Sigmoid, HardSigmoid, HardSwish (also x * HardSigmoid(x) as PyTorch writes it
// below opset 14), Tanh, x * Sigmoid(x) as Silu and PyTorch's erf-form GELU as Gelu (patterns in
// activation_match.h).
//
// Fires only when the conv output and every intermediate value of the activation are read inside
// the pattern alone and are not graph outputs; a Clip whose min or max is not a constant is left
// alone. The fused node takes the conv's place and produces the activation's output value.
#include <map>
#include <memory>

#include "passes/activation_match.h"
#include "passes/graph_edit.h"
#include "passes/pass.h"

namespace kiln::passes {
namespace {

class FuseConvActivationPass : public Pass {
 public:
  std::string name() const override { return "fuse_conv_activation"; }

  StatusOr<bool> Run(ir::Graph& graph) override {
    summary_.clear();
    GraphEditor ed(graph);
    std::map<std::string, int> counts;
    int fused = 0;
    for (int ni = 0; ni < ed.num_nodes(); ++ni) {
      if (!ed.alive(ni)) continue;
      const ir::Node& n = ed.node(ni);
      const bool conv = IsOnnxOp(n, "Conv");
      if (!conv && !(IsKilnOp(n, "FusedConv") && n.GetString("activation", "").empty())) continue;
      if (n.outputs.size() != 1 || n.outputs[0] < 0) continue;
      auto m = MatchActivation(ed, n.outputs[0]);
      if (!m) continue;
      if (!ImportKilnDomain(graph)) return false;
      for (int r : m->nodes) ed.RemoveNode(r);
      ir::Node& fc = ed.mutable_node(ni);
      if (conv) {
        fc.op_type = "FusedConv";
        fc.domain = "kiln";
        fc.opset = 1;
      }
      SetActivationAttrs(*m, &fc);
      ed.SetOutput(ni, 0, m->output);
      ++counts[ops::ActivationName(m->act.kind)];
      ++fused;
    }
    if (fused == 0) return false;
    KILN_RETURN_IF_ERROR(ed.Commit());
    summary_ = "fused " + std::to_string(fused) + " Conv+activation into FusedConv (";
    bool first = true;
    for (const auto& [act, c] : counts) {
      summary_ += (first ? "" : ", ") + std::to_string(c) + " " + act;
      first = false;
    }
    summary_ += ")";
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> MakeFuseConvActivationPass() {
  return std::make_unique<FuseConvActivationPass>();
}

}  // namespace kiln::passes
