// A backend plugin stamped for another kiln (plugin ABI 999): plugin_test.cc checks that kiln
// refuses it before its static initialisers run, so the device below is never registered.
#include <string>

#include "core/test_backend.h"
#include "runtime/device.h"

extern "C" __attribute__((used, section(".kiln_plugin_abi"))) const char kiln_plugin_abi_stamp[] =
    "kiln-plugin-abi=999 kiln=0.0.1";

namespace kiln::runtime {
namespace {

StatusOr<std::shared_ptr<Device>> OpenWrongAbiDevice(int) {
  return Internal("the wrongabi plugin's code ran: its ABI stamp was not checked");
}
DeviceRegistrar wrong_abi_device(TestBackend("wrongabi"), OpenWrongAbiDevice);

}  // namespace
}  // namespace kiln::runtime
