// What /proc/cpuinfo says about this machine, parsed once: model name, logical CPUs, distinct
// physical cores (hyper-threads not counted) and the instruction-set flags. Thread-safe.
#pragma once

#include <functional>
#include <optional>
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

// The CPUs this process may use, as a container or `taskset` limits it: the affinity mask
// (sched_getaffinity) and the CPU quota of its cgroup (v2 cpu.max, or v1 cpu.cfs_quota_us /
// cpu.cfs_period_us; the smallest along the cgroup's ancestors). Read once. Thread-safe.
struct CpuLimits {
  int affinity_cpus = 0;     // CPUs in the affinity mask (0: unknown)
  double quota_cpus = 0;     // the cgroup quota in CPUs (1.5 for "150000 100000"); 0: none
  std::string quota_source;  // the file the quota came from, "" without one
  int usable_cpus = 1;       // min(affinity, floor(quota)) where known, at least 1
  int omp_num_threads = 0;   // OMP_NUM_THREADS when a positive integer, else 0
  // Compute threads when the caller sets none: OMP_NUM_THREADS if set, else the physical cores
  // capped at usable_cpus (physical cores, because hyper-threads slow oneDNN's kernels down).
  int default_threads = 1;
  std::string default_reason;  // "OMP_NUM_THREADS=4", "cgroup quota 2 CPUs (...)", ...
};
const CpuLimits& GetCpuLimits();

// The quota in CPUs (0 when none) for the cgroup lines of /proc/self/cgroup, reading files
// through `read` (nullopt: absent), so tests can give fake trees; `source` gets the file.
double CgroupQuotaCpus(const std::string& proc_self_cgroup,
                       const std::function<std::optional<std::string>(const std::string&)>& read,
                       std::string* source);
// CpuLimits from its parts (GetCpuLimits() calls this with this process's facts).
CpuLimits MakeCpuLimits(int physical_cores, int affinity_cpus, double quota_cpus,
                        const std::string& quota_source, const char* omp_num_threads);

}  // namespace kiln
