// INT8: calibration thresholds on known distributions, the symmetric weight quantizer, the
// quantizer end to end (a float model in, a QDQ model out that loads, runs close to float and is
// executed by int8 kernels), its refusals, and the int8 convolution and matrix product kernels
// (cpu.qconv.onednn, cpu.qmatmul.onednn) against the reference kernels of the unfused QDQ graph.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <set>

#include "../runtime/model_builder.h"
#include "kiln/diagnostics.h"
#include "kiln/quantize.h"
#include "kiln/session.h"
#include "onnx/opset_convert.h"
#include "onnx/qdq_rewrite.h"
#include "quant/calibration.h"

namespace kiln {
namespace {

using testing::ModelBuilder;
constexpr int kF32 = onnx::TensorProto::FLOAT;

std::vector<float> Uniform(size_t n, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

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
    auto info = onnxio::InspectForQdq(mb.Bytes());
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
  onnxio::QuantizeWeightsSymmetric(w.data(), 12, 3, 4, &q, &scales);
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

// Largest |want - got| and largest |want| over float32 tensors of equal size.
std::pair<double, double> MaxAbsError(const Tensor& want, const Tensor& got) {
  double err = 0, ref = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    err = std::max(err, double(std::fabs(want.data<float>()[i] - got.data<float>()[i])));
    ref = std::max(ref, double(std::fabs(want.data<float>()[i])));
  }
  return {err, ref};
}

// The classifier tail of the test nets: GlobalAveragePool(in) -> Flatten -> Gemm 'fc' (weight w3,
// transposed) -> y; the serialized model.
std::string PoolAndGemm(ModelBuilder& mb, const std::string& in) {
  mb.Node("GlobalAveragePool", {in}, {"g"});
  mb.Node("Flatten", {"g"}, {"f"});
  ModelBuilder::IntAttr(mb.Node("Gemm", {"f", "w3"}, {"y"}, "fc"), "transB", 1);
  return mb.Bytes();
}

// A Constant node holding a float tensor (how Paddle2ONNX writes weights).
void ConstantNode(ModelBuilder& mb, const std::string& name, const std::vector<int64_t>& dims,
                  const std::vector<float>& values) {
  auto* a = mb.Node("Constant", {}, {name}, name + "_constant").add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  onnx::TensorProto* t = a->mutable_t();
  t->set_data_type(kF32);
  for (int64_t d : dims) t->add_dims(d);
  for (float v : values) t->add_float_data(v);
}

// Conv(3x3, 4->8) -> Relu -> Conv(1x1, 8->8) -> Relu -> GlobalAveragePool -> Flatten -> Gemm,
// weights as initializers or (`constants`) Constant nodes.
std::string SmallCnn(int opset = 13, bool constants = false) {
  ModelBuilder mb(opset);
  mb.Input("x", kF32, {-1, 4, 10, 10}).Output("y", kF32, {-1, 5});
  auto weight = [&](const std::string& name, const std::vector<int64_t>& dims,
                    const std::vector<float>& v) {
    if (constants)
      ConstantNode(mb, name, dims, v);
    else
      mb.FloatInit(name, dims, v);
  };
  weight("w1", {8, 4, 3, 3}, Uniform(8 * 4 * 9, 2, -0.5f, 0.5f));
  weight("b1", {8}, Uniform(8, 3, -0.1f, 0.1f));
  weight("w2", {8, 8, 1, 1}, Uniform(64, 4, -0.5f, 0.5f));
  weight("w3", {5, 8}, Uniform(40, 5, -0.5f, 0.5f));
  ModelBuilder::IntsAttr(mb.Node("Conv", {"x", "w1", "b1"}, {"c1"}, "conv1"), "pads", {1, 1, 1, 1});
  mb.Node("Relu", {"c1"}, {"r1"});
  mb.Node("Conv", {"r1", "w2"}, {"c2"}, "conv2");
  mb.Node("Relu", {"c2"}, {"r2"});
  return PoolAndGemm(mb, "r2");
}

class QuantizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("kiln_int8_test_" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
    model_ = (dir_ / "cnn.onnx").string();
    std::ofstream(model_, std::ios::binary) << SmallCnn();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Every pass of `q` over four seeded batches of 8 samples [8, 4, 10, 10], then Write.
  static StatusOr<QuantizeSummary> CalibrateAndWrite(Quantizer* q, const std::string& out) {
    for (int pass = 0; pass < q->passes(); ++pass) {
      KILN_RETURN_IF_ERROR(q->BeginPass(pass));
      for (uint32_t b = 0; b < 4; ++b)
        KILN_RETURN_IF_ERROR(q->Observe(
            {{"x", Tensor::FromVector<float>(Uniform(8 * 400, 10 + b), {8, 4, 10, 10})}}));
    }
    return q->Write(out);
  }

  StatusOr<QuantizeSummary> Quantize(const QuantizeOptions& o, const std::string& out) {
    KILN_ASSIGN_OR_RETURN(auto q, Quantizer::Create(model_, o));
    return CalibrateAndWrite(q.get(), out);
  }

  // Every node int8, minmax, shared scales on or off.
  StatusOr<QuantizeSummary> QuantizeAll(bool share, const std::string& out) {
    QuantizeOptions o;
    o.method = "minmax";
    o.quantize_all = true;
    o.share_concat_scales = share;
    return Quantize(o, out);
  }

  // Held-out data: the int8 model's outputs stay within a few quantization steps of float's
  // (checked); returns the largest absolute difference.
  double ErrorAgainstFloat(const std::string& int8_model) {
    auto fp = Session::Load(model_);
    auto q = Session::Load(int8_model);
    SessionOptions ref_opts;
    ref_opts.reference_only = true;
    auto exact = Session::Load(int8_model, ref_opts);
    EXPECT_TRUE(fp.ok() && q.ok() && exact.ok()) << q.status().ToString();
    if (!fp.ok() || !q.ok() || !exact.ok()) return -1;
    std::vector<NamedTensor> in = {{"x", Tensor::FromVector<float>(Uniform(16 * 400, 77),
                                                                   {16, 4, 10, 10})}},
                             a, b, c;
    EXPECT_TRUE((*fp)->Run(in, &a).ok());
    EXPECT_TRUE((*q)->Run(in, &b).ok());
    EXPECT_TRUE((*exact)->Run(in, &c).ok());
    if (a.empty() || b.empty() || c.empty()) return -1;
    const auto [err, ref] = MaxAbsError(a[0].tensor, b[0].tensor);
    const auto [qdq_err, unused] = MaxAbsError(a[0].tensor, c[0].tensor);
    // The QDQ graph's own arithmetic (reference kernels) against float: the quantization's
    // error (3.3 % of max |y| on this net and data, measured 2026-11-28). With VNNI the int8
    // kernels compute that arithmetic (the same 3.3 %: they differ from it only where they round
    // a tie apart); without VNNI their 7-bit weights add to it (the Gemm's too: 3.9 % in all on
    // AVX2, 2.6 % before the Gemm ran in int8).
    EXPECT_LT(qdq_err, 0.035 * ref)
        << "QDQ arithmetic: max abs error " << qdq_err << " against max |y| " << ref;
    const bool vnni = DescribeCpu().int8.find("no VNNI") == std::string::npos;
    EXPECT_LT(err, (vnni ? 0.035 : 0.05) * ref) << "max abs error " << err << " against max |y| "
                                                << ref << " (QDQ arithmetic " << qdq_err << ")";
    if (vnni) {
      const auto [apart, unused2] = MaxAbsError(b[0].tensor, c[0].tensor);
      EXPECT_LT(apart, 0.005 * ref) << "int8 kernels against the QDQ arithmetic";
    }
    return err;
  }

  // The model at `path` on the reference kernels without the optimizer (its QDQ arithmetic) and
  // on the default kernels.
  void LoadRefAndFast(const std::string& path, std::unique_ptr<Session>* ref,
                      std::unique_ptr<Session>* fast) {
    std::ifstream f(path, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    SessionOptions ro;
    ro.reference_only = true;
    ro.optimize = false;
    auto r = Session::LoadFromBytes(bytes, ro);
    auto q = Session::LoadFromBytes(bytes, SessionOptions{});
    ASSERT_TRUE(r.ok() && q.ok());
    *ref = std::move(*r);
    *fast = std::move(*q);
  }

  // The model at `path` run on `x` by the reference kernels without the optimizer (its QDQ
  // arithmetic: want) and by the default kernels (got), and the latter's plan.
  void RunModelRefAndFast(const std::string& path, const Tensor& x, Tensor* want, Tensor* got,
                          std::string* plan) {
    std::unique_ptr<Session> ref, fast;
    LoadRefAndFast(path, &ref, &fast);
    if (HasFatalFailure()) return;
    std::vector<NamedTensor> w, g;
    ASSERT_TRUE(ref->Run({{"x", x}}, &w).ok());
    ASSERT_TRUE(fast->Run({{"x", x}}, &g).ok());
    auto p = fast->DescribePlan({{"x", x}});
    ASSERT_TRUE(p.ok());
    *want = w[0].tensor;
    *got = g[0].tensor;
    *plan = *p;
  }

  std::filesystem::path dir_;
  std::string model_;
};

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

// The mean of float minus int8 per channel of conv2's output over `data`, largest magnitude.
double LargestChannelShift(const std::string& fp, const std::string& q, const Tensor& data) {
  auto load = [](const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(f)), {});
    auto with = onnxio::WithExtraOutputs(bytes, {"c2"});
    return Session::LoadFromBytes(*with);
  };
  auto a = load(fp), b = load(q);
  std::vector<NamedTensor> ya, yb;
  EXPECT_TRUE((*a)->Run({{"x", data}}, &ya).ok());
  EXPECT_TRUE((*b)->Run({{"x", data}}, &yb).ok());
  auto c2 = [](const std::vector<NamedTensor>& v) {
    for (const auto& t : v)
      if (t.name == "c2") return t.tensor.data<float>();
    return static_cast<const float*>(nullptr);
  };
  const float* fa = c2(ya);
  const float* fb = c2(yb);
  double worst = 0;
  for (int ch = 0; ch < 8; ++ch) {
    double d = 0;
    for (int n = 0; n < 8; ++n)
      for (int k = 0; k < 100; ++k) d += fa[(n * 8 + ch) * 100 + k] - fb[(n * 8 + ch) * 100 + k];
    worst = std::max(worst, std::fabs(d / 800));
  }
  return worst;
}

TEST_F(QuantizerTest, BiasCorrectionRemovesTheMeanShift) {
  QuantizeOptions o;
  o.quantize_all = true;
  o.method = "percentile";
  o.percentile = 99.0;  // clips: a systematic shift the correction must remove
  o.bias_correction = false;
  auto plain = Quantize(o, (dir_ / "plain.onnx").string());
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ(plain->bias_corrected, 0);
  o.bias_correction = true;
  auto corrected = Quantize(o, (dir_ / "corrected.onnx").string());
  ASSERT_TRUE(corrected.ok()) << corrected.status().ToString();
  EXPECT_EQ(corrected->bias_corrected, 2);  // conv1 (has a bias) and conv2 (gets one)
  // On the calibration data (what the correction was measured on, the first batch of it).
  const Tensor data = Tensor::FromVector<float>(Uniform(8 * 400, 10), {8, 4, 10, 10});
  const double before = LargestChannelShift(model_, (dir_ / "plain.onnx").string(), data);
  const double after = LargestChannelShift(model_, (dir_ / "corrected.onnx").string(), data);
  EXPECT_GT(before, 1e-3) << "no shift to correct: the test does not test anything";
  EXPECT_LT(after, 0.5 * before) << "before " << before << ", after " << after;
}

// Fast bias correction measures each convolution's own error, on the float model's input to it
// (NNCF's): conv2's correction is the same whether conv1 before it is int8 (clipped at the 99th
// percentile, shifting conv2's input in the int8 model) or kept float. A correction measured on
// the int8 model's outputs (kiln's first version) would also absorb conv1's shift, and then add
// on top of conv1's own correction.
TEST_F(QuantizerTest, BiasCorrectionMeasuresEachConvolutionOnItsFloatInput) {
  auto conv2_bias = [&](const std::vector<std::string>& keep, std::vector<float>* bias) {
    QuantizeOptions o;
    o.quantize_all = true;
    o.percentile = 99.0;
    o.keep_float = keep;
    const std::string out = (dir_ / (keep.empty() ? "all.onnx" : "kept.onnx")).string();
    auto s = Quantize(o, out);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    EXPECT_EQ(s->bias_corrected, keep.empty() ? 2 : 1);
    std::ifstream f(out, std::ios::binary);
    onnx::ModelProto m;
    ASSERT_TRUE(m.ParseFromIstream(&f));
    std::string name;
    for (const auto& n : m.graph().node())
      if (n.name() == "conv2" && n.input_size() > 2) name = n.input(2);
    ASSERT_FALSE(name.empty()) << "conv2 has no bias";
    for (const auto& t : m.graph().initializer())
      if (t.name() == name) {
        ASSERT_EQ(t.float_data_size() > 0 ? t.float_data_size() : t.raw_data().size() / 4, 8u);
        bias->resize(8);
        if (t.float_data_size() > 0)
          std::copy(t.float_data().begin(), t.float_data().end(), bias->begin());
        else
          std::memcpy(bias->data(), t.raw_data().data(), 32);
      }
    ASSERT_EQ(bias->size(), 8u) << "no initializer " << name;
  };
  std::vector<float> with_int8_conv1, with_float_conv1;
  conv2_bias({}, &with_int8_conv1);
  conv2_bias({"conv1"}, &with_float_conv1);
  if (HasFatalFailure()) return;
  double largest = 0;
  for (int c = 0; c < 8; ++c) {
    EXPECT_FLOAT_EQ(with_int8_conv1[c], with_float_conv1[c]) << "channel " << c;
    largest = std::max(largest, std::fabs(double(with_int8_conv1[c])));
  }
  EXPECT_GT(largest, 1e-4) << "conv2 got no correction: the test does not test anything";
}

// Opset 12 cannot hold per-channel weight scales (DequantizeLinear-13): the quantizer converts
// the model to 13 first; Constant-node weights count as weights.
TEST_F(QuantizerTest, ConvertsOpset12WithConstantWeightsForPerChannelScales) {
  std::ofstream(model_, std::ios::binary | std::ios::trunc) << SmallCnn(12, true);
  const std::string out = (dir_ / "cnn12.int8.onnx").string();
  QuantizeOptions o;
  o.quantize_all = true;
  auto s = Quantize(o, out);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_TRUE(s->per_channel);
  EXPECT_EQ(s->converted_from_opset, 12);
  EXPECT_EQ(s->quantized_nodes, (std::vector<std::string>{"conv1", "conv2", "fc"}));
  ErrorAgainstFloat(out);
}

// The ops whose meaning changed at opset 13, converted from 12: same outputs from kiln on both
// models. Softmax-12 with axis 1 on a 4-D input normalizes over 60 values, Softmax-13 over 3.
TEST(OpsetConvert, Opset12OpsKeepTheirMeaningAt13) {
  ModelBuilder mb(12);
  mb.Input("x", kF32, {2, 3, 4, 5});
  for (const char* y : {"s1", "s2", "s3", "h", "p1", "p2", "u", "r"}) mb.Output(y, kF32, {});
  ModelBuilder::IntAttr(mb.Node("Softmax", {"x"}, {"s1"}), "axis", 1);
  mb.Node("LogSoftmax", {"x"}, {"s2"});  // default axis 1
  ModelBuilder::IntAttr(mb.Node("Softmax", {"x"}, {"s3"}), "axis", -1);
  ModelBuilder::IntAttr(mb.Node("Hardmax", {"x"}, {"h"}), "axis", 2);
  auto& split = mb.Node("Split", {"x"}, {"p1", "p2"});
  ModelBuilder::IntAttr(split, "axis", 3);
  ModelBuilder::IntsAttr(split, "split", {2, 3});
  ModelBuilder::IntsAttr(mb.Node("Unsqueeze", {"x"}, {"x5"}), "axes", {0});
  ModelBuilder::IntsAttr(mb.Node("Squeeze", {"x5"}, {"u"}), "axes", {0});
  ModelBuilder::IntsAttr(mb.Node("ReduceSum", {"x"}, {"r"}), "axes", {1, 2});
  const std::string v12 = mb.Bytes();
  auto v13 = onnxio::ConvertToOpset13(v12);
  ASSERT_TRUE(v13.ok()) << v13.status().ToString();
  onnx::ModelProto m13;
  ASSERT_TRUE(m13.ParseFromString(*v13));
  EXPECT_EQ(m13.opset_import(0).version(), 13);
  auto unchanged = onnxio::ConvertToOpset13(*v13);
  ASSERT_TRUE(unchanged.ok());
  EXPECT_EQ(*unchanged, *v13);

  auto a = Session::LoadFromBytes(v12);
  auto b = Session::LoadFromBytes(*v13);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  std::vector<NamedTensor> in = {{"x",
                                  Tensor::FromVector<float>(Uniform(120, 5, -3, 3), {2, 3, 4, 5})}},
                           ya, yb;
  ASSERT_TRUE((*a)->Run(in, &ya).ok());
  ASSERT_TRUE((*b)->Run(in, &yb).ok());
  ASSERT_EQ(ya.size(), 8u);
  ASSERT_EQ(yb.size(), 8u);
  for (size_t k = 0; k < ya.size(); ++k) {
    const Tensor &p = ya[k].tensor, &q = yb[k].tensor;
    ASSERT_EQ(p.shape(), q.shape()) << ya[k].name;
    for (int64_t i = 0; i < p.numel(); ++i)
      ASSERT_NEAR(p.data<float>()[i], q.data<float>()[i], 1e-6) << ya[k].name << "[" << i << "]";
  }
  // Softmax-12 over 60 values: the 60 sum to 1 (not each group of 3).
  double sum = 0;
  for (int i = 0; i < 60; ++i) sum += ya[0].tensor.data<float>()[i];
  EXPECT_NEAR(sum, 1.0, 1e-5);
}

// A detector's heads: every convolution that reaches a model output through no other
// quantizable node is an output layer, kept float by default (not only the last in graph
// order); the stem is the input layer. --quantize-all quantizes them all.
// The statistics passes run the calibration model on chunks of run_batch samples (memory: one
// chunk's tensors); the statistics, hence the written model, do not depend on the chunking.
TEST_F(QuantizerTest, ChunkedCalibrationRunsWriteTheSameModel) {
  std::vector<std::string> bytes;
  for (int64_t rows : {0, 3, 8}) {  // whole batches of 8; chunks of 3, 3, 2; one chunk of 8
    SCOPED_TRACE(rows);
    QuantizeOptions o;
    o.quantize_all = true;
    o.method = "mse";  // a threshold that depends on the whole histogram
    o.run_batch = rows;
    const std::string out = (dir_ / ("chunks" + std::to_string(rows) + ".onnx")).string();
    auto s = Quantize(o, out);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    EXPECT_EQ(s->samples, 32);
    std::ifstream f(out, std::ios::binary);
    bytes.emplace_back((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    ASSERT_GT(bytes.back().size(), 1000u);
  }
  EXPECT_TRUE(bytes[0] == bytes[1]) << "chunks of 3 changed the model";
  EXPECT_TRUE(bytes[0] == bytes[2]) << "chunks of 8 changed the model";
}

TEST_F(QuantizerTest, KeepsEveryHeadFloatByDefault) {
  ModelBuilder mb(13);
  mb.Input("x", kF32, {-1, 4, 10, 10})
      .Output("boxes", kF32, {-1, 4, 100})
      .Output("scores", kF32, {-1, 2, 10, 10});
  mb.FloatInit("w1", {8, 4, 3, 3}, Uniform(8 * 4 * 9, 2, -0.5f, 0.5f));
  mb.FloatInit("w2", {8, 8, 3, 3}, Uniform(8 * 8 * 9, 3, -0.3f, 0.3f));
  mb.FloatInit("wa", {4, 8, 1, 1}, Uniform(32, 4, -0.5f, 0.5f));
  mb.FloatInit("wb", {2, 8, 1, 1}, Uniform(16, 5, -0.5f, 0.5f));
  mb.Int64Init("flat", {3}, {0, 4, 100});
  ModelBuilder::IntsAttr(mb.Node("Conv", {"x", "w1"}, {"c1"}, "stem"), "pads", {1, 1, 1, 1});
  mb.Node("Relu", {"c1"}, {"r1"});
  ModelBuilder::IntsAttr(mb.Node("Conv", {"r1", "w2"}, {"c2"}, "body"), "pads", {1, 1, 1, 1});
  mb.Node("Relu", {"c2"}, {"r2"});
  mb.Node("Conv", {"r2", "wa"}, {"ca"}, "head_boxes");
  mb.Node("Reshape", {"ca", "flat"}, {"boxes"});
  mb.Node("Conv", {"r2", "wb"}, {"cb"}, "head_scores");
  mb.Node("Sigmoid", {"cb"}, {"scores"});
  std::ofstream(model_, std::ios::binary | std::ios::trunc) << mb.Bytes();
  auto s = Quantize(QuantizeOptions{}, (dir_ / "heads.onnx").string());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->quantized_nodes, std::vector<std::string>{"body"});
  ASSERT_EQ(s->float_nodes.size(), 3u);
  EXPECT_EQ(s->float_nodes[0].first, "stem");
  EXPECT_NE(s->float_nodes[0].second.find("first"), std::string::npos);
  for (int k : {1, 2}) {
    EXPECT_EQ(s->float_nodes[k].first, k == 1 ? "head_boxes" : "head_scores");
    EXPECT_NE(s->float_nodes[k].second.find("an output layer"), std::string::npos)
        << s->float_nodes[k].second;
  }
  auto all = QuantizeAll(true, (dir_ / "all.onnx").string());
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_EQ(all->quantized_nodes.size(), 4u);
}

TEST_F(QuantizerTest, KeepsFirstAndLastFloatByDefaultAndRefusesWhatCannotWork) {
  auto s = Quantize(QuantizeOptions{}, (dir_ / "a.onnx").string());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->quantized_nodes, std::vector<std::string>{"conv2"});
  ASSERT_EQ(s->float_nodes.size(), 2u);
  EXPECT_NE(s->float_nodes[0].second.find("first"), std::string::npos);

  QuantizeOptions keep;
  keep.keep_float = {"Conv"};
  auto none = Quantizer::Create(model_, keep);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("nothing to quantize"), std::string::npos)
      << none.status().message();

