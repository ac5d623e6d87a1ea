// The CUDA data-movement index math (layout_math.h: strided gather for Transpose and Slice,
// constant Pad, Concat copy) run on the CPU over every output element and compared, exactly, with
// kiln's reference kernels on one-node ONNX graphs. Outputs start as NaN so an unwritten element
// fails.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "backends/cuda/kernels/layout_math.h"
#include "cuda_kernel_test_util.h"

namespace kiln {
namespace {

using namespace cuda_test;  // NOLINT(build/namespaces): test helpers

// Every element of `got` equals `want` (bit-exact copies).
void ExpectEqual(const std::vector<float>& got, const Tensor& want) {
  ExpectClose(got, want, 0.f, 0.f);
}

std::vector<float> Gather(const std::vector<float>& src, const cuda_math::GatherIndex& g) {
  std::vector<float> out(static_cast<size_t>(cuda_math::OutputElements(g)));
  for (size_t i = 0; i < out.size(); ++i) {
    const int64_t off = cuda_math::GatherOffset(g, static_cast<int64_t>(i));
    EXPECT_TRUE(off >= 0 && off < static_cast<int64_t>(src.size())) << off;
    out[i] = off >= 0 && off < static_cast<int64_t>(src.size()) ? src[off] : std::nanf("");
  }
  return out;
}

TEST(CudaLayoutMathTest, TransposeMatchesReference) {
  const std::pair<Shape, std::vector<int64_t>> cases[] = {
      {{2, 3, 4, 5}, {0, 2, 3, 1}},
      {{2, 3, 4, 5}, {3, 2, 1, 0}},
      {{1, 7, 1, 3, 2, 5}, {5, 3, 1, 0, 4, 2}},
      {{6}, {0}},
  };
  for (const auto& [xs, perm] : cases) {
    SCOPED_TRACE(ShapeToString(xs) + " perm " + ShapeToString(perm));
    const std::vector<float> x = Random(NumElements(xs), 21);
    ModelBuilder mb(17);
    mb.Input("x", kF32, xs);
    OutputAnyShape(mb, "y");
    ModelBuilder::IntsAttr(mb.Node("Transpose", {"x"}, {"y"}), "perm", perm);
    auto want = RunReference(mb, {Input("x", x, xs)});
    ASSERT_EQ(want.size(), 1u);
    cuda_math::GatherIndex g;
    ASSERT_TRUE(cuda_math::MakeTransposeIndex(xs, perm, &g));
    ExpectEqual(Gather(x, g), want[0]);
  }
  cuda_math::GatherIndex g;
  EXPECT_FALSE(cuda_math::MakeTransposeIndex({2, 3}, {0, 0}, &g));
  EXPECT_FALSE(cuda_math::MakeTransposeIndex({2, 3}, {1}, &g));
}

// ONNX Slice start resolution (the launcher's caller does this): negative adds the dim, then
// clamp to [0, dim] for positive steps and [0, dim - 1] for negative ones.
int64_t ResolveStart(int64_t start, int64_t step, int64_t dim) {
  if (start < 0) start += dim;
  return step > 0 ? std::clamp<int64_t>(start, 0, dim) : std::clamp<int64_t>(start, 0, dim - 1);
}

TEST(CudaLayoutMathTest, SliceMatchesReference) {
  struct Case {
    Shape x;
    std::vector<int64_t> starts, ends, steps;  // one per dim
  };
  const Case cases[] = {
      {{5, 7}, {1, -2}, {4, 0}, {1, -1}},
      {{4, 6, 5}, {-1, 0, 4}, {-100, 6, 0}, {-2, 3, -3}},
      {{3, 4, 5, 6, 2, 3}, {0, 1, 0, 5, 0, 2}, {3, 4, 5, 0, 2, -4}, {1, 2, 2, -2, 1, -1}},
      {{3, 4}, {10, 0}, {20, 4}, {1, 1}},  // empty along dim 0
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(ShapeToString(c.x) + " starts " + ShapeToString(c.starts));
    const std::vector<float> x = Random(NumElements(c.x), 22);
    const int64_t r = static_cast<int64_t>(c.x.size());
    std::vector<int64_t> axes(r);
    for (int64_t d = 0; d < r; ++d) axes[d] = d;
    ModelBuilder mb(13);
    mb.Input("x", kF32, c.x);
    OutputAnyShape(mb, "y");
    mb.Int64Init("starts", {r}, c.starts);
    mb.Int64Init("ends", {r}, c.ends);
    mb.Int64Init("axes", {r}, axes);
    mb.Int64Init("steps", {r}, c.steps);
    mb.Node("Slice", {"x", "starts", "ends", "axes", "steps"}, {"y"});
    auto want = RunReference(mb, {Input("x", x, c.x)});
    ASSERT_EQ(want.size(), 1u);
    std::vector<int64_t> starts(r);
    for (int64_t d = 0; d < r; ++d) starts[d] = ResolveStart(c.starts[d], c.steps[d], c.x[d]);
    cuda_math::GatherIndex g;
    ASSERT_TRUE(cuda_math::MakeSliceIndex(c.x, starts, c.steps, want[0].shape(), &g));
    ExpectEqual(Gather(x, g), want[0]);
  }
}

TEST(CudaLayoutMathTest, PadConstantMatchesReference) {
  struct Case {
    Shape x;
    std::vector<int64_t> pads;  // begins then ends
    float value;
  };
  const Case cases[] = {
      {{2, 3, 4}, {0, 1, 2, 1, 0, 3}, 1.5f},
      {{3, 5}, {-1, 2, 1, -2}, -7.f},  // negative pads crop
      {{1, 2, 1, 3, 1, 2}, {1, 1, 1, 1, 1, 1, 0, 1, 0, 1, 0, 1}, 0.f},
      {{4}, {0, 0}, 3.f},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(ShapeToString(c.x) + " pads " + ShapeToString(c.pads));
    const std::vector<float> x = Random(NumElements(c.x), 23);
    const int64_t r = static_cast<int64_t>(c.x.size());
    ModelBuilder mb(17);
    mb.Input("x", kF32, c.x);
    OutputAnyShape(mb, "y");
    mb.Int64Init("pads", {2 * r}, c.pads);
    mb.FloatInit("value", {}, {c.value});
    mb.Node("Pad", {"x", "pads", "value"}, {"y"});
    auto want = RunReference(mb, {Input("x", x, c.x)});
    ASSERT_EQ(want.size(), 1u);
    cuda_math::PadIndex p;
    const std::vector<int64_t> begin(c.pads.begin(), c.pads.begin() + r);
    ASSERT_TRUE(cuda_math::MakePadIndex(c.x, want[0].shape(), begin, c.value, &p));
    std::vector<float> got(static_cast<size_t>(cuda_math::OutputElements(p)));
    for (size_t i = 0; i < got.size(); ++i) {
      const int64_t off = cuda_math::PadSourceOffset(p, static_cast<int64_t>(i));
      ASSERT_LT(off, static_cast<int64_t>(x.size()));
      got[i] = off < 0 ? p.value : x[off];
    }
    ExpectEqual(got, want[0]);
  }
}

TEST(CudaLayoutMathTest, ConcatMatchesReference) {
  const std::vector<Shape> parts = {{2, 3, 4}, {2, 1, 4}, {2, 5, 4}};
  for (int64_t axis : {0, 1, 2}) {
    SCOPED_TRACE("axis " + std::to_string(axis));
    std::vector<Shape> shapes = parts;
    for (Shape& s : shapes) std::swap(s[1], s[axis]);  // vary the concatenated dim only
    ModelBuilder mb(13);
    std::vector<std::string> names;
    std::vector<NamedTensor> inputs;
    std::vector<std::vector<float>> data;
    for (size_t k = 0; k < shapes.size(); ++k) {
      names.push_back("x" + std::to_string(k));
      data.push_back(Random(NumElements(shapes[k]), 24 + static_cast<uint32_t>(k)));
      mb.Input(names.back(), kF32, shapes[k]);
      inputs.push_back(Input(names.back(), data.back(), shapes[k]));
    }
    OutputAnyShape(mb, "y");
    ModelBuilder::IntAttr(mb.Node("Concat", names, {"y"}), "axis", axis);
    auto want = RunReference(mb, inputs);
    ASSERT_EQ(want.size(), 1u);
    const Shape& ys = want[0].shape();
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= ys[d];
    for (size_t d = axis + 1; d < ys.size(); ++d) inner *= ys[d];
    std::vector<float> got(static_cast<size_t>(want[0].numel()), std::nanf(""));
    int64_t offset = 0;
    for (size_t k = 0; k < shapes.size(); ++k) {
      const cuda_math::ConcatIndex c{outer, shapes[k][axis] * inner, ys[axis] * inner,
                                     offset * inner};
      for (int64_t i = 0; i < c.rows * c.src_cols; ++i) {
        const int64_t dst = cuda_math::ConcatDstOffset(c, i);
        ASSERT_TRUE(dst >= 0 && dst < static_cast<int64_t>(got.size()));
        got[dst] = data[k][i];
      }
      offset += shapes[k][axis];
    }
    ExpectEqual(got, want[0]);
  }
}

}  // namespace
}  // namespace kiln
