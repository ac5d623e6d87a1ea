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

}  // namespace
}  // namespace kiln::int8_test
