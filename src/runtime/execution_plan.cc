#include "runtime/execution_plan.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>

#include "core/threading.h"
#include "ir/evaluate.h"
#include "runtime/memory_planner.h"

namespace kiln::runtime {

StatusOr<std::unique_ptr<Model>> BuildModel(std::unique_ptr<ir::Graph> graph) {
  auto m = std::make_unique<Model>();
  KILN_ASSIGN_OR_RETURN(m->order, graph->TopologicalOrder());
  m->ops.resize(graph->nodes.size());
  for (size_t i = 0; i < graph->nodes.size(); ++i) {
    const ir::Node& node = graph->nodes[i];
    std::string why;
    const ir::OpDef* def =
        ir::OpRegistry::Global().Find(node.domain, node.op_type, node.opset, &why);
    if (def == nullptr) {
      m->unsupported.push_back({node.name, node.op_type, node.domain, node.opset, why});
      continue;
    }
    auto op = def->create(node);
    if (!op.ok()) {
      m->unsupported.push_back(
          {node.name, node.op_type, node.domain, node.opset, op.status().message()});
      continue;
    }
    m->ops[i] = std::move(op).value();
  }
  for (int id : graph->inputs) {
    const ir::Value& v = graph->values[id];
    if (v.dtype != DataType::kUndefined && !IsIoDataType(v.dtype))
      m->unsupported.push_back(
          {"(graph input '" + v.name + "')", "", "", 0,
           std::string("input dtype ") + DataTypeName(v.dtype) + " is not supported"});
  }
  m->graph = std::move(graph);
  return m;
}

Status UnsupportedNodesError(const std::vector<UnsupportedNode>& nodes) {
  std::string s = "the model has " + std::to_string(nodes.size()) + " unsupported node" +
                  (nodes.size() == 1 ? "" : "s") + ":";
  for (const auto& n : nodes) {
    s += "\n  - '" + n.name + "'";
    if (!n.op_type.empty())
      s += " " + n.op_type + " (" + (n.domain.empty() ? "ai.onnx" : n.domain) + " opset " +
           std::to_string(n.opset) + ")";
    s += ": " + n.reason;
  }
  return Unsupported(s);
}

namespace {

// Converts a value stored in a backend layout to plain.
class ToPlainKernel final : public Kernel {
 public:
  explicit ToPlainKernel(std::shared_ptr<const Layout> layout) : layout_(std::move(layout)) {}
  Status Run(const ir::ComputeContext& ctx) const override {
    return layout_->ToPlain(ctx.in(0).raw(), ctx.out(0).raw());
  }
  bool AcceptsLayout(size_t) const override { return true; }

 private:
  std::shared_ptr<const Layout> layout_;
};

}  // namespace

int ExecutionPlan::AddSlot(DataType dtype, const Shape& shape) {
  dtypes.push_back(dtype);
  shapes.push_back(shape);
  static_shape.push_back(true);
  constants.push_back(nullptr);
  layouts.push_back(nullptr);
  last_use.push_back(-1);
  return static_cast<int>(dtypes.size()) - 1;
}

int ExecutionPlan::PlainSlot(int slot, std::vector<int>* plain_of) {
  if (slot < 0 || !layouts[slot]) return slot;
  if ((*plain_of)[slot] >= 0) return (*plain_of)[slot];
  int out = AddSlot(dtypes[slot], shapes[slot]);
  plain_of->push_back(-1);
  Step step;
  layouts[slot]->PrepareToPlain();
  step.kernel = std::make_unique<ToPlainKernel>(layouts[slot]);
  step.kernel_name = "to_plain(" + layouts[slot]->name() + ")";
  step.in_slots = {slot};
  step.out_slots = {out};
  last_use[slot] = static_cast<int>(steps.size());
  steps.push_back(std::move(step));
  ++conversions;
  (*plain_of)[slot] = out;
  return out;
}

// ExecutionPlan::Create's stages, in order: slots for every value; per node, inference and
// folding, kernel selection (with a retry on plain inputs), the device check, conversions of
// inputs to plain and Prepare; then outputs, unread steps, direct outputs, the arena, and on a
// device the constants' upload.
class Planner {
 public:
  Planner(ExecutionPlan* p, const Model& model, const SessionOptions& options,
          const PlanChoices* cached)
      : p_(*p), model_(model), g_(*model.graph), options_(options), cached_(cached) {}