  QuantizeOptions bad;
  bad.method = "kl";
  EXPECT_EQ(Quantizer::Create(model_, bad).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Quantizer::Create((dir_ / "missing.onnx").string(), {}).status().code(),
            StatusCode::kNotFound);

  auto q = Quantizer::Create(model_, {});
  ASSERT_TRUE(q.ok());
  EXPECT_FALSE((*q)->BeginPass(1).ok());  // passes in order
  ASSERT_TRUE((*q)->BeginPass(0).ok());
  EXPECT_FALSE((*q)->BeginPass(1).ok());  // no sample observed
  EXPECT_FALSE((*q)->Write((dir_ / "b.onnx").string()).ok());
}

// Method auto: per tensor the search keeps the method whose threshold brings the model's output
// closest to float's on the first calibration batch, starting from percentile's thresholds. Its
// reported start is the percentile model's error and its result no worse, both recomputed here
// on that batch; a cache keeps the choice (no search, the same model).
TEST_F(QuantizerTest, AutoKeepsPerTensorTheThresholdClosestToFloat) {
  const Tensor first = Tensor::FromVector<float>(Uniform(8 * 400, 10), {8, 4, 10, 10});
  auto fp = Session::Load(model_);
  ASSERT_TRUE(fp.ok());
  std::vector<NamedTensor> want;
  ASSERT_TRUE((*fp)->Run({{"x", first}}, &want).ok());
  auto rel_error = [&](const std::string& path) {
    auto q = Session::Load(path);
    EXPECT_TRUE(q.ok());
    std::vector<NamedTensor> got;
    EXPECT_TRUE(q.ok() && (*q)->Run({{"x", first}}, &got).ok());
    if (got.empty()) return -1.0;
    double d = 0, n = 0;
    for (int64_t i = 0; i < want[0].tensor.numel(); ++i) {
      const double a = want[0].tensor.data<float>()[i], b = got[0].tensor.data<float>()[i];
      d += (a - b) * (a - b), n += a * a;
    }
    return d / n;
  };
  QuantizeOptions o;
  o.quantize_all = true;
  o.bias_correction = false;  // the search's own errors against the written models' below
  const std::string pct = (dir_ / "percentile.onnx").string();
  ASSERT_TRUE(Quantize(o, pct).ok());
  o.method = "auto";
  const std::string out = (dir_ / "auto.onnx").string(), cache = (dir_ / "auto.json").string();
  StatusOr<QuantizeSummary> s = InvalidArgument("not run");
  {
    auto q = Quantizer::Create(model_, o);
    ASSERT_TRUE(q.ok());
    ASSERT_TRUE((*q)->UseCache(cache, "data").ok());
    ASSERT_EQ((*q)->passes(), 3);  // ranges, histograms, the search
    s = Quantize(o, out);
  }
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->method, "auto");
  EXPECT_GT(s->auto_evaluations, 3);
  EXPECT_EQ(s->auto_samples, 8);
  EXPECT_LE(s->auto_error, s->auto_error_start);
  ASSERT_EQ(s->activations.size(), 3u);
  for (const auto& a : s->activations)
    EXPECT_TRUE(a.method == "minmax" || a.method == "percentile" || a.method == "entropy" ||
                a.method == "mse")
        << a.tensor << ": " << a.method;
  const double e_pct = rel_error(pct), e_auto = rel_error(out);
  EXPECT_NEAR(e_pct, s->auto_error_start, 1e-6 * e_pct + 1e-12);
  EXPECT_NEAR(e_auto, s->auto_error, 1e-6 * e_auto + 1e-12);
  EXPECT_LE(e_auto, e_pct);
  // From a cache: no search, the same thresholds and methods.
  auto write_cached = [&](const std::string& path) -> StatusOr<QuantizeSummary> {
    KILN_ASSIGN_OR_RETURN(auto q, Quantizer::Create(model_, o));
    KILN_ASSIGN_OR_RETURN(bool hit, q->UseCache(cache, "data"));
    if (hit) return InvalidArgument("no cache was written yet");
    return CalibrateAndWrite(q.get(), path);
  };
  ASSERT_TRUE(write_cached((dir_ / "auto1.onnx").string()).ok());
  auto q = Quantizer::Create(model_, o);
  ASSERT_TRUE(q.ok());
  auto hit = (*q)->UseCache(cache, "data");
  ASSERT_TRUE(hit.ok() && *hit);
  EXPECT_EQ((*q)->passes(), 0);
  auto again = (*q)->Write((dir_ / "auto2.onnx").string());
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->auto_evaluations, 0);
  for (size_t i = 0; i < again->activations.size(); ++i)
    EXPECT_EQ(again->activations[i].method, s->activations[i].method);
  auto bytes = [](const std::string& p) {
    std::ifstream f(p, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  };
  EXPECT_EQ(bytes((dir_ / "auto1.onnx").string()), bytes((dir_ / "auto2.onnx").string()));
  EXPECT_EQ(bytes((dir_ / "auto1.onnx").string()), bytes(out));
}

TEST_F(QuantizerTest, CalibrationCacheIsReusedAndRefusedWhenForeign) {
  const std::string cache = (dir_ / "cache.json").string();
  const Tensor data = Tensor::FromVector<float>(Uniform(8 * 400, 10), {8, 4, 10, 10});
  auto run = [&](const std::string& model, const std::string& out, bool* hit) -> Status {
    KILN_ASSIGN_OR_RETURN(auto q, Quantizer::Create(model, QuantizeOptions{}));
    KILN_ASSIGN_OR_RETURN(*hit, q->UseCache(cache, CalibrationDataKey(data, 8)));
    for (int pass = 0; pass < q->passes(); ++pass) {
      KILN_RETURN_IF_ERROR(q->BeginPass(pass));
      KILN_RETURN_IF_ERROR(q->Observe({{"x", data}}));
    }
    return q->Write(out).status();
  };
  bool hit = true;
  ASSERT_TRUE(run(model_, (dir_ / "a.onnx").string(), &hit).ok());
  EXPECT_FALSE(hit);
  ASSERT_TRUE(std::filesystem::exists(cache));
  ASSERT_TRUE(run(model_, (dir_ / "b.onnx").string(), &hit).ok());
  EXPECT_TRUE(hit);
  auto bytes = [](const std::filesystem::path& p) {
    std::ifstream f(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
  };
  EXPECT_EQ(bytes(dir_ / "a.onnx"), bytes(dir_ / "b.onnx")) << "the cached ranges differ";
  // Another model (one weight changed) is refused, naming the key.
  const std::string other = (dir_ / "other.onnx").string();
  std::string m = bytes(model_);
  m[m.size() / 2] ^= 1;
  std::ofstream(other, std::ios::binary) << m;
  Status s = run(other, (dir_ / "c.onnx").string(), &hit);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("model_hash"), std::string::npos) << s.message();
  // Other data too; a corrupt file is refused and left as it was.
  auto q = Quantizer::Create(model_, QuantizeOptions{});
  ASSERT_TRUE(q.ok());
  auto r = (*q)->UseCache(cache, CalibrationDataKey(data, 7));
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("calibration_data"), std::string::npos);
  std::ofstream(cache, std::ios::trunc) << "{\"keys\": ";
  auto q2 = Quantizer::Create(model_, QuantizeOptions{});
  EXPECT_FALSE((*q2)->UseCache(cache, CalibrationDataKey(data, 8)).ok());
  EXPECT_EQ(bytes(cache), "{\"keys\": ");
}

// Conv(1x1, 4->8) -> Relu -> depthwise Conv(3x3, group 8) -> Relu -> Conv(1x1, 8->8) -> Relu ->
// GlobalAveragePool -> Flatten -> Gemm. The first conv's output channels differ in range by up to
// 300x (its weight rows scaled by 1, 10, 100, 300), as MobileNet blocks' do.
std::string DepthwiseCnn() {
  ModelBuilder mb(13);
  mb.Input("x", kF32, {-1, 4, 10, 10}).Output("y", kF32, {-1, 5});
  std::vector<float> w1 = Uniform(8 * 4, 2, -0.5f, 0.5f);
  const float gain[4] = {1.f, 10.f, 100.f, 300.f};
  for (size_t i = 0; i < w1.size(); ++i) w1[i] *= gain[(i / 4) % 4];
  mb.FloatInit("w1", {8, 4, 1, 1}, w1);
  mb.FloatInit("wd", {8, 1, 3, 3}, Uniform(8 * 9, 3, -0.5f, 0.5f));
  mb.FloatInit("w2", {8, 8, 1, 1}, Uniform(64, 4, -0.5f, 0.5f));
  mb.FloatInit("w3", {5, 8}, Uniform(40, 5, -0.5f, 0.5f));
  mb.Node("Conv", {"x", "w1"}, {"c1"}, "conv1");
  mb.Node("Relu", {"c1"}, {"r1"});
  auto& dw = mb.Node("Conv", {"r1", "wd"}, {"c2"}, "dwconv");
  ModelBuilder::IntAttr(dw, "group", 8);
  ModelBuilder::IntsAttr(dw, "pads", {1, 1, 1, 1});
  mb.Node("Relu", {"c2"}, {"r2"});
  mb.Node("Conv", {"r2", "w2"}, {"c3"}, "conv3");
  mb.Node("Relu", {"c3"}, {"r3"});
  return PoolAndGemm(mb, "r3");
}

TEST_F(QuantizerTest, PerChannelScalesOnDepthwiseInputsRunOnInt8KernelsAndCutTheError) {
  std::ofstream(model_, std::ios::binary | std::ios::trunc) << DepthwiseCnn();
  auto dwconv_error = [&](bool channels, QuantizeSummary* summary) -> double {
    QuantizeOptions o;
    o.method = "minmax";
    o.quantize_all = true;
    o.channel_activations = channels;
    const std::string out = (dir_ / (channels ? "ch.onnx" : "t.onnx")).string();
    auto s = Quantize(o, out);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    if (!s.ok()) return -1;
    *summary = *s;
    auto q = Session::Load(out);
    EXPECT_TRUE(q.ok()) << q.status().ToString();
    if (!q.ok()) return -1;
    auto plan =
        (*q)->DescribePlan({{"x", Tensor::FromVector<float>(Uniform(400, 99), {1, 4, 10, 10})}});
    EXPECT_TRUE(plan.ok());
    // Every convolution int8; QuantizeLinear only on the model input and the Gemm's input (the
    // convolutions write the depthwise one's int8 input, per channel or not, themselves; with one
    // scale the 1x1 convolution and the depthwise one are one QConvDw, fuse_qconv_dw).
    EXPECT_EQ(plan->find(" Conv '"), std::string::npos) << *plan;
    EXPECT_NE(plan->find(channels ? "QConv 'conv1' -> cpu.qconv.onednn uint8"
                                  : "QConvDw 'conv1' -> cpu.qconvdw.onednn uint8"),
              std::string::npos)
        << *plan;
    size_t steps = 0;
    for (size_t at = plan->find("QuantizeLinear '"); at != std::string::npos;
         at = plan->find("QuantizeLinear '", at + 1))
      ++steps;
    EXPECT_EQ(steps, 2u) << *plan;
    // The depthwise convolution's output, int8 model against float, on held-out data.
    auto fp =
        Session::LoadFromBytes(*onnxio::WithExtraOutputs(DepthwiseCnn(), {"c2"}), SessionOptions{});
    std::ifstream f(out, std::ios::binary);
    auto qc = Session::LoadFromBytes(
        *onnxio::WithExtraOutputs(std::string(std::istreambuf_iterator<char>(f), {}), {"c2"}),
        SessionOptions{});
    EXPECT_TRUE(fp.ok() && qc.ok());
    if (!fp.ok() || !qc.ok()) return -1;
    std::vector<NamedTensor> in = {{"x", Tensor::FromVector<float>(Uniform(8 * 400, 77),
                                                                   {8, 4, 10, 10})}},
                             a, b;
    EXPECT_TRUE((*fp)->Run(in, &a).ok());
    EXPECT_TRUE((*qc)->Run(in, &b).ok());
    for (const auto& o : a)
      for (const auto& p : b)
        if (o.name == "c2" && p.name == "c2") {
          // Relative error per channel, worst channel: small channels are what one scale loses.
          const int64_t n = o.tensor.shape()[0], c = o.tensor.shape()[1];
          const int64_t inner = o.tensor.numel() / (n * c);
          double worst = 0;
          for (int64_t ch = 0; ch < c; ++ch) {
            double err = 0, ref = 0;
            for (int64_t i = 0; i < n; ++i)
              for (int64_t k = 0; k < inner; ++k) {
                const int64_t at = (i * c + ch) * inner + k;
                err = std::max(err, double(std::fabs(o.tensor.data<float>()[at] -
                                                     p.tensor.data<float>()[at])));
                ref = std::max(ref, double(std::fabs(o.tensor.data<float>()[at])));
              }
            worst = std::max(worst, ref > 0 ? err / ref : err);
          }
          return worst;
        }
    ADD_FAILURE() << "no output c2";
    return -1;
  };
  QuantizeSummary per_tensor, per_channel;
  const double tensor_err = dwconv_error(false, &per_tensor);
  const double channel_err = dwconv_error(true, &per_channel);
  // r1 (read only by the depthwise conv) gets 8 scales, spanning the weights' 300x; x, r2 and f
  // (read by ordinary convolutions and the Gemm) keep one.
  ASSERT_EQ(per_channel.activations.size(), 4u);
  EXPECT_TRUE(per_channel.activations[3].channel_scales.empty());
  EXPECT_TRUE(per_channel.activations[0].channel_scales.empty());
  ASSERT_EQ(per_channel.activations[1].tensor, "r1");
  ASSERT_EQ(per_channel.activations[1].channel_scales.size(), 8u);
  const auto& cs = per_channel.activations[1].channel_scales;
  EXPECT_GT(*std::max_element(cs.begin(), cs.end()), 50 * *std::min_element(cs.begin(), cs.end()));
  EXPECT_FLOAT_EQ(per_channel.activations[1].scale, *std::max_element(cs.begin(), cs.end()));
  EXPECT_TRUE(per_channel.activations[2].channel_scales.empty());
  EXPECT_TRUE(per_tensor.activations[1].channel_scales.empty());
  // One scale leaves the small channels a few levels: their error is large.
  EXPECT_GT(tensor_err, 0.05);
  EXPECT_LT(channel_err, 0.02);
  EXPECT_LT(channel_err * 5, tensor_err);
  std::printf(
      "depthwise output, worst channel's max |error| / max |value|: one scale %.4f, "
      "per channel %.4f\n",
      tensor_err, channel_err);
}

