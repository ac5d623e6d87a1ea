// Session: a loaded, checked ONNX model ready to run. Load() parses the file, checks every node
// against kiln's op registry (reporting all unsupported nodes at once) and returns an immutable
// session. Run() prepares an execution plan the first time it sees an input-shape signature
// (concrete shapes inferred, shape sub-graphs and constants folded, kernels chosen and prepared)
// and reuses it afterwards. Thread-safety: Run() may be called from many threads at once.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kiln/options.h"
#include "kiln/status.h"
#include "kiln/tensor.h"

namespace kiln {

struct SessionAccess;  // kiln's own layers (src/runtime/session_access.h), not part of the API

// A model input or output as declared: dims are -1 where symbolic or unknown (dim_names holds the
// symbol, e.g. "N"); rank_known is false when the model declares no shape at all.
struct TensorSpec {
  std::string name;
  DataType dtype = DataType::kUndefined;
  std::vector<int64_t> dims;
  std::vector<std::string> dim_names;
  bool rank_known = false;
  // "float32[N,3,224,224]".
  std::string ToString() const;
};

struct NamedTensor {
  std::string name;
  Tensor tensor;
};

// One step of a plan and its wall time in the run (RunTimings::per_node).
struct NodeTime {
  std::string node;     // the node's name ("" for a layout conversion the planner inserted)
  std::string op_type;  // "Conv", "kiln.FusedConv"; "LayoutConversion" for inserted reorders
  std::string kernel;   // "cpu.fusedconv.onednn"
  double ms = 0;
  double start_us = 0;  // when the step started: steady clock, microseconds since its epoch
  std::string outputs;  // the outputs' types and shapes as planned: "float32[1,64,56,56]"
};

// Where one run's time went. On a device backend, from device events (CUDA events): the upload of
// the inputs, the compute, the download of the outputs (all zero on the CPU). With `per_node` set
// by the caller on the CPU backend, `nodes` receives every step's wall time (steady clock around
// each kernel, which returns only when its work is done); a device run leaves `nodes` empty.
struct RunTimings {
  bool device = false;
  double upload_ms = 0, compute_ms = 0, download_ms = 0;
  bool per_node = false;
  std::vector<NodeTime> nodes;
  // With per_node: when the run started (steady clock, microseconds since its epoch), and the
  // Linux thread id (gettid) of the thread that ran it (kernels fan out from it on OpenMP).
  double start_us = 0;
  int thread = 0;
};

// What opening the session's device cost, once per process and device (all -1 / false on the
// CPU). A cold start is plugin_load_ms (opening libkiln_<backend>.so with cuDNN and cuBLAS) +
// driver_init_ms + context_ms + module_load_ms, then the first run's own preparation.
struct DeviceStartup {
  double plugin_load_ms = -1;  // dlopen of the backend plugin and its libraries; 0 when loaded
  double driver_init_ms = -1;  // CUDA: the first runtime call (driver initialisation)
  double context_ms = -1;      // CUDA: creating the device's primary context
  double module_load_ms = -1;  // CUDA: loading kiln's kernel modules (PTX JIT included, if any)
  int modules = 0;             // modules loaded
  bool ptx_jit = false;        // some module had no SASS for this GPU and was compiled from PTX
  int kernel_arch = 0;         // the GPU code's architecture as loaded (90 for sm_90 SASS)
  std::string detail;          // what went wrong measuring, if anything
};

// What a session holds, as numbers (Session::stats()).
struct SessionStats {
  size_t plans = 0;                    // input-shape signatures planned and kept
  uint64_t plans_evicted = 0;          // dropped by the SessionOptions::max_plans bound
  size_t planned_arena_bytes_max = 0;  // the largest plan's arena (activations + scratch)
  size_t packed_weight_bytes = 0;      // constant weights repacked for kernels, shared by all plans
  size_t device_constant_bytes = 0;    // the model's constants on the device, shared by all plans
  size_t packed_weights = 0;           // distinct packed copies
  uint64_t packed_weight_reuses = 0;   // kernels that got an existing packed copy
  size_t arena_bytes = 0;              // CPU arenas alive (in use or free for the next run)
  size_t arenas = 0;
  // The optimized model's constant tensors (weights after folding and fusion), in host memory.
  // With SessionOptions::share_weights, these and the packed copies above belong to the model,
  // shared by every session of the same file in the process.
  size_t constant_bytes = 0;
  bool weights_shared = false;  // this session found them already loaded by another session
};

// What the model file says about itself (ModelProto's descriptive fields), as loaded.
struct ModelMetadata {
  std::string producer_name, producer_version;  // "pytorch", "2.1.0"
  std::string domain;
  int64_t model_version = 0;
  std::string doc_string, graph_name, graph_doc_string;
  int64_t ir_version = 0;
  std::vector<std::pair<std::string, int>> opset_imports;   // (domain, version); "" is ai.onnx
  std::vector<std::pair<std::string, std::string>> custom;  // metadata_props, in file order
};

// Per-run controls. Both are checked before the run starts and between its steps (a kernel that
// has started finishes first), so a stop comes within one step's time.
struct RunOptions {
  // A run not finished by then stops with DeadlineExceeded; one whose deadline has passed before
  // it starts runs no kernel. Unset: no deadline.
  std::optional<std::chrono::steady_clock::time_point> deadline;
  // Set it (from any thread) to stop the run with Cancelled. Not owned; must outlive the run.
  const std::atomic<bool>* cancel = nullptr;
};

// One step of a prepared plan (Session::PlanSummary).
struct PlanStep {
  std::string node;      // the node's name ("" for a layout conversion the planner inserted)
  std::string op_type;   // "Conv", "kiln.FusedConv"; "LayoutConversion" for inserted reorders
  std::string kernel;    // "cpu.fusedconv.onednn"
  bool dynamic = false;  // shapes known only when it runs
};

// A prepared plan as numbers (Session::PlanSummary): what `kiln inspect` reports.
struct PlanSummary {
  std::vector<PlanStep> steps;
  int folded_nodes = 0;  // nodes evaluated to constants for these shapes
  int layout_conversions = 0;
  size_t arena_bytes = 0;    // the plan's one arena: activations and scratch
  size_t scratch_bytes = 0;  // of which kernels' scratch
  int threads = 0;
  std::string text;  // DescribePlan()'s text
};

class Session {
 public:
  static StatusOr<std::unique_ptr<Session>> Load(const std::string& path,
                                                 const SessionOptions& options = {});
  static StatusOr<std::unique_ptr<Session>> LoadFromBytes(const std::string& bytes,
                                                          const SessionOptions& options = {});
  ~Session();

