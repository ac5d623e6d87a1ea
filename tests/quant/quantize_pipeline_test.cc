// The quantization pipeline behind `kiln quantize` (kiln/quantize.h): calibration samples,
// QuantizeWithCalibration and accuracy control, through the library, without the CLI.
#include "int8_test_util.h"
#include "kiln/tensor_io.h"

namespace kiln::int8_test {
namespace {

// A file of `rows` seeded samples [rows, 4, 10, 10] (SmallCnn's input) in `dir`.
std::string SamplesFile(const std::filesystem::path& dir, const std::string& name, int64_t rows) {
  const std::string path = (dir / name).string();
  const Tensor t =
      Tensor::FromVector<float>(Uniform(static_cast<size_t>(rows) * 400, 9), {rows, 4, 10, 10});
  EXPECT_TRUE(WriteNpyFile(t, path).ok());
  return path;
}

TensorSpec Input(const std::string& name) {
  TensorSpec t;
  t.name = name;
  t.dtype = DataType::kFloat;
  t.dims = {-1, 4, 10, 10};
  t.rank_known = true;
  return t;
}

TEST_F(QuantizerTest, CalibrationSamplesNameTheFileAndTheirRows) {
  QuantizeJob job;
  job.model = model_;
  job.calibrate = {"a=" + SamplesFile(dir_, "a.npy", 10), "b=" + SamplesFile(dir_, "b.npy", 7)};
  auto s = CalibrationSamples::Open(job, {Input("a"), Input("b")});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("'" + (dir_ / "b.npy").string() +
                                      "' (input 'b') holds 7 samples and '" +
                                      (dir_ / "a.npy").string() + "' 10"),
            std::string::npos)
      << s.status().ToString();

  job.calibrate = {SamplesFile(dir_, "empty.npy", 0)};
  s = CalibrationSamples::Open(job, {Input("x")});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("'" + (dir_ / "empty.npy").string() +
                                      "' holds no sample (samples run along dim 0)"),
            std::string::npos)
      << s.status().ToString();

  job.samples = 6;
  job.calibrate = {SamplesFile(dir_, "ok.npy", 10)};
  s = CalibrationSamples::Open(job, {Input("x")});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ((*s)->count(), 6);
  EXPECT_EQ((*s)->what(), "6 samples of '" + (dir_ / "ok.npy").string() + "'");
  bool held_out = false;
  auto hold = (*s)->HeldOut(8, &held_out);
  ASSERT_TRUE(hold.ok());
  EXPECT_TRUE(held_out);
  EXPECT_EQ((*hold)[0].tensor.shape()[0], 4);  // rows 6..9
}

