// Op: one ONNX node's parsed, validated, typed attributes plus its shape inference and its
// reference kernel (plain loops, the oracle every fast kernel is tested against). Ops are created
// once per node at load time by the factory registered for (domain, op_type, opset range), and are
// immutable afterwards, so one Op may serve many threads.
//
// Registration is one line next to the op's code:
//   KILN_REGISTER_OP("Relu", 6, kMaxOpset, &ReluOp::Create);
// and, for ops of another domain (kiln's fused ops live in domain "kiln"):
//   KILN_REGISTER_OP_DOMAIN("kiln", "FusedConv", 1, kMaxOpset, &FusedConvOp::Create);
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "kiln/status.h"
#include "kiln/tensor.h"

namespace kiln::ir {

inline constexpr int kMinOpset = 1;
// The newest ai.onnx opset kiln accepts: that of the pinned onnx 1.19.1. An op registered up to
// kMaxOpset claims every ONNX version of it up to here; tests/onnx_node/opset_audit.py checks that
// each version ONNX added inside a claimed range was reviewed (implemented, or type widening only).
inline constexpr int kMaxOpset = 24;

// Concrete-shape inference for one node. Values of inputs are available when they are constants
// of the graph, or when the executor runs a node whose output shape depends on data.
class InferContext {
 public:
  InferContext(const Node& node, std::vector<DataType> dtypes, std::vector<Shape> shapes,
               std::vector<const Tensor*> values);

  const Node& node() const { return node_; }
  size_t num_inputs() const { return dtypes_.size(); }
  bool has_input(size_t i) const {
    return i < dtypes_.size() && dtypes_[i] != DataType::kUndefined;
  }
  DataType dtype(size_t i) const { return dtypes_[i]; }
  const Shape& shape(size_t i) const { return shapes_[i]; }
  int64_t rank(size_t i) const { return static_cast<int64_t>(shapes_[i].size()); }
  // nullptr when the value is not known at this point.
  const Tensor* value(size_t i) const { return i < values_.size() ? values_[i] : nullptr; }

  size_t num_outputs() const { return out_dtypes_.size(); }
  void SetOutput(size_t i, DataType dtype, Shape shape);
  // Infer may also produce the output's value when it follows from shapes alone (Shape, Size).
  void SetOutputValue(size_t i, Tensor value);

  const std::vector<DataType>& out_dtypes() const { return out_dtypes_; }
  const std::vector<Shape>& out_shapes() const { return out_shapes_; }
  const std::vector<Tensor>& out_values() const { return out_values_; }

  // Helpers for the usual failures, phrased "failed to infer shapes of <node>: <rule>; got <v>".
  Status Error(const std::string& rule) const;
  // Checks input i's dtype is one of `allowed` (float16 counts as float32: see op.cc).
  Status ExpectDtype(size_t i, std::initializer_list<DataType> allowed) const;

 private:
  const Node& node_;
  std::vector<DataType> dtypes_;
  std::vector<Shape> shapes_;
  std::vector<const Tensor*> values_;
  std::vector<DataType> out_dtypes_;
  std::vector<Shape> out_shapes_;
  std::vector<Tensor> out_values_;
};

// Inputs and outputs of one execution of a node; omitted optional ones are nullptr. Outputs are
// allocated by the caller with the inferred shapes.
struct ComputeContext {
  std::vector<const Tensor*> inputs;
  std::vector<Tensor*> outputs;
  // Scratch memory for this step (a region of the run's arena, at least the bytes the kernel
  // asked for in Prepare); nullptr when none was requested.
  void* scratch = nullptr;
  // The backend's stream for device kernels (a cudaStream_t on CUDA); nullptr on the CPU. On a
  // device backend, inputs and outputs are views of device memory.
  void* stream = nullptr;
  const Tensor& in(size_t i) const { return *inputs[i]; }
  bool has(size_t i) const { return i < inputs.size() && inputs[i] != nullptr; }
  Tensor& out(size_t i) const { return *outputs[i]; }
};

// Typed attributes an op parsed and validated at load, each declared in its op's header under
// ops/ (ConvAttrs in ops/nn/conv.h). Fast kernels read them with Op::attrs<T>() (a
// `const ConvAttrs&`), never by looking attributes up by name, so defaults and validation live in
// the op alone.
struct OpAttrs {
  virtual ~OpAttrs() = default;
};

class Op {
 public:
  explicit Op(const Node& node) : describe_(node.Describe()), opset_(node.opset) {}
  virtual ~Op() = default;

