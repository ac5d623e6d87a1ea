// The device half of ExecutionPlan: constants on the device (the model's weights once per
// session, shared by its plans), and Execute() for a device backend. A run takes a run context
// with its DeviceRun (arena, streams, staging) from the plan's pool, uploads the graph inputs into
// their arena slots, runs the same step loop as the host (RunSteps) on the device's compute
// stream, downloads the outputs (into the caller's bound tensors when given) and waits once at
// the end. Constants and graph inputs returned as outputs are copied on the host. No allocation
// in a warm run besides the output tensors handed to the caller (none with bound outputs).
#include <algorithm>
#include <cstring>

#include "runtime/execution_plan.h"

namespace kiln::runtime {

namespace {
constexpr size_t kDeviceAlign = 256;  // cudaMalloc's alignment; kept for every sub-buffer
size_t AlignUp(size_t n) { return (n + kDeviceAlign - 1) / kDeviceAlign * kDeviceAlign; }
}  // namespace

Status ExecutionPlan::UploadConstants(const Model& model) {
  const ir::Graph& g = *model.graph;
  std::vector<bool> read(dtypes.size(), false);
  for (const Step& st : steps)
    for (int slot : st.in_slots)
      if (slot >= 0 && constants[slot]) read[slot] = true;
  device_constants.assign(dtypes.size(), Tensor());
  device_constant_memory.clear();
  // The model's own constants (weights) are shared by every plan of the session: those already on
  // the device are only viewed. A slot below the graph's value count whose constant is the
  // graph's is one of them; what this plan folded for its shapes is its own.
  DeviceConstantCache& cache = resources->device_constants;
  auto is_model_constant = [&](size_t slot) {
    return slot < g.values.size() && g.values[slot].constant == constants[slot];
  };
  size_t total = 0;
  for (size_t slot = 0; slot < read.size(); ++slot) {
    if (!read[slot]) continue;
    if (is_model_constant(slot)) {
      if (auto hit = cache.Find(*constants[slot])) {
        device_constants[slot] = hit->view;
        device_constant_memory.push_back(hit->memory);
        read[slot] = false;
        continue;
      }
    }
    total += AlignUp(constants[slot]->bytes());
  }
  if (total == 0) return OkStatus();
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<void> block, device->Allocate(total));
  device_constant_memory.push_back(block);
  char* base = static_cast<char*>(block.get());
  size_t offset = 0;
  for (size_t slot = 0; slot < read.size(); ++slot) {
    if (!read[slot]) continue;
    const Tensor& c = *constants[slot];
    KILN_RETURN_IF_ERROR(device->CopyToDevice(base + offset, c.raw(), c.bytes()));
    device_constants[slot] = Tensor::View(c.dtype(), c.shape(), base + offset);
    if (is_model_constant(slot)) cache.Add(c, device_constants[slot], block);
    offset += AlignUp(c.bytes());
  }
  return OkStatus();
}

