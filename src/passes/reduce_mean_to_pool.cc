// reduce_mean_to_pool: ReduceMean of a float32 4-D tensor over its two spatial axes (2 and 3, as
// `x.mean([2, 3])` exports: ShuffleNetV2, MNASNet) becomes GlobalAveragePool, followed by
// Flatten(axis 1) when keepdims is 0 ([N, C, 1, 1] and [N, C] hold the same values in the same
// order). The same mean, so the same values up to the order of the additions; GlobalAveragePool
// has fast kernels (a channels-last input is reduced where it lies) where ReduceMean has only its
// reference kernel. Axes from the attribute or a constant input (opset 18); negative axes count
// from the end.
#include <algorithm>
#include <memory>
#include <string>

#include "passes/graph_edit.h"
#include "passes/pass.h"
#include "passes/shape_probe.h"

namespace kiln::passes {
namespace {

// The reduced axes of a ReduceMean node, or false when not known at load time.
bool AxesOf(const GraphEditor& ed, const ir::Node& n, std::vector<int64_t>* axes) {
  if (n.HasInput(1)) {
    const Tensor* t = ed.ConstantOf(n.inputs[1]);
    if (t == nullptr || t->dtype() != DataType::kInt64) return false;
    axes->assign(t->data<int64_t>(), t->data<int64_t>() + t->numel());
    return true;
  }
  if (n.opset >= 18) return false;  // no axes input: every axis (or none, noop_with_empty_axes)
  *axes = n.GetInts("axes");
  return true;
}

class ReduceMeanToPoolPass : public Pass {
 public:
  std::string name() const override { return "reduce_mean_to_pool"; }

  StatusOr<bool> Run(ir::Graph& graph) override {
    summary_.clear();
    bool any = false;
    for (const ir::Node& n : graph.nodes) any = any || IsOnnxOp(n, "ReduceMean");
    if (!any) return false;
    const ShapeProbe probe = ShapeProbe::Run(graph);
    GraphEditor ed(graph);
    int rewritten = 0;
    for (int ni = 0; ni < ed.num_nodes(); ++ni) {
      if (!ed.alive(ni) || !IsOnnxOp(ed.node(ni), "ReduceMean")) continue;
      const ir::Node& n = ed.node(ni);
      if (n.inputs.empty() || n.inputs[0] < 0 || n.outputs.size() != 1 || n.outputs[0] < 0)
        continue;
      const int x = n.inputs[0];
      if (probe.dtype(x) != DataType::kFloat || probe.rank(x) != 4) continue;
      std::vector<int64_t> axes;
      if (!AxesOf(ed, n, &axes) || axes.size() != 2) continue;
      for (int64_t& a : axes) a = a < 0 ? a + 4 : a;
      std::sort(axes.begin(), axes.end());
      if (axes != std::vector<int64_t>{2, 3}) continue;
      const bool keepdims = n.GetInt("keepdims", 1) != 0;
      ir::Node pool;
      pool.name = n.name;
      pool.op_type = "GlobalAveragePool";
      pool.opset = n.opset;
      pool.inputs = {x};
      const int y = n.outputs[0];
      if (keepdims) {
        pool.outputs = {y};
        ed.ReplaceNode(ni, std::move(pool));
      } else {
        const int pooled = ed.AddValue(n.name + "_pooled", DataType::kFloat, std::nullopt);
        pool.outputs = {pooled};
        ir::Node flat;
        flat.name = ed.UniqueName(n.name + "_flatten");
        flat.op_type = "Flatten";
        flat.opset = pool.opset;
        flat.inputs = {pooled};
        flat.outputs = {y};
        flat.attrs["axis"] = IntAttr(1);
        ed.ReplaceNode(ni, std::move(pool));
        ed.AddNode(std::move(flat));
      }
      ++rewritten;
    }
    if (rewritten == 0) return false;
    KILN_RETURN_IF_ERROR(ed.Commit());
    summary_ = "rewrote " + std::to_string(rewritten) +
               " ReduceMean over the spatial axes of a 4-D tensor as GlobalAveragePool";
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> MakeReduceMeanToPoolPass() {
  return std::make_unique<ReduceMeanToPoolPass>();
}

}  // namespace kiln::passes