  virtual Status Infer(InferContext& ctx) const = 0;
  // Inputs whose values (not just shapes) determine output shapes, e.g. Reshape's `shape`.
  virtual std::vector<int> ShapeInputs() const { return {}; }
  // Control flow (If, Loop, Scan) and NonMaxSuppression: output shapes are known only by running
  // the node, so Infer is not asked for them; Compute (and a backend's kernel) assigns each
  // output itself, and the executor allocates nothing for them.
  virtual bool ShapesFromRun() const { return false; }
  // True for ops whose kernels take or make strings, sequences or optionals (values whose dtype
  // is not IsPlainDataType). The planner refuses such values at every other op, naming it, so no
  // byte-copying kernel ever meets one. Outputs of such a type are assigned by Compute (the
  // executor allocates nothing for them, as for ShapesFromRun).
  virtual bool TakesNonPlainValues() const { return false; }
  // False for ops whose outputs differ from run to run for the same inputs (the random ops
  // without a seed): the optimizer and the planner never fold them into constants.
  virtual bool Deterministic() const { return true; }
  // The reference kernel.
  virtual Status Compute(const ComputeContext& ctx) const = 0;
  // An input whose buffer the reference kernel may write its first output into, when the
  // planner finds the input read last here (runtime::Kernel::InPlaceInput); -1: none. Ops that
  // only relabel the shape (Reshape, Flatten, Squeeze, Unsqueeze, Identity) then copy nothing.
  virtual int InPlaceInput() const { return -1; }

  // The op's typed attributes, or nullptr for ops whose kernels read none.
  virtual const OpAttrs* attributes() const { return nullptr; }
  // attributes() as T, or nullptr when the op has no attributes of that type.
  template <typename T>
  const T* attrs() const {
    return dynamic_cast<const T*>(attributes());
  }

  const std::string& describe() const { return describe_; }
  int opset() const { return opset_; }
  // "failed to run <node>: <rule>".
  Status RunError(const std::string& rule) const;

 private:
  std::string describe_;
  int opset_;
};

// "failed to load <node>: <rule>" as InvalidModel, for factories rejecting attributes.
Status AttrError(const Node& node, const std::string& rule);

using OpFactory = StatusOr<std::unique_ptr<Op>> (*)(const Node&);

struct OpDef {
  std::string op_type;
  std::string domain;
  int since = kMinOpset;  // inclusive opset range this factory implements
  int until = kMaxOpset;
  OpFactory create = nullptr;
};

// Global op table, filled by static registrars before main(). Lookups are thread-safe once
// registration is over.
class OpRegistry {
 public:
  static OpRegistry& Global();
  void Register(OpDef def);
  // The definition covering `opset`, or nullptr; `why` (optional) explains a miss.
  const OpDef* Find(const std::string& domain, const std::string& op_type, int opset,
                    std::string* why = nullptr) const;
  std::vector<const OpDef*> All() const;

 private:
  std::vector<std::unique_ptr<OpDef>> defs_;
};

struct OpRegistrar {
  // Domain "" (ai.onnx).
  OpRegistrar(const char* op_type, int since, int until, OpFactory create);
  OpRegistrar(const char* domain, const char* op_type, int since, int until, OpFactory create);
};

// Convenience factory for ops whose constructor takes (const Node&) and cannot fail.
template <typename T>
StatusOr<std::unique_ptr<Op>> MakeOp(const Node& node) {
  return std::unique_ptr<Op>(new T(node));
}

}  // namespace kiln::ir

#define KILN_REGISTER_OP(op_type, since, until, factory)                                       \
  static ::kiln::ir::OpRegistrar KILN_CONCAT_(kiln_op_registrar_, __COUNTER__)(op_type, since, \
                                                                               until, factory)

#define KILN_REGISTER_OP_DOMAIN(domain, op_type, since, until, factory)         \
  static ::kiln::ir::OpRegistrar KILN_CONCAT_(kiln_op_registrar_, __COUNTER__)( \
      domain, op_type, since, until, factory)
