// expand_qlinear: QOperator-format models (ONNX Runtime's quantize_static with
// QuantFormat.QOperator, and int8 models of the ONNX Model Zoo) into the QDQ form the int8
// fusions understand. Each quantized operator becomes its definition:
//
//   QLinearConv(X, sx, zx, W, sw, zw, sy, zy, B)
//     -> QuantizeLinear(Conv(DequantizeLinear(X, sx, zx), DequantizeLinear(W, sw, zw, axis 0),
//                            B * sx * sw), sy, zy)
//   QLinearMatMul -> DequantizeLinear x2 -> MatMul -> QuantizeLinear
//   com.microsoft QLinearAdd, QLinearMul, QLinearGlobalAveragePool, QLinearAveragePool,
//   QLinearSigmoid, QLinearLeakyRelu, QLinearConcat, QGemm (src/ops/quant/ms_qlinear.cc)
//     -> DequantizeLinear of every input -> the float op -> QuantizeLinear (QGemm: Gemm with
//        beta = alpha and C' = C * a_scale * b_scale; no QuantizeLinear without y_scale)
//
// The next passes of the same round then do what they do for QDQ models from any quantizer:
// fold_constants keeps the weights' DequantizeLinear for the convolutions, fuse_qdq_conv makes
// int8 QConvs that write the requantized output themselves, fuse_qdq_matmul int8 QMatMuls,
// fuse_qdq_add int8 QAdds; what none of them takes runs as Q/DQ loops around float kernels
// instead of the reference kernels of the quantized operators. Results: the quantized operators'
// definitions, computed in float32, so an output may differ by one quantization step from the
// integer arithmetic of QLinearConv's reference kernel where a value falls on a rounding tie.
// Conditions: QLinearConv's bias and QGemm's C, when present, need their scales as constants
// (the float bias is computed here); zero points absent are 0 (an output zero point absent is
// written as a 0 of the output's type, as the operators define). Anything else is left as it is.
#include <memory>
#include <string>

#include "ops/quant/ms_qlinear.h"
#include "ops/quant/quant_common.h"
#include "passes/graph_edit.h"
#include "passes/pass.h"
#include "passes/shape_probe.h"

namespace kiln::passes {
namespace {

// The opset of the DequantizeLinear and QuantizeLinear nodes written (axis from 13); the float
// ops take the versions of ops/quant/ms_qlinear.h.
constexpr int kQdqOpset = 13;

using ops::quant::MsQLinearForm;

const MsQLinearForm* MsFormOf(const ir::Node& n) {
  return n.domain == "com.microsoft" ? ops::quant::FindMsQLinearForm(n.op_type) : nullptr;
}

// One quantized operand of a node: its data, scale and zero-point input slots.
struct Operand {
  size_t data, scale, zero_point;
};

class ExpandQLinearPass : public Pass {
 public:
  std::string name() const override { return "expand_qlinear"; }

  StatusOr<bool> Run(ir::Graph& graph) override {
    summary_.clear();
    bool any = false;
    for (const ir::Node& n : graph.nodes)
      any = any || IsOnnxOp(n, "QLinearConv") || IsOnnxOp(n, "QLinearMatMul") ||
            MsFormOf(n) != nullptr;
    if (!any) return false;
    const ShapeProbe probe = ShapeProbe::Run(graph);
    GraphEditor ed(graph);
    int expanded = 0, kept = 0;
    std::string kept_list;
    for (int ni = 0; ni < ed.num_nodes(); ++ni) {
      if (!ed.alive(ni)) continue;
      const ir::Node& n = ed.node(ni);
      std::string why;
      if (IsOnnxOp(n, "QLinearConv") || IsOnnxOp(n, "QLinearMatMul")) {
        why = ExpandOnnx(ed, probe, ni);
      } else if (const MsQLinearForm* f = MsFormOf(n)) {
        why = ExpandMs(ed, probe, ni, *f);
      } else {
        continue;
      }
      if (why.empty()) {
        ++expanded;
      } else if (++kept <= 3) {
        kept_list += (kept_list.empty() ? "" : ", ") + ("'" + ed.node(ni).name + "' (" + why + ")");
      }
    }
    if (expanded == 0) return false;
    KILN_RETURN_IF_ERROR(ed.Commit());
    summary_ = "expanded " + std::to_string(expanded) + " QOperator nodes into QDQ form";
    if (kept > 0)
      summary_ += "; " + std::to_string(kept) + " left on their reference kernels: " + kept_list +
                  (kept > 3 ? ", ..." : "");
    return true;
  }

