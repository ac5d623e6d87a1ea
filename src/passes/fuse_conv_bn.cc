// fuse_conv_bn: folds an inference BatchNormalization into the Conv, ConvTranspose or Gemm that
// feeds it: with s = scale / sqrt(var + epsilon) per output channel, W' = W * s (along the output
// channel axis: W's dim 0 for Conv, dim 1 within each group for ConvTranspose, B's columns for
// Gemm) and B' = (B - mean) * s + bias (Gemm: (beta * C - mean) * s + bias, beta becomes 1).
// New constant tensors are made (in double, rounded once), so weights shared with other nodes
// are untouched; replaced ones are released when nothing else reads them.
//
// Fires only when the producer's output feeds the BatchNormalization alone and is not a graph
// output; W (Gemm: B), the optional bias (Gemm: C, absent / one element / [N] / [1, N]) and the
// four BatchNormalization parameters are float32 constants with one entry per output channel; the
// BatchNormalization has one output and is not in training mode. Also accepts kiln's FusedConv
// without activation and residual. Gemm before opset 7 (broadcast attribute) is not handled.
//
// The same fold takes a Mul or Add by a float32 constant that is one value or one per output
// channel ([C, 1, ...] or [1, C, 1, ...]) after a Conv, FusedConv or ConvTranspose: s = v,
// shift = 0 (Mul) or s = 1, shift = v (Add). PaddlePaddle's PP-LCNetV3 (PP-OCRv4) follows every
// convolution with such a learnable scale and shift, which kept the hard-swish after it from
// fusing into the convolution.
#include <cmath>
#include <functional>
#include <memory>
#include <optional>

#include "passes/graph_edit.h"
#include "passes/pass.h"

