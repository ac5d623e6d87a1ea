// DeformConv's typed attributes, window and bilinear sampling taps, shared by the op's reference
// kernel (deform_conv.cc) and the CPU backend's fast kernel (backends/cpu/deform_conv_onednn.cc),
// so the shape rules and the sampling arithmetic have one definition.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include "ir/op.h"
#include "kiln/tensor.h"
#include "ops/nn/spatial.h"

namespace kiln::ops {

// DeformConv (2-D; DeformConvWindow and DeformTaps below resolve its window and sampling taps).
struct DeformConvAttrs : ir::OpAttrs {
  nn::WindowAttrs window;
  int64_t group = 1, offset_group = 1;
};

// Conv's window for X [N, C, H, W] and W [M, C / group, kH, kW] under DeformConv's rules: "" or
// the violated rule as text.
std::string DeformConvWindow(const DeformConvAttrs& a, const Shape& x, const Shape& w,
                             nn::Window* win);

// The bilinear taps of the sample at (yy, xx) (input pixel units) in an h x w plane: 4 offsets
// into the plane (row-major) and their weights, each times `scale` (the mask). Taps outside the
// plane get weight 0 and offset 0, so every sample has 4; a sample that reads only zeros (or is
// NaN) has 4 zero weights. This is torchvision's deform_conv2d and ONNX's reference.
inline void DeformTaps(double yy, double xx, int64_t h, int64_t w, double scale, int64_t pos[4],
                       double wt[4]) {
  for (int q = 0; q < 4; ++q) {
    pos[q] = 0;
    wt[q] = 0.0;
  }
  if (!(yy > -1.0 && yy < static_cast<double>(h) && xx > -1.0 && xx < static_cast<double>(w)))
    return;
  const double fy = std::floor(yy), fx = std::floor(xx);
  const double ly = yy - fy, lx = xx - fx;
  const auto y0 = static_cast<int64_t>(fy), x0 = static_cast<int64_t>(fx);
  const double wy[2] = {1.0 - ly, ly}, wx[2] = {1.0 - lx, lx};
  for (int a = 0; a < 2; ++a)
    for (int c = 0; c < 2; ++c) {
      const int64_t yi = y0 + a, xi = x0 + c;
      if (yi < 0 || yi >= h || xi < 0 || xi >= w) continue;
      pos[a * 2 + c] = yi * w + xi;
      wt[a * 2 + c] = wy[a] * wx[c] * scale;
    }
}

}  // namespace kiln::ops