// An int8 initializer `name` of shape `dims` whose i-th value is value(i).
void Int8Init(ModelBuilder& mb, const std::string& name, const Shape& dims,
              const std::function<int(int64_t)>& value) {
  auto* t = mb.proto().mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::INT8);
  for (int64_t d : dims) t->add_dims(d);
  std::string raw;
  for (int64_t i = 0; i < NumElements(dims); ++i) raw.push_back(static_cast<char>(value(i)));
  t->set_raw_data(raw);
}

// A QDQ convolution: Q/DQ on X, DQ on int8 weights (even values, so the halved weights oneDNN
// uses on CPUs without VNNI are exact and the int8 kernel must match the reference closely).
struct QConvCase {
  Shape x;
  int64_t m, k, stride, pad, group;
  bool x_signed, per_channel, bias, residual;
  bool requantize = false;  // Relu -> QuantizeLinear -> DequantizeLinear: QConv writes uint8
  bool relu6 = false;       // Clip(0, 6) instead of Relu: not scale-invariant
  // Full-range uint8 source (up to 255) and odd weights up to +-127: exact only when the kernel
  // neither halves the weights nor saturates (depthwise convolutions, whose 32-bit products do
  // not overflow on any ISA). Not for int8 sources: without VNNI oneDNN's own s8 compensation
  // halves the weights, depthwise too.
  bool full_range = false;
  // One X scale per channel (Q/DQ axis 1; depthwise only: fuse_qdq_conv folds them into the
  // weights' scales), and one requantization scale per output channel (with `requantize`).
  bool channel_x = false, channel_y = false;
  int x_zero = 0;  // X's zero point (per tensor; ONNX Runtime's asymmetric activations)
  // The requantization's zero point in int8 (ONNX Runtime's int8 activations: -128 after a
  // ReLU; qdq_int8_to_uint8 makes it uint8 0, which the convolution absorbs).
  bool y_signed = false;
  int y_zero = 0;
  // No activation before the QuantizeLinear (ONNX Runtime's convolution before a residual Add:
  // an asymmetric requantization, negative values kept).
  bool no_relu = false;
  // HardSigmoid before the QuantizeLinear: its own eltwise_linear precedes the division by
  // y_scale (oneDNN 2.6's AVX2 int8 convolution gave a second eltwise_linear the first's
  // alpha and beta).
  bool hard_sigmoid = false;
};

QConvCase WithHardSigmoid(QConvCase c) {
  c.hard_sigmoid = true;
  return c;
}

QConvCase WithXZero(QConvCase c, int zero) {
  c.x_zero = zero;
  return c;
}

QConvCase WithInt8YZero(QConvCase c, int zero) {
  c.y_signed = true;
  c.y_zero = zero;
  return c;
}

// Requantized without an activation, zero point `zero` (uint8, or int8 when `is_signed`).
QConvCase AsymmetricY(QConvCase c, bool is_signed, int zero) {
  c.requantize = true;
  c.y_signed = is_signed;
  c.y_zero = zero;
  c.no_relu = true;
  return c;
}

QConvCase PerChannelY(QConvCase c) {
  c.channel_y = true;
  return c;
}

// Scales 0.01 * (1 + i % 7) * base for i < n: a factor of 7 between channels.
std::vector<float> ChannelScales(int64_t n, float base) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = base * static_cast<float>(1 + i % 7);
  return v;
}

// A zero-point initializer of `count` values `value` (none: a scalar).
void ZeroPoints(ModelBuilder& mb, const std::string& name, bool is_signed, int64_t count,
                int value = 0) {
  auto* z = mb.proto().mutable_graph()->add_initializer();
  z->set_name(name);
  z->set_data_type(is_signed ? onnx::TensorProto::INT8 : onnx::TensorProto::UINT8);
  if (count > 0) z->add_dims(count);
  z->set_raw_data(
      std::string(static_cast<size_t>(std::max<int64_t>(count, 1)), static_cast<char>(value)));
}

// QuantizeLinear with one scale (and zero point) per channel after a float convolution, whose
// output the CPU keeps in a oneDNN blocked layout (`after_conv`) or plain (a graph input): the
// fast kernel against the reference, exact but for a value within float rounding of a step's
// midpoint (the reorder multiplies by 1/scale).
void CheckChannelQuantize(bool after_conv, bool zero_points, bool is_signed) {
  SCOPED_TRACE(std::string(after_conv ? "after a conv" : "graph input") +
               (zero_points ? ", zero points" : ", zero points 0") +
               (is_signed ? ", int8" : ", uint8"));
  ModelBuilder mb(13);
  const int64_t c = 12;
  mb.Input("x", kF32, {2, 4, 7, 7}).OutputAnyShape("y", kF32);
  std::string q_in = "x";
  if (after_conv) {
    mb.FloatInit("w", {c, 4, 3, 3}, Uniform(c * 4 * 9, 21));
    ModelBuilder::IntsAttr(mb.Node("Conv", {"x", "w"}, {"c"}), "pads", {1, 1, 1, 1});
    q_in = "c";
  }
  const int64_t channels = after_conv ? c : 4;
  mb.FloatInit("s", {channels}, ChannelScales(channels, 0.004f));
  auto* z = mb.proto().mutable_graph()->add_initializer();
  z->set_name("z");
  z->set_data_type(is_signed ? onnx::TensorProto::INT8 : onnx::TensorProto::UINT8);
  z->add_dims(channels);
  std::string zp;
  for (int64_t i = 0; i < channels; ++i)
    zp.push_back(static_cast<char>(zero_points ? (is_signed ? 3 * i - 10 : 100 + 5 * i) : 0));
  z->set_raw_data(zp);
  ModelBuilder::IntAttr(mb.Node("QuantizeLinear", {q_in, "s", "z"}, {"q"}), "axis", 1);
  ModelBuilder::IntAttr(mb.Node("DequantizeLinear", {"q", "s", "z"}, {"y"}), "axis", 1);
  const std::string bytes = mb.Bytes();
  SessionOptions ref_opts;
  ref_opts.reference_only = true;
  auto ref = Session::LoadFromBytes(bytes, ref_opts);
  auto fast = Session::LoadFromBytes(bytes, SessionOptions{});
  ASSERT_TRUE(ref.ok() && fast.ok());
  const Tensor x = Tensor::FromVector<float>(Uniform(2 * 4 * 49, 22, -1.5f, 1.5f), {2, 4, 7, 7});
  auto plan = (*fast)->DescribePlan({{"x", x}});
  ASSERT_TRUE(plan.ok());
  EXPECT_NE(plan->find("cpu.quantizelinear.channels"), std::string::npos) << *plan;
  std::vector<NamedTensor> want, got;
  ASSERT_TRUE((*ref)->Run({{"x", x}}, &want).ok());
  ASSERT_TRUE((*fast)->Run({{"x", x}}, &got).ok());
  const Tensor& w = want[0].tensor;
  ASSERT_EQ(got[0].tensor.shape(), w.shape());
  const int64_t inner = w.numel() / (2 * channels);
  int64_t off_by_one = 0, bad = 0, clipped = 0;
  for (int64_t i = 0; i < w.numel(); ++i) {
    const float step = 0.004f * static_cast<float>(1 + (i / inner) % channels % 7);
    const float d = std::fabs(got[0].tensor.data<float>()[i] - w.data<float>()[i]);
    const float lo = -static_cast<float>(zp[(i / inner) % channels]) * step;
    clipped += std::fabs(w.data<float>()[i] - lo) < 1e-6f;
    if (d <= 1e-6f) continue;
    if (std::fabs(d - step) < 1e-5f && !zero_points && after_conv)
      ++off_by_one;
    else if (bad++ < 3)
      ADD_FAILURE() << "[" << i << "]: " << got[0].tensor.data<float>()[i] << " vs "
                    << w.data<float>()[i];
  }
  EXPECT_EQ(bad, 0);
  EXPECT_LE(off_by_one, w.numel() / 200);
  if (is_signed || zero_points) {  // (uint8 with zero point 0 clips every negative value)
    EXPECT_LT(clipped, w.numel() / 2) << "the values should mostly lie inside the range";
  }
}

TEST(QuantizeChannels, MatchesReferenceInEveryLayout) {
  for (bool after_conv : {false, true})
    for (bool zero_points : {false, true})
      for (bool is_signed : {false, true}) CheckChannelQuantize(after_conv, zero_points, is_signed);
}

// The model run by the reference kernels without the optimizer (the QDQ graph's own arithmetic)
// and by the optimizer and fast kernels, on x.
struct RefAndFast {
  std::string plan;  // the fast session's plan
  Tensor want, got;
};
void RunRefAndFast(const std::string& bytes, const Tensor& x, RefAndFast* r) {
  SessionOptions ref_opts;
  ref_opts.reference_only = true;
  ref_opts.optimize = false;
  auto ref = Session::LoadFromBytes(bytes, ref_opts);
  auto fast = Session::LoadFromBytes(bytes, SessionOptions{});
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();
  ASSERT_TRUE(fast.ok()) << fast.status().ToString();
  auto plan = (*fast)->DescribePlan({{"x", x}});
  ASSERT_TRUE(plan.ok());
  r->plan = *plan;
  std::vector<NamedTensor> want, got;
  ASSERT_TRUE((*ref)->Run({{"x", x}}, &want).ok());
  Status s = (*fast)->Run({{"x", x}}, &got);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(got[0].tensor.shape(), want[0].tensor.shape());
  r->want = want[0].tensor;
  r->got = got[0].tensor;
}

// Fast against reference: |got - want| <= 1e-4 + 1e-4 |want| everywhere, except, when the
// output was requantized, values exactly step(i) off (oneDNN and the reference may round a value
// within float rounding of a step's midpoint differently), at most 0.5 % of them.
void ExpectCloseOrOneStep(const RefAndFast& r, bool requantized,
                          const std::function<float(int64_t)>& step) {
  int64_t bad = 0, off_by_one = 0;
  for (int64_t i = 0; i < r.want.numel(); ++i) {
    const float w = r.want.data<float>()[i], g = r.got.data<float>()[i];
    if (requantized && std::fabs(g - w) > 1e-4f && std::fabs(std::fabs(g - w) - step(i)) < 1e-4f) {
      ++off_by_one;
      continue;
    }
    if (!(std::fabs(g - w) <= 1e-4f + 1e-4f * std::fabs(w)) && bad++ < 3)
      ADD_FAILURE() << "[" << i << "]: " << g << " vs " << w;
  }
  EXPECT_EQ(bad, 0);
  EXPECT_LE(off_by_one, r.want.numel() / 200) << "more than 0.5% one step off";
}

class QConvKernelTest : public ::testing::TestWithParam<QConvCase> {};

