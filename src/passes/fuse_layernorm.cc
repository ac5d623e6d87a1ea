// fuse_layernorm: the LayerNormalization PyTorch decomposes at opsets <= 16,
//   m = ReduceMean(x, axes=[-1]); d = Sub(x, m); v = ReduceMean(Pow(d, 2), axes=[-1]);
//   y = Div(d, Sqrt(Add(v, eps))) [; Mul(y, gamma)] [; Add(., beta)]
// becomes one LayerNormalization(x, gamma, beta; axis=-1, epsilon=eps) node in domain "kiln"
// (opset 1). ONNX defines LayerNormalization from opset 17 only, and a node's opset must be the
// one its model imports for its domain, so the node cannot be an ai.onnx node in an opset-13
// model; kiln registers the same LayerNormalization op class under domain "kiln" as well
// (ops/nn/norm.cc), so there is one implementation and one semantics.
//
// Also accepted: Mul(d, d) for the square, operands of Add/Mul either way round, axes [rank-1]
// when the rank is known (ShapeProbe), no gamma (ones of x's last dim, which must then be fixed)
// and no beta. Fires only when every intermediate value is read inside the pattern alone and is
// not a graph output, keepdims is 1, the exponent is 2, eps, gamma and beta are float32
// constants, and gamma / beta broadcast along the last dim only (stored as [D] or [1]).
// Normalizing over several trailing axes is not fused.
#include <memory>

#include "passes/activation_match.h"
#include "passes/graph_edit.h"
#include "passes/pass.h"
#include "passes/shape_probe.h"

namespace kiln::passes {
namespace {

// The sole consumer of v when it is the ai.onnx `op` with one output.
int Next(const GraphEditor& ed, int v, const char* op) {
  const int c = ed.SoleConsumer(v);
  return c >= 0 && IsOnnxOp(ed.node(c), op) && ed.node(c).outputs.size() == 1 ? c : -1;
}

int Out(const GraphEditor& ed, int node) { return ed.node(node).outputs[0]; }

// For binary `node` reading `a` once: the other operand, else -1.
int Other(const GraphEditor& ed, int node, int a) {
  const ir::Node& n = ed.node(node);
  if (n.inputs.size() != 2 || n.inputs[0] == n.inputs[1]) return -1;
  return n.inputs[0] == a ? n.inputs[1] : n.inputs[1] == a ? n.inputs[0] : -1;
}

// ReduceMean over exactly the last axis with keepdims=1.
bool MeanOverLastAxis(const ir::Node& r, std::optional<int64_t> rank) {
  if (r.outputs.size() != 1 || r.inputs.size() != 1 || r.GetInt("keepdims", 1) != 1) return false;
  const std::vector<int64_t> axes = r.GetInts("axes");
  return axes.size() == 1 && (axes[0] == -1 || (rank && axes[0] == *rank - 1));
}

// A float constant usable as LayerNormalization's Scale/B for x of rank `rank` (0 when
// unknown): dims all 1 but the last; returned reshaped to 1-D.
std::optional<Tensor> AffineParam(const GraphEditor& ed, int v, int64_t rank) {
  const Tensor* t = ed.ConstantOf(v);
  if (t == nullptr || t->dtype() != DataType::kFloat || t->rank() < 1) return std::nullopt;
  if (t->rank() > std::max<int64_t>(rank, 1)) return std::nullopt;
  for (int64_t i = 0; i + 1 < t->rank(); ++i)
    if (t->shape()[i] != 1) return std::nullopt;
  return t->Reshaped({t->shape().back()});
}

class FuseLayerNormPass : public Pass {
 public:
  std::string name() const override { return "fuse_layernorm"; }

