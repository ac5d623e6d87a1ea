// The in-memory graph kiln optimizes and executes: Values (tensors flowing between nodes, with
// dtype, possibly symbolic shape, and a constant payload for weights) and Nodes (ONNX op type,
// domain, the opset the model imports for that domain, typed-on-demand attributes). Owned by a
// Session; immutable after loading except through passes. Not thread-safe for mutation.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kiln/status.h"
#include "kiln/tensor.h"

namespace kiln::ir {

// One dimension of a declared shape: a fixed size (value >= 0) or a symbol ("N") / unknown (-1).
struct Dim {
  int64_t value = -1;
  std::string param;
  bool fixed() const { return value >= 0; }
};

struct Graph;

struct Attribute {
  enum class Type { kFloat, kInt, kString, kTensor, kFloats, kInts, kStrings, kGraph, kOther };
  Type type = Type::kOther;
  float f = 0;
  int64_t i = 0;
  std::string s;
  Tensor t;
  std::vector<float> floats;
  std::vector<int64_t> ints;
  std::vector<std::string> strings;
  // kGraph: a control-flow body (If's branches, Loop's and Scan's body), immutable once loaded.
  std::shared_ptr<const Graph> g;
  // A TypeProto attribute (Optional's `type`; Type stays kOther): the kiln DataType it names
  // (a tensor, sequence or optional type), kUndefined when it names none kiln has.
  DataType tp = DataType::kUndefined;
};

struct Value {
  std::string name;
  DataType dtype = DataType::kUndefined;
  std::optional<std::vector<Dim>> shape;   // nullopt: rank unknown
  std::shared_ptr<const Tensor> constant;  // initializer or folded Constant output
  int producer = -1;                       // node index, -1 for graph inputs and initializers
};

struct Node {
  std::string name;
  std::string op_type;
  std::string domain;        // "" for ai.onnx
  int opset = 0;             // the opset version the model imports for `domain`
  std::vector<int> inputs;   // value ids; -1 marks an omitted optional input
  std::vector<int> outputs;  // value ids; -1 marks an omitted optional output
  std::map<std::string, Attribute> attrs;
  // The last `implicit_inputs` entries of `inputs` are values of the enclosing graph that the
  // node's subgraphs read by name (ONNX's outer-scope references), in the order of every
  // subgraph's Graph::captures. They make the dependency visible to ordering, liveness and
  // passes; ops count only the explicit inputs before them.
  int implicit_inputs = 0;
  size_t num_explicit_inputs() const { return inputs.size() - implicit_inputs; }

  bool HasAttr(const std::string& n) const { return attrs.count(n) != 0; }
  int64_t GetInt(const std::string& n, int64_t def) const;
  float GetFloat(const std::string& n, float def) const;
  std::string GetString(const std::string& n, const std::string& def) const;
  std::vector<int64_t> GetInts(const std::string& n, std::vector<int64_t> def = {}) const;
  std::vector<float> GetFloats(const std::string& n, std::vector<float> def = {}) const;
  const Tensor* GetTensor(const std::string& n) const;
  bool HasInput(size_t i) const { return i < inputs.size() && inputs[i] >= 0; }
  // "Conv node 'conv1' (opset 13)" for messages.
  std::string Describe() const;
};

struct Graph {
  std::string name;
  int64_t ir_version = 0;
  std::string producer;
  std::map<std::string, int> opset_imports;  // domain -> version
  // The ModelProto's descriptive fields, kept for Session::metadata().
  std::string producer_name, producer_version, domain, doc_string, graph_doc_string;
  int64_t model_version = 0;
  std::vector<std::pair<std::string, std::string>> metadata_props;  // in file order
  // Top-level graph of a loaded file: the external-data files its tensors were read from,
  // relative to the model's folder (the weight store checks they are unchanged).
  std::vector<std::string> external_data;
  std::vector<Value> values;
  std::vector<Node> nodes;
  std::vector<int> inputs;  // graph inputs that are not initializers
  std::vector<int> outputs;
  // Subgraphs only: values read from the enclosing scope (no producer here), bound in order to
  // the owning node's implicit inputs; every subgraph of one node lists the same names.
  std::vector<int> captures;

  int FindValue(const std::string& name) const;
  // Returns the id of the value named `name`, creating it if needed.
  int GetOrAddValue(const std::string& name);
  // Node indices in dependency order; InvalidModel on a cycle or a value used before it exists.
  StatusOr<std::vector<int>> TopologicalOrder() const;
  // Rebuilds the name -> id index from `values`, for graph rewrites (src/passes) that drop or
  // renumber values. Names must be unique; Internal error naming the first duplicate otherwise.
  Status RebuildIndex();

 private:
  std::map<std::string, int> index_;
};

}  // namespace kiln::ir
