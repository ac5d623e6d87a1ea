#include "runtime/kernel.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

namespace kiln::runtime {
namespace {

// Wraps an op's reference implementation as a kernel.
class ReferenceKernel final : public Kernel {
 public:
  explicit ReferenceKernel(const ir::Op& op) : op_(op) {}
  Status Run(const ir::ComputeContext& ctx) const override { return op_.Compute(ctx); }
  int InPlaceInput() const override { return op_.InPlaceInput(); }

 private:
  const ir::Op& op_;
};

bool VerboseDispatch() {
  static const bool on = [] {
    const char* v = std::getenv("KILN_VERBOSE");
    return v != nullptr && std::strstr(v, "dispatch") != nullptr;
  }();
  return on;
}

// KILN_DISABLE_KERNELS=name,name: kernels never selected (to compare a kernel with the one it
// displaces, or to step around a suspect one); read when a plan is made, never while running.
bool KernelDisabled(const std::string& name) {
  const char* v = std::getenv("KILN_DISABLE_KERNELS");
  return v != nullptr && ("," + std::string(v) + ",").find("," + name + ",") != std::string::npos;
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// "computes in fp32; the session asks bf16": why a kernel is passed over under `p`.
std::string PrecisionReason(const KernelDef& def, Precision p) {
  std::string names;
  for (size_t i = 0; i < def.precisions.size(); ++i)
    names += std::string(i == 0                           ? ""
                         : i + 1 == def.precisions.size() ? " or "
                                                          : ", ") +
             PrecisionName(def.precisions[i]);
  return "computes in " + names + "; the session asks " + PrecisionName(p);
}

}  // namespace

KernelRegistry& KernelRegistry::Global() {
  static KernelRegistry* r = new KernelRegistry();
  return *r;
}

void KernelRegistry::Register(KernelDef def) {
  std::unique_lock lock(mu_);
  defs_.push_back(std::make_unique<KernelDef>(std::move(def)));
}

std::vector<const KernelDef*> KernelRegistry::Candidates(const ir::Node& node,
                                                         Backend backend) const {
  std::vector<const KernelDef*> out;
  std::shared_lock lock(mu_);
  for (const auto& d : defs_)
    if (d->op_type == node.op_type && d->domain == node.domain && d->backend == backend &&
        node.opset >= d->since && node.opset <= d->until)
      out.push_back(d.get());
  std::stable_sort(out.begin(), out.end(), [](const KernelDef* a, const KernelDef* b) {
    return a->priority > b->priority;
  });
  return out;
}

std::vector<const KernelDef*> KernelRegistry::All(Backend backend) const {
  std::vector<const KernelDef*> out;
  std::shared_lock lock(mu_);
  for (const auto& d : defs_)
    if (d->backend == backend) out.push_back(d.get());
  return out;
}

bool RunsUnder(const KernelDef& def, Precision p) {
  return def.precisions.empty() ||
         std::find(def.precisions.begin(), def.precisions.end(), p) != def.precisions.end();
}

SelectedKernel SelectKernel(const ir::Node& node, const ir::Op& op,
                            const std::vector<TensorInfo>& inputs,
                            const std::vector<const Tensor*>& constants, Backend backend,
                            Precision precision, bool reference_only,
                            const std::map<std::string, std::string>* refused) {
  std::string declined;
  if (!reference_only) {
    for (const KernelDef* def : KernelRegistry::Global().Candidates(node, backend)) {
      KernelSupport s{true, ""};
      if (KernelDisabled(def->name)) s = {false, "disabled by KILN_DISABLE_KERNELS"};
      if (refused != nullptr && refused->count(def->name))
        s = {false, "its Prepare refused: " + refused->at(def->name)};
      for (int i : def->constant_inputs)
        if (node.HasInput(i) && (static_cast<size_t>(i) >= constants.size() || !constants[i]))
          s = {false, "input " + std::to_string(i) + " must be constant (it is prepacked)"};
      if (s.ok && !RunsUnder(*def, precision)) s = {false, PrecisionReason(*def, precision)};
      if (s.ok && def->supports) s = def->supports(node, op, inputs);
      if (s.ok) {
        if (VerboseDispatch())
          std::fprintf(stderr, "kiln dispatch: %s -> %s\n", node.Describe().c_str(),
                       def->name.c_str());
        return {def->create(node, op), def->name, false, ""};
      }
      declined += (declined.empty() ? "" : "; ") + def->name + ": " + s.reason;
      if (VerboseDispatch())
        std::fprintf(stderr, "kiln dispatch: %s: %s declined: %s\n", node.Describe().c_str(),
                     def->name.c_str(), s.reason.c_str());
    }
  }
  std::string name = std::string(BackendName(backend)) + "." + Lower(node.op_type) + ".ref";
  if (VerboseDispatch())
    std::fprintf(stderr, "kiln dispatch: %s -> %s\n", node.Describe().c_str(), name.c_str());
  if (declined.empty())
    declined = reference_only ? "reference kernels only" : "no kernel registered";
  return {std::make_unique<ReferenceKernel>(op), name, true, declined};
}

namespace {
// Backend plugins register these from dlopen while other threads may plan: one lock for both.
std::mutex& RegistrationMutex() {
  static auto* m = new std::mutex();
  return *m;
}
std::map<Backend, PrecisionCheck>& PrecisionChecks() {
  static auto* m = new std::map<Backend, PrecisionCheck>();
  return *m;
}
std::vector<std::pair<Backend, std::string (*)()>>& VersionFns() {
  static auto* v = new std::vector<std::pair<Backend, std::string (*)()>>();
  return *v;
}
}  // namespace

PrecisionCheckRegistrar::PrecisionCheckRegistrar(Backend backend, PrecisionCheck check) {
  std::lock_guard<std::mutex> lock(RegistrationMutex());
  PrecisionChecks()[backend] = check;
}

LibraryVersionRegistrar::LibraryVersionRegistrar(Backend backend, std::string (*version)()) {
  std::lock_guard<std::mutex> lock(RegistrationMutex());
  VersionFns().emplace_back(backend, version);
}

std::string LibraryVersions(Backend backend) {
  std::vector<std::string (*)()> fns;
  {
    std::lock_guard<std::mutex> lock(RegistrationMutex());
    for (const auto& [b, f] : VersionFns())
      if (b == Backend::kCpu || b == backend) fns.push_back(f);
  }
  std::string s;
  for (auto* f : fns) s += (s.empty() ? "" : ", ") + f();
  return s;
}

Status CheckPrecision(Backend backend, Precision precision) {
  PrecisionCheck check = nullptr;
  {
    std::lock_guard<std::mutex> lock(RegistrationMutex());
    auto it = PrecisionChecks().find(backend);
    if (it != PrecisionChecks().end()) check = it->second;
  }
  if (check != nullptr) return check(precision);
  if (precision == Precision::kFp32) return OkStatus();
  return Unsupported("backend '" + std::string(BackendName(backend)) +
                     "' supports precision fp32 only; got '" + PrecisionName(precision) + "'");
}

}  // namespace kiln::runtime