  void InitSlots(const std::vector<Tensor>& inputs);
  Status PlanNode(int ni);
  Status Finish();

 private:
  // Shapes (and for foldable nodes, values) of the node's outputs; true when it folded.
  StatusOr<bool> InferOrFold(const ir::Node& node, const ir::Op& op, bool* dynamic);
  PrepareContext ContextFor(const ir::Node& node, bool count_cached) const;
  // The kernel for the node; `plain_inputs` when it needs its inputs converted to plain first.
  SelectedKernel Select(const ir::Node& node, const ir::Op& op, const PrepareContext& pc,
                        bool reference_only, bool* plain_inputs) const;
  // One try at planning the node with the kernels `refused_` leaves; kUnsupported from a fast
  // kernel's Prepare comes back with *refused set, to try the next.
  Status TryPlanNode(int ni, bool dynamic, bool first, bool* refused);
  Status PrepareStep(const ir::Node& node, bool dynamic, PrepareContext* pc, Step* step);
  void MarkDirectOutputs();

  ExecutionPlan& p_;
  const Model& model_;
  const ir::Graph& g_;
  const SessionOptions& options_;
  const PlanChoices* cached_;
  bool strict_device_ = false;
  std::vector<int> plain_of_;
  std::vector<UnsupportedNode> no_kernel_;
  std::map<std::string, std::string> refused_;  // this node's kernels whose Prepare refused it
};

void Planner::InitSlots(const std::vector<Tensor>& inputs) {
  strict_device_ = p_.device && !p_.device->host_accessible();
  for (size_t i = 0; i < g_.values.size(); ++i) {
    p_.AddSlot(DataType::kUndefined, {});
    p_.static_shape[i] = false;
    if (g_.values[i].constant) {
      p_.constants[i] = g_.values[i].constant;
      p_.dtypes[i] = g_.values[i].constant->dtype();
      p_.shapes[i] = g_.values[i].constant->shape();
      p_.static_shape[i] = true;
    }
  }
  plain_of_.assign(g_.values.size(), -1);
  p_.input_slots = g_.inputs;
  for (size_t k = 0; k < g_.inputs.size(); ++k) {
    const int id = g_.inputs[k];
    p_.dtypes[id] = inputs[k].dtype();
    p_.shapes[id] = inputs[k].shape();
    p_.static_shape[id] = true;
  }
}

StatusOr<bool> Planner::InferOrFold(const ir::Node& node, const ir::Op& op, bool* dynamic) {
  bool known_shapes = true;
  ir::NodeInputs in;
  for (int id : node.inputs) {
    if (id < 0) {
      in.AddMissing();
      continue;
    }
    known_shapes = known_shapes && p_.static_shape[id];
    in.Add(p_.dtypes[id], p_.shapes[id], p_.constants[id].get());
  }
  *dynamic = !known_shapes || ir::NeedsRuntimeValues(node, op, in);
  if (*dynamic) return false;
  // Shapes from Infer; values given by Infer or computed once with the reference kernel
  // (constant folding of what the optimizer left, e.g. shape arithmetic on a new shape).
  ir::NodeEvaluation ev;
  KILN_RETURN_IF_ERROR(ir::EvaluateNode(node, op, in, ir::EvalPolicy{}, &ev));
  // Strings, sequences and optionals live outside the arena: the step makes them at run time
  // (dynamic), the kernel assigning them.
  for (size_t o = 0; o < node.outputs.size() && !ev.all_values; ++o)
    if (node.outputs[o] >= 0 && !IsPlainDataType(ev.dtypes[o])) *dynamic = true;
  if (*dynamic) return false;
  for (size_t o = 0; o < node.outputs.size(); ++o) {
    const int id = node.outputs[o];
    if (id < 0) continue;
    p_.dtypes[id] = ev.dtypes[o];
    p_.shapes[id] = ev.shapes[o];
    p_.static_shape[id] = true;
    if (ev.all_values) p_.constants[id] = std::make_shared<const Tensor>(std::move(ev.values[o]));
  }
  if (ev.all_values) ++p_.folded_nodes;
  return ev.all_values;
}

PrepareContext Planner::ContextFor(const ir::Node& node, bool count_cached) const {
  PrepareContext pc;
  pc.num_threads = p_.num_threads;
  pc.precision = options_.precision;
  pc.device = p_.device.get();
  pc.weights = p_.resources->weights.get();
  pc.tune = options_.tune;
  if (cached_) {
    auto it = cached_->find(node.name);
    if (it != cached_->end()) {
      pc.cached_variant = &it->second;
      if (count_cached) ++p_.cached_choices;
    }
  }
  for (int id : node.inputs) {
    pc.inputs.push_back(id < 0 ? TensorInfo{}
                               : TensorInfo{p_.dtypes[id], p_.shapes[id], p_.layouts[id]});
    pc.constants.push_back(id < 0 ? nullptr : p_.constants[id].get());
  }
  return pc;
}

SelectedKernel Planner::Select(const ir::Node& node, const ir::Op& op, const PrepareContext& pc,
                               bool reference_only, bool* plain_inputs) const {
  *plain_inputs = false;
  SelectedKernel sel =
      SelectKernel(node, op, pc.inputs, pc.constants, options_.backend, reference_only, &refused_);
  if (!sel.reference || reference_only) return sel;
  // Every fast kernel declined inputs in the layouts they arrive in (a blocked tensor from a
  // convolution): ask again with them plain, and convert them before the step, rather than
  // leave the node to the reference kernel.
  std::vector<TensorInfo> plain = pc.inputs;
  bool any_layout = false;
  for (TensorInfo& t : plain) {
    any_layout = any_layout || t.layout != nullptr;
    t.layout = nullptr;
  }
  if (!any_layout) return sel;
  SelectedKernel again =
      SelectKernel(node, op, plain, pc.constants, options_.backend, reference_only, &refused_);
  if (again.reference) return sel;
  *plain_inputs = true;
  return again;
}

Status Planner::PrepareStep(const ir::Node& node, bool dynamic, PrepareContext* pc, Step* step) {
  if (step->self_shaped) {
    pc->outputs.assign(node.outputs.size(), TensorInfo{});
    Status s = step->kernel->Prepare(pc);
    if (!s.ok()) return s.AddContext("while preparing " + node.Describe());
  }
  if (dynamic) return OkStatus();
  for (int id : node.outputs)
    pc->outputs.push_back(id < 0 ? TensorInfo{}
                                 : TensorInfo{p_.dtypes[id], p_.shapes[id], nullptr});
  Status s = step->kernel->Prepare(pc);
  if (!s.ok()) return s.AddContext("while preparing " + node.Describe());
  for (size_t o = 0; o < node.outputs.size(); ++o)
    if (node.outputs[o] >= 0) p_.layouts[node.outputs[o]] = pc->outputs[o].layout;
  const std::string variant = step->kernel->variant();
  if (!variant.empty()) step->kernel_name += "[" + variant + "]";
  if (options_.tune) p_.choices[node.name] = variant;
  return OkStatus();
}

Status Planner::PlanNode(int ni) {
  const ir::Node& node = g_.nodes[ni];
  bool dynamic = false;
  KILN_ASSIGN_OR_RETURN(bool folded, InferOrFold(node, *model_.ops[ni], &dynamic));
  if (folded) return OkStatus();
  // A fast kernel may refuse a node in Prepare, where it sees constants (scales, sizes) that
  // Supports() does not: the next candidate is tried, down to the reference kernel.
  refused_.clear();
  for (bool first = true;; first = false) {
    bool refused = false;
    KILN_RETURN_IF_ERROR(TryPlanNode(ni, dynamic, first, &refused));
    if (!refused) return OkStatus();
  }
}

Status Planner::TryPlanNode(int ni, bool dynamic, bool first, bool* refused) {
  const ir::Node& node = g_.nodes[ni];
  const ir::Op& op = *model_.ops[ni];
  Step step;
  step.node = ni;
  step.dynamic = dynamic;
  step.self_shaped = dynamic && op.ShapesFromRun();
  PrepareContext pc = ContextFor(node, first);
  // Dynamic steps take the reference kernel, except control flow, whose backend kernel plans
  // its bodies for the shapes it meets.
  const bool reference_only = (dynamic && !step.self_shaped) || options_.reference_only;
  bool plain_inputs = false;
  SelectedKernel sel = Select(node, op, pc, reference_only, &plain_inputs);
  if (strict_device_ && (dynamic || sel.reference)) {
    no_kernel_.push_back(
        {node.name, node.op_type, node.domain, node.opset,
         dynamic ? "its output shapes depend on run-time values, which backend '" +
                       options_.backend + "' does not support"
                 : "no " + options_.backend + " kernel supports it (" + sel.declined + ")"});
    return OkStatus();
  }
  step.kernel = std::move(sel.kernel);
  step.kernel_name = sel.name;
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    int slot = node.inputs[i];
    if (slot >= 0 && p_.layouts[slot] && (plain_inputs || !step.kernel->AcceptsLayout(i))) {
      slot = p_.PlainSlot(slot, &plain_of_);
      pc.inputs[i].layout = nullptr;
    }
    step.in_slots.push_back(slot);
  }
  Status s = PrepareStep(node, dynamic, &pc, &step);
  if (!s.ok() && s.code() == StatusCode::kUnsupported && !sel.reference) {
    refused_[sel.name] = s.message();
    *refused = true;
    return OkStatus();
  }
  KILN_RETURN_IF_ERROR(s);
  step.out_slots = node.outputs;
  for (int slot : step.in_slots)
    if (slot >= 0) p_.last_use[slot] = static_cast<int>(p_.steps.size());
  p_.steps.push_back(std::move(step));
  return OkStatus();
}

