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
#include <mutex>
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

// Run control (RunOptions): whether a run must stop now, checked without allocating; the stop's
// status names the step about to run (`next` of `total`; total 0: before the run started).
enum class RunStop { kNone, kCancelled, kDeadline };
RunStop PendingStop(const RunOptions* control);  // kNone for a null control
Status RunStopStatus(RunStop stop, const RunOptions& control, size_t next, size_t total,
                     const std::string& what);
// OK, or DeadlineExceeded / Cancelled; `what()` (the step's description) is called only to stop.
template <typename What>
Status CheckRunControl(const RunOptions* control, size_t next, size_t total, What&& what) {
  const RunStop stop = PendingStop(control);
  if (stop == RunStop::kNone) return OkStatus();
  return RunStopStatus(stop, *control, next, total, what());
}

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

// One concurrent run's storage for a plan, on the host or a device, made on the plan's first run
// and pooled by it: a tensor per slot (arena slots are views, re-pointed only when the run is
// handed a different arena), each step's compute context (input and output pointers, the
// device's stream) and where graph inputs are read. On a device it also owns the DeviceRun
// (device arena, streams, staging). A warm run of a plan with static shapes allocates nothing in
// the executor, on either.
struct RunContext {
  std::vector<Tensor> env;                   // per slot
  std::vector<ir::ComputeContext> contexts;  // per step
  struct InputRead {
    int step, position, input;  // contexts[step].inputs[position] = graph input `input`
  };
  std::vector<InputRead> input_reads;  // host only: a device reads inputs from its arena
  const char* base = nullptr;          // the arena the views point into (null: not viewed yet)
  // Per graph output written directly (ExecutionPlan::direct_output): the slot's tensor between
  // runs (shape, no storage), and storage for runs whose caller drops that output (RunInto
  // without it), made on the first such run.
  std::vector<Tensor> idle_outputs, spare_outputs;
  std::vector<char> redirected;
  std::unique_ptr<DeviceRun> device_run;  // device plans only
};

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
  // came from `cached` choices given to Create rather than being measured.
  PlanChoices choices;
  int cached_choices = 0;

  static StatusOr<std::unique_ptr<ExecutionPlan>> Create(
      const Model& model, const std::vector<Tensor>& inputs, const SessionOptions& options,
      std::shared_ptr<Device> device = nullptr, const PlanChoices* cached = nullptr,
      std::shared_ptr<SessionResources> resources = nullptr);
  // Executes the plan. `inputs`: one pointer per graph input, in graph-input order, each checked
  // by the caller against the plan's shapes. Outputs in graph-output order: with `bound` empty,
  // new tensors appended to *outputs; else one entry per graph output, each null (dropped) or a
  // caller's tensor of the output's dtype and shape that receives a copy of the values (a shape
  // that differs from the computed one is InvalidArgument). On a device, `timings` (when
  // non-null) receives the run's upload/compute/download split. `control` (may be null): a
  // deadline and cancel flag checked before every step.
  Status Execute(const Model& model, const std::vector<const Tensor*>& inputs,
                 std::vector<Tensor>* outputs, DeviceTimings* timings = nullptr,
                 const RunOptions* control = nullptr, const std::vector<Tensor*>& bound = {}) const;
  std::string Describe(const Model& model) const;
  PlanSummary Summarize(const Model& model) const;
  // CPU plans: a run context made and pooled, and the session's arena pool grown to this plan's
  // arena, so the plan's first run allocates neither (Session::Prepare).
  void Warm() const;

 private:
  void PlanArena();
  // Removes the static steps whose outputs no later step and no graph output reads; recomputes
  // last_use. Before PlanArena.
  void DropUnreadSteps();
  // Device plans (execution_plan_device.cc).
  Status UploadConstants(const Model& model);
  Status ExecuteOnDevice(const Model& model, const std::vector<const Tensor*>& inputs,
                         std::vector<Tensor>* outputs, DeviceTimings* timings,
                         const RunOptions* control, const std::vector<Tensor*>& bound) const;
  // The one step loop, host and device: run control between steps, shapes and storage of
  // dynamic steps, each kernel on the run's contexts, storage made for the run freed after its
  // last reader. `step_ms` (may be null): each step's wall time; `step_start_us` (with step_ms,
  // may be null): each step's start on the steady clock.
  Status RunSteps(const Model& model, RunContext* run, char* base, const RunOptions* control,
                  std::vector<double>* step_ms, std::vector<double>* step_start_us = nullptr) const;
  Status ExecuteOnHost(const Model& model, const std::vector<const Tensor*>& inputs,
                       std::vector<Tensor>* outputs, DeviceTimings* timings,
                       const RunOptions* control, const std::vector<Tensor*>& bound) const;
  std::unique_ptr<RunContext> NewRunContext() const;
  // A pooled run context, or a new one; ReturnRun puts it back.
  std::unique_ptr<RunContext> TakeRun() const;
  void ReturnRun(std::unique_ptr<RunContext> run) const;
  // Points the run's static arena slots into the arena at `base` (nothing when already there).
  void ViewArena(RunContext* run, char* base) const;
  mutable std::vector<std::unique_ptr<RunContext>> free_runs_;
  // The session's packed weights and CPU arenas (a plan made alone gets its own).
  std::shared_ptr<SessionResources> resources;
  mutable std::mutex runs_mu_;  // guards free_runs_ (run contexts)

  friend class Planner;  // execution_plan.cc: Create's stages
  Status RunOrReplay(const Model& model, RunContext* run, char* base,
                     const RunOptions* control) const;
  Status DownloadOutputs(const ir::Graph& g, DeviceRun* dev, char* base,
                         const std::vector<const Tensor*>& inputs, std::vector<Tensor>* outputs,
                         const std::vector<Tensor*>& bound) const;
  Status RedirectDirectOutputs(const ir::Graph& g, RunContext* run, std::vector<Tensor>* outputs,
                               const std::vector<Tensor*>& bound) const;
  Status CollectOutputs(const ir::Graph& g, RunContext* run,
                        const std::vector<const Tensor*>& inputs, std::vector<Tensor>* outputs,
                        const std::vector<Tensor*>& bound) const;
  int AddSlot(DataType dtype, const Shape& shape);
  // The slot holding `slot`'s value in plain layout, adding a conversion step if needed.
  int PlainSlot(int slot, std::vector<int>* plain_of);
};

}  // namespace kiln::runtime
