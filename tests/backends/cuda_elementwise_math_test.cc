// The CUDA elementwise kernels' arithmetic (activation_math.h, binary_math.h, epilogue_math.h)
// run on the CPU over every output element and compared with kiln's reference kernels: one-node
// ONNX graphs for the ONNX ops, the fused ops' reference (FusedConv, FusedMatMul, and
// ops::ApplyActivation for Silu/Gelu) for the epilogues. Tolerance 1e-5 + 1e-5 * |want|; on the
// GPU, expf/erff/tanhf/logf/powf are within 1 to 4 ulp of the host functions tested here.
#include <gtest/gtest.h>

#include <limits>

#include "backends/cuda/kernels/activation_math.h"
#include "backends/cuda/kernels/binary_math.h"
#include "backends/cuda/kernels/epilogue_math.h"
#include "cuda_kernel_test_util.h"
#include "ops/activation.h"

namespace kiln {
namespace {

using cuda_math::Activation;
using cuda_math::BinaryOp;
using namespace cuda_test;  // NOLINT(build/namespaces): test helpers

// Inputs with special values: zeros of both signs, large magnitudes and a dense sweep.
std::vector<float> UnaryInputs(bool positive) {
  std::vector<float> v = positive ? Random(301, 1, 0.01f, 9.f) : Random(301, 1, -9.f, 9.f);
  for (float x : {0.f, -0.f, 1e-7f, -1e-7f, 30.f, -30.f, 88.f, -100.f})
    if (!positive || x > 0.f) v.push_back(x);
  return v;
}

struct UnaryCase {
  std::string op;
  Activation act;
  float alpha, beta;
  bool positive;  // domain of Log / Sqrt
};

TEST(CudaElementwiseMathTest, UnaryMatchesOnnxOps) {
  const std::vector<UnaryCase> cases = {
      {"Relu", Activation::kRelu, 0, 0, false},
      {"Sigmoid", Activation::kSigmoid, 0, 0, false},
      {"HardSwish", Activation::kHardSwish, 0, 0, false},
      {"Clip", Activation::kClip, -0.5f, 2.5f, false},
      {"LeakyRelu", Activation::kLeakyRelu, 0.07f, 0, false},
      {"HardSigmoid", Activation::kHardSigmoid, 0.3f, 0.45f, false},
      {"Tanh", Activation::kTanh, 0, 0, false},
      {"Erf", Activation::kErf, 0, 0, false},
      {"Exp", Activation::kExp, 0, 0, false},
      {"Log", Activation::kLog, 0, 0, true},
      {"Sqrt", Activation::kSqrt, 0, 0, true},
      {"Neg", Activation::kNeg, 0, 0, false},
      {"Abs", Activation::kAbs, 0, 0, false},
      {"Reciprocal", Activation::kReciprocal, 0, 0, false},
      {"Identity", Activation::kNone, 0, 0, false},
  };
  for (const UnaryCase& c : cases) {
    SCOPED_TRACE(c.op);
    const std::vector<float> x = UnaryInputs(c.positive);
    const Shape shape = {static_cast<int64_t>(x.size())};
    ModelBuilder mb(17);
    mb.Input("x", kF32, shape);
    OutputAnyShape(mb, "y");
    std::vector<std::string> inputs = {"x"};
    if (c.op == "Clip") {
      mb.FloatInit("lo", {}, {c.alpha});
      mb.FloatInit("hi", {}, {c.beta});
      inputs = {"x", "lo", "hi"};
    }
    auto& node = mb.Node(c.op, inputs, {"y"});
    if (c.op == "LeakyRelu") FloatAttr(node, "alpha", c.alpha);
    if (c.op == "HardSigmoid") {
      FloatAttr(node, "alpha", c.alpha);
      FloatAttr(node, "beta", c.beta);
    }
    auto want = RunReference(mb, {Input("x", x, shape)});
    ASSERT_EQ(want.size(), 1u);
    std::vector<float> got(x.size());
    for (size_t i = 0; i < x.size(); ++i) got[i] = cuda_math::Apply(c.act, x[i], c.alpha, c.beta);
    ExpectClose(got, want[0]);
  }
}

// The fused-activation kinds, against the fused ops' reference loop (Silu and Gelu have no ONNX
// op in kiln's opset range).
struct FusedKind {
  ops::ActivationKind kind;
  Activation act;
  float alpha, beta;
};
const FusedKind kFusedKinds[] = {
    {ops::ActivationKind::kNone, Activation::kNone, 0, 0},
    {ops::ActivationKind::kRelu, Activation::kRelu, 0, 0},
    {ops::ActivationKind::kClip, Activation::kClip, -0.4f, 0.6f},
    {ops::ActivationKind::kLeakyRelu, Activation::kLeakyRelu, 0.1f, 0},
    {ops::ActivationKind::kSigmoid, Activation::kSigmoid, 0, 0},
    {ops::ActivationKind::kHardSigmoid, Activation::kHardSigmoid, 0.3f, 0.4f},
    {ops::ActivationKind::kHardSwish, Activation::kHardSwish, 0, 0},
    {ops::ActivationKind::kTanh, Activation::kTanh, 0, 0},
    {ops::ActivationKind::kSilu, Activation::kSilu, 0, 0},
    {ops::ActivationKind::kGelu, Activation::kGelu, 0, 0},
    {ops::ActivationKind::kGeluTanh, Activation::kGeluTanh, 0, 0},
    {ops::ActivationKind::kElu, Activation::kElu, 0.7f, 0},
};

TEST(CudaElementwiseMathTest, FusedActivationsMatchReference) {
  for (const FusedKind& k : kFusedKinds) {
    SCOPED_TRACE(ops::ActivationName(k.kind));
    std::vector<float> want = UnaryInputs(false);
    std::vector<float> got(want.size());
    for (size_t i = 0; i < want.size(); ++i)
      got[i] = cuda_math::Apply(k.act, want[i], k.alpha, k.beta);
    ops::ApplyActivation({k.kind, k.alpha, k.beta}, want.data(), static_cast<int64_t>(want.size()));
    ExpectClose(got, Tensor::FromVector<float>(want, {static_cast<int64_t>(want.size())}));
  }
}

struct BinaryCase {
  Shape a, b;
};

TEST(CudaElementwiseMathTest, BroadcastBinaryMatchesOnnxOps) {
  const std::vector<BinaryCase> shapes = {
      {{2, 3, 4, 5}, {2, 3, 4, 5}},              // same shape: merged to rank 1
      {{2, 3, 4, 5}, {}},                        // scalar
      {{1}, {3, 1, 5}},                          // rank mismatch, size-1
      {{2, 3, 4, 5}, {1, 3, 1, 1}},              // per-channel
      {{1, 3, 1, 1}, {2, 3, 4, 5}},              // broadcast operand first
      {{4, 5}, {2, 3, 4, 5}},                    // rank mismatch
      {{2, 1, 4, 1}, {3, 1, 5}},                 // both broadcast
      {{7, 1}, {1, 9}},                          // outer product
      {{2, 1, 3, 1, 2, 1}, {1, 4, 1, 5, 1, 3}},  // rank 6 after merging
      {{1, 1, 1}, {1, 1}},                       // single element
  };
  const std::vector<std::pair<std::string, BinaryOp>> ops = {
      {"Add", BinaryOp::kAdd}, {"Sub", BinaryOp::kSub}, {"Mul", BinaryOp::kMul},
      {"Div", BinaryOp::kDiv}, {"Pow", BinaryOp::kPow}, {"Max", BinaryOp::kMax},
      {"Min", BinaryOp::kMin}};
  for (const auto& [name, op] : ops) {
    for (const BinaryCase& c : shapes) {
      SCOPED_TRACE(name + " " + ShapeToString(c.a) + " " + ShapeToString(c.b));
      const bool pow = op == BinaryOp::kPow;
      std::vector<float> a = Random(NumElements(c.a), 2, pow ? 0.2f : -3.f, 3.f);
      std::vector<float> b = Random(NumElements(c.b), 3, pow ? -2.f : 0.5f, 2.f);
      if (!pow)  // Div's divisor stays away from 0; the others see both signs
        for (size_t i = 0; i < b.size(); i += 2) b[i] = -b[i];
      ModelBuilder mb(17);
      mb.Input("a", kF32, c.a).Input("b", kF32, c.b);
      OutputAnyShape(mb, "y");
      mb.Node(name, {"a", "b"}, {"y"});
      auto want = RunReference(mb, {Input("a", a, c.a), Input("b", b, c.b)});
      ASSERT_EQ(want.size(), 1u);
      cuda_math::BroadcastIndex index;
      ASSERT_TRUE(cuda_math::MakeBroadcastIndex(c.a, c.b, want[0].shape(), &index));
      const int64_t n = cuda_math::OutputElements(index);
      ASSERT_EQ(n, want[0].numel());
      std::vector<float> got(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        int64_t ia, ib;
        cuda_math::BroadcastOffsets(index, i, &ia, &ib);
        ASSERT_TRUE(ia >= 0 && ia < static_cast<int64_t>(a.size()) && ib >= 0 &&
                    ib < static_cast<int64_t>(b.size()));
        got[i] = cuda_math::ApplyBinary(op, a[ia], b[ib]);
      }
      ExpectClose(got, want[0], 1e-5f, pow ? 2e-5f : 1e-5f);
    }
  }
}

TEST(CudaElementwiseMathTest, BroadcastIndexMergesAndRejects) {
  cuda_math::BroadcastIndex index;
  ASSERT_TRUE(cuda_math::MakeBroadcastIndex({2, 3, 4}, {2, 3, 4}, {2, 3, 4}, &index));
  EXPECT_EQ(index.rank, 1);  // the flat fast path
  EXPECT_EQ(index.a_strides[0], 1);
  ASSERT_TRUE(cuda_math::MakeBroadcastIndex({2, 3, 4}, {1}, {2, 3, 4}, &index));
  EXPECT_EQ(index.rank, 1);
  EXPECT_EQ(index.b_strides[0], 0);
  ASSERT_TRUE(cuda_math::MakeBroadcastIndex({2, 3, 4, 5}, {3, 1, 1}, {2, 3, 4, 5}, &index));
  EXPECT_EQ(index.rank, 3);  // [2][3][20]
  EXPECT_FALSE(cuda_math::MakeBroadcastIndex({3, 4}, {2, 4}, {3, 4}, &index));
  EXPECT_FALSE(cuda_math::MakeBroadcastIndex({2, 3, 4}, {3, 4}, {3, 4}, &index));
  EXPECT_FALSE(cuda_math::MakeBroadcastIndex({2, 1, 2, 1, 2, 1, 2}, {1, 2, 1, 2, 1, 2, 1},
                                             {2, 2, 2, 2, 2, 2, 2}, &index));  // rank 7
}

// Conv (no bias) followed by the epilogue equals kiln.FusedConv's reference.
TEST(CudaElementwiseMathTest, ConvEpilogueMatchesFusedConv) {
  const Shape xs = {2, 5, 7, 9}, ys = {2, 6, 7, 9};
  const std::vector<float> x = Random(NumElements(xs), 4), z = Random(NumElements(ys), 5);
  const std::vector<float> bias = Random(6, 6);
  for (int has_bias = 0; has_bias < 2; ++has_bias) {
    for (int has_z = 0; has_z < 2; ++has_z) {
      for (const FusedKind& k : kFusedKinds) {
        SCOPED_TRACE(std::string(ops::ActivationName(k.kind)) + " bias " +
                     std::to_string(has_bias) + " z " + std::to_string(has_z));
        ModelBuilder mb(17);
        mb.ImportDomain("kiln", 1);
        mb.Input("x", kF32, xs).Input("z", kF32, ys);
        OutputAnyShape(mb, "c");
        OutputAnyShape(mb, "y");
        mb.FloatInit("w", {6, 5, 3, 3}, Random(6 * 5 * 9, 7));
        mb.FloatInit("b", {6}, bias);
        auto& conv = mb.Node("Conv", {"x", "w"}, {"c"});
        ModelBuilder::IntsAttr(conv, "pads", {1, 1, 1, 1});
        std::vector<std::string> ins = {"x", "w", has_bias ? "b" : ""};
        if (has_z) ins.push_back("z");
        auto& fused = mb.Node("FusedConv", ins, {"y"}, "fused", "kiln");
        ModelBuilder::IntsAttr(fused, "pads", {1, 1, 1, 1});
        StringAttr(fused, "activation", ops::ActivationName(k.kind));
        FloatAttr(fused, "activation_alpha", k.alpha);
        FloatAttr(fused, "activation_beta", k.beta);
        auto out = RunReference(mb, {Input("x", x, xs), Input("z", z, ys)});
        ASSERT_EQ(out.size(), 2u);
        const float* c = out[0].data<float>();
        const cuda_math::EpilogueParams p{k.act, k.alpha, k.beta};
        std::vector<float> got(static_cast<size_t>(out[0].numel()));
        for (int64_t i = 0; i < out[0].numel(); ++i)
          got[i] = cuda_math::ConvEpilogueAt(c[i], has_bias ? bias.data() : nullptr,
                                             has_z ? z.data() : nullptr, i,
                                             cuda_math::ChannelOf(i, 6, 7 * 9), p);
        ExpectClose(got, out[1]);
      }
    }
  }
}

// MatMul followed by the row-bias epilogue equals kiln.FusedMatMul's reference (bias required
// there); without bias it equals MatMul plus the fused activation.
TEST(CudaElementwiseMathTest, RowBiasEpilogueMatchesFusedMatMul) {
  const Shape as = {3, 5, 7};
  const std::vector<float> a = Random(NumElements(as), 8), bias = Random(11, 9);
  for (int has_bias = 0; has_bias < 2; ++has_bias) {
    for (const FusedKind& k : kFusedKinds) {
      SCOPED_TRACE(std::string(ops::ActivationName(k.kind)) + " bias " + std::to_string(has_bias));
      ModelBuilder mb(17);
      mb.ImportDomain("kiln", 1);
      mb.Input("a", kF32, as);
      OutputAnyShape(mb, "m");
      OutputAnyShape(mb, "y");
      mb.FloatInit("b", {7, 11}, Random(77, 10));
      mb.FloatInit("bias", {11}, bias);
      mb.Node("MatMul", {"a", "b"}, {"m"});
      auto& fused = mb.Node("FusedMatMul", {"a", "b", "bias"}, {"y"}, "fused", "kiln");
      StringAttr(fused, "activation", ops::ActivationName(k.kind));
      FloatAttr(fused, "activation_alpha", k.alpha);
      FloatAttr(fused, "activation_beta", k.beta);
      auto out = RunReference(mb, {Input("a", a, as)});
      ASSERT_EQ(out.size(), 2u);
      const int64_t n = out[0].numel();
      const float* m = out[0].data<float>();
      const cuda_math::EpilogueParams p{k.act, k.alpha, k.beta};
      std::vector<float> got(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i)
        got[i] = cuda_math::RowBiasEpilogueAt(m[i], has_bias ? bias.data() : nullptr, i, 11, p);
      if (has_bias) {
        ExpectClose(got, out[1]);
      } else {
        std::vector<float> want(m, m + n);
        ops::ApplyActivation({k.kind, k.alpha, k.beta}, want.data(), n);
        ExpectClose(got, Tensor::FromVector<float>(want, out[0].shape()));
      }
    }
  }
}

}  // namespace
}  // namespace kiln
