// Builds small ONNX ModelProtos in code: tests state their graph next to their assertions, and
// `kiln selftest` builds its kernel cases with it. Link onnx, onnx_proto and protobuf to use it.
#pragma once

#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

namespace kiln::onnxio {

class ModelBuilder {
 public:
  explicit ModelBuilder(int opset = 13) {
    model_.set_ir_version(8);
    auto* op = model_.add_opset_import();
    op->set_domain("");
    op->set_version(opset);
    model_.mutable_graph()->set_name("test");
  }

  // dims: >= 0 fixed, -1 symbolic ("N").
  ModelBuilder& Input(const std::string& name, int elem_type, const std::vector<int64_t>& dims) {
    FillValue(model_.mutable_graph()->add_input(), name, elem_type, dims);
    return *this;
  }
  ModelBuilder& Output(const std::string& name, int elem_type, const std::vector<int64_t>& dims) {
    FillValue(model_.mutable_graph()->add_output(), name, elem_type, dims);
    return *this;
  }
  // Names dimension `dim` of graph input `input` `param` (a symbolic dimension is "N" otherwise):
  // inputs whose open dimensions may differ.
  ModelBuilder& InputDimParam(int input, int dim, const std::string& param) {
    model_.mutable_graph()
        ->mutable_input(input)
        ->mutable_type()
        ->mutable_tensor_type()
        ->mutable_shape()
        ->mutable_dim(dim)
        ->set_dim_param(param);
    return *this;
  }
  // A graph output of unknown shape (left to shape inference).
  ModelBuilder& OutputAnyShape(const std::string& name, int elem_type) {
    Output(name, elem_type, {});
    auto* g = model_.mutable_graph();
    g->mutable_output(g->output_size() - 1)->mutable_type()->mutable_tensor_type()->clear_shape();
    return *this;
  }
  onnx::NodeProto& Node(const std::string& op_type, const std::vector<std::string>& inputs,
                        const std::vector<std::string>& outputs, const std::string& name = "",
                        const std::string& domain = "") {
    auto* n = model_.mutable_graph()->add_node();
    n->set_op_type(op_type);
    n->set_name(name.empty() ? op_type + std::to_string(model_.graph().node_size()) : name);
    n->set_domain(domain);
    for (const auto& i : inputs) n->add_input(i);
    for (const auto& o : outputs) n->add_output(o);
    return *n;
  }
  onnx::TensorProto& FloatInit(const std::string& name, const std::vector<int64_t>& dims,
                               const std::vector<float>& values) {
    auto* t = model_.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (auto d : dims) t->add_dims(d);
    for (float v : values) t->add_float_data(v);
    return *t;
  }
  onnx::TensorProto& Int64Init(const std::string& name, const std::vector<int64_t>& dims,
                               const std::vector<int64_t>& values) {
    auto* t = model_.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    for (auto d : dims) t->add_dims(d);
    for (int64_t v : values) t->add_int64_data(v);
    return *t;
  }
  // PyTorch's erf-form GELU, y = (x * (1 + Erf(x / divisor))) * 0.5, its constants and
  // intermediate values named after y ("<y>_sqrt2", "<y>_g1", ...); divisor sqrt(2) as float32
  // unless a test wants a near miss.
  ModelBuilder& GeluErfForm(const std::string& x, const std::string& y,
                            float divisor = 1.4142135381698608f) {
    FloatInit(y + "_sqrt2", {}, {divisor});
    FloatInit(y + "_one", {}, {1.f});
    FloatInit(y + "_half", {}, {0.5f});
    Node("Div", {x, y + "_sqrt2"}, {y + "_g1"});
    Node("Erf", {y + "_g1"}, {y + "_g2"});
    Node("Add", {y + "_g2", y + "_one"}, {y + "_g3"});
    Node("Mul", {x, y + "_g3"}, {y + "_g4"});
    Node("Mul", {y + "_g4", y + "_half"}, {y});
    return *this;
  }
  ModelBuilder& ImportDomain(const std::string& domain, int version) {
    auto* op = model_.add_opset_import();
    op->set_domain(domain);
    op->set_version(version);
    return *this;
  }
  onnx::ModelProto& proto() { return model_; }
  std::string Bytes() const { return model_.SerializeAsString(); }

  static void IntAttr(onnx::NodeProto& n, const std::string& name, int64_t v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void FloatAttr(onnx::NodeProto& n, const std::string& name, float v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(v);
  }
  static void StringAttr(onnx::NodeProto& n, const std::string& name, const std::string& v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(v);
  }
  static void StringsAttr(onnx::NodeProto& n, const std::string& name,
                          const std::vector<std::string>& v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::STRINGS);
    for (const auto& x : v) a->add_strings(x);
  }
  static void IntsAttr(onnx::NodeProto& n, const std::string& name, const std::vector<int64_t>& v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (auto x : v) a->add_ints(x);
  }

  // A control-flow body (If's branches, Loop's and Scan's body), built like the model's graph
  // and attached to a node with GraphAttr. Names a body reads and does not define come from the
  // enclosing graphs.
  class Subgraph {
   public:
    Subgraph& Input(const std::string& name, int elem_type, const std::vector<int64_t>& dims) {
      FillValue(g_.add_input(), name, elem_type, dims);
      return *this;
    }
    Subgraph& Output(const std::string& name, int elem_type, const std::vector<int64_t>& dims) {
      FillValue(g_.add_output(), name, elem_type, dims);
      return *this;
    }
    // Named "<op_type>_<first output>".
    onnx::NodeProto& Node(const std::string& op_type, const std::vector<std::string>& inputs,
                          const std::vector<std::string>& outputs) {
      auto* n = g_.add_node();
      n->set_op_type(op_type);
      n->set_name(op_type + "_" + outputs.at(0));
      for (const auto& i : inputs) n->add_input(i);
      for (const auto& o : outputs) n->add_output(o);
      return *n;
    }
    void Int64Init(const std::string& name, const std::vector<int64_t>& dims,
                   const std::vector<int64_t>& values) {
      auto* t = g_.add_initializer();
      t->set_name(name);
      t->set_data_type(onnx::TensorProto::INT64);
      for (auto d : dims) t->add_dims(d);
      for (int64_t v : values) t->add_int64_data(v);
    }
    const onnx::GraphProto& proto() const { return g_; }

   private:
    onnx::GraphProto g_;
  };
  static void GraphAttr(onnx::NodeProto& n, const std::string& name, const Subgraph& body) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::GRAPH);
    *a->mutable_g() = body.proto();
    a->mutable_g()->set_name(name);
  }

 private:
  static void FillValue(onnx::ValueInfoProto* v, const std::string& name, int elem_type,
                        const std::vector<int64_t>& dims) {
    v->set_name(name);
    auto* tt = v->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elem_type);
    auto* shape = tt->mutable_shape();
    for (auto d : dims) {
      auto* dim = shape->add_dim();
      if (d >= 0)
        dim->set_dim_value(d);
      else
        dim->set_dim_param("N");
    }
  }
  onnx::ModelProto model_;
};

}  // namespace kiln::onnxio