TEST_F(QuantizerTest, QuantizeWithCalibrationReportsThroughTheCallbacks) {
  QuantizeJob job;
  job.model = model_;
  job.out = (dir_ / "q.onnx").string();
  job.calibrate = {SamplesFile(dir_, "calib.npy", 20)};
  job.samples = 12;
  job.batch = 5;
  std::vector<std::string> notes;
  QuantizeProgress progress;
  progress.note = [&](const std::string& s) { notes.push_back(s); };
  auto run = QuantizeWithCalibration(job, progress);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_FALSE((*run)->summary.quantized_nodes.empty());
  EXPECT_EQ((*run)->summary.samples, 12);
  ASSERT_FALSE(notes.empty());
  EXPECT_EQ(notes[0], "calibration data: 12 samples of '" + job.calibrate[0] + "'");
  EXPECT_EQ(notes.back().rfind("calibration pass ", 0), 0u) << notes.back();
  EXPECT_TRUE(std::filesystem::exists(job.out));
  auto cmp = CompareHeldOut(run->get(), job.batch);
  ASSERT_TRUE(cmp.ok()) << cmp.status().ToString();
  EXPECT_TRUE(cmp->held_out);

  job.calibrate = {(dir_ / "none.npy").string()};
  auto missing = QuantizeWithCalibration(job);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

// y = [x0 - x1, x1 - x0] (one Gemm): calibrated on +-100, the held-out rows [0.1, 0.2] quantize
// to zeros, so the int8 argmax is 0 where float's is 1, with the only node int8.
std::string TieGemm() {
  ModelBuilder mb(13);
  mb.Input("x", kF32, {-1, 2}).Output("y", kF32, {-1, 2});
  mb.FloatInit("w", {2, 2}, {1.f, -1.f, -1.f, 1.f});
  ModelBuilder::IntAttr(mb.Node("Gemm", {"x", "w"}, {"y"}, "fc"), "transB", 1);
  return mb.Bytes();
}

TEST_F(QuantizerTest, AccuracyControlRefusesAnImpossibleTarget) {
  QuantizeJob job;
  job.model = (dir_ / "tie.onnx").string();
  std::ofstream(job.model, std::ios::binary) << TieGemm();
  job.out = (dir_ / "tie_q.onnx").string();
  job.calibrate = {(dir_ / "tie.npy").string()};
  std::vector<float> rows = {100.f, -100.f, -100.f, 100.f};
  for (int i = 0; i < 6; ++i) rows.insert(rows.end(), {0.1f, 0.2f});
  ASSERT_TRUE(WriteNpyFile(Tensor::FromVector<float>(rows, {8, 2}), job.calibrate[0]).ok());
  job.samples = 2;
  job.options.method = "minmax";
  job.options.quantize_all = true;
  job.max_drop = 0;
  auto run = QuantizeWithCalibration(job);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ASSERT_EQ((*run)->summary.quantized_nodes.size(), 1u);
  const std::string cache = (*run)->cache;
  EXPECT_TRUE(std::filesystem::exists(cache));  // temporary, for the re-quantizations
  std::string report;
  QuantizeProgress progress;
  progress.report = [&](const std::string& s) { report += s; };
  auto r = RunAccuracyControl(job, run->get(), progress);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("not reached: it would keep every node float"),
            std::string::npos)
      << r.status().ToString();
  EXPECT_NE(report.find("accuracy control on 6 held-out samples (argmax agreement with float32): "
                        "float32 100.00 %, int8 0.00 %"),
            std::string::npos)
      << report;
  run->reset();
  EXPECT_FALSE(std::filesystem::exists(cache));

  // Every row used for calibration: nothing to score on.
  job.samples = 8;
  auto all = QuantizeWithCalibration(job);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  r = RunAccuracyControl(job, all->get());
  EXPECT_NE(r.status().message().find("has 8 rows, all used"), std::string::npos)
      << r.status().ToString();
}

