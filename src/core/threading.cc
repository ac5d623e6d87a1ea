#include "core/threading.h"

#include <omp.h>

#include <algorithm>

#include "core/cpu_info.h"

namespace kiln {

int PhysicalCores() { return GetCpuInfo().physical_cores; }
int DefaultThreads() { return GetCpuLimits().default_threads; }

void SetThreadCount(int n) { omp_set_num_threads(std::max(1, n)); }

void ParallelFor(int64_t n, int64_t grain, RangeFn fn) {
  if (n <= 0) return;
  const int threads = omp_get_max_threads();
  if (threads <= 1 || n < 2 * std::max<int64_t>(grain, 1)) {
    fn(0, n);
    return;
  }
#pragma omp parallel
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    const int64_t chunk = (n + nt - 1) / nt;
    const int64_t b = std::min<int64_t>(n, t * chunk), e = std::min<int64_t>(n, b + chunk);
    if (b < e) fn(b, e);
  }
}

}  // namespace kiln
