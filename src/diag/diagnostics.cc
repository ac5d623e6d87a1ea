// Backends, kernels and ops as kiln/diagnostics.h describes them: thin views of the registries
// (ir::OpRegistry, runtime::KernelRegistry) and of the plugin loader.
#include "kiln/diagnostics.h"

#include <algorithm>
#include <cctype>
#include <map>

#include "ir/op.h"
#include "runtime/device.h"
#include "runtime/kernel.h"
#include "runtime/plugin.h"

namespace kiln {

Status LoadBackend(Backend backend) {
  if (backend == Backend::kCpu) return OkStatus();
  return runtime::LoadBackendPlugin(backend);
}

StatusOr<std::string> OpenDeviceDescription(Backend backend) {
  KILN_ASSIGN_OR_RETURN(auto device, runtime::OpenDevice(backend, 0));
  return device ? device->Describe() : std::string("cpu");
}

std::vector<KernelInfo> RegisteredKernels(Backend backend) {
  std::vector<KernelInfo> out;
  for (const runtime::KernelDef* d : runtime::KernelRegistry::Global().All(backend))
    out.push_back({d->name, d->op_type, d->domain, d->since, d->until, d->priority});
  return out;
}

std::vector<OpInfo> RegisteredOps() {
  std::map<std::string, OpInfo> rows;  // "domain.op" -> row
  for (const ir::OpDef* d : ir::OpRegistry::Global().All()) {
    OpInfo& r = rows[(d->domain.empty() ? "" : d->domain + ".") + d->op_type];
    if (r.op_type.empty()) {
      r.domain = d->domain;
      r.op_type = d->op_type;
      r.since = d->since;
      r.until = d->until;
    }
    r.since = std::min(r.since, d->since);
    r.until = std::max(r.until, d->until);
  }
  std::vector<OpInfo> out;
  for (auto& [key, r] : rows) {
    std::string ref = "cpu." + r.op_type + ".ref";
    std::transform(ref.begin(), ref.end(), ref.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    r.cpu_kernels.push_back(ref);
    ir::Node probe;
    probe.op_type = r.op_type;
    probe.domain = r.domain;
    auto add = [](std::vector<std::string>* v, const std::string& name) {
      if (std::find(v->begin(), v->end(), name) == v->end()) v->push_back(name);
    };
    for (int v = r.since; v <= r.until; ++v) {
      probe.opset = v;
      for (const auto* k : runtime::KernelRegistry::Global().Candidates(probe, Backend::kCpu))
        add(&r.cpu_kernels, k->name);
      for (const auto* k : runtime::KernelRegistry::Global().Candidates(probe, Backend::kCuda)) {
        add(&r.cuda_kernels, k->name);
        if (!k->half_inputs.empty()) add(&r.float16_kernels, k->name);
      }
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace kiln
