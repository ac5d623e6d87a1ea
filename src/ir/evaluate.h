// The one node evaluator: what plan building, constant folding and the shape probe each did by
// hand. Given what is known of a node's inputs (dtype, shape, and the value where it is known), it
// infers the outputs' dtypes and shapes with the op's Infer and, when every input has a value and
// the caller's limits allow, computes the outputs with the op's reference kernel (ir::Op::Compute).
// Plain data in, plain data out; no state, safe to call from any thread.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/op.h"

namespace kiln::ir {

// What is known of a node's inputs, one entry per input slot (omitted optional inputs have
// dtype kUndefined and no value). Filled by the caller from its own state.
struct NodeInputs {
  std::vector<DataType> dtypes;
  std::vector<Shape> shapes;
  std::vector<const Tensor*> values;  // nullptr where the value is not known
  void Clear() {
    dtypes.clear();
    shapes.clear();
    values.clear();
  }
  void AddMissing() { Add(DataType::kUndefined, Shape{}, nullptr); }
  void Add(DataType dtype, Shape shape, const Tensor* value) {
    dtypes.push_back(dtype);
    shapes.push_back(std::move(shape));
    values.push_back(value);
  }
  // Every present input has a value.
  bool AllValues() const;
  // Sum of the present inputs' element counts and bytes.
  int64_t Elements() const;
  size_t Bytes() const;
};

// When the reference kernel may run. Shapes are always inferred.
struct EvalPolicy {
  bool compute = true;
  // Skip computing when the inputs hold more elements than this (-1: no limit).
  int64_t max_input_elements = -1;
  // Skip computing when the outputs would hold more elements than this (-1: no limit).
  int64_t max_output_elements = -1;
  // Skip computing when the outputs would be more than this many bytes larger than the inputs
  // (-1: no limit): folding must not blow a small model up.
  int64_t max_growth_bytes = -1;
  // Compute nodes whose op is not deterministic (Op::Deterministic) too: set by callers that run
  // a graph (the control-flow interpreter), not by those that fold constants.
  bool run_nondeterministic = false;
};

struct NodeEvaluation {
  std::vector<DataType> dtypes;  // per output slot (kUndefined for omitted outputs)
  std::vector<Shape> shapes;
  std::vector<Tensor> values;  // defined where known: given by Infer, or computed
  bool all_values = false;     // every present output has a value
  bool computed = false;       // the reference kernel ran
};

// True when one of `op.ShapeInputs()` is present but its value is unknown: then the output
// shapes depend on data and cannot be inferred ahead of a run.
bool NeedsRuntimeValues(const Node& node, const Op& op, const NodeInputs& in);

// OK, or Unsupported naming the node, the input and its type, when a string, sequence or
// optional value (not IsPlainDataType) reaches an op that does not take them
// (Op::TakesNonPlainValues). `dtypes`: the node's input types, kUndefined for omitted ones.
Status CheckValueKinds(const Node& node, const Op& op, const std::vector<DataType>& dtypes);

// Infers (always) and computes (per `policy`). Errors of Infer and of the reference kernel are
// returned; callers that only try (folding, probing) ignore them.
Status EvaluateNode(const Node& node, const Op& op, const NodeInputs& in, const EvalPolicy& policy,
                    NodeEvaluation* out);

}  // namespace kiln::ir
