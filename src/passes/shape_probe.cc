// ShapeProbe (see shape_probe.h).
#include "passes/shape_probe.h"

#include <map>
#include <memory>
#include <string>

#include "ir/evaluate.h"
#include "ir/op.h"

namespace kiln::passes {
namespace {

constexpr int64_t kMaxEvalElements = 1 << 16;
constexpr int64_t kProbeBase[2] = {64, 160};
constexpr int64_t kProbeStep = 32;

struct ProbeState {
  std::vector<DataType> dtypes;
  std::vector<std::optional<Shape>> shapes;
  std::vector<std::shared_ptr<const Tensor>> values;
};

void RunProbe(const ir::Graph& g, const std::vector<int>& order,
              const std::vector<std::unique_ptr<ir::Op>>& ops, int which, ProbeState* st) {
  const size_t nv = g.values.size();
  st->dtypes.assign(nv, DataType::kUndefined);
  st->shapes.assign(nv, std::nullopt);
  st->values.assign(nv, nullptr);
  for (size_t i = 0; i < nv; ++i) {
    if (!g.values[i].constant) continue;
    st->dtypes[i] = g.values[i].constant->dtype();
    st->shapes[i] = g.values[i].constant->shape();
    st->values[i] = g.values[i].constant;
  }
  std::map<std::string, int64_t> symbols;
  int64_t next = 0;
  for (int id : g.inputs) {
    const ir::Value& v = g.values[id];
    st->dtypes[id] = v.dtype;
    if (!v.shape || v.dtype == DataType::kUndefined) continue;
    Shape s;
    for (const ir::Dim& d : *v.shape) {
      if (d.fixed()) {
        s.push_back(d.value);
        continue;
      }
      int64_t k = d.param.empty() ? next++ : -1;
      if (!d.param.empty()) {
        auto it = symbols.find(d.param);
        k = it != symbols.end() ? it->second : (symbols[d.param] = next++);
      }
      s.push_back(kProbeBase[which] + kProbeStep * k);
    }
    st->shapes[id] = std::move(s);
  }
  for (int ni : order) {
    const ir::Node& node = g.nodes[ni];
    const ir::Op* op = ops[ni].get();
    if (op == nullptr) continue;
    ir::NodeInputs in;
    bool known = true;
    for (int id : node.inputs) {
      if (id < 0) {
        in.AddMissing();
        continue;
      }
      if (!st->shapes[id] || st->dtypes[id] == DataType::kUndefined) {
        known = false;
        break;
      }
      in.Add(st->dtypes[id], *st->shapes[id], st->values[id].get());
    }
    if (!known || ir::NeedsRuntimeValues(node, *op, in)) continue;
    ir::EvalPolicy policy;
    policy.max_input_elements = kMaxEvalElements;
    policy.max_output_elements = kMaxEvalElements;
    ir::NodeEvaluation ev;
    if (!ir::EvaluateNode(node, *op, in, policy, &ev).ok()) continue;
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      const int id = node.outputs[o];
      if (id < 0) continue;
      st->dtypes[id] = ev.dtypes[o];
      st->shapes[id] = ev.shapes[o];
      if (ev.values[o].defined())
        st->values[id] = std::make_shared<const Tensor>(std::move(ev.values[o]));
    }
  }
}

}  // namespace

ShapeProbe ShapeProbe::Run(const ir::Graph& g) {
  ShapeProbe p;
  const size_t nv = g.values.size();
  p.dtypes_.assign(nv, DataType::kUndefined);
  p.probe_[0].assign(nv, std::nullopt);
  p.probe_[1].assign(nv, std::nullopt);
  auto order = g.TopologicalOrder();
  if (!order.ok()) return p;
  std::vector<std::unique_ptr<ir::Op>> ops(g.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& n = g.nodes[i];
    const ir::OpDef* def = ir::OpRegistry::Global().Find(n.domain, n.op_type, n.opset);
    if (def == nullptr) continue;
    auto op = def->create(n);
    if (op.ok()) ops[i] = std::move(op).value();
  }
  ProbeState st[2];
  for (int which = 0; which < 2; ++which) RunProbe(g, *order, ops, which, &st[which]);
  for (size_t i = 0; i < nv; ++i) {
    if (st[0].dtypes[i] == st[1].dtypes[i]) p.dtypes_[i] = st[0].dtypes[i];
    p.probe_[0][i] = std::move(st[0].shapes[i]);
    p.probe_[1][i] = std::move(st[1].shapes[i]);
  }
  return p;
}

DataType ShapeProbe::dtype(int v) const {
  return v >= 0 && static_cast<size_t>(v) < dtypes_.size() ? dtypes_[v] : DataType::kUndefined;
}

std::optional<Shape> ShapeProbe::shape(int v) const {
  if (v < 0 || static_cast<size_t>(v) >= dtypes_.size()) return std::nullopt;
  const auto& a = probe_[0][v];
  const auto& b = probe_[1][v];
  if (!a || !b || a->size() != b->size()) return std::nullopt;
  Shape s(a->size());
  for (size_t i = 0; i < s.size(); ++i) s[i] = (*a)[i] == (*b)[i] ? (*a)[i] : -1;
  return s;
}

std::optional<int64_t> ShapeProbe::rank(int v) const {
  auto s = shape(v);
  if (!s) return std::nullopt;
  return static_cast<int64_t>(s->size());
}

bool ShapeProbe::SameShape(int a, int b) const {
  if (a < 0 || b < 0 || static_cast<size_t>(a) >= dtypes_.size() ||
      static_cast<size_t>(b) >= dtypes_.size())
    return false;
  for (int which = 0; which < 2; ++which) {
    const auto& x = probe_[which][a];
    const auto& y = probe_[which][b];
    if (!x || !y || *x != *y) return false;
  }
  return true;
}

}  // namespace kiln::passes
