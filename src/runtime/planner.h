// The planner: turns (model, input shapes, options) into an immutable ExecutionPlan in named
// stages, run in this order:
//   1. slots: one per graph value, its constant, dtype and shape where known;
//   2. per node in topological order:
//      a. inference and folding: output shapes, and values when every input is known;
//      b. kernel selection by priority and precision (runtime/kernel.h), retried with plain
//         inputs when every fast kernel declined a layout;
//      c. the device check: on a device backend every step needs a kernel of that backend;
//      d. conversions of inputs to plain where the kernel does not take their layout;
//      e. Prepare for the shapes; a kernel refusing in Prepare passes the node to the next;
//   3. graph outputs (plain), unread steps dropped, direct outputs marked;
//   4. the memory plan (one arena, in-place reuse, scratch);
//   5. on a device: the constants the steps read, uploaded (the model's once per session).
// Control-flow kernels get their bodies planned by the runtime through PrepareContext::bodies
// (runtime/body_planner.h), with the same planner and executor.
#pragma once

#include <memory>
#include <vector>

#include "runtime/execution_plan.h"

namespace kiln::runtime {

// `inputs`: one tensor per graph input giving its dtype and shape (values unused). `device`:
// the backend's device, null on the CPU. `cached`: tuning choices from the plan cache (may be
// null). `resources`: the session's packed weights, arenas and device constants (a new set when
// null). `body`: the model is a control-flow body, its inputs made by its node, not fed by a
// caller (a session's plan turns a stage-2a inference failure on open input dimensions into the
// caller's InvalidArgument; a body's keeps the model's InvalidModel).
StatusOr<std::unique_ptr<const ExecutionPlan>> PlanExecution(
    const Model& model, const std::vector<Tensor>& inputs, const SessionOptions& options,
    std::shared_ptr<Device> device = nullptr, const PlanChoices* cached = nullptr,
    std::shared_ptr<SessionResources> resources = nullptr, bool body = false);

}  // namespace kiln::runtime
