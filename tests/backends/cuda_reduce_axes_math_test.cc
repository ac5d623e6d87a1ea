// The CUDA Reduce* arithmetic (reduce_axes_math.h) run on the CPU over every output element, both
// ways the kernel can run it (the block path with the device's thread folds and tree replayed,
// wherever the reduced axes are contiguous; the per-output strided fold always), and compared with
// kiln's reference ReduceSum / Mean / Max / Min / SumSquare / L2 on one-node opset-13 graphs.
// Tolerance 1e-5 + 1e-5 * |want| (float accumulation against the reference's double). NaN,
// infinities and empty reductions (whose Mean is NaN) are covered.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "backends/cuda/kernels/reduce_axes_math.h"
#include "cuda_kernel_test_util.h"

namespace kiln {
namespace {

using cuda_math::ReduceKind;
using cuda_math::ReduceOp;
using namespace cuda_test;  // NOLINT(build/namespaces): test helpers

const std::pair<const char*, ReduceOp> kOps[] = {{"ReduceSum", ReduceOp::kSum},
                                                 {"ReduceMean", ReduceOp::kMean},
                                                 {"ReduceMax", ReduceOp::kMax},
                                                 {"ReduceMin", ReduceOp::kMin},
                                                 {"ReduceSumSquare", ReduceOp::kSumSquare},
                                                 {"ReduceL2", ReduceOp::kL2}};

// The pairwise tree of kernel_util.cuh's BlockReduce over per-thread partials.
float TreeOnHost(ReduceKind k, std::vector<float> partial) {
  for (size_t s = partial.size() / 2; s > 0; s >>= 1)
    for (size_t t = 0; t < s; ++t) partial[t] = cuda_math::Combine(k, partial[t], partial[t + s]);
  return partial[0];
}

// The block path (ReduceRowsKernel) for output o.
float RowsOnHost(ReduceOp op, const std::vector<float>& x, const cuda_math::ReduceAxesShape& s,
                 int64_t o) {
  constexpr int kT = cuda_math::kReduceThreads;
  const ReduceKind kind = cuda_math::FoldKind(op);
  const cuda_math::LoadReduced load{x.data() + cuda_math::ReduceRowBase(s, o), s.inner, op};
  std::vector<float> partial(kT), nan(kT);
  for (int t = 0; t < kT; ++t) {
    partial[t] = cuda_math::ReducePartial(kind, load, s.reduce, t, kT);
    nan[t] = cuda_math::NanOrZero(partial[t]);
  }
  float r = TreeOnHost(kind, partial);
  if (kind == ReduceKind::kMax) {
    const float n = TreeOnHost(ReduceKind::kSum, nan);
    if (std::isnan(n)) r = n;
  }
  return cuda_math::ReduceFinish(op, r, s.reduce);
}

// One opset-13 Reduce* node: ReduceSum takes the axes as input 1, the others as an attribute.
ModelBuilder ReduceModel(const std::string& op, const Shape& xs, const std::vector<int64_t>& axes,
                         int64_t keepdims) {
  ModelBuilder mb(13);
  mb.Input("x", kF32, xs);
  OutputAnyShape(mb, "y");
  const bool axes_input = op == "ReduceSum";
  if (axes_input) mb.Int64Init("axes", {static_cast<int64_t>(axes.size())}, axes);
  auto& n = mb.Node(
      op, axes_input ? std::vector<std::string>{"x", "axes"} : std::vector<std::string>{"x"},
      {"y"});
  if (!axes_input) ModelBuilder::IntsAttr(n, "axes", axes);
  ModelBuilder::IntAttr(n, "keepdims", keepdims);
  return mb;
}

struct ReduceCase {
  Shape x;
  std::vector<int64_t> axes;
  bool contiguous;
};

const ReduceCase kCases[] = {
    {{2, 3, 4, 5}, {0}, true},
    {{2, 3, 4, 5}, {1}, true},
    {{2, 3, 4, 5}, {3}, true},
    {{2, 3, 4, 5}, {-1, -2}, true},
    {{2, 3, 4, 5}, {0, 1, 2, 3}, true},
    {{2, 3, 4, 5}, {1, 3}, false},
    {{2, 3, 4, 5}, {0, 2}, false},
    {{2, 3, 4, 5}, {3, 0}, false},
    {{3, 700}, {1}, true},               // long rows: the block path
    {{300, 4}, {0}, true},               // long strided rows: the block path with inner 4
    {{2, 1, 5, 1, 3}, {1, 2, 3}, true},  // size-1 dims merge away
    {{2, 1, 5, 1, 3}, {1, 3}, true},     // only size-1 dims reduced: count 1
    {{2, 3, 2, 3, 2, 3}, {0, 2, 4}, false},
    {{2, 0, 3}, {1}, true},  // empty reduction: identities
    {{2, 0, 3}, {0}, true},  // empty output
};

TEST(CudaReduceAxesMathTest, MatchesReference) {
  for (const ReduceCase& c : kCases) {
    std::vector<float> x = Random(NumElements(c.x), 41, -3.f, 3.f);
    cuda_math::ReduceAxesShape s;
    ASSERT_TRUE(cuda_math::MakeReduceAxesShape(c.x, c.axes, &s));
    EXPECT_EQ(s.contiguous, c.contiguous) << ShapeToString(c.x) << " " << ShapeToString(c.axes);
    for (const auto& [name, op] : kOps)
      for (int keepdims : {0, 1}) {
        SCOPED_TRACE(std::string(name) + " " + ShapeToString(c.x) + " axes " +
                     ShapeToString(c.axes) + " keepdims " + std::to_string(keepdims));
        auto want = RunReference(ReduceModel(name, c.x, c.axes, keepdims), {Input("x", x, c.x)});
        ASSERT_EQ(want.size(), 1u);
        ASSERT_EQ(want[0].numel(), s.outputs);
        std::vector<float> strided(static_cast<size_t>(s.outputs), std::nanf(""));
        for (int64_t o = 0; o < s.outputs; ++o)
          strided[o] = cuda_math::StridedReduceAt(op, x.data(), s, o);
        ExpectClose(strided, want[0]);
        if (!s.contiguous) continue;
        std::vector<float> rows(static_cast<size_t>(s.outputs), std::nanf(""));
        for (int64_t o = 0; o < s.outputs; ++o) rows[o] = RowsOnHost(op, x, s, o);
        ExpectClose(rows, want[0]);
      }
  }
}

// NaN and infinities: Max and Min propagate NaN from any position, including a thread partial
// that the block tree's max would drop (position 300 of a 700-long row lands in thread 44, not in
// the tree's left operand at the last step).
TEST(CudaReduceAxesMathTest, NonFiniteMatchReference) {
  const Shape xs = {4, 700};
  std::vector<float> x = Random(NumElements(xs), 42);
  x[300] = std::nanf("");     // row 0: NaN
  x[700 + 5] = INFINITY;      // row 1: +inf
  x[1400 + 600] = -INFINITY;  // row 2: -inf
  x[2100 + 1] = INFINITY;     // row 3: +inf and -inf
  x[2100 + 699] = -INFINITY;
  for (const std::vector<int64_t>& axes : {std::vector<int64_t>{1}, std::vector<int64_t>{0}}) {
    cuda_math::ReduceAxesShape s;
    ASSERT_TRUE(cuda_math::MakeReduceAxesShape(xs, axes, &s));
    for (const auto& [name, op] : kOps) {
      SCOPED_TRACE(std::string(name) + " axes " + ShapeToString(axes));
      auto want = RunReference(ReduceModel(name, xs, axes, 1), {Input("x", x, xs)});
      ASSERT_EQ(want.size(), 1u);
      std::vector<float> strided, rows;
      for (int64_t o = 0; o < s.outputs; ++o) {
        strided.push_back(cuda_math::StridedReduceAt(op, x.data(), s, o));
        rows.push_back(RowsOnHost(op, x, s, o));
      }
      ExpectClose(strided, want[0]);
      ExpectClose(rows, want[0]);
    }
  }
}

TEST(CudaReduceAxesMathTest, ShapeHelper) {
  cuda_math::ReduceAxesShape s;
  EXPECT_FALSE(cuda_math::MakeReduceAxesShape({2, 3}, {}, &s));  // the caller copies
  EXPECT_FALSE(cuda_math::MakeReduceAxesShape({}, {}, &s));
  EXPECT_FALSE(cuda_math::MakeReduceAxesShape({2, 3}, {2}, &s));
  EXPECT_FALSE(cuda_math::MakeReduceAxesShape({2, 3}, {-3}, &s));
  EXPECT_FALSE(cuda_math::MakeReduceAxesShape({2, 3}, {1, -1}, &s));
  EXPECT_FALSE(cuda_math::MakeReduceAxesShape({1, 1, 1, 1, 1, 1, 1}, {0}, &s));
  ASSERT_TRUE(cuda_math::MakeReduceAxesShape({2, 3, 4, 5}, {1, 2}, &s));
  EXPECT_TRUE(s.contiguous);
  EXPECT_FALSE(s.block_per_output);  // 12 elements per output, inner 5: a thread per output
  EXPECT_EQ(s.outer, 2);
  EXPECT_EQ(s.reduce, 12);
  EXPECT_EQ(s.inner, 5);
  EXPECT_EQ(s.outputs, 10);
  ASSERT_TRUE(cuda_math::MakeReduceAxesShape({3, 700}, {1}, &s));
  EXPECT_TRUE(s.block_per_output);
  ASSERT_TRUE(cuda_math::MakeReduceAxesShape({2, 3, 4, 5}, {0, 2}, &s));
  EXPECT_FALSE(s.contiguous);
  EXPECT_FALSE(s.block_per_output);
  EXPECT_EQ(s.kept_rank, 2);
  EXPECT_EQ(s.reduced_rank, 2);
  EXPECT_EQ(s.count, 8);
}

}  // namespace
}  // namespace kiln
