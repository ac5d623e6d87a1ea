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
// A DequantizeLinear of int8 weights read only by Conv nodes whose input is itself dequantized is
// left alone (Conv or FusedConv): fuse_qdq_conv turns such a pair into an int8 convolution and
// needs the int8 weights and their scales, which folding would turn into float32.
#include <memory>

#include "ir/evaluate.h"
#include "ir/op.h"
#include "passes/graph_edit.h"
#include "passes/pass.h"

namespace kiln::passes {
namespace {

constexpr int64_t kMaxGrowthBytes = int64_t{16} << 20;

// The node's output values, or nullopt when it cannot (or should not) be folded.
std::optional<std::vector<Tensor>> Evaluate(const GraphEditor& ed, const ir::Node& node) {
  const ir::OpDef* def = ir::OpRegistry::Global().Find(node.domain, node.op_type, node.opset);
  if (def == nullptr) return std::nullopt;
  auto op = def->create(node);
  if (!op.ok()) return std::nullopt;
  ir::NodeInputs in;
  for (int id : node.inputs) {
    const Tensor* t = ed.ConstantOf(id);
    if (t == nullptr)
      in.AddMissing();
    else
      in.Add(t->dtype(), t->shape(), t);
  }
  ir::EvalPolicy policy;
  policy.max_growth_bytes = kMaxGrowthBytes;
  ir::NodeEvaluation ev;
  if (!ir::EvaluateNode(node, **op, in, policy, &ev).ok() || !ev.all_values) return std::nullopt;
  return std::move(ev.values);
}

// QDQ weights that fuse_qdq_conv will take (see the file comment).
bool KeptForQConv(const GraphEditor& ed, const ir::Node& node) {
  if (!IsOnnxOp(node, "DequantizeLinear") || node.outputs.size() != 1 || node.outputs[0] < 0)
    return false;
  const std::vector<int>& users = ed.Consumers(node.outputs[0]);
  if (users.empty() || ed.IsGraphOutput(node.outputs[0])) return false;
  for (int u : users) {
    const ir::Node& c = ed.node(u);
    if (!(IsOnnxOp(c, "Conv") || IsKilnOp(c, "FusedConv")) || c.inputs.size() < 2 ||
        c.inputs[1] != node.outputs[0] || c.inputs[0] == node.outputs[0])
      return false;
    const int p = ed.Producer(c.inputs[0]);
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
      if (!all_const || !any_output || KeptForQConv(ed, node)) continue;
      auto outs = Evaluate(ed, node);
      if (!outs) continue;
      const std::vector<int> outputs = node.outputs;
      const bool is_constant_node = IsOnnxOp(node, "Constant");
      ed.RemoveNode(ni);
      for (size_t o = 0; o < outputs.size(); ++o)
        if (outputs[o] >= 0) ed.MakeConstant(outputs[o], std::move((*outs)[o]));
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
