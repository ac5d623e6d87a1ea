// --precision bf16 on oneDNN: the option itself, bf16 activations between convolutions, the
// squeeze-excite loops against oneDNN in bf16, and QuantizeLinear reading a bf16 convolution
// output. They skip on a CPU without AVX512-BF16 or AMX, for that reason only.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "onednn_test_util.h"

namespace kiln {
namespace {

using namespace onednn_test;  // NOLINT(build/namespaces): test helpers

// The bf16 tests skip only for the CPU's reason, never for another load failure.
TEST(Bf16SkipTest, OnlyTheCpusReasonSkips) {
  EXPECT_TRUE(NoBf16Here(Status(StatusCode::kUnsupported,
                                "precision bf16 needs a CPU with AVX512-BF16 or AMX; this one has "
                                "neither")));
  EXPECT_FALSE(NoBf16Here(Status(StatusCode::kInvalidModel, "node 'c': bad pads")));
  EXPECT_FALSE(NoBf16Here(Status(StatusCode::kUnsupported, "no kernel for Conv")));
}

// An 8-bit initializer from raw bytes.
void Int8Init(ModelBuilder& mb, const std::string& name, int type, const Shape& dims,
              const std::vector<uint8_t>& bytes) {
  onnx::TensorProto& t = mb.FloatInit(name, dims, {});
  t.set_data_type(type);
  t.set_raw_data(std::string(bytes.begin(), bytes.end()));
}

// QuantizeLinear after a float convolution under --precision bf16 (the first convolution an int8
// model keeps float): the loop reads the bfloat16 values where the convolution wrote them (no
// conversion to plain float32 first) and quantizes them exactly as the reference quantizes the
// same values widened to float32 (the convolution's output, also a graph output here).
TEST(OneDnnKernelTest, QuantizeLoopReadsBf16ConvolutionOutputs) {
  for (const bool u8 : {true, false}) {
    SCOPED_TRACE(u8 ? "uint8" : "int8");
    const int type = u8 ? onnx::TensorProto::UINT8 : onnx::TensorProto::INT8;
    ModelBuilder mb(13);
    mb.Input("x", kF32, {2, 3, 33, 33}).Output("c", kF32, {}).Output("q", type, {});
    mb.FloatInit("w", {32, 3, 3, 3}, Random(32 * 27, 80));
    mb.FloatInit("s", {}, {0.013f});
    Int8Init(mb, "z", type, {}, {0});
    auto& conv = mb.Node("Conv", {"x", "w"}, {"c"});
    ModelBuilder::IntsAttr(conv, "pads", {1, 1, 1, 1});
    ModelBuilder::IntsAttr(conv, "strides", {2, 2});
    mb.Node("QuantizeLinear", {"c", "s", "z"}, {"q"});
    SessionOptions opts;
    opts.precision = Precision::kBf16;
    auto s = Session::LoadFromBytes(mb.Bytes(), opts);
    if (!s.ok()) KILN_SKIP_IF_NO_BF16(s.status());
    const std::vector<NamedTensor> in = {{"x", RandomTensor({2, 3, 33, 33}, 81)}};
    auto plan = (*s)->DescribePlan(in);
    ASSERT_TRUE(plan.ok());
    const size_t q = plan->find("QuantizeLinear '");
    ASSERT_NE(q, std::string::npos) << *plan;
    EXPECT_NE(plan->find("cpu.quantizelinear.loop", q), std::string::npos) << *plan;
    EXPECT_EQ(plan->substr(0, q).find("to_plain"), std::string::npos)
        << "a conversion before the QuantizeLinear:\n"
        << *plan;
    EXPECT_NE(plan->find(":bf16"), std::string::npos) << *plan;
    std::vector<NamedTensor> out;
    ASSERT_TRUE((*s)->Run(in, &out).ok());
    ASSERT_EQ(out.size(), 2u);
    // The reference QuantizeLinear on the convolution's (bfloat16-valued) output.
    ModelBuilder qb(13);
    qb.Input("c", kF32, out[0].tensor.shape()).Output("q", type, {});
    qb.FloatInit("s", {}, {0.013f});
    Int8Init(qb, "z", type, {}, {0});
    qb.Node("QuantizeLinear", {"c", "s", "z"}, {"q"});
    SessionOptions ref;
    ref.reference_only = true;
    auto r = Session::LoadFromBytes(qb.Bytes(), ref);
    ASSERT_TRUE(r.ok());
    std::vector<NamedTensor> want;
    ASSERT_TRUE((*r)->Run({{"c", out[0].tensor}}, &want).ok());
    const auto n = static_cast<size_t>(want[0].tensor.numel());
    ASSERT_EQ(out[1].tensor.numel(), want[0].tensor.numel());
    EXPECT_EQ(std::memcmp(out[1].tensor.raw(), want[0].tensor.raw(), n), 0);
    int distinct = 0;
    std::vector<char> seen(256, 0);
    for (size_t i = 0; i < n; ++i) {
      const uint8_t b = static_cast<const uint8_t*>(out[1].tensor.raw())[i];
      distinct += !seen[b];
      seen[b] = 1;
    }
    EXPECT_GT(distinct, 50) << "the values should span much of the 8-bit range";
  }
}

TEST(OneDnnKernelTest, PrecisionOption) {
  ModelBuilder mb;
  mb.Input("x", kF32, {1, 16, 12, 12}).Output("y", kF32, {});
  mb.FloatInit("w1", {32, 16, 3, 3}, Random(32 * 16 * 9, 24));
  mb.FloatInit("w2", {16, 32, 1, 1}, Random(16 * 32, 25));
  ModelBuilder::IntsAttr(mb.Node("Conv", {"x", "w1"}, {"c"}), "pads", {1, 1, 1, 1});
  mb.Node("Relu", {"c"}, {"r"});
  mb.Node("Conv", {"r", "w2"}, {"y"});
  SessionOptions bad;
  bad.precision = Precision::kFp16;
  auto s = Session::LoadFromBytes(mb.Bytes(), bad);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("fp32 or bf16"), std::string::npos) << s.status().message();

