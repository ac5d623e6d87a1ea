// See qdq_graph.h.
#include "quant/qdq_graph.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <set>

#include "core/fresh_names.h"

namespace kiln::quant {
namespace {

bool IsOnnx(const ir::Node& n, const char* op) { return n.domain.empty() && n.op_type == op; }

// Restores the graph's invariants after a rewrite that built `g->nodes` in order: values nothing
// references any more are dropped (releasing replaced weights), producers are recomputed and the
// name index rebuilt.
Status Compact(ir::Graph* g) {
  std::vector<int> remap(g->values.size(), -1);
  std::vector<ir::Value> values;
  auto keep = [&](int& v) {
    if (v < 0) return;
    if (remap[v] < 0) {
      remap[v] = static_cast<int>(values.size());
      values.push_back(std::move(g->values[v]));
      values.back().producer = -1;
    }
    v = remap[v];
  };
  for (int& v : g->inputs) keep(v);
  for (auto& n : g->nodes) {
    for (int& v : n.inputs) keep(v);
    for (int& v : n.outputs) keep(v);
  }
  for (int& v : g->outputs) keep(v);
  g->values = std::move(values);
  for (size_t i = 0; i < g->nodes.size(); ++i)
    for (int v : g->nodes[i].outputs) {
      if (v < 0) continue;
      if (g->values[v].producer >= 0 || g->values[v].constant)
        return Internal("the QDQ rewrite defined value '" + g->values[v].name + "' twice");
      g->values[v].producer = static_cast<int>(i);
    }
  return g->RebuildIndex();
}

// Who reads each value: (node, input slot), every input (implicit ones too).
std::vector<std::vector<std::pair<int, int>>> Readers(const ir::Graph& g) {
  std::vector<std::vector<std::pair<int, int>>> r(g.values.size());
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (size_t k = 0; k < g.nodes[i].inputs.size(); ++k)
      if (g.nodes[i].inputs[k] >= 0)
        r[g.nodes[i].inputs[k]].push_back({static_cast<int>(i), static_cast<int>(k)});
  return r;
}

bool IsConstant(const ir::Graph& g, int v) {
  return v >= 0 && g.values[v].constant != nullptr && g.values[v].producer < 0;
}

Tensor ScalarOrVector(DataType dtype, const std::vector<int64_t>& dims, const void* data,
                      size_t bytes) {
  Tensor t = Tensor::Empty(dtype, Shape(dims.begin(), dims.end()));
  if (bytes > 0) std::memcpy(t.raw(), data, bytes);
  return t;
}

}  // namespace

Status HoistConstants(ir::Graph* g) {
  std::vector<ir::Node> kept;
  bool hoisted = false;
  for (ir::Node& n : g->nodes) {
    auto v = n.attrs.find("value");
    const bool is_value_constant = IsOnnx(n, "Constant") && n.outputs.size() == 1 &&
                                   n.outputs[0] >= 0 && n.attrs.size() == 1 && v != n.attrs.end() &&
                                   v->second.type == ir::Attribute::Type::kTensor;
    if (!is_value_constant) {
      kept.push_back(std::move(n));
      continue;
    }
    ir::Value& out = g->values[n.outputs[0]];
    out.dtype = v->second.t.dtype();
    std::vector<ir::Dim> dims;
    for (int64_t d : v->second.t.shape()) dims.push_back(ir::Dim{d, ""});
    out.shape = std::move(dims);
    out.constant = std::make_shared<const Tensor>(std::move(v->second.t));
    out.producer = -1;
    hoisted = true;
  }
  g->nodes = std::move(kept);
  return hoisted ? Compact(g) : OkStatus();
}

QdqModelInfo InspectForQdq(const ir::Graph& g) {
  QdqModelInfo info;
  auto op = g.opset_imports.find("");
  if (op != g.opset_imports.end()) info.opset = op->second;
  const auto& nodes = g.nodes;
  const auto& values = g.values;
  std::set<int> graph_outputs(g.outputs.begin(), g.outputs.end());
  auto name = [&](int v) { return v >= 0 ? values[v].name : std::string(); };
  // A subgraph (If, Loop, Scan) may read a Concat's output by name: no Concat's readers are then
  // known for certain, so none is listed.
  bool subgraphs = false;
  for (const auto& n : nodes)
    for (const auto& [an, a] : n.attrs)
      subgraphs = subgraphs || a.type == ir::Attribute::Type::kGraph;
  const auto tensor_readers = Readers(g);
  // Conv output, or the output of the activation that alone reads it -> the Conv.
  std::map<int, std::string> conv_of;
  std::map<std::string, std::string> activated_of;  // Conv -> its activation's output
  // Listed node or residual Add output -> the node writing it.
  std::map<int, std::string> source_of;
  auto sole_reader = [&](int t) -> int {
    if (t < 0 || tensor_readers[t].size() != 1 || graph_outputs.count(t)) return -1;
    return tensor_readers[t][0].first;
  };
  // Shape and Size read only the shape, which quantization keeps: they are not listed (PyTorch's
  // exports compute ShuffleNet's channel-shuffle Reshape targets from Shape of the Concat).
  auto reader_list = [&](int t, std::vector<std::pair<std::string, int>>* out) {
    if (t < 0) return;
    for (auto [ri, k] : tensor_readers[t])
      if (!IsOnnx(nodes[ri], "Shape") && !IsOnnx(nodes[ri], "Size"))
        out->emplace_back(nodes[ri].name, k);
  };
  // Residual Adds: two computed inputs; the sum carried on by the Add's output or by the Relu
  // that alone reads it.
  for (size_t i = 0; i < nodes.size() && !subgraphs; ++i) {
    const ir::Node& n = nodes[i];
    if (!IsOnnx(n, "Add") || n.inputs.size() != 2 || n.outputs.size() != 1 || n.outputs[0] < 0)
      continue;
    bool computed = true;
    for (int in : n.inputs) computed = computed && in >= 0 && !IsConstant(g, in);
    if (!computed) continue;
    QdqAdd a;
    a.node = n.name;
    a.inputs = {name(n.inputs[0]), name(n.inputs[1])};
    int result = n.outputs[0];
    a.graph_output = graph_outputs.count(result) > 0;
    const auto& r = tensor_readers[result];
    if (r.size() == 1 && IsOnnx(nodes[r[0].first], "Relu") && !nodes[r[0].first].outputs.empty() &&
        nodes[r[0].first].outputs[0] >= 0) {
      result = nodes[r[0].first].outputs[0];
      a.graph_output = a.graph_output || graph_outputs.count(result) > 0;
    }
    a.result = name(result);
    source_of[result] = a.node;
    for (auto [ri, k] : tensor_readers[result]) a.result_readers.push_back(nodes[ri].name);
    info.adds.push_back(std::move(a));
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    const ir::Node& n = nodes[i];
    const std::string& op = n.op_type;
    if (!n.domain.empty()) continue;
    if (op == "Conv" && n.outputs.size() == 1 && n.outputs[0] >= 0) {
      const int y = n.outputs[0];
      conv_of[y] = n.name;
      // The activation that alone reads Y (SiLU: Y read by Sigmoid and Mul only, the Sigmoid's
      // output by that Mul only).
      const int r = sole_reader(y);
      static const char* kUnary[] = {"Relu",        "Clip",    "LeakyRelu", "HardSwish",
                                     "HardSigmoid", "Sigmoid", "Tanh"};
      if (r >= 0 && nodes[r].outputs.size() == 1 && nodes[r].outputs[0] >= 0 &&
          std::any_of(std::begin(kUnary), std::end(kUnary),
                      [&](const char* a) { return IsOnnx(nodes[r], a); }))
        conv_of[nodes[r].outputs[0]] = n.name, activated_of[n.name] = name(nodes[r].outputs[0]);
      const auto& yr = tensor_readers[y];
      if (yr.size() == 2 && !graph_outputs.count(y)) {
        int sig = -1, mul = -1;
        for (auto [ri, k] : yr) {
          if (IsOnnx(nodes[ri], "Sigmoid")) sig = ri;
          if (IsOnnx(nodes[ri], "Mul") && nodes[ri].inputs.size() == 2) mul = ri;
        }
        if (sig >= 0 && mul >= 0 && nodes[sig].outputs.size() == 1 &&
            nodes[mul].outputs.size() == 1 && nodes[sig].outputs[0] >= 0 &&
            nodes[mul].outputs[0] >= 0 && sole_reader(nodes[sig].outputs[0]) == mul)
          conv_of[nodes[mul].outputs[0]] = n.name,
          activated_of[n.name] = name(nodes[mul].outputs[0]);
      }
    }
    const bool listed = op == "Concat" ||
                        std::any_of(std::begin(kPassThroughOps), std::end(kPassThroughOps),
                                    [&](const char* p) { return op == p; }) ||
                        IsAveragingOp(op);
    // MaxPool without its indices output; Resize/Upsample only in mode nearest, not cropping
    // (tf_crop_and_resize writes the extrapolation value outside the crop).
    bool exact = listed && n.outputs.size() >= 1 && n.num_explicit_inputs() >= 1 &&
                 n.inputs[0] >= 0 && n.outputs[0] >= 0;
    if (op == "MaxPool") exact = exact && n.outputs.size() == 1;
    if (op == "Split")
      exact =
          exact && std::none_of(n.outputs.begin(), n.outputs.end(), [](int o) { return o < 0; });
    if (op != "Split") exact = exact && n.outputs.size() == 1;
    if (op == "Resize" || op == "Upsample")
      for (const auto& [an, a] : n.attrs)
        exact = exact && !(an == "mode" && a.s != "nearest") &&
                !(an == "coordinate_transformation_mode" && a.s == "tf_crop_and_resize");
    if (exact && !subgraphs) {
      QdqConcat c;
      c.op_type = op;
      c.node = n.name;
      c.output = name(n.outputs[0]);
      for (int o : n.outputs) c.outputs.push_back(name(o));
      const size_t data = op == "Concat" ? n.num_explicit_inputs() : 1;
      for (size_t k = 0; k < data; ++k) {
        const int in = n.inputs[k];
        c.inputs.push_back(name(in));
        c.constant_input = c.constant_input || in < 0 || IsConstant(g, in);
        c.input_graph_output = c.input_graph_output || graph_outputs.count(in) > 0;
        auto cv = conv_of.find(in);
        auto src = source_of.find(in);
        c.sources.push_back(cv != conv_of.end()      ? cv->second
                            : src != source_of.end() ? src->second
                                                     : std::string());
        reader_list(in, &c.input_readers);
      }
      for (int o : n.outputs) {
        c.graph_output = c.graph_output || graph_outputs.count(o) > 0;
        reader_list(o, &c.readers);
        source_of[o] = c.node;
      }
      info.concats.push_back(std::move(c));
      continue;
    }
    if (op != "Conv" && op != "Gemm" && op != "MatMul") continue;
    if (n.num_explicit_inputs() < 2 || n.inputs[0] < 0 || n.inputs[1] < 0) continue;
    QdqCandidate c;
    c.node = n.name;
    c.op_type = op;
    c.index = static_cast<int>(i);
    c.activation = name(n.inputs[0]);
    c.output = !n.outputs.empty() ? name(n.outputs[0]) : "";
    auto act = activated_of.find(c.node);
    if (act != activated_of.end()) c.activated = act->second;
    c.weight = name(n.inputs[1]);
    const int w = n.inputs[1];
    if (IsConstant(g, n.inputs[0])) {
      c.reason = "its input 0 is a constant";
    } else if (!IsConstant(g, w)) {
      c.reason = "its weight '" + c.weight + "' is not an initializer";
    } else if (values[w].constant->dtype() != DataType::kFloat) {
      c.reason = "its weight is not float32";
    } else {
      const Shape& ws = values[w].constant->shape();
      const int rank = static_cast<int>(ws.size());
      if (op == "Conv") {
        c.weight_axis = 0;
        if (rank < 3) c.reason = "its weight has rank " + std::to_string(rank);
        const int64_t group = n.GetInt("group", 1);
        c.depthwise = rank >= 3 && group > 1 && ws[0] == group && ws[1] == 1;
      } else if (op == "Gemm") {
        c.weight_axis = n.GetInt("transB", 0) != 0 ? 0 : 1;
        if (rank != 2) c.reason = "its weight has rank " + std::to_string(rank);
      } else {
        c.weight_axis = 1;
        if (rank != 2) c.reason = "its weight has rank " + std::to_string(rank) + ", not 2";
      }
    }
    info.candidates.push_back(std::move(c));
  }
  if (subgraphs) return info;
  // Input and output layers: walk from the graph's inputs (forward) and outputs (backward)
  // through every node that is not a quantizable candidate.
  std::map<int, size_t> candidate_at;  // node index -> candidate
  for (size_t ci = 0; ci < info.candidates.size(); ++ci)
    if (info.candidates[ci].reason.empty()) candidate_at[info.candidates[ci].index] = ci;
  std::vector<int> work(g.outputs.begin(), g.outputs.end());
  std::set<int> seen;
  while (!work.empty()) {
    const int t = work.back();
    work.pop_back();
    if (t < 0 || !seen.insert(t).second || values[t].producer < 0) continue;
    const int p = values[t].producer;
    auto c = candidate_at.find(p);
    if (c != candidate_at.end()) {
      info.candidates[c->second].output_layer = true;
      continue;
    }
    for (int in : nodes[p].inputs) work.push_back(in);
  }
  seen.clear();
  work.assign(g.inputs.begin(), g.inputs.end());
  while (!work.empty()) {
    const int t = work.back();
    work.pop_back();
    if (t < 0 || !seen.insert(t).second) continue;
    for (auto [ri, k] : tensor_readers[t]) {
      auto c = candidate_at.find(ri);
      if (c != candidate_at.end()) {
        if (k == 0) info.candidates[c->second].input_layer = true;
        continue;
      }
      for (int o : nodes[ri].outputs) work.push_back(o);
    }
  }
  return info;
}

Status AddOutputs(ir::Graph* g, const std::vector<std::string>& names) {
  std::set<int> have(g->outputs.begin(), g->outputs.end());
  for (const auto& n : names) {
    const int id = g->FindValue(n);
    if (id < 0) return InvalidArgument("the model has no tensor '" + n + "'");
    if (have.insert(id).second) g->outputs.push_back(id);
  }
  return OkStatus();
}

Status AddIsolatedCopies(ir::Graph* g, const std::vector<std::string>& nodes,
                         const std::string& suffix) {
  const std::set<std::string> wanted(nodes.begin(), nodes.end());
  std::vector<int> outputs;
  const size_t count = g->nodes.size();
  for (size_t i = 0; i < count; ++i) {
    if (!IsOnnx(g->nodes[i], "Conv") || g->nodes[i].outputs.empty() || g->nodes[i].outputs[0] < 0 ||
        !wanted.count(g->nodes[i].name))
      continue;
    ir::Node copy = g->nodes[i];
    const int y = copy.outputs[0];
    copy.name += suffix;
    const std::string out_name = g->values[y].name + suffix;
    if (g->FindValue(out_name) >= 0)
      return InvalidArgument("the model already has a tensor '" + out_name + "'");
    const int out = g->GetOrAddValue(out_name);
    g->values[out].dtype = g->values[y].dtype;
    g->values[out].producer = static_cast<int>(g->nodes.size());
    copy.outputs[0] = out;
    outputs.push_back(y);
    outputs.push_back(out);
    g->nodes.push_back(std::move(copy));
  }
  if (outputs.size() != 2 * wanted.size())
    return InvalidArgument("the model has no Conv node for some of the " +
                           std::to_string(wanted.size()) + " named");
  std::set<int> have(g->outputs.begin(), g->outputs.end());
  for (int id : outputs)
    if (have.insert(id).second) g->outputs.push_back(id);
  return OkStatus();
}

void QuantizeWeightsSymmetric(const float* w, int64_t n, int64_t channels, int64_t inner,
                              std::vector<int8_t>* q, std::vector<float>* scales) {
  std::vector<float> absmax(static_cast<size_t>(channels), 0.f);
  auto channel = [&](int64_t i) { return channels == 1 ? 0 : (i / inner) % channels; };
  for (int64_t i = 0; i < n; ++i) {
    float& a = absmax[channel(i)];
    a = std::max(a, std::fabs(w[i]));
  }
  scales->resize(static_cast<size_t>(channels));
  for (int64_t c = 0; c < channels; ++c) (*scales)[c] = absmax[c] > 0.f ? absmax[c] / 127.f : 1.f;
  q->resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const float v = std::nearbyint(w[i] / (*scales)[channel(i)]);
    (*q)[i] = static_cast<int8_t>(std::clamp(v, -127.f, 127.f));
  }
}