// Host plans: graph outputs with a static shape that a static step computes are written where
// the run returns them, and get no arena buffer.
void Planner::MarkDirectOutputs() {
  std::vector<char> static_output(p_.dtypes.size(), 0);
  for (const Step& st : p_.steps)
    for (int slot : st.out_slots)
      if (slot >= 0 && !st.dynamic) static_output[slot] = 1;
  p_.direct_output.assign(p_.output_slots.size(), 0);
  for (size_t k = 0; k < p_.output_slots.size() && !p_.device; ++k) {
    const int slot = p_.output_slots[k];
    bool direct =
        static_output[slot] && p_.static_shape[slot] && !p_.constants[slot] && !p_.layouts[slot];
    for (int in : p_.input_slots) direct = direct && in != slot;
    for (size_t j = 0; j < k; ++j) direct = direct && p_.output_slots[j] != slot;
    p_.direct_output[k] = direct;
  }
  p_.direct_slot.assign(p_.dtypes.size(), 0);
  for (size_t k = 0; k < p_.output_slots.size(); ++k)
    if (p_.direct_output[k]) p_.direct_slot[p_.output_slots[k]] = 1;
}

Status Planner::Finish() {
  if (!no_kernel_.empty())
    return UnsupportedNodesError(no_kernel_)
        .AddContext("while planning for backend '" + options_.backend + "'");
  for (int id : g_.outputs) p_.output_slots.push_back(p_.PlainSlot(id, &plain_of_));
  p_.DropUnreadSteps();
  for (int slot : p_.output_slots) p_.last_use[slot] = static_cast<int>(p_.steps.size());
  MarkDirectOutputs();
  p_.PlanArena();
  if (!p_.device) return OkStatus();
  for (Step& st : p_.steps) {
    const ir::Node* n = st.node >= 0 ? &g_.nodes[st.node] : nullptr;
    st.label = n ? (n->domain.empty() ? n->op_type : n->domain + "." + n->op_type) + " " + n->name
                 : st.kernel_name;
  }
  return p_.UploadConstants(model_);
}

