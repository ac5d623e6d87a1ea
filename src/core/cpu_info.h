// What /proc/cpuinfo says about this machine, parsed once: model name, logical CPUs, distinct
// physical cores (hyper-threads not counted) and the instruction-set flags. Thread-safe.
#pragma once

#include <set>
#include <string>
#include <vector>

namespace kiln {

struct CpuInfo {
  std::string model = "unknown";
  int logical_cpus = 0;
  int physical_cores = 1;       // at least 1
  std::set<std::string> flags;  // e.g. "avx512f", "amx_bf16"

  // The flags among `wanted` that this CPU has, in the order given.
  std::vector<std::string> Has(std::initializer_list<const char*> wanted) const;
};

const CpuInfo& GetCpuInfo();

}  // namespace kiln
