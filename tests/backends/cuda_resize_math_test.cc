// The CUDA 2-D Resize arithmetic (resize_math.h) run on the CPU over every output element and
// compared with kiln's reference Resize (opsets 11 and 13, scales or sizes) and Upsample-9 /
// Resize-10 on one-node ONNX graphs: nearest (exactly, every coordinate mode and nearest mode) and
// bilinear (tolerance 1e-5 + 1e-5 * |want|; both sides compute in double, so they agree to the
// final float rounding), up and down scales, an output dim of 1 and a 1x1 input. Outputs start
// as NaN so an unwritten element fails.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "backends/cuda/kernels/resize_math.h"
#include "cuda_kernel_test_util.h"

namespace kiln {
namespace {

using cuda_math::ResizeCoord;
using cuda_math::ResizeMode;
using cuda_math::ResizeNearest;
using namespace cuda_test;  // NOLINT(build/namespaces): test helpers

const std::pair<const char*, ResizeCoord> kCoords[] = {
    {"half_pixel", ResizeCoord::kHalfPixel},
    {"pytorch_half_pixel", ResizeCoord::kPytorchHalfPixel},
    {"align_corners", ResizeCoord::kAlignCorners},
    {"asymmetric", ResizeCoord::kAsymmetric}};

const std::pair<const char*, ResizeNearest> kNearestModes[] = {
    {"round_prefer_floor", ResizeNearest::kRoundPreferFloor},
    {"round_prefer_ceil", ResizeNearest::kRoundPreferCeil},
    {"floor", ResizeNearest::kFloor},
    {"ceil", ResizeNearest::kCeil}};

struct ResizeCase {
  Shape x;
  std::vector<float> scales;   // or
  std::vector<int64_t> sizes;  // (opset 11, with empty roi and scales)
};

const ResizeCase kCases[] = {
    {{1, 2, 5, 7}, {1, 1, 2, 3}, {}},       {{2, 1, 4, 6}, {1, 1, 1.7f, 2.3f}, {}},
    {{1, 2, 9, 8}, {1, 1, 0.5f, 0.6f}, {}}, {{1, 1, 7, 11}, {1, 1, 0.37f, 0.8f}, {}},
    {{1, 2, 5, 7}, {}, {1, 2, 3, 11}},      {{1, 1, 6, 4}, {}, {1, 1, 1, 9}},  // an output dim of 1
    {{1, 1, 1, 1}, {}, {1, 1, 3, 2}},                                          // 1x1 input
};

// Every output of resize_math.h on the host, with the reference's per-dim scales.
std::vector<float> ResizeOnHost(const std::vector<float>& x, const Shape& xs, const Shape& ys,
                                const std::vector<double>& scales, ResizeMode mode,
                                ResizeCoord coord, ResizeNearest nearest) {
  cuda_math::Resize2dParams p;
  EXPECT_TRUE(cuda_math::MakeResize2dParams(xs, ys, scales, mode, coord, nearest, &p));
  std::vector<float> got(static_cast<size_t>(NumElements(ys)), std::nanf(""));
  size_t i = 0;
  for (int64_t plane = 0; plane < xs[0] * xs[1]; ++plane)
    for (int64_t oh = 0; oh < p.out_h; ++oh)
      for (int64_t ow = 0; ow < p.out_w; ++ow)
        got[i++] = cuda_math::ResizeAt(x.data() + plane * p.in_h * p.in_w, p, oh, ow);
  return got;
}

TEST(CudaResizeMathTest, MatchesReference) {
  for (const ResizeCase& c : kCases) {
    const std::vector<float> x = Random(NumElements(c.x), 51, -4.f, 4.f);
    const int opset = c.scales.empty() ? 11 : 13;
    // variant 0 .. 3: nearest with each nearest_mode; 4: linear.
    for (const auto& [coord_name, coord] : kCoords)
      for (int variant = 0; variant < 5; ++variant) {
        const bool linear = variant == 4;
        const auto& [nearest_name, nearest] = kNearestModes[linear ? 0 : variant];
        SCOPED_TRACE(ShapeToString(c.x) + " " + coord_name + " " +
                     (linear ? std::string("linear") : nearest_name));
        ModelBuilder mb(opset);
        mb.Input("x", kF32, c.x);
        OutputAnyShape(mb, "y");
        if (c.scales.empty()) {
          mb.FloatInit("roi", {0}, {});
          mb.FloatInit("scales", {0}, {});
          mb.Int64Init("sizes", {4}, c.sizes);
        } else {
          mb.FloatInit("scales", {4}, c.scales);
        }
        auto& n = mb.Node("Resize",
                          c.scales.empty() ? std::vector<std::string>{"x", "roi", "scales", "sizes"}
                                           : std::vector<std::string>{"x", "", "scales"},
                          {"y"});
        StringAttr(n, "mode", linear ? "linear" : "nearest");
        StringAttr(n, "coordinate_transformation_mode", coord_name);
        StringAttr(n, "nearest_mode", nearest_name);
        auto want = RunReference(mb, {Input("x", x, c.x)});
        ASSERT_EQ(want.size(), 1u);
        const Shape& ys = want[0].shape();
        std::vector<double> scales(4);
        for (int d = 0; d < 4; ++d)
          scales[d] = c.scales.empty() ? static_cast<double>(ys[d]) / static_cast<double>(c.x[d])
                                       : static_cast<double>(c.scales[d]);
        const std::vector<float> got =
            ResizeOnHost(x, c.x, ys, scales, linear ? ResizeMode::kLinear : ResizeMode::kNearest,
                         coord, nearest);
        if (linear)
          ExpectClose(got, want[0]);
        else
          ExpectClose(got, want[0], 0.f, 0.f);
      }
  }
}

// Upsample-9 and Resize-10: asymmetric coordinates and the legacy nearest rounding (truncation
// when upsampling, ceil when downsampling; Resize-10 may downsample).
TEST(CudaResizeMathTest, LegacyMatchesReference) {
  struct Case {
    const char* op;
    int opset;
    Shape x;
    std::vector<float> scales;
  };
  const Case cases[] = {{"Upsample", 9, {1, 2, 4, 5}, {1, 1, 2, 3}},
                        {"Upsample", 9, {2, 1, 3, 3}, {1, 1, 1.5f, 2.5f}},
                        {"Resize", 10, {1, 2, 9, 10}, {1, 1, 0.5f, 0.7f}},
                        {"Resize", 10, {1, 1, 5, 4}, {1, 1, 1.4f, 0.75f}}};
  for (const Case& c : cases) {
    const std::vector<float> x = Random(NumElements(c.x), 52, -4.f, 4.f);
    for (bool linear : {false, true}) {
      SCOPED_TRACE(std::string(c.op) + " " + ShapeToString(c.x) + (linear ? " linear" : ""));
      ModelBuilder mb(c.opset);
      mb.Input("x", kF32, c.x);
      OutputAnyShape(mb, "y");
      mb.FloatInit("scales", {4}, c.scales);
      StringAttr(mb.Node(c.op, {"x", "scales"}, {"y"}), "mode", linear ? "linear" : "nearest");
      auto want = RunReference(mb, {Input("x", x, c.x)});
      ASSERT_EQ(want.size(), 1u);
      const std::vector<double> scales(c.scales.begin(), c.scales.end());
      const std::vector<float> got = ResizeOnHost(
          x, c.x, want[0].shape(), scales, linear ? ResizeMode::kLinear : ResizeMode::kNearest,
          ResizeCoord::kAsymmetric, ResizeNearest::kLegacy);
      if (linear)
        ExpectClose(got, want[0]);
      else
        ExpectClose(got, want[0], 0.f, 0.f);
    }
  }
}

TEST(CudaResizeMathTest, ParamsHelperRejectsBadInput) {
  cuda_math::Resize2dParams p;
  const auto make = [&](const Shape& in, const Shape& out, const std::vector<double>& scales) {
    return cuda_math::MakeResize2dParams(in, out, scales, ResizeMode::kLinear,
                                         ResizeCoord::kHalfPixel, ResizeNearest::kFloor, &p);
  };
  EXPECT_TRUE(make({1, 2, 3, 4}, {1, 2, 6, 2}, {1, 1, 2, 0.5}));
  EXPECT_EQ(p.out_h, 6);
  EXPECT_EQ(p.scale_w, 0.5);
  EXPECT_FALSE(make({2, 3, 4}, {2, 6, 8}, {1, 2, 2}));             // not 4-D
  EXPECT_FALSE(make({1, 2, 3, 4}, {1, 4, 6, 8}, {1, 2, 2, 2}));    // resizes C
  EXPECT_FALSE(make({1, 2, 3, 4}, {1, 2, 3, 4}, {1, 1.5, 1, 1}));  // C scale != 1
  EXPECT_FALSE(make({1, 2, 3, 4}, {1, 2, 6, 8}, {1, 1, 0, 2}));
  EXPECT_FALSE(make({1, 2, 3, 4}, {1, 2, 6, 8}, {1, 1, 2, INFINITY}));
  EXPECT_FALSE(make({1, 2, 0, 4}, {1, 2, 2, 8}, {1, 1, 2, 2}));  // empty input, non-empty output
}

}  // namespace
}  // namespace kiln
