// The typed attributes of the normalizations, parsed and checked by the ops (norm.cc,
// ops/fused/fused_batchnorm.cc) and read by their fast kernels (backends/cpu/channel_ops.cc,
// backends/cpu/layernorm_onednn.cc, backends/cuda/ops/nn_cuda.cc).
#pragma once

#include <cstdint>

#include "ir/op.h"
#include "ops/activation.h"

namespace kiln::ops {

// BatchNormalization and FusedBatchNormalization (epsilon, training, act); LayerNormalization
// (axis as written, epsilon, stash_type); InstanceNormalization (epsilon).
struct NormAttrs : ir::OpAttrs {
  float epsilon = 1e-5f;
  int64_t axis = -1;
  int64_t stash_type = 1;
  bool training = false;
  float momentum = 0.9f;  // BatchNormalization's running statistics (training_mode, opset 14+)
  Activation act;
};

}  // namespace kiln::ops