namespace {

// The state of one RewriteQdq: fresh names, the nodes to insert and the values made.
class Rewriter {
 public:
  Rewriter(ir::Graph* g, const QdqModelInfo& info, const QdqPlan& plan)
      : g_(g), info_(info), plan_(plan) {
    for (const auto& v : g->values) names_.Take(v.name);
    for (const auto& n : g->nodes) names_.Take(n.name);
    for (const auto& a : plan.activations) acts_[a.tensor] = &a;
    for (int id : g->inputs) graph_inputs_.insert(id);
  }

  Status Run();

 private:
  std::string Fresh(const std::string& base) { return names_.Make(base); }
  int NewValue(const std::string& base, DataType dtype) {
    const int id = g_->GetOrAddValue(Fresh(base));
    g_->values[id].dtype = dtype;
    return id;
  }
  int NewConstant(const std::string& base, Tensor t) {
    const int id = NewValue(base, t.dtype());
    std::vector<ir::Dim> dims;
    for (int64_t d : t.shape()) dims.push_back(ir::Dim{d, ""});
    g_->values[id].shape = std::move(dims);
    g_->values[id].constant = std::make_shared<const Tensor>(std::move(t));
    return id;
  }
  ir::Node NewNode(const std::string& op, const std::string& base, std::vector<int> inputs,
                   int output, int64_t axis) {
    ir::Node n;
    n.op_type = op;
    n.name = Fresh(base);
    auto it = g_->opset_imports.find("");
    n.opset = it != g_->opset_imports.end() ? it->second : 0;
    n.inputs = std::move(inputs);
    n.outputs = {output};
    if (axis >= 0) {
      ir::Attribute a;
      a.type = ir::Attribute::Type::kInt;
      a.i = axis;
      n.attrs["axis"] = a;
    }
    return n;
  }
  // `key` by value: adding values may move the names of the graph's values.
  Status QuantizeAs(int t, const ActivationQuant& a, std::string key);
  Status QuantizeActivation(int t) {
    const std::string name = g_->values[t].name;
    auto it = acts_.find(name);
    if (it == acts_.end()) return InvalidArgument("no range was planned for tensor '" + name + "'");
    return QuantizeAs(t, *it->second, name);
  }
  Status QuantizeWeight(const QdqCandidate& c);
  Status CorrectBias(ir::Node* n, const std::string& node, const std::vector<float>& shift);

