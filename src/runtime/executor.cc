#include "runtime/executor.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "core/threading.h"
#include "ir/evaluate.h"

namespace kiln::runtime {

RunStop PendingStop(const RunOptions* control) {
  if (control == nullptr) return RunStop::kNone;
  if (control->cancel != nullptr && control->cancel->load(std::memory_order_relaxed))
    return RunStop::kCancelled;
  if (control->deadline && std::chrono::steady_clock::now() >= *control->deadline)
    return RunStop::kDeadline;
  return RunStop::kNone;
}

Status RunStopStatus(RunStop stop, const RunOptions& control, size_t next, size_t total,
                     const std::string& what) {
  const std::string where = total == 0 ? std::string("before it started")
                                       : "before step " + std::to_string(next + 1) + " of " +
                                             std::to_string(total) + " (" + what + ")";
  if (stop == RunStop::kCancelled) return Status(StatusCode::kCancelled, "run cancelled " + where);
  const double late = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                                *control.deadline)
                          .count();
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.3f", late);
  return Status(StatusCode::kDeadlineExceeded,
                "run stopped " + where + ": its deadline passed " + buf + " ms ago");
}

Executor::Executor(std::shared_ptr<const Model> model, std::shared_ptr<const ExecutionPlan> plan)
    : model_(std::move(model)), plan_(std::move(plan)), p_(*plan_) {}

const std::vector<NodeTime>& Executor::StepDescriptions() const {
  std::call_once(described_, [&] {
    const ir::Graph& g = *model_->graph;
    step_descriptions_.resize(p_.steps.size());
    for (size_t i = 0; i < p_.steps.size(); ++i) {
      const Step& st = p_.steps[i];
      NodeTime& nt = step_descriptions_[i];
      if (st.node >= 0) {
        const ir::Node& n = g.nodes[st.node];
        nt.node = n.name;
        nt.op_type = n.domain.empty() ? n.op_type : n.domain + "." + n.op_type;
      } else {
        nt.op_type = "LayoutConversion";
      }
      nt.kernel = st.kernel_name;
      for (int slot : st.out_slots) {
        if (slot < 0) continue;
        if (!nt.outputs.empty()) nt.outputs += ", ";
        nt.outputs += p_.static_shape[slot] ? std::string(DataTypeName(p_.dtypes[slot])) +
                                                  ShapeToString(p_.shapes[slot])
                                            : std::string("dynamic");
      }
    }
  });
  return step_descriptions_;
}

Status Executor::Run(const std::vector<const Tensor*>& inputs, std::vector<Tensor>* outputs,
                     DeviceTimings* timings, const RunOptions* control,
                     const std::vector<Tensor*>& bound) const {
  if (p_.device) return RunOnDevice(inputs, outputs, timings, control, bound);
  return RunOnHost(inputs, outputs, timings, control, bound);
}

std::unique_ptr<RunContext> Executor::NewRunContext() const {
  auto run = std::make_unique<RunContext>();
  run->env.resize(p_.dtypes.size());
  run->contexts.resize(p_.steps.size());
  for (size_t si = 0; si < p_.steps.size(); ++si) {
    const Step& step = p_.steps[si];
    ir::ComputeContext& cc = run->contexts[si];
    for (size_t j = 0; j < step.in_slots.size(); ++j) {
      const int slot = step.in_slots[j];
      const Tensor* t = nullptr;
      if (slot >= 0 && p_.constants[slot])
        t = p_.device ? &p_.device_constants[slot] : p_.constants[slot].get();
      else if (slot >= 0)
        t = &run->env[slot];
      // On the host a graph input is read where the caller keeps it; a device reads it from its
      // arena slot, where the run uploads it.
      for (size_t k = 0; k < p_.input_slots.size() && !p_.device; ++k)
        if (slot >= 0 && p_.input_slots[k] == slot)
          run->input_reads.push_back(
              {static_cast<int>(si), static_cast<int>(j), static_cast<int>(k)});
      cc.inputs.push_back(t);
    }
    for (int slot : step.out_slots) cc.outputs.push_back(slot >= 0 ? &run->env[slot] : nullptr);
  }
  run->idle_outputs.resize(p_.output_slots.size());
  run->spare_outputs.resize(p_.output_slots.size());
  run->redirected.assign(p_.output_slots.size(), 0);
  // A direct output's slot between runs: its shape and no storage. Restoring it after a run
  // copies into a shape that is already there: no allocation.
  for (size_t k = 0; k < p_.output_slots.size(); ++k)
    if (p_.direct_output[k]) {
      const int slot = p_.output_slots[k];
      run->idle_outputs[k] = Tensor::View(p_.dtypes[slot], p_.shapes[slot], nullptr);
      run->env[slot] = run->idle_outputs[k];
    }
  return run;
}

