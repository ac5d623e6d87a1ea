#include "runtime/body_planner.h"

#include <map>
#include <mutex>

#include "ops/control/control_flow.h"
#include "passes/inline_if.h"
#include "passes/pass_manager.h"
#include "runtime/executor.h"
#include "runtime/planner.h"

namespace kiln::runtime {
namespace {

class PlannedBody final : public ops::BodyRunner {
 public:
  PlannedBody(const ir::Graph& body, const std::vector<const Tensor*>& capture_constants,
              const SessionOptions& options, const std::string& what)
      : options_(options), what_(what), resources_(std::make_shared<SessionResources>()) {
    auto g = std::make_unique<ir::Graph>(body);
    const size_t formal = body.inputs.size();
    for (size_t k = 0; k < formal; ++k) input_map_.push_back(static_cast<int>(k));
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
      input_map_.push_back(static_cast<int>(formal + k));
    }
    g->captures.clear();
    // Not checked again here: the op's interpreters refused unsupported nodes and bad structure
    // when the op was created, and each specialized copy is checked when it is planned.
    graph_ = std::move(g);
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
    std::shared_ptr<const Executor> exec;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = plans_.find(key);
      if (it != plans_.end()) exec = it->second;
    }
    if (!exec) {
      KILN_ASSIGN_OR_RETURN(exec, Specialize(shapes));
      std::lock_guard<std::mutex> lock(mu_);
      if (plans_.size() < kMaxBodyPlans) plans_.emplace(key, exec);
    }
    outputs->clear();
    return exec->Run(feed, outputs);
  }

 private:
  // An executor for one signature of input shapes: the body with the Ifs its shapes decide
  // inlined, optimized, checked and planned.
  StatusOr<std::shared_ptr<const Executor>> Specialize(const std::vector<Tensor>& inputs) const {
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
    KILN_ASSIGN_OR_RETURN(std::shared_ptr<const Model> model, BuildModel(std::move(g)));
    if (!model->unsupported.empty())
      return UnsupportedNodesError(model->unsupported).AddContext("in " + what_);
    KILN_ASSIGN_OR_RETURN(std::shared_ptr<const ExecutionPlan> plan,
                          PlanExecution(*model, inputs, options_, nullptr, nullptr, resources_,
                                        /*body=*/true));
    return std::make_shared<const Executor>(std::move(model), std::move(plan));
  }

  SessionOptions options_;
  std::string what_;
  std::unique_ptr<ir::Graph> graph_;  // the body, captured constants baked in, captures as inputs
  std::vector<int> input_map_;        // per nested graph input: the index into Run's inputs
  std::shared_ptr<SessionResources> resources_;  // shared by the body's plans (packed weights)
  mutable std::mutex mu_;
  mutable std::map<std::string, std::shared_ptr<const Executor>> plans_;
};

class RuntimeBodyPlanner final : public BodyPlanner {
 public:
  explicit RuntimeBodyPlanner(const SessionOptions& session) {
    // The session's threads, precision and passes; bodies are planned on the CPU, untuned.
    options_.backend = Backend::kCpu;
    options_.num_threads = session.num_threads;
    options_.precision = session.precision;
  }

  StatusOr<std::unique_ptr<ops::BodyRunner>> PlanBody(
      const ir::Graph& body, const std::vector<const Tensor*>& capture_constants,
      const std::string& what) const override {
    return std::unique_ptr<ops::BodyRunner>(
        std::make_unique<PlannedBody>(body, capture_constants, options_, what));
  }

 private:
  SessionOptions options_;
};

}  // namespace

std::unique_ptr<BodyPlanner> NewBodyPlanner(const SessionOptions& options) {
  return std::make_unique<RuntimeBodyPlanner>(options);
}

}  // namespace kiln::runtime
