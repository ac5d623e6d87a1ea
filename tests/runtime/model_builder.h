// Tests use the ModelBuilder that `kiln selftest` shares (src/onnx/model_builder.h).
#pragma once

#include "onnx/model_builder.h"

namespace kiln::testing {
using onnxio::ModelBuilder;
}  // namespace kiln::testing