std::unique_ptr<RunContext> Executor::TakeRun() const {
  {
    std::lock_guard<std::mutex> lock(runs_mu_);
    if (!free_runs_.empty()) {
      auto run = std::move(free_runs_.back());
      free_runs_.pop_back();
      return run;
    }
  }
  return NewRunContext();
}

void Executor::ReturnRun(std::unique_ptr<RunContext> run) const {
  for (const RunContext::InputRead& r : run->input_reads)
    run->contexts[r.step].inputs[r.position] = nullptr;  // keep no caller tensor
  std::lock_guard<std::mutex> lock(runs_mu_);
  free_runs_.push_back(std::move(run));
}

void Executor::ViewArena(RunContext* run, char* base) const {
  if (run->base == base) return;
  for (size_t slot = 0; slot < run->env.size(); ++slot)
    if (p_.arena_offset[slot] >= 0 && p_.static_shape[slot])
      run->env[slot] = Tensor::View(p_.dtypes[slot], p_.shapes[slot], base + p_.arena_offset[slot]);
  run->base = base;
}

void Executor::Warm() const {
  if (p_.device) return;
  auto run = NewRunContext();
  // Viewed against the arena the next run will be lent (the pool's smallest that fits).
  Tensor arena = p_.resources->arenas.Take(p_.arena_bytes);
  ViewArena(run.get(), static_cast<char*>(arena.raw()));
  p_.resources->arenas.Return(std::move(arena));
  ReturnRun(std::move(run));
}

// Directly written outputs (ExecutionPlan::direct_output): the slot points at the tensor the run
// returns (new storage, the caller's bound tensor, or the context's spare when the caller drops
// it).
Status Executor::RedirectDirectOutputs(RunContext* run, std::vector<Tensor>* outputs,
                                       const std::vector<Tensor*>& bound) const {
  const ir::Graph& g = *model_->graph;
  std::vector<Tensor>& env = run->env;
  for (size_t k = 0; k < p_.output_slots.size(); ++k) {
    if (!p_.direct_output[k]) continue;
    const int slot = p_.output_slots[k];
    Tensor* target = nullptr;
    if (bound.empty()) {
      auto storage = AlignedHostMemory(env[slot].bytes());
      if (!storage.ok())
        return Status(StatusCode::kOutOfMemory,
                      "out of host memory while running the model: output '" +
                          g.values[g.outputs[k]].name + "' needs " +
                          std::to_string(env[slot].bytes()) +
                          " bytes (a smaller batch, or fewer concurrent runs, needs less)");
      void* data = storage->get();
      (*outputs)[k] = Tensor::Adopt(p_.dtypes[slot], p_.shapes[slot], data, *std::move(storage));
      target = &(*outputs)[k];
    } else if (k < bound.size()) {
      target = bound[k];
    }
    if (target == nullptr) {  // the caller drops this output: storage of the run context's own
      if (!run->spare_outputs[k].defined())
        run->spare_outputs[k] = Tensor::Empty(p_.dtypes[slot], p_.shapes[slot]);
      target = &run->spare_outputs[k];
    }
    env[slot] = *target;
    run->redirected[k] = 1;
  }
  return OkStatus();
}

// The outputs not written where they are returned: cloned, or copied into the bound tensors.
Status Executor::CollectOutputs(RunContext* run, const std::vector<const Tensor*>& inputs,
                                std::vector<Tensor>* outputs,
                                const std::vector<Tensor*>& bound) const {
  const ir::Graph& g = *model_->graph;
  std::vector<Tensor>& env = run->env;
  // A slot's tensor outside a step: a constant, a graph input, or the run's own.
  auto get = [&](int slot) -> const Tensor* {
    if (p_.constants[slot]) return p_.constants[slot].get();
    for (size_t k = 0; k < p_.input_slots.size(); ++k)
      if (p_.input_slots[k] == slot) return inputs[k];
    return env[slot].defined() ? &env[slot] : nullptr;
  };
  for (size_t k = 0; k < p_.output_slots.size(); ++k) {
    if (run->redirected[k]) continue;  // written where it is returned
    const Tensor* t = get(p_.output_slots[k]);
    if (t == nullptr)
      return Internal("graph output '" + g.values[g.outputs[k]].name + "' was not computed");
    if (bound.empty()) {
      (*outputs)[k] = t->Clone();
    } else if (k < bound.size() && bound[k] != nullptr) {
      if (bound[k]->shape() != t->shape())
        return InvalidArgument("output '" + g.values[g.outputs[k]].name +
                               "': the bound tensor has shape " + ShapeToString(bound[k]->shape()) +
                               ", the run computed " + ShapeToString(t->shape()));
      if (IsPlainDataType(t->dtype()))
        std::memcpy(bound[k]->raw(), t->raw(), t->bytes());
      else
        *bound[k] = t->Clone();  // strings, sequences, optionals: the handle is replaced
    }
  }
  return OkStatus();
}

