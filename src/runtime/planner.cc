#include "runtime/planner.h"

#include <algorithm>
#include <map>

#include "core/threading.h"
#include "ir/evaluate.h"
#include "runtime/body_planner.h"
#include "runtime/memory_planner.h"

namespace kiln::runtime {
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

// The planner's stages (planner.h), each a method.
class Planner {
 public:
  Planner(ExecutionPlan* p, const Model& model, const SessionOptions& options,
          const PlanChoices* cached, bool body)
      : p_(*p),
        model_(model),
        g_(*model.graph),
        options_(options),
        cached_(cached),
        body_(body),
        bodies_(NewBodyPlanner(options)) {}

  void InitSlots(const std::vector<Tensor>& inputs);
  Status PlanNode(int ni);
  Status Finish();

 private:
  // Shapes (and for foldable nodes, values) of the node's outputs; true when it folded.
  StatusOr<bool> InferOrFold(const ir::Node& node, const ir::Op& op, bool* dynamic);
  bool ReadsFloat16(const ir::Node& node) const;
  // A failed inference (InvalidModel) in stage 2a, where every shape follows from the fed ones.
  // With every input dimension declared fixed, the feed matched them (the session checks) and the
  // model is at fault; with one open, the shapes given may each fit and not together: the caller's
  // error (InvalidArgument, naming them).
  Status FeedShapeError(const Status& s) const;
  PrepareContext ContextFor(const ir::Node& node, bool count_cached) const;
  // The kernel for the node; `plain_inputs` when it needs its inputs converted to plain first.
  SelectedKernel Select(const ir::Node& node, const ir::Op& op, const PrepareContext& pc,
                        bool reference_only, bool* plain_inputs) const;
  // One try at planning the node with the kernels `refused_` leaves; kUnsupported from a fast
  // kernel's Prepare comes back with *refused set, to try the next.
  Status TryPlanNode(int ni, bool dynamic, bool first, bool* refused);
  Status PrepareStep(const ir::Node& node, bool dynamic, PrepareContext* pc, Step* step);
  void MarkDirectOutputs();
  // Stage 3: static steps whose outputs nothing reads go; last_use is recomputed.
  void DropUnreadSteps();
  // Stage 4: the memory plan.
  void PlanArena();
  // Stage 5, device plans: the constants the steps read, on the device.
  Status UploadConstants();
  int AddSlot(DataType dtype, const Shape& shape);
  // The slot holding `slot`'s value in plain layout, adding a conversion step if needed.
  int PlainSlot(int slot);