// In-memory samples (QuantizeJob::calibration_tensors) are a tensor file's rows: the same count,
// data key, batches and held-out rows as a file of the same values.
TEST_F(QuantizerTest, CalibrationTensorsAreATensorFilesRows) {
  const Tensor values =
      Tensor::FromVector<float>(Uniform(static_cast<size_t>(10) * 400, 9), {10, 4, 10, 10});
  QuantizeJob file_job;
  file_job.model = model_;
  file_job.samples = 6;
  file_job.calibrate = {SamplesFile(dir_, "same.npy", 10)};  // the same seed: the same values
  auto from_file = CalibrationSamples::Open(file_job, {Input("x")});
  ASSERT_TRUE(from_file.ok()) << from_file.status().ToString();

  QuantizeJob job;
  job.model = model_;
  job.samples = 6;
  job.calibration_tensors = {{"x", values}};
  auto s = CalibrationSamples::Open(job, {Input("x")});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ((*s)->count(), 6);
  EXPECT_EQ((*s)->what(), "6 samples of tensor 'x'");
  EXPECT_EQ((*s)->sources(), std::vector<std::string>{"tensor 'x'"});
  EXPECT_EQ((*s)->key(), (*from_file)->key());
  EXPECT_EQ((*s)->key(), CalibrationDataKey(values, 6));
  ASSERT_NE((*s)->single(), nullptr);
  auto batch = (*s)->Batch(2, 5, nullptr);
  ASSERT_TRUE(batch.ok());
  ASSERT_EQ(batch->size(), 1u);
  EXPECT_EQ((*batch)[0].name, "x");
  ASSERT_EQ((*batch)[0].tensor.shape(), (Shape{3, 4, 10, 10}));
  for (int64_t i = 0; i < 3 * 400; ++i)
    ASSERT_EQ((*batch)[0].tensor.data<float>()[i], values.data<float>()[2 * 400 + i]) << i;
  bool held_out = false;
  auto hold = (*s)->HeldOut(8, &held_out);
  ASSERT_TRUE(hold.ok());
  EXPECT_TRUE(held_out);
  ASSERT_EQ((*hold)[0].tensor.shape()[0], 4);  // rows 6..9
  EXPECT_EQ((*hold)[0].tensor.data<float>()[0], values.data<float>()[6 * 400]);
  // Other samples, another key; all rows used: the held-out set is the calibration rows.
  job.samples = 10;
  s = CalibrationSamples::Open(job, {Input("x")});
  ASSERT_TRUE(s.ok());
  EXPECT_NE((*s)->key(), (*from_file)->key());
  hold = (*s)->HeldOut(3, &held_out);
  ASSERT_TRUE(hold.ok());
  EXPECT_FALSE(held_out);
  EXPECT_EQ((*hold)[0].tensor.shape()[0], 3);

  // Several inputs: one tensor each, in any order; the key is the NAME=FILE form's.
  QuantizeJob named_file;
  named_file.samples = 5;
  named_file.calibrate = {"b=" + SamplesFile(dir_, "b.npy", 7),
                          "a=" + SamplesFile(dir_, "a.npy", 7)};
  auto nf = CalibrationSamples::Open(named_file, {Input("a"), Input("b")});
  ASSERT_TRUE(nf.ok()) << nf.status().ToString();
  const Tensor seven =
      Tensor::FromVector<float>(Uniform(static_cast<size_t>(7) * 400, 9), {7, 4, 10, 10});
  QuantizeJob named;
  named.samples = 5;
  named.calibration_tensors = {{"b", seven}, {"a", seven}};
  auto n = CalibrationSamples::Open(named, {Input("a"), Input("b")});
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ((*n)->key(), (*nf)->key());
  EXPECT_EQ((*n)->what(), "5 samples of 2 tensors (one per input)");
  EXPECT_EQ((*n)->single(), nullptr);
  batch = (*n)->Batch(0, 5, nullptr);
  ASSERT_TRUE(batch.ok());
  ASSERT_EQ(batch->size(), 2u);
  EXPECT_EQ((*batch)[0].name, "a");  // in the model's input order
}

