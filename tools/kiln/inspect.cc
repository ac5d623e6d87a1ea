// `kiln inspect MODEL [--optimized] [--shape NAME=AxBxC]`: what the model is and whether kiln can
// run it: IR version, opsets, inputs/outputs, op histogram, parameters, unsupported nodes.
// --optimized adds the graph optimizer's log, the op histogram after it, and the execution plan.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <map>

#include "common.h"
#include "kiln/session.h"
#include "onnx/onnx_loader.h"
#include "passes/pass_manager.h"
#include "runtime/execution_plan.h"

namespace kiln::cli {
namespace {

struct InspectArgs {
  bool tune = false;
  std::string precision = "fp32";
  std::string model;
  bool optimized = false;
  std::vector<std::string> shapes;
};

std::string ValueString(const ir::Value& v) {
  TensorSpec s;
  s.dtype = v.dtype;
  if (v.shape) {
    s.rank_known = true;
    for (const auto& d : *v.shape) {
      s.dims.push_back(d.fixed() ? d.value : -1);
      s.dim_names.push_back(d.param);
    }
  }
  return s.ToString();
}

// "<title>: <count>" and one line per op type ("domain.op" outside ai.onnx).
void PrintHistogram(const char* title, const ir::Graph& g) {
  std::map<std::string, int> hist;
  for (const auto& n : g.nodes) hist[(n.domain.empty() ? "" : n.domain + ".") + n.op_type]++;
  std::printf("%s: %zu\n", title, g.nodes.size());
  for (const auto& [op, c] : hist) std::printf("  %-24s %d\n", op.c_str(), c);
}

Status DoInspect(const InspectArgs& a) {
  KILN_ASSIGN_OR_RETURN(auto graph, onnxio::LoadModel(a.model));
  const ir::Graph& g = *graph;
  std::printf("model: %s\n", a.model.c_str());
  std::printf("ir_version: %lld   producer: %s\n", static_cast<long long>(g.ir_version),
              g.producer.empty() ? "(none)" : g.producer.c_str());
  std::printf("opsets:");
  for (const auto& [d, v] : g.opset_imports)
    std::printf(" %s=%d", d.empty() ? "ai.onnx" : d.c_str(), v);
  std::printf("\ninputs:\n");
  for (int id : g.inputs)
    std::printf("  %s: %s\n", g.values[id].name.c_str(), ValueString(g.values[id]).c_str());
  std::printf("outputs:\n");
  for (int id : g.outputs)
    std::printf("  %s: %s\n", g.values[id].name.c_str(), ValueString(g.values[id]).c_str());
  int64_t params = 0, param_bytes = 0;
  for (const auto& v : g.values)
    if (v.constant) {
      params += v.constant->numel();
      param_bytes += static_cast<int64_t>(v.constant->bytes());
    }
  for (const auto& n : g.nodes)
    if (const Tensor* t = n.GetTensor("value")) {
      params += t->numel();
      param_bytes += static_cast<int64_t>(t->bytes());
    }
  std::printf("parameters: %lld (%.2f MB)\n", static_cast<long long>(params), param_bytes / 1e6);
  PrintHistogram("nodes", g);

  KILN_ASSIGN_OR_RETURN(auto model, runtime::BuildModel(std::move(graph)));
  if (model->unsupported.empty()) {
    std::printf("supported: yes, every node has a kiln implementation\n");
  } else {
    std::printf("supported: NO\n%s\n",
                runtime::UnsupportedNodesError(model->unsupported).message().c_str());
    return OkStatus();
  }
  if (a.optimized) {
    // What the graph optimizer does at Session load, on a fresh copy of the graph.
    KILN_ASSIGN_OR_RETURN(auto optimized, onnxio::LoadModel(a.model));
    std::vector<std::string> log;
    KILN_RETURN_IF_ERROR(passes::RunDefaultPasses(*optimized, SessionOptions{}, &log));
    std::printf("optimizer:\n");
    if (log.empty()) std::printf("  (nothing to change)\n");
    for (const auto& line : log) std::printf("  %s\n", line.c_str());
    PrintHistogram("optimized nodes", *optimized);
  }

  // The execution plan for concrete shapes: --shape overrides; symbolic dims default to 1.
  SessionOptions opts;
  opts.tune = a.tune;
  opts.precision = a.precision;
  KILN_ASSIGN_OR_RETURN(auto session, Session::Load(a.model, opts));
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
  auto plan = session->DescribePlan(inputs);
  if (!plan.ok()) {
    // Planning can need real input values (data-dependent shapes); say so instead of failing.
    std::printf("plan for%s: not available: %s\n", shapes.c_str(), plan.status().message().c_str());
    return OkStatus();
  }
  if (a.optimized) {
    std::printf("plan for%s:\n%s", shapes.c_str(), plan->c_str());
  } else {
    // Just the memory plan: planned peak activation bytes for these shapes.
    size_t at = plan->find("memory plan:");
    std::string line = at == std::string::npos ? "" : plan->substr(at, plan->find('\n', at) - at);
    std::printf("%s (for%s)\n", line.c_str(), shapes.c_str());
  }
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