namespace kiln::passes {
namespace {

const Tensor* FloatConst(const GraphEditor& ed, int v) {
  const Tensor* t = ed.ConstantOf(v);
  return t != nullptr && t->dtype() == DataType::kFloat ? t : nullptr;
}

// A float constant of shape [c], or nullptr.
const Tensor* Vector(const GraphEditor& ed, int v, int64_t c) {
  const Tensor* t = FloatConst(ed, v);
  return t != nullptr && t->shape() == Shape{c} ? t : nullptr;
}

struct BnParams {
  std::vector<double> s, shift;  // y = x * s + shift, per channel, before the producer's bias
};

// Per channel of `n`: s and (-mean * s + bias), from a BatchNormalization node.
std::optional<BnParams> ReadBn(const GraphEditor& ed, const ir::Node& bn, int64_t c) {
  const Tensor* scale = Vector(ed, bn.inputs[1], c);
  const Tensor* bias = Vector(ed, bn.inputs[2], c);
  const Tensor* mean = Vector(ed, bn.inputs[3], c);
  const Tensor* var = Vector(ed, bn.inputs[4], c);
  if (!scale || !bias || !mean || !var) return std::nullopt;
  const double eps = bn.GetFloat("epsilon", 1e-5f);
  BnParams p;
  for (int64_t i = 0; i < c; ++i) {
    const double s = scale->data<float>()[i] / std::sqrt(var->data<float>()[i] + eps);
    p.s.push_back(s);
    p.shift.push_back(bias->data<float>()[i] - mean->data<float>()[i] * s);
  }
  return p;
}

bool FoldableBn(const GraphEditor& ed, const ir::Node& bn) {
  if (bn.inputs.size() != 5) return false;
  for (int v : bn.inputs)
    if (v < 0) return false;
  for (size_t o = 1; o < bn.outputs.size(); ++o)
    if (bn.outputs[o] >= 0) return false;
  if (bn.outputs.empty() || bn.outputs[0] < 0) return false;
  if (bn.opset >= 14 && bn.GetInt("training_mode", 0) != 0) return false;
  return true;
}

// Mul / Add node `n` reading `x` and a constant of one value or one per channel of the
// convolution's rank-`rank` output with `c` channels: as per-channel s and shift.
std::optional<BnParams> ReadAffine(const GraphEditor& ed, const ir::Node& n, int x, int64_t c,
                                   int64_t rank) {
  if (n.inputs.size() != 2 || n.outputs.empty() || n.outputs[0] < 0) return std::nullopt;
  const int other = n.inputs[0] == x ? n.inputs[1] : n.inputs[0];
  if (other == x || (n.inputs[0] != x && n.inputs[1] != x)) return std::nullopt;
  const Tensor* v = FloatConst(ed, other);
  if (v == nullptr) return std::nullopt;
  const Shape& vs = v->shape();
  bool per_channel = false;
  if (v->numel() != 1) {
    // [C, 1, ...] (rank - 1 dims) or [1, C, 1, ...] (rank dims).
    const int64_t lead = static_cast<int64_t>(vs.size()) == rank ? 1 : 0;
    if (static_cast<int64_t>(vs.size()) != rank - 1 + lead || (lead && vs[0] != 1) || vs[lead] != c)
      return std::nullopt;
    for (size_t d = static_cast<size_t>(lead) + 1; d < vs.size(); ++d)
      if (vs[d] != 1) return std::nullopt;
    per_channel = true;
  } else if (static_cast<int64_t>(vs.size()) > rank) {
    return std::nullopt;  // would broadcast the output to a higher rank
  }
  const bool mul = IsOnnxOp(n, "Mul");
  BnParams p;
  for (int64_t i = 0; i < c; ++i) {
    const double value = v->data<float>()[per_channel ? i : 0];
    p.s.push_back(mul ? value : 1.0);
    p.shift.push_back(mul ? 0.0 : value);
  }
  return p;
}

// Folds y = x * s + shift (per output channel) into Conv / FusedConv / ConvTranspose node `p`;
// false when the weights do not fit. `read` gives s and shift for the output's channel count.
bool FoldIntoConv(GraphEditor& ed, int p, const ir::Node& bn,
                  const std::function<std::optional<BnParams>(int64_t c, int64_t rank)>& read);

bool FoldIntoConv(GraphEditor& ed, int p, const ir::Node& bn) {
  return FoldIntoConv(ed, p, bn, [&](int64_t c, int64_t) { return ReadBn(ed, bn, c); });
}

bool FoldIntoConv(GraphEditor& ed, int p, const ir::Node& bn,
                  const std::function<std::optional<BnParams>(int64_t c, int64_t rank)>& read) {
  const ir::Node& conv = ed.node(p);
  const bool transpose = conv.op_type == "ConvTranspose";
  const Tensor* w = FloatConst(ed, conv.inputs.size() > 1 ? conv.inputs[1] : -1);
  if (w == nullptr || w->rank() < 3) return false;
  const int64_t group = conv.GetInt("group", 1);
  if (group < 1 || w->shape()[0] % group != 0) return false;
  const int64_t c = transpose ? w->shape()[1] * group : w->shape()[0];
  const Tensor* b = nullptr;
  if (conv.HasInput(2) && (b = Vector(ed, conv.inputs[2], c)) == nullptr) return false;
  auto bnp = read(c, w->rank());
  if (!bnp) return false;
  Tensor nw = w->Clone();
  float* wp = nw.data<float>();
  const float* src = w->data<float>();
  const int64_t kernel = NumElements(Shape(w->shape().begin() + 2, w->shape().end()));
  const int64_t d0 = w->shape()[0], d1 = w->shape()[1];
  for (int64_t i = 0; i < d0; ++i)
    for (int64_t j = 0; j < d1; ++j) {
      // Output channel of W[i, j]: Conv W is [M, C/g, k..]; ConvTranspose W is [C, M/g, k..].
      const int64_t m = transpose ? (i / (d0 / group)) * d1 + j : i;
      const double s = bnp->s[m];
      for (int64_t k = 0; k < kernel; ++k) {
        const int64_t at = (i * d1 + j) * kernel + k;
        wp[at] = static_cast<float>(src[at] * s);
      }
    }
  Tensor nb = Tensor::Empty(DataType::kFloat, {c});
  for (int64_t m = 0; m < c; ++m)
    nb.data<float>()[m] =
        static_cast<float>((b ? b->data<float>()[m] : 0.0) * bnp->s[m] + bnp->shift[m]);
  const std::string base = conv.name.empty() ? bn.name : conv.name;
  ed.SetInput(p, 1, ed.AddConstant(base + "_W_bn", std::move(nw)));
  ed.SetInput(p, 2, ed.AddConstant(base + "_B_bn", std::move(nb)));
  return true;
}

// Folds into Gemm node `p`: Y = alpha * A' B' + beta * C with BN over Y's columns.
bool FoldIntoGemm(GraphEditor& ed, int p, const ir::Node& bn) {
  const ir::Node& gemm = ed.node(p);
  if (gemm.opset < 7 || gemm.inputs.size() < 2) return false;
  const Tensor* b = FloatConst(ed, gemm.inputs[1]);
  if (b == nullptr || b->rank() != 2) return false;
  const bool trans_b = gemm.GetInt("transB", 0) != 0;
  const int64_t k_dim = trans_b ? b->shape()[1] : b->shape()[0];
  const int64_t n = trans_b ? b->shape()[0] : b->shape()[1];
  const Tensor* c = nullptr;
  if (gemm.HasInput(2)) {
    c = FloatConst(ed, gemm.inputs[2]);
    if (c == nullptr) return false;
    const Shape& cs = c->shape();
    if (!(c->numel() == 1 || cs == Shape{n} || cs == Shape{1, n})) return false;
  }
  auto bnp = ReadBn(ed, bn, n);
  if (!bnp) return false;
  const double beta = gemm.GetFloat("beta", 1.f);
  Tensor nb = b->Clone();
  for (int64_t k = 0; k < k_dim; ++k)
    for (int64_t j = 0; j < n; ++j) {
      const int64_t at = trans_b ? j * k_dim + k : k * n + j;
      nb.data<float>()[at] = static_cast<float>(b->data<float>()[at] * bnp->s[j]);
    }
  Tensor nc = Tensor::Empty(DataType::kFloat, {n});
  for (int64_t j = 0; j < n; ++j) {
    const double cv = c == nullptr ? 0.0 : c->data<float>()[c->numel() == 1 ? 0 : j];
    nc.data<float>()[j] = static_cast<float>(beta * cv * bnp->s[j] + bnp->shift[j]);
  }
  const std::string base = gemm.name.empty() ? bn.name : gemm.name;
  ed.SetInput(p, 1, ed.AddConstant(base + "_B_bn", std::move(nb)));
  ed.SetInput(p, 2, ed.AddConstant(base + "_C_bn", std::move(nc)));
  ed.mutable_node(p).attrs["beta"] = FloatAttr(1.f);
  return true;
}

class FuseConvBnPass : public Pass {
 public:
  std::string name() const override { return "fuse_conv_bn"; }

