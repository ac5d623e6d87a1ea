// Kernel: an executable implementation of one node for one backend. Create() happens once per
// node per plan; Prepare() does the shape-dependent work (algorithm choice, workspace, weight
// repacking) once per input-shape signature; Run() allocates nothing it can avoid and is const so
// one prepared kernel may serve concurrent runs.
//
// KernelDef describes an implementation: op, opset range, backend, the session precisions it
// computes as asked, priority and Supports(), which gives a reason when it declines a node. The
// selector tries implementations by descending priority; every op's reference kernel
// (ir::Op::Compute, named "<backend>.<op>.ref") is the last resort. KILN_VERBOSE=dispatch prints
// every rejection.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <shared_mutex>
#include <string>
#include <vector>

#include "ir/op.h"
#include "runtime/device.h"

namespace kiln::ops {
class BodyRunner;  // ops/control/control_flow.h
}  // namespace kiln::ops

namespace kiln::runtime {

// A physical layout other than dense row-major, chosen by a backend kernel for a value it
// produces (e.g. oneDNN's blocked nChw16c). Values without one are plain row-major. A Layout knows
// its size and how to convert a buffer to plain, so the planner can insert conversions wherever a
// consumer (or the graph output) needs plain data. Immutable; shared by plans.
class Layout {
 public:
  virtual ~Layout() = default;
  virtual size_t bytes() const = 0;
  virtual std::string name() const = 0;
  virtual Status ToPlain(const void* src, void* dst) const = 0;
  // Makes now what ToPlain needs (a reorder primitive), so runs allocate nothing for it; called
  // when a plan adds a conversion step. Best effort: ToPlain makes it itself and reports failures.
  virtual void PrepareToPlain() const {}
};

struct TensorInfo {
  DataType dtype = DataType::kUndefined;
  Shape shape;
  std::shared_ptr<const Layout> layout;  // nullptr: plain
};

// What Kernel::Prepare sees: concrete input infos (with layouts), the values of inputs that are
// constant (weights; nullptr otherwise), and output infos whose layout the kernel may set.
class WeightCache;

// Plans control-flow bodies for the kernels that run them (If, Loop and Scan on the CPU): the
// runtime plans each body with the same planner and runs it with the same executor as a model
// (runtime/body_planner.h); kernels never plan themselves.
class BodyPlanner {
 public:
  virtual ~BodyPlanner() = default;
  // A runner for `body`. `capture_constants`: per captured outer value (ir::Graph::captures), its
  // value when constant in the enclosing plan (baked into the body, so weights it reads from
  // outside are prepacked), else null. `what` names the body in messages.
  virtual StatusOr<std::unique_ptr<ops::BodyRunner>> PlanBody(
      const ir::Graph& body, const std::vector<const Tensor*>& capture_constants,
      const std::string& what) const = 0;
};

struct PrepareContext {
  std::vector<TensorInfo> inputs;
  std::vector<const Tensor*> constants;
  std::vector<TensorInfo> outputs;
  int num_threads = 1;
  Precision precision = Precision::kFp32;
  // SessionOptions::tune: time alternative implementations and keep the fastest, unless the plan
  // cache already holds this node's choice (`cached_variant`, "" for the default).
  bool tune = false;
  const std::string* cached_variant = nullptr;
  // The backend's device (nullptr on the CPU): kernels allocate device copies of what they
  // prepack here, once.
  Device* device = nullptr;
  // The session's packed-weight cache (session_resources.h): kernels that repack constant
  // weights take them from here, so every plan of the session shares one packed copy. May be
  // null (a kernel then packs its own copy).
  WeightCache* weights = nullptr;
  // Plans control-flow bodies; set by the planner.
  const BodyPlanner* bodies = nullptr;
};

struct KernelSupport {
  bool ok = false;
  std::string reason;
  // Declined only because another kernel is faster on this machine or shape (not because the
  // kernel cannot compute it): the selector passes it over, the kernel harness runs it anyway.
  bool preference = false;
};

class Kernel {
 public:
  virtual ~Kernel() = default;
  // Omitted optional inputs/outputs have kUndefined dtype. May set ctx->outputs[i].layout.
  virtual Status Prepare(PrepareContext* ctx) { return OkStatus(); }
  // Whether input i may arrive in a non-plain layout (the one Prepare saw). When false, the
  // planner converts such an input to plain before this kernel.
  virtual bool AcceptsLayout(size_t input) const { return false; }
  // An input whose buffer the output (output 0) may overwrite, or -1. The planner uses it only
  // when this step is that input's last reader and the sizes match; Run() must then handle
  // in.raw() == out.raw().
  virtual int InPlaceInput() const { return -1; }
  // Scratch bytes Run() needs (valid after Prepare); the planner provides them from the arena.
  virtual size_t ScratchBytes() const { return 0; }
  // Which variant Prepare picked when a kernel has several ("matmul"), shown after the kernel's
  // name in plan descriptions; "" for none.
  virtual std::string variant() const { return ""; }
  virtual Status Run(const ir::ComputeContext& ctx) const = 0;
};

// The op's typed attributes of type A (declared in the op's header under ops/, e.g. ops/nn/conv.h),
// or A's defaults when the op has none of that type. Kernels take their attributes from here, never
// by name from the node.
template <typename A>
const A& AttrsOf(const ir::Op& op) {
  static const A kDefaults;
  const A* a = op.attrs<A>();
  return a != nullptr ? *a : kDefaults;
}

struct KernelDef {
  std::string name;  // "<backend>.<op>.<algo>", e.g. "cpu.conv.onednn"
  std::string op_type;
  std::string domain;
  int since = ir::kMinOpset;
  int until = ir::kMaxOpset;
  Backend backend = Backend::kCpu;
  int priority = 1;  // higher wins; reference kernels are 0
  std::function<KernelSupport(const ir::Node&, const ir::Op&, const std::vector<TensorInfo>&)>
      supports;
  std::function<std::unique_ptr<Kernel>(const ir::Node&, const ir::Op&)> create;
  // Inputs that must be constant (weights the kernel prepacks); the selector declines otherwise.
  std::vector<int> constant_inputs;
  // The data inputs this kernel also takes as float16 (kAllInputs: every input), its float
  // outputs then being float16 too: under precision fp16 the session stores activations as
  // float16 between such kernels (runtime/half_values.h). Other inputs (weights, bias, scales)
  // stay float32. Empty: float32 only.
  std::vector<int> half_inputs = {};
  // The session precisions under which this kernel computes as the session asks (a convolution
  // computing in bf16 under kBf16 and in float32 under kFp32); the selector passes it over under
  // any other. Empty: the precision does not change what it computes (elementwise ops, data
  // movement, int8), so it is chosen under any.
  std::vector<Precision> precisions = {};
};
inline constexpr int kAllInputs = -1;

// Whether `def` may run under session precision `p` (its precisions are empty or name p).
bool RunsUnder(const KernelDef& def, Precision p);

class KernelRegistry {
 public:
  static KernelRegistry& Global();
  void Register(KernelDef def);
  // Candidates for a node on `backend`, highest priority first.
  std::vector<const KernelDef*> Candidates(const ir::Node& node, Backend backend) const;
  // Every implementation registered for `backend`, in registration order.
  std::vector<const KernelDef*> All(Backend backend) const;

