#include "kiln/options.h"

#include <deque>
#include <mutex>
#include <string>

#include "core/test_backend.h"

namespace kiln {

const char* PrecisionName(Precision p) {
  switch (p) {
    case Precision::kFp32:
      return "fp32";
    case Precision::kBf16:
      return "bf16";
    case Precision::kFp16:
      return "fp16";
  }
  return "fp32";
}

StatusOr<Precision> ParsePrecision(const std::string& name) {
  for (Precision p : {Precision::kFp32, Precision::kBf16, Precision::kFp16})
    if (name == PrecisionName(p)) return p;
  return InvalidArgument("precision must be fp32, bf16 or fp16; got '" + name + "'");
}

namespace {
// Test backends (core/test_backend.h): their names, the first at kFirstTestBackend. Never freed,
// so the names BackendName returns stay valid.
constexpr int kFirstTestBackend = 100;
std::mutex& TestBackendMutex() {
  static auto* m = new std::mutex();
  return *m;
}
std::deque<std::string>& TestBackendNames() {
  static auto* names = new std::deque<std::string>();
  return *names;
}
}  // namespace

const char* BackendName(Backend b) {
  switch (b) {
    case Backend::kCpu:
      return "cpu";
    case Backend::kCuda:
      return "cuda";
  }
  const int i = static_cast<int>(b) - kFirstTestBackend;
  std::lock_guard<std::mutex> lock(TestBackendMutex());
  if (i >= 0 && static_cast<size_t>(i) < TestBackendNames().size())
    return TestBackendNames()[i].c_str();
  return "unknown";
}

StatusOr<Backend> ParseBackend(const std::string& name) {
  for (Backend b : {Backend::kCpu, Backend::kCuda})
    if (name == BackendName(b)) return b;
  return InvalidArgument("backend must be cpu or cuda; got '" + name + "'");
}

Backend TestBackend(const std::string& name) {
  std::lock_guard<std::mutex> lock(TestBackendMutex());
  std::deque<std::string>& names = TestBackendNames();
  size_t i = 0;
  while (i < names.size() && names[i] != name) ++i;
  if (i == names.size()) names.push_back(name);
  return static_cast<Backend>(kFirstTestBackend + static_cast<int>(i));
}

}  // namespace kiln