Status Executor::RunOnHost(const std::vector<const Tensor*>& inputs, std::vector<Tensor>* outputs,
                           DeviceTimings* timings, const RunOptions* control,
                           const std::vector<Tensor*>& bound) const {
  SetThreadCount(p_.num_threads);
  Tensor arena = p_.resources->arenas.Take(p_.arena_bytes);
  std::unique_ptr<RunContext> run = TakeRun();
  // The arena and the run context go back to their pools however the run ends; the context
  // keeps no caller tensor (graph inputs are only pointed at, for this run).
  struct Return {
    const Executor* executor;
    ArenaPool* pool;
    Tensor* arena;
    std::unique_ptr<RunContext>* run;
    ~Return() {
      pool->Return(std::move(*arena));
      executor->ReturnRun(std::move(*run));
    }
  } give_back{this, &p_.resources->arenas, &arena, &run};
  char* base = static_cast<char*>(arena.raw());
  std::vector<Tensor>& env = run->env;
  ViewArena(run.get(), base);  // a new context, or another arena than last time
  for (const RunContext::InputRead& r : run->input_reads)
    run->contexts[r.step].inputs[r.position] = inputs[r.input];
  // Directly written outputs (ExecutionPlan::direct_output): the slot points at the tensor the run
  // returns until the run ends, then at no storage again.
  if (bound.empty()) outputs->assign(p_.output_slots.size(), Tensor());
  struct Restore {
    const ExecutionPlan* plan;
    RunContext* run;
    ~Restore() {
      for (size_t k = 0; k < run->redirected.size(); ++k)
        if (run->redirected[k]) {
          run->env[plan->output_slots[k]] = run->idle_outputs[k];
          run->redirected[k] = 0;
        }
    }
  } restore{&p_, run.get()};
  KILN_RETURN_IF_ERROR(RedirectDirectOutputs(run.get(), outputs, bound));
  std::vector<double>* step_ms = timings ? timings->step_ms : nullptr;
  KILN_RETURN_IF_ERROR(
      RunSteps(run.get(), base, control, step_ms, timings ? timings->step_start_us : nullptr));
  KILN_RETURN_IF_ERROR(CollectOutputs(run.get(), inputs, outputs, bound));
  // Dynamic or non-arena storage still held (outputs, values read by no step) is released now.
  for (size_t slot = 0; slot < env.size(); ++slot)
    if (!p_.constants[slot] && (p_.arena_offset[slot] < 0 || !p_.static_shape[slot]) &&
        env[slot].defined() && !p_.IsDirect(slot))
      env[slot] = Tensor();
  return OkStatus();
}

namespace {

// A string, sequence or optional reaching a control-flow or data-shaped op not made for it is
// refused (ir::CheckValueKinds); checked without allocating, the message built only then.
Status CheckSelfShapedInputs(const ir::Node& node, const ir::Op& op, const ir::ComputeContext& cc) {
  if (op.TakesNonPlainValues()) return OkStatus();
  for (const Tensor* t : cc.inputs) {
    if (t == nullptr || IsPlainDataType(t->dtype())) continue;
    std::vector<DataType> in_types;
    for (const Tensor* u : cc.inputs) in_types.push_back(u ? u->dtype() : DataType::kUndefined);
    return ir::CheckValueKinds(node, op, in_types);
  }
  return OkStatus();
}

}  // namespace

