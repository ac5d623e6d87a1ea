// The CUDA Gather index math (gather_math.h) run on the CPU over every output element and
// compared, exactly, with kiln's reference Gather on one-node ONNX graphs (float32 and int64 data,
// constant int64 indices). Out-of-range indices, which the reference rejects, are checked to give
// zeros without an out-of-bounds read. Outputs start as NaN (or a sentinel) so an unwritten
// element fails.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "backends/cuda/kernels/gather_math.h"
#include "cuda_kernel_test_util.h"

namespace kiln {
namespace {

using namespace cuda_test;  // NOLINT(build/namespaces): test helpers

// The kernel's loop on the host: out-of-range offsets become T{0}; offsets past `src` fail.
template <typename T>
std::vector<T> GatherOnHost(const std::vector<T>& src, const std::vector<int64_t>& indices,
                            const cuda_math::GatherAxisShape& s, T fill) {
  std::vector<T> out(static_cast<size_t>(cuda_math::GatherAxisOutputs(s)), fill);
  for (size_t i = 0; i < out.size(); ++i) {
    const int64_t off =
        cuda_math::GatherAxisSourceOffset(s, indices.data(), static_cast<int64_t>(i));
    EXPECT_LT(off, static_cast<int64_t>(src.size()));
    out[i] = off < 0 || off >= static_cast<int64_t>(src.size()) ? T{0} : src[off];
  }
  return out;
}

struct GatherCase {
  Shape data;
  int64_t axis;
  Shape indices_shape;  // {} for a scalar index
  std::vector<int64_t> indices;
};

const GatherCase kCases[] = {
    {{5, 3, 4}, 0, {4}, {0, 4, -1, -5}},
    {{5, 3, 4}, 1, {2, 3}, {2, -3, 0, 1, -1, 2}},
    {{5, 3, 4}, 2, {3}, {3, -4, 1}},
    {{5, 3, 4}, -1, {2, 2}, {-1, -2, 0, 3}},
    {{5, 3, 4}, 1, {}, {-2}},  // scalar index: the axis disappears
    {{7}, 0, {}, {6}},
    {{7}, 0, {5}, {6, -7, 3, 3, 0}},
    {{2, 3, 1, 4, 5, 2}, 3, {2, 1}, {-4, 2}},
    {{3, 4}, 0, {0}, {}},  // no indices: empty output
};

TEST(CudaGatherMathTest, FloatMatchesReference) {
  for (const GatherCase& c : kCases) {
    SCOPED_TRACE(ShapeToString(c.data) + " axis " + std::to_string(c.axis) + " indices " +
                 ShapeToString(c.indices));
    const std::vector<float> x = Random(NumElements(c.data), 31);
    ModelBuilder mb(13);
    mb.Input("x", kF32, c.data);
    OutputAnyShape(mb, "y");
    mb.Int64Init("i", c.indices_shape, c.indices);
    ModelBuilder::IntAttr(mb.Node("Gather", {"x", "i"}, {"y"}), "axis", c.axis);
    auto want = RunReference(mb, {Input("x", x, c.data)});
    ASSERT_EQ(want.size(), 1u);
    cuda_math::GatherAxisShape s;
    ASSERT_TRUE(cuda_math::MakeGatherAxisShape(c.data, c.axis, NumElements(c.indices_shape), &s));
    ExpectClose(GatherOnHost(x, c.indices, s, std::nanf("")), want[0], 0.f, 0.f);
  }
}

TEST(CudaGatherMathTest, Int64MatchesReference) {
  for (const GatherCase& c : kCases) {
    SCOPED_TRACE(ShapeToString(c.data) + " axis " + std::to_string(c.axis));
    std::vector<int64_t> x(static_cast<size_t>(NumElements(c.data)));
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<int64_t>(i) * 1000003 - (1LL << 40);
    ModelBuilder mb(13);
    mb.Int64Init("x", c.data, x);
    mb.Int64Init("i", c.indices_shape, c.indices);
    mb.OutputAnyShape("y", onnx::TensorProto::INT64);
    ModelBuilder::IntAttr(mb.Node("Gather", {"x", "i"}, {"y"}), "axis", c.axis);
    auto want = RunReference(mb, {});
    ASSERT_EQ(want.size(), 1u);
    cuda_math::GatherAxisShape s;
    ASSERT_TRUE(cuda_math::MakeGatherAxisShape(c.data, c.axis, NumElements(c.indices_shape), &s));
    const std::vector<int64_t> got =
        GatherOnHost(x, c.indices, s, std::numeric_limits<int64_t>::min());
    ASSERT_EQ(static_cast<int64_t>(got.size()), want[0].numel());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], want[0].data<int64_t>()[i]) << i;
  }
}

TEST(CudaGatherMathTest, OutOfRangeIndicesGiveZero) {
  // data [2, 5, 3] along axis 1: indices 5 and -6 are out of range.
  const std::vector<float> x = Random(30, 32, 1.f, 2.f);
  const std::vector<int64_t> indices = {5, -6, 2, -1, 1000000};
  cuda_math::GatherAxisShape s;
  ASSERT_TRUE(cuda_math::MakeGatherAxisShape({2, 5, 3}, 1, 5, &s));
  const std::vector<float> got = GatherOnHost(x, indices, s, std::nanf(""));
  ASSERT_EQ(got.size(), 30u);
  for (int64_t o = 0; o < 2; ++o)
    for (int64_t j = 0; j < 5; ++j)
      for (int64_t k = 0; k < 3; ++k) {
        const float v = got[(o * 5 + j) * 3 + k];
        if (j == 2 || j == 3)
          EXPECT_EQ(v, x[(o * 5 + (j == 2 ? 2 : 4)) * 3 + k]);
        else
          EXPECT_EQ(v, 0.f) << o << " " << j << " " << k;
      }
}

TEST(CudaGatherMathTest, ShapeHelperRejectsBadInput) {
  cuda_math::GatherAxisShape s;
  EXPECT_FALSE(cuda_math::MakeGatherAxisShape({}, 0, 1, &s));  // scalar data
  EXPECT_FALSE(cuda_math::MakeGatherAxisShape({2, 3}, 2, 1, &s));
  EXPECT_FALSE(cuda_math::MakeGatherAxisShape({2, 3}, -3, 1, &s));
  EXPECT_FALSE(cuda_math::MakeGatherAxisShape({2, 3}, 0, -1, &s));
  ASSERT_TRUE(cuda_math::MakeGatherAxisShape({2, 3, 4}, -2, 6, &s));
  EXPECT_EQ(s.outer, 2);
  EXPECT_EQ(s.dim, 3);
  EXPECT_EQ(s.count, 6);
  EXPECT_EQ(s.inner, 4);
}

}  // namespace
}  // namespace kiln