StatusOr<std::unique_ptr<ExecutionPlan>> ExecutionPlan::Create(
    const Model& model, const std::vector<Tensor>& inputs, const SessionOptions& options,
    std::shared_ptr<Device> device, const PlanChoices* cached,
    std::shared_ptr<SessionResources> resources) {
  auto plan = std::make_unique<ExecutionPlan>();
  plan->resources = resources ? std::move(resources) : std::make_shared<SessionResources>();
  plan->device = std::move(device);
  plan->pinned_staging = options.pinned_staging;
  plan->capture_graph = options.cuda_graph;
  if (plan->device) KILN_RETURN_IF_ERROR(plan->device->MakeCurrent());
  plan->num_threads = options.num_threads > 0 ? options.num_threads : DefaultThreads();
  SetThreadCount(plan->num_threads);
  Planner planner(plan.get(), model, options, cached);
  planner.InitSlots(inputs);
  for (int ni : model.order) KILN_RETURN_IF_ERROR(planner.PlanNode(ni));
  KILN_RETURN_IF_ERROR(planner.Finish());
  return plan;
}

void ExecutionPlan::DropUnreadSteps() {
  // Last to first: a static step none of whose outputs a later kept step or the graph's outputs
  // read (its readers were folded into constants, as a Shape of a dequantized tensor is) goes.
  std::vector<char> read(dtypes.size(), 0);
  for (int slot : output_slots) read[slot] = 1;
  std::vector<char> keep(steps.size(), 1);
  for (size_t i = steps.size(); i-- > 0;) {
    const Step& st = steps[i];
    bool used = st.dynamic || st.out_slots.empty();
    for (int slot : st.out_slots) used = used || (slot >= 0 && read[slot]);
    if (!used) {
      keep[i] = 0;
      ++dropped_steps;
      continue;
    }
    for (int slot : st.in_slots)
      if (slot >= 0) read[slot] = 1;
  }
  if (dropped_steps == 0) return;
  std::vector<Step> kept;
  std::fill(last_use.begin(), last_use.end(), -1);
  for (size_t i = 0; i < steps.size(); ++i) {
    if (!keep[i]) continue;
    for (int slot : steps[i].in_slots)
      if (slot >= 0) last_use[slot] = static_cast<int>(kept.size());
    kept.push_back(std::move(steps[i]));
  }
  steps = std::move(kept);
}

