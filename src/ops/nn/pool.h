// The typed attributes of MaxPool and AveragePool, parsed and checked by the ops (pool.cc has
// their rules) and read by their fast kernels (backends/cpu/pool_onednn.cc,
// backends/cuda/ops/nn_cuda.cc). kiln.QAveragePool extends them (ops/quant/qpool.h).
#pragma once

#include "ir/op.h"
#include "ops/nn/spatial.h"

namespace kiln::ops {

// MaxPool and AveragePool.
struct PoolAttrs : ir::OpAttrs {
  nn::WindowAttrs window;
  bool ceil_mode = false;
  bool count_include_pad = false;  // AveragePool
  bool col_major_indices = false;  // MaxPool storage_order = 1
};

}  // namespace kiln::ops
