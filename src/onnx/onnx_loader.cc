// ModelProto -> ir::Graph. Structural errors (dangling inputs, duplicate producers, unknown
// domains) are InvalidModel naming the node; ONNX's checker runs node by node first and its
// exceptions become Status values.
#include "onnx/onnx_loader.h"

#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string_view>

#include "onnx/tensor_proto_internal.h"

namespace kiln::onnxio {
namespace {

using ir::Attribute;

// The kiln DataType a TypeProto names: a tensor's element type, sequence(T), optional(X) (one
// level of sequence inside an optional); kUndefined for what kiln has no type for (maps, sparse
// tensors, nested sequences) or an unset element type.
DataType TypeOf(const onnx::TypeProto& type) {
  if (type.has_tensor_type()) return static_cast<DataType>(type.tensor_type().elem_type());
  if (type.has_sequence_type() && type.sequence_type().has_elem_type()) {
    const auto& e = type.sequence_type().elem_type();
    if (!e.has_tensor_type() || e.tensor_type().elem_type() == 0) return DataType::kUndefined;
    return SequenceOf(static_cast<DataType>(e.tensor_type().elem_type()));
  }
  if (type.has_optional_type() && type.optional_type().has_elem_type()) {
    const DataType inner = TypeOf(type.optional_type().elem_type());
    if (inner == DataType::kUndefined || IsOptionalType(inner)) return DataType::kUndefined;
    return OptionalOf(inner);
  }
  return DataType::kUndefined;
}

void FillType(const onnx::TypeProto& type, ir::Value* v) {
  if (!type.has_tensor_type()) {
    // Sequences and optionals: a rank-0 handle.
    const DataType t = TypeOf(type);
    if (t != DataType::kUndefined) {
      v->dtype = t;
      v->shape = std::vector<ir::Dim>{};
    }
    return;
  }
  const auto& tt = type.tensor_type();
  if (tt.elem_type() != 0) v->dtype = static_cast<DataType>(tt.elem_type());
  if (!tt.has_shape()) return;
  std::vector<ir::Dim> dims;
  for (const auto& d : tt.shape().dim()) {
    ir::Dim dim;
    if (d.has_dim_value()) dim.value = d.dim_value();
    if (d.has_dim_param()) dim.param = d.dim_param();
    dims.push_back(dim);
  }
  v->shape = std::move(dims);
}

// The names visible from a subgraph: those of every enclosing graph (ONNX's lexical scoping).
using Scope = std::set<std::string>;

// Every node, in the graph and in subgraphs, must have its required inputs, since ops read them
// unconditionally (the session fuzzer's ReduceL2 and Gelu with none read past their inputs).
// ONNX's checker does not cover all: it knows ai.onnx only up to opset 17 (Debian's libonnx 1.12)
// and stops at a subgraph node it does not know. The minimum comes from libonnx's schema at the
// node's opset, for a domain libonnx knows (its newest for a newer node: between ai.onnx 17 and
// 24 no op kiln runs lowered its minimum, only OptionalHasElement did), else from kRequired:
// ops newer than libonnx (ONNX 1.19.1's schemas), ONNX Runtime's com.microsoft ops (its 1.32.0
// schemas) and kiln's own optimizer ops. tests/runtime/required_inputs_check.py checks every op
// kiln registers against those schemas.
struct Required {
  std::string_view domain;
  std::string_view op;
  int min_inputs;
  unsigned optional = 0;  // bit i: input i may be empty
};
constexpr Required kRequired[] = {
    {"", "AffineGrid", 2},
    {"", "Attention", 3},
    {"", "BitwiseAnd", 2},
    {"", "BitwiseNot", 1},
    {"", "BitwiseOr", 2},
    {"", "BitwiseXor", 2},
    {"", "CenterCropPad", 2},
    {"", "Col2Im", 3},
    {"", "DeformConv", 3},
    {"", "Gelu", 1},
    {"", "GroupNormalization", 3},
    {"", "ImageDecoder", 1},
    {"", "Mish", 1},
    {"", "RMSNormalization", 2},
    {"", "RegexFullMatch", 1},
    {"", "RotaryEmbedding", 3},
    {"", "StringConcat", 2},
    {"", "StringSplit", 1},
    {"", "Swish", 1},
    {"", "TensorScatter", 2},
    {"", "SimplifiedLayerNormalization", 2},  // ONNX Runtime's, in the default domain: X, scale
    {"ai.onnx.ml", "TreeEnsemble", 1},
    {"com.microsoft", "Attention", 2},
    {"com.microsoft", "BiasGelu", 2},
    {"com.microsoft", "DynamicQuantizeLSTM", 12, 0xf8},
    {"com.microsoft", "DynamicQuantizeMatMul", 3},
    {"com.microsoft", "FastGelu", 1},
    {"com.microsoft", "FusedConv", 2},
    {"com.microsoft", "FusedMatMul", 2},
    {"com.microsoft", "Gelu", 1},
    {"com.microsoft", "LayerNormalization", 2},  // no schema in ONNX Runtime's list: X, scale
    {"com.microsoft", "MatMulIntegerToFloat", 4},
    {"com.microsoft", "MultiHeadAttention", 1},
    {"com.microsoft", "NhwcConv", 2},
    {"com.microsoft", "QGemm", 6},
    {"com.microsoft", "QLinearAdd", 7, 0x24},
    {"com.microsoft", "QLinearAveragePool", 4, 0x4},
    {"com.microsoft", "QLinearConcat", 3},
    {"com.microsoft", "QLinearGlobalAveragePool", 5},
    {"com.microsoft", "QLinearLeakyRelu", 4, 0x4},
    {"com.microsoft", "QLinearMul", 7, 0x24},
    {"com.microsoft", "QLinearSigmoid", 4, 0x4},
    {"com.microsoft", "QuickGelu", 1},
    {"com.microsoft", "SkipLayerNormalization", 3},
    {"com.microsoft", "SkipSimplifiedLayerNormalization", 3},
    {"com.microsoft", "TransposeMatMul", 2},
    // kiln's optimizer's ops (passes/fuse_*.cc); the Q* ops check their input counts themselves.
    {"kiln", "FusedBatchNormalization", 5},
    {"kiln", "FusedConv", 2},
    {"kiln", "FusedMatMul", 2},
    {"kiln", "Gelu", 1},
    {"kiln", "LayerNormalization", 2},
};

Status CheckRequiredInputs(const onnx::NodeProto& node, int opset) {
  const std::string domain = node.domain() == "ai.onnx" ? "" : node.domain();
  if (domain.empty() && node.op_type() == "OptionalHasElement")
    return OkStatus();  // its input is optional since 18
  const auto& known = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
  const auto range = known.find(domain);
  const onnx::OpSchema* schema =
      range == known.end() ? nullptr
                           : onnx::OpSchemaRegistry::Schema(
                                 node.op_type(), std::min(opset, range->second.second), domain);
  int min_inputs = 0;
  unsigned optional = 0;
  if (schema != nullptr) {
    min_inputs = schema->min_input();
    for (int i = 0; i < min_inputs && i < 32 && static_cast<size_t>(i) < schema->inputs().size();
         ++i)
      if (schema->inputs()[i].GetOption() == onnx::OpSchema::FormalParameterOption::Optional)
        optional |= 1u << i;
  } else {
    for (const Required& r : kRequired)
      if (r.domain == domain && r.op == node.op_type()) {
        min_inputs = r.min_inputs;
        optional = r.optional;
      }
  }
  for (int i = 0; i < min_inputs; ++i) {
    // The first min_inputs slots must be there; one may be empty only where the schema declares
    // the input optional (Loop's M and cond).
    const bool may_be_empty = i < 32 && (optional >> i & 1u) != 0;
    if (i >= node.input_size() || (node.input(i).empty() && !may_be_empty))
      return InvalidModel("node '" + node.name() + "' (" + node.op_type() + ") needs " +
                          std::to_string(min_inputs) + " input(s); input " + std::to_string(i) +
                          " is " + (i < node.input_size() ? "empty" : "missing"));
  }
  return OkStatus();
}

// Initializers' bytes are moved out of `gp` as they are read (peak memory: one copy of weights).
StatusOr<std::unique_ptr<ir::Graph>> ConvertGraph(onnx::GraphProto& gp,
                                                  const std::map<std::string, int>& opsets,
                                                  const std::string& model_dir, const Scope* outer,
                                                  int depth);

// Subgraphs nest (a Loop body holding an If): deeper than this is refused, so a hostile file
// cannot exhaust the stack.
constexpr int kMaxSubgraphDepth = 16;

StatusOr<Attribute> ConvertAttribute(onnx::AttributeProto& a, const std::string& model_dir,
                                     const std::string& what,
                                     const std::map<std::string, int>& opsets, const Scope* scope,
                                     int depth) {
  Attribute out;
  switch (a.type()) {
    case onnx::AttributeProto::FLOAT:
      out.type = Attribute::Type::kFloat;
      out.f = a.f();
      break;
    case onnx::AttributeProto::INT:
      out.type = Attribute::Type::kInt;
      out.i = a.i();
      break;
    case onnx::AttributeProto::STRING:
      out.type = Attribute::Type::kString;
      out.s = a.s();
      break;
    case onnx::AttributeProto::TENSOR: {
      out.type = Attribute::Type::kTensor;
      KILN_ASSIGN_OR_RETURN(out.t, TensorFromProto(a.t(), model_dir, what));
      break;
    }
    case onnx::AttributeProto::FLOATS:
      out.type = Attribute::Type::kFloats;
      out.floats.assign(a.floats().begin(), a.floats().end());
      break;
    case onnx::AttributeProto::INTS:
      out.type = Attribute::Type::kInts;
      out.ints.assign(a.ints().begin(), a.ints().end());
      break;
    case onnx::AttributeProto::STRINGS:
      out.type = Attribute::Type::kStrings;
      out.strings.assign(a.strings().begin(), a.strings().end());
      break;
    case onnx::AttributeProto::GRAPH: {
      out.type = Attribute::Type::kGraph;
      if (depth >= kMaxSubgraphDepth)
        return InvalidModel(what + ": subgraphs nest deeper than " +
                            std::to_string(kMaxSubgraphDepth) + " levels");
      auto sub = ConvertGraph(*a.mutable_g(), opsets, model_dir, scope, depth + 1);
      if (!sub.ok()) return Status(sub.status()).AddContext("in the subgraph of " + what);
      out.g = std::move(sub).value();
      break;
    }
    case onnx::AttributeProto::TYPE_PROTO:
      out.type = Attribute::Type::kOther;
      out.tp = TypeOf(a.tp());
      break;
    default:
      out.type = Attribute::Type::kOther;
      break;
  }
  return out;
}

StatusOr<std::unique_ptr<ir::Graph>> ConvertGraph(onnx::GraphProto& gp,
                                                  const std::map<std::string, int>& opsets,
                                                  const std::string& model_dir, const Scope* outer,
                                                  int depth) {
  auto g = std::make_unique<ir::Graph>();
  g->name = gp.name();
  g->opset_imports = opsets;
  g->graph_doc_string = gp.doc_string();
  for (int ii = 0; ii < gp.initializer_size(); ++ii) {
    const onnx::TensorProto& init = gp.initializer(ii);
    int id = g->GetOrAddValue(init.name());
    if (g->values[id].constant)
      return InvalidModel("initializer '" + init.name() + "' is defined twice");
    KILN_ASSIGN_OR_RETURN(Tensor t,
                          TensorFromProto(init, model_dir, "initializer '" + init.name() + "'"));
    ir::Value& v = g->values[id];
    v.dtype = t.dtype();
    std::vector<ir::Dim> dims;
    for (int64_t d : t.shape()) dims.push_back(ir::Dim{d, ""});
    v.shape = dims;
    v.constant = std::make_shared<const Tensor>(std::move(t));
    gp.mutable_initializer(ii)->clear_raw_data();
  }
  for (const auto& in : gp.input()) {
    int id = g->GetOrAddValue(in.name());
    if (g->values[id].constant) continue;  // IR < 4 lists initializers as inputs too
    FillType(in.type(), &g->values[id]);
    g->inputs.push_back(id);
  }
  for (const auto& vi : gp.value_info()) {
    int id = g->GetOrAddValue(vi.name());
    if (!g->values[id].constant) FillType(vi.type(), &g->values[id]);
  }
  // What a subgraph of this graph may read: the enclosing scope plus everything defined here.
  Scope visible;
  bool has_subgraphs = false;
  for (const auto& np : gp.node())
    for (const auto& a : np.attribute())
      has_subgraphs = has_subgraphs || a.type() == onnx::AttributeProto::GRAPH;
  if (has_subgraphs) {
    if (outer) visible = *outer;
    for (const auto& init : gp.initializer()) visible.insert(init.name());
    for (const auto& in : gp.input()) visible.insert(in.name());
    for (const auto& np : gp.node())
      for (const auto& o : np.output())
        if (!o.empty()) visible.insert(o);
  }

  for (int ni = 0; ni < gp.node_size(); ++ni) {
    auto& np = *gp.mutable_node(ni);
    ir::Node node;
    node.op_type = np.op_type();
    node.domain = np.domain() == "ai.onnx" ? "" : np.domain();
    node.name = np.name().empty() ? node.op_type + "_" + std::to_string(ni) : np.name();
    auto it = g->opset_imports.find(node.domain);
    node.opset = it == g->opset_imports.end() ? 0 : it->second;
    if (it == g->opset_imports.end())
      return InvalidModel("node '" + node.name + "' (" + node.op_type + ") uses domain '" +
                          node.domain + "' which the model does not import");
    KILN_RETURN_IF_ERROR(CheckRequiredInputs(np, node.opset));
    for (const auto& in : np.input()) {
      if (in.empty()) {
        node.inputs.push_back(-1);
        continue;
      }
      int id = g->FindValue(in);
      if (id < 0) id = g->GetOrAddValue(in);  // checked after all nodes are read
      node.inputs.push_back(id);
    }
    for (const auto& out : np.output()) {
      if (out.empty()) {
        node.outputs.push_back(-1);
        continue;
      }
      int id = g->GetOrAddValue(out);
      ir::Value& v = g->values[id];
      if (v.producer >= 0 || v.constant ||
          std::find(g->inputs.begin(), g->inputs.end(), id) != g->inputs.end())
        return InvalidModel("node '" + node.name + "' (" + node.op_type + ") output '" + out +
                            "' is already defined elsewhere (SSA violated)");
      v.producer = static_cast<int>(g->nodes.size());
      node.outputs.push_back(id);
    }
    std::vector<std::string> captured;  // outer names the node's subgraphs read, first use first
    for (auto& a : *np.mutable_attribute()) {
      KILN_ASSIGN_OR_RETURN(
          node.attrs[a.name()],
          ConvertAttribute(a, model_dir, "attribute '" + a.name() + "' of node '" + node.name + "'",
                           opsets, &visible, depth));
      const ir::Attribute& at = node.attrs[a.name()];
      if (at.g)
        for (int c : at.g->captures)
          if (std::find(captured.begin(), captured.end(), at.g->values[c].name) == captured.end())
            captured.push_back(at.g->values[c].name);
    }
    if (!captured.empty()) {
      // Every subgraph of the node binds the same list, in the same order, to the node's
      // implicit inputs (a branch that does not read a name gets an unused value for it).
      for (auto& [name, at] : node.attrs) {
        if (!at.g) continue;
        auto sub = std::make_shared<ir::Graph>(*at.g);
        sub->captures.clear();
        for (const std::string& c : captured) sub->captures.push_back(sub->GetOrAddValue(c));
        at.g = std::move(sub);
      }
      for (const std::string& c : captured) {
        int id = g->FindValue(c);
        if (id < 0) id = g->GetOrAddValue(c);
        node.inputs.push_back(id);
      }
      node.implicit_inputs = static_cast<int>(captured.size());
    }
    g->nodes.push_back(std::move(node));
  }
  for (const auto& node : g->nodes) {
    for (int id : node.inputs) {
      if (id < 0) continue;
      const ir::Value& v = g->values[id];
      bool is_input = std::find(g->inputs.begin(), g->inputs.end(), id) != g->inputs.end();
      if (v.producer >= 0 || v.constant || is_input) continue;
      if (outer != nullptr && outer->count(v.name)) {
        if (std::find(g->captures.begin(), g->captures.end(), id) == g->captures.end())
          g->captures.push_back(id);
        continue;
      }
      return InvalidModel(node.Describe() + " reads '" + v.name + "', which is not " +
                          (outer ? "defined in this subgraph or an enclosing graph"
                                 : "a graph input, an initializer or any node's output"));
    }
  }
  for (const auto& out : gp.output()) {
    int id = g->FindValue(out.name());
    if (id < 0 && outer != nullptr && outer->count(out.name())) {
      // A body may pass an outer value straight through as its output.
      id = g->GetOrAddValue(out.name());
      g->captures.push_back(id);
    }
    if (id < 0)
      return InvalidModel("graph output '" + out.name() + "' is not produced by any node");
    ir::Value& v = g->values[id];
    if (v.dtype == DataType::kUndefined || !v.shape) FillType(out.type(), &v);
    g->outputs.push_back(id);
  }
  return g;
}

// The external-data locations of every tensor in `gp` and its subgraphs (initializers and tensor
// attributes), each once.
void CollectExternalData(const onnx::GraphProto& gp, std::set<std::string>* out) {
  auto add = [&](const onnx::TensorProto& t) {
    if (t.data_location() != onnx::TensorProto::EXTERNAL) return;
    for (const auto& kv : t.external_data())
      if (kv.key() == "location") out->insert(kv.value());
  };
  for (const auto& t : gp.initializer()) add(t);
  for (const auto& n : gp.node())
    for (const auto& a : n.attribute()) {
      if (a.has_t()) add(a.t());
      for (const auto& t : a.tensors()) add(t);
      if (a.has_g()) CollectExternalData(a.g(), out);
      for (const auto& g : a.graphs()) CollectExternalData(g, out);
    }
}

StatusOr<std::unique_ptr<ir::Graph>> Convert(onnx::ModelProto& model,
                                             const std::string& model_dir) {
  std::map<std::string, int> opsets;
  for (const auto& op : model.opset_import()) {
    std::string d = op.domain() == "ai.onnx" ? "" : op.domain();
    opsets[d] = static_cast<int>(op.version());
  }
  if (model.opset_import_size() == 0) opsets[""] = 1;  // IR v1/v2 default
  KILN_ASSIGN_OR_RETURN(auto g,
                        ConvertGraph(*model.mutable_graph(), opsets, model_dir, nullptr, 0));
  g->ir_version = model.ir_version();
  std::set<std::string> external;
  CollectExternalData(model.graph(), &external);
  g->external_data.assign(external.begin(), external.end());
  g->producer = model.producer_name() +
                (model.producer_version().empty() ? "" : " " + model.producer_version());
  g->producer_name = model.producer_name();
  g->producer_version = model.producer_version();
  g->domain = model.domain();
  g->model_version = model.model_version();
  g->doc_string = model.doc_string();
  for (const auto& kv : model.metadata_props())
    g->metadata_props.emplace_back(kv.key(), kv.value());
  return g;
}

StatusOr<std::unique_ptr<ir::Graph>> LoadModelProto(onnx::ModelProto& model,
                                                    const std::string& model_dir) {
  if (!model.has_graph()) return InvalidModel("not a valid ONNX model: it has no graph");
  // ONNX's checker, node by node: a node whose op ONNX itself does not know (custom domains,
  // newer opsets) is left for kiln's own unsupported-node report, which lists all of them at once.
  onnx::checker::CheckerContext ctx;
  ctx.set_ir_version(static_cast<int>(model.ir_version()));
  std::unordered_map<std::string, int> opsets;
  for (const auto& op : model.opset_import()) opsets[op.domain()] = static_cast<int>(op.version());
  ctx.set_opset_imports(opsets);
  ctx.set_model_dir(model_dir);
  // Outer-scope names, so If/Loop/Scan bodies that read them pass the checker's subgraph check.
  onnx::checker::LexicalScopeContext lex;
  for (const auto& init : model.graph().initializer()) lex.add(init.name());
  for (const auto& in : model.graph().input()) lex.add(in.name());
  for (const auto& node : model.graph().node())
    for (const auto& o : node.output()) lex.add(o);
  // Debian's libonnx knows each domain's schemas up to some opset (ai.onnx 17 for 1.12): a node of
  // a newer opset would be checked against an older schema (ReduceMean-13 for a ReduceMean-18
  // with `axes` as an input) and wrongly refused. Such nodes are validated by kiln's own op
  // definitions alone (attributes, input counts, shapes), which know versions up to kMaxOpset.
  const auto& known = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
  auto checker_knows = [&](const std::string& domain) {
    const std::string d = domain == "ai.onnx" ? "" : domain;
    const auto it = opsets.find(domain);
    const auto range = known.find(d);
    return it == opsets.end() || range == known.end() || it->second <= range->second.second;
  };
  for (const auto& node : model.graph().node()) {
    if (!checker_knows(node.domain())) continue;  // inputs: CheckRequiredInputs
    try {
      onnx::checker::check_node(node, ctx, lex);
    } catch (const std::exception& e) {
      std::string msg = e.what();
      if (msg.find("No Op registered") != std::string::npos ||
          msg.find("No opset import") != std::string::npos)
        continue;  // inputs: CheckRequiredInputs
      return InvalidModel("ONNX checker rejected node '" + node.name() + "' (" + node.op_type() +
                          "): " + msg);
    }
  }
  // ONNX's own shape inference is deliberately not run: libonnx 1.12 divides by zero (SIGFPE)
  // on a pooling node with strides 0 (found by tests/runtime/loader_test.cc), so it is unsafe on
  // untrusted files. kiln infers shapes itself, per op, after validating each node's attributes.
  return Convert(model, model_dir);
}

}  // namespace

StatusOr<std::unique_ptr<ir::Graph>> LoadModelFromBytes(const std::string& bytes,
                                                        const std::string& model_dir) {
  onnx::ModelProto model;
  if (!model.ParseFromString(bytes))
    return InvalidModel("not a valid ONNX model: protobuf parsing failed (" +
                        std::to_string(bytes.size()) + " bytes)");
  return LoadModelProto(model, model_dir);
}

StatusOr<std::unique_ptr<ir::Graph>> LoadModel(const std::string& path) {
  // Parsed straight from the file (no intermediate copy of the whole file in memory).
  std::ifstream f(path, std::ios::binary);
  if (!f) return NotFound("cannot open model file '" + path + "'");
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  onnx::ModelProto model;
  StatusOr<std::unique_ptr<ir::Graph>> g =
      model.ParseFromIstream(&f) ? LoadModelProto(model, dir)
                                 : StatusOr<std::unique_ptr<ir::Graph>>(InvalidModel(
                                       "not a valid ONNX model: protobuf parsing failed"));
  if (!g.ok()) return Status(g.status()).AddContext("while loading '" + path + "'");
  return g;
}

}  // namespace kiln::onnxio
