// The ABI stamp of backend plugins (see KILN_PLUGIN_ABI in kiln/version.h). A plugin puts
// KILN_PLUGIN_ABI_STAMP; in one of its source files; LoadBackendPlugin reads the section from the
// file and opens the plugin only when the stamp is this kiln's, before any of its code runs.
#pragma once

#include <string>

#include "kiln/version.h"

#define KILN_PLUGIN_ABI_STR_(x) #x
#define KILN_PLUGIN_ABI_STR(x) KILN_PLUGIN_ABI_STR_(x)
#define KILN_PLUGIN_ABI_TEXT \
  "kiln-plugin-abi=" KILN_PLUGIN_ABI_STR(KILN_PLUGIN_ABI) " kiln=" KILN_VERSION_TEXT
#define KILN_PLUGIN_ABI_STAMP                                   \
  extern "C" __attribute__((used, section(".kiln_plugin_abi"))) \
  const char kiln_plugin_abi_stamp[] = KILN_PLUGIN_ABI_TEXT

namespace kiln::runtime {
inline std::string PluginAbiText() { return KILN_PLUGIN_ABI_TEXT; }
}  // namespace kiln::runtime
