// Pad's typed attributes, parsed and checked by the op (pad.cc has its rules) and read by its
// fast kernel (backends/cuda/ops/layout_cuda.cc).
#pragma once

#include <cstdint>
#include <vector>

#include "ir/op.h"

namespace kiln::ops {

enum class PadMode { kConstant, kReflect, kEdge, kWrap };
// Pad: mode; pads and value are the attributes of Pad-1/2 (later opsets take inputs).
struct PadAttrs : ir::OpAttrs {
  PadMode mode = PadMode::kConstant;
  std::vector<int64_t> pads;
  float value = 0.f;
};

}  // namespace kiln::ops
