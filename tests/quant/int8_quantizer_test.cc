// INT8 calibration and the quantizer end to end (a float model in, a QDQ model out that loads,
// runs close to float and is executed by int8 kernels): calibration thresholds on known
// distributions, the symmetric weight quantizer, and the scales the quantizer shares (Concat,
// residual Add, MaxPool, Split/Resize/Reshape, AveragePool) or gives a zero point (SiLU).
#include <gtest/gtest.h>

#include "int8_test_util.h"

namespace kiln {
namespace {

using namespace int8_test;  // NOLINT(build/namespaces): test helpers

TEST(Calibration, ThresholdsOnKnownDistributions) {
  // 99,999 values uniform in [0, 1] and one outlier at 100.
  std::vector<float> x = Uniform(99999, 1, 0.f, 1.f);
  x.push_back(100.f);
  quant::TensorStats s;
  s.UpdateRange(x.data(), static_cast<int64_t>(x.size()));
  EXPECT_FLOAT_EQ(s.absmax(), 100.f);
  EXPECT_FLOAT_EQ(quant::Threshold(s, quant::Method::kMinMax, 0, 256), 100.f);
  s.BeginHistogram(2048);
  s.UpdateHistogram(x.data(), static_cast<int64_t>(x.size()));
  // The 99.99th percentile is the top of the uniform part: within one bin (100/2048) of 1.
  const float p = quant::Threshold(s, quant::Method::kPercentile, 99.99, 256);
  EXPECT_NEAR(p, 1.f, 100.f / 2048 + 1e-6f);
  // Entropy clips the outlier away: TensorRT's search starts at `levels` bins (256 of 2048 here,
  // 12.5), which is where the KL divergence is smallest for this mass.
  EXPECT_FLOAT_EQ(quant::Threshold(s, quant::Method::kEntropy, 0, 256), 256 * 100.f / 2048);
  // MSE weighs the one outlier's squared clipping error against the rounding error of the
  // 99,999 others: it clips, but much less (the minimum lies between).
  const float mse = quant::Threshold(s, quant::Method::kMse, 0, 256);
  EXPECT_GT(mse, 12.5f);
  EXPECT_LT(mse, 100.f);
  // NaN and infinity are counted and left out of the range.
  const float bad[] = {NAN, INFINITY, -3.f};
  s.UpdateRange(bad, 3);
  EXPECT_EQ(s.non_finite(), 2);
  EXPECT_FLOAT_EQ(s.min(), -3.f);
  EXPECT_FALSE(quant::ParseMethod("kl").ok());
}

// A Concat's readers, which decide whether its inputs may share its scale, are known only
// without subgraphs: a branch of an If may read the output without naming it.
TEST(Calibration, ConcatsAreListedWithTheirReadersOnlyWithoutSubgraphs) {
  for (bool with_if : {false, true}) {
    ModelBuilder mb(13);
    mb.Input("x", kF32, {1, 2, 4, 4})
        .Input("cond", onnx::TensorProto::BOOL, {})
        .OutputAnyShape("y", kF32);
    mb.FloatInit("w", {3, 4, 1, 1}, Uniform(12, 1));
    ModelBuilder::IntAttr(mb.Node("Concat", {"x", "x"}, {"cat"}, "join"), "axis", 1);
    mb.Node("Conv", {"cat", "w"}, {"y"}, "conv");
    if (with_if) {
      ModelBuilder::Subgraph branch;
      branch.Output("cat", kF32, {1, 4, 4, 4});
      auto& n = mb.Node("If", {"cond"}, {"z"}, "branch");
      ModelBuilder::GraphAttr(n, "then_branch", branch);
      ModelBuilder::GraphAttr(n, "else_branch", branch);
    }
    auto info = InspectBytes(mb.Bytes());
    ASSERT_TRUE(info.ok()) << info.status().ToString();
    if (with_if) {
      EXPECT_TRUE(info->concats.empty());
      continue;
    }
    ASSERT_EQ(info->concats.size(), 1u);
    EXPECT_EQ(info->concats[0].node, "join");
    EXPECT_EQ(info->concats[0].inputs, (std::vector<std::string>{"x", "x"}));
    EXPECT_EQ(info->concats[0].readers, (std::vector<std::pair<std::string, int>>{{"conv", 0}}));
  }
}

TEST(Calibration, SymmetricWeightsPerChannel) {
  // Channel 0 spans [-2, 2], channel 1 [-0.01, 0.01], channel 2 is all zero ([3, 4] weights,
  // channels along axis 0).
  std::vector<float> w = {2.f, -1.f, 0.5f, -2.f, 0.01f, -0.005f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  std::vector<int8_t> q;
  std::vector<float> scales;
  quant::QuantizeWeightsSymmetric(w.data(), 12, 3, 4, &q, &scales);
  ASSERT_EQ(scales.size(), 3u);
  EXPECT_FLOAT_EQ(scales[0], 2.f / 127);
  EXPECT_FLOAT_EQ(scales[1], 0.01f / 127);
  EXPECT_FLOAT_EQ(scales[2], 1.f);  // an empty channel gets scale 1, not 0
  for (int i = 0; i < 12; ++i) {
    EXPECT_LE(std::fabs(q[i] * scales[i / 4] - w[i]), scales[i / 4] / 2 + 1e-7f) << i;
    EXPECT_GE(q[i], -127);
  }
  EXPECT_EQ(q[0], 127);
  EXPECT_EQ(q[3], -127);
  EXPECT_EQ(q[4], 127);
}

TEST_F(QuantizerTest, WritesAQdqModelThatRunsCloseToFloatOnInt8Kernels) {
  QuantizeOptions o;
  o.method = "minmax";
  o.quantize_all = true;
  const std::string out = (dir_ / "cnn.int8.onnx").string();
  auto s = Quantize(o, out);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->samples, 32);
  EXPECT_EQ(s->quantized_nodes, (std::vector<std::string>{"conv1", "conv2", "fc"}));
  EXPECT_TRUE(s->float_nodes.empty());
  ASSERT_EQ(s->activations.size(), 3u);
  EXPECT_EQ(s->activations[0].dtype, "int8");   // x has negative values
  EXPECT_EQ(s->activations[1].dtype, "uint8");  // after Relu
  EXPECT_FLOAT_EQ(s->activations[1].scale, s->activations[1].max / 255);

  auto q = Session::Load(out);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  auto plan =
      (*q)->DescribePlan({{"x", Tensor::FromVector<float>(Uniform(400, 99), {1, 4, 10, 10})}});
  ASSERT_TRUE(plan.ok());
  EXPECT_NE(plan->find("cpu.qconv.onednn"), std::string::npos) << *plan;
  EXPECT_NE(plan->find("cpu.qmatmul.onednn"), std::string::npos) << *plan;
  EXPECT_EQ(plan->find("DequantizeLinear '"), std::string::npos)
      << "every dequantized input should run in an int8 kernel:\n"
      << *plan;
  EXPECT_GT(ErrorAgainstFloat(out), 0.0)
      << "the int8 model computed exactly float's outputs: was it quantized?";
}

// Two convolutions (+Relu) joined by a Concat that only a third convolution reads: the Concat's
// inputs get its output's scale, so the first two write uint8, the Concat joins uint8 and no
// QuantizeLinear or DequantizeLinear is left to run. The values the third convolution sees are
// unchanged: on the reference kernels both models give the same outputs, bit for bit.
TEST_F(QuantizerTest, ConcatInputsShareTheOutputsScale) {
  {
    ModelBuilder mb(13);
    mb.Input("x", kF32, {-1, 4, 10, 10}).Output("y", kF32, {-1, 5});
    mb.FloatInit("w1", {8, 4, 3, 3}, Uniform(8 * 4 * 9, 2, -0.5f, 0.5f));
    mb.FloatInit("w2", {6, 4, 1, 1}, Uniform(24, 3, -0.2f, 0.2f));  // a narrower range
    mb.FloatInit("w4", {8, 14, 1, 1}, Uniform(8 * 14, 4, -0.5f, 0.5f));
    mb.FloatInit("w3", {5, 8}, Uniform(40, 5, -0.5f, 0.5f));
    ModelBuilder::IntsAttr(mb.Node("Conv", {"x", "w1"}, {"c1"}, "conv1"), "pads", {1, 1, 1, 1});
    mb.Node("Relu", {"c1"}, {"r1"});
    mb.Node("Conv", {"x", "w2"}, {"c2"}, "conv2");
    mb.Node("Relu", {"c2"}, {"r2"});
    ModelBuilder::IntAttr(mb.Node("Concat", {"r1", "r2"}, {"cat"}, "join"), "axis", 1);
    mb.Node("Conv", {"cat", "w4"}, {"c4"}, "conv4");
    mb.Node("Relu", {"c4"}, {"r4"});
    std::ofstream(model_, std::ios::binary | std::ios::trunc) << PoolAndGemm(mb, "r4");
  }
  const Tensor x = Tensor::FromVector<float>(Uniform(2 * 400, 41), {2, 4, 10, 10});
  std::vector<Tensor> ref_out, fast_out;
  std::vector<std::string> plans;
  for (bool share : {true, false}) {
    SCOPED_TRACE(share ? "shared" : "not shared");
    const std::string out = (dir_ / (share ? "shared.onnx" : "apart.onnx")).string();
    auto s = QuantizeAll(share, out);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    EXPECT_EQ(s->shared_concats, share ? 1 : 0);
    Tensor want, got;
    std::string plan;
    RunModelRefAndFast(out, x, &want, &got, &plan);
    if (HasFatalFailure()) return;
    ref_out.push_back(want);
    fast_out.push_back(got);
    plans.push_back(plan);
  }
  ASSERT_EQ(ref_out.size(), 2u);
  for (int64_t i = 0; i < ref_out[0].numel(); ++i)
    ASSERT_EQ(ref_out[0].data<float>()[i], ref_out[1].data<float>()[i]) << "[" << i << "]";
  // The fast kernels too, up to where oneDNN's requantization inside the convolutions and the
  // QuantizeLinear loop round a value at a step's midpoint differently.
  const auto [err, ref] = MaxAbsError(fast_out[1], fast_out[0]);
  EXPECT_LE(err, 0.01 * ref);
  // The convolutions write uint8 in oneDNN's layout, which the Concat joins as it is.
  EXPECT_NE(plans[0].find("Concat 'join' -> cpu.concat.onednn uint8[2,14,10,10]@acdb"),
            std::string::npos)
      << plans[0];
  EXPECT_EQ(plans[0].find("to_plain"), std::string::npos) << plans[0];
  for (const char* gone :
       {"r1_QuantizeLinear", "r2_QuantizeLinear", "cat_QuantizeLinear", "DequantizeLinear '"})
    EXPECT_EQ(plans[0].find(gone), std::string::npos) << gone << "\n" << plans[0];
  // Without sharing, the Concat joins float and its output is quantized by a loop.
  EXPECT_NE(plans[1].find("Concat 'join' -> cpu.concat.onednn float32"), std::string::npos)
      << plans[1];
  EXPECT_NE(plans[1].find("cat_QuantizeLinear"), std::string::npos) << plans[1];
}

// Residual Adds after quantized convolutions get both inputs quantized (quantize_adds, the
// default): the first block's convolution, sum and Relu become one QConvAdd writing uint8; the
// last block's Add (its sum goes to the pooling, float) is quantized too, so the first block's
// result has no float reader left. Without it (or with --keep-float Add) the convolutions add
// the float residual. Both models against float and against their own QDQ arithmetic.
TEST_F(QuantizerTest, ResidualAddsKeepTheStreamInt8) {
  {
    ModelBuilder mb(13);
    mb.Input("x", kF32, {-1, 4, 10, 10}).Output("y", kF32, {-1, 5});
    mb.FloatInit("w1", {8, 4, 3, 3}, Uniform(8 * 4 * 9, 2, -0.5f, 0.5f));
    mb.FloatInit("w2", {8, 8, 3, 3}, Uniform(8 * 8 * 9, 3, -0.3f, 0.3f));
    mb.FloatInit("w4", {8, 8, 1, 1}, Uniform(64, 4, -0.5f, 0.5f));
    mb.FloatInit("w5", {8, 8, 3, 3}, Uniform(8 * 8 * 9, 6, -0.3f, 0.3f));
    mb.FloatInit("w3", {5, 8}, Uniform(40, 5, -0.5f, 0.5f));
    ModelBuilder::IntsAttr(mb.Node("Conv", {"x", "w1"}, {"c1"}, "conv1"), "pads", {1, 1, 1, 1});
    mb.Node("Relu", {"c1"}, {"r1"});
    ModelBuilder::IntsAttr(mb.Node("Conv", {"r1", "w2"}, {"c2"}, "conv2"), "pads", {1, 1, 1, 1});
    mb.Node("Relu", {"c2"}, {"r2"});
    mb.Node("Conv", {"r2", "w4"}, {"c4"}, "conv4");
    mb.Node("Add", {"c4", "r1"}, {"a1"}, "add1");
    mb.Node("Relu", {"a1"}, {"s1"});
    ModelBuilder::IntsAttr(mb.Node("Conv", {"s1", "w5"}, {"c5"}, "conv5"), "pads", {1, 1, 1, 1});
    mb.Node("Add", {"c5", "s1"}, {"a2"}, "add2");
    mb.Node("Relu", {"a2"}, {"s2"});
    std::ofstream(model_, std::ios::binary | std::ios::trunc) << PoolAndGemm(mb, "s2");
  }
  const Tensor x = Tensor::FromVector<float>(Uniform(4 * 400, 43), {4, 4, 10, 10});
  auto fp = Session::Load(model_);
  ASSERT_TRUE(fp.ok());
  std::vector<NamedTensor> want;
  ASSERT_TRUE((*fp)->Run({{"x", x}}, &want).ok());
  struct Variant {
    const char* name;
    bool adds;
    std::vector<std::string> keep;
    int quantized_adds;
  };
  for (const Variant& v : {Variant{"adds", true, {}, 2}, Variant{"float adds", false, {}, 0},
                           Variant{"kept Add", true, {"Add"}, 0}}) {
    SCOPED_TRACE(v.name);
    QuantizeOptions o;
    o.method = "minmax";
    o.quantize_all = true;
    o.quantize_adds = v.adds;
    o.keep_float = v.keep;
    const std::string out = (dir_ / (std::string(v.name) + ".onnx")).string();
    auto s = Quantize(o, out);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    EXPECT_EQ(s->quantized_adds, v.quantized_adds);
    EXPECT_EQ(s->quantized_nodes.size(), 5u);
    std::unique_ptr<Session> ref, fast;
    LoadRefAndFast(out, &ref, &fast);
    if (HasFatalFailure()) return;
    std::vector<NamedTensor> exact, got;
    ASSERT_TRUE(ref->Run({{"x", x}}, &exact).ok());
    ASSERT_TRUE(fast->Run({{"x", x}}, &got).ok());
    auto plan = fast->DescribePlan({{"x", x}});
    ASSERT_TRUE(plan.ok());
    const bool fused = v.quantized_adds > 0;
    EXPECT_EQ(plan->find("QConvAdd 'conv4' -> cpu.qconvadd.onednn uint8") != std::string::npos,
              fused)
        << *plan;
    // With the Adds quantized, conv5 writes int8 and the last sum adds dequantized values;
    // without, conv4 and conv5 add the float residual as they write.
    EXPECT_EQ(plan->find("QConv 'conv5' -> cpu.qconv.onednn int8") != std::string::npos, fused)
        << *plan;
    EXPECT_EQ(plan->find("QConv 'conv4' -> cpu.qconv.onednn float32") != std::string::npos, !fused)
        << *plan;
    const auto [err, max_y] = MaxAbsError(want[0].tensor, got[0].tensor);
    EXPECT_LT(err, 0.05 * max_y) << "against float";
    // Without VNNI the int8 kernels' 7-bit weights add to the QDQ arithmetic's error (4.4 % of
    // max |y| with oneDNN capped to AVX2 on the AVX512-VNNI EPYC, 2026-11-29).
    const bool vnni = DescribeCpu().int8.find("no VNNI") == std::string::npos;
    const auto [apart, unused] = MaxAbsError(exact[0].tensor, got[0].tensor);
    EXPECT_LT(apart, (vnni ? 0.02 : 0.06) * max_y) << "against the QDQ arithmetic";
  }
}

// A MaxPool after a quantized convolution and its Relu takes its output's scale on its input:
// the convolution writes uint8 and the pooling runs on the 8-bit values (no QuantizeLinear loop
// after it). Exact: on the reference kernels the shared and unshared models agree bit for bit.
// Not shared when the convolution stays float (the QuantizeLinear would then run before the
// pooling, on four times the values).
TEST_F(QuantizerTest, MaxPoolAfterAQuantizedConvolutionPoolsTheQuantizedValues) {
  auto write_model = [&](bool relu_is_output) {
    ModelBuilder mb(13);
    mb.Input("x", kF32, {-1, 4, 10, 10}).Output("y", kF32, {-1, 5});
    if (relu_is_output) mb.Output("r1", kF32, {-1, 8, 10, 10});
    mb.FloatInit("w1", {8, 4, 3, 3}, Uniform(8 * 4 * 9, 2, -0.5f, 0.5f));
    mb.FloatInit("w2", {8, 8, 3, 3}, Uniform(8 * 8 * 9, 3, -0.3f, 0.3f));
    mb.FloatInit("w3", {5, 8}, Uniform(40, 5, -0.5f, 0.5f));
    ModelBuilder::IntsAttr(mb.Node("Conv", {"x", "w1"}, {"c1"}, "conv1"), "pads", {1, 1, 1, 1});
    mb.Node("Relu", {"c1"}, {"r1"});
    auto& pool = mb.Node("MaxPool", {"r1"}, {"p"}, "pool");
    ModelBuilder::IntsAttr(pool, "kernel_shape", {3, 3});
    ModelBuilder::IntsAttr(pool, "strides", {2, 2});
    ModelBuilder::IntsAttr(pool, "pads", {1, 1, 1, 1});
    ModelBuilder::IntsAttr(mb.Node("Conv", {"p", "w2"}, {"c2"}, "conv2"), "pads", {1, 1, 1, 1});
    mb.Node("Relu", {"c2"}, {"r2"});
    std::ofstream(model_, std::ios::binary | std::ios::trunc) << PoolAndGemm(mb, "r2");
  };
  const Tensor x = Tensor::FromVector<float>(Uniform(2 * 400, 47), {2, 4, 10, 10});
  struct Variant {
    const char* name;
    bool share;
    std::vector<std::string> keep;
    int pools;
    bool relu_is_output = false;  // the pooling's input has another reader (a graph output)
  };
  std::vector<Tensor> exact;
  for (const Variant& v :
       {Variant{"shared", true, {}, 1}, Variant{"apart", false, {}, 0},
        Variant{"float conv1", true, {"conv1"}, 0}, Variant{"read twice", true, {}, 0, true}}) {
    SCOPED_TRACE(v.name);
    write_model(v.relu_is_output);
    QuantizeOptions o;
    o.method = "minmax";
    o.quantize_all = true;
    o.share_concat_scales = v.share;
    o.keep_float = v.keep;
    const std::string out = (dir_ / (std::string(v.name) + ".onnx")).string();
    auto s = Quantize(o, out);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    EXPECT_EQ(s->shared_pools, v.pools);
    Tensor want, got;
    std::string plan;
    RunModelRefAndFast(out, x, &want, &got, &plan);
    if (HasFatalFailure()) return;
    exact.push_back(want);
    EXPECT_EQ(plan.find("MaxPool 'pool' -> cpu.maxpool.onednn uint8") != std::string::npos,
              v.pools == 1)
        << plan;
    EXPECT_EQ(plan.find("p_QuantizeLinear") == std::string::npos, v.pools == 1) << plan;
    const auto [err, max_y] = MaxAbsError(want, got);
    EXPECT_LT(err, 0.02 * max_y) << "against the QDQ arithmetic";
  }
  ASSERT_EQ(exact.size(), 4u);
  for (int64_t i = 0; i < exact[0].numel(); ++i)
    ASSERT_EQ(exact[0].data<float>()[i], exact[1].data<float>()[i]) << "[" << i << "]";
}

// YOLOv8's blocks in small: SiLU convolutions, a Split whose halves feed a convolution, a
// residual Add and the Concat, an Upsample (Resize nearest), a MaxPool, a Transpose and two
// Reshapes. With shared scales the tensors they connect get one scale each group, every
// convolution writes 8-bit values, and the model runs with no QuantizeLinear or
// DequantizeLinear loop left and the moves on 8-bit values; its results stay those of its QDQ
// arithmetic (reference kernels) within int8 rounding.
TEST_F(QuantizerTest, SharedScalesCarryTheInt8StreamThroughSplitsResizesAndReshapes) {
  ModelBuilder mb(13);
  mb.Input("x", kF32, {-1, 4, 10, 10}).Output("y", kF32, {-1, 5});
  mb.FloatInit("w1", {8, 4, 3, 3}, Uniform(8 * 4 * 9, 2, -0.5f, 0.5f));
  mb.FloatInit("w2", {4, 4, 3, 3}, Uniform(4 * 4 * 9, 3, -0.4f, 0.4f));
  mb.FloatInit("w5", {8, 12, 1, 1}, Uniform(8 * 12, 4, -0.4f, 0.4f));
  mb.FloatInit("w4", {8, 8, 3, 3}, Uniform(8 * 8 * 9, 6, -0.3f, 0.3f));
  mb.FloatInit("w3", {5, 8}, Uniform(40, 5, -0.5f, 0.5f));
  auto silu_conv = [&](const std::string& x, const std::string& w, const std::string& y,
                       const std::string& name, int pad) {
    ModelBuilder::IntsAttr(mb.Node("Conv", {x, w}, {y + "_c"}, name), "pads", {pad, pad, pad, pad});
    mb.Node("Sigmoid", {y + "_c"}, {y + "_s"});
    mb.Node("Mul", {y + "_c", y + "_s"}, {y});
  };
  silu_conv("x", "w1", "s", "conv1", 1);
  mb.Int64Init("sizes", {2}, {4, 4});
  ModelBuilder::IntAttr(mb.Node("Split", {"s", "sizes"}, {"a", "b"}, "split"), "axis", 1);
  silu_conv("b", "w2", "c", "conv2", 1);
  mb.Node("Add", {"b", "c"}, {"d"}, "add");
  ModelBuilder::IntAttr(mb.Node("Concat", {"a", "b", "d"}, {"cat"}, "cat"), "axis", 1);
  silu_conv("cat", "w5", "e", "conv3", 0);
  mb.FloatInit("scales", {4}, {1.f, 1.f, 2.f, 2.f});
  mb.Node("Resize", {"e", "", "scales"}, {"r"}, "up");  // mode nearest (the default)
  auto& pool = mb.Node("MaxPool", {"r"}, {"p"}, "pool");
  ModelBuilder::IntsAttr(pool, "kernel_shape", {2, 2});
  ModelBuilder::IntsAttr(pool, "strides", {2, 2});
  ModelBuilder::IntsAttr(mb.Node("Transpose", {"p"}, {"t"}, "transpose"), "perm", {0, 1, 3, 2});
  mb.Int64Init("flat", {4}, {0, 2, 4, 100});
  mb.Int64Init("back", {4}, {0, 8, 10, 10});
  mb.Node("Reshape", {"t", "flat"}, {"u"}, "reshape1");
  mb.Node("Reshape", {"u", "back"}, {"v"}, "reshape2");
  ModelBuilder::IntsAttr(mb.Node("Conv", {"v", "w4"}, {"c4"}, "conv4"), "pads", {1, 1, 1, 1});
  mb.Node("Relu", {"c4"}, {"r4"});
  std::ofstream(model_, std::ios::binary | std::ios::trunc) << PoolAndGemm(mb, "r4");

  const Tensor x = Tensor::FromVector<float>(Uniform(2 * 400, 47), {2, 4, 10, 10});
  for (bool share : {true, false}) {
    SCOPED_TRACE(share ? "shared" : "apart");
    const std::string out = (dir_ / (share ? "shared.onnx" : "apart.onnx")).string();
    auto s = QuantizeAll(share, out);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    EXPECT_EQ(s->shared_concats, share ? 1 : 0);
    EXPECT_EQ(s->shared_pools, share ? 1 : 0);
    EXPECT_EQ(s->shared_moves, share ? 5 : 0);    // split, up, transpose, reshape1, reshape2
    EXPECT_EQ(s->quantized_adds, share ? 1 : 0);  // its sum goes to the Concat only
    EXPECT_EQ(s->widened_scales > 0, share);
    Tensor want, got;
    std::string text;
    RunModelRefAndFast(out, x, &want, &got, &text);
    if (HasFatalFailure()) return;
    const std::string* plan = &text;
    auto line = [&](const std::string& node) {
      const size_t at = plan->find("'" + node + "' -> ");
      return at == std::string::npos ? std::string() : plan->substr(at, plan->find('\n', at) - at);
    };
    for (const char* node : {"split", "up", "pool", "transpose", "reshape1", "reshape2", "cat"})
      // uint8 with a zero point after SiLU (asymmetric_activations), int8 elsewhere.
      EXPECT_EQ(line(node).find("int8[") != std::string::npos, share) << node << "\n" << *plan;
    // The residual sum after conv2's SiLU: one int8 convolution with the sum (QConvAdd).
    EXPECT_EQ(line("conv2").find("cpu.qconvadd.onednn") != std::string::npos, share) << *plan;
    if (share) {  // those of the model input and of the Gemm's (after the float pooling) only
      int loops = 0;
      for (size_t at = plan->find("QuantizeLinear '"); at != std::string::npos;
           at = plan->find("QuantizeLinear '", at + 1))
        ++loops;
      EXPECT_EQ(loops, 2) << *plan;
      EXPECT_EQ(plan->find("DequantizeLinear '"), std::string::npos) << *plan;
    }
    const auto [err, max_y] = MaxAbsError(want, got);
    EXPECT_LT(err, 0.02 * max_y) << "against the QDQ arithmetic";
  }
}

// An AveragePool between two quantized convolutions shares its input's scale when calibration
// saw its output span at least half its input's threshold (a dense ReLU output, here with a bias
// of 1): the convolution before writes 8-bit values, QAveragePool averages them and the next
// convolution reads them, with no QuantizeLinear loop between; results within int8 rounding of
// the QDQ arithmetic. A sparse ReLU output (bias -1), whose 3x3 means span far less than its
// maximum, keeps the pool float (its own scale after it). The global pool before the Gemm stays
// float either way (GlobalAveragePool takes no part in scale groups).
TEST_F(QuantizerTest, AveragePoolSharesItsInputScaleWhenItsOutputSpansHalfOfIt) {
  for (bool dense : {true, false}) {
    SCOPED_TRACE(dense ? "dense (bias 1)" : "sparse (bias -1)");
    ModelBuilder mb(13);
    mb.Input("x", kF32, {-1, 4, 10, 10}).Output("y", kF32, {-1, 5});
    mb.FloatInit("w1", {8, 4, 3, 3},
                 Uniform(8 * 4 * 9, 2, dense ? -0.1f : -0.5f, dense ? 0.1f : 0.5f));
    mb.FloatInit("b1", {8}, std::vector<float>(8, dense ? 1.f : -1.f));
    mb.FloatInit("w2", {8, 8, 1, 1}, Uniform(64, 4, -0.5f, 0.5f));
    mb.FloatInit("w3", {5, 8}, Uniform(40, 5, -0.5f, 0.5f));
    ModelBuilder::IntsAttr(mb.Node("Conv", {"x", "w1", "b1"}, {"c1"}, "conv1"), "pads",
                           {1, 1, 1, 1});
    mb.Node("Relu", {"c1"}, {"r1"});
    auto& pool = mb.Node("AveragePool", {"r1"}, {"p"}, "avg");
    ModelBuilder::IntsAttr(pool, "kernel_shape", {3, 3});
    ModelBuilder::IntsAttr(pool, "pads", {1, 1, 1, 1});
    mb.Node("Conv", {"p", "w2"}, {"c2"}, "conv2");
    mb.Node("Relu", {"c2"}, {"r2"});
    std::ofstream(model_, std::ios::binary | std::ios::trunc) << PoolAndGemm(mb, "r2");
    const std::string out = (dir_ / (dense ? "dense.onnx" : "sparse.onnx")).string();
    QuantizeOptions o;
    o.method = "minmax";
    o.quantize_all = true;
    auto s = Quantize(o, out);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    EXPECT_EQ(s->shared_averages, dense ? 1 : 0);
    const Tensor x = Tensor::FromVector<float>(Uniform(2 * 400, 47), {2, 4, 10, 10});
    Tensor want, got;
    std::string plan;
    RunModelRefAndFast(out, x, &want, &got, &plan);
    if (HasFatalFailure()) return;
    EXPECT_EQ(plan.find("cpu.qaveragepool.onednn") != std::string::npos, dense) << plan;
    if (dense) {  // the model input's and the Gemm's (after the float global pooling) only
      int loops = 0;
      for (size_t at = plan.find("QuantizeLinear '"); at != std::string::npos;
           at = plan.find("QuantizeLinear '", at + 1))
        ++loops;
      EXPECT_EQ(loops, 2) << plan;
    }
    const auto [err, max_y] = MaxAbsError(want, got);
    // Without VNNI the int8 kernels' 7-bit weights add to the error: 3.5 % (dense) and 3.2 %
    // (sparse) of max |y| on an AVX2-only AMD EPYC (2026-11-29).
    const bool vnni = DescribeCpu().int8.find("no VNNI") == std::string::npos;
    EXPECT_LT(err, (vnni ? 0.02 : 0.05) * max_y) << "against the QDQ arithmetic";
  }
}

// SiLU's output reaches -0.28 below zero and much further above: by default it is uint8 over
// [min, threshold] with a zero point (about twice the resolution of int8 symmetric), which the
// int8 convolution reading it takes as its source zero point; the model's error against float
// shrinks. --symmetric-activations keeps int8 symmetric.
TEST_F(QuantizerTest, SiluOutputsGetAZeroPointAndHalfTheError) {
  ModelBuilder mb(13);
  mb.Input("x", kF32, {-1, 4, 10, 10}).Output("y", kF32, {-1, 8, 10, 10});
  mb.FloatInit("w1", {8, 4, 3, 3}, Uniform(8 * 4 * 9, 2, -0.5f, 0.5f));
  mb.FloatInit("w2", {8, 8, 3, 3}, Uniform(8 * 8 * 9, 3, -0.3f, 0.3f));
  ModelBuilder::IntsAttr(mb.Node("Conv", {"x", "w1"}, {"c1"}, "conv1"), "pads", {1, 1, 1, 1});
  mb.Node("Sigmoid", {"c1"}, {"g1"});
  mb.Node("Mul", {"c1", "g1"}, {"s1"});
  ModelBuilder::IntsAttr(mb.Node("Conv", {"s1", "w2"}, {"y"}, "conv2"), "pads", {1, 1, 1, 1});
  std::ofstream(model_, std::ios::binary | std::ios::trunc) << mb.Bytes();
  // Held-out data drawn as the calibration data (CalibrateAndWrite).
  const Tensor x = Tensor::FromVector<float>(Uniform(4 * 400, 61), {4, 4, 10, 10});
  auto fp = Session::Load(model_);
  ASSERT_TRUE(fp.ok());
  std::vector<NamedTensor> want;
  ASSERT_TRUE((*fp)->Run({{"x", x}}, &want).ok());
  double errs[2] = {0, 0};
  for (bool asym : {true, false}) {
    SCOPED_TRACE(asym ? "asymmetric" : "symmetric");
    QuantizeOptions o;
    o.method = "minmax";
    o.quantize_all = true;
    o.asymmetric_activations = asym;
    o.keep_float = {"conv1"};  // so the error is s1's and conv2's weights'
    const std::string out = (dir_ / (asym ? "asym.onnx" : "sym.onnx")).string();
    auto s = Quantize(o, out);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    const QuantizedActivation* a = nullptr;
    for (const auto& t : s->activations)
      if (t.tensor == "s1") a = &t;
    ASSERT_NE(a, nullptr);
    ASSERT_LT(a->min, 0.f);
    EXPECT_GT(a->min, -0.279f);  // SiLU's minimum
    EXPECT_EQ(a->dtype, asym ? "uint8" : "int8");
    EXPECT_EQ(s->zero_point_activations, asym ? 1 : 0);
    if (asym) {
      // [min, max] on 255 steps, 0 at the zero point.
      EXPECT_NEAR(a->scale, (a->max - a->min) / 255.f, 1e-6f);
      EXPECT_EQ(a->zero_point, static_cast<int>(std::nearbyint(-a->min / a->scale)));
      EXPECT_GT(a->zero_point, 0);
    } else {
      EXPECT_EQ(a->zero_point, 0);
      EXPECT_NEAR(a->scale, a->max / 127.f, 1e-6f);
    }
    Tensor ref_y, fast_y;
    std::string plan;
    RunModelRefAndFast(out, x, &ref_y, &fast_y, &plan);
    if (HasFatalFailure()) return;
    EXPECT_NE(plan.find("QConv 'conv2' -> cpu.qconv.onednn float32"), std::string::npos) << plan;
    const auto [err, max_y] = MaxAbsError(want[0].tensor, ref_y);
    const auto [apart, unused] = MaxAbsError(ref_y, fast_y);
    // Without VNNI, 7-bit weights: 1.3 % of max |y| with oneDNN capped to AVX2 (2026-11-29).
    const bool vnni = DescribeCpu().int8.find("no VNNI") == std::string::npos;
    EXPECT_LT(apart, (vnni ? 0.01 : 0.02) * max_y) << "int8 kernels against the QDQ arithmetic";
    double sq = 0;
    for (int64_t i = 0; i < ref_y.numel(); ++i) {
      const double d = ref_y.data<float>()[i] - want[0].tensor.data<float>()[i];
      sq += d * d;
    }
    errs[asym ? 0 : 1] = sq;
  }
  // The squared error of the QDQ arithmetic against float: 0.41 of the symmetric one's here.
  EXPECT_LT(errs[0], 0.6 * errs[1]) << errs[0] << " vs " << errs[1];
}

TEST_F(QuantizerTest, ComparesEveryQuantizedNodeWithFloat) {
  QuantizeOptions o;
  o.quantize_all = true;
  auto q = Quantizer::Create(model_, o);
  ASSERT_TRUE(q.ok());
  const Tensor data = Tensor::FromVector<float>(Uniform(8 * 400, 10), {8, 4, 10, 10});
  EXPECT_FALSE((*q)->Compare({{"x", data}}).ok());  // before Write
  for (int pass = 0; pass < (*q)->passes(); ++pass) {
    ASSERT_TRUE((*q)->BeginPass(pass).ok());
    ASSERT_TRUE((*q)->Observe({{"x", data}}).ok());
  }
  ASSERT_TRUE((*q)->Write((dir_ / "c.onnx").string()).ok());
  auto errs =
      (*q)->Compare({{"x", Tensor::FromVector<float>(Uniform(4 * 400, 11), {4, 4, 10, 10})}});
  ASSERT_TRUE(errs.ok()) << errs.status().ToString();
  ASSERT_EQ(errs->size(), 3u);  // conv1, conv2, fc (whose output is the model's)
  EXPECT_EQ((*errs)[0].node, "conv1");
  EXPECT_EQ((*errs)[2].tensor, "y");
  for (const auto& e : *errs) {
    EXPECT_GT(e.cosine, 0.99) << e.node;
    EXPECT_LT(e.cosine, 1.0 + 1e-9) << e.node;
    EXPECT_GT(e.max_abs, 0.0) << e.node << ": no quantization error at all";
    EXPECT_LT(e.max_abs, 0.1 * e.max_ref) << e.node;
  }
}

}  // namespace
}  // namespace kiln
