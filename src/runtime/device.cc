#include "runtime/device.h"

#include <algorithm>
#include <cstdlib>
#include <map>

namespace kiln::runtime {

namespace {
std::map<std::string, DeviceFactory>& Factories() {
  static auto* m = new std::map<std::string, DeviceFactory>();
  return *m;
}
}  // namespace

DeviceRegistrar::DeviceRegistrar(const char* backend, DeviceFactory factory) {
  Factories()[backend] = factory;
}

StatusOr<std::shared_ptr<void>> Device::AllocateHost(size_t bytes) {
  return AlignedHostMemory(bytes);
}

StatusOr<std::shared_ptr<void>> AlignedHostMemory(size_t bytes) {
  void* p = std::aligned_alloc(64, (std::max<size_t>(bytes, 1) + 63) / 64 * 64);
  if (p == nullptr)
    return Status(StatusCode::kOutOfMemory,
                  "cannot allocate " + std::to_string(bytes) + " bytes of host memory");
  return std::shared_ptr<void>(p, std::free);
}

StatusOr<std::shared_ptr<Device>> OpenDevice(const std::string& backend, int device_index) {
  if (backend == "cpu") return std::shared_ptr<Device>();
  auto it = Factories().find(backend);
  if (it != Factories().end()) {
    auto device = it->second(device_index);
    if (!device.ok())
      return Status(device.status()).AddContext("while opening backend '" + backend + "'");
    return device;
  }
  std::string known = "'cpu'";
  for (const auto& [name, factory] : Factories()) known += ", '" + name + "'";
  if (backend == "cuda")
    return Unavailable(
        "backend 'cuda' is not available: this kiln was built without CUDA "
        "(KILN_WITH_CUDA=OFF or no toolkit found); `kiln doctor` shows the build; "
        "backends here: " +
        known);
  return InvalidArgument("unknown backend '" + backend + "'; backends here: " + known);
}

}  // namespace kiln::runtime