TEST_P(QConvKernelTest, MatchesReference) {
  const QConvCase& c = GetParam();
  ModelBuilder mb(13);
  mb.Input("x", kF32, c.x).OutputAnyShape("y", kF32);
  const int64_t cin = c.x[1];
  Shape ws = {c.m, cin / c.group, c.k, c.k};
  std::mt19937 rng(5);
  Int8Init(mb, "wq", ws, [&](int64_t) {
    return c.full_range ? static_cast<int>(rng() % 255) - 127
                        : 2 * static_cast<int>(rng() % 127) - 126;
  });
  if (c.per_channel) {
    std::vector<float> sw(static_cast<size_t>(c.m));
    for (int64_t i = 0; i < c.m; ++i) sw[i] = 0.001f * static_cast<float>(1 + i % 5);
    mb.FloatInit("sw", {c.m}, sw);
  } else {
    mb.FloatInit("sw", {}, {0.002f});
  }
  if (c.channel_x)
    mb.FloatInit("sx", {cin}, ChannelScales(cin, 0.005f));
  else
    mb.FloatInit("sx", {}, {0.02f});
  ZeroPoints(mb, "zx", c.x_signed, c.channel_x ? cin : 0, c.x_zero);
  ModelBuilder::IntAttr(mb.Node("QuantizeLinear", {"x", "sx", "zx"}, {"xq"}), "axis", 1);
  ModelBuilder::IntAttr(mb.Node("DequantizeLinear", {"xq", "sx", "zx"}, {"xd"}), "axis", 1);
  auto& dq = mb.Node("DequantizeLinear", {"wq", "sw"}, {"wd"});
  if (c.per_channel) ModelBuilder::IntAttr(dq, "axis", 0);
  std::vector<std::string> ins = {"xd", "wd"};
  if (c.bias) {
    mb.FloatInit("b", {c.m}, Uniform(static_cast<size_t>(c.m), 6, -2.f, 2.f));
    ins.push_back("b");
  }
  auto& conv = mb.Node("Conv", ins, {"c"});
  ModelBuilder::IntAttr(conv, "group", c.group);
  ModelBuilder::IntsAttr(conv, "strides", {c.stride, c.stride});
  ModelBuilder::IntsAttr(conv, "pads", {c.pad, c.pad, c.pad, c.pad});
  std::string last = "c";
  if (c.residual) {
    mb.Node("Add", {"c", "c0"}, {"s"});
    last = "s";
  }
  if (c.requantize) {
    if (c.channel_y)
      mb.FloatInit("sy", {c.m}, ChannelScales(c.m, 0.01f));
    else
      mb.FloatInit("sy", {}, {0.05f});
    if (c.channel_y && c.y_zero != 0) {  // a different zero point per channel
      auto* z = mb.proto().mutable_graph()->add_initializer();
      z->set_name("zy");
      z->set_data_type(c.y_signed ? onnx::TensorProto::INT8 : onnx::TensorProto::UINT8);
      z->add_dims(c.m);
      std::string raw;
      for (int64_t i = 0; i < c.m; ++i) raw.push_back(static_cast<char>(c.y_zero + 3 * (i % 5)));
      z->set_raw_data(raw);
    } else {
      ZeroPoints(mb, "zy", c.y_signed, c.channel_y ? c.m : 0, c.y_zero);
    }
    if (c.no_relu) {
      mb.Node("Identity", {last}, {"r"});
    } else if (c.hard_sigmoid) {
      auto& hs = mb.Node("HardSigmoid", {last}, {"r"});
      ModelBuilder::FloatAttr(hs, "alpha", 0.3f);
      ModelBuilder::FloatAttr(hs, "beta", 0.4f);
    } else if (c.relu6) {
      mb.FloatInit("lo", {}, {0.f});
      mb.FloatInit("hi", {}, {6.f});
      mb.Node("Clip", {last, "lo", "hi"}, {"r"});
    } else {
      mb.Node("Relu", {last}, {"r"});
    }
    ModelBuilder::IntAttr(mb.Node("QuantizeLinear", {"r", "sy", "zy"}, {"rq"}), "axis", 1);
    ModelBuilder::IntAttr(mb.Node("DequantizeLinear", {"rq", "sy", "zy"}, {"y"}), "axis", 1);
  } else {
    mb.Node("Relu", {last}, {"y"});
  }
  if (c.residual) {  // the summand: a float conv of the same output shape
    std::vector<float> w0 = Uniform(static_cast<size_t>(c.m * cin * 9), 8);
    mb.FloatInit("w0", {c.m, cin, 3, 3}, w0);
    auto& n0 = mb.Node("Conv", {"x", "w0"}, {"c0"});
    ModelBuilder::IntsAttr(n0, "strides", {c.stride, c.stride});
    ModelBuilder::IntsAttr(n0, "pads", {1, 1, 1, 1});
    // Keep the graph topologically sorted: move the summand's conv first.
    auto* nodes = mb.proto().mutable_graph()->mutable_node();
    for (int i = nodes->size() - 1; i > 0; --i) nodes->SwapElements(i, i - 1);
  }
  const std::string bytes = mb.Bytes();
  // With a zero point, negative values too (the padding is X's zero point, a real 0).
  Tensor x = Tensor::FromVector<float>(
      Uniform(static_cast<size_t>(NumElements(c.x)), 9, c.x_signed || c.x_zero ? -2.f : 0.f,
              c.full_range ? 5.1f : 2.f),
      c.x);
  if (c.channel_x) {  // each channel's values within its own scale's range (up to 2.5 x 0.005 x 7)
    const int64_t inner = NumElements(c.x) / (c.x[0] * cin);
    for (int64_t i = 0; i < x.numel(); ++i)
      x.data<float>()[i] *= 0.3f * static_cast<float>(1 + (i / inner) % cin % 7);
  }
  RefAndFast r;
  RunRefAndFast(bytes, x, &r);
  if (HasFatalFailure()) return;
  const std::string* plan = &r.plan;
  // int8 output: symmetric, or per-channel zero points (qdq_int8_to_uint8 moves only one
  // per-tensor zero point to uint8).
  const bool int8_out = c.y_signed && (c.channel_y || c.y_zero == 0);
  EXPECT_NE(plan->find(!c.requantize ? "cpu.qconv.onednn float32"
                       : int8_out    ? "cpu.qconv.onednn int8"
                                     : "cpu.qconv.onednn uint8"),
            std::string::npos)
      << *plan;
  size_t quantize_steps = 0;
  for (size_t at = plan->find("QuantizeLinear '"); at != std::string::npos;
       at = plan->find("QuantizeLinear '", at + 1))
    ++quantize_steps;
  EXPECT_EQ(quantize_steps, 1u) << "only X's QuantizeLinear may run apart from the convolution:\n"
                                << *plan;
  const int64_t inner = r.want.numel() / (r.want.shape()[0] * c.m);
  ExpectCloseOrOneStep(r, c.requantize, [&](int64_t i) {
    return c.channel_y ? 0.01f * static_cast<float>(1 + (i / inner) % c.m % 7) : 0.05f;
  });
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, QConvKernelTest,
    ::testing::Values(
        QConvCase{{2, 8, 9, 9}, 16, 3, 1, 1, 1, false, true, true, false},
        QConvCase{{1, 16, 12, 12}, 16, 3, 2, 1, 16, false, true, true, false},
        QConvCase{{1, 8, 7, 7}, 24, 1, 1, 0, 1, true, true, false, false},
        QConvCase{{1, 6, 8, 8}, 12, 3, 1, 1, 2, true, false, true, false},
        QConvCase{{2, 8, 10, 10}, 8, 3, 1, 1, 1, false, true, true, true},
        QConvCase{{2, 8, 9, 9}, 16, 3, 1, 1, 1, false, true, true, false, true},
        QConvCase{{1, 16, 12, 12}, 16, 3, 2, 1, 16, true, true, true, false, true},
        // ReLU6 before the absorbed QuantizeLinear (MobileNetV2): its bound is
        // in float units, so the division by y_scale must come after it.
        QConvCase{{2, 8, 9, 9}, 16, 1, 1, 0, 1, false, true, true, false, true, true},
        QConvCase{{1, 16, 10, 10}, 16, 3, 1, 1, 16, false, true, true, false, true, true},
        QConvCase{{2, 24, 10, 10}, 24, 3, 1, 1, 24, false, true, true, false, false, false, true},
        QConvCase{{1, 16, 11, 11}, 16, 5, 2, 2, 16, false, true, false, false, false, false, true},
        // Per-channel X scales on depthwise convolutions (uint8 and int8 sources), and
        // per-channel requantization (ReLU6 before it: not scale-invariant).
        QConvCase{
            {2, 24, 10, 10}, 24, 3, 1, 1, 24, false, true, true, false, false, false, false, true},
        QConvCase{
            {1, 16, 12, 12}, 16, 3, 2, 1, 16, true, true, true, false, false, false, false, true},
        QConvCase{
            {2, 8, 9, 9}, 16, 1, 1, 0, 1, false, true, true, false, true, true, false, false, true},
        QConvCase{{1, 16, 10, 10},
                  16,
                  3,
                  1,
                  1,
                  16,
                  true,
                  true,
                  true,
                  false,
                  true,
                  false,
                  false,
                  true,
                  true},
        // HardSigmoid (a linear step and a clip) before the requantization, dense and depthwise.
        WithHardSigmoid(QConvCase{{2, 8, 9, 9}, 16, 3, 1, 1, 1, false, true, true, false, true}),
        WithHardSigmoid(QConvCase{
            {1, 16, 10, 10}, 16, 3, 1, 1, 16, false, true, true, false, true}),
        // ONNX Runtime's asymmetric activations: X with a zero point (uint8 100 and 128; int8
        // -20 and 37, fed to oneDNN as uint8), padded, strided, depthwise, residual, requantized.
        WithXZero(QConvCase{{2, 8, 9, 9}, 16, 3, 1, 1, 1, false, true, true, false}, 100),
        WithXZero(QConvCase{{1, 6, 8, 8}, 12, 3, 2, 1, 2, true, false, true, false}, -20),
        WithXZero(QConvCase{{1, 16, 12, 12}, 16, 3, 2, 1, 16, false, true, true, false}, 128),
        WithXZero(QConvCase{{1, 16, 11, 11}, 16, 5, 1, 2, 16, true, true, false, false}, 37),
        WithXZero(QConvCase{{2, 8, 10, 10}, 8, 3, 1, 1, 1, false, true, true, true}, 100),
        WithXZero(QConvCase{{2, 8, 9, 9}, 16, 1, 1, 0, 1, true, true, true, false, true}, -20),
        // ONNX Runtime's int8 activations: zero point -128 after the ReLU (and -20 on X).
        WithInt8YZero(
            WithXZero(QConvCase{{2, 8, 9, 9}, 16, 3, 1, 1, 1, true, true, true, false, true}, -20),
            -128),
        WithInt8YZero(QConvCase{{1, 16, 10, 10}, 16, 3, 1, 1, 16, true, true, true, false, true},
                      -128),
        // ... and before a residual Add: no activation, zero point 16 in int8 (moved to uint8
        // 144 by qdq_int8_to_uint8) or 100 in uint8: oneDNN's destination zero point.
        AsymmetricY(WithXZero(QConvCase{{2, 8, 9, 9}, 16, 1, 1, 0, 1, false, true, true, false},
                              100),
                    true, 16),
        AsymmetricY(QConvCase{{2, 8, 9, 9}, 16, 3, 2, 1, 1, false, true, true, false}, false, 100),
        AsymmetricY(QConvCase{{1, 16, 10, 10}, 16, 3, 1, 1, 16, false, true, true, false}, true,
                    -5),
        // ... with one requantization scale and zero point per output channel.
        PerChannelY(AsymmetricY(QConvCase{{2, 8, 9, 9}, 16, 3, 1, 1, 1, false, true, true, false},
                                false, 100)),
        PerChannelY(AsymmetricY(
            QConvCase{{1, 16, 10, 10}, 16, 3, 1, 1, 16, false, true, true, false}, true, -5))));

// qdq_int8_to_uint8: an int8 QuantizeLinear/DequantizeLinear pair with a zero point becomes uint8
// with the zero point + 128, exactly (every value of the float result the same); symmetric int8
// (zero point 0) and a pair whose reader is not a DequantizeLinear stay int8.
TEST(QdqInt8ToUint8, ShiftsAsymmetricInt8ActivationsExactly) {
  for (int zero : {-128, -100, 5, 0}) {
    SCOPED_TRACE("zero point " + std::to_string(zero));
    ModelBuilder mb(13);
    mb.Input("x", kF32, {2, 3, 5, 5}).OutputAnyShape("y", kF32);
    mb.FloatInit("s", {}, {0.037f});
    ZeroPoints(mb, "z", true, 0, zero);
    mb.Node("QuantizeLinear", {"x", "s", "z"}, {"xq"});
    mb.Node("DequantizeLinear", {"xq", "s", "z"}, {"xd"});
    mb.Node("Relu", {"xd"}, {"y"});
    // Values up to well beyond the int8 range on both sides, and halfway cases.
    std::vector<float> v = Uniform(150, 3, -7.f, 7.f);
    for (size_t i = 0; i < 20; ++i) v[i] = 0.037f * (static_cast<float>(i) - 10.f + 0.5f);
    RefAndFast r;
    RunRefAndFast(mb.Bytes(), Tensor::FromVector<float>(v, {2, 3, 5, 5}), &r);
    if (HasFatalFailure()) return;
    const bool moved = r.plan.find("uint8[2,3,5,5]") != std::string::npos;
    EXPECT_EQ(moved, zero != 0) << r.plan;
    for (int64_t i = 0; i < r.want.numel(); ++i)
      ASSERT_EQ(r.got.data<float>()[i], r.want.data<float>()[i]) << "[" << i << "] " << v[i];
  }
}

// fuse_qdq_add: a residual Add with Q/DQ on every side (ONNX Runtime's quantize_static) becomes
// kiln.QAdd, bit for bit the unfused graph's result. A comes from a 1x1 convolution that only
// scales and permutes channels (exact in float32, so the fast and reference convolutions agree;
// the CPU keeps its output in a oneDNN layout) or from the input; B from the input (plain), so
// the operands arrive in different layouts; either order.
struct QAddCase {
  bool a_signed;
  int a_zero;
  bool b_signed;
  int b_zero;
  bool y_signed;
  int y_zero;
  bool relu, a_from_conv, swap;
};

class QAddKernelTest : public ::testing::TestWithParam<QAddCase> {};

TEST_P(QAddKernelTest, FusesAndMatchesTheUnfusedGraphExactly) {
  const QAddCase& c = GetParam();
  const int64_t ch = 8;
  ModelBuilder mb(13);
  mb.Input("x", kF32, {2, ch, 6, 6}).OutputAnyShape("y", kF32);
  std::string a_src = "x";
  if (c.a_from_conv) {
    std::vector<float> w(static_cast<size_t>(ch * ch), 0.f);
    for (int64_t o = 0; o < ch; ++o) w[o * ch + (o * 3 + 1) % ch] = o % 2 ? 0.5f : -2.f;
    mb.FloatInit("w", {ch, ch, 1, 1}, w);
    mb.Node("Conv", {"x", "w"}, {"a"});
    a_src = "a";
  }
  mb.FloatInit("sa", {}, {0.031f});
  ZeroPoints(mb, "za", c.a_signed, 0, c.a_zero);
  mb.FloatInit("sb", {}, {0.017f});
  ZeroPoints(mb, "zb", c.b_signed, 0, c.b_zero);
  mb.FloatInit("sy", {}, {0.043f});
  ZeroPoints(mb, "zy", c.y_signed, 0, c.y_zero);
  mb.Node("QuantizeLinear", {a_src, "sa", "za"}, {"aq"});
  mb.Node("DequantizeLinear", {"aq", "sa", "za"}, {"ad"});
  mb.Node("QuantizeLinear", {"x", "sb", "zb"}, {"bq"});
  mb.Node("DequantizeLinear", {"bq", "sb", "zb"}, {"bd"});
  mb.Node("Add",
          c.swap ? std::vector<std::string>{"bd", "ad"} : std::vector<std::string>{"ad", "bd"},
          {"s"});
  if (c.relu) mb.Node("Relu", {"s"}, {"r"});
  mb.Node("QuantizeLinear", {c.relu ? "r" : "s", "sy", "zy"}, {"yq"});
  mb.Node("DequantizeLinear", {"yq", "sy", "zy"}, {"y"});
  std::vector<float> v = Uniform(static_cast<size_t>(2 * ch * 36), 31, -4.f, 4.f);
  // Halfway cases of B's and A's scales.
  for (size_t i = 0; i < 16; ++i) v[i] = 0.017f * (static_cast<float>(i) - 8.f + 0.5f);
  RefAndFast r;
  RunRefAndFast(mb.Bytes(), Tensor::FromVector<float>(v, {2, ch, 6, 6}), &r);
  if (HasFatalFailure()) return;
  EXPECT_NE(r.plan.find("cpu.qadd.loop"), std::string::npos) << r.plan;
  EXPECT_EQ(r.plan.find("cpu.add."), std::string::npos) << r.plan;
  EXPECT_EQ(r.plan.find("Relu '"), std::string::npos) << r.plan;
  int64_t clipped = 0;
  double lo = c.y_signed ? -128 : 0, hi = c.y_signed ? 127 : 255;
  for (int64_t i = 0; i < r.want.numel(); ++i) {
    ASSERT_EQ(r.got.data<float>()[i], r.want.data<float>()[i]) << "[" << i << "]";
    const double q = std::nearbyint(r.want.data<float>()[i] / 0.043) + c.y_zero;
    clipped += q <= lo || q >= hi;
  }
  // (Zero point -128 without the ReLU clips the negative half, as the removed ReLU would.)
  EXPECT_LT(clipped, r.want.numel() * 2 / 3) << "the sums should mostly lie inside Y's range";
}

INSTANTIATE_TEST_SUITE_P(
    Operands, QAddKernelTest,
    ::testing::Values(
        // ONNX Runtime's ResNet: int8 operands with zero points (uint8 after qdq_int8_to_uint8),
        // the result after a removed ReLU at zero point -128.
        QAddCase{true, 16, true, -128, true, -128, false, true, false},
        QAddCase{true, 11, true, 16, true, -128, false, true, true},
        QAddCase{false, 100, false, 0, false, 0, true, true, false},
        QAddCase{false, 128, true, 0, true, 5, false, false, false},
        QAddCase{true, 0, false, 77, false, 128, true, false, true},
        QAddCase{true, 0, true, 0, true, 0, false, true, true}));

// fuse_qconv_add: a residual block's last convolution in int8 (QDQ on its input, weights and
// output) whose output only feeds the residual QAdd becomes one QConvAdd; the fast kernel (a
// oneDNN post-op chain: A rounded and clipped on its grid, then the sum post-op reading R, the
// Relu, 1 / y_scale) against the unfused graph's reference. Even weights, so the halved weights
// of CPUs without VNNI are exact: what differs is only where the float reference and oneDNN's
// integer accumulation round a tie apart, one step of A or Y.
struct QConvAddCase {
  bool r_signed;
  int r_zero;
  bool y_signed;
  int y_zero;
  bool relu;
  std::string conv_act = "";  // the convolution's own activation before A's QuantizeLinear
  int64_t ch = 16;  // channels (8: oneDNN's AVX-512 int8 convolutions pick another kernel)
};

class QConvAddKernelTest : public ::testing::TestWithParam<QConvAddCase> {};

TEST_P(QConvAddKernelTest, FusesAndMatchesTheUnfusedGraph) {
  const QConvAddCase& c = GetParam();
  const int64_t ch = c.ch;
  ModelBuilder mb(13);
  mb.Input("x", kF32, {2, ch, 6, 6}).OutputAnyShape("y", kF32);
  mb.FloatInit("sx", {}, {0.02f});
  ZeroPoints(mb, "zx", false, 0, 128);
  mb.Node("QuantizeLinear", {"x", "sx", "zx"}, {"xq"});
  mb.Node("DequantizeLinear", {"xq", "sx", "zx"}, {"xd"});
  Int8Init(mb, "wq", {ch, ch, 3, 3},
           [](int64_t i) { return 2 * static_cast<int>((i * 37) % 127) - 126; });
  mb.FloatInit("sw", {ch}, ChannelScales(ch, 0.0003f));
  mb.FloatInit("b", {ch}, Uniform(ch, 6, -1.f, 1.f));
  ModelBuilder::IntAttr(mb.Node("DequantizeLinear", {"wq", "sw"}, {"w"}), "axis", 0);
  ModelBuilder::IntsAttr(mb.Node("Conv", {"xd", "w", "b"}, {"c"}), "pads", {1, 1, 1, 1});
  std::string a = "c";
  if (c.conv_act == "Relu") {
    mb.Node("Relu", {"c"}, {"a"});
    a = "a";
  } else if (c.conv_act == "Silu") {
    mb.Node("Sigmoid", {"c"}, {"g"});
    mb.Node("Mul", {"c", "g"}, {"a"});
    a = "a";
  } else if (c.conv_act == "Clip") {
    mb.FloatInit("lo", {}, {0.f});
    mb.FloatInit("hi", {}, {1.f});
    mb.Node("Clip", {"c", "lo", "hi"}, {"a"});
    a = "a";
  }
  mb.FloatInit("sa", {}, {0.05f});
  ZeroPoints(mb, "za", true, 0, 3);
  mb.Node("QuantizeLinear", {a, "sa", "za"}, {"aq"});
  mb.Node("DequantizeLinear", {"aq", "sa", "za"}, {"ad"});
  mb.FloatInit("sr", {}, {0.017f});
  ZeroPoints(mb, "zr", c.r_signed, 0, c.r_zero);
  mb.Node("QuantizeLinear", {"x", "sr", "zr"}, {"rq"});
  mb.Node("DequantizeLinear", {"rq", "sr", "zr"}, {"rd"});
  mb.Node("Add", {"ad", "rd"}, {"s"});
  if (c.relu) mb.Node("Relu", {"s"}, {"r"});
  mb.FloatInit("sy", {}, {0.043f});
  ZeroPoints(mb, "zy", c.y_signed, 0, c.y_zero);
  mb.Node("QuantizeLinear", {c.relu ? "r" : "s", "sy", "zy"}, {"yq"});
  mb.Node("DequantizeLinear", {"yq", "sy", "zy"}, {"y"});
  RefAndFast r;
  RunRefAndFast(mb.Bytes(),
                Tensor::FromVector<float>(Uniform(2 * ch * 36, 42, -2.f, 2.f), {2, ch, 6, 6}), &r);
  if (HasFatalFailure()) return;
  // Clip's bound means something else in A's units: that convolution stays a QConv.
  const bool fused = c.conv_act != "Clip";
  EXPECT_EQ(r.plan.find("cpu.qconvadd.onednn") != std::string::npos, fused) << r.plan;
  EXPECT_EQ(r.plan.find("QAdd '") == std::string::npos, fused) << r.plan;
  int64_t off = 0, nonzero = 0;
  for (int64_t i = 0; i < r.want.numel(); ++i) {
    const float d = std::fabs(r.got.data<float>()[i] - r.want.data<float>()[i]);
    ASSERT_LE(d, 0.043f * 1.01f) << "[" << i << "] " << r.got.data<float>()[i] << " vs "
                                 << r.want.data<float>()[i];
    off += d > 0;
    nonzero += r.want.data<float>()[i] != 0.f;
  }
  EXPECT_LT(off, r.want.numel() / 100) << "values a step off";
  EXPECT_GT(nonzero, r.want.numel() / 4) << "the outputs should not be mostly zero";
}

