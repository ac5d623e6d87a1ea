// cpu.if.subplan, cpu.loop.subplan, cpu.scan.subplan: If, Loop and Scan with their bodies run as
// nested execution plans on the CPU backend, with the fast kernels. The semantics are the op's
// (ops/control/control_flow.h, ControlFlowOp::Execute); only the way a body runs differs from the
// reference kernel, which interprets bodies node by node on reference kernels. The runtime plans
// and runs the bodies (PrepareContext::bodies, runtime/body_planner.h); this kernel only asks.
#include "ops/control/control_flow.h"

#include "runtime/kernel.h"

namespace kiln::backends::cpu {
namespace {

class ControlFlowSubplan final : public runtime::Kernel {
 public:
  ControlFlowSubplan(const ir::Node& node, const ir::Op& op)
      : node_(node), op_(dynamic_cast<const ops::ControlFlowOp&>(op)) {}

  Status Prepare(runtime::PrepareContext* ctx) override {
    if (ctx->bodies == nullptr) return Unsupported("no body planner (planned outside the runtime)");
    const size_t explicit_inputs = node_.num_explicit_inputs();
    std::vector<const Tensor*> capture_constants(
        ctx->constants.begin() + static_cast<ptrdiff_t>(explicit_inputs), ctx->constants.end());
    runners_.clear();
    for (const auto& body : op_.bodies()) {
      auto r = ctx->bodies->PlanBody(*body.graph, capture_constants,
                                     "`" + body.attr + "` of " + node_.Describe());
      if (!r.ok()) return r.status();
      runners_.push_back(std::move(r).value());
    }
    return OkStatus();
  }

  Status Run(const ir::ComputeContext& ctx) const override {
    std::vector<const ops::BodyRunner*> runners;
    for (const auto& r : runners_) runners.push_back(r.get());
    return op_.Execute(ctx, runners);
  }

 private:
  ir::Node node_;
  const ops::ControlFlowOp& op_;
  std::vector<std::unique_ptr<ops::BodyRunner>> runners_;
};

runtime::KernelSupport SupportsControlFlow(const ir::Node&, const ir::Op& op,
                                           const std::vector<runtime::TensorInfo>&) {
  if (dynamic_cast<const ops::ControlFlowOp*>(&op) == nullptr)
    return {false, "not a control-flow op"};
  return {true, ""};
}

std::unique_ptr<runtime::Kernel> CreateControlFlow(const ir::Node& node, const ir::Op& op) {
  return std::make_unique<ControlFlowSubplan>(node, op);
}

#define KILN_CONTROL_FLOW_KERNEL(OP, NAME, SINCE)                 \
  KILN_REGISTER_KERNEL(runtime::KernelDef{"cpu." NAME ".subplan", \
                                          OP,                     \
                                          "",                     \
                                          SINCE,                  \
                                          ir::kMaxOpset,          \
                                          Backend::kCpu,          \
                                          10,                     \
                                          SupportsControlFlow,    \
                                          CreateControlFlow,      \
                                          {}})
KILN_CONTROL_FLOW_KERNEL("If", "if", 1);
KILN_CONTROL_FLOW_KERNEL("Loop", "loop", 1);
KILN_CONTROL_FLOW_KERNEL("Scan", "scan", 8);

}  // namespace
}  // namespace kiln::backends::cpu
