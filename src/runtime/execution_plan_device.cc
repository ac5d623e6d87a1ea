// The device half of ExecutionPlan: constants uploaded once per plan, and Execute() for a device
// backend. A run takes a DeviceRun (arena, streams, staging) from the plan's pool, uploads the
// graph inputs into their arena slots, runs every step on the device's compute stream, downloads
// the outputs and waits once at the end. Constants and graph inputs returned as outputs are
// copied on the host. No allocation in a warm run besides the output tensors handed to the caller.
#include <algorithm>

#include "runtime/execution_plan.h"

namespace kiln::runtime {

namespace {
constexpr size_t kDeviceAlign = 256;  // cudaMalloc's alignment; kept for every sub-buffer
size_t AlignUp(size_t n) { return (n + kDeviceAlign - 1) / kDeviceAlign * kDeviceAlign; }
}  // namespace

Status ExecutionPlan::UploadConstants() {
  std::vector<bool> read(dtypes.size(), false);
  for (const Step& st : steps)
    for (int slot : st.in_slots)
      if (slot >= 0 && constants[slot]) read[slot] = true;
  size_t total = 0;
  for (size_t slot = 0; slot < read.size(); ++slot)
    if (read[slot]) total += AlignUp(constants[slot]->bytes());
  device_constants.assign(dtypes.size(), Tensor());
  if (total == 0) return OkStatus();
  KILN_ASSIGN_OR_RETURN(device_constant_memory, device->Allocate(total));
  char* base = static_cast<char*>(device_constant_memory.get());
  size_t offset = 0;
  for (size_t slot = 0; slot < read.size(); ++slot) {
    if (!read[slot]) continue;
    const Tensor& c = *constants[slot];
    KILN_RETURN_IF_ERROR(device->CopyToDevice(base + offset, c.raw(), c.bytes()));
    device_constants[slot] = Tensor::View(c.dtype(), c.shape(), base + offset);
    offset += AlignUp(c.bytes());
  }
  return OkStatus();
}

Status ExecutionPlan::ExecuteOnDevice(const Model& model, const std::vector<Tensor>& inputs,
                                      std::vector<Tensor>* outputs, DeviceTimings* timings,
                                      const RunOptions* control) const {
  const ir::Graph& g = *model.graph;
  std::unique_ptr<DeviceRun> run;
  {
    std::lock_guard<std::mutex> lock(runs_mu_);
    if (!free_runs_.empty()) {
      run = std::move(free_runs_.back());
      free_runs_.pop_back();
    }
  }
  if (!run) {
    size_t upload = 0, download = 0;
    for (int slot : input_slots)
      upload +=
          AlignUp(static_cast<size_t>(NumElements(shapes[slot])) * DataTypeSize(dtypes[slot]));
    for (int slot : output_slots)
      download +=
          AlignUp(static_cast<size_t>(NumElements(shapes[slot])) * DataTypeSize(dtypes[slot]));
    KILN_ASSIGN_OR_RETURN(
        run, device->NewRun(std::max<size_t>(arena_bytes, 1), upload, download, pinned_staging));
  }
  struct Return {
    const ExecutionPlan* plan;
    std::unique_ptr<DeviceRun>* run;
    ~Return() {
      std::lock_guard<std::mutex> lock(plan->runs_mu_);
      plan->free_runs_.push_back(std::move(*run));
    }
  } give_back{this, &run};

  KILN_RETURN_IF_ERROR(run->Begin());
  char* base = static_cast<char*>(run->arena());
  std::vector<Tensor> env(dtypes.size());
  for (size_t k = 0; k < input_slots.size(); ++k) {
    const int slot = input_slots[k];
    if (arena_offset[slot] < 0) continue;  // unread input
    env[slot] = Tensor::View(inputs[k].dtype(), inputs[k].shape(), base + arena_offset[slot]);
    KILN_RETURN_IF_ERROR(run->Upload(inputs[k].raw(), env[slot].raw(), inputs[k].bytes()));
  }
  KILN_RETURN_IF_ERROR(run->StartCompute());
  if (capture_graph && run->SupportsCapture() && run->captured()) {
    KILN_RETURN_IF_ERROR(run->Replay());
  } else {
    const bool capture = capture_graph && run->SupportsCapture() && run->completed_runs > 0;
    if (capture) KILN_RETURN_IF_ERROR(run->BeginCapture());
    // A capture records every step: the run control is checked only outside captures.
    Status s = RunSteps(g, base, run->stream(), &env, capture ? nullptr : control);
    if (capture) {
      Status end = run->EndCapture();  // always end a capture, even after a failed step
      if (s.ok()) s = end;
      if (s.ok()) s = run->Replay();
    }
    if (s.code() == StatusCode::kCancelled || s.code() == StatusCode::kDeadlineExceeded)
      (void)run->Finish();  // let the enqueued work drain before the context is reused
    KILN_RETURN_IF_ERROR(s);
  }
  outputs->clear();
  for (size_t k = 0; k < output_slots.size(); ++k) {
    const int slot = output_slots[k];
    if (constants[slot]) {
      outputs->push_back(constants[slot]->Clone());
      continue;
    }
    auto in = std::find(input_slots.begin(), input_slots.end(), slot);
    if (in != input_slots.end()) {
      outputs->push_back(inputs[in - input_slots.begin()].Clone());
      continue;
    }
    if (arena_offset[slot] < 0)
      return Internal("graph output '" + g.values[g.outputs[k]].name + "' has no device buffer");
    outputs->push_back(Tensor::Empty(dtypes[slot], shapes[slot]));
    KILN_RETURN_IF_ERROR(
        run->Download(base + arena_offset[slot], outputs->back().raw(), outputs->back().bytes()));
  }
  KILN_RETURN_IF_ERROR(run->Finish());
  ++run->completed_runs;
  if (timings) *timings = run->LastTimings();
  return OkStatus();
}

Status ExecutionPlan::RunSteps(const ir::Graph& g, char* base, void* stream,
                               std::vector<Tensor>* env_ptr, const RunOptions* control) const {
  std::vector<Tensor>& env = *env_ptr;
  for (size_t si = 0; si < steps.size(); ++si) {
    const Step& step = steps[si];
    KILN_RETURN_IF_ERROR(CheckRunControl(control, si, steps.size(), [&] {
      return step.node >= 0 ? g.nodes[step.node].Describe() : std::string("layout conversion");
    }));
    ir::ComputeContext cc;
    cc.stream = stream;
    for (int slot : step.in_slots) {
      if (slot < 0) {
        cc.inputs.push_back(nullptr);
        continue;
      }
      const Tensor* t = constants[slot] ? &device_constants[slot] : &env[slot];
      if (!t->defined())
        return Internal("slot " + std::to_string(slot) + " missing on the device when running " +
                        g.nodes[step.node].Describe());
      cc.inputs.push_back(t);
    }
    for (int slot : step.out_slots) {
      if (slot < 0) {
        cc.outputs.push_back(nullptr);
        continue;
      }
      env[slot] = Tensor::View(dtypes[slot], shapes[slot], base + arena_offset[slot]);
      cc.outputs.push_back(&env[slot]);
    }
    if (scratch_bytes > 0) cc.scratch = base + scratch_offset;
    Status s = step.kernel->Run(cc);
    if (!s.ok())
      return s.AddContext("while running " + g.nodes[step.node].Describe() + " with " +
                          step.kernel_name);
  }
  return OkStatus();
}

}  // namespace kiln::runtime
