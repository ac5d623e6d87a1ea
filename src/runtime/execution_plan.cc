#include "runtime/execution_plan.h"

#include <algorithm>
#include <map>

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
    if (v.dtype != DataType::kUndefined && !IsSupportedDataType(v.dtype))
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

namespace {

std::vector<TensorInfo> InfosOf(const ir::Node& node, const ExecutionPlan& p) {
  std::vector<TensorInfo> v;
  for (int id : node.inputs)
    v.push_back(id < 0 ? TensorInfo{} : TensorInfo{p.dtypes[id], p.shapes[id]});
  return v;
}

}  // namespace

StatusOr<std::unique_ptr<ExecutionPlan>> ExecutionPlan::Create(const Model& model,
                                                               const std::vector<Tensor>& inputs,
                                                               const SessionOptions& options) {
  const ir::Graph& g = *model.graph;
  auto plan = std::make_unique<ExecutionPlan>();
  ExecutionPlan& p = *plan;
  const size_t nv = g.values.size();
  p.dtypes.assign(nv, DataType::kUndefined);
  p.shapes.assign(nv, Shape{});
  p.static_shape.assign(nv, false);
  p.constants.assign(nv, nullptr);
  p.last_use.assign(nv, -1);
  for (size_t i = 0; i < nv; ++i) {
    if (g.values[i].constant) {
      p.constants[i] = g.values[i].constant;
      p.dtypes[i] = g.values[i].constant->dtype();
      p.shapes[i] = g.values[i].constant->shape();
      p.static_shape[i] = true;
    }
  }
  for (size_t k = 0; k < g.inputs.size(); ++k) {
    int id = g.inputs[k];
    p.dtypes[id] = inputs[k].dtype();
    p.shapes[id] = inputs[k].shape();
    p.static_shape[id] = true;
  }

  for (int ni : model.order) {
    const ir::Node& node = g.nodes[ni];
    const ir::Op& op = *model.ops[ni];
    bool known_shapes = true, all_const = true;
    std::vector<DataType> dts;
    std::vector<Shape> shs;
    std::vector<const Tensor*> vals;
    for (int id : node.inputs) {
      if (id < 0) {
        dts.push_back(DataType::kUndefined);
        shs.emplace_back();
        vals.push_back(nullptr);
        continue;
      }
      known_shapes = known_shapes && p.static_shape[id];
      all_const = all_const && p.constants[id] != nullptr;
      dts.push_back(p.dtypes[id]);
      shs.push_back(p.shapes[id]);
      vals.push_back(p.constants[id].get());
    }
    bool dynamic = !known_shapes;
    if (!dynamic)
      for (int si : op.ShapeInputs())
        if (node.HasInput(si) && vals[si] == nullptr) dynamic = true;

    if (!dynamic) {
      ir::InferContext ctx(node, dts, shs, vals);
      KILN_RETURN_IF_ERROR(op.Infer(ctx));
      bool values_given = !node.outputs.empty();
      for (size_t o = 0; o < node.outputs.size(); ++o) {
        int id = node.outputs[o];
        if (id < 0) continue;
        p.dtypes[id] = ctx.out_dtypes()[o];
        p.shapes[id] = ctx.out_shapes()[o];
        p.static_shape[id] = true;
        if (ctx.out_values()[o].defined())
          p.constants[id] = std::make_shared<const Tensor>(ctx.out_values()[o]);
        else
          values_given = false;
      }
      if (values_given) {
        ++p.folded_nodes;
        continue;
      }
      if (all_const) {  // constant folding: evaluate once with the reference kernel
        ir::ComputeContext cc;
        cc.inputs = vals;
        std::vector<Tensor> outs(node.outputs.size());
        for (size_t o = 0; o < node.outputs.size(); ++o) {
          int id = node.outputs[o];
          if (id < 0) {
            cc.outputs.push_back(nullptr);
            continue;
          }
          outs[o] = Tensor::Empty(p.dtypes[id], p.shapes[id]);
          cc.outputs.push_back(&outs[o]);
        }
        Status s = op.Compute(cc);
        if (!s.ok()) return s.AddContext("while folding constants");
        for (size_t o = 0; o < node.outputs.size(); ++o)
          if (node.outputs[o] >= 0)
            p.constants[node.outputs[o]] = std::make_shared<const Tensor>(std::move(outs[o]));
        ++p.folded_nodes;
        continue;
      }
    }

    Step step;
    step.node = ni;
    step.dynamic = dynamic;
    auto infos = InfosOf(node, p);
    SelectedKernel sel = SelectKernel(node, op, infos, options.backend, options.reference_only);
    step.kernel = std::move(sel.kernel);
    step.kernel_name = std::move(sel.name);
    if (!dynamic) {
      std::vector<TensorInfo> outs;
      for (int id : node.outputs)
        outs.push_back(id < 0 ? TensorInfo{} : TensorInfo{p.dtypes[id], p.shapes[id]});
      Status s = step.kernel->Prepare(infos, outs);
      if (!s.ok()) return s.AddContext("while preparing " + node.Describe());
    }
    for (int id : node.inputs)
      if (id >= 0) p.last_use[id] = static_cast<int>(p.steps.size());
    p.steps.push_back(std::move(step));
  }
  for (int id : g.outputs) p.last_use[id] = static_cast<int>(p.steps.size());
  return plan;
}

