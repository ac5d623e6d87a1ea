// fuse_matmul_add: MatMul(A, B) -> Add(bias) [-> activation] becomes kiln's FusedMatMul(A, B,
// bias) with y = act(A @ B + bias): the Linear layers PyTorch exports on inputs of rank > 2
// (transformer and ConvNeXt MLP blocks), usually followed by GELU. Activations are those of
// activation_match.h; a FusedMatMul without activation left by an earlier run also takes one.
//
// Fires when B is a float32 2-D constant [K, N], the bias is a float32 constant whose dims are
// all 1 except the last (N or 1), of rank at most the MatMul output's (rank 1 when A's rank is
// unknown, so the Add cannot add dims), the MatMul output feeds only the Add and is not a graph
// output. The bias is stored as a new [N] constant. Add before opset 7 is not handled.
#include <algorithm>
#include <memory>

#include "passes/activation_match.h"
#include "passes/graph_edit.h"
#include "passes/pass.h"
#include "passes/shape_probe.h"

namespace kiln::passes {
namespace {

class FuseMatMulAddPass : public Pass {
 public:
  std::string name() const override { return "fuse_matmul_add"; }

  StatusOr<bool> Run(ir::Graph& graph) override {
    summary_.clear();
    std::optional<ShapeProbe> probe;  // before any edit
    if (HasOnnxOp(graph, {"MatMul"})) probe = ShapeProbe::Run(graph);
    GraphEditor ed(graph);
    int bias = 0, act = 0;
    for (int ni = 0; ni < ed.num_nodes(); ++ni) {
      if (!ed.alive(ni)) continue;
      const ir::Node& n = ed.node(ni);
      if (n.outputs.size() != 1 || n.outputs[0] < 0) continue;
      int out = n.outputs[0];
      if (IsOnnxOp(n, "MatMul") && n.inputs.size() == 2) {
        const Tensor* b = ed.ConstantOf(n.inputs[1]);
        if (b == nullptr || b->dtype() != DataType::kFloat || b->rank() != 2) continue;
        const int add = ed.SoleConsumer(out);
        if (add < 0 || !IsOnnxOp(ed.node(add), "Add") || ed.node(add).opset < 7) continue;
        const ir::Node& an = ed.node(add);
        if (an.inputs.size() != 2 || an.inputs[0] == an.inputs[1]) continue;
        const int bias_v = an.inputs[0] == out ? an.inputs[1] : an.inputs[0];
        const auto a_rank = probe->rank(n.inputs[0]);
        const int64_t out_rank = a_rank ? *a_rank : 1;  // B is 2-D: rank(A @ B) == rank(A)
        auto bv = RowBiasOf(ed, bias_v, b->shape()[1], out_rank);
        if (!bv) continue;
        if (!ImportKilnDomain(graph)) return false;
        const std::string base = n.name.empty() ? an.name : n.name;
        const int bias_c = ed.AddConstant(base + "_bias", std::move(*bv));
        out = an.outputs[0];
        ed.RemoveNode(add);
        ir::Node& fm = ed.mutable_node(ni);
        fm.op_type = "FusedMatMul";
        fm.domain = "kiln";
        fm.opset = 1;
        fm.attrs["activation"] = StringAttr("");
        ed.SetInput(ni, 2, bias_c);
        ++bias;
      } else if (!IsKilnOp(n, "FusedMatMul") || !n.GetString("activation", "").empty()) {
        continue;
      }
      if (auto m = MatchActivation(ed, out)) {
        for (int r : m->nodes) ed.RemoveNode(r);
        SetActivationAttrs(*m, &ed.mutable_node(ni));
        out = m->output;
        ++act;
      }
      ed.SetOutput(ni, 0, out);
    }
    if (bias + act == 0) return false;
    KILN_RETURN_IF_ERROR(ed.Commit());
    summary_ = "fused " + std::to_string(bias) + " MatMul+Add into FusedMatMul, " +
               std::to_string(act) + " with an activation";
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> MakeFuseMatMulAddPass() { return std::make_unique<FuseMatMulAddPass>(); }

}  // namespace kiln::passes
