// The CPU backend: oneDNN kernels (src/backends/cpu/*_onednn.cc) register with KILN_REGISTER_KERNEL
// at a priority above the reference kernels the ops layer provides, and declare Supports() with
// reasons. This file says which precisions the backend honours on this machine.
#include "backends/cpu/onednn_common.h"
#include "runtime/kernel.h"

namespace kiln::backends::cpu {

namespace {

Status CpuPrecision(Precision precision) {
  if (precision == Precision::kFp32) return OkStatus();
  if (precision == Precision::kBf16) {
    if (Bf16Supported()) return OkStatus();
    return Unsupported(
        "precision bf16 needs a CPU with AVX512-BF16 or AMX (Cooper Lake, Sapphire Rapids or "
        "newer); oneDNN reports this CPU's best ISA as " +
        std::to_string(static_cast<int>(dnnl::get_effective_cpu_isa())) + "; use fp32");
  }
  return InvalidArgument("precision must be fp32 or bf16 on the CPU; got '" +
                         std::string(PrecisionName(precision)) + "'" +
                         (precision == Precision::kFp16 ? " (fp16 runs on --device cuda)" : ""));
}

runtime::PrecisionCheckRegistrar cpu_precision(Backend::kCpu, &CpuPrecision);

std::string OneDnnVersionString() {
  const dnnl_version_t* v = dnnl_version();
  return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
         std::to_string(v->patch) + " " + v->hash;
}
runtime::LibraryVersionRegistrar onednn_version(Backend::kCpu, &OneDnnVersionString);

}  // namespace

}  // namespace kiln::backends::cpu