 private:
  // A DequantizeLinear of input slot `o` of node `n`; returns the float value.
  static int Dequantize(GraphEditor& ed, const ir::Node& n, const Operand& o, int64_t axis) {
    ir::Node d;
    d.op_type = "DequantizeLinear";
    d.opset = kQdqOpset;
    d.name = ed.UniqueName(n.name + "_dq" + std::to_string(o.data));
    const int data = n.inputs[o.data];
    d.inputs = {data, n.inputs[o.scale]};
    if (o.zero_point < n.num_explicit_inputs() && n.inputs[o.zero_point] >= 0)
      d.inputs.push_back(n.inputs[o.zero_point]);
    if (axis != 1) d.attrs["axis"] = IntAttr(axis);
    const int out =
        ed.AddValue(ed.value(data).name + "_dequantized", DataType::kFloat, std::nullopt);
    d.outputs = {out};
    ed.AddNode(std::move(d));
    return out;
  }

  // The float bias C * (scale_a * scale_b[j]), j along the last dim (a column of the product, an
  // output channel of a convolution); nullopt unless C and both scales are constants.
  static std::optional<Tensor> FloatBias(const GraphEditor& ed, int c, int scale_a, int scale_b) {
    const Tensor* ct = ed.ConstantOf(c);
    const Tensor* sa = ed.ConstantOf(scale_a);
    const Tensor* sb = ed.ConstantOf(scale_b);
    if (ct == nullptr || sa == nullptr || sb == nullptr || ct->dtype() != DataType::kInt32 ||
        sa->dtype() != DataType::kFloat || sb->dtype() != DataType::kFloat || sa->numel() != 1)
      return std::nullopt;
    const int64_t cols = ct->shape().empty() ? 1 : ct->shape().back();
    if (sb->numel() != 1 && sb->numel() != cols) return std::nullopt;
    Tensor f = Tensor::Empty(DataType::kFloat, ct->shape());
    const float a = sa->data<float>()[0];
    for (int64_t i = 0, n = ct->numel(); i < n; ++i) {
      const float s = a * sb->data<float>()[sb->numel() == 1 ? 0 : i % cols];
      f.data<float>()[i] = static_cast<float>(ct->data<int32_t>()[i]) * s;
    }
    return f;
  }

  // Node `ni` becomes `inner` (reading `inputs`) followed by QuantizeLinear(y_scale, y_zero_point)
  // writing the node's output; y_scale < 0: `inner` writes it (QGemm with a float output).
  static void Finish(GraphEditor& ed, const ShapeProbe& probe, int ni, ir::Node inner,
                     std::vector<int> inputs, int y_scale, int y_zero_point) {
    const ir::Node& n = ed.node(ni);
    const int y = n.outputs[0];
    inner.name = n.name;
    inner.inputs = std::move(inputs);
    if (y_scale < 0) {
      inner.outputs = {y};
      ed.ReplaceNode(ni, std::move(inner));
      return;
    }
    ir::Node q;
    q.op_type = "QuantizeLinear";
    q.opset = kQdqOpset;
    q.name = ed.UniqueName(n.name + "_q");
    int zp = y_zero_point;
    if (zp < 0) {  // the operators' default: 0 of the output's type
      // The output's inferred type; where the probe could not infer it, the first input's, which
      // is what the operators give an output without a zero point.
      DataType t = probe.dtype(y);
      const int dq = ed.Producer(inner.inputs.empty() ? -1 : inner.inputs[0]);
      if (!ops::quant::Is8Bit(t) && dq >= 0) t = probe.dtype(ed.node(dq).inputs[0]);
      Tensor z = Tensor::Empty(t == DataType::kInt8 ? DataType::kInt8 : DataType::kUInt8, {});
      *static_cast<uint8_t*>(z.raw()) = 0;
      zp = ed.AddConstant(n.name + "_y_zero_point", std::move(z));
    }
    q.inputs = {-1, y_scale, zp};
    q.outputs = {y};
    const int r = ed.AddValue(ed.value(y).name + "_float", DataType::kFloat, std::nullopt);
    inner.outputs = {r};
    q.inputs[0] = r;
    ed.ReplaceNode(ni, std::move(inner));
    ed.AddNode(std::move(q));
  }

  // Input `i` of `n` is uint8/int8 (as the node's own op requires; a node that is not stays, so
  // its op names the rule at inference).
  static bool Quantized(const ShapeProbe& probe, const ir::Node& n, size_t i) {
    return i < n.num_explicit_inputs() && n.inputs[i] >= 0 &&
           ops::quant::Is8Bit(probe.dtype(n.inputs[i]));
  }

  static int Slot(const ir::Node& n, size_t i) {
    return i < n.num_explicit_inputs() ? n.inputs[i] : -1;
  }

