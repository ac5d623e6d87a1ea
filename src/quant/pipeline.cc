// QuantizeWithCalibration and CompareHeldOut (kiln/quantize.h): the calibration pipeline of
// `kiln quantize`, without printing.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>

#include "kiln/quantize.h"
#include "quant/rows.h"

namespace kiln {
namespace {

// A missing file is reported before any work on the model.
Status CheckJob(const QuantizeJob& job) {
  KILN_RETURN_IF_ERROR(quant::CheckCalibrationData(job));
  if (!job.labels.empty() && job.labels_tensor.defined())
    return InvalidArgument("labels are given twice, as --labels '" + job.labels +
                           "' and as an in-memory tensor; give one of them");
  if (job.max_drop >= 0 && job.eval_samples < 1)
    return InvalidArgument("--eval-samples must be >= 1; got " + std::to_string(job.eval_samples));
  if (job.samples < 1)
    return InvalidArgument("--samples must be >= 1; got " + std::to_string(job.samples));
  if (job.batch < 1)
    return InvalidArgument("--batch must be >= 1; got " + std::to_string(job.batch));
  for (const auto& arg : job.calibrate) {
    const size_t eq = arg.find('=');
    const std::string path =
        std::filesystem::exists(arg) || eq == std::string::npos ? arg : arg.substr(eq + 1);
    if (!quant::IsImageSource(path) && !std::filesystem::exists(path))
      return NotFound("calibration data '" + path + "' does not exist");
  }
  return OkStatus();
}

// Accuracy control re-quantizes with more nodes kept float: from a cache, without calibrating;
// a temporary one when the job names none.
std::string TemporaryCachePath() {
  static std::atomic<int> count{0};
  const int k = count++;
  return (std::filesystem::temp_directory_path() / ("kiln_quantize_" + std::to_string(getpid()) +
                                                    (k ? "_" + std::to_string(k) : "") + ".json"))
      .string();
}

void Note(const QuantizeProgress& progress, const std::string& line) {
  if (progress.note) progress.note(line);
}

// Reports the images that did not decode; an error when none did.
Status CheckFailures(const std::vector<std::string>& failures, int64_t n,
                     const QuantizeProgress& progress) {
  if (failures.empty()) return OkStatus();
  Note(progress, std::to_string(failures.size()) + " of " + std::to_string(n) +
                     " calibration images could not be read and were skipped:");
  for (size_t i = 0; i < failures.size() && i < 5; ++i) Note(progress, "  " + failures[i]);
  if (failures.size() > 5) Note(progress, "  ...");
  if (static_cast<int64_t>(failures.size()) == n)
    return InvalidArgument("none of the " + std::to_string(n) + " calibration images decoded");
  return OkStatus();
}

}  // namespace

QuantizeRun::~QuantizeRun() {
  if (!temporary_cache.empty()) {
    std::error_code ec;
    std::filesystem::remove(temporary_cache, ec);
  }
}

StatusOr<std::unique_ptr<QuantizeRun>> QuantizeWithCalibration(const QuantizeJob& job,
                                                               const QuantizeProgress& progress) {
  KILN_RETURN_IF_ERROR(CheckJob(job));
  auto run = std::make_unique<QuantizeRun>();
  KILN_ASSIGN_OR_RETURN(run->quantizer, Quantizer::Create(job.model, job.options));
  Quantizer* q = run->quantizer.get();
  KILN_ASSIGN_OR_RETURN(run->samples, CalibrationSamples::Open(job, q->inputs()));
  Note(progress, "calibration data: " + run->samples->what());
  run->cache = job.cache;
  if (run->cache.empty() && job.max_drop >= 0)
    run->cache = run->temporary_cache = TemporaryCachePath();
  if (!run->cache.empty()) {
    KILN_ASSIGN_OR_RETURN(run->cache_hit, q->UseCache(run->cache, run->samples->key()));
    if (!job.cache.empty())
      Note(progress, "calibration cache " + job.cache +
                         (run->cache_hit ? ": ranges read, no calibration"
                                         : ": none yet, written after calibrating"));
  }
  const auto t0 = std::chrono::steady_clock::now();
  KILN_RETURN_IF_ERROR(Calibrate(run->samples.get(), q, job.batch, &run->failed_images, progress));
  KILN_RETURN_IF_ERROR(CheckFailures(run->failed_images, run->samples->count(), progress));
  KILN_ASSIGN_OR_RETURN(run->summary, q->Write(job.out));
  if (!job.trt_cache.empty()) KILN_RETURN_IF_ERROR(q->WriteTensorRtCache(job.trt_cache));
  run->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return run;
}

StatusOr<HeldOutComparison> CompareHeldOut(QuantizeRun* run, int64_t batch) {
  HeldOutComparison out;
  KILN_ASSIGN_OR_RETURN(auto hold, run->samples->HeldOut(batch, &out.held_out));
  KILN_ASSIGN_OR_RETURN(out.errors, run->quantizer->Compare(hold));
  return out;
}

}  // namespace kiln
