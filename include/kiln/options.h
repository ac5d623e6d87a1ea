// Session options. Plain values; copied into the Session at load.
#pragma once

#include <string>

namespace kiln {

struct SessionOptions {
  // Backend to execute on: "cpu" (default). Kernels of other backends are not considered.
  std::string backend = "cpu";
  // Use only the reference kernels (plain loops; the oracle for fast kernels).
  bool reference_only = false;
};

}  // namespace kiln
