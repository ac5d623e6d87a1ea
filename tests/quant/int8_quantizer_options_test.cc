// The quantizer's options and refusals: bias correction, opset 12 conversion, chunked
// calibration runs, the layers kept float by default, method auto, the calibration cache and
// per-channel activation scales on depthwise inputs.
#include <gtest/gtest.h>

#include "int8_test_util.h"

namespace kiln {
namespace {

using namespace int8_test;  // NOLINT(build/namespaces): test helpers

// The mean of float minus int8 per channel of conv2's output over `data`, largest magnitude.
double LargestChannelShift(const std::string& fp, const std::string& q, const Tensor& data) {
  auto load = [](const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(f)), {});
    return LoadWithOutputs(bytes, {"c2"});
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

// Weights in an external-data file (exporters write large models that way): the quantizer reads
// them with the model, and the written model embeds every tensor (it needs no weights file).
TEST_F(QuantizerTest, QuantizesAModelWithExternalWeights) {
  onnx::ModelProto m;
  ASSERT_TRUE(m.ParseFromString(SmallCnn()));
  std::ofstream weights(dir_ / "weights.bin", std::ios::binary);
  int64_t offset = 0;
  for (auto& t : *m.mutable_graph()->mutable_initializer()) {
    if (t.data_type() != kF32) continue;
    std::string bytes = t.raw_data();
    if (bytes.empty())
      bytes.assign(reinterpret_cast<const char*>(t.float_data().data()), t.float_data_size() * 4);
    weights.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    t.clear_raw_data();
    t.clear_float_data();
    t.set_data_location(onnx::TensorProto::EXTERNAL);
    for (auto [k, v] : {std::pair<std::string, std::string>{"location", "weights.bin"},
                        {"offset", std::to_string(offset)},
                        {"length", std::to_string(bytes.size())}}) {
      auto* kv = t.add_external_data();
      kv->set_key(k);
      kv->set_value(v);
    }
    offset += static_cast<int64_t>(bytes.size());
  }
  weights.close();
  ASSERT_GT(offset, 0);
  std::ofstream(model_, std::ios::binary | std::ios::trunc) << m.SerializeAsString();
  const std::string out = (dir_ / "external.int8.onnx").string();
  QuantizeOptions o;
  o.quantize_all = true;
  auto s = Quantize(o, out);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->quantized_nodes, (std::vector<std::string>{"conv1", "conv2", "fc"}));
  ErrorAgainstFloat(out);
  std::filesystem::remove(dir_ / "weights.bin");
  onnx::ModelProto q;
  std::ifstream f(out, std::ios::binary);
  ASSERT_TRUE(q.ParseFromIstream(&f));
  for (const auto& t : q.graph().initializer())
    EXPECT_NE(t.data_location(), onnx::TensorProto::EXTERNAL) << t.name();
  auto alone = Session::Load(out);
  EXPECT_TRUE(alone.ok()) << alone.status().ToString();
}

// Opset 9 has no QuantizeLinear: the quantizer takes the model to 13 (ONNX's version converter to
// 12, then kiln's 12 -> 13 rewrites), runs the original and the converted model on the first
// calibration batch, and reports how far apart their outputs were.
TEST_F(QuantizerTest, ConvertsOpset9AndChecksBothForms) {
  std::ofstream(model_, std::ios::binary | std::ios::trunc) << SmallCnn(9);
  const std::string out = (dir_ / "cnn9.int8.onnx").string();
  QuantizeOptions o;
  o.quantize_all = true;
  auto s = Quantize(o, out);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->converted_from_opset, 9);
  EXPECT_TRUE(s->per_channel);
  EXPECT_GE(s->conversion_max_diff, 0.0);  // both forms ran
  EXPECT_LE(s->conversion_max_diff, 1e-5);
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
    auto fp = LoadWithOutputs(DepthwiseCnn(), {"c2"});
    std::ifstream f(out, std::ios::binary);
    auto qc = LoadWithOutputs(std::string(std::istreambuf_iterator<char>(f), {}), {"c2"});
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

}  // namespace
}  // namespace kiln
