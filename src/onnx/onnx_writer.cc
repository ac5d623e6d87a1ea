// See onnx_writer.h.
#include "onnx/onnx_writer.h"

#include <onnx/onnx_pb.h>

#include <vector>

#include "onnx/tensor_proto_internal.h"

namespace kiln::onnxio {
namespace {

using ir::Attribute;

// The TypeProto of `dtype` (a tensor type, sequence(T) or optional(X)) with `shape` for tensors.
void FillTypeProto(DataType dtype, const std::optional<std::vector<ir::Dim>>& shape,
                   onnx::TypeProto* type) {
  if (IsSequenceType(dtype)) {
    type->mutable_sequence_type()->mutable_elem_type()->mutable_tensor_type()->set_elem_type(
        static_cast<int>(ContainedType(dtype)));
    return;
  }
  if (IsOptionalType(dtype)) {
    FillTypeProto(ContainedType(dtype), std::nullopt,
                  type->mutable_optional_type()->mutable_elem_type());
    return;
  }
  auto* tensor = type->mutable_tensor_type();
  if (dtype != DataType::kUndefined) tensor->set_elem_type(static_cast<int>(dtype));
  if (!shape) return;
  auto* s = tensor->mutable_shape();
  for (const ir::Dim& d : *shape) {
    auto* dim = s->add_dim();
    if (d.fixed())
      dim->set_dim_value(d.value);
    else if (!d.param.empty())
      dim->set_dim_param(d.param);
  }
}

void FillValueInfo(const ir::Value& v, onnx::ValueInfoProto* info) {
  info->set_name(v.name);
  FillTypeProto(v.dtype, v.shape, info->mutable_type());
}

Status WriteGraph(const ir::Graph& g, bool top, int64_t ir_version, onnx::GraphProto* gp);

Status WriteAttribute(const std::string& name, const Attribute& a, const ir::Node& node,
                      int64_t ir_version, onnx::AttributeProto* out) {
  out->set_name(name);
  switch (a.type) {
    case Attribute::Type::kFloat:
      out->set_type(onnx::AttributeProto::FLOAT);
      out->set_f(a.f);
      break;
    case Attribute::Type::kInt:
      out->set_type(onnx::AttributeProto::INT);
      out->set_i(a.i);
      break;
    case Attribute::Type::kString:
      out->set_type(onnx::AttributeProto::STRING);
      out->set_s(a.s);
      break;
    case Attribute::Type::kTensor:
      out->set_type(onnx::AttributeProto::TENSOR);
      KILN_RETURN_IF_ERROR(TensorToProto(a.t, "", out->mutable_t()));
      break;
    case Attribute::Type::kFloats:
      out->set_type(onnx::AttributeProto::FLOATS);
      for (float f : a.floats) out->add_floats(f);
      break;
    case Attribute::Type::kInts:
      out->set_type(onnx::AttributeProto::INTS);
      for (int64_t i : a.ints) out->add_ints(i);
      break;
    case Attribute::Type::kStrings:
      out->set_type(onnx::AttributeProto::STRINGS);
      for (const auto& s : a.strings) out->add_strings(s);
      break;
    case Attribute::Type::kGraph:
      out->set_type(onnx::AttributeProto::GRAPH);
      if (a.g == nullptr)
        return Internal(node.Describe() + ": attribute '" + name + "' has no graph");
      KILN_RETURN_IF_ERROR(WriteGraph(*a.g, false, ir_version, out->mutable_g()));
      break;
    case Attribute::Type::kOther:
      if (a.tp == DataType::kUndefined)
        return Unsupported(node.Describe() + ": attribute '" + name +
                           "' is of a kind kiln does not keep (sparse tensor, list of tensors or "
                           "graphs, or an unknown type), so the model cannot be written");
      out->set_type(onnx::AttributeProto::TYPE_PROTO);
      FillTypeProto(a.tp, std::nullopt, out->mutable_tp());
      break;
  }
  return OkStatus();
}

Status WriteGraph(const ir::Graph& g, bool top, int64_t ir_version, onnx::GraphProto* gp) {
  gp->set_name(g.name);
  if (!g.graph_doc_string.empty()) gp->set_doc_string(g.graph_doc_string);
  // Initializers: constants no node here produces (a folded node's output is one too).
  for (const ir::Value& v : g.values) {
    if (!v.constant || v.producer >= 0) continue;
    KILN_RETURN_IF_ERROR(TensorToProto(*v.constant, v.name, gp->add_initializer()));
  }
  for (int id : g.inputs) FillValueInfo(g.values[id], gp->add_input());
  // Before IR version 4 every initializer is also a graph input.
  if (top && ir_version > 0 && ir_version < 4)
    for (const ir::Value& v : g.values)
      if (v.constant && v.producer < 0) FillValueInfo(v, gp->add_input());
  KILN_ASSIGN_OR_RETURN(std::vector<int> order, g.TopologicalOrder());
  for (int ni : order) {
    const ir::Node& n = g.nodes[ni];
    onnx::NodeProto* np = gp->add_node();
    np->set_name(n.name);
    np->set_op_type(n.op_type);
    if (!n.domain.empty()) np->set_domain(n.domain);
    // Outer-scope reads (the implicit inputs) are by name inside the subgraphs.
    for (size_t k = 0; k < n.num_explicit_inputs(); ++k)
      np->add_input(n.inputs[k] >= 0 ? g.values[n.inputs[k]].name : "");
    for (int o : n.outputs) np->add_output(o >= 0 ? g.values[o].name : "");
    for (const auto& [name, a] : n.attrs)
      KILN_RETURN_IF_ERROR(WriteAttribute(name, a, n, ir_version, np->add_attribute()));
  }
  for (int id : g.outputs) FillValueInfo(g.values[id], gp->add_output());
  return OkStatus();
}

}  // namespace

StatusOr<std::string> SerializeModel(const ir::Graph& graph) {
  onnx::ModelProto m;
  m.set_ir_version(graph.ir_version);
  for (const auto& [domain, version] : graph.opset_imports) {
    auto* op = m.add_opset_import();
    op->set_domain(domain);
    op->set_version(version);
  }
  if (!graph.producer_name.empty()) m.set_producer_name(graph.producer_name);
  if (!graph.producer_version.empty()) m.set_producer_version(graph.producer_version);
  if (!graph.domain.empty()) m.set_domain(graph.domain);
  if (graph.model_version != 0) m.set_model_version(graph.model_version);
  if (!graph.doc_string.empty()) m.set_doc_string(graph.doc_string);
  for (const auto& [key, value] : graph.metadata_props) {
    auto* kv = m.add_metadata_props();
    kv->set_key(key);
    kv->set_value(value);
  }
  KILN_RETURN_IF_ERROR(WriteGraph(graph, true, graph.ir_version, m.mutable_graph()));
  std::string out;
  if (!m.SerializeToString(&out))
    return Unsupported("the model cannot be serialized (protobuf's limit is 2 GiB)");
  return out;
}

}  // namespace kiln::onnxio
