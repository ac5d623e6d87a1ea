// `kiln quantize MODEL --calibrate DATA --out OUT`: post-training INT8 quantization with
// calibration (kiln/quantize.h), writing a QDQ ONNX model.
//
// DATA is a tensor file (.npy, or ONNX .pb) holding calibration samples along dim 0, or image
// files (a directory or a list file, .txt/.lst) decoded through a recipe (--recipe, as `kiln run
// --images`), for a one-input model; a model with several inputs takes one tensor file per input,
// `--calibrate NAME=FILE` each, with as many samples each. --samples of them (a tensor file's
// first N; images spread evenly over the sorted list) run in batches of --batch, once per pass;
// images that fail to decode are skipped and reported. The work is the library's pipeline
// (QuantizeWithCalibration, RunAccuracyControl in kiln/quantize.h); this file parses the flags
// and prints.
#include "kiln/quantize.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <map>
#include <memory>

#include "common.h"

namespace kiln::cli {
namespace {

struct QuantizeArgs {
  QuantizeJob job;  // the library's pipeline (kiln/quantize.h) does the work
  bool verbose = false;
  bool report = false;
};

// Calibration progress on stderr (a line overwritten in place only on a terminal); accuracy
// control's report on stdout.
QuantizeProgress CliProgress() {
  const bool tty = isatty(2) != 0;
  auto pending = std::make_shared<bool>(false);  // a batch line is showing
  QuantizeProgress p;
  if (tty)
    p.batch = [pending](const std::string& s) {
      std::fprintf(stderr, "\r%s", s.c_str());
      *pending = true;
    };
  p.note = [pending](const std::string& s) {
    std::fprintf(stderr, "%s%s\n", *pending ? "\r" : "", s.c_str());
    *pending = false;
  };
  p.report = [](const std::string& s) {
    std::fputs(s.c_str(), stdout);
    std::fflush(stdout);
  };
  return p;
}

void PrintMethods(const QuantizeSummary& s) {
  std::map<std::string, int> kept;
  for (const auto& t : s.activations)
    if (!t.method.empty()) ++kept[t.method];
  std::string counts;
  for (const auto& [m, n] : kept) counts += " " + m + " " + std::to_string(n);
  if (s.auto_evaluations > 0)
    std::printf(
        "  auto: thresholds kept per tensor:%s (%d quantized models tried on %lld samples; "
        "output error %.4g -> %.4g)\n",
        counts.c_str(), s.auto_evaluations, static_cast<long long>(s.auto_samples),
        s.auto_error_start, s.auto_error);
  else
    std::printf("  auto: thresholds kept per tensor:%s (from the cache)\n", counts.c_str());
}

void PrintActivations(const QuantizeSummary& s) {
  std::printf("  %-40s %-6s %12s %12s %12s %12s\n", "activation", "type", "min", "max", "threshold",
              "scale");
  for (const auto& t : s.activations)
    std::printf(
        "  %-40s %-6s %12.5g %12.5g %12.5g %12.5g%s%s\n", t.tensor.c_str(), t.dtype.c_str(), t.min,
        t.max, t.threshold, t.scale, t.method.empty() ? "" : (" " + t.method).c_str(),
        t.channel_scales.empty()
            ? ""
            : (" (largest of " + std::to_string(t.channel_scales.size()) + " per-channel scales)")
                  .c_str());
}

void PrintSummary(const QuantizeArgs& a, const QuantizeRun& run) {
  const QuantizeSummary& s = run.summary;
  std::printf("quantized %zu nodes to int8 (%s, %lld samples, weights %s) in %.1f s\n",
              s.quantized_nodes.size(), s.method.c_str(), static_cast<long long>(s.samples),
              s.per_channel ? "per channel" : "per tensor", run.seconds);
  if (s.converted_from_opset != 0) {
    std::printf("  converted from opset %lld to 13 (%s)",
                static_cast<long long>(s.converted_from_opset),
                s.converted_from_opset < 10 ? "QuantizeLinear needs opset 10, per-channel scales 13"
                                            : "per-channel weight scales need it");
    if (s.conversion_max_diff >= 0)
      std::printf("; both forms run on the first calibration batch: outputs within %.2g",
                  s.conversion_max_diff);
    std::printf("\n");
  }
  if (!s.per_channel)
    std::printf("  weights per tensor: opset < 13 and %s\n", s.per_tensor_reason.c_str());
  if (s.bias_corrected > 0) std::printf("  bias corrected: %d convolutions\n", s.bias_corrected);
  if (s.method == "auto") PrintMethods(s);
  const std::pair<int, const char*> shared_lines[] = {
      {s.shared_concats, "Concat(s) take their output's scale on every input"},
      {s.shared_pools, "MaxPool(s) after a quantized convolution pool 8-bit values"},
      {s.shared_averages, "AveragePool(s) average 8-bit values (with their input's scale)"},
      {s.shared_moves, "Split/Resize/Reshape/Transpose-like op(s) move 8-bit values"},
      {s.widened_scales, "activation scale(s) widened to their group's"}};
  for (const auto& [count, what] : shared_lines)
    if (count > 0) std::printf("  shared scales: %d %s\n", count, what);
  if (s.zero_point_activations > 0)
    std::printf(
        "  %d activation(s) uint8 with a zero point (negative side under half the positive)\n",
        s.zero_point_activations);
  if (s.quantized_adds > 0)
    std::printf("  int8 residual stream: %d Add(s) with both inputs quantized\n", s.quantized_adds);
  if (a.job.options.channel_activations) {
    int channel_scaled = 0;
    for (const auto& t : s.activations) channel_scaled += !t.channel_scales.empty();
    std::printf("  per-channel activation scales: %d depthwise convolution inputs\n",
                channel_scaled);
  }
  for (const auto& [node, why] : s.float_nodes)
    std::printf("  kept float: %s: %s\n", node.c_str(), why.c_str());
  if (a.verbose) PrintActivations(s);
  std::printf("wrote %s (%lld bytes)\n", a.job.out.c_str(), static_cast<long long>(s.model_bytes));
}

Status PrintReport(const QuantizeArgs& a, QuantizeRun* run) {
  KILN_ASSIGN_OR_RETURN(HeldOutComparison c, CompareHeldOut(run, a.job.batch));
  std::printf("report: float32 vs int8 on %s, per quantized node (errors accumulate):\n",
              c.held_out ? "held-out samples" : "calibration samples (no held-out data)");
  std::printf("  %-44s %10s %12s %12s\n", "node output", "cosine", "max |diff|", "max |ref|");
  for (const auto& e : c.errors)
    std::printf("  %-44s %10.6f %12.5g %12.5g\n",
                (e.node == "(model output)" ? "(model output) " + e.tensor : e.node).c_str(),
                e.cosine, e.max_abs, e.max_ref);
  return OkStatus();
}

Status RunQuantize(const QuantizeArgs& a) {
  const QuantizeJob& job = a.job;
  const QuantizeProgress progress = CliProgress();
  KILN_ASSIGN_OR_RETURN(auto run, QuantizeWithCalibration(job, progress));
  PrintSummary(a, *run);
  if (a.report) KILN_RETURN_IF_ERROR(PrintReport(a, run.get()));
  if (!job.trt_cache.empty())
    std::printf("wrote %s (TensorRT calibration table)\n", job.trt_cache.c_str());
  if (job.max_drop < 0) return OkStatus();
  KILN_ASSIGN_OR_RETURN(AccuracyControlResult r, RunAccuracyControl(job, run.get(), progress));
  if (r.sensitivity.empty())
    std::printf("accuracy control: within %.2f pt; wrote %s\n", job.max_drop, job.out.c_str());
  else
    std::printf("accuracy control: %zu nodes kept float, drop %.2f pt within %.2f; wrote %s\n",
                r.kept_float, r.drop, job.max_drop, job.out.c_str());
  return OkStatus();
}

}  // namespace

void AddQuantizeCommand(CLI::App& app, int* exit_code) {
  auto a = std::make_shared<QuantizeArgs>();
  CLI::App* cmd = app.add_subcommand(
      "quantize", "Quantize a float32 model to INT8 (QDQ ONNX) with calibration data");
  cmd->add_option("model", a->job.model, "The float32 ONNX model")->required();
  cmd->add_option("--calibrate", a->job.calibrate,
                  "Calibration samples: a tensor file (.npy or .pb) with samples along dim 0, or "
                  "images: a directory or a list file (.txt/.lst); for a model with several "
                  "inputs NAME=FILE once per input (tensor files with as many samples each)")
      ->required();
  cmd->add_option("--out", a->job.out, "Where to write the QDQ model")->required();
  cmd->add_option("--recipe", a->job.recipe,
                  "For image calibration data: a preset or recipe .json (as kiln run --images; "
                  "default: torchvision-imagenet sized to the input)");
  cmd->add_option("--method", a->job.options.method,
                  "Range method: minmax, percentile, entropy (KL), mse, or auto (per tensor the "
                  "one whose quantized model is closest to float on the first batch; slower)")
      ->capture_default_str();
  cmd->add_option("--percentile", a->job.options.percentile, "For --method percentile")
      ->capture_default_str();
  cmd->add_option("--samples", a->job.samples, "Calibration samples used (the first N)")
      ->capture_default_str();
  cmd->add_option("--batch", a->job.batch, "Samples per calibration run")->capture_default_str();
  cmd->add_option("--keep-float", a->job.options.keep_float,
                  "Keep nodes float32: a node name, an op type, or a name pattern (* ?); "
                  "repeatable");
  cmd->add_flag("--quantize-all", a->job.options.quantize_all,
                "Also quantize the first and last layers (kept float by default)");
  cmd->add_flag("--channel-activations", a->job.options.channel_activations,
                "Depthwise convolutions' inputs get one scale per channel (Q/DQ axis 1), for "
                "channels whose ranges differ widely; ONNX Runtime and TensorRT run those "
                "convolutions float");
  cmd->add_flag("!--no-shared-concat-scales", a->job.options.share_concat_scales,
                "Leave Concats, MaxPools, Splits, nearest Resizes, Reshapes and Transposes float "
                "instead of giving the tensors they connect one scale (shared when only "
                "quantized nodes read them)");
  cmd->add_flag("!--float-adds", a->job.options.quantize_adds,
                "Leave residual Adds float (by default both inputs of an Add after a quantized "
                "convolution are quantized, so the residual stream stays int8)");
  cmd->add_flag("!--symmetric-activations", a->job.options.asymmetric_activations,
                "Quantize every activation calibration saw negative as int8 symmetric (default: "
                "uint8 with a zero point where the negative side is under half the positive, "
                "as after SiLU or HardSwish)");
  cmd->add_option("--threads", a->job.options.num_threads, "Threads (0 = physical cores)")
      ->capture_default_str();
  cmd->add_option("--cache", a->job.cache,
                  "Calibration cache (JSON): read when it matches this model, data, method and "
                  "kiln version (no calibration); refused when it differs; written when absent");
  cmd->add_option("--trt-cache", a->job.trt_cache,
                  "Also write the activation scales as a TensorRT calibration table");
  cmd->add_flag("--bias-correction,!--no-bias-correction", a->job.options.bias_correction,
                "Fast bias correction (default on): one more pass shifts each quantized "
                "convolution's bias by the mean difference (per channel) of its float and int8 "
                "outputs on the float model's input to it; --no-bias-correction skips the pass");
  cmd->add_option("--max-drop", a->job.max_drop,
                  "Accuracy control: keep the most sensitive nodes float until the held-out score "
                  "drops at most this many points: top-1 with --labels, else the argmax agreement "
                  "(%) with float32 over the first output's last axis")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--labels", a->job.labels,
                  "For --max-drop: a .npy of one class per row of the --calibrate tensor file; "
                  "the rows after --samples (up to --eval-samples) are the held-out set either "
                  "way");
  cmd->add_option("--eval-samples", a->job.eval_samples, "For --max-drop")->capture_default_str();
  cmd->add_flag("--report", a->report,
                "Compare each quantized node's output and the model's outputs, float32 against "
                "int8, on --batch held-out samples (cosine, max abs difference)");
  cmd->add_flag("--verbose,-v", a->verbose, "Print every activation's range and scale");
  cmd->callback([a, exit_code] {
    Status s = RunQuantize(*a);
    if (!s.ok()) *exit_code = Fail(s);
  });
}

}  // namespace kiln::cli
