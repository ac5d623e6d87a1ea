// fuse_gelu: a GELU that fuse_matmul_add and fuse_conv_activation could not fold into its producer,
// in PyTorch's erf form 0.5 * x * (1 + Erf(x / sqrt(2))) (the forms activation_match.h accepts),
// becomes one Gelu(x) node in domain "kiln" (opset 1), the same op class and semantics as ONNX's
// Gelu-20 with approximate "none" (registered under both domains, ops/elementwise/unary.cc), so a
// fast kernel computes it in one pass instead of five element-wise steps, one of them Erf.
// The case this exists for: ONNX Runtime's quantize_dynamic models, where the GELU follows
// MatMulInteger -> Cast -> Mul -> Add instead of a MatMul, and transformers whose Linear layers
// were not fused (computed weights).
//
// Fires when x is float32 (ShapeProbe's dtype) and the pattern's intermediate values are read
// inside it alone and are not graph outputs (MatchActivation's rules). Runs after the producer
// fusions, so a GELU a MatMul or convolution can absorb is still absorbed there.
#include <memory>
#include <optional>

#include "passes/activation_match.h"
#include "passes/graph_edit.h"
#include "passes/pass.h"
#include "passes/shape_probe.h"

namespace kiln::passes {
namespace {

class FuseGeluPass : public Pass {
 public:
  std::string name() const override { return "fuse_gelu"; }

  StatusOr<bool> Run(ir::Graph& graph) override {
    summary_.clear();
    if (!HasOnnxOp(graph, {"Erf"})) return false;
    std::optional<ShapeProbe> probe;  // made at the first match, before any edit
    GraphEditor ed(graph);
    int fused = 0;
    for (int ni = 0; ni < ed.num_nodes(); ++ni) {
      if (!ed.alive(ni) || !IsOnnxOp(ed.node(ni), "Erf") || ed.node(ni).inputs.size() != 1)
        continue;
      // Erf reads x / sqrt(2) (or x * (1 / sqrt(2))): x is the scaling node's non-constant input.
      const int scaled = ed.Producer(ed.node(ni).inputs[0]);
      if (scaled < 0 || ed.node(scaled).inputs.size() != 2) continue;
      for (int x : ed.node(scaled).inputs) {
        if (ed.ConstantOf(x) != nullptr) continue;
        const auto m = MatchActivation(ed, x);
        if (!m || m->act.kind != ops::ActivationKind::kGelu) continue;
        if (!probe) probe = ShapeProbe::Run(graph);
        if (probe->dtype(x) != DataType::kFloat) continue;
        if (!ImportKilnDomain(graph)) return false;
        ir::Node gelu;
        gelu.name = ed.node(ni).name;
        gelu.op_type = "Gelu";
        gelu.domain = "kiln";
        gelu.opset = 1;
        gelu.inputs = {x};
        gelu.outputs = {m->output};
        gelu.attrs["approximate"] = StringAttr("none");
        for (int r : m->nodes)
          if (r != ni) ed.RemoveNode(r);
        ed.ReplaceNode(ni, std::move(gelu));  // in Erf's place: after x, before the output's users
        ++fused;
        break;
      }
    }
    if (fused == 0) return false;
    KILN_RETURN_IF_ERROR(ed.Commit());
    summary_ = "fused " + std::to_string(fused) + " erf-form GELU into kiln.Gelu";
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> MakeFuseGeluPass() { return std::make_unique<FuseGeluPass>(); }

}  // namespace kiln::passes
