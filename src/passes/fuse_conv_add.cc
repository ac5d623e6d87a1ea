// fuse_conv_add: Conv -> Add(conv_output, Z) becomes kiln's FusedConv with Z as its 4th input
// (y = Conv(X, W) + B + Z), the residual add of ResNet and MobileNetV2 blocks. A following
// activation is fused by fuse_conv_activation, which runs after this pass, giving ResNet's
// act(conv + Z); Conv -> Relu -> Add is deliberately not fused (the activation would have to come
// before Z).
//
// Fires when the conv output feeds only the Add and is not a graph output, and Z has exactly the
// conv output's shape in both ShapeProbe probes (no broadcasting, including along symbolic
// dims). When both Add operands qualify, the conv that comes later in the graph takes the other
// as Z, so Z is already computed. Also accepts a FusedConv without activation and Z. The fused
// node takes the conv's place; Commit() re-sorts the graph so it runs after Z's producer (no
// cycle is possible: Z cannot depend on the conv output, whose only reader is the Add). Add
// before opset 7 (broadcast attributes) is not handled.
#include <memory>

#include "passes/graph_edit.h"
#include "passes/pass.h"
#include "passes/shape_probe.h"

namespace kiln::passes {
namespace {

// `p` is a Conv, or a FusedConv without activation and residual input.
bool FusableConv(const GraphEditor& ed, int p) {
  if (p < 0) return false;
  const ir::Node& n = ed.node(p);
  if (IsOnnxOp(n, "Conv")) return true;
  return IsKilnOp(n, "FusedConv") && n.GetString("activation", "").empty() && !n.HasInput(3);
}

class FuseConvAddPass : public Pass {
 public:
  std::string name() const override { return "fuse_conv_add"; }

  StatusOr<bool> Run(ir::Graph& graph) override {
    summary_.clear();
    if (!HasOnnxOp(graph, {"Add"})) return false;
    const ShapeProbe probe = ShapeProbe::Run(graph);  // before any edit
    GraphEditor ed(graph);
    int fused = 0;
    for (int ni = 0; ni < ed.num_nodes(); ++ni) {
      if (!ed.alive(ni)) continue;
      const ir::Node& add = ed.node(ni);
      if (!IsOnnxOp(add, "Add") || add.opset < 7 || add.inputs.size() != 2 ||
          add.outputs.size() != 1 || add.inputs[0] == add.inputs[1])
        continue;
      int best = -1, best_z = -1;
      for (int i = 0; i < 2; ++i) {
        const int c = add.inputs[i], z = add.inputs[1 - i];
        const int p = ed.Producer(c);
        if (!FusableConv(ed, p) || ed.SoleConsumer(c) != ni || ed.node(p).outputs[0] != c) continue;
        if (probe.dtype(z) != DataType::kFloat || !probe.SameShape(c, z)) continue;
        if (p > best) {
          best = p;
          best_z = z;
        }
      }
      if (best < 0) continue;
      if (!ImportKilnDomain(graph)) return false;
      const int out = add.outputs[0];
      ed.RemoveNode(ni);
      ir::Node& conv = ed.mutable_node(best);
      if (conv.op_type == "Conv") {
        conv.op_type = "FusedConv";
        conv.domain = "kiln";
        conv.opset = 1;
        conv.attrs["activation"] = StringAttr("");
      }
      if (conv.inputs.size() < 3) ed.SetInput(best, 2, -1);
      ed.SetInput(best, 3, best_z);
      ed.SetOutput(best, 0, out);
      ++fused;
    }
    if (fused == 0) return false;
    KILN_RETURN_IF_ERROR(ed.Commit());
    summary_ = "fused " + std::to_string(fused) + " Conv+Add into FusedConv with residual Z";
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> MakeFuseConvAddPass() { return std::make_unique<FuseConvAddPass>(); }

}  // namespace kiln::passes
