// Transpose's typed attributes, parsed and checked by the op (transpose.cc has its rules) and
// read by its fast kernels (backends/cpu/transpose_onednn.cc, backends/cuda/ops/layout_cuda.cc).
#pragma once

#include <cstdint>
#include <vector>

#include "ir/op.h"

namespace kiln::ops {

// Transpose: perm as written; has_perm false means reversed dims.
struct TransposeAttrs : ir::OpAttrs {
  bool has_perm = false;
  std::vector<int64_t> perm;
};

}  // namespace kiln::ops
