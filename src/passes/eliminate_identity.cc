// eliminate_identity: removes nodes that pass their input through unchanged and rewires their
// consumers to the input: Identity; Dropout in inference (opset < 12, or training_mode absent or
// constant false) whose mask output is absent or unused; Cast / CastLike to the dtype the input
// already has (dtypes from ShapeProbe); Pad whose pads are all zero (a constant input from opset
// 11, the attribute before; PyTorch writes one before some pooling layers). Also collapses Reshape
// -> Reshape into the last Reshape when the first one's output feeds nothing else and the last
// shape is a constant without 0 entries (a 0 copies a dim of the intermediate shape, unless
// allowzero=1). And Pow(x, 2) with a constant one-element exponent becomes Mul(x, x) (the same
// single rounding; Silero VAD's STFT magnitude squares ran on Pow's reference kernel).
//
// Graph output names never change: when the removed node's output is a graph output, the node
// producing its input is made to produce the graph output instead; when the input is a graph
// input, a constant or itself a graph output, the node is kept (fold_constants handles constant
// inputs). Reshape-1/4 (shape attribute) chains are not collapsed.
#include <algorithm>
#include <memory>

#include "passes/graph_edit.h"
#include "passes/pass.h"
#include "passes/shape_probe.h"

namespace kiln::passes {
namespace {

// Removes `node`, which passes `in` through to `out`. False when it must stay.
bool Bypass(GraphEditor& ed, int node, int in, int out) {
  if (in < 0 || out < 0) return false;
  if (!ed.IsGraphOutput(out)) {
    ed.RemoveNode(node);
    ed.ReplaceUses(out, in);
    return true;
  }
  const int p = ed.Producer(in);
  if (p < 0 || ed.IsGraphOutput(in) || ed.IsGraphInput(in) || ed.ConstantOf(in)) return false;
  ed.RemoveNode(node);
  const ir::Node& pn = ed.node(p);
  for (size_t s = 0; s < pn.outputs.size(); ++s)
    if (pn.outputs[s] == in) {
      ed.SetOutput(p, s, out);
      break;
    }
  ed.ReplaceUses(in, out);
  return true;
}

bool InferenceDropout(const GraphEditor& ed, const ir::Node& n) {
  for (size_t o = 1; o < n.outputs.size(); ++o)
    if (n.outputs[o] >= 0 &&
        (!ed.Consumers(n.outputs[o]).empty() || ed.IsGraphOutput(n.outputs[o])))
      return false;
  if (n.opset < 12 || !n.HasInput(2)) return true;
  const Tensor* tm = ed.ConstantOf(n.inputs[2]);
  return tm != nullptr && tm->dtype() == DataType::kBool && tm->numel() == 1 &&
         !tm->data<bool>()[0];
}

// Pad that pads nothing: every entry of its pads (constant input 1 from opset 11, the `pads`
// attribute before) is zero, whatever the mode and axes.
bool NoOpPad(const GraphEditor& ed, const ir::Node& n) {
  if (n.opset < 11) {
    const std::vector<int64_t> pads = n.GetInts("pads", {-1});
    return std::all_of(pads.begin(), pads.end(), [](int64_t p) { return p == 0; });
  }
  const Tensor* pads = n.HasInput(1) ? ed.ConstantOf(n.inputs[1]) : nullptr;
  if (pads == nullptr || pads->dtype() != DataType::kInt64) return false;
  for (int64_t i = 0; i < pads->numel(); ++i)
    if (pads->data<int64_t>()[i] != 0) return false;
  return true;
}

// Reshape(Reshape(x, s1), s2) -> Reshape(x, s2) when legal; true when done.
bool CollapseReshape(GraphEditor& ed, int node) {
  const ir::Node& n = ed.node(node);
  if (n.opset < 5 || !n.HasInput(0) || !n.HasInput(1)) return false;
  const int first = ed.Producer(n.inputs[0]);
  if (first < 0 || !IsOnnxOp(ed.node(first), "Reshape") || ed.node(first).opset < 5 ||
      ed.SoleConsumer(n.inputs[0]) != node || !ed.node(first).HasInput(0))
    return false;
  const Tensor* shape = ed.ConstantOf(n.inputs[1]);
  if (shape == nullptr || shape->dtype() != DataType::kInt64) return false;
  if (n.GetInt("allowzero", 0) == 0)
    for (int64_t i = 0; i < shape->numel(); ++i)
      if (shape->data<int64_t>()[i] == 0) return false;
  const int x = ed.node(first).inputs[0];
  ed.RemoveNode(first);
  ed.SetInput(node, 0, x);
  return true;
}

class EliminateIdentityPass : public Pass {
 public:
  std::string name() const override { return "eliminate_identity"; }