Status ExecutionPlan::Execute(const Model& model, const std::vector<Tensor>& inputs,
                              std::vector<Tensor>* outputs) const {
  const ir::Graph& g = *model.graph;
  std::vector<Tensor> env(g.values.size());
  for (size_t k = 0; k < g.inputs.size(); ++k) env[g.inputs[k]] = inputs[k];
  auto get = [&](int id) -> const Tensor* {
    if (id < 0) return nullptr;
    if (constants[id]) return constants[id].get();
    return env[id].defined() ? &env[id] : nullptr;
  };
  for (size_t si = 0; si < steps.size(); ++si) {
    const Step& step = steps[si];
    const ir::Node& node = g.nodes[step.node];
    ir::ComputeContext cc;
    for (int id : node.inputs) {
      const Tensor* t = get(id);
      if (id >= 0 && t == nullptr)
        return Internal("value '" + g.values[id].name + "' missing when running " +
                        node.Describe());
      cc.inputs.push_back(t);
    }
    std::vector<DataType> odt(node.outputs.size());
    std::vector<Shape> osh(node.outputs.size());
    if (step.dynamic) {
      std::vector<DataType> dts;
      std::vector<Shape> shs;
      for (const Tensor* t : cc.inputs) {
        dts.push_back(t ? t->dtype() : DataType::kUndefined);
        shs.push_back(t ? t->shape() : Shape{});
      }
      ir::InferContext ctx(node, dts, shs, cc.inputs);
      KILN_RETURN_IF_ERROR(model.ops[step.node]->Infer(ctx));
      odt = ctx.out_dtypes();
      osh = ctx.out_shapes();
    } else {
      for (size_t o = 0; o < node.outputs.size(); ++o)
        if (node.outputs[o] >= 0) {
          odt[o] = dtypes[node.outputs[o]];
          osh[o] = shapes[node.outputs[o]];
        }
    }
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      int id = node.outputs[o];
      if (id < 0) {
        cc.outputs.push_back(nullptr);
        continue;
      }
      env[id] = Tensor::Empty(odt[o], osh[o]);
      cc.outputs.push_back(&env[id]);
    }
    Status s = step.kernel->Run(cc);
    if (!s.ok())
      return s.AddContext("while running " + node.Describe() + " with " + step.kernel_name);
    for (int id : node.inputs)
      if (id >= 0 && last_use[id] == static_cast<int>(si) && !constants[id]) env[id] = Tensor();
  }
  outputs->clear();
  for (int id : g.outputs) {
    const Tensor* t = get(id);
    if (t == nullptr) return Internal("graph output '" + g.values[id].name + "' was not computed");
    outputs->push_back(t->Clone());
  }
  return OkStatus();
}

std::string ExecutionPlan::Describe(const Model& model) const {
  const ir::Graph& g = *model.graph;
  std::string s = std::to_string(steps.size()) + " steps, " + std::to_string(folded_nodes) +
                  " nodes folded into constants\n";
  for (const Step& st : steps) {
    const ir::Node& n = g.nodes[st.node];
    s += "  " + n.op_type + " '" + n.name + "' -> " + st.kernel_name;
    if (st.dynamic) s += " (shapes at run time)";
    for (int id : n.outputs)
      if (id >= 0 && static_shape[id])
        s += " " + std::string(DataTypeName(dtypes[id])) + ShapeToString(shapes[id]);
    s += "\n";
  }
  return s;
}

}  // namespace kiln::runtime
