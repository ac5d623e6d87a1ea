#include "core/threading.h"

#include <omp.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <utility>

namespace kiln {

int PhysicalCores() {
  static const int cores = [] {
    std::ifstream f("/proc/cpuinfo");
    std::set<std::pair<std::string, std::string>> ids;
    std::string line, phys = "0";
    while (std::getline(f, line)) {
      auto colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string key = line.substr(0, line.find_last_not_of(" \t", colon - 1) + 1);
      std::string val = line.substr(std::min(line.size(), colon + 2));
      if (key == "physical id") phys = val;
      if (key == "core id") ids.insert({phys, val});
    }
    int n = static_cast<int>(ids.size());
    if (n <= 0) n = static_cast<int>(std::thread::hardware_concurrency());
    return std::max(1, n);
  }();
  return cores;
}

void SetThreadCount(int n) { omp_set_num_threads(std::max(1, n)); }

void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
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
