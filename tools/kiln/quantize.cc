// `kiln quantize MODEL --calibrate DATA --out OUT`: post-training INT8 quantization with
// calibration (kiln/quantize.h), writing a QDQ ONNX model.
//
// DATA is a tensor file (.npy, or ONNX .pb) holding calibration samples along dim 0 for a
// one-input model; the first --samples of them are run in batches of --batch, once per pass.
#include "kiln/quantize.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>

#include "common.h"
#include "kiln/tensor_io.h"

namespace kiln::cli {
namespace {

struct QuantizeArgs {
  std::string model, calibrate, out, cache, trt_cache;
  QuantizeOptions options;
  int64_t samples = 300;
  int64_t batch = 32;
  bool verbose = false;
};

// Rows [begin, end) of `t` along dim 0, copied.
Tensor Rows(const Tensor& t, int64_t begin, int64_t end) {
  Shape shape = t.shape();
  const int64_t row = t.numel() / std::max<int64_t>(1, shape[0]);
  shape[0] = end - begin;
  Tensor out = Tensor::Empty(t.dtype(), shape);
  const size_t esz = DataTypeSize(t.dtype());
  std::memcpy(out.raw(), static_cast<const char*>(t.raw()) + begin * row * esz,
              static_cast<size_t>((end - begin) * row) * esz);
  return out;
}

Status RunQuantize(const QuantizeArgs& a) {
  if (a.samples < 1)
    return InvalidArgument("--samples must be >= 1; got " + std::to_string(a.samples));
  if (a.batch < 1) return InvalidArgument("--batch must be >= 1; got " + std::to_string(a.batch));
  // The data is checked before any work on the model.
  KILN_ASSIGN_OR_RETURN(Tensor data, ReadTensorFile(a.calibrate));
  if (data.rank() < 1 || data.shape()[0] < 1)
    return InvalidArgument("calibration data '" + a.calibrate +
                           "' holds no sample (samples run along dim 0); got shape " +
                           ShapeToString(data.shape()));
  KILN_ASSIGN_OR_RETURN(auto q, Quantizer::Create(a.model, a.options));
  if (q->inputs().size() != 1)
    return Unsupported("calibration from one tensor file needs a one-input model; '" + a.model +
                       "' has " + std::to_string(q->inputs().size()) + " inputs");
  const TensorSpec& in = q->inputs()[0];
  if (data.dtype() != in.dtype) {
    KILN_ASSIGN_OR_RETURN(data, ConvertFloatTensor(data, in.dtype));
  }
  const int64_t n = std::min<int64_t>(a.samples, data.shape()[0]);
  if (!a.cache.empty()) {
    KILN_ASSIGN_OR_RETURN(bool hit, q->UseCache(a.cache, CalibrationDataKey(data, n)));
    std::fprintf(stderr,
                 hit ? "calibration cache %s: ranges read, no calibration\n"
                     : "calibration cache %s: none yet, written after calibrating\n",
                 a.cache.c_str());
  }
  const auto t0 = std::chrono::steady_clock::now();
  const bool tty = isatty(2) != 0;  // a progress line only on a terminal
  for (int pass = 0; pass < q->passes(); ++pass) {
    KILN_RETURN_IF_ERROR(q->BeginPass(pass));
    for (int64_t b = 0; b < n; b += a.batch) {
      const int64_t e = std::min(n, b + a.batch);
      Status s = q->Observe({{in.name, Rows(data, b, e)}});
      if (!s.ok())
        return Status(s.code(), s.message() + "\n  while calibrating on samples " +
                                    std::to_string(b) + ".." + std::to_string(e - 1) + " of '" +
                                    a.calibrate + "'");
      if (tty)
        std::fprintf(stderr, "\rcalibration pass %d/%d: %lld/%lld samples", pass + 1, q->passes(),
                     static_cast<long long>(e), static_cast<long long>(n));
    }
    std::fprintf(stderr, "%scalibration pass %d/%d: %lld samples\n", tty ? "\r" : "", pass + 1,
                 q->passes(), static_cast<long long>(n));
  }
  KILN_ASSIGN_OR_RETURN(QuantizeSummary s, q->Write(a.out));
  if (!a.trt_cache.empty()) KILN_RETURN_IF_ERROR(q->WriteTensorRtCache(a.trt_cache));
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("quantized %zu nodes to int8 (%s, %lld samples, weights %s) in %.1f s\n",
              s.quantized_nodes.size(), s.method.c_str(), static_cast<long long>(s.samples),
              s.per_channel ? "per channel" : "per tensor (opset < 13)", secs);
  for (const auto& [node, why] : s.float_nodes)
    std::printf("  kept float: %s: %s\n", node.c_str(), why.c_str());
  if (a.verbose) {
    std::printf("  %-40s %-6s %12s %12s %12s %12s\n", "activation", "type", "min", "max",
                "threshold", "scale");
    for (const auto& t : s.activations)
      std::printf("  %-40s %-6s %12.5g %12.5g %12.5g %12.5g\n", t.tensor.c_str(), t.dtype.c_str(),
                  t.min, t.max, t.threshold, t.scale);
  }
  std::printf("wrote %s (%lld bytes)\n", a.out.c_str(), static_cast<long long>(s.model_bytes));
  if (!a.trt_cache.empty())
    std::printf("wrote %s (TensorRT calibration table)\n", a.trt_cache.c_str());
  return OkStatus();
}

}  // namespace

void AddQuantizeCommand(CLI::App& app, int* exit_code) {
  auto a = std::make_shared<QuantizeArgs>();
  CLI::App* cmd = app.add_subcommand(
      "quantize", "Quantize a float32 model to INT8 (QDQ ONNX) with calibration data");
  cmd->add_option("model", a->model, "The float32 ONNX model")->required();
  cmd->add_option("--calibrate", a->calibrate,
                  "Calibration samples: a tensor file (.npy or .pb) with samples along dim 0")
      ->required();
  cmd->add_option("--out", a->out, "Where to write the QDQ model")->required();
  cmd->add_option("--method", a->options.method,
                  "Range method: minmax, percentile, entropy (KL) or mse")
      ->capture_default_str();
  cmd->add_option("--percentile", a->options.percentile, "For --method percentile")
      ->capture_default_str();
  cmd->add_option("--samples", a->samples, "Calibration samples used (the first N)")
      ->capture_default_str();
  cmd->add_option("--batch", a->batch, "Samples per calibration run")->capture_default_str();
  cmd->add_option("--keep-float", a->options.keep_float,
                  "Keep nodes float32: a node name, an op type, or a name pattern (* ?); "
                  "repeatable");
  cmd->add_flag("--quantize-all", a->options.quantize_all,
                "Also quantize the first and last layers (kept float by default)");
  cmd->add_option("--threads", a->options.num_threads, "Threads (0 = physical cores)")
      ->capture_default_str();
  cmd->add_option("--cache", a->cache,
                  "Calibration cache (JSON): read when it matches this model, data, method and "
                  "kiln version (no calibration); refused when it differs; written when absent");
  cmd->add_option("--trt-cache", a->trt_cache,
                  "Also write the activation scales as a TensorRT calibration table");
  cmd->add_flag("--verbose,-v", a->verbose, "Print every activation's range and scale");
  cmd->callback([a, exit_code] {
    Status s = RunQuantize(*a);
    if (!s.ok()) *exit_code = Fail(s);
  });
}

}  // namespace kiln::cli
