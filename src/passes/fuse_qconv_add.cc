// fuse_qconv_add: a QConv whose quantized output only feeds a QAdd (a residual block's last
// convolution, then the int8 skip connection: fuse_qdq_conv's and fuse_qdq_add's results on
// ResNet-style QDQ models)
//
//   QConv(..., a_scale, a_zero_point) -> A -> QAdd(A, a_scale, a_zero_point, R, ...) -> Y
//
// becomes one QConvAdd (src/ops/quant/qconv.cc), whose CPU kernel computes the sum as the
// convolution writes its output (a oneDNN post-op chain that reads R where Y goes): the int8
// tensor A and QAdd's pass over three tensors are gone. Exact in the reference kernel (QConv's
// then QAdd's arithmetic). Conditions: the QConv has a per-tensor quantized output, no float
// residual and a Relu, LeakyRelu, SiLU or no activation; the QAdd a Relu or none; A is read only by
// the QAdd, with the same scale and zero point values as the QConv wrote it with, and is not a
// graph output; either QAdd operand may be A.
#include <cstring>
#include <memory>
#include <string>

#include "passes/graph_edit.h"
#include "passes/pass.h"
#include "passes/qdq_match.h"

namespace kiln::passes {
namespace {

bool IsKiln(const ir::Node& n, const char* op) { return n.domain == "kiln" && n.op_type == op; }

class FuseQConvAddPass : public Pass {
 public:
  std::string name() const override { return "fuse_qconv_add"; }

  StatusOr<bool> Run(ir::Graph& graph) override {
    summary_.clear();
    GraphEditor ed(graph);
    int fused = 0;
    for (int ni = 0; ni < ed.num_nodes(); ++ni) {
      if (!ed.alive(ni) || !IsKiln(ed.node(ni), "QAdd")) continue;
      const ir::Node& add = ed.node(ni);
      if (add.inputs.size() != 8) continue;
      for (int slot : {0, 3}) {
        const int a = add.inputs[slot];
        const int ci = ed.Producer(a);
        if (ci < 0 || !IsKiln(ed.node(ci), "QConv") || ed.SoleConsumer(a) != ni ||
            ed.IsGraphOutput(a))
          continue;
        const ir::Node& conv = ed.node(ci);
        if (conv.inputs.size() < 9 || conv.HasInput(6) || !conv.HasInput(7) || !conv.HasInput(8))
          continue;
        // The kernel applies the convolution's activation in A's units: Relu and LeakyRelu mean
        // the same there, SiLU becomes swish with alpha a_scale (AppendActivationInUnits);
        // others stay apart. QAdd's activation is Relu or none.
        const std::string conv_act = conv.GetString("activation", "");
        const std::string add_act = add.GetString("activation", "");
        if ((conv_act != "" && conv_act != "Relu" && conv_act != "LeakyRelu" &&
             conv_act != "Silu") ||
            (add_act != "" && add_act != "Relu"))
          continue;
        if (!SameScalar(ed, conv.inputs[7], add.inputs[slot + 1]) ||
            !SameScalar(ed, conv.inputs[8], add.inputs[slot + 2]))
          continue;
        const int other = 3 - slot;
        ir::Node f = conv;
        f.name = conv.name;
        f.op_type = "QConvAdd";
        f.attrs["sum_activation"] = StringAttr(add_act);
        f.inputs.resize(9);
        f.inputs[6] = -1;
        f.inputs.push_back(add.inputs[other]);
        f.inputs.push_back(add.inputs[other + 1]);
        f.inputs.push_back(add.inputs[other + 2]);
        f.inputs.push_back(add.inputs[6]);
        f.inputs.push_back(add.inputs[7]);
        f.outputs = add.outputs;
        ed.RemoveNode(ni);
        ed.ReplaceNode(ci, std::move(f));
        ++fused;
        break;
      }
    }
    if (fused == 0) return false;
    KILN_RETURN_IF_ERROR(ed.Commit());
    summary_ = "fused " + std::to_string(fused) +
               " QConv+QAdd pairs into QConvAdd (the residual sum as the convolution writes)";
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> MakeFuseQConvAddPass() { return std::make_unique<FuseQConvAddPass>(); }

}  // namespace kiln::passes