Status Executor::RunSteps(RunContext* run, char* base, const RunOptions* control,
                          std::vector<double>* step_ms, std::vector<double>* step_start_us) const {
  const ir::Graph& g = *model_->graph;
  std::vector<Tensor>& env = run->env;
  if (step_ms) step_ms->assign(p_.steps.size(), 0.0);
  if (step_ms && step_start_us) step_start_us->assign(p_.steps.size(), 0.0);
  for (size_t si = 0; si < p_.steps.size(); ++si) {
    const Step& step = p_.steps[si];
    auto what = [&] {
      return step.node >= 0 ? g.nodes[step.node].Describe() : std::string("layout conversion");
    };
    KILN_RETURN_IF_ERROR(CheckRunControl(control, si, p_.steps.size(), what));
    ir::ComputeContext& cc = run->contexts[si];
    for (size_t j = 0; j < step.in_slots.size(); ++j)
      if (step.in_slots[j] >= 0 && (cc.inputs[j] == nullptr || !cc.inputs[j]->defined()))
        return Internal("slot " + std::to_string(step.in_slots[j]) + " missing when running " +
                        what());
    if (step.self_shaped) {  // control flow: the kernel assigns its outputs
      KILN_RETURN_IF_ERROR(CheckSelfShapedInputs(g.nodes[step.node], *model_->ops[step.node], cc));
      for (int slot : step.out_slots)
        if (slot >= 0) env[slot] = Tensor();
    } else if (step.dynamic) {  // shapes known only now: inferred, and storage made, every run
      const ir::Node& node = g.nodes[step.node];
      ir::NodeInputs in;
      for (const Tensor* t : cc.inputs)
        in.Add(t ? t->dtype() : DataType::kUndefined, t ? t->shape() : Shape{}, t);
      ir::NodeEvaluation ev;
      KILN_RETURN_IF_ERROR(ir::EvaluateNode(node, *model_->ops[step.node], in,
                                            ir::EvalPolicy{.compute = false}, &ev));
      for (size_t o = 0; o < step.out_slots.size(); ++o) {
        const int slot = step.out_slots[o];
        if (slot < 0) continue;
        const DataType dt = ev.dtypes[o];
        const Shape& sh = ev.shapes[o];
        if (!IsPlainDataType(dt)) {  // a string, sequence or optional: the kernel assigns it
          env[slot] = Tensor();
          continue;
        }
        env[slot] = p_.arena_offset[slot] >= 0
                        ? Tensor::View(dt, sh, base + p_.arena_offset[slot])
                        : Tensor::Empty(dt, sh, p_.layouts[slot] ? p_.layouts[slot]->bytes() : 0);
      }
    } else {
      for (int slot : step.out_slots)
        if (slot >= 0 && p_.arena_offset[slot] < 0 && !p_.IsDirect(slot))
          env[slot] = Tensor::Empty(p_.dtypes[slot], p_.shapes[slot],
                                    p_.layouts[slot] ? p_.layouts[slot]->bytes() : 0);
    }
    cc.scratch = p_.scratch_bytes > 0 ? base + p_.scratch_offset : nullptr;
    const auto t0 =
        step_ms ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
    if (run->device_run) run->device_run->BeginRange(step.label.c_str());
    Status s = step.kernel->Run(cc);
    if (run->device_run) run->device_run->EndRange();
    if (step_ms) {
      (*step_ms)[si] =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      if (step_start_us)
        (*step_start_us)[si] =
            std::chrono::duration<double, std::micro>(t0.time_since_epoch()).count();
    }
    if (!s.ok()) return s.AddContext("while running " + what() + " with " + step.kernel_name);
    // Storage made for this run is freed after its last reader; arena views stay.
    for (int slot : step.in_slots)
      if (slot >= 0 && p_.last_use[slot] == static_cast<int>(si) && !p_.constants[slot] &&
          (p_.arena_offset[slot] < 0 || !p_.static_shape[slot]))
        env[slot] = Tensor();
  }
  return OkStatus();
}

// The steps on the device: launched, recorded into a CUDA graph (second run), or replayed.
Status Executor::RunOrReplay(RunContext* run, char* base, const RunOptions* control) const {
  DeviceRun& dev = *run->device_run;
  if (p_.capture_graph && dev.SupportsCapture() && dev.captured()) {
    KILN_RETURN_IF_ERROR(dev.Replay());
  } else {
    const bool capture =
        p_.capture_graph && dev.SupportsCapture() && run->device_run->completed_runs > 0;
    if (capture) KILN_RETURN_IF_ERROR(dev.BeginCapture());
    // A capture records every step: the run control is checked only outside captures.
    Status s = RunSteps(run, base, capture ? nullptr : control, nullptr, nullptr);
    if (capture) {
      Status end = dev.EndCapture();  // always end a capture, even after a failed step
      if (s.ok()) s = end;
      if (s.ok()) s = dev.Replay();
    }
    if (s.code() == StatusCode::kCancelled || s.code() == StatusCode::kDeadlineExceeded)
      (void)dev.Finish();  // let the enqueued work drain before the context is reused
    KILN_RETURN_IF_ERROR(s);
  }
  return OkStatus();
}

