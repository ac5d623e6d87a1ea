// See qdq_rewrite.h. The rewrite keeps the graph's node order and inserts each Q -> DQ pair right
// after the node producing its tensor (weights' DequantizeLinear nodes first), so the result stays
// topologically sorted as ONNX requires.
#include "onnx/qdq_rewrite.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "onnx/tensor_proto_internal.h"

namespace kiln::onnxio {
namespace {

// Constant nodes that hold a tensor (`value`) become initializers of the same name: exporters
// such as Paddle2ONNX write every weight that way, and the quantizer finds weights among the
// initializers. Node order stays topological (an initializer precedes every node).
void HoistConstants(onnx::GraphProto* g) {
  auto* nodes = g->mutable_node();
  int kept = 0;
  for (int i = 0; i < nodes->size(); ++i) {
    onnx::NodeProto* n = nodes->Mutable(i);
    const bool is_value_constant =
        n->op_type() == "Constant" && (n->domain().empty() || n->domain() == "ai.onnx") &&
        n->output_size() == 1 && n->attribute_size() == 1 && n->attribute(0).name() == "value";
    if (is_value_constant) {
      onnx::TensorProto* t = g->add_initializer();
      *t = n->attribute(0).t();
      t->set_name(n->output(0));
      continue;
    }
    if (kept != i) nodes->SwapElements(kept, i);
    ++kept;
  }
  while (nodes->size() > kept) nodes->RemoveLast();
}

StatusOr<onnx::ModelProto> Parse(const std::string& bytes) {
  onnx::ModelProto m;
  if (!m.ParseFromString(bytes)) return InvalidModel("failed to parse the ONNX model (protobuf)");
  HoistConstants(m.mutable_graph());
  return m;
}

std::string NodeName(const onnx::NodeProto& n, int index) {
  return n.name().empty() ? n.op_type() + "_" + std::to_string(index) : n.name();
}

int64_t IntAttr(const onnx::NodeProto& n, const std::string& name, int64_t def) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return a.i();
  return def;
}

onnx::TensorProto ScalarOrVector(const std::string& name, int data_type,
                                 const std::vector<int64_t>& dims, const void* data, size_t bytes) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(data_type);
  for (int64_t d : dims) t.add_dims(d);
  t.set_raw_data(std::string(static_cast<const char*>(data), bytes));
  return t;
}

}  // namespace

namespace {

QdqModelInfo Inspect(const onnx::ModelProto& m);

}  // namespace

StatusOr<QdqModelInfo> InspectForQdq(const std::string& model_bytes) {
  KILN_ASSIGN_OR_RETURN(onnx::ModelProto m, Parse(model_bytes));
  return Inspect(m);
}

