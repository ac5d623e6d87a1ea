// cpu.if.subplan, cpu.loop.subplan, cpu.scan.subplan: If, Loop and Scan with their bodies run as
// nested execution plans on the CPU backend, with the fast kernels. The semantics are the op's
// (ops/control/control_flow.h, ControlFlowOp::Execute); only the way a body runs differs from the
// reference kernel, which interprets bodies node by node on reference kernels.
//
// At Prepare each body is copied, captured values that are constant in the enclosing plan are
// baked into it as constants (so weights a body reads from outside are prepacked), and it is
// checked like a model. For each signature of input shapes a body meets (a Loop's carried values
// usually keep theirs, so one plan serves every iteration), the Ifs those shapes decide are
// inlined (passes/inline_if.h: exporters' shape checks, 24 in Silero VAD's bodies, would
// otherwise leave everything after them on reference kernels), the default passes optimize the
// result, and it is planned; at most kMaxPlans per body are kept, a body seeing more signatures
// runs the extra ones with a plan made for the call. Plans are shared by concurrent runs.
#include "ops/control/control_flow.h"

#include <map>
#include <mutex>

#include "passes/inline_if.h"
#include "passes/pass_manager.h"
#include "runtime/execution_plan.h"

namespace kiln::backends::cpu {
namespace {

constexpr size_t kMaxPlans = 16;

class SubPlanRunner final : public ops::BodyRunner {
 public:
  static StatusOr<std::unique_ptr<SubPlanRunner>> Create(
      const ir::Graph& body, const std::vector<const Tensor*>& capture_constants,
      const SessionOptions& options, const std::string& what) {
    auto r = std::unique_ptr<SubPlanRunner>(new SubPlanRunner());
    r->options_ = options;
    auto g = std::make_unique<ir::Graph>(body);
    const size_t formal = body.inputs.size();
    for (size_t k = 0; k < formal; ++k) r->input_map_.push_back(static_cast<int>(k));
    for (size_t k = 0; k < body.captures.size(); ++k) {
      ir::Value& v = g->values[body.captures[k]];
      const Tensor* c = k < capture_constants.size() ? capture_constants[k] : nullptr;
      if (c != nullptr) {
        v.constant = std::make_shared<const Tensor>(c->Clone());
        v.dtype = c->dtype();
        std::vector<ir::Dim> dims;
        for (int64_t d : c->shape()) dims.push_back(ir::Dim{d, ""});
        v.shape = dims;
        continue;
      }
      g->inputs.push_back(body.captures[k]);
      r->input_map_.push_back(static_cast<int>(formal + k));
    }
    g->captures.clear();
    // Not checked again here: the op's interpreters refused unsupported nodes and bad structure
    // when the op was created, and each specialized copy is checked when it is planned.
    r->graph_ = std::move(g);
    r->what_ = what;
    r->resources_ = std::make_shared<runtime::SessionResources>();
    return r;
  }

  // A plan for one signature of input shapes: the body with the Ifs its shapes decide inlined
  // (passes/inline_if.h), optimized, checked and planned.
  struct Specialized {
    std::unique_ptr<runtime::Model> model;
    std::unique_ptr<runtime::ExecutionPlan> plan;
  };
  StatusOr<std::shared_ptr<const Specialized>> Specialize(const std::vector<Tensor>& inputs) const {
    auto g = std::make_unique<ir::Graph>(*graph_);
    std::vector<Shape> shapes;
    for (size_t k = 0; k < g->inputs.size(); ++k) {
      shapes.push_back(inputs[k].shape());
      std::vector<ir::Dim> dims;
      for (int64_t d : inputs[k].shape()) dims.push_back(ir::Dim{d, ""});
      g->values[g->inputs[k]].shape = dims;
      g->values[g->inputs[k]].dtype = inputs[k].dtype();
    }
    KILN_RETURN_IF_ERROR(passes::InlineStaticIfs(*g, shapes).status());
    if (options_.optimize) {
      Status s = passes::RunDefaultPasses(*g, options_, nullptr);
      if (!s.ok()) return s.AddContext("while optimizing " + what_);
    }
    auto spec = std::make_shared<Specialized>();
    KILN_ASSIGN_OR_RETURN(spec->model, runtime::BuildModel(std::move(g)));
    if (!spec->model->unsupported.empty())
      return runtime::UnsupportedNodesError(spec->model->unsupported).AddContext("in " + what_);
    KILN_ASSIGN_OR_RETURN(spec->plan, runtime::ExecutionPlan::Create(*spec->model, inputs, options_,
                                                                     nullptr, nullptr, resources_));
    return std::shared_ptr<const Specialized>(std::move(spec));
  }

  Status Run(const std::vector<const Tensor*>& inputs,
             std::vector<Tensor>* outputs) const override {
    std::vector<const Tensor*> feed;
    std::vector<Tensor> shapes;
    std::string key;
    for (int i : input_map_) {
      if (static_cast<size_t>(i) >= inputs.size() || inputs[i] == nullptr)
        return Internal("a body input is missing");
      feed.push_back(inputs[i]);
      shapes.push_back(*inputs[i]);
      key += std::to_string(static_cast<int>(inputs[i]->dtype())) +
             ShapeToString(inputs[i]->shape()) + ";";
    }
    std::shared_ptr<const Specialized> spec;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = plans_.find(key);
      if (it != plans_.end()) spec = it->second;
    }
    if (!spec) {
      KILN_ASSIGN_OR_RETURN(spec, Specialize(shapes));
      std::lock_guard<std::mutex> lock(mu_);
      if (plans_.size() < kMaxPlans) plans_.emplace(key, spec);
    }
    outputs->clear();
    return spec->plan->Execute(*spec->model, feed, outputs);
  }

 private:
  SessionOptions options_;
  std::unique_ptr<ir::Graph> graph_;  // the body, captured constants baked in, captures as inputs
  std::string what_;
  std::vector<int> input_map_;  // per nested graph input: the index into Run's inputs
  std::shared_ptr<runtime::SessionResources> resources_;  // shared by the plans (packed weights)
  mutable std::mutex mu_;
  mutable std::map<std::string, std::shared_ptr<const Specialized>> plans_;
};

class ControlFlowSubplan final : public runtime::Kernel {
 public:
  ControlFlowSubplan(const ir::Node& node, const ir::Op& op)
      : node_(node), op_(dynamic_cast<const ops::ControlFlowOp&>(op)) {}

  Status Prepare(runtime::PrepareContext* ctx) override {
    SessionOptions options;
    options.backend = "cpu";
    options.num_threads = ctx->num_threads;
    options.precision = ctx->precision;
    const size_t explicit_inputs = node_.num_explicit_inputs();
    std::vector<const Tensor*> capture_constants(
        ctx->constants.begin() + static_cast<ptrdiff_t>(explicit_inputs), ctx->constants.end());
    runners_.clear();
    for (const auto& body : op_.bodies()) {
      auto r = SubPlanRunner::Create(*body.graph, capture_constants, options,
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
  std::vector<std::unique_ptr<SubPlanRunner>> runners_;
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
                                          "cpu",                  \
                                          10,                     \
                                          SupportsControlFlow,    \
                                          CreateControlFlow,      \
                                          {}})
KILN_CONTROL_FLOW_KERNEL("If", "if", 1);
KILN_CONTROL_FLOW_KERNEL("Loop", "loop", 1);
KILN_CONTROL_FLOW_KERNEL("Scan", "scan", 8);

}  // namespace
}  // namespace kiln::backends::cpu
