// `kiln inspect MODEL [--optimized] [--shape NAME=AxBxC]`: what the model is and whether kiln can
// run it: IR version, opsets, inputs/outputs, op histogram, parameters, unsupported nodes.
// --optimized adds the graph optimizer's log, the op histogram after it, and the execution plan.
#include "kiln/inspect.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <map>

#include "common.h"
#include "kiln/session.h"

namespace kiln::cli {
namespace {

struct InspectArgs {
  bool tune = false;
  std::string precision = "fp32";
  std::string model;
  bool optimized = false;
  std::vector<std::string> shapes;
};

// "<title>: <count>" and one line per op type ("domain.op" outside ai.onnx).
void PrintHistogram(const char* title, const std::vector<std::pair<std::string, int>>& counts) {
  int total = 0;
  for (const auto& [op, c] : counts) total += c;
  std::printf("%s: %d\n", title, total);
  for (const auto& [op, c] : counts) std::printf("  %-24s %d\n", op.c_str(), c);
}

Status DoInspect(const InspectArgs& a) {
  KILN_ASSIGN_OR_RETURN(const ModelReport r, InspectModel(a.model));
  std::printf("model: %s\n", a.model.c_str());
  std::string producer = r.metadata.producer_name;
  if (!r.metadata.producer_version.empty()) producer += " " + r.metadata.producer_version;
  std::printf("ir_version: %lld   producer: %s\n", static_cast<long long>(r.metadata.ir_version),
              producer.empty() ? "(none)" : producer.c_str());
  std::printf("opsets:");
  for (const auto& [d, v] : r.metadata.opset_imports)
    std::printf(" %s=%d", d.empty() ? "ai.onnx" : d.c_str(), v);
  std::printf("\ninputs:\n");
  for (const TensorSpec& t : r.inputs)
    std::printf("  %s: %s\n", t.name.c_str(), t.ToString().c_str());
  std::printf("outputs:\n");
  for (const TensorSpec& t : r.outputs)
    std::printf("  %s: %s\n", t.name.c_str(), t.ToString().c_str());
  std::printf("parameters: %lld (%.2f MB)\n", static_cast<long long>(r.parameters),
              r.parameter_bytes / 1e6);
  PrintHistogram("nodes", r.op_counts);
  if (!r.unsupported.empty()) {
    std::printf("supported: NO\n%s\n", r.unsupported.c_str());
    return OkStatus();
  }
  std::printf("supported: yes, every node has a kiln implementation\n");

  SessionOptions opts;
  opts.tune = a.tune;
  opts.precision = PrecisionArg(a.precision);
  KILN_ASSIGN_OR_RETURN(auto session, Session::Load(a.model, opts));
  if (a.optimized) {
    // What the graph optimizer did at Session load.
    std::printf("optimizer:\n");
    if (session->optimization_log().empty()) std::printf("  (nothing to change)\n");
    for (const auto& line : session->optimization_log()) std::printf("  %s\n", line.c_str());
    PrintHistogram("optimized nodes", session->optimized_op_counts());
  }

  // The execution plan for concrete shapes: --shape overrides; symbolic dims default to 1.
  std::vector<NamedTensor> inputs;
  for (const auto& spec : session->inputs()) {
    Shape s;
    for (int64_t d : spec.dims) s.push_back(d >= 0 ? d : 1);
    for (const auto& kv : a.shapes) {
      auto eq = kv.find('=');
      if (eq != std::string::npos && kv.substr(0, eq) == spec.name) {
        KILN_ASSIGN_OR_RETURN(s, ParseDims(spec.name, kv.substr(eq + 1)));
      }
    }
    inputs.push_back({spec.name, Tensor::Empty(spec.dtype, s)});
  }
  std::string shapes;
  for (const auto& in : inputs) shapes += " " + in.name + "=" + ShapeToString(in.tensor.shape());
  auto plan = session->DescribePlanSummary(inputs);
  if (!plan.ok()) {
    // Planning can need real input values (data-dependent shapes); say so instead of failing.
    std::printf("plan for%s: not available: %s\n", shapes.c_str(), plan.status().message().c_str());
    return OkStatus();
  }
  if (a.optimized)
    std::printf("plan for%s:\n%s", shapes.c_str(), plan->text.c_str());
  else  // just the memory plan: planned peak activation bytes for these shapes
    std::printf("memory plan: one arena of %zu bytes (%zu of them scratch) (for%s)\n",
                plan->arena_bytes, plan->scratch_bytes, shapes.c_str());
  return OkStatus();
}

}  // namespace

void AddInspectCommand(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<InspectArgs>();
  CLI::App* cmd = app.add_subcommand("inspect", "Describe a model and check kiln can run it");
  cmd->add_option("model", args->model, "ONNX model file")->required();
  cmd->add_flag(
      "--optimized", args->optimized,
      "Also print the optimizer's log, the optimized op histogram and the execution plan");
  cmd->add_option("--shape", args->shapes, "NAME=AxBxC input shape for --optimized");
  cmd->add_flag("--tune", args->tune,
                "Plan with --tune (timed kernel variants, shown as e.g. [matmul])");
  cmd->add_option("--precision", args->precision,
                  "Plan for this precision: fp32 (default) or bf16 (layouts show :bf16)")
      ->check(CLI::IsMember({"fp32", "bf16"}));
  cmd->callback([args, exit_code] {
    Status s = DoInspect(*args);
    if (!s.ok()) *exit_code = Fail(s);
  });
}

}  // namespace kiln::cli
