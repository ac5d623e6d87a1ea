// The executor: runs an immutable ExecutionPlan (runtime/execution_plan.h) on the host or its
// device. It owns the run contexts (one per concurrent run, made on first use and pooled) and
// takes activation arenas from the session's pool; any number of threads may run one executor
// at once. Host and device runs share one step loop (RunSteps): run control between steps,
// shapes and storage of dynamic steps, each kernel on the run's contexts, storage made for the
// run freed after its last reader. A warm run of a plan with static shapes allocates nothing here
// besides the output tensors handed to the caller (none with bound outputs).
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/execution_plan.h"

namespace kiln::runtime {

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

// One concurrent run's storage for a plan, on the host or a device, made on an executor's first
// run and pooled by it: a tensor per slot (arena slots are views, re-pointed only when the run is
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

class Executor {
 public:
  // `model` and `plan` stay alive as long as the executor (it shares both).
  Executor(std::shared_ptr<const Model> model, std::shared_ptr<const ExecutionPlan> plan);

  const ExecutionPlan& plan() const { return *plan_; }
  const Model& model() const { return *model_; }

  // Runs the plan. `inputs`: one pointer per graph input, in graph-input order, each checked by
  // the caller against the plan's shapes. Outputs in graph-output order: with `bound` empty, new
  // tensors appended to *outputs; else one entry per graph output, each null (dropped) or a
  // caller's tensor of the output's dtype and shape that receives a copy of the values (a shape
  // that differs from the computed one is InvalidArgument). `timings` (may be null): on a device
  // the run's upload/compute/download split, on the host each step's time when asked for.
  // `control` (may be null): a deadline and cancel flag checked before every step.
  Status Run(const std::vector<const Tensor*>& inputs, std::vector<Tensor>* outputs,
             DeviceTimings* timings = nullptr, const RunOptions* control = nullptr,
             const std::vector<Tensor*>& bound = {}) const;
  // CPU plans: a run context made and pooled, and the session's arena pool grown to this plan's
  // arena, so the first run allocates neither (Session::Prepare).
  void Warm() const;
  // Per step: its node, op, kernel and planned output types (ms and start_us zero), made on first
  // use and kept, so a traced run (RunTimings::per_node) only copies them.
  const std::vector<NodeTime>& StepDescriptions() const;

 private:
  Status RunOnHost(const std::vector<const Tensor*>& inputs, std::vector<Tensor>* outputs,
                   DeviceTimings* timings, const RunOptions* control,
                   const std::vector<Tensor*>& bound) const;
  // executor_device.cc
  Status RunOnDevice(const std::vector<const Tensor*>& inputs, std::vector<Tensor>* outputs,
                     DeviceTimings* timings, const RunOptions* control,
                     const std::vector<Tensor*>& bound) const;
  Status RunOrReplay(RunContext* run, char* base, const RunOptions* control) const;
  Status DownloadOutputs(DeviceRun* dev, char* base, const std::vector<const Tensor*>& inputs,
                         std::vector<Tensor>* outputs, const std::vector<Tensor*>& bound) const;
  // `step_ms` (may be null): each step's wall time; `step_start_us` (with step_ms, may be null):
  // each step's start on the steady clock.
  Status RunSteps(RunContext* run, char* base, const RunOptions* control,
                  std::vector<double>* step_ms, std::vector<double>* step_start_us) const;
  Status RedirectDirectOutputs(RunContext* run, std::vector<Tensor>* outputs,
                               const std::vector<Tensor*>& bound) const;
  Status CollectOutputs(RunContext* run, const std::vector<const Tensor*>& inputs,
                        std::vector<Tensor>* outputs, const std::vector<Tensor*>& bound) const;
  std::unique_ptr<RunContext> NewRunContext() const;
  // A pooled run context, or a new one; ReturnRun puts it back.
  std::unique_ptr<RunContext> TakeRun() const;
  void ReturnRun(std::unique_ptr<RunContext> run) const;
  // Points the run's static arena slots into the arena at `base` (nothing when already there).
  void ViewArena(RunContext* run, char* base) const;

  std::shared_ptr<const Model> model_;
  std::shared_ptr<const ExecutionPlan> plan_;
  const ExecutionPlan& p_;
  mutable std::mutex runs_mu_;  // guards free_runs_
  mutable std::vector<std::unique_ptr<RunContext>> free_runs_;
  mutable std::once_flag described_;
  mutable std::vector<NodeTime> step_descriptions_;
};

}  // namespace kiln::runtime