  const std::vector<TensorSpec>& inputs() const;
  const std::vector<TensorSpec>& outputs() const;
  // What the graph optimizer changed at load, one line per pass that changed something
  // ("pass fuse_conv_bn: ..."); empty with SessionOptions::optimize off.
  const std::vector<std::string>& optimization_log() const;

  // Runs the model. Every declared input must be given once, with the declared dtype, rank and
  // fixed dimensions; outputs come back in declaration order.
  Status Run(const std::vector<NamedTensor>& inputs, std::vector<NamedTensor>* outputs) const;
  Status Run(const std::vector<NamedTensor>& inputs, std::vector<NamedTensor>* outputs,
             RunTimings* timings) const;
  // With a deadline and/or a cancel flag (RunOptions); a stopped run returns no outputs.
  Status Run(const std::vector<NamedTensor>& inputs, std::vector<NamedTensor>* outputs,
             const RunOptions& options, RunTimings* timings = nullptr) const;
  // Runs the model into caller-owned outputs (ONNX Runtime's IOBinding): each entry of `outputs`
  // names a model output and holds a tensor of that output's dtype and shape whose storage the
  // caller owns (a Tensor::View of your buffer, or a Tensor::Empty made once); the run copies the
  // output's values there and allocates no tensor. Outputs not named are computed and dropped.
  // A name that is no output, or named twice, a wrong dtype or a missing buffer: InvalidArgument
  // before any kernel runs; a shape that differs from the computed one: InvalidArgument after.
  // On the CPU, a warm run of a model with static shapes allocates nothing in kiln's code
  // (docs/embedding.md lists what oneDNN allocates inside its own calls).
  Status RunInto(const std::vector<NamedTensor>& inputs, std::vector<NamedTensor>* outputs,
                 const RunOptions& options = {}, RunTimings* timings = nullptr) const;
  // What the plan cache did for the most recent newly planned input shape: "off", "hit (N
  // choices reused)", "miss, stored N choices", "stale (key differs), stored N choices",
  // "corrupt (...): ignored, stored N choices", or a store error.
  std::string plan_cache_status() const;
  // Plans for these input shapes now, as the first Run of them would, and readies a run context
  // and the arena (CPU), so that the first Run of those shapes costs what later ones do (a
  // server's warm-up). Each entry names an input and its shape; inputs not named take their
  // declared shape, which must then be fixed. The dtype is the declared one.
  Status Prepare(const std::vector<std::pair<std::string, Shape>>& input_shapes) const;
  // Host memory for input batches a caller fills itself, 64-byte aligned: page-locked on the CUDA
  // backend (inputs in it are copied to the device without an extra staging copy), ordinary
  // memory on the CPU. Must outlive the runs that read it.
  StatusOr<std::shared_ptr<void>> AllocateHostBuffer(size_t bytes) const;
  // The backend's device ("" on the CPU), e.g. "NVIDIA H100 80GB HBM3 (sm_90, device 0)".
  std::string device_description() const;
  // Plans, packed weights and arenas held (see SessionStats).
  SessionStats stats() const;
  // The device's cold-start costs (see DeviceStartup).
  DeviceStartup device_startup() const;
  // The model file's own description of itself.
  const ModelMetadata& metadata() const;

  // Human-readable description of the prepared plan for the given input shapes (kernels chosen,
  // folded nodes). For `kiln inspect --optimized`.
  StatusOr<std::string> DescribePlan(const std::vector<NamedTensor>& inputs) const;
  // The same plan as numbers and steps (and the text). Only the inputs' dtypes and shapes matter,
  // unless the model's shapes depend on input values.
  StatusOr<PlanSummary> DescribePlanSummary(const std::vector<NamedTensor>& inputs) const;
  // Op types after the graph optimizer, with their node counts ("kiln.FusedConv", 53), sorted.
  std::vector<std::pair<std::string, int>> optimized_op_counts() const;

  struct Impl;

 private:
  friend struct SessionAccess;
  explicit Session(std::unique_ptr<Impl> impl);
  static StatusOr<std::unique_ptr<Session>> LoadImpl(const std::string& path,
                                                     const SessionOptions& options);
  Status RunImpl(const std::vector<NamedTensor>& inputs, std::vector<NamedTensor>* outputs,
                 bool bound, const RunOptions& options, RunTimings* timings) const;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln
