// InlineStaticIfs (see inline_if.h).
#include "passes/inline_if.h"

#include <map>
#include <memory>

#include "ir/evaluate.h"
#include "ir/op.h"
#include "passes/graph_edit.h"

namespace kiln::passes {
namespace {

// Inputs under this many elements are evaluated while looking for conditions (shape arithmetic).
constexpr int64_t kMaxEvalElements = int64_t{1} << 16;
constexpr int kMaxRounds = 16;

// The value of every If condition that follows from the inputs' shapes and the constants:
// node index -> cond value.
std::map<int, bool> KnownConditions(const ir::Graph& g, const std::vector<Shape>& input_shapes) {
  const size_t nv = g.values.size();
  std::vector<DataType> dtypes(nv, DataType::kUndefined);
  std::vector<std::optional<Shape>> shapes(nv);
  std::vector<std::shared_ptr<const Tensor>> values(nv);
  for (size_t i = 0; i < nv; ++i)
    if (g.values[i].constant) {
      values[i] = g.values[i].constant;
      dtypes[i] = values[i]->dtype();
      shapes[i] = values[i]->shape();
    }
  for (size_t k = 0; k < g.inputs.size() && k < input_shapes.size(); ++k) {
    dtypes[g.inputs[k]] = g.values[g.inputs[k]].dtype;
    shapes[g.inputs[k]] = input_shapes[k];
  }
  std::map<int, bool> known;
  auto order = g.TopologicalOrder();
  if (!order.ok()) return known;
  for (int ni : *order) {
    const ir::Node& node = g.nodes[ni];
    if (node.domain.empty() && node.op_type == "If") {
      const int c = node.inputs.empty() ? -1 : node.inputs[0];
      if (c >= 0 && values[c] && values[c]->dtype() == DataType::kBool && values[c]->numel() == 1)
        known[ni] = values[c]->data<bool>()[0];
      continue;
    }
    const ir::OpDef* def = ir::OpRegistry::Global().Find(node.domain, node.op_type, node.opset);
    if (def == nullptr) continue;
    auto op = def->create(node);
    if (!op.ok()) continue;
    ir::NodeInputs in;
    bool ready = true;
    for (int id : node.inputs) {
      if (id < 0) {
        in.AddMissing();
        continue;
      }
      if (!shapes[id] || dtypes[id] == DataType::kUndefined) {
        ready = false;
        break;
      }
      in.Add(dtypes[id], *shapes[id], values[id].get());
    }
    if (!ready || ir::NeedsRuntimeValues(node, **op, in)) continue;
    ir::EvalPolicy policy;
    policy.max_input_elements = kMaxEvalElements;
    policy.max_output_elements = kMaxEvalElements;
    ir::NodeEvaluation ev;
    if (!ir::EvaluateNode(node, **op, in, policy, &ev).ok()) continue;
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      const int id = node.outputs[o];
      if (id < 0) continue;
      dtypes[id] = ev.dtypes[o];
      shapes[id] = ev.shapes[o];
      if (ev.values[o].defined()) values[id] = std::make_shared<const Tensor>(ev.values[o]);
    }
  }
  return known;
}

// Replaces If node `ni` by the nodes of `branch`: its captures become the If's implicit inputs,
// its constants and values new values of the graph (named "<if name>/<name>"), and each branch
// output reaches the If's output through an Identity (eliminate_identity removes them).
Status Splice(GraphEditor& ed, int ni, const ir::Graph& branch) {
  const ir::Node n = ed.node(ni);
  const std::string prefix = n.name + "/";
  std::vector<int> map(branch.values.size(), -1);
  const size_t explicit_inputs = n.num_explicit_inputs();
  for (size_t k = 0; k < branch.captures.size(); ++k)
    map[branch.captures[k]] = n.inputs[explicit_inputs + k];
  for (size_t v = 0; v < branch.values.size(); ++v) {
    const ir::Value& bv = branch.values[v];
    if (map[v] >= 0) continue;
    if (bv.constant)
      map[v] = ed.AddConstant(prefix + bv.name, *bv.constant);
    else if (bv.producer >= 0)
      map[v] = ed.AddValue(prefix + bv.name, bv.dtype, bv.shape);
  }
  ed.RemoveNode(ni);
  for (const ir::Node& bn : branch.nodes) {
    ir::Node copy = bn;
    copy.name = prefix + bn.name;
    for (int& id : copy.inputs)
      if (id >= 0) {
        if (map[id] < 0)
          return Internal("inlining " + n.Describe() + ": '" + branch.values[id].name +
                          "' has no value");
        id = map[id];
      }
    for (int& id : copy.outputs)
      if (id >= 0) id = map[id];
    ed.AddNode(std::move(copy));
  }
  for (size_t o = 0; o < n.outputs.size(); ++o) {
    if (n.outputs[o] < 0) continue;
    const int src = map[branch.outputs[o]];
    if (src < 0)
      return Internal("inlining " + n.Describe() + ": branch output " + std::to_string(o) +
                      " has no value");
    ir::Node id;
    id.name = prefix + "output_" + std::to_string(o);
    id.op_type = "Identity";
    id.opset = n.opset;
    id.inputs = {src};
    id.outputs = {n.outputs[o]};
    ed.AddNode(std::move(id));
  }
  return OkStatus();
}

}  // namespace

StatusOr<int> InlineStaticIfs(ir::Graph& graph, const std::vector<Shape>& input_shapes) {
  int inlined = 0;
  for (int round = 0; round < kMaxRounds; ++round) {
    const std::map<int, bool> known = KnownConditions(graph, input_shapes);
    if (known.empty()) break;
    GraphEditor ed(graph);
    for (const auto& [ni, cond] : known) {
      const auto& attrs = ed.node(ni).attrs;
      auto it = attrs.find(cond ? "then_branch" : "else_branch");
      if (it == attrs.end() || !it->second.g) continue;
      const std::shared_ptr<const ir::Graph> branch = it->second.g;  // outlives the node
      if (branch->outputs.size() != ed.node(ni).outputs.size()) continue;
      KILN_RETURN_IF_ERROR(Splice(ed, ni, *branch));
      ++inlined;
    }
    KILN_RETURN_IF_ERROR(ed.Commit());
  }
  return inlined;
}

}  // namespace kiln::passes