  SessionOptions bf16;
  bf16.precision = Precision::kBf16;
  auto b = Session::LoadFromBytes(mb.Bytes(), bf16);
  if (!b.ok()) KILN_SKIP_IF_NO_BF16(b.status());  // a CPU without AVX512-BF16/AMX
  auto f = Session::LoadFromBytes(mb.Bytes());
  ASSERT_TRUE(f.ok());
  Tensor x = RandomTensor({1, 16, 12, 12}, 26);
  auto plan = (*b)->DescribePlan({{"x", x}});
  ASSERT_TRUE(plan.ok());
  EXPECT_NE(plan->find(":bf16"), std::string::npos) << *plan;  // activations stored as bf16
  std::vector<NamedTensor> yb, yf;
  ASSERT_TRUE((*b)->Run({{"x", x}}, &yb).ok());
  ASSERT_TRUE((*f)->Run({{"x", x}}, &yf).ok());
  // bf16 keeps 8 mantissa bits: relative error of a 144-term dot product stays within ~1e-2 of
  // the output scale; the fp32 output is float32 either way.
  double num = 0, den = 0, dot = 0, nb = 0;
  for (int64_t i = 0; i < yf[0].tensor.numel(); ++i) {
    double a = yf[0].tensor.data<float>()[i], c = yb[0].tensor.data<float>()[i];
    num += (a - c) * (a - c);
    den += a * a;
    dot += a * c;
    nb += c * c;
  }
  EXPECT_LT(std::sqrt(num / den), 2e-2);
  EXPECT_GT(dot / std::sqrt(den * nb), 0.999);
}

// Under --precision bf16 the squeeze-excite loops read and write bf16 between convolutions:
// the same model with them and with oneDNN's binary/pooling kernels (KILN_DISABLE_KERNELS), both
// in bf16, at batch 1; at batch 3 they decline and oneDNN runs both plans. Both round
// the product to bf16 the same way; the sums differ only in order, so the outputs agree to
// bf16's precision: |a - b| <= 1e-2 * (1 + |b|).
TEST(OneDnnKernelTest, ChannelOpsInBf16MatchOneDnn) {
  for (int64_t batch : {1, 3}) {
    const Shape xs = {batch, 24, 16, 16};
    ModelBuilder mb;
    mb.Input("x", kF32, xs).Output("y", kF32, {});
    mb.FloatInit("w1", {24, 24, 1, 1}, Random(24 * 24, 50));
    mb.FloatInit("w2", {24, 24, 1, 1}, Random(24 * 24, 51));
    mb.FloatInit("w3", {16, 24, 1, 1}, Random(16 * 24, 52));
    mb.Node("Conv", {"x", "w1"}, {"c"});
    mb.Node("GlobalAveragePool", {"c"}, {"g"});
    mb.Node("Conv", {"g", "w2"}, {"f"});
    mb.Node("Sigmoid", {"f"}, {"s"});
    mb.Node("Mul", {"c", "s"}, {"m"});
    mb.Node("Conv", {"m", "w3"}, {"y"});
    SessionOptions opts;
    opts.precision = Precision::kBf16;
    auto ours = Session::LoadFromBytes(mb.Bytes(), opts);
    if (!ours.ok()) KILN_SKIP_IF_NO_BF16(ours.status());
    const std::vector<NamedTensor> in = {{"x", RandomTensor(xs, 53)}};
    auto plan = (*ours)->DescribePlan(in);
    ASSERT_TRUE(plan.ok());
    // Above batch 1, bf16 stays with oneDNN (measured faster there).
    const bool loops = batch == 1;
    EXPECT_EQ(plan->find("cpu.mul.channel_scale") != std::string::npos, loops) << *plan;
    EXPECT_EQ(plan->find("cpu.globalaveragepool.channels") != std::string::npos, loops) << *plan;
    EXPECT_NE(plan->find(":bf16"), std::string::npos) << *plan;
    ASSERT_EQ(
        setenv("KILN_DISABLE_KERNELS", "cpu.mul.channel_scale,cpu.globalaveragepool.channels", 1),
        0);
    auto theirs = Session::LoadFromBytes(mb.Bytes(), opts);
    ASSERT_TRUE(theirs.ok());
    auto plan2 = (*theirs)->DescribePlan(in);
    unsetenv("KILN_DISABLE_KERNELS");
    ASSERT_TRUE(plan2.ok());
    EXPECT_NE(plan2->find("cpu.mul.onednn"), std::string::npos) << *plan2;
    std::vector<NamedTensor> a, b;
    ASSERT_TRUE((*ours)->Run(in, &a).ok());
    ASSERT_TRUE((*theirs)->Run(in, &b).ok());
    const float* pa = a[0].tensor.data<float>();
    const float* pb = b[0].tensor.data<float>();
    int bad = 0;
    for (int64_t i = 0; i < a[0].tensor.numel(); ++i)
      if (!(std::fabs(pa[i] - pb[i]) <= 1e-2f * (1.f + std::fabs(pb[i]))) && bad++ < 3)
        ADD_FAILURE() << "batch " << batch << " [" << i << "]: " << pa[i] << " vs " << pb[i];
    EXPECT_EQ(bad, 0);
  }
}

}  // namespace
}  // namespace kiln
