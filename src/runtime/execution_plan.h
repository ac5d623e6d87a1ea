// Model checking and execution planning.
//
// BuildModel() creates one ir::Op per node, collecting every node kiln cannot run (with name, op
// type, opset and reason) instead of stopping at the first. ExecutionPlan::Create() takes concrete
// input shapes and walks the graph once: shapes are inferred, nodes whose inputs are all known
// (weights, Shape-of-static-tensor sub-graphs, Constant) are evaluated now and become constants,
// and each remaining node gets a kernel prepared for its shapes. A node whose output shape depends
// on run-time values (e.g. Reshape fed by a computed tensor) is marked dynamic: its shapes are
// inferred at run time. Plans are immutable once created and shared by concurrent runs.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/op.h"
#include "kiln/options.h"
#include "runtime/kernel.h"

namespace kiln::runtime {

struct UnsupportedNode {
  std::string name, op_type, domain;
  int opset = 0;
  std::string reason;
};

struct Model {
  std::unique_ptr<ir::Graph> graph;
  std::vector<int> order;                    // topological node order
  std::vector<std::unique_ptr<ir::Op>> ops;  // per node index; null when unsupported
  std::vector<UnsupportedNode> unsupported;
};

// Never fails because of unsupported nodes (they are listed); fails on structural errors.
StatusOr<std::unique_ptr<Model>> BuildModel(std::unique_ptr<ir::Graph> graph);
// One Unsupported status listing every node.
Status UnsupportedNodesError(const std::vector<UnsupportedNode>& nodes);

struct Step {
  int node = -1;
  std::unique_ptr<Kernel> kernel;
  std::string kernel_name;
  bool dynamic = false;
};

struct ExecutionPlan {
  std::vector<Step> steps;
  // Per value id: dtype and shape when known statically, and the value when it is constant.
  std::vector<DataType> dtypes;
  std::vector<Shape> shapes;
  std::vector<bool> static_shape;
  std::vector<std::shared_ptr<const Tensor>> constants;
  // Per value id: index of the last step reading it (-1: none); graph outputs are never freed.
  std::vector<int> last_use;
  int folded_nodes = 0;

  static StatusOr<std::unique_ptr<ExecutionPlan>> Create(const Model& model,
                                                         const std::vector<Tensor>& inputs,
                                                         const SessionOptions& options);
  // Executes the plan; `inputs` are in graph-input order, outputs in graph-output order.
  Status Execute(const Model& model, const std::vector<Tensor>& inputs,
                 std::vector<Tensor>* outputs) const;
  std::string Describe(const Model& model) const;
};

}  // namespace kiln::runtime
