// The typed attributes of the Reduce* ops, parsed and checked by the ops (reduce.cc has their
// rules) and read by their fast kernel (backends/cuda/ops/reduce_resize_cuda.cc).
#pragma once

#include <cstdint>
#include <vector>

#include "ir/op.h"

namespace kiln::ops {

// The Reduce* family: axes as an attribute (before the opset that made them an input).
struct ReduceAttrs : ir::OpAttrs {
  bool axes_from_input = false;
  bool keepdims = true;
  bool noop_with_empty_axes = false;
  std::vector<int64_t> axes;
};

}  // namespace kiln::ops
