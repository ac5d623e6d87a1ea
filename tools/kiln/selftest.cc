// `kiln selftest [--device cuda|cpu] [--model FILE]... [--no-models]`: runs every kernel of the
// backend on its op's own cases (the kernel harness, kiln/diagnostics.h CheckKernels: outputs
// NaN-prefilled with guard bytes, float16 runs for kernels that take it), then the bundled model
// (plus any --model) on the backend with the graph optimizer on against kiln's reference kernels
// on the CPU (optimizer off), plus each model replayed from a CUDA graph on cuda, printing
// pass/fail per case with the worst error. Tolerance: each case's own (1e-4 + 1e-4 * |reference|
// unless it says), 1e-3 + 1e-3 * |reference| for whole models. A kernel whose op has no case, or
// that declines every case, fails.
//
// Exit codes: 0 all passed; 2 a case failed; 3 nothing was checked (no device visible, or a
// build without the backend), said loudly. `--device cpu` checks the CPU's fast kernels the same
// way, which is how CI tests this command on machines without a GPU.
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <random>
#include <set>

#include "common.h"
#include "kiln/diagnostics.h"
#include "kiln/session.h"

namespace kiln::cli {

namespace {

constexpr int kExitFailed = 2;
constexpr int kExitNotChecked = 3;

struct SelftestArgs {
  bool coverage = false;
  std::string device = "cuda";
  std::string precision = "fp32";
  std::vector<std::string> models;
  bool no_models = false;
};

std::vector<NamedTensor> RandomInputs(const Session& s, uint32_t seed, bool positive) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(positive ? 0.1f : -1.f, positive ? 2.f : 1.f);
  std::vector<NamedTensor> in;
  for (const TensorSpec& spec : s.inputs()) {
    Shape shape;
    for (int64_t dim : spec.dims) shape.push_back(dim >= 0 ? dim : 2);
    Tensor t = Tensor::Empty(DataType::kFloat, shape);
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = d(rng);
    in.push_back({spec.name, t});
  }
  return in;
}

struct Outcome {
  bool ok = false;
  double max_err = 0;
  std::string detail;
  std::vector<std::string> kernels;
};

// `graph`: with SessionOptions::cuda_graph, compare the third run (a replay of the captured
// second run) instead of the first.
Outcome Check(const std::string& model, Backend backend, Precision precision, uint32_t seed,
              bool positive, double tol, bool graph = false) {
  Outcome o;
  SessionOptions ref_opts;
  ref_opts.reference_only = true;
  ref_opts.optimize = false;
  SessionOptions dev_opts;
  dev_opts.backend = backend;
  dev_opts.cuda_graph = graph;
  dev_opts.precision = precision;
  auto ref = Session::LoadFromBytes(model, ref_opts);
  auto dev = Session::LoadFromBytes(model, dev_opts);
  if (!ref.ok() || !dev.ok()) {
    o.detail = (ref.ok() ? dev.status() : ref.status()).ToString();
    return o;
  }
  std::vector<NamedTensor> in = RandomInputs(**ref, seed, positive), want, got;
  auto plan = (*dev)->DescribePlanSummary(in);
  if (plan.ok())
    for (const PlanStep& st : plan->steps)
      if (st.op_type != "LayoutConversion") o.kernels.push_back(st.kernel);
  Status s = (*ref)->Run(in, &want);
  for (int run = 0; run < (graph ? 3 : 1) && s.ok(); ++run) s = (*dev)->Run(in, &got);
  if (!s.ok()) {
    o.detail = s.ToString();
    return o;
  }
  int64_t bad = 0;
  for (size_t k = 0; k < want.size(); ++k) {
    const Tensor& w = want[k].tensor;
    const Tensor& g = got[k].tensor;
    if (w.shape() != g.shape() || w.dtype() != DataType::kFloat) {
      o.detail = "output '" + want[k].name + "' has shape " + ShapeToString(g.shape()) +
                 ", expected " + ShapeToString(w.shape());
      return o;
    }
    for (int64_t i = 0; i < w.numel(); ++i) {
      const double r = w.data<float>()[i], d = g.data<float>()[i];
      const double err = std::fabs(d - r);
      if (std::isnan(r) && std::isnan(d)) continue;
      if (!(err <= tol + tol * std::fabs(r))) {
        if (bad++ == 0)
          o.detail = "output '" + want[k].name + "'[" + std::to_string(i) +
                     "] = " + std::to_string(d) + ", reference " + std::to_string(r);
      }
      if (!std::isnan(err)) o.max_err = std::max(o.max_err, err);
    }
  }
  o.ok = bad == 0;
  if (bad > 1) o.detail += " (" + std::to_string(bad) + " elements out of tolerance)";
  return o;
}

// The bundled demo model: in a release, <prefix>/share/kiln/demo next to <prefix>/bin/kiln; in a
// build tree, the source tree's demo/ (compiled in). "" when neither exists.
std::string BundledModel() {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path exe = fs::canonical("/proc/self/exe", ec);
  std::vector<fs::path> candidates;
  if (!ec) candidates.push_back(exe.parent_path() / "../share/kiln/demo/fashion_mnist_cnn.onnx");
#ifdef KILN_SOURCE_DIR
  candidates.emplace_back(KILN_SOURCE_DIR "/demo/fashion_mnist_cnn.onnx");
#endif
  for (const fs::path& p : candidates)
    if (fs::is_regular_file(p, ec)) return p.lexically_normal().string();
  return "";
}

std::string Join(const std::vector<std::string>& v) {
  std::string s;
  std::set<std::string> seen;
  for (const auto& x : v)
    if (seen.insert(x).second) s += (s.empty() ? "" : ", ") + x;
  return s;
}

int RunCoverage(const SelftestArgs& a) {
  auto missing = KernelsWithoutCases(BackendArg(a.device));
  if (!missing.ok()) {
    std::printf("kiln selftest: cannot list the %s kernels: %s\n", a.device.c_str(),
                missing.status().ToString().c_str());
    return kExitFailed;
  }
  std::printf("%zu registered %s kernels have no case for their op%s%s (%zu registered)\n",
              missing->size(), a.device.c_str(), missing->empty() ? "" : ": ",
              Join(*missing).c_str(), RegisteredKernels(BackendArg(a.device)).size());
  return missing->empty() ? 0 : kExitFailed;
}

// Every kernel of the backend on its op's cases (kiln/diagnostics.h, CheckKernels); returns the
// failures counted into `passed` / `failed`.
void RunKernelCases(Backend backend, int* passed, int* failed) {
  auto report = CheckKernels(backend);
  if (!report.ok()) {
    ++*failed;
    std::printf("  FAIL  kernel cases: %s\n", report.status().ToString().c_str());
    return;
  }
  for (const KernelCaseResult& r : report->results) {
    (r.ok ? *passed : *failed)++;
    std::printf("  %s  %-34s %-44s max|err| %.2e\n", r.ok ? "PASS" : "FAIL", r.kernel.c_str(),
                r.case_name.c_str(), r.max_err);
    if (!r.ok) std::printf("        %s\n", r.detail.c_str());
  }
  for (const std::string& k : report->without_cases) {
    ++*failed;
    std::printf("  FAIL  %s: its op registers no case\n", k.c_str());
  }
  for (const std::string& k : report->never_ran) {
    ++*failed;
    std::printf("  FAIL  %s\n", k.c_str());
  }
  std::printf("%zu %s kernels checked on %zu kernel-case runs\n", report->kernels,
              BackendName(backend), report->results.size());
}

std::string ReadFile(const std::string& path, bool* ok) {
  std::string bytes;
  std::FILE* f = std::fopen(path.c_str(), "rb");
  *ok = f != nullptr;
  if (f == nullptr) return bytes;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) bytes.append(buf, n);
  std::fclose(f);
  return bytes;
}