void ExecutionPlan::PlanArena() {
  arena_offset.assign(dtypes.size(), -1);
  auto bytes_of = [&](int slot) {
    return layouts[slot]
               ? layouts[slot]->bytes()
               : static_cast<size_t>(NumElements(shapes[slot])) * DataTypeSize(dtypes[slot]);
  };
  // Each arena buffer: a slot written by a static step, plus the slots that reuse it in place
  // (a kernel's output overwriting an input whose last reader it is).
  std::vector<int> buffer_of(dtypes.size(), -1);
  std::vector<BufferRequest> requests;
  std::vector<int> owner;  // per buffer: the slot that first wrote it
  if (device) {            // graph inputs are uploaded into the arena before the first step
    for (int slot : input_slots) {
      if (constants[slot] || buffer_of[slot] >= 0) continue;
      buffer_of[slot] = static_cast<int>(requests.size());
      requests.push_back({bytes_of(slot), 0, std::max(last_use[slot], 0)});
      owner.push_back(slot);
    }
  }
  for (size_t si = 0; si < steps.size(); ++si) {
    const Step& st = steps[si];
    const int step = static_cast<int>(si);
    scratch_bytes = std::max(scratch_bytes, st.kernel->ScratchBytes());
    if (st.dynamic) continue;
    const int ip = st.kernel->InPlaceInput();
    for (size_t o = 0; o < st.out_slots.size(); ++o) {
      const int slot = st.out_slots[o];
      if (slot < 0 || constants[slot] || IsDirect(slot)) continue;  // direct: no buffer
      const size_t bytes = bytes_of(slot);
      if (o == 0 && ip >= 0 && static_cast<size_t>(ip) < st.in_slots.size()) {
        const int in = st.in_slots[ip];
        // Not when the step reads the same value through another input too (a convolution
        // whose residual is its own input, x + conv(x)): writing would clobber what it reads.
        int reads = 0;
        for (int s : st.in_slots) reads += s == in;
        if (in >= 0 && reads == 1 && buffer_of[in] >= 0 && last_use[in] == step &&
            bytes_of(in) == bytes) {
          buffer_of[slot] = buffer_of[in];
          BufferRequest& r = requests[buffer_of[in]];
          r.last_step = std::max({r.last_step, last_use[slot], step});
          ++in_place;
          continue;
        }
      }
      buffer_of[slot] = static_cast<int>(requests.size());
      requests.push_back({bytes, step, std::max(last_use[slot], step)});
      owner.push_back(slot);
    }
  }
  MemoryLayout layout = PlanMemory(requests);
  for (size_t slot = 0; slot < buffer_of.size(); ++slot)
    if (buffer_of[slot] >= 0)
      arena_offset[slot] = static_cast<int64_t>(layout.offsets[buffer_of[slot]]);
  scratch_offset = layout.arena_bytes;
  arena_bytes = layout.arena_bytes + (scratch_bytes + 63) / 64 * 64;
}

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

