// 2-D Resize / Upsample arithmetic shared by resize.cu and its CPU tests, matching kiln's
// reference (ops/resize/resize.cc). Layout: X [N, C, H, W] -> Y [N, C, OH, OW] float32 dense;
// only H and W are resized (N and C keep their size with scale 1). Per output element, per dim
// (x = output index, scale as the reference holds it: the float `scales` value widened to double,
// or out / in in double when `sizes` is given, L = in * scale):
//   half_pixel (x + 0.5) / scale - 0.5; pytorch_half_pixel the same when out > 1, else 0;
//   align_corners L == 1 ? 0 : x * (in - 1) / (L - 1); asymmetric x / scale.
// Each maps a scale-1 dim onto itself, so N and C are plain planes. (Not tf_half_pixel_for_nn:
// the reference maps scale-1 dims to x + 0.5 there, so ceil rounding and linear mix channels.)
// nearest: one tap, rounded by nearest_mode (round_prefer_floor, round_prefer_ceil, floor, ceil;
// kLegacy is Upsample / Resize-10: ceil when downsampling, else truncation). linear: taps floor(x)
// and floor(x) + 1 with weights 1 - r and r (the second dropped when r == 0); bilinear weight
// w_h * w_w. Taps are clamped into the input. Not covered: cubic, tf_crop_and_resize,
// tf_half_pixel_for_nn, opset-18 antialiasing and axes.
// Coordinates, weights and the bilinear sum are double, as in the reference, so results match it
// to the final float rounding; L uses a non-fused multiply so nvcc's FMA contraction cannot
// change a coordinate (a rounding tie would pick another pixel). On the GPU that is a few FP64
// operations per output element.
#pragma once

#include <cmath>
#include <vector>

#include "backends/cuda/kernels/cast_math.h"
#include "backends/cuda/kernels/hd.h"

namespace kiln::cuda_math {

enum class ResizeMode : int { kNearest = 0, kLinear };
enum class ResizeCoord : int { kHalfPixel = 0, kPytorchHalfPixel, kAlignCorners, kAsymmetric };
enum class ResizeNearest : int { kRoundPreferFloor = 0, kRoundPreferCeil, kFloor, kCeil, kLegacy };

struct Resize2dParams {
  int64_t in_h, in_w, out_h, out_w;
  double scale_h, scale_w;
  ResizeMode mode;
  ResizeCoord coord;
  ResizeNearest nearest;
};

// Taps of one output coordinate along one dim.
struct ResizeTaps {
  int64_t index[2];
  double weight[2];
  int count;
};

// a * b rounded once, never contracted into an FMA with a following add.
KILN_HD double MulNoFma(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}

// Input coordinate of output index o along a dim of `in` -> `out` elements.
KILN_HD double ResizeSourceCoord(ResizeCoord c, int64_t o, int64_t in, int64_t out, double scale) {
  const double x = static_cast<double>(o);
  switch (c) {
    case ResizeCoord::kHalfPixel:
      return (x + 0.5) / scale - 0.5;
    case ResizeCoord::kPytorchHalfPixel:
      return out > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
    case ResizeCoord::kAlignCorners: {
      const double length = MulNoFma(static_cast<double>(in), scale);
      return length == 1.0 ? 0.0 : x * static_cast<double>(in - 1) / (length - 1.0);
    }
    case ResizeCoord::kAsymmetric:
      return x / scale;
  }
  return 0.0;
}

KILN_HD int64_t ResizeNearestIndex(ResizeNearest m, double x, double scale) {
  const double fl = floor(x);
  const double frac = x - fl;
  switch (m) {
    case ResizeNearest::kRoundPreferFloor:
      return static_cast<int64_t>(frac <= 0.5 ? fl : fl + 1);
    case ResizeNearest::kRoundPreferCeil:
      return static_cast<int64_t>(frac < 0.5 ? fl : fl + 1);
    case ResizeNearest::kFloor:
      return static_cast<int64_t>(fl);
    case ResizeNearest::kCeil:
      return static_cast<int64_t>(ceil(x));
    case ResizeNearest::kLegacy:
      return static_cast<int64_t>(scale < 1.0 ? ceil(x) : trunc(x));
  }
  return 0;
}

KILN_HD int64_t ClampIndex(int64_t i, int64_t in) {
  return i < 0 ? 0 : (i > in - 1 ? (in > 0 ? in - 1 : 0) : i);
}

KILN_HD ResizeTaps ResizeDimTaps(const Resize2dParams& p, int64_t o, int64_t in, int64_t out,
                                 double scale) {
  const double x = ResizeSourceCoord(p.coord, o, in, out, scale);
  ResizeTaps t;
  if (p.mode == ResizeMode::kNearest) {
    t.index[0] = ClampIndex(ResizeNearestIndex(p.nearest, x, scale), in);
    t.weight[0] = 1.0;
    t.count = 1;
    return t;
  }
  const double fl = floor(x);
  const double r = x - fl;
  const int64_t base = static_cast<int64_t>(fl);
  t.index[0] = ClampIndex(base, in);
  t.weight[0] = 1.0 - r;
  t.index[1] = ClampIndex(base + 1, in);
  t.weight[1] = r;
  t.count = r == 0.0 ? 1 : 2;
  return t;
}

// Output (oh, ow) of one plane `x` [in_h, in_w].
template <typename T>
KILN_HD float ResizeAt(const T* x, const Resize2dParams& p, int64_t oh, int64_t ow) {
  const ResizeTaps th = ResizeDimTaps(p, oh, p.in_h, p.out_h, p.scale_h);
  const ResizeTaps tw = ResizeDimTaps(p, ow, p.in_w, p.out_w, p.scale_w);
  if (p.mode == ResizeMode::kNearest) return ToFloat(x[th.index[0] * p.in_w + tw.index[0]]);
  double acc = 0.0;
  for (int i = 0; i < th.count; ++i) {
    const T* row = x + th.index[i] * p.in_w;
    for (int j = 0; j < tw.count; ++j)
      acc += th.weight[i] * tw.weight[j] * static_cast<double>(ToFloat(row[tw.index[j]]));
  }
  return static_cast<float>(acc);
}

// Host: parameters for resizing `in` [N, C, H, W] to `out` with the reference's per-dim `scales`
// (see above). False unless all three have 4 entries, N and C keep their size with scale 1, the
// H and W scales are finite and > 0, and an empty input dim has an empty output dim.
inline bool MakeResize2dParams(const std::vector<int64_t>& in, const std::vector<int64_t>& out,
                               const std::vector<double>& scales, ResizeMode mode,
                               ResizeCoord coord, ResizeNearest nearest, Resize2dParams* p) {
  if (in.size() != 4 || out.size() != 4 || scales.size() != 4) return false;
  for (int d = 0; d < 2; ++d)
    if (out[d] != in[d] || scales[d] != 1.0) return false;
  for (int d = 2; d < 4; ++d)
    if (!(scales[d] > 0.0) || !std::isfinite(scales[d]) || out[d] < 0 || (in[d] == 0 && out[d]))
      return false;
  *p = {in[2], in[3], out[2], out[3], scales[2], scales[3], mode, coord, nearest};
  return true;
}

}  // namespace kiln::cuda_math