  ExecutionPlan& p_;
  const Model& model_;
  const ir::Graph& g_;
  const SessionOptions& options_;
  const PlanChoices* cached_;
  const bool body_;  // planning a control-flow body (PlanExecution's `body`)
  bool strict_device_ = false;
  std::vector<int> plain_of_;
  std::vector<UnsupportedNode> no_kernel_;
  std::map<std::string, std::string> refused_;  // this node's kernels whose Prepare refused it
  std::unique_ptr<BodyPlanner> bodies_;         // control-flow bodies (PrepareContext::bodies)
};

void Planner::InitSlots(const std::vector<Tensor>& inputs) {
  strict_device_ = p_.device && !p_.device->host_accessible();
  for (size_t i = 0; i < g_.values.size(); ++i) {
    AddSlot(DataType::kUndefined, {});
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

bool Planner::ReadsFloat16(const ir::Node& node) const {
  for (int id : node.inputs)
    if (id >= 0 && p_.dtypes[id] == DataType::kFloat16) return true;
  return false;
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
  if (Status st = ir::EvaluateNode(node, op, in, ir::EvalPolicy{}, &ev); !st.ok())
    return FeedShapeError(st);
  // Strings, sequences and optionals live outside the arena: the step makes them at run time
  // (dynamic), the kernel assigning them.
  for (size_t o = 0; o < node.outputs.size() && !ev.all_values; ++o)
    if (node.outputs[o] >= 0 && !IsPlainDataType(ev.dtypes[o])) *dynamic = true;
  if (*dynamic) return false;
  for (size_t o = 0; o < node.outputs.size(); ++o) {
    const int id = node.outputs[o];
    if (id < 0) continue;
    p_.dtypes[id] = ev.dtypes[o];
    // A node the float16 rewrite runs in float16 (half_values.h) writes float16 where its op's
    // inference, which describes the float32 reference, says float: the graph declares it. Only
    // there: under fp16, outside bodies (the rewrite leaves them alone), for a node reading
    // float16. Elsewhere a declared float16 (a model's value_info in a body, which the lowering
    // of float16 models does not retype) must not size a buffer a float32 kernel writes.
    if (!body_ && options_.precision == Precision::kFp16 && !ev.all_values &&
        ev.dtypes[o] == DataType::kFloat && g_.values[id].dtype == DataType::kFloat16 &&
        ReadsFloat16(node))
      p_.dtypes[id] = DataType::kFloat16;
    p_.shapes[id] = ev.shapes[o];
    p_.static_shape[id] = true;
    if (ev.all_values) p_.constants[id] = std::make_shared<const Tensor>(std::move(ev.values[o]));
  }
  if (ev.all_values) ++p_.folded_nodes;
  return ev.all_values;
}

Status Planner::FeedShapeError(const Status& s) const {
  if (body_ || s.code() != StatusCode::kInvalidModel) return s;
  bool open = false;
  std::string given;
  for (int id : g_.inputs) {
    const ir::Value& v = g_.values[id];
    if (v.constant) continue;  // an IR<4 initializer listed as input: not fed
    open = open || !v.shape;
    if (v.shape)
      for (const ir::Dim& d : *v.shape) open = open || !d.fixed();
    given += (given.empty() ? "" : ", ") + v.name + " " + ShapeToString(p_.shapes[id]);
  }
  if (!open) return s;
  return InvalidArgument("the input shapes given (" + given +
                         ") do not fit the model: " + s.message());
}

PrepareContext Planner::ContextFor(const ir::Node& node, bool count_cached) const {
  PrepareContext pc;
  pc.num_threads = p_.num_threads;
  pc.precision = options_.precision;
  pc.device = p_.device.get();
  pc.weights = p_.resources->weights.get();
  pc.bodies = bodies_.get();
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
  SelectedKernel sel = SelectKernel(node, op, pc.inputs, pc.constants, options_.backend,
                                    options_.precision, reference_only, &refused_);
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
  SelectedKernel again = SelectKernel(node, op, plain, pc.constants, options_.backend,
                                      options_.precision, reference_only, &refused_);
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
    const std::string backend = BackendName(options_.backend);
    no_kernel_.push_back({node.name, node.op_type, node.domain, node.opset,
                          dynamic
                              ? "its output shapes depend on run-time values, which backend '" +
                                    backend + "' does not support"
                              : "no " + backend + " kernel supports it (" + sel.declined + ")"});
    return OkStatus();
  }
  step.kernel = std::move(sel.kernel);
  step.kernel_name = sel.name;
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    int slot = node.inputs[i];
    if (slot >= 0 && p_.layouts[slot] && (plain_inputs || !step.kernel->AcceptsLayout(i))) {
      slot = PlainSlot(slot);
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
        .AddContext(std::string("while planning for backend '") + BackendName(options_.backend) +
                    "'");
  for (int id : g_.outputs) p_.output_slots.push_back(PlainSlot(id));
  DropUnreadSteps();
  for (int slot : p_.output_slots) p_.last_use[slot] = static_cast<int>(p_.steps.size());
  MarkDirectOutputs();
  PlanArena();
  if (!p_.device) return OkStatus();
  for (Step& st : p_.steps) {
    const ir::Node* n = st.node >= 0 ? &g_.nodes[st.node] : nullptr;
    st.label = n ? (n->domain.empty() ? n->op_type : n->domain + "." + n->op_type) + " " + n->name
                 : st.kernel_name;
  }
  return UploadConstants();
}

int Planner::AddSlot(DataType dtype, const Shape& shape) {
  p_.dtypes.push_back(dtype);
  p_.shapes.push_back(shape);
  p_.static_shape.push_back(true);
  p_.constants.push_back(nullptr);
  p_.layouts.push_back(nullptr);
  p_.last_use.push_back(-1);
  return static_cast<int>(p_.dtypes.size()) - 1;
}

int Planner::PlainSlot(int slot) {
  if (slot < 0 || !p_.layouts[slot]) return slot;
  if (plain_of_[slot] >= 0) return plain_of_[slot];
  int out = AddSlot(p_.dtypes[slot], p_.shapes[slot]);
  plain_of_.push_back(-1);
  Step step;
  p_.layouts[slot]->PrepareToPlain();
  step.kernel = std::make_unique<ToPlainKernel>(p_.layouts[slot]);
  step.kernel_name = "to_plain(" + p_.layouts[slot]->name() + ")";
  step.in_slots = {slot};
  step.out_slots = {out};
  p_.last_use[slot] = static_cast<int>(p_.steps.size());
  p_.steps.push_back(std::move(step));
  ++p_.conversions;
  plain_of_[slot] = out;
  return out;
}

void Planner::DropUnreadSteps() {
  // Last to first: a static step none of whose outputs a later kept step or the graph's outputs
  // read (its readers were folded into constants, as a Shape of a dequantized tensor is) goes.
  std::vector<char> read(p_.dtypes.size(), 0);
  for (int slot : p_.output_slots) read[slot] = 1;
  std::vector<char> keep(p_.steps.size(), 1);
  for (size_t i = p_.steps.size(); i-- > 0;) {
    const Step& st = p_.steps[i];
    bool used = st.dynamic || st.out_slots.empty();
    for (int slot : st.out_slots) used = used || (slot >= 0 && read[slot]);
    if (!used) {
      keep[i] = 0;
      ++p_.dropped_steps;
      continue;
    }
    for (int slot : st.in_slots)
      if (slot >= 0) read[slot] = 1;
  }
  if (p_.dropped_steps == 0) return;
  std::vector<Step> kept;
  std::fill(p_.last_use.begin(), p_.last_use.end(), -1);
  for (size_t i = 0; i < p_.steps.size(); ++i) {
    if (!keep[i]) continue;
    for (int slot : p_.steps[i].in_slots)
      if (slot >= 0) p_.last_use[slot] = static_cast<int>(kept.size());
    kept.push_back(std::move(p_.steps[i]));
  }
  p_.steps = std::move(kept);
}

void Planner::PlanArena() {
  p_.arena_offset.assign(p_.dtypes.size(), -1);
  auto bytes_of = [&](int slot) {
    return p_.layouts[slot]
               ? p_.layouts[slot]->bytes()
               : static_cast<size_t>(NumElements(p_.shapes[slot])) * DataTypeSize(p_.dtypes[slot]);
  };
  // Each arena buffer: a slot written by a static step, plus the slots that reuse it in place
  // (a kernel's output overwriting an input whose last reader it is).
  std::vector<int> buffer_of(p_.dtypes.size(), -1);
  std::vector<BufferRequest> requests;
  std::vector<int> owner;  // per buffer: the slot that first wrote it
  if (p_.device) {         // graph inputs are uploaded into the arena before the first step
    for (int slot : p_.input_slots) {
      if (p_.constants[slot] || buffer_of[slot] >= 0) continue;
      buffer_of[slot] = static_cast<int>(requests.size());
      requests.push_back({bytes_of(slot), 0, std::max(p_.last_use[slot], 0)});
      owner.push_back(slot);
    }
  }
  for (size_t si = 0; si < p_.steps.size(); ++si) {
    const Step& st = p_.steps[si];
    const int step = static_cast<int>(si);
    p_.scratch_bytes = std::max(p_.scratch_bytes, st.kernel->ScratchBytes());
    if (st.dynamic) continue;
    const int ip = st.kernel->InPlaceInput();
    for (size_t o = 0; o < st.out_slots.size(); ++o) {
      const int slot = st.out_slots[o];
      if (slot < 0 || p_.constants[slot] || p_.IsDirect(slot)) continue;  // direct: no buffer
      const size_t bytes = bytes_of(slot);
      if (o == 0 && ip >= 0 && static_cast<size_t>(ip) < st.in_slots.size()) {
        const int in = st.in_slots[ip];
        // Not when the step reads the same value through another input too (a convolution
        // whose residual is its own input, x + conv(x)): writing would clobber what it reads.
        int reads = 0;
        for (int s : st.in_slots) reads += s == in;
        if (in >= 0 && reads == 1 && buffer_of[in] >= 0 && p_.last_use[in] == step &&
            bytes_of(in) == bytes) {
          buffer_of[slot] = buffer_of[in];
          BufferRequest& r = requests[buffer_of[in]];
          r.last_step = std::max({r.last_step, p_.last_use[slot], step});
          ++p_.in_place;
          continue;
        }
      }
      buffer_of[slot] = static_cast<int>(requests.size());
      requests.push_back({bytes, step, std::max(p_.last_use[slot], step)});
      owner.push_back(slot);
    }
  }
  MemoryLayout layout = PlanMemory(requests);
  for (size_t slot = 0; slot < buffer_of.size(); ++slot)
    if (buffer_of[slot] >= 0)
      p_.arena_offset[slot] = static_cast<int64_t>(layout.offsets[buffer_of[slot]]);
  p_.scratch_offset = layout.arena_bytes;
  p_.arena_bytes = layout.arena_bytes + (p_.scratch_bytes + 63) / 64 * 64;
}

Status Planner::UploadConstants() {
  const ir::Graph& g = *model_.graph;
  std::vector<bool> read(p_.dtypes.size(), false);
  for (const Step& st : p_.steps)
    for (int slot : st.in_slots)
      if (slot >= 0 && p_.constants[slot]) read[slot] = true;
  p_.device_constants.assign(p_.dtypes.size(), Tensor());
  p_.device_constant_memory.clear();
  // The model's own constants (weights) are shared by every plan of the session: those already on
  // the device are only viewed. A slot below the graph's value count whose constant is the
  // graph's is one of them; what this plan folded for its shapes is its own.
  DeviceConstantCache& cache = p_.resources->device_constants;
  auto is_model_constant = [&](size_t slot) {
    return slot < g.values.size() && g.values[slot].constant == p_.constants[slot];
  };
  size_t total = 0;
  for (size_t slot = 0; slot < read.size(); ++slot) {
    if (!read[slot]) continue;
    if (is_model_constant(slot)) {
      if (auto hit = cache.Find(*p_.constants[slot])) {
        p_.device_constants[slot] = hit->view;
        p_.device_constant_memory.push_back(hit->memory);
        read[slot] = false;
        continue;
      }
    }
    total += DeviceAlignUp(p_.constants[slot]->bytes());
  }
  if (total == 0) return OkStatus();
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<void> block, p_.device->Allocate(total));
  p_.device_constant_memory.push_back(block);
  char* base = static_cast<char*>(block.get());
  size_t offset = 0;
  for (size_t slot = 0; slot < read.size(); ++slot) {
    if (!read[slot]) continue;
    const Tensor& c = *p_.constants[slot];
    KILN_RETURN_IF_ERROR(p_.device->CopyToDevice(base + offset, c.raw(), c.bytes()));
    p_.device_constants[slot] = Tensor::View(c.dtype(), c.shape(), base + offset);
    if (is_model_constant(slot)) cache.Add(c, p_.device_constants[slot], block);
    offset += DeviceAlignUp(c.bytes());
  }
  return OkStatus();
}

}  // namespace

StatusOr<std::unique_ptr<const ExecutionPlan>> PlanExecution(
    const Model& model, const std::vector<Tensor>& inputs, const SessionOptions& options,
    std::shared_ptr<Device> device, const PlanChoices* cached,
    std::shared_ptr<SessionResources> resources, bool body) {
  auto plan = std::make_unique<ExecutionPlan>();
  plan->resources = resources ? std::move(resources) : std::make_shared<SessionResources>();
  plan->device = std::move(device);
  plan->pinned_staging = options.pinned_staging;
  plan->capture_graph = options.cuda_graph;
  if (plan->device) KILN_RETURN_IF_ERROR(plan->device->MakeCurrent());
  plan->num_threads = options.num_threads > 0 ? options.num_threads : DefaultThreads();
  SetThreadCount(plan->num_threads);
  Planner planner(plan.get(), model, options, cached, body);
  planner.InitSlots(inputs);
  for (int ni : model.order) KILN_RETURN_IF_ERROR(planner.PlanNode(ni));
  KILN_RETURN_IF_ERROR(planner.Finish());
  return std::unique_ptr<const ExecutionPlan>(std::move(plan));
}

}  // namespace kiln::runtime
