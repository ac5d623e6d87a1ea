// A backend plugin for plugin_test.cc, built as libkiln_testplug.so (a MODULE library linking
// no kiln library, like libkiln_cuda.so): it registers a device factory and one kernel from its
// static initialisers, resolving kiln's symbols against the test program that opens it.
#include <string>

#include "runtime/device.h"
#include "runtime/kernel.h"
#include "runtime/plugin_abi.h"

KILN_PLUGIN_ABI_STAMP;

namespace kiln::runtime {
namespace {

StatusOr<std::shared_ptr<Device>> OpenTestDevice(int index) {
  return Unavailable("testplug device " + std::to_string(index) + " opened from the plugin");
}
DeviceRegistrar test_device("testplug", OpenTestDevice);

KernelRegistrar relu_kernel(KernelDef{
    "testplug.relu.kernel", "Relu", "", 1, ir::kMaxOpset, "testplug", 10, nullptr, nullptr, {}});

}  // namespace
}  // namespace kiln::runtime
