// The module registry behind KILN_CUDA_MODULE and LoadModules() (launch.h).
#include <chrono>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "backends/cuda/kernels/launch.h"

namespace kiln::cuda_kernels {
namespace {

struct Module {
  const char* file;
  const void* kernel;
};

std::vector<Module>& Modules() {
  static auto* m = new std::vector<Module>();
  return *m;
}

}  // namespace

int RegisterModule(const char* file, const void* kernel) {
  Modules().push_back({file, kernel});
  return static_cast<int>(Modules().size());
}

ModuleLoad LoadModules(const std::string& sass_archs) {
  std::vector<int> sass;
  std::istringstream in(sass_archs);
  for (std::string a; in >> a;)
    if (a.find("-virtual") == std::string::npos) sass.push_back(std::atoi(a.c_str()));
  ModuleLoad r;
  const auto t0 = std::chrono::steady_clock::now();
  for (const Module& m : Modules()) {
    cudaFuncAttributes attr{};
    const cudaError_t e = cudaFuncGetAttributes(&attr, m.kernel);
    if (e != cudaSuccess) {
      if (r.error.empty())
        r.error = std::string("cudaFuncGetAttributes for ") + m.file + ": " + cudaGetErrorName(e);
      continue;
    }
    ++r.modules;
    if (r.kernel_arch == 0 || attr.binaryVersion < r.kernel_arch)
      r.kernel_arch = attr.binaryVersion;
    bool native = false;
    for (int a : sass) native |= a == attr.binaryVersion;
    r.ptx_jit |= !native;
  }
  r.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace kiln::cuda_kernels
