// GraphEditor (see graph_edit.h).
#include "passes/graph_edit.h"

#include <algorithm>
#include <memory>

#include "ir/evaluate.h"
#include "ir/op.h"

namespace kiln::passes {

GraphEditor::GraphEditor(ir::Graph& graph) : g_(graph) { Init(); }

void GraphEditor::Init() {
  const size_t nv = g_.values.size();
  consumers_.assign(nv, {});
  dead_.assign(g_.nodes.size(), 0);
  is_output_.assign(nv, 0);
  is_input_.assign(nv, 0);
  for (int id : g_.outputs) is_output_[id] = 1;
  for (int id : g_.inputs) is_input_[id] = 1;
  for (size_t i = 0; i < g_.nodes.size(); ++i)
    for (int v : g_.nodes[i].inputs)
      if (v >= 0) consumers_[v].push_back(static_cast<int>(i));
}

bool GraphEditor::IsGraphOutput(int v) const {
  return v >= 0 && static_cast<size_t>(v) < is_output_.size() && is_output_[v];
}

bool GraphEditor::IsGraphInput(int v) const {
  return v >= 0 && static_cast<size_t>(v) < is_input_.size() && is_input_[v];
}

int GraphEditor::SoleConsumer(int v) const {
  if (v < 0 || IsGraphOutput(v) || consumers_[v].size() != 1) return -1;
  return consumers_[v][0];
}

int GraphEditor::Producer(int v) const {
  if (v < 0) return -1;
  const int p = g_.values[v].producer;
  return p >= 0 && !dead_[p] ? p : -1;
}

const Tensor* GraphEditor::ConstantOf(int v) const {
  return v >= 0 && g_.values[v].constant ? g_.values[v].constant.get() : nullptr;
}

std::optional<double> GraphEditor::ScalarOf(int v) const {
  const Tensor* t = ConstantOf(v);
  if (t == nullptr || t->numel() != 1) return std::nullopt;
  switch (t->dtype()) {
    case DataType::kFloat:
      return static_cast<double>(t->data<float>()[0]);
    case DataType::kDouble:
      return t->data<double>()[0];
    case DataType::kInt32:
      return static_cast<double>(t->data<int32_t>()[0]);
    case DataType::kInt64:
      return static_cast<double>(t->data<int64_t>()[0]);
    default:
      return std::nullopt;
  }
}

void GraphEditor::EraseUse(int v, int node) {
  auto& c = consumers_[v];
  auto it = std::find(c.begin(), c.end(), node);
  if (it != c.end()) c.erase(it);
}

void GraphEditor::SetInput(int node, size_t slot, int v) {
  ir::Node& n = g_.nodes[node];
  if (slot >= n.inputs.size()) n.inputs.resize(slot + 1, -1);
  const int old = n.inputs[slot];
  if (old >= 0) EraseUse(old, node);
  n.inputs[slot] = v;
  if (v >= 0) consumers_[v].push_back(node);
  changed_ = true;
}

void GraphEditor::SetOutput(int node, size_t slot, int v) {
  ir::Node& n = g_.nodes[node];
  if (slot >= n.outputs.size()) n.outputs.resize(slot + 1, -1);
  const int old = n.outputs[slot];
  if (old >= 0 && g_.values[old].producer == node) g_.values[old].producer = -1;
  n.outputs[slot] = v;
  if (v >= 0) g_.values[v].producer = node;
  changed_ = true;
}

void GraphEditor::ReplaceUses(int from, int to) {
  const std::vector<int> users = consumers_[from];
  for (int node : users) {
    ir::Node& n = g_.nodes[node];
    for (size_t s = 0; s < n.inputs.size(); ++s)
      if (n.inputs[s] == from) SetInput(node, s, to);
  }
}

void GraphEditor::RemoveNode(int node) {
  if (dead_[node]) return;
  ir::Node& n = g_.nodes[node];
  for (int v : n.inputs)
    if (v >= 0) EraseUse(v, node);
  for (int v : n.outputs)
    if (v >= 0 && g_.values[v].producer == node) g_.values[v].producer = -1;
  dead_[node] = 1;
  changed_ = true;
}

int GraphEditor::AddNode(ir::Node node) {
  const int idx = static_cast<int>(g_.nodes.size());
  g_.nodes.push_back(std::move(node));
  dead_.push_back(0);
  const ir::Node& n = g_.nodes.back();
  for (int v : n.inputs)
    if (v >= 0) consumers_[v].push_back(idx);
  for (int v : n.outputs)
    if (v >= 0) g_.values[v].producer = idx;
  changed_ = true;
  return idx;
}

void GraphEditor::ReplaceNode(int index, ir::Node node) {
  RemoveNode(index);
  dead_[index] = 0;
  g_.nodes[index] = std::move(node);
  const ir::Node& n = g_.nodes[index];
  for (int v : n.inputs)
    if (v >= 0) consumers_[v].push_back(index);
  for (int v : n.outputs)
    if (v >= 0) g_.values[v].producer = index;
}

std::string GraphEditor::UniqueName(const std::string& base) const {
  if (g_.FindValue(base) < 0) return base;
  for (int i = 1;; ++i) {
    std::string name = base + "_" + std::to_string(i);
    if (g_.FindValue(name) < 0) return name;
  }
}

int GraphEditor::AddConstant(const std::string& base, Tensor t) {
  const int id = g_.GetOrAddValue(UniqueName(base));
  consumers_.emplace_back();
  is_output_.push_back(0);
  is_input_.push_back(0);
  MakeConstant(id, std::move(t));
  return id;
}

int GraphEditor::AddValue(const std::string& base, DataType dtype,
                          std::optional<std::vector<ir::Dim>> shape) {
  const int id = g_.GetOrAddValue(UniqueName(base));
  consumers_.emplace_back();
  is_output_.push_back(0);
  is_input_.push_back(0);
  g_.values[id].dtype = dtype;
  g_.values[id].shape = std::move(shape);
  return id;
}

void GraphEditor::MakeConstant(int v, Tensor t) {
  ir::Value& val = g_.values[v];
  val.dtype = t.dtype();
  std::vector<ir::Dim> dims;
  for (int64_t d : t.shape()) dims.push_back(ir::Dim{d, ""});
  val.shape = std::move(dims);
  val.constant = std::make_shared<const Tensor>(std::move(t));
  val.producer = -1;
  changed_ = true;
}

Status GraphEditor::Commit() {
  if (!changed_) return OkStatus();
  // 1. Live nodes, in their current order.
  std::vector<ir::Node> nodes;
  for (size_t i = 0; i < g_.nodes.size(); ++i)
    if (!dead_[i]) nodes.push_back(std::move(g_.nodes[i]));
  // 2. Values still referenced, renumbered.
  std::vector<int> remap(g_.values.size(), -1);
  std::vector<ir::Value> values;
  auto keep = [&](int v) {
    if (v < 0) return -1;
    if (remap[v] < 0) {
      remap[v] = static_cast<int>(values.size());
      values.push_back(std::move(g_.values[v]));
      values.back().producer = -1;
    }
    return remap[v];
  };
  for (int& v : g_.inputs) v = keep(v);
  for (auto& n : nodes) {
    for (int& v : n.inputs) v = keep(v);
    for (int& v : n.outputs) v = keep(v);
  }
  for (int& v : g_.outputs) v = keep(v);
  g_.values = std::move(values);
  g_.nodes = std::move(nodes);
  KILN_RETURN_IF_ERROR(g_.RebuildIndex());
  // 3. Topological order (stable), then producers.
  auto set_producers = [&]() -> Status {
    for (auto& v : g_.values) v.producer = -1;
    for (size_t i = 0; i < g_.nodes.size(); ++i)
      for (int v : g_.nodes[i].outputs) {
        if (v < 0) continue;
        if (g_.values[v].producer >= 0 || g_.values[v].constant)
          return Internal("graph rewrite left value '" + g_.values[v].name +
                          "' defined twice (by " + g_.nodes[i].Describe() + ")");
        g_.values[v].producer = static_cast<int>(i);
      }
    return OkStatus();
  };
  KILN_RETURN_IF_ERROR(set_producers());
  std::vector<char> is_input(g_.values.size(), 0);
  for (int v : g_.inputs) is_input[v] = 1;
  for (const auto& n : g_.nodes)
    for (int v : n.inputs)
      if (v >= 0 && g_.values[v].producer < 0 && !g_.values[v].constant && !is_input[v])
        return Internal("graph rewrite left " + n.Describe() + " reading '" + g_.values[v].name +
                        "', which nothing produces");
  auto order = g_.TopologicalOrder();
  if (!order.ok())
    return Internal("graph rewrite left the graph inconsistent: " + order.status().message());
  std::vector<ir::Node> sorted;
  sorted.reserve(g_.nodes.size());
  for (int i : *order) sorted.push_back(std::move(g_.nodes[i]));
  g_.nodes = std::move(sorted);
  KILN_RETURN_IF_ERROR(set_producers());
  changed_ = false;
  Init();
  return OkStatus();
}

ir::Node CastNode(const ir::Graph& graph, std::string name, int in, int out, DataType to) {
  ir::Node cast;
  cast.name = std::move(name);
  cast.op_type = "Cast";
  cast.opset = graph.opset_imports.count("") ? graph.opset_imports.at("") : 13;
  cast.inputs = {in};
  cast.outputs = {out};
  cast.attrs["to"] = IntAttr(static_cast<int64_t>(to));
  return cast;
}

ir::Attribute StringAttr(const std::string& s) {
  ir::Attribute a;
  a.type = ir::Attribute::Type::kString;
  a.s = s;
  return a;
}

ir::Attribute FloatAttr(float f) {
  ir::Attribute a;
  a.type = ir::Attribute::Type::kFloat;
  a.f = f;
  return a;
}

ir::Attribute IntAttr(int64_t i) {
  ir::Attribute a;
  a.type = ir::Attribute::Type::kInt;
  a.i = i;
  return a;
}

bool HasOnnxOp(const ir::Graph& graph, std::initializer_list<const char*> op_types) {
  for (const auto& n : graph.nodes)
    for (const char* op : op_types)
      if (IsOnnxOp(n, op)) return true;
  return false;
}

bool ImportKilnDomain(ir::Graph& graph) {
  auto it = graph.opset_imports.find("kiln");
  if (it != graph.opset_imports.end()) return it->second == 1;
  graph.opset_imports["kiln"] = 1;
  return true;
}

// See graph_edit.h.
bool FoldNode(GraphEditor& ed, int node, int64_t max_growth_bytes) {
  const ir::Node& n = ed.node(node);
  const ir::OpDef* def = ir::OpRegistry::Global().Find(n.domain, n.op_type, n.opset);
  if (def == nullptr) return false;
  auto op = def->create(n);
  if (!op.ok()) return false;
  ir::NodeInputs in;
  for (int id : n.inputs) {
    const Tensor* t = ed.ConstantOf(id);
    if (id >= 0 && t == nullptr) return false;
    if (t == nullptr)
      in.AddMissing();
    else
      in.Add(t->dtype(), t->shape(), t);
  }
  ir::EvalPolicy policy;
  policy.max_growth_bytes = max_growth_bytes;
  ir::NodeEvaluation ev;
  if (!ir::EvaluateNode(n, **op, in, policy, &ev).ok() || !ev.all_values) return false;
  const std::vector<int> outputs = n.outputs;
  ed.RemoveNode(node);
  for (size_t o = 0; o < outputs.size(); ++o)
    if (outputs[o] >= 0) ed.MakeConstant(outputs[o], std::move(ev.values[o]));
  return true;
}

// See graph_edit.h.
std::optional<Tensor> RowBiasOf(const GraphEditor& ed, int v, int64_t n, int64_t out_rank) {
  const Tensor* t = ed.ConstantOf(v);
  if (t == nullptr || t->dtype() != DataType::kFloat || t->rank() > out_rank) return std::nullopt;
  const Shape& s = t->shape();
  for (size_t i = 0; i + 1 < s.size(); ++i)
    if (s[i] != 1) return std::nullopt;
  const int64_t last = s.empty() ? 1 : s.back();
  if (last != n && last != 1) return std::nullopt;
  Tensor b = Tensor::Empty(DataType::kFloat, {n});
  for (int64_t j = 0; j < n; ++j) b.data<float>()[j] = t->data<float>()[last == 1 ? 0 : j];
  return b;
}

}  // namespace kiln::passes
