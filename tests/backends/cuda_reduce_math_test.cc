// The CUDA pooling, Softmax and LayerNormalization arithmetic (pool_math.h, softmax_math.h,
// layernorm_math.h, reduce_math.h) run on the CPU over every output element, the block
// reductions replayed in the device's order, and compared with kiln's reference kernels on
// one-node ONNX graphs. Tolerance 1e-5 + 1e-5 * |want| (float accumulation against the
// reference's double).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "backends/cuda/kernels/layernorm_math.h"
#include "backends/cuda/kernels/pool_math.h"
#include "backends/cuda/kernels/softmax_math.h"
#include "cuda_kernel_test_util.h"

namespace kiln {
namespace {

using cuda_math::ReduceKind;
using namespace cuda_test;  // NOLINT(build/namespaces): test helpers

struct PoolCase {
  Shape x;
  int64_t kh, kw, sh, sw, dh, dw;
  std::vector<int64_t> pads;  // top, left, bottom, right
  bool ceil_mode;
};

const PoolCase kPoolCases[] = {
    {{2, 3, 11, 13}, 3, 3, 2, 2, 1, 1, {1, 1, 1, 1}, false},
    {{1, 2, 6, 7}, 3, 3, 2, 2, 1, 1, {0, 0, 0, 0}, true},    // last window past the input
    {{1, 3, 9, 8}, 3, 2, 1, 1, 1, 1, {1, 0, 1, 1}, false},   // asymmetric pads
    {{1, 1, 5, 5}, 2, 2, 3, 3, 1, 1, {1, 1, 0, 0}, true},    // ceil window past the end pad
    {{1, 2, 10, 9}, 3, 3, 2, 1, 2, 2, {2, 1, 2, 1}, false},  // dilated (MaxPool only)
    {{1, 1, 1, 1}, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, false},   // size-1
    {{1, 1, 3, 3}, 2, 2, 2, 2, 1, 1, {2, 2, 2, 2}, false},   // windows wholly in padding
    {{2, 2, 7, 4}, 7, 4, 1, 1, 1, 1, {0, 0, 0, 0}, false},   // window = whole plane
};

TEST(CudaReduceMathTest, PoolsMatchReference) {
  for (const PoolCase& c : kPoolCases) {
    const std::vector<float> x = Random(NumElements(c.x), 11);
    // variant 0: MaxPool; 1, 2: AveragePool with count_include_pad 0, 1.
    for (int variant = 0; variant < 3; ++variant) {
      if (variant > 0 && (c.dh != 1 || c.dw != 1)) continue;
      SCOPED_TRACE(ShapeToString(c.x) + " variant " + std::to_string(variant));
      ModelBuilder mb(17);
      mb.Input("x", kF32, c.x);
      OutputAnyShape(mb, "y");
      auto& n = mb.Node(variant == 0 ? "MaxPool" : "AveragePool", {"x"}, {"y"});
      ModelBuilder::IntsAttr(n, "kernel_shape", {c.kh, c.kw});
      ModelBuilder::IntsAttr(n, "strides", {c.sh, c.sw});
      ModelBuilder::IntsAttr(n, "pads", c.pads);
      ModelBuilder::IntAttr(n, "ceil_mode", c.ceil_mode);
      if (variant == 0) ModelBuilder::IntsAttr(n, "dilations", {c.dh, c.dw});
      if (variant > 0) ModelBuilder::IntAttr(n, "count_include_pad", variant - 1);
      auto want = RunReference(mb, {Input("x", x, c.x)});
      ASSERT_EQ(want.size(), 1u);
      const Shape& ys = want[0].shape();
      const cuda_math::Pool2dParams p{c.x[2],    c.x[3],    ys[2],     ys[3],     c.kh,
                                      c.kw,      c.sh,      c.sw,      c.dh,      c.dw,
                                      c.pads[0], c.pads[1], c.pads[2], c.pads[3], variant == 2};
      std::vector<float> got;
      for (int64_t plane = 0; plane < c.x[0] * c.x[1]; ++plane)
        for (int64_t oh = 0; oh < p.out_h; ++oh)
          for (int64_t ow = 0; ow < p.out_w; ++ow) {
            const float* xp = x.data() + plane * p.in_h * p.in_w;
            got.push_back(variant == 0 ? cuda_math::MaxPoolAt(xp, p, oh, ow)
                                       : cuda_math::AvgPoolAt(xp, p, oh, ow));
          }
      ExpectClose(got, want[0]);
    }
  }
}

TEST(CudaReduceMathTest, GlobalPoolsMatchReference) {
  for (const Shape& xs :
       {Shape{2, 3, 5, 7}, Shape{1, 4, 1, 1}, Shape{1, 2, 300, 301}, Shape{3, 1, 17}}) {
    const std::vector<float> x = Random(NumElements(xs), 12);
    const int64_t planes = xs[0] * xs[1], plane = NumElements(xs) / planes;
    for (bool max : {false, true}) {
      SCOPED_TRACE(ShapeToString(xs) + (max ? " max" : " average"));
      ModelBuilder mb(17);
      mb.Input("x", kF32, xs);
      OutputAnyShape(mb, "y");
      mb.Node(max ? "GlobalMaxPool" : "GlobalAveragePool", {"x"}, {"y"});
      auto want = RunReference(mb, {Input("x", x, xs)});
      ASSERT_EQ(want.size(), 1u);
      std::vector<float> got;
      for (int64_t p = 0; p < planes; ++p) {
        const float v = BlockReduceOnHost(max ? ReduceKind::kMax : ReduceKind::kSum,
                                          cuda_math::LoadRow{x.data() + p * plane, 1}, plane);
        got.push_back(cuda_math::GlobalPoolResult(v, plane, max));
      }
      ExpectClose(got, want[0]);
    }
  }
}

TEST(CudaReduceMathTest, SoftmaxMatchesReference) {
  struct Case {
    Shape x;
    int64_t axis;
  };
  const Case cases[] = {{{2, 3, 4, 5}, -1}, {{2, 3, 4, 5}, 1}, {{2, 3, 4, 5}, 0}, {{1, 1000}, 1},
                        {{3, 1, 5}, 1},     {{2, 600, 3}, 1},  {{3, 6}, 1}};
  for (const Case& c : cases) {
    std::vector<float> x = Random(NumElements(c.x), 13, -8.f, 8.f);
    x[0] = 90.f;  // exp overflows without the max shift
    x[1] = -90.f;
    if (c.x == Shape{3, 6}) {  // non-finite maxima: shift 0, as the reference does
      x[8] = INFINITY;
      std::fill(x.begin() + 12, x.end(), -INFINITY);
    }
    const int64_t axis = c.axis < 0 ? c.axis + static_cast<int64_t>(c.x.size()) : c.axis;
    cuda_math::SoftmaxShape s{1, c.x[axis], 1};
    for (int64_t d = 0; d < axis; ++d) s.outer *= c.x[d];
    for (size_t d = axis + 1; d < c.x.size(); ++d) s.inner *= c.x[d];
    for (bool log : {false, true}) {
      SCOPED_TRACE(ShapeToString(c.x) + " axis " + std::to_string(c.axis) + (log ? " log" : ""));
      ModelBuilder mb(13);
      mb.Input("x", kF32, c.x);
      OutputAnyShape(mb, "y");
      auto& n = mb.Node(log ? "LogSoftmax" : "Softmax", {"x"}, {"y"});
      ModelBuilder::IntAttr(n, "axis", c.axis);
      auto want = RunReference(mb, {Input("x", x, c.x)});
      ASSERT_EQ(want.size(), 1u);
      std::vector<float> got(x.size(), std::nanf(""));
      for (int64_t v = 0; v < s.outer * s.inner; ++v) {
        const int64_t base = cuda_math::SoftmaxVectorBase(s, v);
        const float* xv = x.data() + base;
        const float shift = cuda_math::SoftmaxShift(
            BlockReduceOnHost(ReduceKind::kMax, cuda_math::LoadRow{xv, s.inner}, s.n));
        const float sum =
            BlockReduceOnHost(ReduceKind::kSum, cuda_math::LoadExpShifted{xv, s.inner, shift}, s.n);
        for (int64_t j = 0; j < s.n; ++j)
          got[base + j * s.inner] = cuda_math::SoftmaxOut(xv[j * s.inner], shift, sum, log);
      }
      ExpectClose(got, want[0]);
    }
  }
}

TEST(CudaReduceMathTest, LayerNormMatchesReference) {
  struct Case {
    Shape x;
    int64_t axis;
    bool bias;
  };
  const Case cases[] = {{{2, 3, 4, 5}, -1, true},
                        {{2, 3, 4, 5}, 1, false},
                        {{3, 700}, -1, true},
                        {{4, 1}, -1, true},
                        {{1, 3, 300}, 0, true}};
  for (const Case& c : cases) {
    SCOPED_TRACE(ShapeToString(c.x) + " axis " + std::to_string(c.axis));
    const int64_t axis = c.axis < 0 ? c.axis + static_cast<int64_t>(c.x.size()) : c.axis;
    const Shape inner(c.x.begin() + axis, c.x.end());
    const int64_t cols = NumElements(inner), rows = NumElements(c.x) / cols;
    std::vector<float> x = Random(NumElements(c.x), 14, -2.f, 3.f);
    const std::vector<float> gamma = Random(cols, 15), beta = Random(cols, 16);
    ModelBuilder mb(17);
    mb.Input("x", kF32, c.x);
    OutputAnyShape(mb, "y");
    mb.FloatInit("scale", inner, gamma);
    if (c.bias) mb.FloatInit("b", inner, beta);
    auto& n = mb.Node("LayerNormalization",
                      c.bias ? std::vector<std::string>{"x", "scale", "b"}
                             : std::vector<std::string>{"x", "scale"},
                      {"y"});
    ModelBuilder::IntAttr(n, "axis", c.axis);
    FloatAttr(n, "epsilon", 1e-3f);
    auto want = RunReference(mb, {Input("x", x, c.x)});
    ASSERT_EQ(want.size(), 1u);
    std::vector<float> got(x.size());
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = x.data() + r * cols;
      const float mean =
          BlockReduceOnHost(ReduceKind::kSum, cuda_math::LoadRow{xr, 1}, cols) / cols;
      const float inv = cuda_math::LayerNormInvStd(
          BlockReduceOnHost(ReduceKind::kSum, cuda_math::LoadSquaredDev{xr, mean}, cols), cols,
          1e-3f);
      for (int64_t j = 0; j < cols; ++j)
        got[r * cols + j] = cuda_math::LayerNormOut(xr[j], mean, inv, gamma.data(),
                                                    c.bias ? beta.data() : nullptr, j);
    }
    ExpectClose(got, want[0]);
  }
}

}  // namespace
}  // namespace kiln
