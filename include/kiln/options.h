// Session options. Plain values; copied into the Session at load.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "kiln/status.h"

namespace kiln {

// The arithmetic of convolutions and matrix products. kBf16: bfloat16 on CPUs with AVX512-BF16
// or AMX (refused elsewhere); kFp16: float16 on CUDA, activations kept float16 between kernels.
enum class Precision { kFp32, kBf16, kFp16 };
// "fp32", "bf16", "fp16": the names the CLI and the Python package take.
const char* PrecisionName(Precision p);
// The precision named `name`; InvalidArgument listing the names otherwise.
StatusOr<Precision> ParsePrecision(const std::string& name);

// The device kind a session executes on. kCpu: host memory, oneDNN and kiln's loops; kCuda: an
// NVIDIA GPU through the CUDA plugin (builds with CUDA).
enum class Backend { kCpu, kCuda };
// "cpu", "cuda": the names the CLI (--device) and the Python package (device=) take, the prefix
// of kernel names ("cpu.conv.onednn") and the plugin's file (libkiln_cuda.so).
const char* BackendName(Backend b);
// The backend named `name`; InvalidArgument listing the names otherwise.
StatusOr<Backend> ParseBackend(const std::string& name);

struct SessionOptions {
  // Backend to execute on: kCpu (default) or kCuda (builds with CUDA). Kernels of other backends
  // are not considered; on kCuda every node needs a CUDA kernel (all missing ones are reported at
  // the first run of a shape).
  Backend backend = Backend::kCpu;
  // Which device of the backend (CUDA device ordinal).
  int device_index = 0;
  // Device backends: stage inputs and outputs through page-locked host buffers allocated once
  // (default); false copies from and to the caller's pageable memory (for comparison).
  bool pinned_staging = true;
  // Device backends with graphs (CUDA): record a run context's second run as a CUDA graph and
  // replay it on every later run, so one launch replaces a launch per kernel.
  bool cuda_graph = false;
  // Time alternative kernels for each input shape when planning and keep the fastest (today: a
  // 1x1 convolution as oneDNN's convolution or as a matmul). Makes the first run of each shape
  // slower (each candidate runs a few times).
  bool tune = false;
  // Plan cache folder ("" = none): with `tune`, the choices measured for a model, input shape and
  // these options are stored there and reused by later sessions instead of timing again
  // (src/runtime/plan_cache.h). Created when missing.
  std::string plan_cache_dir;
  // Use only the reference kernels (plain loops; the oracle for fast kernels).
  bool reference_only = false;
  // Threads for the session's kernels (oneDNN and kiln's own loops); 0 = OMP_NUM_THREADS when
  // set, else the physical cores capped by the CPUs this process may use (its affinity mask and
  // cgroup CPU quota: DescribeCpu().default_threads).
  int num_threads = 0;
  // Run the graph optimizer (src/passes) at load.
  bool optimize = true;
  // Pass names to skip (see `kiln inspect --optimized`), for debugging and pass-off comparisons.
  std::vector<std::string> disabled_passes;
  // kFp32 (default); kBf16: convolutions and matmuls in bfloat16 where the CPU supports it;
  // kFp16: float16 on CUDA.
  Precision precision = Precision::kFp32;
  // Plans kept (one per input-shape signature; least recently used evicted beyond it). The
  // default keeps every batch size from 1 to 64 of a one-input model. Packed weights are shared
  // by all plans and stay for the session; a plan's own memory is its kernels' primitives and run
  // contexts (docs/embedding.md gives measured figures). 0 = unbounded.
  size_t max_plans = 64;
  // Sessions of the same model in one process share one copy of its weights: the optimized
  // graph's constants and the kernels' packed copies, found by the SHA-256 of the file and the
  // options that change the graph (optimize, disabled_passes, precision, backend); freed with
  // the last session. false: this session loads and packs its own (docs/embedding.md).
  bool share_weights = true;
};

}  // namespace kiln
