// See half_values.h.
#include "runtime/half_values.h"

#include <algorithm>
#include <cmath>

#include "core/half.h"
#include "passes/graph_edit.h"
#include "passes/shape_probe.h"
#include "runtime/kernel.h"

namespace kiln::runtime {
namespace {

constexpr float kHalfMax = 65504.f;

bool HasSubgraph(const ir::Graph& graph) {
  for (const ir::Node& n : graph.nodes)
    for (const auto& [name, a] : n.attrs)
      if (a.type == ir::Attribute::Type::kGraph) return true;
  return false;
}

// The half inputs of the first (highest-priority) kernel of `backend` for `node` that has any
// and may run under precision fp16.
const std::vector<int>* HalfInputsOf(const ir::Node& node, Backend backend) {
  for (const KernelDef* def : KernelRegistry::Global().Candidates(node, backend))
    if (!def->half_inputs.empty() && RunsUnder(*def, Precision::kFp16)) return &def->half_inputs;
  return nullptr;
}

bool FitsHalf(const Tensor& t) {
  const float* x = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i)
    if (std::isfinite(x[i]) && std::fabs(x[i]) > kHalfMax) return false;
  return true;
}

Tensor ToHalf(const Tensor& t) {
  Tensor out = Tensor::Empty(DataType::kFloat16, t.shape());
  const float* src = t.data<float>();
  auto* dst = static_cast<uint16_t*>(out.raw());
  for (int64_t i = 0; i < t.numel(); ++i) dst[i] = DoubleToHalf(static_cast<double>(src[i]));
  return out;
}

// Values computed from constants alone (the plan folds them on the host's reference kernels,
// which compute float32).
std::vector<char> FromConstants(const ir::Graph& graph, const passes::GraphEditor& ed) {
  std::vector<char> from_constants(graph.values.size(), 0);
  for (size_t v = 0; v < graph.values.size(); ++v)
    from_constants[v] = graph.values[v].constant != nullptr;
  for (int i = 0; i < ed.num_nodes(); ++i) {  // nodes are in topological order
    const ir::Node& n = ed.node(i);
    bool all = true;
    for (int v : n.inputs) all = all && (v < 0 || from_constants[v]);
    for (int v : n.outputs)
      if (v >= 0) from_constants[v] = all;
  }
  return from_constants;
}

struct HalfRewrite {
  std::vector<const std::vector<int>*> half;  // per node: the inputs it reads as float16
  int half_nodes = 0, kept_for_range = 0;
  int half_values = 0, to_half = 0, to_float = 0, constants = 0;
};

// Which nodes run in float16, and through which inputs.
template <typename IsFloat>
void ChooseHalfNodes(const passes::GraphEditor& ed, Backend backend,
                     const std::vector<char>& from_constants, IsFloat is_float, HalfRewrite* r) {
  const int nodes = ed.num_nodes();
  r->half.assign(nodes, nullptr);
  for (int i = 0; i < nodes; ++i) {
    const ir::Node& n = ed.node(i);
    const std::vector<int>* inputs = HalfInputsOf(n, backend);
    if (inputs == nullptr) continue;
    bool ok = true, any_data = false, range_ok = true;
    for (size_t s = 0; s < n.inputs.size(); ++s) {
      const int v = n.inputs[s];
      if (v < 0 || !IsHalfInput(*inputs, s)) continue;
      any_data = true;
      ok = ok && is_float(v);
      if (ok && ed.ConstantOf(v) != nullptr && !FitsHalf(*ed.ConstantOf(v))) range_ok = false;
    }
    for (int v : n.outputs) ok = ok && (v < 0 || (is_float(v) && !from_constants[v]));
    if (!ok || !any_data) continue;
    if (!range_ok) {
      ++r->kept_for_range;
      continue;
    }
    r->half[i] = inputs;
    ++r->half_nodes;
  }
}

// Gives value `id` a float16 twin where its producer writes float16 or a reader takes it: the
// producer writes the twin (with a Cast back for float32 readers and graph outputs), or a Cast
// (a converted copy for constants) makes it for the float16 readers.
void RewriteValue(ir::Graph& graph, passes::GraphEditor& ed, size_t id, HalfRewrite* r) {
  const int nodes = static_cast<int>(r->half.size());
  const int v = static_cast<int>(id);
  auto reads_half = [&](int node, size_t slot) {
    return node < nodes && r->half[node] != nullptr && IsHalfInput(*r->half[node], slot);
  };
  const int producer = ed.Producer(v);
  const bool made_half = producer >= 0 && producer < nodes && r->half[producer] != nullptr;
  // The uses that read float16, by node (a node may read v in several slots).
  std::vector<std::pair<int, size_t>> half_uses, other_uses;
  std::vector<int> readers = ed.Consumers(v);
  std::sort(readers.begin(), readers.end());
  readers.erase(std::unique(readers.begin(), readers.end()), readers.end());
  for (int c : readers) {
    const ir::Node& n = ed.node(c);
    for (size_t s = 0; s < n.inputs.size(); ++s)
      if (n.inputs[s] == v) (reads_half(c, s) ? half_uses : other_uses).push_back({c, s});
  }
  const std::string name = graph.values[id].name;  // AddValue may move graph.values
  if (made_half) {
    const int h = ed.AddValue(name + "_fp16", DataType::kFloat16, graph.values[id].shape);
    const ir::Node& p = ed.node(producer);
    for (size_t s = 0; s < p.outputs.size(); ++s)
      if (p.outputs[s] == v) ed.SetOutput(producer, s, h);
    for (const auto& [c, s] : half_uses) ed.SetInput(c, s, h);
    ++r->half_values;
    if (!other_uses.empty() || ed.IsGraphOutput(v)) {
      ed.AddNode(
          passes::CastNode(graph, ed.UniqueName(name + "_to_float32"), h, v, DataType::kFloat));
      ++r->to_float;
    }
    return;
  }
  if (half_uses.empty()) return;
  int h;
  if (const Tensor* c = ed.ConstantOf(v)) {
    h = ed.AddConstant(name + "_fp16", ToHalf(*c));
    ++r->constants;
  } else {
    h = ed.AddValue(name + "_fp16", DataType::kFloat16, graph.values[id].shape);
    ed.AddNode(
        passes::CastNode(graph, ed.UniqueName(name + "_to_float16"), v, h, DataType::kFloat16));
    ++r->to_half;
  }
  for (const auto& [c, s] : half_uses) ed.SetInput(c, s, h);
}

}  // namespace

Status StoreHalfBetweenKernels(ir::Graph& graph, Backend backend, std::string* what) {
  if (HasSubgraph(graph)) return OkStatus();
  passes::GraphEditor ed(graph);
  const int nodes = ed.num_nodes();
  const size_t values = graph.values.size();
  // Intermediate values carry no dtype until planning: the probe infers them (kUndefined where it
  // cannot, which keeps those nodes float32).
  const passes::ShapeProbe probe = passes::ShapeProbe::Run(graph);
  auto is_float = [&](int v) {
    return v < static_cast<int>(values) &&
           (graph.values[v].dtype == DataType::kFloat || probe.dtype(v) == DataType::kFloat);
  };
  HalfRewrite r;
  ChooseHalfNodes(ed, backend, FromConstants(graph, ed), is_float, &r);
  if (r.half_nodes == 0) return OkStatus();
  for (size_t id = 0; id < values; ++id)
    if (is_float(static_cast<int>(id))) RewriteValue(graph, ed, id, &r);
  KILN_RETURN_IF_ERROR(ed.Commit());
  if (what != nullptr) {
    *what = "float16 between kernels: " + std::to_string(r.half_nodes) + " of " +
            std::to_string(nodes) + " nodes, " + std::to_string(r.half_values) +
            " values float16, " + std::to_string(r.to_half) + " casts to float16, " +
            std::to_string(r.to_float) + " back to float32, " + std::to_string(r.constants) +
            " constants converted";
    if (r.kept_for_range > 0)
      *what += ", " + std::to_string(r.kept_for_range) +
               " nodes kept float32 (a constant beyond float16's range)";
  }
  return OkStatus();
}

}  // namespace kiln::runtime
