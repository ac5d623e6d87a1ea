// fold_constants: evaluates at load every node whose inputs are all constant (initializers,
// Constant nodes, values folded earlier in the same sweep) with the op's reference kernel, and
// replaces it by constant values (ir::Value::constant). Constant nodes, including the weights
// Paddle-style exporters write as Constant nodes, become plain constants, so the fusions that
// need constant weights see them.
//
// Nodes are visited in topological order, so chains fold in one sweep. Limits: a node whose op is
// not in the registry for its opset, whose inference or kernel fails (the runtime then reports the
// error in context), or whose outputs would exceed kMaxGrowthBytes more than its inputs (Expand,
// Tile, ConstantOfShape blowing small tensors up) is left alone. Shape sub-graphs that start from
// graph inputs are not constant here; the execution plan folds them once input shapes are known.
// A DequantizeLinear of int8 weights read only by Conv nodes (Conv or FusedConv, as their weight)
// or MatMul/Gemm nodes (as B) whose input is itself dequantized (directly, or through a MaxPool,
// which fuse_qdq_add moves before the DequantizeLinear) is left alone: fuse_qdq_conv and
// fuse_qdq_matmul turn such a pair into an int8 convolution or matrix product and need the int8
// weights and their scales, which folding would turn into float32.
#include <memory>

#include "passes/graph_edit.h"
#include "passes/pass.h"

namespace kiln::passes {
namespace {

constexpr int64_t kMaxGrowthBytes = int64_t{16} << 20;

// QDQ weights that fuse_qdq_conv or fuse_qdq_matmul will take (see the file comment).
bool KeptForInt8(const GraphEditor& ed, const ir::Node& node) {
  if (!IsOnnxOp(node, "DequantizeLinear") || node.outputs.size() != 1 || node.outputs[0] < 0)
    return false;
  const std::vector<int>& users = ed.Consumers(node.outputs[0]);
  if (users.empty() || ed.IsGraphOutput(node.outputs[0])) return false;
  for (int u : users) {
    const ir::Node& c = ed.node(u);
    if (!(IsOnnxOp(c, "Conv") || IsKilnOp(c, "FusedConv") || IsOnnxOp(c, "MatMul") ||
          IsOnnxOp(c, "Gemm")) ||
        c.inputs.size() < 2 || c.inputs[1] != node.outputs[0] || c.inputs[0] == node.outputs[0])
      return false;
    int p = ed.Producer(c.inputs[0]);
    if (p >= 0 && IsOnnxOp(ed.node(p), "MaxPool") && ed.node(p).inputs.size() == 1)
      p = ed.Producer(ed.node(p).inputs[0]);
    if (p < 0 || !IsOnnxOp(ed.node(p), "DequantizeLinear")) return false;
  }
  return true;
}

class FoldConstantsPass : public Pass {
 public:
  std::string name() const override { return "fold_constants"; }

  StatusOr<bool> Run(ir::Graph& graph) override {
    summary_.clear();
    auto order = graph.TopologicalOrder();
    if (!order.ok()) return false;
    GraphEditor ed(graph);
    int constants = 0, computed = 0;
    for (int ni : *order) {
      const ir::Node& node = ed.node(ni);
      bool all_const = true, any_output = false;
      for (int id : node.inputs) all_const = all_const && (id < 0 || ed.ConstantOf(id));
      for (int id : node.outputs) any_output = any_output || id >= 0;
      if (!all_const || !any_output || KeptForInt8(ed, node)) continue;
      const bool is_constant_node = IsOnnxOp(node, "Constant");
      if (!FoldNode(ed, ni, kMaxGrowthBytes)) continue;
      ++(is_constant_node ? constants : computed);
    }
    if (constants + computed == 0) return false;
    KILN_RETURN_IF_ERROR(ed.Commit());
    summary_ = std::to_string(constants) + " Constant nodes became constants, " +
               std::to_string(computed) + " nodes evaluated";
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> MakeFoldConstantsPass() { return std::make_unique<FoldConstantsPass>(); }

}  // namespace kiln::passes