namespace {

QdqModelInfo Inspect(const onnx::ModelProto& m) {
  QdqModelInfo info;
  for (const auto& o : m.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") info.opset = o.version();
  std::map<std::string, const onnx::TensorProto*> inits;
  for (const auto& t : m.graph().initializer()) inits[t.name()] = &t;
  const auto& nodes = m.graph().node();
  std::set<std::string> graph_outputs;
  for (const auto& o : m.graph().output()) graph_outputs.insert(o.name());
  // A subgraph (If, Loop, Scan) may read a Concat's output without naming it as an input: no
  // Concat's readers are then known, so none is listed.
  bool subgraphs = false;
  for (const auto& n : nodes)
    for (const auto& a : n.attribute())
      subgraphs = subgraphs || a.type() == onnx::AttributeProto::GRAPH ||
                  a.type() == onnx::AttributeProto::GRAPHS;
  std::map<std::string, std::vector<std::pair<int, int>>> tensor_readers;  // (node, input)
  for (int i = 0; i < nodes.size(); ++i)
    for (int k = 0; k < nodes[i].input_size(); ++k)
      tensor_readers[nodes[i].input(k)].push_back({i, k});
  auto is_onnx = [](const onnx::NodeProto& n, const char* op) {
    return n.op_type() == op && (n.domain().empty() || n.domain() == "ai.onnx");
  };
  // Conv output, or the output of the activation that alone reads it -> the Conv.
  std::map<std::string, std::string> conv_of;
  std::map<std::string, std::string> activated_of;  // Conv -> its activation's output
  // Listed node or residual Add output -> the node writing it.
  std::map<std::string, std::string> source_of;
  auto sole_reader = [&](const std::string& t) -> int {
    auto r = tensor_readers.find(t);
    if (r == tensor_readers.end() || r->second.size() != 1 || graph_outputs.count(t)) return -1;
    return r->second[0].first;
  };
  // Shape and Size read only the shape, which quantization keeps: they are not listed (PyTorch's
  // exports compute ShuffleNet's channel-shuffle Reshape targets from Shape of the Concat).
  auto reader_list = [&](const std::string& t, std::vector<std::pair<std::string, int>>* out) {
    auto r = tensor_readers.find(t);
    if (r == tensor_readers.end()) return;
    for (auto [ri, k] : r->second)
      if (!is_onnx(nodes[ri], "Shape") && !is_onnx(nodes[ri], "Size"))
        out->emplace_back(NodeName(nodes[ri], ri), k);
  };
  // Residual Adds: two computed inputs; the sum carried on by the Add's output or by the Relu
  // that alone reads it.
  for (int i = 0; i < nodes.size() && !subgraphs; ++i) {
    const onnx::NodeProto& n = nodes[i];
    if (n.op_type() != "Add" || !(n.domain().empty() || n.domain() == "ai.onnx") ||
        n.input_size() != 2 || n.output_size() != 1)
      continue;
    bool computed = true;
    for (const auto& in : n.input()) computed = computed && !in.empty() && !inits.count(in);
    if (!computed) continue;
    QdqAdd a;
    a.node = NodeName(n, i);
    a.inputs = {n.input(0), n.input(1)};
    a.result = n.output(0);
    a.graph_output = graph_outputs.count(a.result) > 0;
    const auto r = tensor_readers.find(a.result);
    if (r != tensor_readers.end() && r->second.size() == 1 &&
        is_onnx(nodes[r->second[0].first], "Relu")) {
      a.result = nodes[r->second[0].first].output(0);
      a.graph_output = a.graph_output || graph_outputs.count(a.result) > 0;
    }
    source_of[a.result] = a.node;
    auto rr = tensor_readers.find(a.result);
    if (rr != tensor_readers.end())
      for (auto [ri, k] : rr->second) a.result_readers.push_back(NodeName(nodes[ri], ri));
    info.adds.push_back(std::move(a));
  }
  for (int i = 0; i < nodes.size(); ++i) {
    const onnx::NodeProto& n = nodes[i];
    const std::string& op = n.op_type();
    if (!(n.domain().empty() || n.domain() == "ai.onnx")) continue;
    if (op == "Conv" && n.output_size() == 1) {
      const std::string name = NodeName(n, i), y = n.output(0);
      conv_of[y] = name;
      // The activation that alone reads Y (SiLU: Y read by Sigmoid and Mul only, the Sigmoid's
      // output by that Mul only).
      const int r = sole_reader(y);
      static const char* kUnary[] = {"Relu",        "Clip",    "LeakyRelu", "HardSwish",
                                     "HardSigmoid", "Sigmoid", "Tanh"};
      if (r >= 0 && nodes[r].output_size() == 1 &&
          std::any_of(std::begin(kUnary), std::end(kUnary),
                      [&](const char* a) { return is_onnx(nodes[r], a); }))
        conv_of[nodes[r].output(0)] = name, activated_of[name] = nodes[r].output(0);
      auto yr = tensor_readers.find(y);
      if (yr != tensor_readers.end() && yr->second.size() == 2 && !graph_outputs.count(y)) {
        int sig = -1, mul = -1;
        for (auto [ri, k] : yr->second) {
          if (is_onnx(nodes[ri], "Sigmoid")) sig = ri;
          if (is_onnx(nodes[ri], "Mul") && nodes[ri].input_size() == 2) mul = ri;
        }
        if (sig >= 0 && mul >= 0 && nodes[sig].output_size() == 1 &&
            nodes[mul].output_size() == 1 && sole_reader(nodes[sig].output(0)) == mul)
          conv_of[nodes[mul].output(0)] = name, activated_of[name] = nodes[mul].output(0);
      }
    }
    const bool listed = op == "Concat" ||
                        std::any_of(std::begin(kPassThroughOps), std::end(kPassThroughOps),
                                    [&](const char* p) { return op == p; }) ||
                        IsAveragingOp(op);
    // MaxPool without its indices output; Resize/Upsample only in mode nearest, not cropping
    // (tf_crop_and_resize writes the extrapolation value outside the crop).
    bool exact = listed && n.output_size() >= 1 && n.input_size() >= 1 && !n.input(0).empty();
    if (op == "MaxPool") exact = exact && n.output_size() == 1;
    if (op == "Split")
      exact = exact && std::none_of(n.output().begin(), n.output().end(),
                                    [](const std::string& o) { return o.empty(); });
    if (op != "Split") exact = exact && n.output_size() == 1;
    if (op == "Resize" || op == "Upsample")
      for (const auto& a : n.attribute())
        exact = exact && !(a.name() == "mode" && a.s() != "nearest") &&
                !(a.name() == "coordinate_transformation_mode" && a.s() == "tf_crop_and_resize");
    if (exact && !subgraphs) {
      QdqConcat c;
      c.op_type = op;
      c.node = NodeName(n, i);
      c.output = n.output(0);
      c.outputs.assign(n.output().begin(), n.output().end());
      const int data = op == "Concat" ? n.input_size() : 1;
      for (int k = 0; k < data; ++k) {
        const std::string& in = n.input(k);
        c.inputs.push_back(in);
        c.constant_input = c.constant_input || in.empty() || inits.count(in) > 0;
        c.input_graph_output = c.input_graph_output || graph_outputs.count(in) > 0;
        auto cv = conv_of.find(in);
        auto src = source_of.find(in);
        c.sources.push_back(cv != conv_of.end()      ? cv->second
                            : src != source_of.end() ? src->second
                                                     : std::string());
        reader_list(in, &c.input_readers);
      }
      for (const auto& o : c.outputs) {
        c.graph_output = c.graph_output || graph_outputs.count(o) > 0;
        reader_list(o, &c.readers);
        source_of[o] = c.node;
      }
      info.concats.push_back(std::move(c));
      continue;
    }
    if (op != "Conv" && op != "Gemm" && op != "MatMul") continue;
    QdqCandidate c;
    c.node = NodeName(n, i);
    c.op_type = op;
    c.index = i;
    if (n.input_size() < 2) continue;
    c.activation = n.input(0);
    c.output = n.output_size() > 0 ? n.output(0) : "";
    auto act = activated_of.find(c.node);
    if (act != activated_of.end()) c.activated = act->second;
    c.weight = n.input(1);
    auto w = inits.find(c.weight);
    if (inits.count(c.activation)) {
      c.reason = "its input 0 is a constant";
    } else if (w == inits.end()) {
      c.reason = "its weight '" + c.weight + "' is not an initializer";
    } else if (w->second->data_type() != onnx::TensorProto::FLOAT) {
      c.reason = "its weight is not float32";
    } else {
      const int rank = w->second->dims_size();
      if (op == "Conv") {
        c.weight_axis = 0;
        if (rank < 3) c.reason = "its weight has rank " + std::to_string(rank);
        const int64_t group = IntAttr(n, "group", 1);
        c.depthwise =
            rank >= 3 && group > 1 && w->second->dims(0) == group && w->second->dims(1) == 1;
      } else if (op == "Gemm") {
        c.weight_axis = IntAttr(n, "transB", 0) != 0 ? 0 : 1;
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
  std::map<std::string, int> producer;
  for (int i = 0; i < nodes.size(); ++i)
    for (const auto& o : nodes[i].output()) producer[o] = i;
  std::vector<std::string> work;
  std::set<std::string> seen;
  for (const auto& o : m.graph().output()) work.push_back(o.name());
  while (!work.empty()) {
    const std::string t = work.back();
    work.pop_back();
    auto p = producer.find(t);
    if (t.empty() || !seen.insert(t).second || p == producer.end()) continue;
    auto c = candidate_at.find(p->second);
    if (c != candidate_at.end()) {
      info.candidates[c->second].output_layer = true;
      continue;
    }
    for (const auto& in : nodes[p->second].input()) work.push_back(in);
  }
  seen.clear();
  for (const auto& v : m.graph().input())
    if (!inits.count(v.name())) work.push_back(v.name());
  while (!work.empty()) {
    const std::string t = work.back();
    work.pop_back();
    auto r = tensor_readers.find(t);
    if (!seen.insert(t).second || r == tensor_readers.end()) continue;
    for (auto [ri, k] : r->second) {
      auto c = candidate_at.find(ri);
      if (c != candidate_at.end()) {
        if (k == 0) info.candidates[c->second].input_layer = true;
        continue;
      }
      for (const auto& o : nodes[ri].output()) work.push_back(o);
    }
  }
  return info;
}

}  // namespace

StatusOr<std::string> WithExtraOutputs(const std::string& model_bytes,
                                       const std::vector<std::string>& names) {
  KILN_ASSIGN_OR_RETURN(onnx::ModelProto m, Parse(model_bytes));
  std::set<std::string> have;
  for (const auto& o : m.graph().output()) have.insert(o.name());
  for (const auto& name : names) {
    if (!have.insert(name).second) continue;
    auto* v = m.mutable_graph()->add_output();
    v->set_name(name);
    v->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  }
  return m.SerializeAsString();
}

StatusOr<std::string> WithIsolatedCopies(const std::string& model_bytes,
                                         const std::vector<std::string>& nodes,
                                         const std::string& suffix) {
  KILN_ASSIGN_OR_RETURN(onnx::ModelProto m, Parse(model_bytes));
  onnx::GraphProto* g = m.mutable_graph();
  const std::set<std::string> wanted(nodes.begin(), nodes.end());
  std::set<std::string> have;
  for (const auto& o : g->output()) have.insert(o.name());
  std::vector<std::string> outputs;
  const int count = g->node_size();
  for (int i = 0; i < count; ++i) {
    const onnx::NodeProto& n = g->node(i);
    if (n.op_type() != "Conv" || n.output_size() < 1 || !wanted.count(NodeName(n, i))) continue;
    onnx::NodeProto copy = n;
    copy.set_name(NodeName(n, i) + suffix);
    copy.set_output(0, n.output(0) + suffix);
    for (const std::string& o : {n.output(0), copy.output(0)}) outputs.push_back(o);
    *g->add_node() = std::move(copy);
  }
  if (outputs.size() != 2 * wanted.size())
    return InvalidArgument("the model has no Conv node for some of the " +
                           std::to_string(wanted.size()) + " named");
  for (const auto& name : outputs) {
    if (!have.insert(name).second) continue;
    auto* v = g->add_output();
    v->set_name(name);
    v->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  }
  return m.SerializeAsString();
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

StatusOr<std::string> RewriteQdq(const std::string& model_bytes, const std::string& model_dir,
                                 const QdqPlan& plan) {
  KILN_ASSIGN_OR_RETURN(onnx::ModelProto m, Parse(model_bytes));
  const QdqModelInfo info = Inspect(m);  // (one parse: the model bytes can be 100 MB)
  if (info.opset < 10)
    return Unsupported("QuantizeLinear needs opset 10 or newer; the model imports opset " +
                       std::to_string(info.opset));
  if (plan.per_channel && info.opset < 13)
    return Unsupported("per-channel weight scales need opset 13 or newer; the model imports " +
                       std::to_string(info.opset));
  onnx::GraphProto* g = m.mutable_graph();

  std::set<std::string> used;  // every name in the graph, for fresh ones
  for (const auto& t : g->initializer()) used.insert(t.name());
  for (const auto& v : g->input()) used.insert(v.name());
  for (const auto& n : g->node()) {
    used.insert(n.name());
    for (const auto& o : n.output()) used.insert(o);
  }
  auto fresh = [&](const std::string& base) {
    std::string name = base;
    for (int k = 1; used.count(name); ++k) name = base + "_" + std::to_string(k);
    used.insert(name);
    return name;
  };

  std::map<std::string, const QdqCandidate*> planned;
  for (const auto& c : info.candidates)
    if (std::find(plan.nodes.begin(), plan.nodes.end(), c.node) != plan.nodes.end()) {
      if (!c.reason.empty())
        return InvalidArgument("node '" + c.node + "' cannot be quantized: " + c.reason);
      planned[c.node] = &c;
    }
  std::map<std::string, const ActivationQuant*> acts;
  for (const auto& a : plan.activations) acts[a.tensor] = &a;

  std::map<std::string, int> inits;
  for (int i = 0; i < g->initializer_size(); ++i) inits[g->initializer(i).name()] = i;

  std::vector<onnx::NodeProto> head;                          // weights' DQ, graph inputs' Q/DQ
  std::map<std::string, std::vector<onnx::NodeProto>> after;  // tensor -> its Q/DQ
  std::map<std::string, std::string> act_dq, weight_dq;       // float name -> dequantized name
  std::vector<onnx::TensorProto> new_inits;

  std::set<std::string> graph_inputs;
  for (const auto& v : g->input()) graph_inputs.insert(v.name());

  // Q -> DQ of tensor `t` with `a`'s scale and zero point; act_dq[key] names the result.
  auto quantize_as = [&](const std::string& t, const ActivationQuant& a,
                         const std::string& key) -> Status {
    if (act_dq.count(key)) return OkStatus();
    const std::string s = fresh(t + "_scale"), z = fresh(t + "_zero_point");
    const std::string q = fresh(t + "_quantized"), dq = fresh(t + "_dequantized");
    const bool per_channel = !a.channel_scales.empty();
    if (per_channel && info.opset < 13)
      return Unsupported("per-channel scales of activation '" + t +
                         "' need opset 13 or newer; the model imports " +
                         std::to_string(info.opset));
    const int64_t channels = static_cast<int64_t>(a.channel_scales.size());
    const std::vector<int64_t> dims =
        per_channel ? std::vector<int64_t>{channels} : std::vector<int64_t>{};
    if (per_channel)
      new_inits.push_back(ScalarOrVector(s, onnx::TensorProto::FLOAT, dims, a.channel_scales.data(),
                                         a.channel_scales.size() * 4));
    else
      new_inits.push_back(ScalarOrVector(s, onnx::TensorProto::FLOAT, dims, &a.scale, 4));
    // Per-channel zero points are 0 (a.zero_point is the per-tensor one).
    const std::vector<char> zps(static_cast<size_t>(per_channel ? channels : 1),
                                per_channel ? 0 : static_cast<char>(a.zero_point));
    new_inits.push_back(
        ScalarOrVector(z, a.is_signed ? onnx::TensorProto::INT8 : onnx::TensorProto::UINT8, dims,
                       zps.data(), zps.size()));
    onnx::NodeProto qn, dqn;
    qn.set_op_type("QuantizeLinear");
    qn.set_name(fresh(t + "_QuantizeLinear"));
    qn.add_input(t), qn.add_input(s), qn.add_input(z), qn.add_output(q);
    dqn.set_op_type("DequantizeLinear");
    dqn.set_name(fresh(t + "_DequantizeLinear"));
    dqn.add_input(q), dqn.add_input(s), dqn.add_input(z), dqn.add_output(dq);
    if (per_channel)
      for (onnx::NodeProto* node : {&qn, &dqn}) {
        auto* ax = node->add_attribute();
        ax->set_name("axis");
        ax->set_type(onnx::AttributeProto::INT);
        ax->set_i(1);
      }
    auto& dst = graph_inputs.count(t) ? head : after[t];
    dst.push_back(qn);
    dst.push_back(dqn);
    act_dq[key] = dq;
    return OkStatus();
  };
  auto quantize_activation = [&](const std::string& t) -> Status {
    auto it = acts.find(t);
    if (it == acts.end()) return InvalidArgument("no range was planned for tensor '" + t + "'");
    return quantize_as(t, *it->second, t);
  };
  std::map<std::string, const QdqConcat*> shared;
  for (const auto& c : info.concats)
    if (std::find(plan.shared_concats.begin(), plan.shared_concats.end(), c.node) !=
        plan.shared_concats.end()) {
      auto a = acts.find(c.output);
      if (c.constant_input || a == acts.end() || !a->second->channel_scales.empty())
        return InvalidArgument(c.op_type + " '" + c.node +
                               "' cannot share its output's scale: it needs computed inputs and "
                               "a per-tensor scale planned for its output");
      shared[c.node] = &c;
    }
  if (shared.size() != plan.shared_concats.size())
    return InvalidArgument("the plan names a Concat or pass-through op the model does not have");
  std::map<std::string, const QdqAdd*> adds;
  for (const auto& a : info.adds)
    if (std::find(plan.adds.begin(), plan.adds.end(), a.node) != plan.adds.end()) adds[a.node] = &a;
  if (adds.size() != plan.adds.size())
    return InvalidArgument("the plan names an Add the model does not have (or one of constants)");

  auto quantize_weight = [&](const QdqCandidate& c) -> Status {
    if (weight_dq.count(c.weight)) return OkStatus();
    const onnx::TensorProto& wp = g->initializer(inits.at(c.weight));
    KILN_ASSIGN_OR_RETURN(Tensor w, TensorFromProto(wp, model_dir, "initializer " + c.weight));
    const Shape& shape = w.shape();
    int64_t channels = 1, inner = 1;
    if (plan.per_channel) {
      channels = shape[c.weight_axis];
      for (size_t d = c.weight_axis + 1; d < shape.size(); ++d) inner *= shape[d];
    }
    std::vector<int8_t> q;
    std::vector<float> scales;
    QuantizeWeightsSymmetric(w.data<float>(), w.numel(), channels, inner, &q, &scales);
    const std::vector<int8_t> zps(scales.size(), 0);
    const std::string qn = fresh(c.weight + "_quantized"), sn = fresh(c.weight + "_scale");
    const std::string zn = fresh(c.weight + "_zero_point"), dq = fresh(c.weight + "_dequantized");
    const std::vector<int64_t> vdims =
        plan.per_channel ? std::vector<int64_t>{channels} : std::vector<int64_t>{};
    new_inits.push_back(ScalarOrVector(qn, onnx::TensorProto::INT8,
                                       std::vector<int64_t>(shape.begin(), shape.end()), q.data(),
                                       q.size()));
    new_inits.push_back(
        ScalarOrVector(sn, onnx::TensorProto::FLOAT, vdims, scales.data(), scales.size() * 4));
    new_inits.push_back(ScalarOrVector(zn, onnx::TensorProto::INT8, vdims, zps.data(), zps.size()));
    onnx::NodeProto dqn;
    dqn.set_op_type("DequantizeLinear");
    dqn.set_name(fresh(c.weight + "_DequantizeLinear"));
    dqn.add_input(qn), dqn.add_input(sn), dqn.add_input(zn), dqn.add_output(dq);
    if (plan.per_channel) {
      auto* ax = dqn.add_attribute();
      ax->set_name("axis");
      ax->set_type(onnx::AttributeProto::INT);
      ax->set_i(c.weight_axis);
    }
    head.push_back(dqn);
    weight_dq[c.weight] = dq;
    return OkStatus();
  };

  std::vector<onnx::NodeProto> nodes(g->node().begin(), g->node().end());
  for (int i = 0; i < static_cast<int>(nodes.size()); ++i) {
    auto sc = shared.find(NodeName(nodes[i], i));
    if (sc != shared.end()) {
      const ActivationQuant& a = *acts.at(sc->second->output);
      for (int k = 0; k < static_cast<int>(sc->second->inputs.size()); ++k) {
        const std::string in = nodes[i].input(k);
        // The input's own planned quantization when it is the same (shared scales): one Q/DQ
        // pair for every reader.
        auto own = acts.find(in);
        const bool same = own != acts.end() && own->second->channel_scales.empty() &&
                          own->second->scale == a.scale &&
                          own->second->zero_point == a.zero_point &&
                          own->second->is_signed == a.is_signed;
        const std::string key = same ? in : in + "\n" + sc->second->output;
        KILN_RETURN_IF_ERROR(quantize_as(in, a, key));
        nodes[i].set_input(k, act_dq[key]);
      }
      continue;
    }
    if (adds.count(NodeName(nodes[i], i))) {
      for (int k = 0; k < 2; ++k) {
        const std::string in = nodes[i].input(k);
        KILN_RETURN_IF_ERROR(quantize_activation(in));
        nodes[i].set_input(k, act_dq[in]);
      }
      continue;
    }
    auto it = planned.find(NodeName(nodes[i], i));
    if (it == planned.end()) continue;
    KILN_RETURN_IF_ERROR(quantize_activation(it->second->activation));
    KILN_RETURN_IF_ERROR(quantize_weight(*it->second));
    nodes[i].set_input(0, act_dq[it->second->activation]);
    nodes[i].set_input(1, weight_dq[it->second->weight]);
    auto shift = plan.bias_shift.find(it->first);
    if (shift == plan.bias_shift.end() || it->second->op_type != "Conv") continue;
    // A new bias initializer: the old one (if any) plus the shift.
    std::vector<float> b = shift->second;
    if (nodes[i].input_size() > 2 && !nodes[i].input(2).empty()) {
      auto bi = inits.find(nodes[i].input(2));
      if (bi == inits.end())
        return Unsupported("node '" + it->first + "': its bias is not an initializer");
      KILN_ASSIGN_OR_RETURN(Tensor old, TensorFromProto(g->initializer(bi->second), model_dir,
                                                        "initializer " + nodes[i].input(2)));
      if (old.dtype() != DataType::kFloat || old.numel() != static_cast<int64_t>(b.size()))
        return InvalidArgument("node '" + it->first + "': the bias shift does not fit its bias");
      for (size_t k = 0; k < b.size(); ++k) b[k] += old.data<float>()[k];
    }
    const std::string bn = fresh(it->first + "_corrected_bias");
    new_inits.push_back(ScalarOrVector(bn, onnx::TensorProto::FLOAT,
                                       {static_cast<int64_t>(b.size())}, b.data(), b.size() * 4));
    while (nodes[i].input_size() < 3) nodes[i].add_input("");
    nodes[i].set_input(2, bn);
  }

  g->clear_node();
  for (auto& n : head) *g->add_node() = std::move(n);
  for (auto& n : nodes) {
    std::vector<std::string> outs(n.output().begin(), n.output().end());
    *g->add_node() = std::move(n);
    for (const auto& o : outs) {
      auto a = after.find(o);
      if (a == after.end()) continue;
      for (auto& qdq : a->second) *g->add_node() = std::move(qdq);
    }
  }

  // Float weights nothing reads any more leave the model (and the graph inputs, old IRs).
  std::set<std::string> read;
  for (const auto& n : g->node())
    for (const auto& in : n.input()) read.insert(in);
  for (const auto& o : g->output()) read.insert(o.name());
  std::set<std::string> dropped;
  auto* list = g->mutable_initializer();
  for (int i = list->size() - 1; i >= 0; --i)
    if (!read.count(list->Get(i).name()) &&
        (weight_dq.count(list->Get(i).name()) || !plan.bias_shift.empty())) {
      dropped.insert(list->Get(i).name());
      list->DeleteSubrange(i, 1);
    }
  auto* ins = g->mutable_input();
  for (int i = ins->size() - 1; i >= 0; --i)
    if (dropped.count(ins->Get(i).name())) ins->DeleteSubrange(i, 1);
  for (auto& t : new_inits) *g->add_initializer() = std::move(t);
  std::string out;
  if (!m.SerializeToString(&out)) return Internal("failed to serialize the quantized model");
  return out;
}

}  // namespace kiln::onnxio
