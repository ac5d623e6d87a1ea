// GridSample's typed attributes and its per-dim sampling taps, shared by the op's reference
// kernel (grid_sample.cc) and the CPU backend's fast kernel (backends/cpu/grid_sample_loops.cc),
// so the coordinate rules (align_corners, padding, nearest's rounding, cubic's taps) have one
// definition; and AffineGrid's (also grid_sample.cc; its fast kernel is
// backends/cpu/affine_grid_loops.cc).
#pragma once

#include <cstdint>

#include "ir/graph.h"
#include "ir/op.h"
#include "kiln/status.h"

namespace kiln::ops {

enum class GridMode { kNearest, kLinear, kCubic };
enum class GridPadding { kZeros, kBorder, kReflection };

struct GridSampleAttrs {
  GridMode mode = GridMode::kLinear;
  GridPadding padding = GridPadding::kZeros;
  bool align_corners = false;
};

// The node's attributes, with the names of its opset (16: bilinear / bicubic, 20: linear /
// cubic); AttrError naming the node and the value otherwise.
StatusOr<GridSampleAttrs> GridSampleAttrsOf(const ir::Node& node);

// The most taps one dim can have (cubic).
inline constexpr int kMaxGridTaps = 4;

// The taps of normalized coordinate v along a dim of length len: up to kMaxGridTaps indices into
// that dim and their weights. Returns how many; 0 when the sample reads only zero padding (or v
// is not finite).
int64_t GridTaps(const GridSampleAttrs& a, double v, int64_t len, int64_t* index, double* weight);

// AffineGrid (AffineGridBase below has its base coordinates).
struct AffineGridAttrs : ir::OpAttrs {
  bool align_corners = false;
};

// AffineGrid's base coordinate of index i along a dim of length len, in [-1, 1].
inline double AffineGridBase(int64_t i, int64_t len, bool align_corners) {
  if (align_corners) return len == 1 ? -1.0 : -1.0 + 2.0 * i / static_cast<double>(len - 1);
  return -1.0 + (2.0 * i + 1.0) / static_cast<double>(len);
}

}  // namespace kiln::ops