// Each refusal names its problem.
TEST_F(QuantizerTest, CalibrationTensorsAreChecked) {
  const Tensor rows4 = Tensor::FromVector<float>(Uniform(4 * 400, 1), {4, 4, 10, 10});
  const Tensor rows3 = Tensor::FromVector<float>(Uniform(3 * 400, 1), {3, 4, 10, 10});
  struct Case {
    std::vector<std::string> files;
    std::vector<NamedTensor> tensors;
    std::vector<TensorSpec> inputs;
    std::string expected;
  };
  const std::string file = SamplesFile(dir_, "c.npy", 4);
  const Case cases[] = {
      {{file}, {{"x", rows4}}, {Input("x")}, "calibration data is given twice"},
      {{}, {}, {Input("x")}, "no calibration data"},
      {{}, {{"x", Tensor::FromVector<float>({1.f}, {})}}, {Input("x")}, "'x' is a scalar"},
      {{}, {{"x", Tensor()}}, {Input("x")}, "calibration takes arrays of numbers"},
      {{}, {{"x", Tensor::Empty(DataType::kFloat, {0, 4, 10, 10})}}, {Input("x")}, "no samples"},
      {{}, {{"a", rows4}, {"b", rows3}}, {Input("a"), Input("b")}, "'a' has 4, 'b' has 3"},
      {{}, {{"x", rows4}, {"x", rows4}}, {Input("x")}, "'x' is given twice"},
      {{}, {{"a", rows4}}, {Input("a"), Input("b")}, "input 'b' is missing"},
      {{}, {{"y", rows4}}, {Input("x")}, "'y' is not an input of the model; its inputs are 'x'"},
      {{},
       {{"x", Tensor::FromVector<int64_t>(std::vector<int64_t>(4 * 400, 1), {4, 4, 10, 10})}},
       {Input("x")},
       "calibration input 'x' is int64 and the model's input float32"},
  };
  for (const Case& c : cases) {
    QuantizeJob job;
    job.model = model_;
    job.calibrate = c.files;
    job.calibration_tensors = c.tensors;
    auto s = CalibrationSamples::Open(job, c.inputs);
    ASSERT_FALSE(s.ok()) << c.expected;
    EXPECT_NE(s.status().message().find(c.expected), std::string::npos)
        << s.status().ToString() << " (expected: " << c.expected << ")";
  }
  // QuantizeWithCalibration refuses them before it reads the model.
  QuantizeJob job;
  job.model = (dir_ / "no_model.onnx").string();
  job.out = (dir_ / "q.onnx").string();
  job.calibration_tensors = {{"a", rows4}, {"b", rows3}};
  auto run = QuantizeWithCalibration(job);
  EXPECT_EQ(run.status().code(), StatusCode::kInvalidArgument) << run.status().ToString();
  job.calibration_tensors = {{"x", rows4}};
  job.labels = file;
  job.labels_tensor = Tensor::FromVector<int64_t>({0, 1, 2, 3}, {4});
  run = QuantizeWithCalibration(job);
  EXPECT_NE(run.status().message().find("labels are given twice"), std::string::npos)
      << run.status().ToString();
}

// The same values from a file and from memory give the same model: the same scales, and a
// calibration cache written from the file is read for the tensor.
TEST_F(QuantizerTest, QuantizeWithCalibrationTensorsMatchesTheFile) {
  QuantizeJob job;
  job.model = model_;
  job.out = (dir_ / "from_file.onnx").string();
  job.calibrate = {SamplesFile(dir_, "calib.npy", 20)};
  job.samples = 12;
  job.batch = 5;
  job.cache = (dir_ / "cache.json").string();
  auto file_run = QuantizeWithCalibration(job);
  ASSERT_TRUE(file_run.ok()) << file_run.status().ToString();
  EXPECT_FALSE((*file_run)->cache_hit);

  const Tensor values =
      Tensor::FromVector<float>(Uniform(static_cast<size_t>(20) * 400, 9), {20, 4, 10, 10});
  job.calibrate.clear();
  job.calibration_tensors = {{"x", values}};
  job.out = (dir_ / "from_tensor.onnx").string();
  job.cache.clear();
  auto tensor_run = QuantizeWithCalibration(job);
  ASSERT_TRUE(tensor_run.ok()) << tensor_run.status().ToString();
  const QuantizeSummary& a = (*file_run)->summary;
  const QuantizeSummary& b = (*tensor_run)->summary;
  EXPECT_EQ(b.samples, 12);
  EXPECT_EQ(a.quantized_nodes, b.quantized_nodes);
  ASSERT_EQ(a.activations.size(), b.activations.size());
  ASSERT_FALSE(a.activations.empty());
  for (size_t i = 0; i < a.activations.size(); ++i) {
    EXPECT_EQ(a.activations[i].tensor, b.activations[i].tensor);
    EXPECT_EQ(a.activations[i].scale, b.activations[i].scale) << a.activations[i].tensor;
    EXPECT_EQ(a.activations[i].zero_point, b.activations[i].zero_point);
  }
  EXPECT_EQ(a.model_bytes, b.model_bytes);

  job.cache = (dir_ / "cache.json").string();
  job.out = (dir_ / "from_cache.onnx").string();
  auto cached = QuantizeWithCalibration(job);
  ASSERT_TRUE(cached.ok()) << cached.status().ToString();
  EXPECT_TRUE((*cached)->cache_hit);
  auto cmp = CompareHeldOut(cached->get(), job.batch);
  ASSERT_TRUE(cmp.ok()) << cmp.status().ToString();
  EXPECT_TRUE(cmp->held_out);
  EXPECT_EQ(cmp->errors.size(), (*cached)->summary.quantized_nodes.size() + 1);  // + the output
}

