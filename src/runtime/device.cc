#include "runtime/device.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>

#include "runtime/plugin.h"

namespace kiln::runtime {

namespace {
std::map<Backend, DeviceFactory>& Factories() {
  static auto* m = new std::map<Backend, DeviceFactory>();
  return *m;
}
// Plugins register from dlopen while other threads may open devices.
std::mutex& FactoriesMutex() {
  static auto* m = new std::mutex();
  return *m;
}
DeviceFactory FindFactory(Backend backend) {
  std::lock_guard<std::mutex> lock(FactoriesMutex());
  auto it = Factories().find(backend);
  return it == Factories().end() ? nullptr : it->second;
}
}  // namespace

DeviceRegistrar::DeviceRegistrar(Backend backend, DeviceFactory factory) {
  std::lock_guard<std::mutex> lock(FactoriesMutex());
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

StatusOr<std::shared_ptr<Device>> OpenDevice(Backend backend, int device_index) {
  if (backend == Backend::kCpu) return std::shared_ptr<Device>();
  const std::string name = BackendName(backend);
  DeviceFactory factory = FindFactory(backend);
  Status plugin = OkStatus();
  // A device backend not linked in is looked for as a plugin (libkiln_<name>.so).
  if (factory == nullptr) {
    plugin = LoadBackendPlugin(backend);
    factory = FindFactory(backend);
  }
  if (factory != nullptr) {
    auto device = factory(device_index);
    if (!device.ok())
      return Status(device.status()).AddContext("while opening backend '" + name + "'");
    return device;
  }
  if (plugin.ok())
    return Internal("backend plugin " + LoadedBackendPlugin(backend) +
                    " loaded but registered no device '" + name + "'");
  if (plugin.code() != StatusCode::kNotFound)
    return Status(plugin).AddContext("while opening backend '" + name + "'");
#ifndef KILN_PLUGIN_BUILD_DIR
  if (backend == Backend::kCuda)
    return Unavailable(
        "backend 'cuda' is not available: this kiln was built without CUDA "
        "(KILN_WITH_CUDA=OFF or no toolkit found); `kiln doctor` shows the build");
#endif
  return Unavailable("backend '" + name + "' is not available: " + plugin.message());
}

}  // namespace kiln::runtime