Status ExecutionPlan::Execute(const Model& model, const std::vector<const Tensor*>& inputs,
                              std::vector<Tensor>* outputs, DeviceTimings* timings,
                              const RunOptions* control, const std::vector<Tensor*>& bound) const {
  if (device) return ExecuteOnDevice(model, inputs, outputs, timings, control, bound);
  return ExecuteOnHost(model, inputs, outputs, timings, control, bound);
}

std::unique_ptr<RunContext> ExecutionPlan::NewRunContext() const {
  auto run = std::make_unique<RunContext>();
  run->env.resize(dtypes.size());
  run->contexts.resize(steps.size());
  for (size_t si = 0; si < steps.size(); ++si) {
    const Step& step = steps[si];
    ir::ComputeContext& cc = run->contexts[si];
    for (size_t j = 0; j < step.in_slots.size(); ++j) {
      const int slot = step.in_slots[j];
      const Tensor* t = nullptr;
      if (slot >= 0 && constants[slot])
        t = device ? &device_constants[slot] : constants[slot].get();
      else if (slot >= 0)
        t = &run->env[slot];
      // On the host a graph input is read where the caller keeps it; a device reads it from its
      // arena slot, where the run uploads it.
      for (size_t k = 0; k < input_slots.size() && !device; ++k)
        if (slot >= 0 && input_slots[k] == slot)
          run->input_reads.push_back(
              {static_cast<int>(si), static_cast<int>(j), static_cast<int>(k)});
      cc.inputs.push_back(t);
    }
    for (int slot : step.out_slots) cc.outputs.push_back(slot >= 0 ? &run->env[slot] : nullptr);
  }
  run->idle_outputs.resize(output_slots.size());
  run->spare_outputs.resize(output_slots.size());
  run->redirected.assign(output_slots.size(), 0);
  // A direct output's slot between runs: its shape and no storage. Restoring it after a run
  // copies into a shape that is already there: no allocation.
  for (size_t k = 0; k < output_slots.size(); ++k)
    if (direct_output[k]) {
      const int slot = output_slots[k];
      run->idle_outputs[k] = Tensor::View(dtypes[slot], shapes[slot], nullptr);
      run->env[slot] = run->idle_outputs[k];
    }
  return run;
}

std::unique_ptr<RunContext> ExecutionPlan::TakeRun() const {
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

void ExecutionPlan::ReturnRun(std::unique_ptr<RunContext> run) const {
  for (const RunContext::InputRead& r : run->input_reads)
    run->contexts[r.step].inputs[r.position] = nullptr;  // keep no caller tensor
  std::lock_guard<std::mutex> lock(runs_mu_);
  free_runs_.push_back(std::move(run));
}

void ExecutionPlan::ViewArena(RunContext* run, char* base) const {
  if (run->base == base) return;
  for (size_t slot = 0; slot < run->env.size(); ++slot)
    if (arena_offset[slot] >= 0 && static_shape[slot])
      run->env[slot] = Tensor::View(dtypes[slot], shapes[slot], base + arena_offset[slot]);
  run->base = base;
}

void ExecutionPlan::Warm() const {
  if (device) return;
  auto run = NewRunContext();
  // Viewed against the arena the next run will be lent (the pool's smallest that fits).
  Tensor arena = resources->arenas.Take(arena_bytes);
  ViewArena(run.get(), static_cast<char*>(arena.raw()));
  resources->arenas.Return(std::move(arena));
  ReturnRun(std::move(run));
}

// Directly written outputs (direct_output): the slot points at the tensor the run returns (new
// storage, the caller's bound tensor, or the context's spare when the caller drops it).
Status ExecutionPlan::RedirectDirectOutputs(const ir::Graph& g, RunContext* run,
                                            std::vector<Tensor>* outputs,
                                            const std::vector<Tensor*>& bound) const {
  std::vector<Tensor>& env = run->env;
  for (size_t k = 0; k < output_slots.size(); ++k) {
    if (!direct_output[k]) continue;
    const int slot = output_slots[k];
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
      (*outputs)[k] = Tensor::Adopt(dtypes[slot], shapes[slot], data, *std::move(storage));
      target = &(*outputs)[k];
    } else if (k < bound.size()) {
      target = bound[k];
    }
    if (target == nullptr) {  // the caller drops this output: storage of the run context's own
      if (!run->spare_outputs[k].defined())
        run->spare_outputs[k] = Tensor::Empty(dtypes[slot], shapes[slot]);
      target = &run->spare_outputs[k];
    }
    env[slot] = *target;
    run->redirected[k] = 1;
  }
  return OkStatus();
}