  ir::Graph* g_;
  const QdqModelInfo& info_;
  const QdqPlan& plan_;
  FreshNames names_;  // every name in the graph, and the fresh ones made
  std::map<std::string, const ActivationQuant*> acts_;
  std::set<int> graph_inputs_;
  std::vector<ir::Node> head_;                  // weights' DQ, graph inputs' Q/DQ
  std::map<int, std::vector<ir::Node>> after_;  // tensor -> its Q/DQ
  std::map<std::string, int> act_dq_;           // key -> dequantized value
  std::map<int, int> weight_dq_;                // weight -> dequantized value
};

// Q -> DQ of tensor `t` with `a`'s scale and zero point; act_dq_[key] is the result.
Status Rewriter::QuantizeAs(int t, const ActivationQuant& a, std::string key) {
  if (act_dq_.count(key)) return OkStatus();
  const std::string tn = g_->values[t].name;
  const bool per_channel = !a.channel_scales.empty();
  if (per_channel && info_.opset < 13)
    return Unsupported("per-channel scales of activation '" + tn +
                       "' need opset 13 or newer; the model imports " +
                       std::to_string(info_.opset));
  const int64_t channels = static_cast<int64_t>(a.channel_scales.size());
  const std::vector<int64_t> dims =
      per_channel ? std::vector<int64_t>{channels} : std::vector<int64_t>{};
  const int s = NewConstant(
      tn + "_scale", per_channel ? ScalarOrVector(DataType::kFloat, dims, a.channel_scales.data(),
                                                  a.channel_scales.size() * 4)
                                 : ScalarOrVector(DataType::kFloat, dims, &a.scale, 4));
  // Per-channel zero points are 0 (a.zero_point is the per-tensor one).
  const std::vector<char> zps(static_cast<size_t>(per_channel ? channels : 1),
                              per_channel ? 0 : static_cast<char>(a.zero_point));
  const DataType qtype = a.is_signed ? DataType::kInt8 : DataType::kUInt8;
  const int z =
      NewConstant(tn + "_zero_point", ScalarOrVector(qtype, dims, zps.data(), zps.size()));
  const int q = NewValue(tn + "_quantized", qtype);
  const int dq = NewValue(tn + "_dequantized", DataType::kFloat);
  g_->values[q].shape = g_->values[dq].shape = g_->values[t].shape;
  auto& dst = graph_inputs_.count(t) ? head_ : after_[t];
  const int64_t axis = per_channel ? 1 : -1;
  dst.push_back(NewNode("QuantizeLinear", tn + "_QuantizeLinear", {t, s, z}, q, axis));
  dst.push_back(NewNode("DequantizeLinear", tn + "_DequantizeLinear", {q, s, z}, dq, axis));
  act_dq_[key] = dq;
  return OkStatus();
}

Status Rewriter::QuantizeWeight(const QdqCandidate& c) {
  const int wv = g_->FindValue(c.weight);
  if (weight_dq_.count(wv)) return OkStatus();
  const Tensor& w = *g_->values[wv].constant;
  const Shape& shape = w.shape();
  int64_t channels = 1, inner = 1;
  if (plan_.per_channel) {
    channels = shape[c.weight_axis];
    for (size_t d = c.weight_axis + 1; d < shape.size(); ++d) inner *= shape[d];
  }
  std::vector<int8_t> q;
  std::vector<float> scales;
  QuantizeWeightsSymmetric(w.data<float>(), w.numel(), channels, inner, &q, &scales);
  const std::vector<int8_t> zps(scales.size(), 0);
  const std::vector<int64_t> vdims =
      plan_.per_channel ? std::vector<int64_t>{channels} : std::vector<int64_t>{};
  const int qn =
      NewConstant(c.weight + "_quantized",
                  ScalarOrVector(DataType::kInt8, std::vector<int64_t>(shape.begin(), shape.end()),
                                 q.data(), q.size()));
  const int sn = NewConstant(c.weight + "_scale", ScalarOrVector(DataType::kFloat, vdims,
                                                                 scales.data(), scales.size() * 4));
  const int zn = NewConstant(c.weight + "_zero_point",
                             ScalarOrVector(DataType::kInt8, vdims, zps.data(), zps.size()));
  const int dq = NewValue(c.weight + "_dequantized", DataType::kFloat);
  g_->values[dq].shape = g_->values[wv].shape;
  head_.push_back(NewNode("DequantizeLinear", c.weight + "_DequantizeLinear", {qn, sn, zn}, dq,
                          plan_.per_channel ? c.weight_axis : -1));
  weight_dq_[wv] = dq;
  return OkStatus();
}

// A new bias constant: the old one (if any) plus the shift.
Status Rewriter::CorrectBias(ir::Node* n, const std::string& node,
                             const std::vector<float>& shift) {
  std::vector<float> b = shift;
  if (n->num_explicit_inputs() > 2 && n->inputs[2] >= 0) {
    if (!IsConstant(*g_, n->inputs[2]))
      return Unsupported("node '" + node + "': its bias is not an initializer");
    const Tensor& old = *g_->values[n->inputs[2]].constant;
    if (old.dtype() != DataType::kFloat || old.numel() != static_cast<int64_t>(b.size()))
      return InvalidArgument("node '" + node + "': the bias shift does not fit its bias");
    for (size_t k = 0; k < b.size(); ++k) b[k] += old.data<float>()[k];
  }
  const int bn = NewConstant(
      node + "_corrected_bias",
      ScalarOrVector(DataType::kFloat, {static_cast<int64_t>(b.size())}, b.data(), b.size() * 4));
  while (n->num_explicit_inputs() < 3)
    n->inputs.insert(n->inputs.begin() + n->num_explicit_inputs(), -1);
  n->inputs[2] = bn;
  return OkStatus();
}

Status Rewriter::Run() {
  std::map<std::string, const QdqCandidate*> planned;
  for (const auto& c : info_.candidates)
    if (std::find(plan_.nodes.begin(), plan_.nodes.end(), c.node) != plan_.nodes.end()) {
      if (!c.reason.empty())
        return InvalidArgument("node '" + c.node + "' cannot be quantized: " + c.reason);
      planned[c.node] = &c;
    }
  std::map<std::string, const QdqConcat*> shared;
  for (const auto& c : info_.concats)
    if (std::find(plan_.shared_concats.begin(), plan_.shared_concats.end(), c.node) !=
        plan_.shared_concats.end()) {
      auto a = acts_.find(c.output);
      if (c.constant_input || a == acts_.end() || !a->second->channel_scales.empty())
        return InvalidArgument(c.op_type + " '" + c.node +
                               "' cannot share its output's scale: it needs computed inputs and "
                               "a per-tensor scale planned for its output");
      shared[c.node] = &c;
    }
  if (shared.size() != plan_.shared_concats.size())
    return InvalidArgument("the plan names a Concat or pass-through op the model does not have");
  std::set<std::string> adds;
  for (const auto& a : info_.adds)
    if (std::find(plan_.adds.begin(), plan_.adds.end(), a.node) != plan_.adds.end())
      adds.insert(a.node);
  if (adds.size() != plan_.adds.size())
    return InvalidArgument("the plan names an Add the model does not have (or one of constants)");

  std::vector<ir::Node> nodes = std::move(g_->nodes);
  g_->nodes.clear();
  for (ir::Node& n : nodes) {
    auto sc = shared.find(n.name);
    if (sc != shared.end()) {
      const ActivationQuant& a = *acts_.at(sc->second->output);
      for (size_t k = 0; k < sc->second->inputs.size(); ++k) {
        const int in = n.inputs[k];
        const std::string in_name = g_->values[in].name;
        // The input's own planned quantization when it is the same (shared scales): one Q/DQ
        // pair for every reader.
        auto own = acts_.find(in_name);
        const bool same = own != acts_.end() && own->second->channel_scales.empty() &&
                          own->second->scale == a.scale &&
                          own->second->zero_point == a.zero_point &&
                          own->second->is_signed == a.is_signed;
        const std::string key = same ? in_name : in_name + "\n" + sc->second->output;
        KILN_RETURN_IF_ERROR(QuantizeAs(in, a, key));
        n.inputs[k] = act_dq_.at(key);
      }
      continue;
    }
    if (adds.count(n.name)) {
      for (int k = 0; k < 2; ++k) {
        const std::string in_name = g_->values[n.inputs[k]].name;
        KILN_RETURN_IF_ERROR(QuantizeActivation(n.inputs[k]));
        n.inputs[k] = act_dq_.at(in_name);
      }
      continue;
    }
    auto it = planned.find(n.name);
    if (it == planned.end()) continue;
    KILN_RETURN_IF_ERROR(QuantizeActivation(n.inputs[0]));
    KILN_RETURN_IF_ERROR(QuantizeWeight(*it->second));
    n.inputs[0] = act_dq_.at(it->second->activation);
    n.inputs[1] = weight_dq_.at(n.inputs[1]);
    auto shift = plan_.bias_shift.find(it->first);
    if (shift != plan_.bias_shift.end() && it->second->op_type == "Conv")
      KILN_RETURN_IF_ERROR(CorrectBias(&n, it->first, shift->second));
  }
  // Weights' DequantizeLinear and graph inputs' pairs first, then each node followed by the
  // pairs of its outputs.
  g_->nodes = std::move(head_);
  for (ir::Node& n : nodes) {
    const std::vector<int> outs = n.outputs;
    g_->nodes.push_back(std::move(n));
    for (int o : outs) {
      auto a = after_.find(o);
      if (a == after_.end()) continue;
      for (auto& qdq : a->second) g_->nodes.push_back(std::move(qdq));
    }
  }
  // Replaced float weights and biases nothing reads any more leave the graph (Compact).
  return Compact(g_);
}

}  // namespace

Status RewriteQdq(ir::Graph* g, const QdqPlan& plan) {
  const QdqModelInfo info = InspectForQdq(*g);
  if (info.opset < 10)
    return Unsupported("QuantizeLinear needs opset 10 or newer; the model imports opset " +
                       std::to_string(info.opset));
  if (plan.per_channel && info.opset < 13)
    return Unsupported("per-channel weight scales need opset 13 or newer; the model imports " +
                       std::to_string(info.opset));
  Rewriter r(g, info, plan);
  return r.Run();
}

}  // namespace kiln::quant
