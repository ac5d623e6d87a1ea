// A backend plugin for plugin_test.cc, built as libkiln_testplug.so (a MODULE library linking
// libkiln.so, like libkiln_cuda.so): it registers a device factory and one kernel from its
// static initialisers for the test backend "testplug" (core/test_backend.h: the test asks for the
// same name and gets the same Backend value), into the registries of the program that opens it.
#include <string>

#include "core/test_backend.h"
#include "runtime/device.h"
#include "runtime/kernel.h"
#include "runtime/plugin_abi.h"

KILN_PLUGIN_ABI_STAMP;

namespace kiln::runtime {
namespace {

StatusOr<std::shared_ptr<Device>> OpenTestDevice(int index) {
  return Unavailable("testplug device " + std::to_string(index) + " opened from the plugin");
}
const Backend kTestPlug = TestBackend("testplug");
DeviceRegistrar test_device(kTestPlug, OpenTestDevice);

KernelRegistrar relu_kernel(KernelDef{
    "testplug.relu.kernel", "Relu", "", 1, ir::kMaxOpset, kTestPlug, 10, nullptr, nullptr, {}});

}  // namespace
}  // namespace kiln::runtime