// The outputs not written where they are returned: cloned, or copied into the bound tensors.
Status ExecutionPlan::CollectOutputs(const ir::Graph& g, RunContext* run,
                                     const std::vector<const Tensor*>& inputs,
                                     std::vector<Tensor>* outputs,
                                     const std::vector<Tensor*>& bound) const {
  std::vector<Tensor>& env = run->env;
  // A slot's tensor outside a step: a constant, a graph input, or the run's own.
  auto get = [&](int slot) -> const Tensor* {
    if (constants[slot]) return constants[slot].get();
    for (size_t k = 0; k < input_slots.size(); ++k)
      if (input_slots[k] == slot) return inputs[k];
    return env[slot].defined() ? &env[slot] : nullptr;
  };
  for (size_t k = 0; k < output_slots.size(); ++k) {
    if (run->redirected[k]) continue;  // written where it is returned
    const Tensor* t = get(output_slots[k]);
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

Status ExecutionPlan::ExecuteOnHost(const Model& model, const std::vector<const Tensor*>& inputs,
                                    std::vector<Tensor>* outputs, DeviceTimings* timings,
                                    const RunOptions* control,
                                    const std::vector<Tensor*>& bound) const {
  const ir::Graph& g = *model.graph;
  SetThreadCount(num_threads);
  Tensor arena = resources->arenas.Take(arena_bytes);
  std::unique_ptr<RunContext> run = TakeRun();
  // The arena and the run context go back to their pools however the run ends; the context
  // keeps no caller tensor (graph inputs are only pointed at, for this run).
  struct Return {
    const ExecutionPlan* plan;
    ArenaPool* pool;
    Tensor* arena;
    std::unique_ptr<RunContext>* run;
    ~Return() {
      pool->Return(std::move(*arena));
      plan->ReturnRun(std::move(*run));
    }
  } give_back{this, &resources->arenas, &arena, &run};
  char* base = static_cast<char*>(arena.raw());
  std::vector<Tensor>& env = run->env;
  ViewArena(run.get(), base);  // a new context, or another arena than last time
  for (const RunContext::InputRead& r : run->input_reads)
    run->contexts[r.step].inputs[r.position] = inputs[r.input];
  // Directly written outputs (direct_output): the slot points at the tensor the run returns
  // until the run ends, then at no storage again.
  if (bound.empty()) outputs->assign(output_slots.size(), Tensor());
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
  } restore{this, run.get()};
  KILN_RETURN_IF_ERROR(RedirectDirectOutputs(g, run.get(), outputs, bound));
  std::vector<double>* step_ms = timings ? timings->step_ms : nullptr;
  KILN_RETURN_IF_ERROR(RunSteps(model, run.get(), base, control, step_ms,
                                timings ? timings->step_start_us : nullptr));
  KILN_RETURN_IF_ERROR(CollectOutputs(g, run.get(), inputs, outputs, bound));
  // Dynamic or non-arena storage still held (outputs, values read by no step) is released now.
  for (size_t slot = 0; slot < env.size(); ++slot)
    if (!constants[slot] && (arena_offset[slot] < 0 || !static_shape[slot]) &&
        env[slot].defined() && !IsDirect(slot))
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

Status ExecutionPlan::RunSteps(const Model& model, RunContext* run, char* base,
                               const RunOptions* control, std::vector<double>* step_ms,
                               std::vector<double>* step_start_us) const {
  const ir::Graph& g = *model.graph;
  std::vector<Tensor>& env = run->env;
  if (step_ms) step_ms->assign(steps.size(), 0.0);
  if (step_ms && step_start_us) step_start_us->assign(steps.size(), 0.0);
  for (size_t si = 0; si < steps.size(); ++si) {
    const Step& step = steps[si];
    auto what = [&] {
      return step.node >= 0 ? g.nodes[step.node].Describe() : std::string("layout conversion");
    };
    KILN_RETURN_IF_ERROR(CheckRunControl(control, si, steps.size(), what));
    ir::ComputeContext& cc = run->contexts[si];
    for (size_t j = 0; j < step.in_slots.size(); ++j)
      if (step.in_slots[j] >= 0 && (cc.inputs[j] == nullptr || !cc.inputs[j]->defined()))
        return Internal("slot " + std::to_string(step.in_slots[j]) + " missing when running " +
                        what());
    if (step.self_shaped) {  // control flow: the kernel assigns its outputs
      KILN_RETURN_IF_ERROR(CheckSelfShapedInputs(g.nodes[step.node], *model.ops[step.node], cc));
      for (int slot : step.out_slots)
        if (slot >= 0) env[slot] = Tensor();
    } else if (step.dynamic) {  // shapes known only now: inferred, and storage made, every run
      const ir::Node& node = g.nodes[step.node];
      ir::NodeInputs in;
      for (const Tensor* t : cc.inputs)
        in.Add(t ? t->dtype() : DataType::kUndefined, t ? t->shape() : Shape{}, t);
      ir::NodeEvaluation ev;
      KILN_RETURN_IF_ERROR(
          ir::EvaluateNode(node, *model.ops[step.node], in, ir::EvalPolicy{.compute = false}, &ev));
      for (size_t o = 0; o < step.out_slots.size(); ++o) {
        const int slot = step.out_slots[o];
        if (slot < 0) continue;
        const DataType dt = ev.dtypes[o];
        const Shape& sh = ev.shapes[o];
        if (!IsPlainDataType(dt)) {  // a string, sequence or optional: the kernel assigns it
          env[slot] = Tensor();
          continue;
        }
        env[slot] = arena_offset[slot] >= 0
                        ? Tensor::View(dt, sh, base + arena_offset[slot])
                        : Tensor::Empty(dt, sh, layouts[slot] ? layouts[slot]->bytes() : 0);
      }
    } else {
      for (int slot : step.out_slots)
        if (slot >= 0 && arena_offset[slot] < 0 && !IsDirect(slot))
          env[slot] =
              Tensor::Empty(dtypes[slot], shapes[slot], layouts[slot] ? layouts[slot]->bytes() : 0);
    }
    cc.scratch = scratch_bytes > 0 ? base + scratch_offset : nullptr;
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
      if (slot >= 0 && last_use[slot] == static_cast<int>(si) && !constants[slot] &&
          (arena_offset[slot] < 0 || !static_shape[slot]))
        env[slot] = Tensor();
  }
  return OkStatus();
}

std::string ExecutionPlan::Describe(const Model& model) const {
  const ir::Graph& g = *model.graph;
  std::string s = std::to_string(steps.size()) + " steps, " + std::to_string(folded_nodes) +
                  " nodes folded into constants, " +
                  (dropped_steps ? std::to_string(dropped_steps) + " unread steps dropped, " : "") +
                  std::to_string(conversions) + " layout conversions, " +
                  std::to_string(num_threads) + " threads\n" + "memory plan: one arena of " +
                  std::to_string(arena_bytes) + " bytes (" + std::to_string(scratch_bytes) +
                  " of them scratch), " + std::to_string(in_place) + " outputs written in place\n";
  for (const Step& st : steps) {
    if (st.node < 0) {
      s += "  " + st.kernel_name + "\n";
      continue;
    }
    const ir::Node& n = g.nodes[st.node];
    s += "  " + n.op_type + " '" + n.name + "' -> " + st.kernel_name;
    if (st.dynamic) s += " (shapes at run time)";
    for (int slot : st.out_slots)
      if (slot >= 0 && static_shape[slot]) {
        s += " " + std::string(DataTypeName(dtypes[slot])) + ShapeToString(shapes[slot]);
        if (layouts[slot]) s += "@" + layouts[slot]->name();
      }
    s += "\n";
  }
  return s;
}

PlanSummary ExecutionPlan::Summarize(const Model& model) const {
  const ir::Graph& g = *model.graph;
  PlanSummary p;
  p.folded_nodes = folded_nodes;
  p.layout_conversions = conversions;
  p.arena_bytes = arena_bytes;
  p.scratch_bytes = scratch_bytes;
  p.threads = num_threads;
  for (const Step& st : steps) {
    PlanStep ps;
    ps.kernel = st.kernel_name;
    ps.dynamic = st.dynamic;
    if (st.node < 0) {
      ps.op_type = "LayoutConversion";
    } else {
      const ir::Node& n = g.nodes[st.node];
      ps.node = n.name;
      ps.op_type = (n.domain.empty() ? "" : n.domain + ".") + n.op_type;
    }
    p.steps.push_back(std::move(ps));
  }
  p.text = Describe(model);
  return p;
}

}  // namespace kiln::runtime
