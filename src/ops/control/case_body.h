// Subgraphs built in code for the kernel cases (ops/op_cases.h) of ops with bodies: If, Loop,
// Scan (cpu.<op>.subplan against the interpreted bodies) and SequenceMap. A case node binds no
// outer values, so bodies read only their own inputs and constants (a nested If reads its Loop
// body's values). Not thread-safe while being built; the Attr() graph is shared, immutable.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ir/graph.h"

namespace kiln::ops {

class CaseBody {
 public:
  explicit CaseBody(int opset) : opset_(opset) { g_->opset_imports[""] = opset; }
  CaseBody& Input(const std::string& name, DataType dtype, const Shape& shape) {
    g_->inputs.push_back(Typed(name, dtype, shape));
    return *this;
  }
  // An input of unknown rank (items of a sequence whose shapes differ).
  CaseBody& Input(const std::string& name, DataType dtype) {
    const int id = g_->GetOrAddValue(name);
    g_->values[id].dtype = dtype;
    g_->inputs.push_back(id);
    return *this;
  }
  CaseBody& Constant(const std::string& name, const Tensor& t) {
    g_->values[Typed(name, t.dtype(), t.shape())].constant = std::make_shared<const Tensor>(t);
    return *this;
  }
  CaseBody& Node(const std::string& op, const std::vector<std::string>& in,
                 const std::string& out) {
    ir::Node n;
    n.name = out;
    n.op_type = op;
    n.opset = opset_;
    for (const std::string& i : in) n.inputs.push_back(g_->GetOrAddValue(i));
    n.outputs.push_back(g_->GetOrAddValue(out));
    g_->values[n.outputs[0]].producer = static_cast<int>(g_->nodes.size());
    g_->nodes.push_back(std::move(n));
    return *this;
  }
  // A value of the enclosing graph this (nested) body reads.
  CaseBody& Capture(const std::string& name) {
    g_->captures.push_back(g_->GetOrAddValue(name));
    return *this;
  }
  // A node whose `bodies` read `captured` values of this graph (its implicit inputs).
  CaseBody& Nested(const std::string& op, const std::string& in, const std::string& out,
                   const std::map<std::string, ir::Attribute>& bodies,
                   const std::vector<std::string>& captured) {
    Node(op, {in}, out);
    ir::Node& n = g_->nodes.back();
    for (const std::string& c : captured) n.inputs.push_back(g_->GetOrAddValue(c));
    n.implicit_inputs = static_cast<int>(captured.size());
    n.attrs = bodies;
    return *this;
  }
  CaseBody& Output(const std::string& name) {
    g_->outputs.push_back(g_->GetOrAddValue(name));
    return *this;
  }
  CaseBody& Output(const std::string& name, DataType dtype) {
    const int id = g_->GetOrAddValue(name);
    g_->values[id].dtype = dtype;
    g_->outputs.push_back(id);
    return *this;
  }
  CaseBody& Output(const std::string& name, DataType dtype, const Shape& shape) {
    g_->outputs.push_back(Typed(name, dtype, shape));
    return *this;
  }
  ir::Attribute Attr() const {
    ir::Attribute a;
    a.type = ir::Attribute::Type::kGraph;
    a.g = g_;
    return a;
  }

 private:
  int Typed(const std::string& name, DataType dtype, const Shape& shape) {
    const int id = g_->GetOrAddValue(name);
    g_->values[id].dtype = dtype;
    std::vector<ir::Dim> dims;
    for (int64_t d : shape) dims.push_back(ir::Dim{d, ""});
    g_->values[id].shape = dims;
    return id;
  }
  int opset_;
  std::shared_ptr<ir::Graph> g_ = std::make_shared<ir::Graph>();
};

}  // namespace kiln::ops
