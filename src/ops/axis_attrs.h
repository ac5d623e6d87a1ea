// AxisAttrs: the typed attributes of the ops whose only attribute a kernel needs is one axis.
// Returned by Concat (ops/tensor/concat_split.cc), Gather (ops/tensor/gather.cc), and Softmax,
// LogSoftmax and Hardmax (ops/reduce/softmax.cc); read by their fast kernels
// (backends/cpu/concat_softmax_onednn.cc, backends/cuda/ops/layout_cuda.cc,
// backends/cuda/ops/nn_cuda.cc).
#pragma once

#include <cstdint>

#include "ir/op.h"

namespace kiln::ops {

// One axis as written (not normalized): Concat, Softmax, LogSoftmax, Hardmax (the opset's
// default applied), Gather.
struct AxisAttrs : ir::OpAttrs {
  int64_t axis = 0;
};

}  // namespace kiln::ops
