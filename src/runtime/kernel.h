// Kernel: an executable implementation of one node for one backend. Create() happens once per
// node per plan; Prepare() does the shape-dependent work (algorithm choice, workspace, weight
// repacking) once per input-shape signature; Run() allocates nothing it can avoid and is const so
// one prepared kernel may serve concurrent runs.
//
// KernelDef describes an implementation: op, opset range, backend, priority and Supports(), which
// gives a reason when it declines a node. The selector tries implementations by descending
// priority; every op's reference kernel (ir::Op::Compute, named "<backend>.<op>.ref") is the last
// resort. KILN_VERBOSE=dispatch prints every rejection.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ir/op.h"

namespace kiln::runtime {

struct TensorInfo {
  DataType dtype = DataType::kUndefined;
  Shape shape;
};

struct KernelSupport {
  bool ok = false;
  std::string reason;
};

class Kernel {
 public:
  virtual ~Kernel() = default;
  // `inputs`/`outputs` carry concrete shapes; omitted optional ones have kUndefined dtype.
  virtual Status Prepare(const std::vector<TensorInfo>& inputs,
                         const std::vector<TensorInfo>& outputs) {
    return OkStatus();
  }
  virtual Status Run(const ir::ComputeContext& ctx) const = 0;
};

struct KernelDef {
  std::string name;  // "<backend>.<op>.<algo>", e.g. "cpu.conv.onednn"
  std::string op_type;
  std::string domain;
  int since = ir::kMinOpset;
  int until = ir::kMaxOpset;
  std::string backend = "cpu";
  int priority = 1;  // higher wins; reference kernels are 0
  std::function<KernelSupport(const ir::Node&, const ir::Op&, const std::vector<TensorInfo>&)>
      supports;
  std::function<std::unique_ptr<Kernel>(const ir::Node&, const ir::Op&)> create;
};

class KernelRegistry {
 public:
  static KernelRegistry& Global();
  void Register(KernelDef def);
  // Candidates for a node on `backend`, highest priority first.
  std::vector<const KernelDef*> Candidates(const ir::Node& node, const std::string& backend) const;

 private:
  std::vector<std::unique_ptr<KernelDef>> defs_;
};

struct KernelRegistrar {
  explicit KernelRegistrar(KernelDef def) { KernelRegistry::Global().Register(std::move(def)); }
};

// The chosen kernel and its name, after trying candidates by priority and falling back to the
// op's reference kernel. `log` receives rejection reasons when non-null.
struct SelectedKernel {
  std::unique_ptr<Kernel> kernel;
  std::string name;
};
SelectedKernel SelectKernel(const ir::Node& node, const ir::Op& op,
                            const std::vector<TensorInfo>& inputs, const std::string& backend,
                            bool reference_only);

}  // namespace kiln::runtime

#define KILN_REGISTER_KERNEL(...)                                              \
  static ::kiln::runtime::KernelRegistrar KILN_CONCAT_(kiln_kernel_registrar_, \
                                                       __COUNTER__)(__VA_ARGS__)
