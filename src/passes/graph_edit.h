// GraphEditor: the graph surgery every pass uses. It wraps an ir::Graph, keeps per-value consumer
// lists up to date while a pass removes nodes, rewires inputs and adds constants, and Commit()
// restores ir::Graph's invariants in one go: removed nodes and values nothing references any more
// are dropped (releasing replaced weights), Value::producer is recomputed, nodes are re-sorted
// topologically (stable, so file order is kept wherever it is valid) and the name index rebuilt.
//
// Node indices stay stable until Commit(); value ids stay stable until Commit(). Graph output
// values are never renamed: a pass that removes the producer of a graph output must make another
// node produce that same value. Not thread-safe.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "kiln/status.h"
#include "kiln/tensor.h"

namespace kiln::passes {

class GraphEditor {
 public:
  explicit GraphEditor(ir::Graph& graph);

  ir::Graph& graph() { return g_; }
  int num_nodes() const { return static_cast<int>(g_.nodes.size()); }
  bool alive(int node) const { return !dead_[node]; }
  const ir::Node& node(int i) const { return g_.nodes[i]; }
  // For attribute, name and op_type changes only; inputs and outputs go through the setters.
  ir::Node& mutable_node(int i) { return g_.nodes[i]; }
  const ir::Value& value(int v) const { return g_.values[v]; }

  // Live nodes reading `v`, one entry per use (a node reading v twice appears twice).
  const std::vector<int>& Consumers(int v) const { return consumers_[v]; }
  bool IsGraphOutput(int v) const;
  bool IsGraphInput(int v) const;
  // The one live node reading `v` (once), provided `v` is not a graph output; -1 otherwise.
  int SoleConsumer(int v) const;
  // The live node producing `v`, or -1.
  int Producer(int v) const;
  // v's constant payload, or nullptr (also for v < 0).
  const Tensor* ConstantOf(int v) const;
  // The value of a one-element numeric constant, as double.
  std::optional<double> ScalarOf(int v) const;

  void SetInput(int node, size_t slot, int v);  // slot == inputs.size() appends
  void SetOutput(int node, size_t slot, int v);
  // Every live node input reading `from` reads `to` instead; graph outputs are not touched.
  void ReplaceUses(int from, int to);
  void RemoveNode(int node);
  // Appends a node (its inputs and outputs must be valid value ids or -1); returns its index.
  // Prefer ReplaceNode where a node of the pattern can be reused: an appended node is sorted
  // after every independent node, which changes execution order.
  int AddNode(ir::Node node);
  // Replaces live node `index` by `node` (uses and producers updated), keeping its position.
  void ReplaceNode(int index, ir::Node node);
  // A new constant value named after `base` (made unique).
  int AddConstant(const std::string& base, Tensor t);
  // A new non-constant value named after `base` (made unique), with its dtype and declared shape.
  int AddValue(const std::string& base, DataType dtype, std::optional<std::vector<ir::Dim>> shape);
  // Makes `v` a constant (its producer, if any, must be removed by the caller).
  void MakeConstant(int v, Tensor t);
  // A fresh, unused value name derived from `base`.
  std::string UniqueName(const std::string& base) const;

  bool changed() const { return changed_; }
  // Compacts and re-sorts the graph (see above) and re-initialises the editor on the result.
  // Internal error when the edits left the graph inconsistent (a cycle, a value produced twice).
  Status Commit();

 private:
  void Init();
  void EraseUse(int v, int node);

  ir::Graph& g_;
  std::vector<std::vector<int>> consumers_;
  std::vector<char> dead_;
  std::vector<char> is_output_, is_input_;
  bool changed_ = false;
};

// Attribute constructors for rewritten nodes.
ir::Attribute StringAttr(const std::string& s);
ir::Attribute FloatAttr(float f);
ir::Attribute IntAttr(int64_t i);

// A Cast node `name` from value `in` to value `out` with target type `to`, at the graph's
// default-domain opset.
ir::Node CastNode(const ir::Graph& graph, std::string name, int in, int out, DataType to);

// Makes the graph import domain "kiln" at opset 1 (kiln's fused ops); false, changing nothing,
// when the model already imports "kiln" at another version.
bool ImportKilnDomain(ir::Graph& graph);

// True when `node` is the ai.onnx op `op_type`.
inline bool IsOnnxOp(const ir::Node& node, const char* op_type) {
  return node.domain.empty() && node.op_type == op_type;
}
// True when the graph has a node of any of the ai.onnx `op_types` (passes use it to skip work).
bool HasOnnxOp(const ir::Graph& graph, std::initializer_list<const char*> op_types);
// Evaluates `node`, whose inputs are all constants (or absent), with its op's reference kernel,
// makes its outputs constants and removes it. False, changing nothing, when the op is unknown,
// its inference or kernel fails, or its outputs would exceed its inputs by more than
// `max_growth_bytes` (Expand, Tile, ConstantOfShape blowing small tensors up).
bool FoldNode(GraphEditor& ed, int node, int64_t max_growth_bytes);

// A float32 constant `v` that adds the same row to every row of a rank-`out_rank` result with
// `n` columns (dims all 1 but the last, which is n or 1; rank <= out_rank), as an [n] tensor;
// nullopt otherwise (the bias of MatMul -> Add, Gemm's C).
std::optional<Tensor> RowBiasOf(const GraphEditor& ed, int v, int64_t n, int64_t out_rank);

// True when `node` is kiln's `op_type` (domain "kiln").
inline bool IsKilnOp(const ir::Node& node, const char* op_type) {
  return node.domain == "kiln" && node.op_type == op_type;
}

}  // namespace kiln::passes
