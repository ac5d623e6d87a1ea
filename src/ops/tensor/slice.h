// Slice index resolution shared by the reference Slice op and device kernels: starts, ends,
// optional axes and steps resolved against an input shape exactly as the ONNX spec says (see
// slice.cc), into the output shape and a start and step per input dim.
#pragma once

#include <string>
#include <vector>

#include "kiln/tensor.h"

namespace kiln::ops {

struct SlicePlan {
  Shape out;
  std::vector<int64_t> start, step;  // per input dim
};

// Empty string on success, else the broken rule with the offending values. `axes` and `steps`
// may be null (all leading axes / steps of 1).
std::string MakeSlicePlan(const Shape& in, const std::vector<int64_t>& starts,
                          const std::vector<int64_t>& ends, const std::vector<int64_t>* axes,
                          const std::vector<int64_t>* steps, SlicePlan* plan);

}  // namespace kiln::ops
