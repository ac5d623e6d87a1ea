// Control flow: If, Loop and Scan, whose bodies are subgraphs (ir::Attribute::g) that may read
// values of the enclosing graph (bound through the node's implicit inputs, ir::Node).
//
// The semantics of each op live here once, in ControlFlowOp::Execute, written against
// BodyRunner: something that runs one body on concrete tensors. The op's reference kernel
// (Compute) runs bodies with an Interpreter (every body node on its reference kernel, shapes
// inferred as it goes); the CPU backend's kernel (runtime/control_flow_kernel.cc) runs them as
// optimized, planned sub-plans with the fast kernels. Both give the same results by construction
// of the semantics, and the kernel tests compare them.
//
// Output shapes of control flow depend on the data (which branch, how many iterations), so these
// ops report ShapesFromRun(): the executor lets the kernel assign the outputs.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/op.h"

namespace kiln::ops {

// A Loop stops with an error after this many iterations unless the environment variable
// KILN_LOOP_MAX_ITERATIONS says otherwise (a model whose trip count and condition never end
// the loop must not hang the process).
inline constexpr int64_t kDefaultLoopMaxIterations = 1000000;
int64_t LoopMaxIterations();

// Runs one body. `inputs`: the body's formal inputs, then its captures (Graph::captures order);
// `outputs` is replaced by the body's outputs, each with its own storage or storage shared with
// nothing the caller may free. Const and reentrant.
class BodyRunner {
 public:
  virtual ~BodyRunner() = default;
  virtual Status Run(const std::vector<const Tensor*>& inputs,
                     std::vector<Tensor>* outputs) const = 0;
};

// Runs a body node by node on the reference kernels (the oracle).
class Interpreter final : public BodyRunner {
 public:
  // Unsupported, listing every body node kiln cannot run (nested bodies included), or the body's
  // structural error.
  static StatusOr<std::unique_ptr<Interpreter>> Create(std::shared_ptr<const ir::Graph> graph,
                                                       const std::string& what);
  Status Run(const std::vector<const Tensor*>& inputs, std::vector<Tensor>* outputs) const override;

 private:
  std::shared_ptr<const ir::Graph> graph_;
  std::vector<int> order_;
  std::vector<std::unique_ptr<ir::Op>> ops_;
  std::vector<int> last_use_;  // per value: position in order_ of its last reader (-1: none)
};

class ControlFlowOp : public ir::Op {
 public:
  struct Body {
    std::string attr;  // "then_branch", "else_branch", "body"
    std::shared_ptr<const ir::Graph> graph;
  };
  explicit ControlFlowOp(const ir::Node& node);

  bool ShapesFromRun() const override { return true; }
  // Bodies may carry strings, sequences and optionals (a Loop building a sequence).
  bool TakesNonPlainValues() const override { return true; }
  Status Infer(ir::InferContext& ctx) const override;
  // The reference kernel: Execute with the interpreters.
  Status Compute(const ir::ComputeContext& ctx) const override;

  const std::vector<Body>& bodies() const { return bodies_; }
  // The op's semantics with `runners[i]` running bodies()[i]. ctx.inputs holds the explicit
  // inputs then the captured values; ctx.outputs are assigned.
  virtual Status Execute(const ir::ComputeContext& ctx,
                         const std::vector<const BodyRunner*>& runners) const = 0;

 protected:
  // Adds a body and its interpreter; Unsupported when a node in it cannot run.
  Status AddBody(const ir::Node& node, const std::string& attr, size_t formal_inputs,
                 size_t min_outputs);
  // The captured values, in the bodies' capture order.
  std::vector<const Tensor*> Captures(const ir::ComputeContext& ctx) const;
  size_t explicit_inputs_ = 0;
  std::vector<Body> bodies_;
  std::vector<std::unique_ptr<Interpreter>> interpreters_;
};

}  // namespace kiln::ops
