// Split's typed attributes, parsed and checked by the op (concat_split.cc has its rules) and read
// by its fast kernels (backends/cpu/split_onednn.cc, backends/cuda/ops/layout_cuda.cc). Concat,
// the other op of concat_split.cc, returns AxisAttrs (ops/axis_attrs.h).
#pragma once

#include <cstdint>
#include <vector>

#include "ir/op.h"

namespace kiln::ops {

// Split: axis as written, the split attribute (before opset 13), num_outputs (opset 18+, 0 when
// absent).
struct SplitAttrs : ir::OpAttrs {
  int64_t axis = 0;
  std::vector<int64_t> split;
  int64_t num_outputs = 0;
};

}  // namespace kiln::ops