// The bundled model and every --model on the backend, against the CPU reference kernels.
void RunModels(const SelftestArgs& a, int* passed, int* failed) {
  const Backend backend = BackendArg(a.device);
  const Precision precision = PrecisionArg(a.precision);
  const double model_tol = precision == Precision::kFp32 ? 1e-3 : 5e-2;
  std::printf("models at precision %s: |d - r| <= %g + %g * |r| per element\n", a.precision.c_str(),
              model_tol, model_tol);
  auto report = [&](const std::string& name, const Outcome& o) {
    (o.ok ? *passed : *failed)++;
    std::printf("  %s  %-34s max|err| %.2e  %s\n", o.ok ? "PASS" : "FAIL", name.c_str(), o.max_err,
                Join(o.kernels).c_str());
    if (!o.ok) std::printf("        %s\n", o.detail.c_str());
  };
  std::vector<std::string> models = a.models;
  const size_t given = models.size();
  if (!a.no_models) {
    const std::string bundled = BundledModel();
    if (bundled.empty())
      std::printf(
          "  SKIP  bundled model: share/kiln/demo/fashion_mnist_cnn.onnx not found next "
          "to kiln\n");
    else
      models.push_back(bundled);
  }
  uint32_t seed = 1;
  for (size_t m = 0; m < models.size(); ++m, ++seed) {
    const std::string& path = models[m];
    bool readable = false;
    const std::string bytes = ReadFile(path, &readable);
    if (!readable) {  // a --model the user named is a failure; the bundled one may be absent
      const bool named = m < given;
      if (named) ++*failed;
      std::printf("  %s  model %s: cannot open it\n", named ? "FAIL" : "SKIP", path.c_str());
      continue;
    }
    const std::string name = "model " + path.substr(path.find_last_of('/') + 1);
    report(name, Check(bytes, backend, precision, seed, false, model_tol));
    if (backend == Backend::kCuda)
      report(name + " (CUDA graph)",
             Check(bytes, backend, precision, seed, false, model_tol, true));
  }
}