 private:
  // A backend plugin (runtime/plugin.h) registers while other threads may be planning.
  mutable std::shared_mutex mu_;
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
  bool reference = false;  // the op's reference kernel (host memory only)
  std::string declined;    // why each candidate declined, when the reference was chosen
};
// `precision`: the session's; a kernel whose KernelDef::precisions lack it is passed over.
// `refused`: kernels whose Prepare already returned Unsupported for this node (name -> why),
// passed over like a decline.
SelectedKernel SelectKernel(const ir::Node& node, const ir::Op& op,
                            const std::vector<TensorInfo>& inputs,
                            const std::vector<const Tensor*>& constants, Backend backend,
                            Precision precision, bool reference_only,
                            const std::map<std::string, std::string>* refused = nullptr);

// Backends say which session precisions they can honour on this machine: Session::Load refuses
// the others with the backend's reason.
using PrecisionCheck = Status (*)(Precision precision);
struct PrecisionCheckRegistrar {
  PrecisionCheckRegistrar(Backend backend, PrecisionCheck check);
};
Status CheckPrecision(Backend backend, Precision precision);

// Libraries whose version changes what planning chooses ("oneDNN 2.6.3"); backends register
// theirs at static initialization; the plan cache key of a session on `backend` includes those
// of kCpu and of `backend`.
struct LibraryVersionRegistrar {
  LibraryVersionRegistrar(Backend backend, std::string (*version)());
};
std::string LibraryVersions(Backend backend);

}  // namespace kiln::runtime

#define KILN_REGISTER_KERNEL(...)                                              \
  static ::kiln::runtime::KernelRegistrar KILN_CONCAT_(kiln_kernel_registrar_, \
                                                       __COUNTER__)(__VA_ARGS__)
