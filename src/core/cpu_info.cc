#include "core/cpu_info.h"

#include <algorithm>
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

}  // namespace kiln