  StatusOr<bool> Run(ir::Graph& graph) override {
    summary_.clear();
    GraphEditor ed(graph);
    int conv = 0, conv_t = 0, gemm = 0, affine = 0;
    for (int ni = 0; ni < ed.num_nodes(); ++ni) {
      if (!ed.alive(ni)) continue;
      if (IsOnnxOp(ed.node(ni), "Mul") || IsOnnxOp(ed.node(ni), "Add")) {
        affine += FoldAffine(ed, ni);
        continue;
      }
      if (!IsOnnxOp(ed.node(ni), "BatchNormalization")) continue;
      const ir::Node bn = ed.node(ni);
      if (!FoldableBn(ed, bn)) continue;
      const int x = bn.inputs[0];
      const int p = ed.Producer(x);
      if (p < 0 || ed.SoleConsumer(x) != ni || ed.node(p).outputs.empty() ||
          ed.node(p).outputs[0] != x)
        continue;
      const ir::Node& pn = ed.node(p);
      bool done = false;
      if (IsOnnxOp(pn, "Conv")) {
        done = FoldIntoConv(ed, p, bn);
        conv += done;
      } else if (IsKilnOp(pn, "FusedConv") && pn.GetString("activation", "").empty() &&
                 !pn.HasInput(3)) {
        done = FoldIntoConv(ed, p, bn);
        conv += done;
      } else if (IsOnnxOp(pn, "ConvTranspose")) {
        done = FoldIntoConv(ed, p, bn);
        conv_t += done;
      } else if (IsOnnxOp(pn, "Gemm")) {
        done = FoldIntoGemm(ed, p, bn);
        gemm += done;
      }
      if (!done) continue;
      ed.RemoveNode(ni);
      ed.SetOutput(p, 0, bn.outputs[0]);
    }
    if (conv + conv_t + gemm + affine == 0) return false;
    KILN_RETURN_IF_ERROR(ed.Commit());
    summary_ = "folded " + std::to_string(conv + conv_t + gemm) +
               " BatchNormalization into their producers (" + std::to_string(conv) + " Conv, " +
               std::to_string(conv_t) + " ConvTranspose, " + std::to_string(gemm) + " Gemm)";
    if (affine > 0)
      summary_ += " and " + std::to_string(affine) +
                  " Mul/Add by a per-channel or scalar constant into convolutions";
    return true;
  }

 private:
  // Mul/Add node `ni` by a constant after a convolution whose output it alone reads: folded.
  static bool FoldAffine(GraphEditor& ed, int ni) {
    const ir::Node n = ed.node(ni);
    for (int x : n.inputs) {
      if (x < 0 || ed.ConstantOf(x) != nullptr) continue;
      const int p = ed.Producer(x);
      if (p < 0 || ed.SoleConsumer(x) != ni || ed.node(p).outputs.empty() ||
          ed.node(p).outputs[0] != x)
        return false;
      const ir::Node& pn = ed.node(p);
      const bool conv =
          IsOnnxOp(pn, "Conv") || IsOnnxOp(pn, "ConvTranspose") ||
          (IsKilnOp(pn, "FusedConv") && pn.GetString("activation", "").empty() && !pn.HasInput(3));
      if (!conv) return false;
      if (!FoldIntoConv(ed, p, n,
                        [&](int64_t c, int64_t rank) { return ReadAffine(ed, n, x, c, rank); }))
        return false;
      ed.RemoveNode(ni);
      ed.SetOutput(p, 0, n.outputs[0]);
      return true;
    }
    return false;
  }
};

}  // namespace

std::unique_ptr<Pass> MakeFuseConvBnPass() { return std::make_unique<FuseConvBnPass>(); }

}  // namespace kiln::passes
