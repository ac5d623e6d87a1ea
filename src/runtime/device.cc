#include "runtime/device.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>

#include "runtime/plugin.h"

namespace kiln::runtime {

namespace {
std::map<std::string, DeviceFactory>& Factories() {
  static auto* m = new std::map<std::string, DeviceFactory>();
  return *m;
}
// Plugins register from dlopen while other threads may open devices.
std::mutex& FactoriesMutex() {
  static auto* m = new std::mutex();
  return *m;
}
DeviceFactory FindFactory(const std::string& backend) {
  std::lock_guard<std::mutex> lock(FactoriesMutex());
  auto it = Factories().find(backend);
  return it == Factories().end() ? nullptr : it->second;
}
std::string KnownBackends() {
  std::lock_guard<std::mutex> lock(FactoriesMutex());
  std::string known = "'cpu'";
  for (const auto& [name, factory] : Factories()) known += ", '" + name + "'";
  return known;
}
bool PluginName(const std::string& backend) {
  if (backend.empty() || backend.size() > 32) return false;
  for (char c : backend)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  return true;
}
}  // namespace

DeviceRegistrar::DeviceRegistrar(const char* backend, DeviceFactory factory) {
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

StatusOr<std::shared_ptr<Device>> OpenDevice(const std::string& backend, int device_index) {
  if (backend == "cpu") return std::shared_ptr<Device>();
  DeviceFactory factory = FindFactory(backend);
  Status plugin(StatusCode::kNotFound, "not a plugin name");
  // A device backend not linked in is looked for as a plugin (libkiln_<backend>.so).
  if (factory == nullptr && PluginName(backend)) {
    plugin = LoadBackendPlugin(backend);
    factory = FindFactory(backend);
  }
  if (factory != nullptr) {
    auto device = factory(device_index);
    if (!device.ok())
      return Status(device.status()).AddContext("while opening backend '" + backend + "'");
    return device;
  }
  const std::string known = KnownBackends();
  if (!plugin.ok() && plugin.code() != StatusCode::kNotFound)
    return Status(plugin).AddContext("while opening backend '" + backend + "'");
  if (plugin.ok())
    return Internal("backend plugin " + LoadedBackendPlugin(backend) +
                    " loaded but registered no device '" + backend + "'");
  if (backend == "cuda") {
#ifdef KILN_PLUGIN_BUILD_DIR
    return Unavailable("backend 'cuda' is not available: " + plugin.message());
#else
    return Unavailable(
        "backend 'cuda' is not available: this kiln was built without CUDA "
        "(KILN_WITH_CUDA=OFF or no toolkit found); `kiln doctor` shows the build; "
        "backends here: " +
        known);
#endif
  }
  return InvalidArgument("unknown backend '" + backend + "'; backends here: " + known);
}

}  // namespace kiln::runtime