  // QLinearConv (X, sx, zx, W, sw, zw, sy, zy[, B]) and QLinearMatMul (A, sa, za, B, sb, zb, sy,
  // zy).
  // "" when expanded, else why not.
  static std::string ExpandOnnx(GraphEditor& ed, const ShapeProbe& probe, int ni) {
    const ir::Node n = ed.node(ni);
    const bool conv = n.op_type == "QLinearConv";
    if (n.num_explicit_inputs() < 8 || n.outputs.size() != 1) return "malformed";
    if (!Quantized(probe, n, 0) || !Quantized(probe, n, 3)) return "an input is not uint8/int8";
    ir::Node inner;
    inner.op_type = conv ? "Conv" : "MatMul";
    inner.opset = conv ? 11 : 13;
    std::optional<Tensor> bias;
    if (conv) {
      for (const char* a : {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"})
        if (n.HasAttr(a)) inner.attrs[a] = n.attrs.at(a);
      if (Slot(n, 8) >= 0 && !(bias = FloatBias(ed, n.inputs[8], n.inputs[1], n.inputs[4])))
        return "its bias or scales are not constants";
    }
    // QLinearMatMul's b_scale may have one element per column (opset 21): axis 1 of a 2-D B.
    const int x = Dequantize(ed, n, {0, 1, 2}, 1);
    const int w = Dequantize(ed, n, {3, 4, 5}, conv ? 0 : -1);
    std::vector<int> ins = {x, w};
    if (bias) ins.push_back(ed.AddConstant(n.name + "_bias", std::move(*bias)));
    Finish(ed, probe, ni, std::move(inner), std::move(ins), n.inputs[6], Slot(n, 7));
    return "";
  }

  static std::string ExpandMs(GraphEditor& ed, const ShapeProbe& probe, int ni,
                              const MsQLinearForm& f) {
    const ir::Node n = ed.node(ni);
    const size_t count = n.num_explicit_inputs();
    if (n.outputs.size() != 1 || n.GetInt("channels_last", 0) != 0) return "malformed";
    ir::Node inner;
    inner.op_type = f.inner;
    inner.opset = f.inner_opset;
    inner.attrs = n.attrs;
    inner.attrs.erase("channels_last");
    std::vector<Operand> operands;
    int y_scale = -1, y_zp = -1;
    const std::string op = n.op_type;
    if (op == "QLinearAdd" || op == "QLinearMul") {
      if (count < 7) return "malformed";
      operands = {{0, 1, 2}, {3, 4, 5}};
      y_scale = n.inputs[6], y_zp = Slot(n, 7);
    } else if (op == "QLinearConcat") {
      if (count < 5 || (count - 2) % 3 != 0) return "malformed";
      for (size_t i = 2; i < count; i += 3) operands.push_back({i, i + 1, i + 2});
      y_scale = n.inputs[0], y_zp = n.inputs[1];
    } else if (op == "QGemm") {
      if (count < 6) return "malformed";
      operands = {{0, 1, 2}, {3, 4, 5}};
      y_scale = Slot(n, 7), y_zp = Slot(n, 8);
      if (y_zp >= 0 && y_scale < 0) return "malformed";
      inner.attrs["beta"] = FloatAttr(n.GetFloat("alpha", 1.f));
    } else {  // the unary ones: X, x_scale, x_zero_point, y_scale, y_zero_point
      if (count < 4) return "malformed";
      operands = {{0, 1, 2}};
      y_scale = n.inputs[3], y_zp = Slot(n, 4);
    }
    for (const Operand& o : operands)
      if (!Quantized(probe, n, o.data)) return "an input is not uint8/int8";
    std::optional<Tensor> bias;
    if (op == "QGemm" && Slot(n, 6) >= 0 &&
        !(bias = FloatBias(ed, n.inputs[6], n.inputs[1], n.inputs[4])))
      return "its C or scales are not constants";
    std::vector<int> ins;
    for (size_t k = 0; k < operands.size(); ++k) {
      // QGemm's b_scale may have one element per column of B': axis 0 of B when transB.
      const int64_t axis = op == "QGemm" && k == 1 ? (n.GetInt("transB", 0) != 0 ? 0 : 1) : 1;
      ins.push_back(Dequantize(ed, n, operands[k], axis));
    }
    if (bias) ins.push_back(ed.AddConstant(n.name + "_bias", std::move(*bias)));
    Finish(ed, probe, ni, std::move(inner), std::move(ins), y_scale, y_zp);
    return "";
  }
};

}  // namespace

std::unique_ptr<Pass> MakeExpandQLinearPass() { return std::make_unique<ExpandQLinearPass>(); }

}  // namespace kiln::passes
