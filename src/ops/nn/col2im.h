// Col2Im's typed attributes and geometry, shared by the op's reference kernel (col2im.cc) and the
// CPU backend's fast kernel (backends/cpu/col2im_loops.cc), so its shape rules have one definition.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/op.h"
#include "kiln/tensor.h"

namespace kiln::ops {

// Col2Im (ResolveCol2Im below resolves its geometry); each as written, empty when absent.
struct Col2ImAttrs : ir::OpAttrs {
  std::vector<int64_t> dilations, pads, strides;
};

struct Col2ImGeometry {
  std::vector<int64_t> image, block, blocks, strides, dilations, pads;  // pads: the begin pads
  int64_t block_size = 1, num_blocks = 1, image_size = 1;
};

// The geometry of input shape `in` [N, C * prod(block), L] for image_shape `image` and
// block_shape `block` under the attributes; false with the violated rule in `why`.
bool ResolveCol2Im(const Col2ImAttrs& a, const Shape& in, std::vector<int64_t> image,
                   std::vector<int64_t> block, Col2ImGeometry* g, std::string* why);

}  // namespace kiln::ops
