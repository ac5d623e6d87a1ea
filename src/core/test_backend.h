// Backends for tests: a test registers a fake device (host memory) or loads a test plugin under a
// Backend value of its own, beyond kiln::Backend's public ones, so the device half of the runtime
// and the plugin loader run on a machine without a GPU (tests/runtime/device_plan_test.cc,
// plugin_test.cc). BackendName() gives such a value's name ("fakedev"; kernel names and the
// plugin's file, libkiln_<name>.so, use it); ParseBackend() never returns one: the CLI and the
// Python package name cpu and cuda only. Not for use outside tests.
#pragma once

#include <string>

#include "kiln/options.h"

namespace kiln {

// The test backend named `name`: a new value on its first call, the same one on later calls with
// the same name (a test plugin and the test that loads it ask separately). Thread-safe; may be
// called from static initialisers.
Backend TestBackend(const std::string& name);

}  // namespace kiln
