// Resize/Upsample's typed attributes (read by the fast kernels: backends/cpu/resample_onednn.cc,
// backends/cuda/ops/reduce_resize_cuda.cc) and its per-dim sampling taps, built by the op
// (resize.cc: coordinates, rounding, cubic and antialias filters, exclude_outside, roi) and read
// by its reference kernel and the CPU backend's separable kernel
// (backends/cpu/resize_separable.cc), so the arithmetic that decides every tap has one definition.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/op.h"
#include "kiln/tensor.h"

namespace kiln::ops {

enum class ResizeInterp { kNearest, kLinear, kCubic };
enum class ResizeCoord {
  kHalfPixel,
  kHalfPixelSymmetric,
  kPytorchHalfPixel,
  kAlignCorners,
  kAsymmetric,
  kTfHalfPixelForNn,
  kTfCropAndResize,
};
enum class ResizeRounding { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil, kLegacy };
enum class ResizeAspectPolicy { kStretch, kNotLarger, kNotSmaller };
// Resize and Upsample. `upsample` and `opset` say which input holds the scales.
struct ResizeAttrs : ir::OpAttrs {
  bool upsample = false;
  ResizeInterp interp = ResizeInterp::kNearest;
  ResizeCoord coord = ResizeCoord::kHalfPixel;
  ResizeAspectPolicy policy = ResizeAspectPolicy::kStretch;  // Resize-18
  std::vector<int64_t> axes;                                 // Resize-18; empty: every dim
  ResizeRounding rounding = ResizeRounding::kRoundPreferFloor;
  bool exclude_outside = false;
  bool antialias = false;  // Resize-18: linear/cubic filters widened by 1/scale when shrinking
  double cubic_a = -0.75;
  double extrapolation_value = 0.0;
  std::vector<float> scales;  // Upsample-7's attribute
};

// Taps of every output coordinate along one dim.
struct ResizeDimTaps {
  int64_t stride = 4;          // the most taps any output coordinate has (4; more with antialias)
  std::vector<int> count;      // taps per output coordinate; 0 marks extrapolation
  std::vector<int64_t> index;  // [out * stride], clamped into [0, in)
  std::vector<double> weight;  // [out * stride]
};

// One Resize/Upsample for a concrete input: the output shape and every dim's taps. The N-D
// weight of an output element is the product of its dims' tap weights; an element any of whose
// dims has count 0 (tf_crop_and_resize outside the roi) is extrapolation_value.
struct ResizePlan {
  Shape out;
  std::vector<ResizeDimTaps> taps;
  double extrapolation_value = 0.0;
};

// The plan of a Resize or Upsample op for input shape `in` and the node's inputs by position
// (roi, scales, sizes; nullptr where absent); false with the violated rule in `why`.
bool ResizePlanOf(const ir::Op& op, const Shape& in, const std::vector<const Tensor*>& inputs,
                  ResizePlan* plan, std::string* why);

}  // namespace kiln::ops