INSTANTIATE_TEST_SUITE_P(Operands, QConvAddKernelTest,
                         ::testing::Values(QConvAddCase{false, 0, false, 0, true},
                                           QConvAddCase{true, 0, false, 0, true},
                                           QConvAddCase{true, -5, true, 7, false},
                                           QConvAddCase{false, 120, true, 0, false},
                                           QConvAddCase{false, 0, false, 0, true, "Relu"},
                                           QConvAddCase{true, -5, true, 7, false, "Relu"},
                                           QConvAddCase{false, 0, false, 0, true, "Clip"},
                                           QConvAddCase{false, 125, false, 0, false, "", 8},
                                           QConvAddCase{true, -3, true, -128, false, "", 8},
                                           QConvAddCase{false, 0, false, 0, true, "Relu", 8},
                                           // SiLU (YOLOv8's bottlenecks): swish with alpha a_scale
                                           QConvAddCase{false, 0, false, 0, true, "Silu"},
                                           QConvAddCase{true, -5, true, 7, false, "Silu"},
                                           QConvAddCase{false, 125, false, 0, false, "Silu", 8}));

// fuse_qconv_dw: a 1x1 convolution in int8 whose quantized output A only feeds a 3x3 depthwise one
// (a MobileNetV2 block's expansion and depthwise convolution) becomes one QConvDw, whose kernel
// runs the depthwise convolution as a oneDNN post-op of the 1x1 one. Its result must be the two
// QConv kernels' bit for bit (the same roundings of A and Y), its reference kernel the unfused
// QDQ graph's reference bit for bit, and the fast result the reference's but for values one step
// of Y apart (ties rounded apart). Even 1x1 weights, so the halved weights of CPUs without VNNI
// are exact. A zero point on A or Y is not what oneDNN's depthwise post-op takes: no fusion. The
// source is uint8 or int8.
struct QConvDwCase {
  int64_t stride;
  std::string expand_act;  // "Clip" (ReLU6), "Relu"
  std::string dw_act;      // "Clip", "" (ShuffleNet: Y signed)
  int64_t m = 24;          // expanded channels (not a multiple of oneDNN's 16-channel blocks)
  int a_zero = 0, y_zero = 0;
  bool x_signed = false;
};

class QConvDwKernelTest : public ::testing::TestWithParam<QConvDwCase> {};