// progress.cancelled stops the calibration between batches.
TEST_F(QuantizerTest, QuantizeWithCalibrationStopsWhenCancelled) {
  QuantizeJob job;
  job.model = model_;
  job.out = (dir_ / "cancelled.onnx").string();
  job.calibration_tensors = {
      {"x", Tensor::FromVector<float>(Uniform(static_cast<size_t>(12) * 400, 4), {12, 4, 10, 10})}};
  job.batch = 4;
  int batches = 0;
  QuantizeProgress progress;
  progress.batch = [&](const std::string&) { ++batches; };
  progress.cancelled = [&] { return batches == 2; };
  auto run = QuantizeWithCalibration(job, progress);
  EXPECT_EQ(run.status().code(), StatusCode::kCancelled) << run.status().ToString();
  EXPECT_EQ(batches, 2);
  EXPECT_FALSE(std::filesystem::exists(job.out));
}

// Accuracy control with labels in memory: top-1 against them, on the rows after `samples`.
TEST_F(QuantizerTest, AccuracyControlTakesLabelsInMemory) {
  QuantizeJob job;
  job.model = (dir_ / "tie.onnx").string();
  std::ofstream(job.model, std::ios::binary) << TieGemm();
  job.out = (dir_ / "tie_q.onnx").string();
  std::vector<float> rows = {100.f, -100.f, -100.f, 100.f};
  for (int i = 0; i < 6; ++i) rows.insert(rows.end(), {0.1f, 0.2f});
  job.calibration_tensors = {{"x", Tensor::FromVector<float>(rows, {8, 2})}};
  job.samples = 2;
  job.options.method = "minmax";
  job.options.quantize_all = true;
  job.max_drop = 100;  // always met: the first model is kept
  // Float's argmax is 1 on every held-out row, int8's 0 (TieGemm); labels: 1 on 4 of the 6.
  job.labels_tensor = Tensor::FromVector<int32_t>({0, 0, 1, 1, 1, 1, 0, 0}, {8});
  auto run = QuantizeWithCalibration(job);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  auto r = RunAccuracyControl(job, run->get());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->measure, "top-1");
  EXPECT_EQ(r->eval_samples, 6);
  EXPECT_NEAR(r->float_score, 400.0 / 6, 1e-9);
  EXPECT_NEAR(r->int8_score, 200.0 / 6, 1e-9);
  EXPECT_NEAR(r->drop, 200.0 / 6, 1e-9);
  EXPECT_TRUE(r->sensitivity.empty());

  job.labels_tensor = Tensor::FromVector<float>({0, 0, 1, 1, 1, 1, 0, 0}, {8});
  r = RunAccuracyControl(job, run->get());
  EXPECT_NE(r.status().message().find("labels must hold one int64/int32 class per sample (8)"),
            std::string::npos)
      << r.status().ToString();
  // Every row calibrated: the message names the tensor.
  job.labels_tensor = Tensor();
  job.samples = 8;
  auto all = QuantizeWithCalibration(job);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  r = RunAccuracyControl(job, all->get());
  EXPECT_NE(r.status().message().find("the calibration tensor 'x' has 8 rows, all used"),
            std::string::npos)
      << r.status().ToString();
}

}  // namespace
}  // namespace kiln::int8_test
