// See opset_convert.h. The opset-12 -> 13 changes are those of ONNX's Changelog.md (every other
// op's version 13 only widened its types).
#include "onnx/opset_convert.h"

#include <onnx/onnx_pb.h>
#include <onnx/version_converter/convert.h>

#include <functional>
#include <vector>

#include "core/fresh_names.h"

namespace kiln::onnxio {
namespace {

bool DefaultDomain(const std::string& d) { return d.empty() || d == "ai.onnx"; }

void CollectNames(const onnx::GraphProto& g, FreshNames* used) {
  for (const auto& t : g.initializer()) used->Take(t.name());
  for (const auto& v : g.input()) used->Take(v.name());
  for (const auto& n : g.node()) {
    used->Take(n.name());
    for (const auto& o : n.output()) used->Take(o);
    for (const auto& a : n.attribute()) {
      if (a.has_g()) CollectNames(a.g(), used);
      for (const auto& sub : a.graphs()) CollectNames(sub, used);
    }
  }
}

class Upgrader {
 public:
  explicit Upgrader(const onnx::GraphProto& main) { CollectNames(main, &names_); }

  // Rewrites the graph's nodes (and its subgraphs') in place.
  void Graph(onnx::GraphProto* g) {
    std::vector<onnx::NodeProto> out;
    out.reserve(static_cast<size_t>(g->node_size()));
    for (auto& n : *g->mutable_node()) {
      for (auto& a : *n.mutable_attribute()) {
        if (a.has_g()) Graph(a.mutable_g());
        for (auto& sub : *a.mutable_graphs()) Graph(&sub);
      }
      if (!DefaultDomain(n.domain())) {
        out.push_back(std::move(n));
        continue;
      }
      const std::string& op = n.op_type();
      if (op == "Split") {
        AttrToInput(&n, "split", 1, &out);
      } else if (op == "Squeeze" || op == "Unsqueeze" || op == "ReduceSum") {
        AttrToInput(&n, "axes", 1, &out);
      } else if (op == "Softmax" || op == "LogSoftmax" || op == "Hardmax") {
        CoercedAxis(&n, &out);
        continue;
      }
      out.push_back(std::move(n));
    }
    g->clear_node();
    for (auto& n : out) *g->add_node() = std::move(n);
  }

 private:
  std::string Fresh(const std::string& base) { return names_.Make(base); }

  // Moves the ints attribute `attr` to input `index` (a Constant node placed before the node).
  void AttrToInput(onnx::NodeProto* n, const std::string& attr, int index,
                   std::vector<onnx::NodeProto>* out) {
    auto* attrs = n->mutable_attribute();
    for (int i = 0; i < attrs->size(); ++i) {
      if (attrs->Get(i).name() != attr) continue;
      onnx::NodeProto c;
      c.set_op_type("Constant");
      const std::string value = Fresh(n->name().empty() ? attr : n->name() + "_" + attr);
      c.set_name(value);
      c.add_output(value);
      onnx::AttributeProto* v = c.add_attribute();
      v->set_name("value");
      v->set_type(onnx::AttributeProto::TENSOR);
      onnx::TensorProto* t = v->mutable_t();
      t->set_data_type(onnx::TensorProto::INT64);
      t->add_dims(attrs->Get(i).ints_size());
      for (int64_t x : attrs->Get(i).ints()) t->add_int64_data(x);
      out->push_back(std::move(c));
      while (n->input_size() < index) n->add_input("");
      if (n->input_size() == index)
        n->add_input(value);
      else
        n->set_input(index, value);
      attrs->DeleteSubrange(i, 1);
      return;
    }
  }

  // Opset 12's Softmax family flattens to 2-D at `axis` (default 1); opset 13's works along one
  // axis. Equal when the axis is -1; else Flatten(axis) -> op(axis -1) -> Reshape(Shape(x)).
  void CoercedAxis(onnx::NodeProto* n, std::vector<onnx::NodeProto>* out) {
    int64_t axis = 1;
    auto* attrs = n->mutable_attribute();
    for (int i = 0; i < attrs->size(); ++i)
      if (attrs->Get(i).name() == "axis") {
        axis = attrs->Get(i).i();
        attrs->DeleteSubrange(i, 1);
        break;
      }
    onnx::AttributeProto* last = n->add_attribute();
    last->set_name("axis");
    last->set_type(onnx::AttributeProto::INT);
    last->set_i(-1);
    if (axis == -1 || n->input_size() < 1 || n->output_size() < 1) {
      out->push_back(std::move(*n));
      return;
    }
    const std::string base = n->name().empty() ? n->op_type() : n->name();
    const std::string x = n->input(0), y = n->output(0);
    const std::string flat = Fresh(base + "_flat"), flat_y = Fresh(base + "_2d"),
                      shape = Fresh(base + "_shape");
    onnx::NodeProto f;
    f.set_op_type("Flatten");
    f.set_name(flat);
    f.add_input(x);
    f.add_output(flat);
    onnx::AttributeProto* fa = f.add_attribute();
    fa->set_name("axis");
    fa->set_type(onnx::AttributeProto::INT);
    fa->set_i(axis);
    onnx::NodeProto s;
    s.set_op_type("Shape");
    s.set_name(shape);
    s.add_input(x);
    s.add_output(shape);
    onnx::NodeProto r;
    r.set_op_type("Reshape");
    r.set_name(Fresh(base + "_reshape"));
    r.add_input(flat_y);
    r.add_input(shape);
    r.add_output(y);
    n->set_input(0, flat);
    n->set_output(0, flat_y);
    out->push_back(std::move(f));
    out->push_back(std::move(s));
    out->push_back(std::move(*n));
    out->push_back(std::move(r));
  }

  FreshNames names_;
};

}  // namespace

StatusOr<std::string> ConvertToOpset13(const std::string& model_bytes) {
  onnx::ModelProto m;
  if (!m.ParseFromString(model_bytes))
    return InvalidModel("failed to parse the ONNX model (protobuf)");
  int64_t opset = 0;
  for (const auto& o : m.opset_import())
    if (DefaultDomain(o.domain())) opset = o.version();
  if (opset >= 13) return model_bytes;
  if (opset < 12) {
    try {
      m = onnx::version_conversion::ConvertVersion(m, 12);
    } catch (const std::exception& e) {
      return Unsupported("ONNX's version converter cannot take the model from opset " +
                         std::to_string(opset) + " to 12: " + e.what());
    }
  }
  Upgrader(m.graph()).Graph(m.mutable_graph());
  for (auto& o : *m.mutable_opset_import())
    if (DefaultDomain(o.domain())) o.set_version(13);
  return m.SerializeAsString();
}

}  // namespace kiln::onnxio
