#include "core/cpu_info.h"

#include <sched.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>
#include <utility>

namespace kiln {

std::vector<std::string> CpuInfo::Has(std::initializer_list<const char*> wanted) const {
  std::vector<std::string> out;
  for (const char* f : wanted)
    if (flags.count(f)) out.push_back(f);
  return out;
}

const CpuInfo& GetCpuInfo() {
  static const CpuInfo info = [] {
    CpuInfo c;
    std::ifstream f("/proc/cpuinfo");
    std::set<std::pair<std::string, std::string>> cores;  // (physical id, core id)
    std::string line, physical_id = "0";
    while (std::getline(f, line)) {
      const auto colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string key = line.substr(0, colon);
      key.erase(key.find_last_not_of(" \t") + 1);
      const auto b = line.find_first_not_of(" \t", colon + 1);
      const std::string value = b == std::string::npos ? std::string() : line.substr(b);
      if (key == "processor") {
        ++c.logical_cpus;
      } else if (key == "model name" && c.model == "unknown") {
        c.model = value;
      } else if (key == "physical id") {
        physical_id = value;
      } else if (key == "core id") {
        cores.insert({physical_id, value});
      } else if (key == "flags" && c.flags.empty()) {
        std::istringstream ss(value);
        for (std::string fl; ss >> fl;) c.flags.insert(fl);
      }
    }
    if (c.logical_cpus == 0) c.logical_cpus = static_cast<int>(std::thread::hardware_concurrency());
    c.physical_cores = static_cast<int>(cores.size());
    if (c.physical_cores <= 0) c.physical_cores = std::max(1, c.logical_cpus);
    return c;
  }();
  return info;
}

namespace {

std::optional<std::string> ReadSmallFile(const std::string& path) {
  std::ifstream f(path);
  if (!f) return std::nullopt;
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// "a/b/c" -> "a/b/c", "a/b", "a", "" (the cgroup and its ancestors up to the root).
std::vector<std::string> SelfAndAncestors(std::string path) {
  while (!path.empty() && path.back() == '/') path.pop_back();
  std::vector<std::string> out;
  for (;;) {
    out.push_back(path);
    const auto slash = path.rfind('/');
    if (path.empty()) break;
    path = slash == std::string::npos ? std::string() : path.substr(0, slash);
  }
  return out;
}

}  // namespace

double CgroupQuotaCpus(const std::string& proc_self_cgroup,
                       const std::function<std::optional<std::string>(const std::string&)>& read,
                       std::string* source) {
  double best = 0;
  auto take = [&](double cpus, const std::string& file) {
    if (cpus > 0 && (best == 0 || cpus < best)) {
      best = cpus;
      if (source) *source = file;
    }
  };
  std::istringstream lines(proc_self_cgroup);
  for (std::string line; std::getline(lines, line);) {
    // "hierarchy-ID:controller-list:cgroup-path"
    const auto a = line.find(':');
    const auto b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    const std::string path = line.substr(b + 1);
    if (line.compare(0, a, "0") == 0 && controllers.empty()) {  // cgroup v2
      for (const std::string& dir : SelfAndAncestors(path)) {
        const std::string file = "/sys/fs/cgroup" + dir + "/cpu.max";
        auto text = read(file);
        if (!text) continue;
        std::istringstream in(*text);
        std::string quota;
        double period = 0;
        if (in >> quota >> period && quota != "max" && period > 0)
          take(std::atof(quota.c_str()) / period, file);
      }
      continue;
    }
    std::istringstream list(controllers);
    const std::string cpu_controller = "cpu";  // cgroup v1's CPU controller (not a kiln backend)
    bool cpu = false;
    for (std::string c; std::getline(list, c, ',');) cpu |= c == cpu_controller;
    if (!cpu) continue;
    for (const std::string mount : {"/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup/cpu"}) {
      for (const std::string& dir : SelfAndAncestors(path)) {
        const std::string base = mount + dir;
        auto quota = read(base + "/cpu.cfs_quota_us");
        auto period = read(base + "/cpu.cfs_period_us");
        if (!quota || !period) continue;
        const double q = std::atof(quota->c_str()), p = std::atof(period->c_str());
        if (q > 0 && p > 0) take(q / p, base + "/cpu.cfs_quota_us");
      }
    }
  }
  return best;
}

CpuLimits MakeCpuLimits(int physical_cores, int affinity_cpus, double quota_cpus,
                        const std::string& quota_source, const char* omp_num_threads) {
  CpuLimits l;
  l.affinity_cpus = affinity_cpus;
  l.quota_cpus = quota_cpus;
  l.quota_source = quota_source;
  int usable = affinity_cpus > 0 ? affinity_cpus : 0;
  std::string why = affinity_cpus > 0 ? "affinity mask " + std::to_string(affinity_cpus) : "";
  if (quota_cpus > 0) {
    const int q = std::max(1, static_cast<int>(std::floor(quota_cpus + 1e-9)));
    if (usable == 0 || q < usable) {
      usable = q;
      char buf[64];
      std::snprintf(buf, sizeof(buf), "cgroup quota %.2f CPUs", quota_cpus);
      why = buf;
    }
  }
  l.usable_cpus = std::max(usable, 1);
  if (omp_num_threads != nullptr) {
    char* end = nullptr;
    const long v = std::strtol(omp_num_threads, &end, 10);
    if (end != omp_num_threads && *end == '\0' && v > 0 && v <= 4096)
      l.omp_num_threads = static_cast<int>(v);
  }
  if (l.omp_num_threads > 0) {
    l.default_threads = l.omp_num_threads;
    l.default_reason = "OMP_NUM_THREADS=" + std::to_string(l.omp_num_threads);
  } else if (usable > 0 && usable < physical_cores) {
    l.default_threads = usable;
    l.default_reason = why + " (below the " + std::to_string(physical_cores) + " physical cores)";
  } else {
    l.default_threads = std::max(physical_cores, 1);
    l.default_reason = "physical cores";
  }
  return l;
}

const CpuLimits& GetCpuLimits() {
  static const CpuLimits limits = [] {
    cpu_set_t set;
    CPU_ZERO(&set);
    const int affinity = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 0;
    std::string source;
    const double quota =
        CgroupQuotaCpus(ReadSmallFile("/proc/self/cgroup").value_or(""), ReadSmallFile, &source);
    return MakeCpuLimits(GetCpuInfo().physical_cores, affinity, quota, source,
                         std::getenv("OMP_NUM_THREADS"));
  }();
  return limits;
}

}  // namespace kiln
