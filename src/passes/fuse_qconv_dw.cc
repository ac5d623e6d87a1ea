// fuse_qconv_dw: a 1x1 QConv whose quantized output only feeds a 3x3 depthwise QConv (a
// MobileNet or ShuffleNet block's expansion and its depthwise convolution: fuse_qdq_conv's
// results on such QDQ models)
//
//   QConv(X, ..., 1x1, a_scale, a_zero_point) -> A -> QConv(A, a_scale, a_zero_point, Wd, 3x3,
//                                                           group M, y_scale, y_zero_point) -> Y
//
// becomes one QConvDw (src/ops/quant/qconv.cc), whose CPU kernel runs the depthwise convolution
// as a oneDNN post-op of the 1x1 one: A, the block's widest tensor (six times the block's input
// channels in MobileNetV2), is never written whole. Exact in the reference kernel (QConv's
// arithmetic twice). Conditions, what oneDNN's depthwise post-op takes: 2-D; the first QConv 1x1
// with stride 1, no padding, group 1, a per-tensor quantized output with zero point 0, no
// residual and no source zero point; the second 3x3 with group M (one channel per group),
// strides 1 or 2 (equal), pads 1, dilations 1, reading A with the same scale and zero point
// values, a per-tensor quantized output with zero point 0 and no residual; A read only by it and
// not a graph output.
#include <cstring>
#include <memory>
#include <string>

#include "passes/graph_edit.h"
#include "passes/pass.h"
#include "passes/qdq_match.h"

namespace kiln::passes {
namespace {

bool IsQConv(const ir::Node& n) { return n.domain == "kiln" && n.op_type == "QConv"; }

// A constant one-element tensor whose bytes are all zero (absent: `absent_ok`).
bool ZeroScalar(const GraphEditor& ed, const ir::Node& n, size_t k, bool absent_ok) {
  if (!n.HasInput(k)) return absent_ok;
  const Tensor* t = ed.ConstantOf(n.inputs[k]);
  return t != nullptr && t->numel() == 1 && AllZero(*t);
}

// Every entry of the ints attribute `name` equals `v` (absent: `absent_ok`); `count` entries.
bool AllEqual(const ir::Node& n, const char* name, int64_t v, size_t count, bool absent_ok) {
  const std::vector<int64_t> xs = n.GetInts(name);
  if (xs.empty()) return absent_ok;
  if (xs.size() != count) return false;
  for (int64_t x : xs)
    if (x != v) return false;
  return true;
}

bool NoAutoPad(const ir::Node& n) {
  const std::string ap = n.GetString("auto_pad", "NOTSET");
  return ap == "NOTSET" || ap.empty();
}

// A QConv with a per-tensor quantized output of zero point 0 and no residual.
bool QuantizedOutput(const GraphEditor& ed, const ir::Node& n) {
  if (n.inputs.size() != 9 || n.HasInput(6) || !n.HasInput(7)) return false;
  const Tensor* s = ed.ConstantOf(n.inputs[7]);
  return s != nullptr && s->numel() == 1 && ZeroScalar(ed, n, 8, false);
}

class FuseQConvDwPass : public Pass {
 public:
  std::string name() const override { return "fuse_qconv_dw"; }

  StatusOr<bool> Run(ir::Graph& graph) override {
    summary_.clear();
    GraphEditor ed(graph);
    int fused = 0;
    for (int ni = 0; ni < ed.num_nodes(); ++ni) {
      if (!ed.alive(ni) || !IsQConv(ed.node(ni))) continue;
      const ir::Node& c1 = ed.node(ni);
      if (!QuantizedOutput(ed, c1) || !ZeroScalar(ed, c1, 2, true)) continue;
      const Tensor* w1 = c1.HasInput(3) ? ed.ConstantOf(c1.inputs[3]) : nullptr;
      if (w1 == nullptr || w1->shape().size() != 4 || w1->shape()[2] != 1 || w1->shape()[3] != 1 ||
          c1.GetInt("group", 1) != 1 || !NoAutoPad(c1) || !AllEqual(c1, "strides", 1, 2, true) ||
          !AllEqual(c1, "pads", 0, 4, true) || !AllEqual(c1, "dilations", 1, 2, true))
        continue;
      const int a = c1.outputs[0];
      const int di = ed.SoleConsumer(a);
      if (di < 0 || ed.IsGraphOutput(a) || !IsQConv(ed.node(di))) continue;
      const ir::Node& c2 = ed.node(di);
      const int64_t m = w1->shape()[0];
      const Tensor* wd = c2.HasInput(3) ? ed.ConstantOf(c2.inputs[3]) : nullptr;
      if (c2.inputs[0] != a || !QuantizedOutput(ed, c2) || wd == nullptr ||
          wd->shape() != Shape{m, 1, 3, 3} || c2.GetInt("group", 1) != m || !NoAutoPad(c2) ||
          !AllEqual(c2, "pads", 1, 4, false) || !AllEqual(c2, "dilations", 1, 2, true))
        continue;
      std::vector<int64_t> strides = c2.GetInts("strides");
      if (strides.empty()) strides = {1, 1};
      if (strides.size() != 2 || strides[0] != strides[1] || (strides[0] != 1 && strides[0] != 2))
        continue;
      // The depthwise QConv reads A with the scale and zero point it was written with.
      if (!SameScalar(ed, c2.inputs[1], c1.inputs[7]) ||
          !(c2.HasInput(2) ? SameScalar(ed, c2.inputs[2], c1.inputs[8])
                           : ZeroScalar(ed, c1, 8, false)))
        continue;
      ir::Node f = c1;
      f.op_type = "QConvDw";
      f.inputs.resize(9);
      f.inputs[6] = -1;
      f.inputs.push_back(c2.inputs[3]);
      f.inputs.push_back(c2.inputs[4]);
      f.inputs.push_back(c2.HasInput(5) ? c2.inputs[5] : -1);
      f.inputs.push_back(c2.inputs[7]);
      f.inputs.push_back(c2.inputs[8]);
      ir::Attribute s;
      s.type = ir::Attribute::Type::kInts;
      s.ints = strides;
      f.attrs["dw_strides"] = s;
      s.ints = {1, 1, 1, 1};
      f.attrs["dw_pads"] = s;
      for (const char* k : {"activation", "activation_alpha", "activation_beta"}) {
        auto it = c2.attrs.find(k);
        if (it != c2.attrs.end()) f.attrs[std::string("dw_") + k] = it->second;
      }
      f.outputs = c2.outputs;
      ed.RemoveNode(di);
      ed.ReplaceNode(ni, std::move(f));
      ++fused;
    }
    if (fused == 0) return false;
    KILN_RETURN_IF_ERROR(ed.Commit());
    summary_ = "fused " + std::to_string(fused) +
               " 1x1 QConv+depthwise QConv pairs into QConvDw (the depthwise convolution as the "
               "1x1 one writes)";
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> MakeFuseQConvDwPass() { return std::make_unique<FuseQConvDwPass>(); }

}  // namespace kiln::passes