  StatusOr<bool> Run(ir::Graph& graph) override {
    summary_.clear();
    if (!HasOnnxOp(graph, {"ReduceMean"})) return false;
    const ShapeProbe probe = ShapeProbe::Run(graph);  // before any edit
    GraphEditor ed(graph);
    int fused = 0;
    for (int r1 = 0; r1 < ed.num_nodes(); ++r1) {
      if (!ed.alive(r1) || !IsOnnxOp(ed.node(r1), "ReduceMean")) continue;
      const int x = ed.node(r1).inputs.empty() ? -1 : ed.node(r1).inputs[0];
      const auto rank = probe.rank(x);
      if (x < 0 || !MeanOverLastAxis(ed.node(r1), rank)) continue;
      const int sub = Next(ed, Out(ed, r1), "Sub");
      if (sub < 0 || ed.node(sub).inputs[0] != x || ed.node(sub).inputs[1] != Out(ed, r1)) continue;
      const int d = Out(ed, sub);
      // d feeds the square and the Div only.
      std::vector<int> users = ed.Consumers(d);
      if (ed.IsGraphOutput(d) || users.size() < 2 || users.size() > 3) continue;
      int sq = -1, div = -1;
      for (int u : users) {
        const ir::Node& un = ed.node(u);
        if (IsOnnxOp(un, "Div") && un.inputs.size() == 2 && un.inputs[0] == d && un.inputs[1] != d)
          div = u;
        else if (IsOnnxOp(un, "Pow") && un.inputs.size() == 2 && un.inputs[0] == d &&
                 IsScalarNear(ed, un.inputs[1], 2.0, 0) && users.size() == 2)
          sq = u;
        else if (IsOnnxOp(un, "Mul") && un.inputs.size() == 2 && un.inputs[0] == d &&
                 un.inputs[1] == d && users.size() == 3)
          sq = u;
      }
      if (sq < 0 || div < 0) continue;
      const int r2 = Next(ed, Out(ed, sq), "ReduceMean");
      if (r2 < 0 || !MeanOverLastAxis(ed.node(r2), rank)) continue;
      const int add_eps = Next(ed, Out(ed, r2), "Add");
      if (add_eps < 0) continue;
      const int eps_v = Other(ed, add_eps, Out(ed, r2));
      const Tensor* eps = ed.ConstantOf(eps_v);
      if (eps == nullptr || eps->dtype() != DataType::kFloat || eps->numel() != 1) continue;
      const int sqrt = Next(ed, Out(ed, add_eps), "Sqrt");
      if (sqrt < 0 || ed.SoleConsumer(Out(ed, sqrt)) != div ||
          ed.node(div).inputs[1] != Out(ed, sqrt))
        continue;
      std::vector<int> nodes = {r1, sub, sq, r2, add_eps, sqrt, div};
      int last = div;
      std::optional<Tensor> gamma, beta;
      const int mul = Next(ed, Out(ed, div), "Mul");
      if (mul >= 0 && (gamma = AffineParam(ed, Other(ed, mul, Out(ed, div)), rank.value_or(0)))) {
        nodes.push_back(mul);
        last = mul;
        const int add = Next(ed, Out(ed, mul), "Add");
        if (add >= 0 && (beta = AffineParam(ed, Other(ed, add, Out(ed, mul)), rank.value_or(0)))) {
          nodes.push_back(add);
          last = add;
        }
      }
      if (!gamma) {
        const auto xs = probe.shape(x);
        if (!xs || xs->empty() || xs->back() < 0) continue;
        gamma = Tensor::Empty(DataType::kFloat, {xs->back()});
        for (int64_t i = 0; i < xs->back(); ++i) gamma->data<float>()[i] = 1.f;
      }
      if (!ImportKilnDomain(graph)) return false;
      ir::Node ln;
      ln.name = ed.node(r1).name;
      ln.op_type = "LayerNormalization";
      ln.domain = "kiln";
      ln.opset = 1;
      ln.attrs["axis"] = IntAttr(-1);
      ln.attrs["epsilon"] = FloatAttr(eps->data<float>()[0]);
      const std::string base = ln.name.empty() ? "layernorm" : ln.name;
      ln.inputs = {x, ed.AddConstant(base + "_scale", std::move(*gamma))};
      if (beta) ln.inputs.push_back(ed.AddConstant(base + "_bias", std::move(*beta)));
      ln.outputs = {Out(ed, last)};
      for (int n : nodes)
        if (n != last) ed.RemoveNode(n);
      ed.ReplaceNode(last, std::move(ln));
      ++fused;
    }
    if (fused == 0) return false;
    KILN_RETURN_IF_ERROR(ed.Commit());
    summary_ = "fused " + std::to_string(fused) + " decomposed LayerNormalization";
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> MakeFuseLayerNormPass() { return std::make_unique<FuseLayerNormPass>(); }

}  // namespace kiln::passes
