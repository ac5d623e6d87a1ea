// `kiln run MODEL --input NAME=FILE ... --output-dir DIR`: runs a model on tensors from .npy or
// .pb files and writes each output as DIR/<sanitized output name>.npy. With --images instead, the
// batch job over image files (run_images.cc).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "common.h"
#include "kiln/diagnostics.h"
#include "kiln/session.h"
#include "kiln/tensor_io.h"
#include "run_images.h"

namespace kiln::cli {
namespace {

struct RunArgs {
  std::string model;
  std::vector<std::string> inputs;
  std::string output_dir;
  bool reference = false;
  bool no_optimize = false;
  std::vector<std::string> disabled_passes;
  std::string precision = "fp32";
  std::string device = "cpu";
  bool tune = false;
  std::string plan_cache;
  int repeat = 1;
  std::string trace;  // --trace FILE: every run's steps as Chrome/Perfetto trace JSON
  ImageJobArgs images;
};

SessionOptions OptionsOf(const RunArgs& a) {
  SessionOptions opts;
  opts.reference_only = a.reference;
  opts.optimize = !a.no_optimize;
  opts.disabled_passes = a.disabled_passes;
  opts.precision = PrecisionArg(a.precision);
  opts.backend = BackendArg(a.device);
  opts.tune = a.tune;
  opts.plan_cache_dir = a.plan_cache;
  return opts;
}

Status DoRun(const RunArgs& a) {
  auto t0 = std::chrono::steady_clock::now();
  KILN_ASSIGN_OR_RETURN(auto session, Session::Load(a.model, OptionsOf(a)));
  auto t1 = std::chrono::steady_clock::now();

  std::vector<NamedTensor> inputs;
  for (const std::string& spec : a.inputs) {
    std::string name, path;
    auto eq = spec.find('=');
    if (eq == std::string::npos) {
      if (session->inputs().size() != 1)
        return InvalidArgument("--input " + spec + ": the model has " +
                               std::to_string(session->inputs().size()) +
                               " inputs, so name it: --input NAME=FILE");
      name = session->inputs()[0].name;
      path = spec;
    } else {
      name = spec.substr(0, eq);
      path = spec.substr(eq + 1);
    }
    auto t = ReadTensorFile(path);
    if (!t.ok()) return Status(t.status()).AddContext("while reading input '" + name + "'");
    inputs.push_back({name, std::move(t).value()});
  }
  std::error_code ec;
  std::filesystem::create_directories(a.output_dir, ec);
  if (ec || !std::filesystem::is_directory(a.output_dir))
    return InvalidArgument("cannot create output directory '" + a.output_dir + "'");

  auto ms = [](auto d) { return std::chrono::duration<double, std::milli>(d).count(); };
  std::vector<NamedTensor> outputs;
  std::vector<RunTimings> traced;
  RunTimings rt;
  rt.per_node = !a.trace.empty();
  RunTimings* timings = a.trace.empty() ? nullptr : &rt;
  KILN_RETURN_IF_ERROR(session->Run(inputs, &outputs, timings));
  if (timings) traced.push_back(rt);
  auto t2 = std::chrono::steady_clock::now();
  // --repeat: the steady state, apart from the first run's plan preparation.
  std::vector<double> steady;
  for (int r = 1; r < a.repeat; ++r) {
    const auto r0 = std::chrono::steady_clock::now();
    KILN_RETURN_IF_ERROR(session->Run(inputs, &outputs, timings));
    steady.push_back(ms(std::chrono::steady_clock::now() - r0));
    if (timings) traced.push_back(rt);
  }
  if (timings) {
    if (traced.empty() || traced[0].nodes.empty())
      return Unsupported("--trace: per-step times are measured on the CPU backend only");
    std::ofstream f(a.trace);
    f << ChromeTraceJson(traced, "kiln run " + a.model);
    if (!f.good()) return InvalidArgument("cannot write --trace file '" + a.trace + "'");
    std::printf("trace: %zu runs written to %s (open in ui.perfetto.dev or chrome://tracing)\n",
                traced.size(), a.trace.c_str());
  }
  for (const auto& o : outputs) {
    std::string path =
        (std::filesystem::path(a.output_dir) / (TensorFileName(o.name) + ".npy")).string();
    KILN_RETURN_IF_ERROR(WriteNpyFile(o.tensor, path));
    const DataType dt = o.tensor.dtype();
    // Written as raw bytes (numpy has no such type; kiln/tensor_io.h).
    const bool raw = dt == DataType::kBFloat16 || dt == DataType::kFloat8E4M3FN ||
                     dt == DataType::kFloat8E4M3FNUZ || dt == DataType::kFloat8E5M2 ||
                     dt == DataType::kFloat8E5M2FNUZ || dt == DataType::kFloat4E2M1 ||
                     dt == DataType::kFloat8E8M0;
    std::printf("%s: %s%s -> %s%s\n", o.name.c_str(), DataTypeName(dt),
                ShapeToString(o.tensor.shape()).c_str(), path.c_str(),
                raw ? (std::string(" (raw bytes: np.load(...).view(ml_dtypes.") + DataTypeName(dt) +
                       "))")
                          .c_str()
                    : "");
  }
  std::printf("load %.1f ms, first run %.1f ms (plan preparation included)\n", ms(t1 - t0),
              ms(t2 - t1));
  if (!steady.empty()) {
    std::sort(steady.begin(), steady.end());
    std::printf("steady run %.1f ms (median of %zu runs after the first)\n",
                steady[steady.size() / 2], steady.size());
  }
  return OkStatus();
}

}  // namespace

void AddRunCommand(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* cmd = app.add_subcommand(
      "run", "Run a model on input tensors (.npy or .pb files), or over image files (--images)");
  cmd->add_option("model", args->model, "ONNX model file")->required();
  CLI::Option* input =
      cmd->add_option("--input,-i", args->inputs,
                      "NAME=FILE (repeatable); FILE alone when the model has one input");
  CLI::Option* output_dir =
      cmd->add_option("--output-dir,-o", args->output_dir, "Directory for <output>.npy files");
  cmd->add_flag("--reference", args->reference, "Use only the reference kernels");
  cmd->add_flag("--no-optimize", args->no_optimize,
                "Run the graph as written: no graph optimizer (with --reference: every node on "
                "its own op's reference kernel)");
  cmd->add_option("--disable-pass", args->disabled_passes,
                  "Skip this optimizer pass (repeatable; names in `kiln inspect --optimized`)");
  cmd->add_option("--precision", args->precision,
                  "fp32 (default); bf16 on the CPU (AVX512-BF16/AMX); fp16 on --device cuda")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16"}));
  cmd->add_flag("--tune", args->tune,
                "Time alternative kernels per shape at the first run and keep the fastest");
  cmd->add_option("--plan-cache", args->plan_cache,
                  "With --tune: reuse (and store) the measured choices in this folder");
  cmd->add_option("--repeat", args->repeat,
                  "Run N times; the first run (plan preparation included) is reported apart from "
                  "the median of the others")
      ->check(CLI::Range(1, 1000000));
  CLI::Option* trace =
      cmd->add_option("--trace", args->trace,
                      "Write every run's steps (one slice per kernel) to FILE as Chrome/Perfetto "
                      "trace JSON (CPU backend; not with --images)");
  cmd->add_option("--device,-d", args->device, "Backend: cpu (default) or cuda")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  CLI::Option* images = AddImageJobOptions(cmd, &args->images);
  images->excludes(input)->excludes(output_dir)->excludes(trace);
  cmd->callback([args, exit_code] {
    Status s;
    if (!args->images.images.empty()) {
      s = RunImageJob(args->model, OptionsOf(*args), args->images);
    } else {
      if (args->inputs.empty()) throw CLI::RequiredError("--input (or --images)");
      if (args->output_dir.empty()) throw CLI::RequiredError("--output-dir");
      s = DoRun(*args);
    }
    if (!s.ok()) *exit_code = Fail(s);
  });
}

}  // namespace kiln::cli