  StatusOr<bool> Run(ir::Graph& graph) override {
    summary_.clear();
    // Shapes are probed before any edit (the probe reads the graph, not the editor's view).
    std::optional<ShapeProbe> probe;
    if (HasOnnxOp(graph, {"Cast", "CastLike"})) probe = ShapeProbe::Run(graph);
    GraphEditor ed(graph);
    int identity = 0, dropout = 0, cast = 0, reshape = 0, pad = 0, square = 0;
    for (int ni = 0; ni < ed.num_nodes(); ++ni) {
      if (!ed.alive(ni)) continue;
      const ir::Node& n = ed.node(ni);
      if (n.outputs.empty() || !n.domain.empty()) continue;
      const int in = n.inputs.empty() ? -1 : n.inputs[0];
      const int out = n.outputs[0];
      if (n.op_type == "Identity") {
        identity += Bypass(ed, ni, in, out);
      } else if (n.op_type == "Dropout") {
        if (InferenceDropout(ed, n)) dropout += Bypass(ed, ni, in, out);
      } else if (n.op_type == "Cast" || n.op_type == "CastLike") {
        const DataType from = probe->dtype(in);
        const DataType to =
            n.op_type == "Cast"
                ? (n.HasAttr("to") && n.attrs.at("to").type == ir::Attribute::Type::kInt
                       ? static_cast<DataType>(n.GetInt("to", 0))
                       : DataType::kUndefined)
                : probe->dtype(n.HasInput(1) ? n.inputs[1] : -1);
        if (from != DataType::kUndefined && from == to) cast += Bypass(ed, ni, in, out);
      } else if (n.op_type == "Reshape") {
        reshape += CollapseReshape(ed, ni);
      } else if (n.op_type == "Pad") {
        if (NoOpPad(ed, n)) pad += Bypass(ed, ni, in, out);
      } else if (n.op_type == "Pow" && n.opset >= 7 && n.inputs.size() == 2 && in >= 0) {
        const Tensor* e = ed.ConstantOf(n.inputs[1]);
        if (e != nullptr && e->numel() == 1 && ed.ScalarOf(n.inputs[1]) == 2.0) {
          ir::Node mul = n;
          mul.op_type = "Mul";
          mul.inputs = {in, in};
          mul.attrs.clear();
          mul.opset = std::max(n.opset, 7);
          ed.ReplaceNode(ni, std::move(mul));
          ++square;
        }
      }
    }
    if (identity + dropout + cast + reshape + pad + square == 0) return false;
    KILN_RETURN_IF_ERROR(ed.Commit());
    summary_ = "removed " + std::to_string(identity) + " Identity, " + std::to_string(dropout) +
               " Dropout, " + std::to_string(cast) + " no-op Cast, " + std::to_string(pad) +
               " no-op Pad; collapsed " + std::to_string(reshape) + " Reshape chains; " +
               std::to_string(square) + " Pow(x, 2) -> Mul(x, x)";
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> MakeEliminateIdentityPass() {
  return std::make_unique<EliminateIdentityPass>();
}

}  // namespace kiln::passes