TEST_P(QConvDwKernelTest, FusesAndMatchesTheTwoQConvs) {
  const QConvDwCase& c = GetParam();
  const int64_t ch = 8, m = c.m;
  ModelBuilder mb(13);
  mb.Input("x", kF32, {2, ch, 11, 11}).OutputAnyShape("y", kF32);
  mb.FloatInit("sx", {}, {0.02f});
  ZeroPoints(mb, "zx", c.x_signed, 0, 0);
  mb.Node("QuantizeLinear", {"x", "sx", "zx"}, {"xq"});
  mb.Node("DequantizeLinear", {"xq", "sx", "zx"}, {"xd"});
  Int8Init(mb, "w1", {m, ch, 1, 1},
           [](int64_t i) { return 2 * static_cast<int>((i * 37) % 127) - 126; });
  mb.FloatInit("sw1", {m}, ChannelScales(m, 0.0004f));
  mb.FloatInit("b1", {m}, Uniform(static_cast<size_t>(m), 7, -0.5f, 0.5f));
  ModelBuilder::IntAttr(mb.Node("DequantizeLinear", {"w1", "sw1"}, {"w1d"}), "axis", 0);
  mb.Node("Conv", {"xd", "w1d", "b1"}, {"c1"});
  mb.FloatInit("lo", {}, {0.f});
  mb.FloatInit("hi", {}, {6.f});
  if (c.expand_act == "Clip")
    mb.Node("Clip", {"c1", "lo", "hi"}, {"a1"});
  else
    mb.Node("Relu", {"c1"}, {"a1"});
  mb.FloatInit("sa", {}, {0.011f});
  ZeroPoints(mb, "za", false, 0, c.a_zero);
  mb.Node("QuantizeLinear", {"a1", "sa", "za"}, {"aq"});
  mb.Node("DequantizeLinear", {"aq", "sa", "za"}, {"ad"});
  Int8Init(mb, "w2", {m, 1, 3, 3},
           [](int64_t i) { return static_cast<int>((i * 53) % 255) - 127; });
  mb.FloatInit("sw2", {m}, ChannelScales(m, 0.002f));
  mb.FloatInit("b2", {m}, Uniform(static_cast<size_t>(m), 8, -0.3f, 0.3f));
  ModelBuilder::IntAttr(mb.Node("DequantizeLinear", {"w2", "sw2"}, {"w2d"}), "axis", 0);
  auto& dw = mb.Node("Conv", {"ad", "w2d", "b2"}, {"c2"});
  ModelBuilder::IntsAttr(dw, "pads", {1, 1, 1, 1});
  ModelBuilder::IntsAttr(dw, "strides", {c.stride, c.stride});
  ModelBuilder::IntAttr(dw, "group", m);
  const bool y_signed = c.dw_act.empty();
  if (c.dw_act == "Clip") mb.Node("Clip", {"c2", "lo", "hi"}, {"a2"});
  mb.FloatInit("sy", {}, {0.023f});
  ZeroPoints(mb, "zy", y_signed, 0, c.y_zero);
  mb.Node("QuantizeLinear", {c.dw_act.empty() ? "c2" : "a2", "sy", "zy"}, {"yq"});
  mb.Node("DequantizeLinear", {"yq", "sy", "zy"}, {"y"});
  const std::string bytes = mb.Bytes();
  const Tensor x = Tensor::FromVector<float>(
      Uniform(static_cast<size_t>(2 * ch * 121), 43, -2.f, 2.f), {2, ch, 11, 11});
  RefAndFast r;
  RunRefAndFast(bytes, x, &r);
  if (HasFatalFailure()) return;
  const bool fusable = c.a_zero == 0 && c.y_zero == 0;
  EXPECT_EQ(r.plan.find("cpu.qconvdw.onednn") != std::string::npos, fusable) << r.plan;
  ExpectCloseOrOneStep(r, true, [](int64_t) { return 0.023f; });
  int64_t nonzero = 0;
  for (int64_t i = 0; i < r.want.numel(); ++i) nonzero += r.want.data<float>()[i] != 0.f;
  EXPECT_GT(nonzero, r.want.numel() / 4) << "the outputs should not be mostly zero";
  if (!fusable) return;
  // The two QConv kernels (the pass off) and the fused reference kernel (optimized graph,
  // reference kernels only) against the fused kernel and the unfused reference.
  auto run = [&](SessionOptions o, Tensor* y, std::string* plan) {
    auto s = Session::LoadFromBytes(bytes, o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    auto p = (*s)->DescribePlan({{"x", x}});
    ASSERT_TRUE(p.ok());
    *plan = *p;
    std::vector<NamedTensor> out;
    ASSERT_TRUE((*s)->Run({{"x", x}}, &out).ok());
    *y = out[0].tensor;
  };
  SessionOptions apart;
  apart.disabled_passes = {"fuse_qconv_dw"};
  SessionOptions fused_ref;
  fused_ref.reference_only = true;
  Tensor y_apart, y_fused_ref;
  std::string plan_apart, plan_fused_ref;
  run(apart, &y_apart, &plan_apart);
  run(fused_ref, &y_fused_ref, &plan_fused_ref);
  if (HasFatalFailure()) return;
  EXPECT_EQ(plan_apart.find("QConvDw"), std::string::npos) << plan_apart;
  EXPECT_NE(plan_fused_ref.find("QConvDw"), std::string::npos) << plan_fused_ref;
  ASSERT_EQ(y_apart.shape(), r.got.shape());
  ASSERT_EQ(y_fused_ref.shape(), r.want.shape());
  const size_t bytes_out = static_cast<size_t>(r.got.numel()) * sizeof(float);
  EXPECT_EQ(std::memcmp(y_apart.raw(), r.got.raw(), bytes_out), 0)
      << "the fused kernel differs from the two QConv kernels";
  EXPECT_EQ(std::memcmp(y_fused_ref.raw(), r.want.raw(), bytes_out), 0)
      << "QConvDw's reference kernel differs from the unfused graph's reference";
}

INSTANTIATE_TEST_SUITE_P(Blocks, QConvDwKernelTest,
                         ::testing::Values(QConvDwCase{1, "Clip", "Clip"},
                                           QConvDwCase{2, "Clip", "Clip"},
                                           QConvDwCase{1, "Relu", ""},
                                           QConvDwCase{2, "Relu", "", 32},
                                           QConvDwCase{1, "Clip", "Clip", 24, 3, 0},
                                           QConvDwCase{2, "Clip", "", 24, 0, 5},
                                           QConvDwCase{1, "Clip", "Clip", 24, 0, 0, true}));

// What fuse_qdq_add leaves alone: a broadcast operand, and an Add whose float result is also read
// elsewhere. Both still run (float Add) and match the reference.
TEST(QAddPass, LeavesBroadcastsAndSharedSumsFloat) {
  for (bool broadcast : {true, false}) {
    SCOPED_TRACE(broadcast ? "broadcast" : "shared sum");
    ModelBuilder mb(13);
    mb.Input("x", kF32, {1, 4, 5, 5}).OutputAnyShape("y", kF32);
    mb.FloatInit("s", {}, {0.05f});
    ZeroPoints(mb, "z", false, 0, 128);
    mb.Node("QuantizeLinear", {"x", "s", "z"}, {"xq"});
    mb.Node("DequantizeLinear", {"xq", "s", "z"}, {"xd"});
    std::string other = "xd";
    if (broadcast) {
      Int8Init(mb, "cq", {1, 4, 1, 1}, [](int64_t i) { return static_cast<int>(i * 9 - 20); });
      mb.Node("DequantizeLinear", {"cq", "s"}, {"cd"});
      other = "cd";
    }
    mb.Node("Add", {"xd", other}, {"sum"});
    mb.Node("QuantizeLinear", {"sum", "s", "z"}, {"yq"});
    mb.Node("DequantizeLinear", {"yq", "s", "z"}, {"yd"});
    if (broadcast)
      mb.Node("Identity", {"yd"}, {"y"});
    else
      mb.Node("Mul", {"yd", "sum"}, {"y"});
    RefAndFast r;
    RunRefAndFast(mb.Bytes(), Tensor::FromVector<float>(Uniform(100, 4, -3.f, 3.f), {1, 4, 5, 5}),
                  &r);
    if (HasFatalFailure()) return;
    EXPECT_EQ(r.plan.find("QAdd"), std::string::npos) << r.plan;
    for (int64_t i = 0; i < r.want.numel(); ++i)
      EXPECT_NEAR(r.got.data<float>()[i], r.want.data<float>()[i], 1e-5f) << "[" << i << "]";
  }
}

// DequantizeLinear -> MaxPool -> QuantizeLinear with one scale and zero point: MaxPool on the
// 8-bit values (oneDNN's int8 pooling) alone, exactly the float result.
TEST(QdqMaxPool, PoolsTheQuantizedValuesExactly) {
  for (bool is_signed : {false, true})
    for (bool same_scale : {true, false}) {
      SCOPED_TRACE(std::string(is_signed ? "int8" : "uint8") +
                   (same_scale ? ", one scale" : ", two scales"));
      ModelBuilder mb(13);
      mb.Input("x", kF32, {2, 16, 9, 9}).OutputAnyShape("y", kF32);
      mb.FloatInit("s", {}, {0.03f});
      mb.FloatInit("s2", {}, {same_scale ? 0.03f : 0.04f});
      // (int8 with a zero point would become uint8 first: qdq_int8_to_uint8.)
      ZeroPoints(mb, "z", is_signed, 0, is_signed ? 0 : 131);
      mb.Node("QuantizeLinear", {"x", "s", "z"}, {"xq"});
      mb.Node("DequantizeLinear", {"xq", "s", "z"}, {"xd"});
      auto& pool = mb.Node("MaxPool", {"xd"}, {"p"});
      ModelBuilder::IntsAttr(pool, "kernel_shape", {3, 3});
      ModelBuilder::IntsAttr(pool, "strides", {2, 2});
      ModelBuilder::IntsAttr(pool, "pads", {1, 1, 1, 1});
      mb.Node("QuantizeLinear", {"p", "s2", "z"}, {"pq"});
      mb.Node("DequantizeLinear", {"pq", "s2", "z"}, {"y"});
      RefAndFast r;
      RunRefAndFast(mb.Bytes(),
                    Tensor::FromVector<float>(Uniform(2 * 16 * 81, 12, -3.f, 3.f), {2, 16, 9, 9}),
                    &r);
      if (HasFatalFailure()) return;
      // Another scale after it: the MaxPool still pools the 8-bit values, the DequantizeLinear
      // moved after it, and the QuantizeLinear stays.
      const std::string want = std::string("cpu.maxpool.onednn ") + (is_signed ? "int8" : "uint8");
      EXPECT_NE(r.plan.find(want), std::string::npos) << r.plan;
      EXPECT_EQ(r.plan.find("QuantizeLinear 'QuantizeLinear4'") == std::string::npos, same_scale)
          << r.plan;
      for (int64_t i = 0; i < r.want.numel(); ++i)
        ASSERT_EQ(r.got.data<float>()[i], r.want.data<float>()[i]) << "[" << i << "]";
    }
}

// Concat of DequantizeLinears with one scale and zero point (shared scales: `kiln quantize`,
// NNCF's unified ones) joins the 8-bit values; a QuantizeLinear of the same scale after it goes,
// another scale's stays (the DequantizeLinear moves after the Concat). Inputs with different
// scales are left float. Every case exactly the reference's result.
TEST(QdqConcat, JoinsTheQuantizedValuesWhenTheScalesAreShared) {
  // 5x5: small inputs (cpu.concat.copy); 64x64: oneDNN's concat.
  for (int64_t side : {5, 64})
    for (bool is_signed : {false, true})
      for (int variant :
           {0, 1, 2}) {  // 0: one scale throughout; 1: another after; 2: inputs differ
        SCOPED_TRACE(std::to_string(side) + "x" + std::to_string(side) + ", " +
                     (is_signed ? "int8" : "uint8") + ", variant " + std::to_string(variant));
        ModelBuilder mb(13);
        mb.Input("x", kF32, {2, 4, side, side}).OutputAnyShape("y", kF32);
        mb.FloatInit("s", {}, {0.03f});
        mb.FloatInit("sb", {}, {variant == 2 ? 0.02f : 0.03f});
        mb.FloatInit("s2", {}, {variant == 1 ? 0.05f : 0.03f});
        mb.FloatInit("half", {}, {0.5f});
        ZeroPoints(mb, "z", is_signed, 0, is_signed ? 0 : 120);
        mb.Node("QuantizeLinear", {"x", "s", "z"}, {"aq"});
        mb.Node("DequantizeLinear", {"aq", "s", "z"}, {"ad"});
        mb.Node("Mul", {"x", "half"}, {"xh"});
        mb.Node("QuantizeLinear", {"xh", "sb", "z"}, {"bq"});
        mb.Node("DequantizeLinear", {"bq", "sb", "z"}, {"bd"});
        ModelBuilder::IntAttr(mb.Node("Concat", {"ad", "bd", "ad"}, {"c"}), "axis", 1);
        mb.Node("QuantizeLinear", {"c", "s2", "z"}, {"cq"});
        mb.Node("DequantizeLinear", {"cq", "s2", "z"}, {"y"});
        RefAndFast r;
        RunRefAndFast(mb.Bytes(),
                      Tensor::FromVector<float>(Uniform(2 * 4 * side * side, 21, -5.f, 5.f),
                                                {2, 4, side, side}),
                      &r);
        if (HasFatalFailure()) return;
        const std::string eight = is_signed ? "int8" : "uint8";
        const std::string kernel = side == 5 ? "cpu.concat.copy " : "cpu.concat.onednn ";
        const bool joined = r.plan.find(kernel + eight) != std::string::npos;
        EXPECT_EQ(joined, variant != 2) << r.plan;
        // The QuantizeLinear after the Concat goes only when its scale is the inputs'.
        EXPECT_EQ(r.plan.find("QuantizeLinear 'QuantizeLinear7'") == std::string::npos,
                  variant == 0)
            << r.plan;
        ASSERT_EQ(r.want.numel(), 2 * 12 * side * side);
        for (int64_t i = 0; i < r.want.numel(); ++i)
          ASSERT_EQ(r.got.data<float>()[i], r.want.data<float>()[i]) << "[" << i << "]";
      }
}

// DequantizeLinear -> an op that only moves values (Split, Resize in mode nearest, Transpose,
// Reshape, Flatten, Unsqueeze, Slice, DepthToSpace) -> QuantizeLinear of the same scale: the op on
// the 8-bit values, no QuantizeLinear left; with another scale after it the DequantizeLinear moves
// after the op and the QuantizeLinear stays. Resize in mode linear is left float (it computes new
// values). Every case exactly the reference's result.
TEST(QdqPassThrough, MovesTheQuantizedValuesExactly) {
  for (const std::string op : {"Split", "Resize", "ResizeLinear", "Transpose", "Reshape", "Flatten",
                               "Unsqueeze", "Slice", "DepthToSpace"})
    for (bool is_signed : {false, true})
      for (bool same_scale : {true, false}) {
        SCOPED_TRACE(op + (is_signed ? ", int8" : ", uint8") +
                     (same_scale ? ", one scale" : ", two scales"));
        ModelBuilder mb(13);
        mb.Input("x", kF32, {2, 16, 8, 8}).OutputAnyShape("y", kF32);
        mb.FloatInit("s", {}, {0.03f});
        mb.FloatInit("s2", {}, {same_scale ? 0.03f : 0.04f});
        ZeroPoints(mb, "z", is_signed, 0, is_signed ? 0 : 131);
        mb.Node("QuantizeLinear", {"x", "s", "z"}, {"xq"});
        mb.Node("DequantizeLinear", {"xq", "s", "z"}, {"xd"});
        if (op == "Split") {
          // The second half, then joined float after its own Q/DQ pair.
          mb.Int64Init("sizes", {2}, {6, 10});
          ModelBuilder::IntAttr(mb.Node("Split", {"xd", "sizes"}, {"a", "p"}, "moved"), "axis", 1);
        } else if (op == "Resize" || op == "ResizeLinear") {
          mb.FloatInit("scales", {4}, {1.f, 1.f, 2.f, 2.f});
          auto& r = mb.Node("Resize", {"xd", "", "scales"}, {"p"}, "moved");
          auto* m = r.add_attribute();
          m->set_name("mode");
          m->set_type(onnx::AttributeProto::STRING);
          m->set_s(op == "Resize" ? "nearest" : "linear");
        } else if (op == "Transpose") {
          ModelBuilder::IntsAttr(mb.Node("Transpose", {"xd"}, {"p"}, "moved"), "perm",
                                 {0, 2, 3, 1});
        } else if (op == "Reshape") {
          mb.Int64Init("shape", {3}, {0, 4, 256});
          mb.Node("Reshape", {"xd", "shape"}, {"p"}, "moved");
        } else if (op == "Flatten") {
          ModelBuilder::IntAttr(mb.Node("Flatten", {"xd"}, {"p"}, "moved"), "axis", 2);
        } else if (op == "Unsqueeze") {
          mb.Int64Init("axes", {1}, {1});
          mb.Node("Unsqueeze", {"xd", "axes"}, {"p"}, "moved");
        } else if (op == "Slice") {  // channels 2..11, every other column
          mb.Int64Init("starts", {2}, {2, 0});
          mb.Int64Init("ends", {2}, {12, 8});
          mb.Int64Init("axes", {2}, {1, 3});
          mb.Int64Init("steps", {2}, {1, 2});
          mb.Node("Slice", {"xd", "starts", "ends", "axes", "steps"}, {"p"}, "moved");
        } else {
          ModelBuilder::IntAttr(mb.Node("DepthToSpace", {"xd"}, {"p"}, "moved"), "blocksize", 2);
        }
        mb.Node("QuantizeLinear", {"p", "s2", "z"}, {"pq"}, "after");
        mb.Node("DequantizeLinear", {"pq", "s2", "z"}, {"pd"});
        mb.FloatInit("two", {}, {2.f});
        mb.Node("Mul", {"pd", "two"}, {"y"});
        RefAndFast r;
        RunRefAndFast(mb.Bytes(),
                      Tensor::FromVector<float>(Uniform(2 * 16 * 64, 31, -4.f, 4.f), {2, 16, 8, 8}),
                      &r);
        if (HasFatalFailure()) return;
        const std::string eight = is_signed ? "int8" : "uint8";
        const bool moved = op != "ResizeLinear";
        const size_t at = r.plan.find("'moved' -> ");
        ASSERT_NE(at, std::string::npos) << r.plan;
        const std::string line = r.plan.substr(at, r.plan.find('\n', at) - at);
        EXPECT_EQ(line.find(" " + eight + "[") != std::string::npos, moved) << r.plan;
        EXPECT_EQ(r.plan.find("QuantizeLinear 'after'") == std::string::npos, moved && same_scale)
            << r.plan;
        ASSERT_EQ(r.got.numel(), r.want.numel());
        // Linear (float, oneDNN against the reference) may round a value one step apart.
        const float tol = moved ? 0.f : 2.f * (same_scale ? 0.03f : 0.04f) + 1e-5f;
        for (int64_t i = 0; i < r.want.numel(); ++i)
          ASSERT_LE(std::fabs(r.got.data<float>()[i] - r.want.data<float>()[i]), tol)
              << "[" << i << "]";
      }
}

// A DequantizeLinear whose value a Shape and a QuantizeLinear of the same scale read (PyTorch's
// ShuffleNet: the channel shuffle's Reshape target comes from Shape of the Concat): the
// QuantizeLinear goes (its readers read the 8-bit values), and with the Shape folded into a
// constant at planning the DequantizeLinear step is dropped too. Exactly the reference's result.
TEST(QdqRequantize, DropsAQuantizeOfTheSameScaleAndTheUnreadDequantize) {
  for (bool same_scale : {true, false}) {
    SCOPED_TRACE(same_scale ? "one scale" : "two scales");
    ModelBuilder mb(13);
    mb.Input("x", kF32, {2, 16, 8, 8}).OutputAnyShape("y", kF32);
    mb.FloatInit("s", {}, {0.03f});
    mb.FloatInit("s2", {}, {same_scale ? 0.03f : 0.04f});
    ZeroPoints(mb, "z", false, 0, 131);
    mb.Int64Init("zero", {}, {0});
    mb.Int64Init("axes", {1}, {0});
    mb.Int64Init("rest", {2}, {16, 64});
    mb.Node("QuantizeLinear", {"x", "s", "z"}, {"xq"});
    mb.Node("DequantizeLinear", {"xq", "s", "z"}, {"xd"}, "dq");
    mb.Node("Shape", {"xd"}, {"shape"});
    mb.Node("Gather", {"shape", "zero"}, {"batch"});
    mb.Node("Unsqueeze", {"batch", "axes"}, {"batch1"});
    ModelBuilder::IntAttr(mb.Node("Concat", {"batch1", "rest"}, {"target"}), "axis", 0);
    mb.Node("QuantizeLinear", {"xd", "s2", "z"}, {"pq"}, "again");
    mb.Node("DequantizeLinear", {"pq", "s2", "z"}, {"pd"});
    mb.Node("Reshape", {"pd", "target"}, {"r"}, "moved");
    mb.FloatInit("two", {}, {2.f});
    mb.Node("Mul", {"r", "two"}, {"y"});
    RefAndFast r;
    RunRefAndFast(mb.Bytes(),
                  Tensor::FromVector<float>(Uniform(2 * 16 * 64, 33, -4.f, 4.f), {2, 16, 8, 8}),
                  &r);
    if (HasFatalFailure()) return;
    EXPECT_EQ(r.plan.find("QuantizeLinear 'again'") == std::string::npos, same_scale) << r.plan;
    EXPECT_EQ(r.plan.find("DequantizeLinear 'dq'") == std::string::npos, same_scale) << r.plan;
    EXPECT_EQ(r.plan.find("unread steps dropped") != std::string::npos, same_scale) << r.plan;
    ASSERT_EQ(r.got.numel(), r.want.numel());
    for (int64_t i = 0; i < r.want.numel(); ++i)
      ASSERT_EQ(r.got.data<float>()[i], r.want.data<float>()[i]) << "[" << i << "]";
  }
}

// NNCF's form: DequantizeLinear -> MaxPool -> Conv with no QuantizeLinear after the MaxPool (it
// is on the grid already). The DequantizeLinear moves after the MaxPool, which then pools the
// 8-bit values, and the convolution sees a dequantized input: an int8 QConv.
TEST(QdqMaxPool, MovesTheDequantizeAfterItSoTheConvolutionBecomesInt8) {
  ModelBuilder mb(13);
  mb.Input("x", kF32, {2, 8, 9, 9}).OutputAnyShape("y", kF32);
  mb.FloatInit("s", {}, {0.03f});
  ZeroPoints(mb, "z", false, 0, 0);
  std::mt19937 rng(3);
  Int8Init(mb, "wq", {8, 8, 3, 3}, [&](int64_t) { return 2 * static_cast<int>(rng() % 63) - 62; });
  mb.FloatInit("sw", {}, {0.004f});
  mb.Node("QuantizeLinear", {"x", "s", "z"}, {"xq"});
  mb.Node("DequantizeLinear", {"xq", "s", "z"}, {"xd"});
  auto& pool = mb.Node("MaxPool", {"xd"}, {"p"});
  ModelBuilder::IntsAttr(pool, "kernel_shape", {2, 2});
  mb.Node("DequantizeLinear", {"wq", "sw"}, {"wd"});
  ModelBuilder::IntsAttr(mb.Node("Conv", {"p", "wd"}, {"c"}), "pads", {1, 1, 1, 1});
  mb.Node("Relu", {"c"}, {"y"});
  RefAndFast r;
  RunRefAndFast(mb.Bytes(),
                Tensor::FromVector<float>(Uniform(2 * 8 * 81, 13, -1.f, 3.f), {2, 8, 9, 9}), &r);
  if (HasFatalFailure()) return;
  EXPECT_NE(r.plan.find("cpu.maxpool.onednn uint8"), std::string::npos) << r.plan;
  EXPECT_NE(r.plan.find("cpu.qconv.onednn"), std::string::npos) << r.plan;
  EXPECT_EQ(r.plan.find("DequantizeLinear '"), std::string::npos) << r.plan;
  ExpectCloseOrOneStep(r, false, [](int64_t) { return 0.f; });
}

// A QDQ matrix product: Q/DQ on A, DQ on an int8 B (even values up to +-126, so the halved
// weights of CPUs without VNNI are exact), MatMul [-> Add] or Gemm, [-> Relu] [-> Q/DQ]. A's
// quantized values span the whole uint8/int8 range: with B up to +-126 a 16-bit pair sum
// (vpmaddubsw) would saturate, so a kernel that forgets to halve B without VNNI fails.
struct QMatMulCase {
  Shape a;
  int64_t n;
  bool gemm, trans_b, a_signed, per_column, bias, relu;
  int a_zero = 0;           // A's zero point (ONNX Runtime's asymmetric activations)
  bool requantize = false;  // -> QuantizeLinear -> DequantizeLinear: QMatMul writes uint8/int8
  int y_zero = 0;           // the requantization's zero point (int8 when relu is false)
  float alpha = 1.f, beta = 1.f;
  bool hard_sigmoid = false;  // HardSigmoid(0.3, 0.4) after relu's place: a linear step and a clip
};

class QMatMulKernelTest : public ::testing::TestWithParam<QMatMulCase> {};

TEST_P(QMatMulKernelTest, MatchesReference) {
  const QMatMulCase& c = GetParam();
  ModelBuilder mb(13);
  mb.Input("x", kF32, c.a).OutputAnyShape("y", kF32);
  const int64_t k = c.a.back();
  const Shape ws = c.trans_b ? Shape{c.n, k} : Shape{k, c.n};
  std::mt19937 rng(7);
  Int8Init(mb, "wq", ws, [&](int64_t) { return 2 * static_cast<int>(rng() % 127) - 126; });
  if (c.per_column) {
    std::vector<float> sw(static_cast<size_t>(c.n));
    for (int64_t i = 0; i < c.n; ++i) sw[i] = 0.0005f * static_cast<float>(1 + i % 5);
    mb.FloatInit("sw", {c.n}, sw);
  } else {
    mb.FloatInit("sw", {}, {0.001f});
  }
  mb.FloatInit("sx", {}, {0.02f});
  auto* zx = mb.proto().mutable_graph()->add_initializer();
  zx->set_name("zx");
  zx->set_data_type(c.a_signed ? onnx::TensorProto::INT8 : onnx::TensorProto::UINT8);
  zx->set_raw_data(std::string(1, static_cast<char>(c.a_zero)));
  mb.Node("QuantizeLinear", {"x", "sx", "zx"}, {"xq"});
  mb.Node("DequantizeLinear", {"xq", "sx", "zx"}, {"xd"});
  auto& dq = mb.Node("DequantizeLinear", {"wq", "sw"}, {"wd"});
  if (c.per_column) ModelBuilder::IntAttr(dq, "axis", c.trans_b ? 0 : 1);
  if (c.bias) mb.FloatInit("b", {c.n}, Uniform(static_cast<size_t>(c.n), 6, -2.f, 2.f));
  std::string last = "p";
  if (c.gemm) {
    std::vector<std::string> ins = {"xd", "wd"};
    if (c.bias) ins.push_back("b");
    auto& g = mb.Node("Gemm", ins, {"p"});
    ModelBuilder::IntAttr(g, "transB", c.trans_b ? 1 : 0);
    auto* alpha = g.add_attribute();
    alpha->set_name("alpha");
    alpha->set_type(onnx::AttributeProto::FLOAT);
    alpha->set_f(c.alpha);
    auto* beta = g.add_attribute();
    beta->set_name("beta");
    beta->set_type(onnx::AttributeProto::FLOAT);
    beta->set_f(c.beta);
  } else {
    mb.Node("MatMul", {"xd", "wd"}, {"p"});
    if (c.bias) {
      mb.Node("Add", {"p", "b"}, {"pb"});
      last = "pb";
    }
  }
  if (c.relu) {
    mb.Node("Relu", {last}, {"r"});
    last = "r";
  } else if (c.hard_sigmoid) {
    auto& hs = mb.Node("HardSigmoid", {last}, {"r"});
    ModelBuilder::FloatAttr(hs, "alpha", 0.3f);
    ModelBuilder::FloatAttr(hs, "beta", 0.4f);
    last = "r";
  }
  const bool unsigned_y = c.relu || c.hard_sigmoid;
  if (c.requantize) {
    mb.FloatInit("sy", {}, {c.hard_sigmoid ? 0.004f : 0.05f});
    auto* zy = mb.proto().mutable_graph()->add_initializer();
    zy->set_name("zy");
    zy->set_data_type(unsigned_y ? onnx::TensorProto::UINT8 : onnx::TensorProto::INT8);
    zy->set_raw_data(std::string(1, static_cast<char>(c.y_zero)));
    mb.Node("QuantizeLinear", {last, "sy", "zy"}, {"yq"});
    mb.Node("DequantizeLinear", {"yq", "sy", "zy"}, {"y"});
  } else {
    mb.Node("Identity", {last}, {"y"});
  }
  const std::string bytes = mb.Bytes();
  // A's quantized values over the whole range: x / 0.02 + zero point in [-128, 127] or [0, 255].
  const float lo = (c.a_signed ? -128.f : 0.f) - static_cast<float>(c.a_zero);
  Tensor x = Tensor::FromVector<float>(
      Uniform(static_cast<size_t>(NumElements(c.a)), 9, 0.02f * lo, 0.02f * (lo + 255.f)), c.a);
  RefAndFast r;
  RunRefAndFast(bytes, x, &r);
  if (HasFatalFailure()) return;
  const std::string* plan = &r.plan;
  // An int8 requantization with a zero point is written as uint8 (qdq_int8_to_uint8).
  EXPECT_NE(plan->find(c.requantize ? (unsigned_y || c.y_zero != 0 ? "cpu.qmatmul.onednn uint8"
                                                                   : "cpu.qmatmul.onednn int8")
                                    : "cpu.qmatmul.onednn float32"),
            std::string::npos)
      << *plan;
  for (const char* op : {"  Add '", "  Relu '", "  HardSigmoid '", "  Gemm '", "  MatMul '"})
    EXPECT_EQ(plan->find(op), std::string::npos) << op << " should be fused:\n" << *plan;
  // Only the output's DequantizeLinear (requantized) may remain.
  const size_t dq_at = plan->find("  DequantizeLinear '");
  EXPECT_EQ(dq_at == std::string::npos, !c.requantize) << *plan;
  if (dq_at != std::string::npos) {
    EXPECT_EQ(plan->find("  DequantizeLinear '", dq_at + 1), std::string::npos);
  }
  ExpectCloseOrOneStep(r, c.requantize, [&](int64_t) { return c.hard_sigmoid ? 0.004f : 0.05f; });
  float range = 0;
  for (int64_t i = 0; i < r.want.numel(); ++i)
    range = std::max(range, std::fabs(r.want.data<float>()[i]));
  EXPECT_GT(range, c.hard_sigmoid ? 0.5f : 1.f) << "the outputs should not be all (near) zero";
}

// Gemm with alpha 0 (Y = beta * C) is left float: its scales would be 0, and the int8 kernel's
// bias goes in divided by them. The pass folds its weight's DequantizeLinear (kept for it by
// fold_constants) into a float32 constant of the optimized graph, so the plan has nothing left to
// fold.
TEST(QMatMulPass, LeavesAlphaZeroGemmFloat) {
  ModelBuilder mb(13);
  mb.Input("x", kF32, {2, 8}).OutputAnyShape("y", kF32);
  Int8Init(mb, "wq", {8, 4}, [](int64_t) { return 6; });
  mb.FloatInit("sw", {}, {0.01f});
  mb.FloatInit("sx", {}, {0.02f});
  mb.FloatInit("c", {4}, {1.f, 2.f, 3.f, 4.f});
  ZeroPoints(mb, "zx", true, 0);
  mb.Node("QuantizeLinear", {"x", "sx", "zx"}, {"xq"});
  mb.Node("DequantizeLinear", {"xq", "sx", "zx"}, {"xd"});
  mb.Node("DequantizeLinear", {"wq", "sw"}, {"wd"});
  auto& g = mb.Node("Gemm", {"xd", "wd", "c"}, {"y"});
  auto* alpha = g.add_attribute();
  alpha->set_name("alpha");
  alpha->set_type(onnx::AttributeProto::FLOAT);
  alpha->set_f(0.f);
  RefAndFast r;
  RunRefAndFast(mb.Bytes(), Tensor::FromVector<float>(Uniform(16, 3), {2, 8}), &r);
  if (HasFatalFailure()) return;
  EXPECT_EQ(r.plan.find("QMatMul"), std::string::npos) << r.plan;
  const size_t dq_at = r.plan.find("  DequantizeLinear '");  // the input's
  EXPECT_NE(dq_at, std::string::npos) << r.plan;
  EXPECT_EQ(r.plan.find("  DequantizeLinear '", dq_at + 1), std::string::npos) << r.plan;
  EXPECT_NE(r.plan.find(" 0 nodes folded into constants"), std::string::npos)
      << "the weight's DequantizeLinear should be folded by the optimizer:\n"
      << r.plan;
  ExpectCloseOrOneStep(r, false, [](int64_t) { return 0.f; });
  EXPECT_FLOAT_EQ(r.got.data<float>()[3], 4.f);
}

// A hand-written kiln.QMatMul whose inputs do not fit (b_scale not [N], a float A) is refused,
// at load or when its plan is made, with a message naming the node and the rule.
TEST(QMatMulPass, MalformedNodeIsRefusedAtLoad) {
  for (const bool float_a : {false, true}) {
    ModelBuilder mb(13);
    auto* kiln = mb.proto().add_opset_import();
    kiln->set_domain("kiln");
    kiln->set_version(1);
    mb.Input("a", float_a ? kF32 : onnx::TensorProto::UINT8, {2, 8}).OutputAnyShape("y", kF32);
    Int8Init(mb, "b", {8, 4}, [](int64_t i) { return static_cast<int>(i % 7); });
    mb.FloatInit("sa", {}, {0.1f});
    mb.FloatInit("sb", {float_a ? 4 : 3},
                 float_a ? std::vector<float>{0.1f, 0.1f, 0.1f, 0.1f}
                         : std::vector<float>{0.1f, 0.1f, 0.1f});
    mb.Node("QMatMul", {"a", "sa", "", "b", "sb"}, {"y"}, "qm").set_domain("kiln");
    auto s = Session::LoadFromBytes(mb.Bytes(), SessionOptions{});
    std::string msg = s.status().ToString();
    if (s.ok()) {  // shapes are checked when a plan is made
      std::vector<NamedTensor> out;
      Tensor a = float_a ? Tensor::FromVector<float>(Uniform(16, 1), {2, 8})
                         : Tensor::Empty(DataType::kUInt8, {2, 8});
      Status r = (*s)->Run({{"a", a}}, &out);
      ASSERT_FALSE(r.ok());
      msg = r.ToString();
    }
    EXPECT_NE(msg.find("qm"), std::string::npos) << msg;
    EXPECT_NE(msg.find(float_a ? "Aq must be uint8 or int8" : "b_scale must be [N] with N = 4"),
              std::string::npos)
        << msg;
  }
}

// A hand-written kiln.QConvDw that breaks its rules (too few inputs, a stride of 0, an unknown
// depthwise activation, depthwise weights with two channels per group, A's scale per channel)
// is refused at load or when its plan is made, with a message naming the node and the rule.
TEST(QConvDwOp, MalformedNodeIsRefusedWithItsRule) {
  struct Bad {
    const char* what;
    std::string expect;
  };
  for (const Bad& b :
       {Bad{"inputs", "QConvDw takes 14 inputs; got 13"}, Bad{"stride", "dw_strides must be >= 1"},
        Bad{"activation", "dw_activation must be empty or one of"},
        Bad{"weights", "Wd must be int8 [M, 1, k...] with M = 8"},
        Bad{"a_scale", "a_scale and a_zero_point must be one element each"}}) {
    SCOPED_TRACE(b.what);
    const std::string what = b.what;
    ModelBuilder mb(13);
    auto* kiln = mb.proto().add_opset_import();
    kiln->set_domain("kiln");
    kiln->set_version(1);
    mb.Input("x", onnx::TensorProto::UINT8, {1, 4, 6, 6}).OutputAnyShape("y", kF32);
    mb.FloatInit("sx", {}, {0.1f});
    Int8Init(mb, "w1", {8, 4, 1, 1}, [](int64_t i) { return static_cast<int>(i % 5); });
    mb.FloatInit("sw1", {8}, ChannelScales(8, 0.01f));
    const int64_t m_a = what == "a_scale" ? 8 : 0;
    mb.FloatInit("sa", m_a ? Shape{m_a} : Shape{}, std::vector<float>(m_a ? 8 : 1, 0.05f));
    ZeroPoints(mb, "za", false, m_a);
    Int8Init(mb, "wd", {8, what == "weights" ? 2 : 1, 3, 3},
             [](int64_t i) { return static_cast<int>(i % 9) - 4; });
    mb.FloatInit("swd", {8}, ChannelScales(8, 0.02f));
    mb.FloatInit("sy", {}, {0.1f});
    ZeroPoints(mb, "zy", false, 0);
    std::vector<std::string> in = {"x",  "sx", "",   "w1",  "sw1", "",   "",
                                   "sa", "za", "wd", "swd", "",    "sy", "zy"};
    if (what == "inputs") in.pop_back();
    auto& n = mb.Node("QConvDw", in, {"q"}, "dw");
    n.set_domain("kiln");
    ModelBuilder::IntsAttr(n, "dw_strides", {what == "stride" ? 0 : 1, 1});
    ModelBuilder::IntsAttr(n, "dw_pads", {1, 1, 1, 1});
    if (what == "activation") ModelBuilder::StringAttr(n, "dw_activation", "Bogus");
    mb.Node("DequantizeLinear", {"q", "sy", "zy"}, {"y"});
    auto s = Session::LoadFromBytes(mb.Bytes(), SessionOptions{});
    std::string msg = s.status().ToString();
    if (s.ok()) {  // shapes are checked when a plan is made
      std::vector<NamedTensor> out;
      Status r = (*s)->Run({{"x", Tensor::Empty(DataType::kUInt8, {1, 4, 6, 6})}}, &out);
      ASSERT_FALSE(r.ok());
      msg = r.ToString();
    }
    EXPECT_NE(msg.find("dw"), std::string::npos) << msg;
    EXPECT_NE(msg.find(b.expect), std::string::npos) << msg;
  }
}

// DequantizeLinear -> AveragePool / GlobalAveragePool -> QuantizeLinear (ONNX Runtime's and NNCF's
// form) runs as kiln.QAveragePool on oneDNN's int8 pooling: against the unfused graph's reference,
// equal but for values one output step off (a rounding tie), at most 0.5 % of them; QAveragePool's
// own reference kernel (optimized graph, reference kernels only) equal to the unfused graph's
// reference bit for bit.
struct QPoolCase {
  std::string pool;  // "AveragePool" or "GlobalAveragePool"
  Shape x;
  bool is_signed = false;
  int x_zero = 0, y_zero = 0;
  std::vector<int64_t> kernel = {3, 3}, strides = {1, 1}, pads = {0, 0, 0, 0};
  bool include_pad = false;
  bool fused = true;                                    // whether the pass makes a QAveragePool
  const char* kernel_name = "cpu.qaveragepool.onednn";  // the fast plan's kernel for it
  bool y_signed = false;                                // Y int8 whatever X is
};
constexpr float kQPoolYScale = 0.0337f;

void PrintTo(const QPoolCase& c, std::ostream* os) {
  *os << c.pool << " " << ShapeToString(c.x) << (c.is_signed ? " s8" : " u8") << " zp " << c.x_zero
      << "/" << c.y_zero << (c.include_pad ? " count_include_pad" : "");
}

class QAveragePoolTest : public ::testing::TestWithParam<QPoolCase> {};

TEST_P(QAveragePoolTest, MatchesTheUnfusedGraph) {
  const QPoolCase& c = GetParam();
  ModelBuilder mb(13);
  mb.Input("x", kF32, c.x).OutputAnyShape("y", kF32);
  // Scales whose ratio is no simple fraction, so few means sit on a rounding tie.
  mb.FloatInit("sx", {}, {0.031f});
  mb.FloatInit("sy", {}, {kQPoolYScale});
  ZeroPoints(mb, "zx", c.is_signed, 0, c.x_zero);
  ZeroPoints(mb, "zy", c.is_signed || c.y_signed, 0, c.y_zero);
  mb.Node("QuantizeLinear", {"x", "sx", "zx"}, {"xq"});
  mb.Node("DequantizeLinear", {"xq", "sx", "zx"}, {"xd"});
  auto& p = mb.Node(c.pool, {"xd"}, {"p"}, "pool");
  if (c.pool == "AveragePool") {
    ModelBuilder::IntsAttr(p, "kernel_shape", c.kernel);
    ModelBuilder::IntsAttr(p, "strides", c.strides);
    ModelBuilder::IntsAttr(p, "pads", c.pads);
    if (c.include_pad) ModelBuilder::IntAttr(p, "count_include_pad", 1);
  }
  mb.Node("QuantizeLinear", {"p", "sy", "zy"}, {"pq"});
  mb.Node("DequantizeLinear", {"pq", "sy", "zy"}, {"y"});
  const std::string bytes = mb.Bytes();
  // Inputs over most of the 8-bit range around the zero point; each (n, c) plane centred on its
  // own level, so that the means spread over many output steps.
  const float lo = c.is_signed ? -3.5f : (0 - c.x_zero) * 0.031f,
              hi = c.is_signed ? 3.5f : (255 - c.x_zero) * 0.031f;
  std::vector<float> xv = Uniform(NumElements(c.x), 31, 0.f, 0.5f);
  const int64_t plane = NumElements(c.x) / (c.x[0] * c.x[1]);
  for (size_t i = 0; i < xv.size(); ++i) {
    const double level = std::fmod(0.37 * static_cast<double>(i / plane), 0.5);
    xv[i] = lo + (hi - lo) * (xv[i] + static_cast<float>(level));
  }
  const Tensor x = Tensor::FromVector<float>(xv, c.x);
  RefAndFast r;
  RunRefAndFast(bytes, x, &r);
  if (HasFatalFailure()) return;
  EXPECT_EQ(r.plan.find("QAveragePool") != std::string::npos, c.fused) << r.plan;
  if (c.fused) {
    EXPECT_NE(r.plan.find(c.kernel_name), std::string::npos) << r.plan;
  }
  ExpectCloseOrOneStep(r, true, [](int64_t) { return kQPoolYScale; });
  int64_t distinct = 0;
  std::set<float> seen;
  for (int64_t i = 0; i < r.want.numel(); ++i)
    distinct += seen.insert(r.want.data<float>()[i]).second;
  EXPECT_GT(distinct, 8) << "the outputs should spread over many steps";
  if (!c.fused) return;
  SessionOptions fused_ref;
  fused_ref.reference_only = true;
  auto s = Session::LoadFromBytes(bytes, fused_ref);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  auto plan = (*s)->DescribePlan({{"x", x}});
  ASSERT_TRUE(plan.ok());
  EXPECT_NE(plan->find("QAveragePool"), std::string::npos) << *plan;
  std::vector<NamedTensor> out;
  ASSERT_TRUE((*s)->Run({{"x", x}}, &out).ok());
  ASSERT_EQ(out[0].tensor.shape(), r.want.shape());
  EXPECT_EQ(std::memcmp(out[0].tensor.raw(), r.want.raw(),
                        static_cast<size_t>(r.want.numel()) * sizeof(float)),
            0)
      << "QAveragePool's reference kernel differs from the unfused graph's reference";
}

INSTANTIATE_TEST_SUITE_P(
    Pools, QAveragePoolTest,
    ::testing::Values(
        // pool, x, signed, x zp, y zp, kernel, strides, pads, include_pad, fused, kernel
        QPoolCase{"GlobalAveragePool", {2, 64, 7, 7}, false, 0, 0},
        QPoolCase{"GlobalAveragePool", {2, 40, 5, 5}, false, 128, 100},
        QPoolCase{"GlobalAveragePool", {3, 24, 6, 6}, true, 0, 0},
        QPoolCase{"GlobalAveragePool", {2, 16, 9}, true, -10, 5},  // one spatial dim
        QPoolCase{"AveragePool", {2, 32, 9, 9}, false, 120, 110, {3, 3}, {2, 2}, {1, 1, 1, 1}},
        QPoolCase{"AveragePool", {2, 16, 8, 8}, true, 0, 0, {2, 2}, {2, 2}},
        QPoolCase{"AveragePool", {1, 24, 7, 7}, false, 0, 0, {3, 3}, {1, 1}, {1, 1, 1, 1}, true},
        // Padded taps counted with a zero point: oneDNN would pad with code 0; left unfused.
        QPoolCase{"AveragePool",
                  {1, 24, 7, 7},
                  false,
                  100,
                  100,
                  {3, 3},
                  {1, 1},
                  {1, 1, 1, 1},
                  true,
                  false},
        // Y int8 from a uint8 X: QAveragePool on its reference kernel (oneDNN pools one type).
        QPoolCase{"AveragePool",
                  {1, 8, 6, 6},
                  false,
                  0,
                  0,
                  {2, 2},
                  {1, 1},
                  {0, 0, 0, 0},
                  false,
                  true,
                  "cpu.qaveragepool.ref",
                  true}));

// A hand-written kiln.QAveragePool that breaks its rules: named in the error, never a crash.
TEST(QAveragePoolOp, MalformedNodeIsRefusedWithItsRule) {
  struct Bad {
    const char* what;
    std::string expect;
  };
  for (const Bad& b :
       {Bad{"pool", "QAveragePool's pool must be"},
        Bad{"inputs", "QAveragePool takes 5 inputs; got 4"},
        Bad{"kernel", "kernel_shape is required"}, Bad{"float", "X must be uint8 or int8"},
        Bad{"y_zero", "y_zero_point must be one uint8 or int8 element"}}) {
    SCOPED_TRACE(b.what);
    const std::string what = b.what;
    ModelBuilder mb(13);
    mb.ImportDomain("kiln", 1);
    const auto xt = what == "float" ? kF32 : onnx::TensorProto::UINT8;
    mb.Input("x", xt, {1, 4, 6, 6}).OutputAnyShape("y", onnx::TensorProto::UINT8);
    mb.FloatInit("s", {}, {0.1f});
    ZeroPoints(mb, "z", false, what == "y_zero" ? 2 : 0);
    std::vector<std::string> in = {"x", "s", "", "s", "z"};
    if (what == "inputs") in.pop_back();
    auto& n = mb.Node("QAveragePool", in, {"y"}, "qp", "kiln");
    ModelBuilder::StringAttr(n, "pool", what == "pool" ? "MaxPool" : "AveragePool");
    ModelBuilder::IntAttr(n, "pool_opset", 13);
    if (what != "kernel") ModelBuilder::IntsAttr(n, "kernel_shape", {2, 2});
    auto s = Session::LoadFromBytes(mb.Bytes(), SessionOptions{});
    std::string msg = s.status().ToString();
    if (s.ok()) {
      std::vector<NamedTensor> out;
      Tensor x = what == "float" ? Tensor::FromVector<float>(Uniform(144, 1), {1, 4, 6, 6})
                                 : Tensor::Empty(DataType::kUInt8, {1, 4, 6, 6});
      Status r = (*s)->Run({{"x", x}}, &out);
      ASSERT_FALSE(r.ok());
      msg = r.ToString();
    }
    EXPECT_NE(msg.find("qp"), std::string::npos) << msg;
    EXPECT_NE(msg.find(b.expect), std::string::npos) << msg;
  }
}

// A hand-written kiln.QAdd that breaks its rules: named in the error, at load or at the first
// run (shapes are checked when a plan is made), never a crash.
TEST(QAddOp, MalformedNodeIsRefusedWithItsRule) {
  struct Bad {
    const char* what;
    Shape b;
    int a_type;
    const char* activation;
    bool drop_y_zero;
    const char* want;
  };
  const Bad cases[] = {
      {"float A", {1, 4, 3, 3}, kF32, "", false, "A must be uint8 or int8"},
      {"shapes differ",
       {1, 4, 3, 1},
       onnx::TensorProto::UINT8,
       "",
       false,
       "A and B must have one shape"},
      {"activation",
       {1, 4, 3, 3},
       onnx::TensorProto::UINT8,
       "Sigmoid",
       false,
       "QAdd's activation must be \"\" or \"Relu\""},
      {"7 inputs", {1, 4, 3, 3}, onnx::TensorProto::UINT8, "", true, "QAdd takes 8 inputs"},
  };
  for (const Bad& c : cases) {
    SCOPED_TRACE(c.what);
    ModelBuilder mb(13);
    auto* kiln = mb.proto().add_opset_import();
    kiln->set_domain("kiln");
    kiln->set_version(1);
    mb.Input("a", c.a_type, {1, 4, 3, 3}).OutputAnyShape("y", onnx::TensorProto::UINT8);
    mb.Input("b", onnx::TensorProto::UINT8, c.b);
    mb.FloatInit("s", {}, {0.1f});
    ZeroPoints(mb, "z", false, 0, 3);
    std::vector<std::string> ins = {"a", "s", "z", "b", "s", "z", "s", "z"};
    if (c.drop_y_zero) ins.pop_back();
    auto& n = mb.Node("QAdd", ins, {"y"}, "qa", "kiln");
    if (*c.activation) ModelBuilder::StringAttr(n, "activation", c.activation);
    auto s = Session::LoadFromBytes(mb.Bytes(), SessionOptions{});
    std::string msg = s.status().ToString();
    if (s.ok()) {
      std::vector<NamedTensor> out;
      Tensor a = c.a_type == kF32 ? Tensor::FromVector<float>(Uniform(36, 1), {1, 4, 3, 3})
                                  : Tensor::Empty(DataType::kUInt8, {1, 4, 3, 3});
      Status r = (*s)->Run({{"a", a}, {"b", Tensor::Empty(DataType::kUInt8, c.b)}}, &out);
      ASSERT_FALSE(r.ok());
      msg = r.ToString();
    }
    EXPECT_NE(msg.find("qa"), std::string::npos) << msg;
    EXPECT_NE(msg.find(c.want), std::string::npos) << msg;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, QMatMulKernelTest,
    ::testing::Values(
        // a, n, gemm, trans_b, a_signed, per_column, bias, relu, a_zero, requantize, y_zero
        QMatMulCase{{4, 64}, 24, true, true, false, true, true, false},
        QMatMulCase{{3, 40}, 16, true, false, true, false, true, true},
        QMatMulCase{{2, 5, 48}, 32, false, false, false, true, true, true},
        QMatMulCase{{2, 3, 7, 32}, 8, false, false, true, true, false, false},
        // ONNX Runtime's asymmetric activations: zero points in A.
        QMatMulCase{{6, 96}, 40, true, true, false, true, true, false, 128},
        QMatMulCase{{2, 4, 64}, 16, false, false, true, true, true, false, -20},
        // Requantized outputs, with and without a zero point.
        QMatMulCase{{8, 64}, 24, true, true, false, true, true, true, 0, true},
        QMatMulCase{{2, 6, 32}, 16, false, false, true, true, true, false, 0, true, -5},
        QMatMulCase{{5, 64}, 20, true, true, false, true, true, true, 128, true, 10},
        // Gemm's alpha and beta.
        QMatMulCase{{4, 32}, 12, true, true, true, true, true, false, 0, false, 0, 0.5f, 2.f},
        // HardSigmoid before the requantization (its linear step and 1 / y_scale).
        QMatMulCase{
            {8, 64}, 24, true, true, false, true, true, false, 0, true, 0, 1.f, 1.f, true}));

// QOperator models (ONNX Runtime's quantize_static with QuantFormat.QOperator): QLinearConv,
// QLinearMatMul and the com.microsoft QLinear* operators. The optimizer expands each into
// DequantizeLinear -> float op -> QuantizeLinear (expand_qlinear), after which the QDQ fusions
// and fast kernels run it; the reference is the graph as written on the operators' own reference
// kernels (QLinearConv's integer arithmetic, ms_qlinear.cc's dequantize-compute-quantize). Every
// value equal but for values one output step off (a rounding tie), at most 0.5 % of them.
struct QOperatorCase {
  std::string op;     // the quantized operator
  std::string fused;  // a kernel the fast plan must contain ("" for none in particular)
  Shape x;
};

void PrintTo(const QOperatorCase& c, std::ostream* os) { *os << c.op; }

void Int32Init(ModelBuilder& mb, const std::string& name, const Shape& dims,
               const std::function<int32_t(int64_t)>& value) {
  auto* t = mb.proto().mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::INT32);
  for (int64_t d : dims) t->add_dims(d);
  for (int64_t i = 0; i < NumElements(dims); ++i) t->add_int32_data(value(i));
}

class QOperatorTest : public ::testing::TestWithParam<QOperatorCase> {};

TEST_P(QOperatorTest, ExpandedMatchesTheOperatorsReference) {
  const QOperatorCase& c = GetParam();
  ModelBuilder mb(13);
  mb.ImportDomain("com.microsoft", 1);
  mb.Input("x", kF32, c.x).OutputAnyShape("y", kF32);
  // Two uint8 views of x (scales 0.03 and 0.045, zero points 120 and 128), as ONNX Runtime's
  // asymmetric activations are; the output's scale 0.0517 (not a simple ratio of theirs, which
  // would put many averages exactly on a rounding tie), zero point 110.
  mb.FloatInit("sa", {}, {0.03f});
  mb.FloatInit("sb", {}, {0.045f});
  mb.FloatInit("sy", {}, {0.0517f});
  ZeroPoints(mb, "za", false, 0, 120);
  ZeroPoints(mb, "zb", false, 0, 128);
  ZeroPoints(mb, "zy", false, 0, 110);
  mb.Node("QuantizeLinear", {"x", "sa", "za"}, {"a"});
  mb.Node("QuantizeLinear", {"x", "sb", "zb"}, {"b"});
  const int64_t ch = c.x[1];
  const std::string ms = "com.microsoft";
  std::mt19937 rng(11);
  auto even = [&](int64_t) { return 2 * static_cast<int>(rng() % 127) - 126; };
  bool quantized = true;
  if (c.op == "QLinearConv") {
    const int64_t m = 16;
    Int8Init(mb, "w", {m, ch, 3, 3}, even);
    std::vector<float> sw;
    for (int64_t i = 0; i < m; ++i) sw.push_back(0.002f + 0.0003f * static_cast<float>(i));
    mb.FloatInit("sw", {m}, sw);
    ZeroPoints(mb, "zw", true, m, 0);
    Int32Init(mb, "bias", {m}, [](int64_t i) { return static_cast<int32_t>(i * 300 - 2000); });
    auto& n = mb.Node("QLinearConv", {"a", "sa", "za", "w", "sw", "zw", "sy", "zy", "bias"}, {"yq"},
                      "op");
    ModelBuilder::IntsAttr(n, "pads", {1, 1, 1, 1});
  } else if (c.op == "QLinearMatMul") {
    Int8Init(mb, "w", {c.x.back(), 24}, even);
    mb.FloatInit("sw", {}, {0.004f});
    ZeroPoints(mb, "zw", true, 0, 0);
    mb.Node("QLinearMatMul", {"a", "sa", "za", "w", "sw", "zw", "sy", "zy"}, {"yq"}, "op");
  } else if (c.op == "QLinearAdd" || c.op == "QLinearMul") {
    mb.Node(c.op, {"a", "sa", "za", "b", "sb", "zb", "sy", "zy"}, {"yq"}, "op", ms);
  } else if (c.op == "QLinearAdd-broadcast") {  // a constant per channel: stays float
    auto* t = mb.proto().mutable_graph()->add_initializer();
    t->set_name("k");
    t->set_data_type(onnx::TensorProto::UINT8);
    for (int64_t d : {int64_t{1}, ch, int64_t{1}, int64_t{1}}) t->add_dims(d);
    std::string raw;
    for (int64_t i = 0; i < ch; ++i) raw.push_back(static_cast<char>(100 + 7 * i));
    t->set_raw_data(raw);
    mb.Node("QLinearAdd", {"a", "sa", "za", "k", "sb", "zb", "sy", "zy"}, {"yq"}, "op", ms);
  } else if (c.op == "QLinearConcat") {
    ModelBuilder::IntAttr(
        mb.Node(c.op, {"sy", "zy", "a", "sa", "za", "b", "sb", "zb"}, {"yq"}, "op", ms), "axis", 1);
  } else if (c.op == "QGemm" || c.op == "QGemm-float") {
    // Gemm(A', B'^T) * 2 + C' * 2, B per column (transB: one scale per row of B).
    const int64_t n = 12;
    Int8Init(mb, "w", {n, c.x.back()}, even);
    std::vector<float> sw;
    for (int64_t i = 0; i < n; ++i) sw.push_back(0.003f + 0.0002f * static_cast<float>(i));
    mb.FloatInit("sw", {n}, sw);
    ZeroPoints(mb, "zw", true, n, 0);
    Int32Init(mb, "bias", {n}, [](int64_t i) { return static_cast<int32_t>(i * 150 - 900); });
    std::vector<std::string> in = {"a", "sa", "za", "w", "sw", "zw", "bias"};
    quantized = c.op == "QGemm";
    if (quantized) in.insert(in.end(), {"sy", "zy"});
    auto& g = mb.Node("QGemm", in, {quantized ? "yq" : "y"}, "op", ms);
    ModelBuilder::IntAttr(g, "transB", 1);
    ModelBuilder::FloatAttr(g, "alpha", 2.f);
  } else if (c.op == "QLinearSigmoid-no-output-zero-point") {  // uint8 with zero point 0
    mb.Node("QLinearSigmoid", {"a", "sa", "za", "sy"}, {"yq"}, "op", ms);
  } else {  // the unary ones
    auto& n = mb.Node(c.op, {"a", "sa", "za", "sy", "zy"}, {"yq"}, "op", ms);
    if (c.op == "QLinearLeakyRelu") ModelBuilder::FloatAttr(n, "alpha", 0.1f);
    if (c.op == "QLinearAveragePool") {
      ModelBuilder::IntsAttr(n, "kernel_shape", {3, 3});
      ModelBuilder::IntsAttr(n, "strides", {2, 2});
      ModelBuilder::IntsAttr(n, "pads", {1, 1, 1, 1});
    }
  }
  if (quantized) {
    const bool zero = c.op.find("no-output-zero-point") == std::string::npos;
    mb.Node(
        "DequantizeLinear",
        zero ? std::vector<std::string>{"yq", "sy", "zy"} : std::vector<std::string>{"yq", "sy"},
        {"y"});
  }
  RefAndFast r;
  RunRefAndFast(mb.Bytes(),
                Tensor::FromVector<float>(Uniform(NumElements(c.x), 21, -3.f, 3.f), c.x), &r);
  if (HasFatalFailure()) return;
  // Nothing is left on the quantized operators' reference kernels.
  EXPECT_EQ(r.plan.find("\n  QLinear"), std::string::npos) << r.plan;
  EXPECT_EQ(r.plan.find("\n  QGemm"), std::string::npos) << r.plan;
  if (!c.fused.empty()) {
    EXPECT_NE(r.plan.find(c.fused), std::string::npos) << r.plan;
  }
  ExpectCloseOrOneStep(r, quantized, [](int64_t) { return 0.0517f; });
}

INSTANTIATE_TEST_SUITE_P(
    Operators, QOperatorTest,
    ::testing::Values(QOperatorCase{"QLinearConv", "cpu.qconv.onednn", {2, 8, 9, 9}},
                      QOperatorCase{"QLinearMatMul", "cpu.qmatmul.onednn", {6, 32}},
                      QOperatorCase{"QLinearAdd", "cpu.qadd.loop", {2, 8, 5, 5}},
                      QOperatorCase{"QLinearAdd-broadcast", "", {2, 8, 5, 5}},
                      QOperatorCase{"QLinearMul", "", {2, 8, 5, 5}},
                      QOperatorCase{
                          "QLinearGlobalAveragePool", "cpu.qaveragepool.onednn", {2, 8, 5, 5}},
                      QOperatorCase{"QLinearAveragePool", "cpu.qaveragepool.onednn", {2, 8, 9, 9}},
                      QOperatorCase{"QLinearSigmoid", "", {2, 8, 5, 5}},
                      QOperatorCase{"QLinearSigmoid-no-output-zero-point", "", {2, 8, 5, 5}},
                      QOperatorCase{"QLinearLeakyRelu", "", {2, 8, 5, 5}},
                      QOperatorCase{"QLinearConcat", "", {2, 8, 5, 5}},
                      QOperatorCase{"QGemm", "cpu.qmatmul.onednn", {5, 32}},
                      QOperatorCase{"QGemm-float", "cpu.qmatmul.onednn", {5, 32}}),
    [](const ::testing::TestParamInfo<QOperatorCase>& i) {
      std::string n = i.param.op;
      for (char& ch : n)
        if (ch == '-') ch = '_';
      return n;
    });

// Malformed com.microsoft quantized operators are refused at load with the node and the rule.
TEST(QOperatorOp, MalformedNodesAreRefusedWithTheirRule) {
  struct Case {
    std::string what, want;
  };
  for (const Case& c : {Case{"too few inputs", "takes 7 to 8 inputs; got 5"},
                        Case{"float A", "input 0 must be uint8 or int8"},
                        Case{"y_zero_point without y_scale", "y_zero_point without y_scale"},
                        Case{"concat inputs", "(X, x_scale, x_zero_point) per input; got 6"}}) {
    SCOPED_TRACE(c.what);
    ModelBuilder mb(13);
    mb.ImportDomain("com.microsoft", 1);
    const bool float_a = c.what == "float A";
    mb.Input("x", float_a ? kF32 : onnx::TensorProto::UINT8, {1, 4})
        .OutputAnyShape("y", onnx::TensorProto::UINT8);
    mb.FloatInit("s", {}, {0.1f});
    ZeroPoints(mb, "z", false, 0, 3);
    const std::string ms = "com.microsoft";
    if (c.what == "too few inputs") {
      mb.Node("QLinearAdd", {"x", "s", "z", "x", "s"}, {"y"}, "bad", ms);
    } else if (float_a) {
      mb.Node("QLinearAdd", {"x", "s", "z", "x", "s", "z", "s", "z"}, {"y"}, "bad", ms);
    } else if (c.what == "concat inputs") {
      mb.Node("QLinearConcat", {"s", "z", "x", "s", "z", "x"}, {"y"}, "bad", ms);
    } else {
      Int8Init(mb, "w", {4, 4}, [](int64_t i) { return static_cast<int>(i); });
      mb.Node("QGemm", {"x", "s", "z", "w", "s", "", "", "", "z"}, {"y"}, "bad", ms);
    }
    // Arity and attributes are checked at load; types when shapes are inferred, at the first run.
    auto s = Session::LoadFromBytes(mb.Bytes(), SessionOptions{});
    Status st = s.ok() ? Status() : s.status();
    if (s.ok()) {
      ASSERT_TRUE(float_a) << "loaded";
      std::vector<NamedTensor> out;
      st = (*s)->Run({{"x", Tensor::FromVector<float>({1, 2, 3, 4}, {1, 4})}}, &out);
      ASSERT_FALSE(st.ok());
    }
    EXPECT_NE(st.message().find("'bad'"), std::string::npos) << st.ToString();
    EXPECT_NE(st.message().find(c.want), std::string::npos) << st.ToString();
  }
}

// A com.microsoft quantized operator kiln cannot take says what and why at load.
TEST(QOperatorOp, ChannelsLastIsRefusedWithItsReason) {
  ModelBuilder mb(13);
  mb.ImportDomain("com.microsoft", 1);
  mb.Input("x", onnx::TensorProto::UINT8, {1, 4, 3, 3})
      .OutputAnyShape("y", onnx::TensorProto::UINT8);
  mb.FloatInit("s", {}, {0.1f});
  ZeroPoints(mb, "z", false, 0, 3);
  ModelBuilder::IntAttr(
      mb.Node("QLinearGlobalAveragePool", {"x", "s", "z", "s", "z"}, {"y"}, "gap", "com.microsoft"),
      "channels_last", 1);
  auto s = Session::LoadFromBytes(mb.Bytes(), SessionOptions{});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kUnsupported) << s.status().ToString();
  EXPECT_NE(s.status().message().find("'gap'"), std::string::npos) << s.status().ToString();
  EXPECT_NE(s.status().message().find("channels_last"), std::string::npos) << s.status().ToString();
}

}  // namespace
}  // namespace kiln