// The steps on the device: launched, recorded into a CUDA graph (second run), or replayed.
Status ExecutionPlan::RunOrReplay(const Model& model, RunContext* run, char* base,
                                  const RunOptions* control) const {
  DeviceRun& dev = *run->device_run;
  if (capture_graph && dev.SupportsCapture() && dev.captured()) {
    KILN_RETURN_IF_ERROR(dev.Replay());
  } else {
    const bool capture =
        capture_graph && dev.SupportsCapture() && run->device_run->completed_runs > 0;
    if (capture) KILN_RETURN_IF_ERROR(dev.BeginCapture());
    // A capture records every step: the run control is checked only outside captures.
    Status s = RunSteps(model, run, base, capture ? nullptr : control, nullptr);
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

Status ExecutionPlan::DownloadOutputs(const ir::Graph& g, DeviceRun* device_run, char* base,
                                      const std::vector<const Tensor*>& inputs,
                                      std::vector<Tensor>* outputs,
                                      const std::vector<Tensor*>& bound) const {
  DeviceRun& dev = *device_run;
  // Outputs: downloaded straight into the caller's bound tensors, or into new ones. Constants and
  // graph inputs returned as outputs are copied on the host.
  if (bound.empty()) outputs->clear();
  for (size_t k = 0; k < output_slots.size(); ++k) {
    const int slot = output_slots[k];
    Tensor* dst = nullptr;
    if (bound.empty()) {
      outputs->push_back(Tensor::Empty(dtypes[slot], shapes[slot]));
      dst = &outputs->back();
    } else if (k < bound.size() && bound[k] != nullptr) {
      dst = bound[k];
      if (dst->shape() != shapes[slot])
        return InvalidArgument("output '" + g.values[g.outputs[k]].name +
                               "': the bound tensor has shape " + ShapeToString(dst->shape()) +
                               ", the run computed " + ShapeToString(shapes[slot]));
    } else {
      continue;  // not asked for
    }
    const Tensor* host = nullptr;
    if (constants[slot]) host = constants[slot].get();
    for (size_t i = 0; i < input_slots.size() && host == nullptr; ++i)
      if (input_slots[i] == slot) host = inputs[i];
    if (host != nullptr) {
      std::memcpy(dst->raw(), host->raw(), host->bytes());
      continue;
    }
    if (arena_offset[slot] < 0)
      return Internal("graph output '" + g.values[g.outputs[k]].name + "' has no device buffer");
    KILN_RETURN_IF_ERROR(dev.Download(base + arena_offset[slot], dst->raw(), dst->bytes()));
  }
  return OkStatus();
}

Status ExecutionPlan::ExecuteOnDevice(const Model& model, const std::vector<const Tensor*>& inputs,
                                      std::vector<Tensor>* outputs, DeviceTimings* timings,
                                      const RunOptions* control,
                                      const std::vector<Tensor*>& bound) const {
  const ir::Graph& g = *model.graph;
  std::unique_ptr<RunContext> run = TakeRun();
  if (!run->device_run) {
    size_t upload = 0, download = 0;
    for (int slot : input_slots)
      upload +=
          AlignUp(static_cast<size_t>(NumElements(shapes[slot])) * DataTypeSize(dtypes[slot]));
    for (int slot : output_slots)
      download +=
          AlignUp(static_cast<size_t>(NumElements(shapes[slot])) * DataTypeSize(dtypes[slot]));
    KILN_ASSIGN_OR_RETURN(run->device_run, device->NewRun(std::max<size_t>(arena_bytes, 1), upload,
                                                          download, pinned_staging));
    for (ir::ComputeContext& cc : run->contexts) cc.stream = run->device_run->stream();
  }
  struct Return {
    const ExecutionPlan* plan;
    std::unique_ptr<RunContext>* run;
    ~Return() { plan->ReturnRun(std::move(*run)); }
  } give_back{this, &run};
  DeviceRun& dev = *run->device_run;

  KILN_RETURN_IF_ERROR(dev.Begin());
  char* base = static_cast<char*>(dev.arena());
  ViewArena(run.get(), base);
  for (size_t k = 0; k < input_slots.size(); ++k) {
    const int slot = input_slots[k];
    if (arena_offset[slot] < 0) continue;  // unread input
    KILN_RETURN_IF_ERROR(
        dev.Upload(inputs[k]->raw(), base + arena_offset[slot], inputs[k]->bytes()));
  }
  KILN_RETURN_IF_ERROR(dev.StartCompute());
  KILN_RETURN_IF_ERROR(RunOrReplay(model, run.get(), base, control));
  KILN_RETURN_IF_ERROR(DownloadOutputs(g, &dev, base, inputs, outputs, bound));
  KILN_RETURN_IF_ERROR(dev.Finish());
  ++run->device_run->completed_runs;
  if (timings) *timings = dev.LastTimings();
  return OkStatus();
}

}  // namespace kiln::runtime