int RunSelftest(const SelftestArgs& a) {
  if (a.coverage) return RunCoverage(a);
  const Backend backend = BackendArg(a.device);
  auto device = OpenDeviceDescription(backend);
  if (!device.ok()) {
    std::printf(
        "kiln selftest: NOTHING WAS CHECKED on backend '%s'.\n  %s\n  Run `kiln doctor` for "
        "the build, driver and devices. Exit code %d means: not checked.\n",
        a.device.c_str(), device.status().ToString().c_str(), kExitNotChecked);
    return kExitNotChecked;
  }
  std::printf("kiln selftest: backend '%s'%s%s, against the CPU reference kernels\n",
              a.device.c_str(), backend != Backend::kCpu ? " on " : "",
              backend != Backend::kCpu ? device->c_str() : "");
  std::printf(
      "kernel cases (each op's own, src/ops): |d - r| <= the case's tolerance (1e-4 + 1e-4 * |r| "
      "unless the case says; 1e-2 relative for float16 runs)\n");
  int passed = 0, failed = 0;
  RunKernelCases(backend, &passed, &failed);
  RunModels(a, &passed, &failed);
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed > 0 ? kExitFailed : 0;
}

}  // namespace

void AddSelftestCommand(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<SelftestArgs>();
  CLI::App* cmd = app.add_subcommand(
      "selftest", "Check every kernel of a device backend against the CPU reference kernels");
  cmd->add_option("--device,-d", args->device, "Backend to check: cuda (default) or cpu")
      ->check(CLI::IsMember({"cuda", "cpu"}));
  cmd->add_option("--model,-m", args->models, "Also check this ONNX model (repeatable)");
  cmd->add_option("--precision", args->precision,
                  "fp32 (default), fp16 (cuda) or bf16 (cpu): the device's precision")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16"}));
  cmd->add_flag("--no-models", args->no_models, "Skip the bundled model");
  cmd->add_flag("--coverage", args->coverage,
                "Only list the backend's registered kernels whose op no case contains (no device "
                "needed); exit 2 if any");
  cmd->callback([args, exit_code] { *exit_code = RunSelftest(*args); });
}

}  // namespace kiln::cli
