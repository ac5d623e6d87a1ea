// ConvTranspose's typed attributes, parsed and checked by the op (conv_transpose.cc has its rules)
// and read by its fast kernels (backends/cpu/deconv_onednn.cc,
// backends/cuda/ops/conv_transpose_cudnn.cc). The output geometry they resolve to is
// nn::ResolveTransposeWindow (spatial.h).
#pragma once

#include <cstdint>
#include <vector>

#include "ir/op.h"
#include "ops/nn/spatial.h"

namespace kiln::ops {

// ConvTranspose.
struct ConvTransposeAttrs : ir::OpAttrs {
  nn::WindowAttrs window;
  int64_t group = 1;
  std::vector<int64_t> output_padding, output_shape;
};

}  // namespace kiln::ops
