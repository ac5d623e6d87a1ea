// The body interpreter and the control-flow base (control_flow.h). The interpreter walks the body
// in topological order; each node's output shapes are inferred from the concrete inputs and its
// reference kernel runs (ir::EvaluateNode), nested control flow included. A value is released
// after its last reader.
#include <cstdlib>

#include "ir/evaluate.h"
#include "ops/control/control_flow.h"

namespace kiln::ops {

int64_t LoopMaxIterations() {
  // Read at each Loop execution (not per iteration), so a test or a service can change it.
  const char* v = std::getenv("KILN_LOOP_MAX_ITERATIONS");
  if (v == nullptr) return kDefaultLoopMaxIterations;
  char* end = nullptr;
  const long long n = std::strtoll(v, &end, 10);
  return end != v && *end == '\0' && n > 0 ? static_cast<int64_t>(n) : kDefaultLoopMaxIterations;
}

StatusOr<std::unique_ptr<Interpreter>> Interpreter::Create(std::shared_ptr<const ir::Graph> graph,
                                                           const std::string& what) {
  auto in = std::unique_ptr<Interpreter>(new Interpreter());
  auto order = graph->TopologicalOrder();
  if (!order.ok()) return Status(order.status()).AddContext("in " + what);
  in->order_ = std::move(order).value();
  in->ops_.resize(graph->nodes.size());
  std::string unsupported;
  int missing = 0;
  for (size_t i = 0; i < graph->nodes.size(); ++i) {
    const ir::Node& node = graph->nodes[i];
    std::string why;
    const ir::OpDef* def =
        ir::OpRegistry::Global().Find(node.domain, node.op_type, node.opset, &why);
    if (def != nullptr) {
      auto op = def->create(node);
      if (op.ok()) {
        in->ops_[i] = std::move(op).value();
        continue;
      }
      why = op.status().message();
    }
    ++missing;
    unsupported += "\n    - '" + node.name + "' " + node.op_type + " (" +
                   (node.domain.empty() ? "ai.onnx" : node.domain) + " opset " +
                   std::to_string(node.opset) + "): " + why;
  }
  if (missing > 0)
    return Unsupported(what + " has " + std::to_string(missing) + " unsupported node" +
                       (missing == 1 ? "" : "s") + ":" + unsupported);
  in->last_use_.assign(graph->values.size(), -1);
  for (size_t k = 0; k < in->order_.size(); ++k)
    for (int id : graph->nodes[in->order_[k]].inputs)
      if (id >= 0) in->last_use_[id] = static_cast<int>(k);
  for (int id : graph->outputs) in->last_use_[id] = static_cast<int>(in->order_.size());
  in->graph_ = std::move(graph);
  return in;
}

Status Interpreter::Run(const std::vector<const Tensor*>& inputs,
                        std::vector<Tensor>* outputs) const {
  const ir::Graph& g = *graph_;
  if (inputs.size() != g.inputs.size() + g.captures.size())
    return Internal("a body of " + std::to_string(g.inputs.size()) + " inputs and " +
                    std::to_string(g.captures.size()) + " captured values was given " +
                    std::to_string(inputs.size()) + " tensors");
  std::vector<const Tensor*> val(g.values.size(), nullptr);
  std::vector<Tensor> owned(g.values.size());
  for (size_t i = 0; i < g.values.size(); ++i)
    if (g.values[i].constant) val[i] = g.values[i].constant.get();
  for (size_t k = 0; k < g.inputs.size(); ++k) val[g.inputs[k]] = inputs[k];
  for (size_t k = 0; k < g.captures.size(); ++k) val[g.captures[k]] = inputs[g.inputs.size() + k];
  ir::NodeInputs in;
  for (size_t k = 0; k < order_.size(); ++k) {
    const ir::Node& node = g.nodes[order_[k]];
    in.Clear();
    for (int id : node.inputs) {
      if (id < 0) {
        in.AddMissing();
        continue;
      }
      if (val[id] == nullptr || !val[id]->defined())
        return InvalidArgument(node.Describe() + " reads '" + g.values[id].name +
                               "', which has no value in this run of the body");
      in.Add(val[id]->dtype(), val[id]->shape(), val[id]);
    }
    ir::NodeEvaluation ev;
    KILN_RETURN_IF_ERROR(ir::EvaluateNode(node, *ops_[order_[k]], in,
                                          ir::EvalPolicy{.run_nondeterministic = true}, &ev));
    if (!ev.all_values) return Internal(node.Describe() + " computed no value in a body");
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      const int id = node.outputs[o];
      if (id < 0) continue;
      owned[id] = std::move(ev.values[o]);
      val[id] = &owned[id];
    }
    for (int id : node.inputs)
      if (id >= 0 && last_use_[id] == static_cast<int>(k) && owned[id].defined()) {
        owned[id] = Tensor();
        val[id] = nullptr;
      }
  }
  outputs->clear();
  for (int id : g.outputs) {
    if (val[id] == nullptr)
      return InvalidArgument("body output '" + g.values[id].name + "' has no value");
    // The body's own results move out; inputs, captures and constants are copied (the caller
    // may keep the result past the storage they live in).
    outputs->push_back(owned[id].defined() && val[id] == &owned[id] ? owned[id] : val[id]->Clone());
  }
  return OkStatus();
}

ControlFlowOp::ControlFlowOp(const ir::Node& node)
    : ir::Op(node), explicit_inputs_(node.num_explicit_inputs()) {}

Status ControlFlowOp::AddBody(const ir::Node& node, const std::string& attr, size_t formal_inputs,
                              size_t min_outputs) {
  auto it = node.attrs.find(attr);
  if (it == node.attrs.end() || it->second.type != ir::Attribute::Type::kGraph || !it->second.g)
    return ir::AttrError(node, "the graph attribute `" + attr + "` is required; got none");
  std::shared_ptr<const ir::Graph> g = it->second.g;
  if (g->inputs.size() != formal_inputs)
    return ir::AttrError(node, "`" + attr + "` must have " + std::to_string(formal_inputs) +
                                   " inputs; got " + std::to_string(g->inputs.size()));
  if (g->outputs.size() < min_outputs)
    return ir::AttrError(node, "`" + attr + "` must have at least " + std::to_string(min_outputs) +
                                   " outputs; got " + std::to_string(g->outputs.size()));
  if (g->captures.size() != static_cast<size_t>(node.implicit_inputs))
    return ir::AttrError(node, "`" + attr + "` captures " + std::to_string(g->captures.size()) +
                                   " outer values, the node binds " +
                                   std::to_string(node.implicit_inputs));
  auto interp = Interpreter::Create(g, "`" + attr + "` of " + node.Describe());
  if (!interp.ok()) return interp.status();
  bodies_.push_back({attr, std::move(g)});
  interpreters_.push_back(std::move(interp).value());
  return OkStatus();
}

Status ControlFlowOp::Infer(ir::InferContext& ctx) const {
  return ctx.Error("its output shapes are known only by running its subgraph");
}

Status ControlFlowOp::Compute(const ir::ComputeContext& ctx) const {
  std::vector<const BodyRunner*> runners;
  for (const auto& i : interpreters_) runners.push_back(i.get());
  return Execute(ctx, runners);
}

std::vector<const Tensor*> ControlFlowOp::Captures(const ir::ComputeContext& ctx) const {
  return std::vector<const Tensor*>(ctx.inputs.begin() + static_cast<ptrdiff_t>(explicit_inputs_),
                                    ctx.inputs.end());
}

}  // namespace kiln::ops
