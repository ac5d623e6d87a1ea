// Slice's typed attributes and its index resolution, shared by the reference Slice op and device
// kernels: starts, ends, optional axes and steps resolved against an input shape exactly as the
// ONNX spec says (see slice.cc), into the output shape and a start and step per input dim.
#pragma once

#include <string>
#include <vector>

#include "ir/op.h"
#include "kiln/tensor.h"

namespace kiln::ops {

// Slice before opset 10: starts, ends and axes are attributes (later opsets take inputs).
struct SliceAttrs : ir::OpAttrs {
  std::vector<int64_t> starts, ends;
  bool has_axes = false;
  std::vector<int64_t> axes;
};

struct SlicePlan {
  Shape out;
  std::vector<int64_t> start, step;  // per input dim
};

// Empty string on success, else the broken rule with the offending values. `axes` and `steps`
// may be null (all leading axes / steps of 1).
std::string MakeSlicePlan(const Shape& in, const std::vector<int64_t>& starts,
                          const std::vector<int64_t>& ends, const std::vector<int64_t>* axes,
                          const std::vector<int64_t>* steps, SlicePlan* plan);

// The plan of a Slice of opset `opset` over input shape `in`: from Slice-1's attributes, or from
// starts, ends, axes and steps in `ints[1..4]` (null when absent; int64 or int32). Empty string
// on success, else the broken rule.
std::string SlicePlanOf(int opset, const SliceAttrs& a, const Shape& in,
                        const std::vector<const Tensor*>& ints, SlicePlan* plan);

// The strided gather that takes `plan` from a row-major input of shape `in`: a source stride per
// dim (elements) and the first element's offset.
void SliceGather(const Shape& in, const SlicePlan& plan, std::vector<int64_t>* strides,
                 int64_t* offset);

}  // namespace kiln::ops
