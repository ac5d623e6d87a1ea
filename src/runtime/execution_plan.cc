#include "runtime/execution_plan.h"

namespace kiln::runtime {

StatusOr<std::unique_ptr<Model>> BuildModel(std::unique_ptr<ir::Graph> graph) {
  auto m = std::make_unique<Model>();
  KILN_ASSIGN_OR_RETURN(m->order, graph->TopologicalOrder());
  m->ops.resize(graph->nodes.size());
  for (size_t i = 0; i < graph->nodes.size(); ++i) {
    const ir::Node& node = graph->nodes[i];
    std::string why;
    const ir::OpDef* def =
        ir::OpRegistry::Global().Find(node.domain, node.op_type, node.opset, &why);
    if (def == nullptr) {
      m->unsupported.push_back({node.name, node.op_type, node.domain, node.opset, why});
      continue;
    }
    auto op = def->create(node);
    if (!op.ok()) {
      m->unsupported.push_back(
          {node.name, node.op_type, node.domain, node.opset, op.status().message()});
      continue;
    }
    m->ops[i] = std::move(op).value();
  }
  for (int id : graph->inputs) {
    const ir::Value& v = graph->values[id];
    if (v.dtype != DataType::kUndefined && !IsIoDataType(v.dtype))
      m->unsupported.push_back(
          {"(graph input '" + v.name + "')", "", "", 0,
           std::string("input dtype ") + DataTypeName(v.dtype) + " is not supported"});
  }
  m->graph = std::move(graph);
  return m;
}

Status UnsupportedNodesError(const std::vector<UnsupportedNode>& nodes) {
  std::string s = "the model has " + std::to_string(nodes.size()) + " unsupported node" +
                  (nodes.size() == 1 ? "" : "s") + ":";
  for (const auto& n : nodes) {
    s += "\n  - '" + n.name + "'";
    if (!n.op_type.empty())
      s += " " + n.op_type + " (" + (n.domain.empty() ? "ai.onnx" : n.domain) + " opset " +
           std::to_string(n.opset) + ")";
    s += ": " + n.reason;
  }
  return Unsupported(s);
}

std::string ExecutionPlan::Describe(const Model& model) const {
  const ir::Graph& g = *model.graph;
  std::string s = std::to_string(steps.size()) + " steps, " + std::to_string(folded_nodes) +
                  " nodes folded into constants, " +
                  (dropped_steps ? std::to_string(dropped_steps) + " unread steps dropped, " : "") +
                  std::to_string(conversions) + " layout conversions, " +
                  std::to_string(num_threads) + " threads\n" + "memory plan: one arena of " +
                  std::to_string(arena_bytes) + " bytes (" + std::to_string(scratch_bytes) +
                  " of them scratch), " + std::to_string(in_place) + " outputs written in place\n";
  for (const Step& st : steps) {
    if (st.node < 0) {
      s += "  " + st.kernel_name + "\n";
      continue;
    }
    const ir::Node& n = g.nodes[st.node];
    s += "  " + n.op_type + " '" + n.name + "' -> " + st.kernel_name;
    if (st.dynamic) s += " (shapes at run time)";
    for (int slot : st.out_slots)
      if (slot >= 0 && static_shape[slot]) {
        s += " " + std::string(DataTypeName(dtypes[slot])) + ShapeToString(shapes[slot]);
        if (layouts[slot]) s += "@" + layouts[slot]->name();
      }
    s += "\n";
  }
  return s;
}

PlanSummary ExecutionPlan::Summarize(const Model& model) const {
  const ir::Graph& g = *model.graph;
  PlanSummary p;
  p.folded_nodes = folded_nodes;
  p.layout_conversions = conversions;
  p.arena_bytes = arena_bytes;
  p.scratch_bytes = scratch_bytes;
  p.threads = num_threads;
  for (const Step& st : steps) {
    PlanStep ps;
    ps.kernel = st.kernel_name;
    ps.dynamic = st.dynamic;
    if (st.node < 0) {
      ps.op_type = "LayoutConversion";
    } else {
      const ir::Node& n = g.nodes[st.node];
      ps.node = n.name;
      ps.op_type = (n.domain.empty() ? "" : n.domain + ".") + n.op_type;
    }
    p.steps.push_back(std::move(ps));
  }
  p.text = Describe(model);
  return p;
}

}  // namespace kiln::runtime
