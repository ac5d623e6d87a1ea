// Models and execution plans.
//
// BuildModel() creates one ir::Op per node, collecting every node kiln cannot run (with name, op
// type, opset and reason) instead of stopping at the first. An ExecutionPlan is what the planner
// (runtime/planner.h) makes of a model for concrete input shapes: steps with prepared kernels,
// per-value slots, constants folded, the memory plan. A node whose output shape depends on
// run-time values (e.g. Reshape fed by a computed tensor) is marked dynamic: its shapes are
// inferred at run time. Plans are immutable once made; executors (runtime/executor.h) run them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/op.h"
#include "kiln/options.h"
#include "runtime/device.h"
#include "runtime/kernel.h"
#include "runtime/plan_cache.h"
#include "runtime/session_resources.h"

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

// One unit of work: a node's kernel, or (node == -1) a conversion of a value from a backend
// layout to plain. Slots index the plan's per-value tables: graph value ids first, then the
// plain copies conversions produce.
struct Step {
  int node = -1;
  std::unique_ptr<Kernel> kernel;
  std::string kernel_name;
  bool dynamic = false;
  // Control flow (ir::Op::ShapesFromRun): the kernel assigns its outputs; nothing is inferred
  // or allocated for them. Always dynamic.
  bool self_shaped = false;
  std::vector<int> in_slots, out_slots;  // -1 marks an omitted optional input/output
  std::string label;  // device plans: "Op node", the profiler range around the step (NVTX)
};

// A plan is data: what the planner (runtime/planner.h) decided for one model and one signature
// of input shapes. Immutable once made; an Executor (runtime/executor.h) runs it, and any number
// of concurrent runs share it.
struct ExecutionPlan {
  std::vector<Step> steps;
  // Per slot: dtype and shape when known statically, the value when constant, the layout when a
  // kernel stores it non-plain, and the index of the last step reading it (-1: none).
  std::vector<DataType> dtypes;
  std::vector<Shape> shapes;
  std::vector<bool> static_shape;
  std::vector<std::shared_ptr<const Tensor>> constants;
  std::vector<std::shared_ptr<const Layout>> layouts;
  std::vector<int> last_use;
  std::vector<int> input_slots;   // per graph input
  std::vector<int> output_slots;  // per graph output, always plain
  // Per graph output, host plans: its step writes it straight into the tensor the run returns
  // (a new one, or the caller's bound tensor), so nothing is copied after the run and the arena
  // holds no buffer for it. Set for plain outputs with a static shape computed by a static step
  // (not graph inputs or constants), each slot once.
  std::vector<char> direct_output;
  std::vector<char> direct_slot;  // per slot: a direct output's
  bool IsDirect(int slot) const { return direct_slot[slot] != 0; }
  // Memory plan: per slot, its offset in the run's arena (-1: not in the arena: constants, graph
  // inputs, outputs of dynamic steps); the arena size, and the scratch region shared by all steps.
  std::vector<int64_t> arena_offset;
  size_t arena_bytes = 0;
  size_t scratch_offset = 0;
  size_t scratch_bytes = 0;
  int in_place = 0;  // outputs sharing their input's buffer
  int folded_nodes = 0;
  int conversions = 0;
  int dropped_steps = 0;  // steps whose outputs nothing read (DropUnreadSteps)
  int num_threads = 1;

  // On a device backend (device != nullptr) every step must have a kernel of that backend (all
  // missing ones are reported at once), graph inputs get arena slots, and the constants steps
  // read are on the device: the model's weights once per session (SessionResources), shared by
  // every plan, and what this plan folded for its shapes, here.
  std::shared_ptr<Device> device;
  std::vector<Tensor> device_constants;  // per slot: a view of the uploaded constant, or empty
  std::vector<std::shared_ptr<void>> device_constant_memory;  // what the views point into
  bool pinned_staging = true;                                 // SessionOptions::pinned_staging
  bool capture_graph = false;                                 // SessionOptions::cuda_graph
  // With SessionOptions::tune: every prepared node's variant (for the plan cache), and how many
  // came from `cached` choices given to the planner rather than being measured.
  PlanChoices choices;
  int cached_choices = 0;
  // What the kernels' packed weights and the device constants live in (the session's), and the
  // arenas executors of this plan take from.
  std::shared_ptr<SessionResources> resources;

  std::string Describe(const Model& model) const;
  PlanSummary Summarize(const Model& model) const;
};

}  // namespace kiln::runtime