Status Executor::DownloadOutputs(DeviceRun* device_run, char* base,
                                 const std::vector<const Tensor*>& inputs,
                                 std::vector<Tensor>* outputs,
                                 const std::vector<Tensor*>& bound) const {
  const ir::Graph& g = *model_->graph;
  DeviceRun& dev = *device_run;
  // Outputs: downloaded straight into the caller's bound tensors, or into new ones. Constants and
  // graph inputs returned as outputs are copied on the host.
  if (bound.empty()) outputs->clear();
  for (size_t k = 0; k < p_.output_slots.size(); ++k) {
    const int slot = p_.output_slots[k];
    Tensor* dst = nullptr;
    if (bound.empty()) {
      outputs->push_back(Tensor::Empty(p_.dtypes[slot], p_.shapes[slot]));
      dst = &outputs->back();
    } else if (k < bound.size() && bound[k] != nullptr) {
      dst = bound[k];
      if (dst->shape() != p_.shapes[slot])
        return InvalidArgument("output '" + g.values[g.outputs[k]].name +
                               "': the bound tensor has shape " + ShapeToString(dst->shape()) +
                               ", the run computed " + ShapeToString(p_.shapes[slot]));
    } else {
      continue;  // not asked for
    }
    const Tensor* host = nullptr;
    if (p_.constants[slot]) host = p_.constants[slot].get();
    for (size_t i = 0; i < p_.input_slots.size() && host == nullptr; ++i)
      if (p_.input_slots[i] == slot) host = inputs[i];
    if (host != nullptr) {
      std::memcpy(dst->raw(), host->raw(), host->bytes());
      continue;
    }
    if (p_.arena_offset[slot] < 0)
      return Internal("graph output '" + g.values[g.outputs[k]].name + "' has no device buffer");
    KILN_RETURN_IF_ERROR(dev.Download(base + p_.arena_offset[slot], dst->raw(), dst->bytes()));
  }
  return OkStatus();
}

Status Executor::RunOnDevice(const std::vector<const Tensor*>& inputs, std::vector<Tensor>* outputs,
                             DeviceTimings* timings, const RunOptions* control,
                             const std::vector<Tensor*>& bound) const {
  std::unique_ptr<RunContext> run = TakeRun();
  if (!run->device_run) {
    size_t upload = 0, download = 0;
    for (int slot : p_.input_slots)
      upload += DeviceAlignUp(static_cast<size_t>(NumElements(p_.shapes[slot])) *
                              DataTypeSize(p_.dtypes[slot]));
    for (int slot : p_.output_slots)
      download += DeviceAlignUp(static_cast<size_t>(NumElements(p_.shapes[slot])) *
                                DataTypeSize(p_.dtypes[slot]));
    KILN_ASSIGN_OR_RETURN(run->device_run, p_.device->NewRun(std::max<size_t>(p_.arena_bytes, 1),
                                                             upload, download, p_.pinned_staging));
    for (ir::ComputeContext& cc : run->contexts) cc.stream = run->device_run->stream();
  }
  struct Return {
    const Executor* plan;
    std::unique_ptr<RunContext>* run;
    ~Return() { plan->ReturnRun(std::move(*run)); }
  } give_back{this, &run};
  DeviceRun& dev = *run->device_run;

  KILN_RETURN_IF_ERROR(dev.Begin());
  char* base = static_cast<char*>(dev.arena());
  ViewArena(run.get(), base);
  for (size_t k = 0; k < p_.input_slots.size(); ++k) {
    const int slot = p_.input_slots[k];
    if (p_.arena_offset[slot] < 0) continue;  // unread input
    KILN_RETURN_IF_ERROR(
        dev.Upload(inputs[k]->raw(), base + p_.arena_offset[slot], inputs[k]->bytes()));
  }
  KILN_RETURN_IF_ERROR(dev.StartCompute());
  KILN_RETURN_IF_ERROR(RunOrReplay(run.get(), base, control));
  KILN_RETURN_IF_ERROR(DownloadOutputs(&dev, base, inputs, outputs, bound));
  KILN_RETURN_IF_ERROR(dev.Finish());
  ++run->device_run->completed_runs;
  if (timings) *timings = dev.LastTimings();
  return OkStatus();
}

}  // namespace kiln::runtime
