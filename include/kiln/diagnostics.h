// What this build of kiln and this machine can do: the facts `kiln doctor`, `kiln ops`, `kiln
// selftest` and `kiln bench` report, for programs that embed kiln. Plain functions; thread-safe
// once backends are loaded (LoadBackend may register kernels).
#pragma once

#include <string>
#include <vector>

#include "kiln/session.h"
#include "kiln/status.h"

namespace kiln {

// The CPU as kiln sees it.
struct CpuDescription {
  std::string model = "unknown";  // /proc/cpuinfo's model name
  int logical_cpus = 0;
  int physical_cores = 1;
  // What this process may use (a container's or taskset's limits): CPUs in its affinity mask,
  // its cgroup's CPU quota (0: none; from `quota_source`), and the compute threads a session
  // uses when none are set (OMP_NUM_THREADS, else physical cores capped by those limits), why.
  int affinity_cpus = 0;
  double cgroup_quota_cpus = 0;
  std::string quota_source;
  int usable_cpus = 1;
  int default_threads = 1;
  std::string default_threads_reason;
  // The instruction-set extensions kiln's kernels care about that this CPU has, in a fixed order:
  // avx fma f16c avx2 avx_vnni avx512f avx512bw avx512vl avx512_vnni avx512_bf16 avx512_fp16
  // amx_tile amx_bf16 amx_int8.
  std::vector<std::string> isa;
  std::string onednn_isa;      // the ISA oneDNN dispatches to ("avx2", "avx512_core_amx", ...)
  std::string onednn_version;  // "2.7.3"
  bool bf16 = false;           // --precision bf16 is available (AVX512-BF16 or AMX)
  // The int8 instructions oneDNN's int8 convolutions use here: "amx_int8", "avx512_vnni",
  // "avx_vnni", "avx512 (no VNNI)", "avx2 (no VNNI)" or "none" (int8 runs on reference kernels).
  std::string int8;
};
const CpuDescription& DescribeCpu();

// Runs timed with RunTimings::per_node (CPU backend) as Chrome/Perfetto trace JSON (the Trace
// Event Format: open it in ui.perfetto.dev or chrome://tracing): one slice per run and one per
// step (name: op and node; category: kernel; args: node, op, kernel, output types and shapes) on
// the thread that ran it, times in microseconds from the first run's start. Runs without
// per_node are left out. `kiln bench --trace`, `kiln run --trace` and kiln.Session.trace write it.
std::string ChromeTraceJson(const std::vector<RunTimings>& runs,
                            const std::string& process_name = "kiln");

// `kiln doctor`'s report as one JSON object (build, cpu, cuda, warnings; docs/cli.md names the
// keys). Probes the CUDA driver and libraries with dlopen: a missing one is a fact, not an error.
std::string DoctorReportJson();

// Opens the plugin of a device backend (kCuda), registering its kernels; kCpu is built in.
// Unavailable (naming the plugin and why) when this build or machine has none.
Status LoadBackend(Backend backend);
// Opens device 0 of `backend` and describes it ("cpu" for the CPU); why not, if it cannot.
StatusOr<std::string> OpenDeviceDescription(Backend backend);

struct KernelInfo {
  std::string name;  // "cpu.conv.onednn"
  std::string op_type, domain;
  int since = 0, until = 0;  // opsets
  int priority = 0;
};
// The kernels registered for `backend`, in registration order (after LoadBackend for a plugin).
std::vector<KernelInfo> RegisteredKernels(Backend backend);

struct OpInfo {
  std::string domain, op_type;            // "" is ai.onnx
  int since = 0, until = 0;               // the opsets kiln accepts
  std::vector<std::string> cpu_kernels;   // the reference kernel first
  std::vector<std::string> cuda_kernels;  // empty without the CUDA backend loaded
  // Those of cuda_kernels that also take float16 activations (precision fp16 keeps activations
  // float16 between them).
  std::vector<std::string> float16_kernels;
};
// Every op kiln implements, sorted by domain and name.
std::vector<OpInfo> RegisteredOps();

// The kernel harness: every kernel registered for a backend, run on every case its op registers
// next to its code (src/ops/op_cases.h) that the kernel accepts, against the op's reference
// kernel on the CPU. Outputs are prefilled with NaN (so an element left unwritten fails) and
// followed by guard bytes (so a write past the end fails); inputs must come back unchanged.
// Kernels that also take float16 (KernelDef::half_inputs) run each case a second time with
// float16 data. Device backends run the same cases on the device (`kiln selftest`).
struct KernelCaseResult {
  std::string kernel;     // "cpu.conv.onednn", with the variant it picked: "[winograd]"
  std::string op;         // "Conv", "kiln.FusedConv"
  std::string case_name;  // the case's description, "(float16)" appended for the half run
  bool ok = false;
  double max_err = 0;  // largest |kernel - reference| over float outputs
  std::string detail;  // why it failed
};
struct KernelCheckReport {
  std::vector<KernelCaseResult> results;
  // Kernels whose op registers no case, and kernels that declined every case of their op (with
  // the reasons): both fail.
  std::vector<std::string> without_cases;
  std::vector<std::string> never_ran;
  size_t kernels = 0;  // kernels considered
  bool ok() const;
};
// `only`: kernel names to check (empty: every kernel of the backend). A device backend is opened
// first; its error is returned when it cannot be (nothing was checked).
StatusOr<KernelCheckReport> CheckKernels(Backend backend,
                                         const std::vector<std::string>& only = {});
// Kernels registered for `backend` whose op registers no case (no device needed; a plugin
// backend is loaded first): `kiln selftest --coverage`.
StatusOr<std::vector<std::string>> KernelsWithoutCases(Backend backend);

}  // namespace kiln
