// fuse_qdq_matmul: in QDQ models (kiln quantize's, ONNX Runtime's quantize_static, NNCF's), a
// matrix product whose input and constant weight both come from DequantizeLinear
//
//   Aq -> DequantizeLinear -> MatMul / Gemm <- DequantizeLinear <- Bq (int8 constant)
//   [-> Add(row bias)] [-> activation] [-> QuantizeLinear]
//
// becomes kiln's QMatMul (src/ops/quant/qmatmul.cc), which reads Aq and Bq directly so the CPU
// runs an int8 matrix product (cpu.qmatmul.onednn): the Linear layers of classifier heads and
// transformer blocks. Conditions: A dequantized per tensor (one constant scale and zero point,
// any zero point) from uint8/int8, of rank >= 2 (Gemm: 2-D, transA 0); B an int8 2-D constant
// dequantized per tensor or per output column (MatMul and Gemm transB 0: axis 1; Gemm transB 1,
// B [N, K]: axis 0, transposed here) with zero points 0; Gemm's C, if any, a float32 constant
// that adds one row (beta * C becomes the bias, alpha multiplies B's scales). Then, each only as
// the sole reader of the result: an Add of such a row (when there is no bias yet), an activation
// (activation_match.h), and a QuantizeLinear with one scale and zero point, which the product
// absorbs (it then writes uint8/int8). Anything else is left alone and runs in float32 through
// the Q/DQ reference kernels, as the QDQ graph says; a product whose input is dequantized but
// that stays float is named with the reason in the pass summary (`kiln inspect --optimized`).
// fold_constants keeps such weights' DequantizeLinear unfolded for this pass.
#include <memory>

#include "passes/activation_match.h"
#include "passes/graph_edit.h"
#include "passes/pass.h"
#include "passes/qdq_match.h"
#include "passes/shape_probe.h"

namespace kiln::passes {
namespace {

class FuseQdqMatMulPass : public Pass {
 public:
  std::string name() const override { return "fuse_qdq_matmul"; }

  StatusOr<bool> Run(ir::Graph& graph) override {
    summary_.clear();
    if (!HasOnnxOp(graph, {"DequantizeLinear"}) || !HasOnnxOp(graph, {"MatMul", "Gemm"}))
      return false;
    const ShapeProbe probe = ShapeProbe::Run(graph);
    GraphEditor ed(graph);
    int fused = 0, requantized = 0, activations = 0;
    FloatLeftovers leftovers;  // dequantized-input products left float, and why
    for (int ni = 0; ni < ed.num_nodes(); ++ni) {
      if (!ed.alive(ni)) continue;
      const ir::Node& n = ed.node(ni);
      const bool gemm = IsOnnxOp(n, "Gemm");
      if (!gemm && !IsOnnxOp(n, "MatMul")) continue;
      QdqOperands ops;
      if (!MatchQdqOperands(ed, probe, n, &leftovers, &ops)) continue;
      auto left = [&](const std::string& why) { leftovers.Decline(ed, n, ops.w_dq, why); };
      const ir::Node& xn = ed.node(ops.x_dq);
      const ir::Node& wn = ed.node(ops.w_dq);
      const DataType xt = ops.x_type;
      if (!IsScalarOf(ed.ConstantOf(xn.inputs[1]), {DataType::kFloat}) ||
          (xn.HasInput(2) && !IsScalarOf(ed.ConstantOf(xn.inputs[2]), {xt}))) {
        left("its input scale or zero point is not one constant");
        continue;
      }
      const std::optional<int64_t> a_rank = probe.rank(n.inputs[0]);
      if (!a_rank || *a_rank < 2 || (gemm && *a_rank != 2)) {
        left("its input's rank is unknown or below 2");
        continue;
      }
      if (gemm && n.GetInt("transA", 0) != 0) {
        left("transA");
        continue;
      }
      const bool trans_b = gemm && n.GetInt("transB", 0) != 0;
      const Tensor* wq = ed.ConstantOf(wn.inputs.size() >= 2 ? wn.inputs[0] : -1);
      const Tensor* ws = ed.ConstantOf(wn.inputs.size() >= 2 ? wn.inputs[1] : -1);
      if (wq == nullptr || ws == nullptr || wq->dtype() != DataType::kInt8 || wq->rank() != 2 ||
          ws->dtype() != DataType::kFloat) {
        left("its weight is not a 2-D int8 constant with float32 scales");
        continue;
      }
      const int64_t k = trans_b ? wq->shape()[1] : wq->shape()[0];
      const int64_t cols = trans_b ? wq->shape()[0] : wq->shape()[1];
      const int64_t w_axis = wn.GetInt("axis", 1);
      const int64_t col_axis = trans_b ? 0 : 1;
      const bool per_column =
          ws->rank() == 1 && ws->numel() == cols && (w_axis == col_axis || w_axis == col_axis - 2);
      if (ws->numel() != 1 && !per_column) {
        left("its weight scales are neither per tensor nor per output column");
        continue;
      }
      if (wn.HasInput(2)) {
        const Tensor* wz = ed.ConstantOf(wn.inputs[2]);
        if (wz == nullptr || wz->dtype() != DataType::kInt8 || !AllZero(*wz)) {
          left("its weight zero points are not 0");
          continue;
        }
      }
      // Gemm: Y = alpha * A @ B + beta * C.
      const float alpha = gemm ? n.GetFloat("alpha", 1.f) : 1.f;
      if (alpha == 0.f) {  // the scales would be 0, and the kernel's bias goes in divided by them
        left("alpha is 0");
        continue;
      }
      std::optional<Tensor> bias;
      if (gemm && n.HasInput(2)) {
        bias = RowBiasOf(ed, n.inputs[2], cols, 2);
        if (!bias) {
          left("its C is not a float32 constant row");
          continue;
        }
        const float beta = n.GetFloat("beta", 1.f);
        for (int64_t j = 0; j < cols; ++j) bias->data<float>()[j] *= beta;
      }
      if (!ImportKilnDomain(graph)) return false;

      // B as [K, N] and one scale per column (times alpha).
      Tensor b = Tensor::Empty(DataType::kInt8, {k, cols});
      const int8_t* src = wq->data<int8_t>();
      int8_t* dst = b.data<int8_t>();
      for (int64_t r = 0; r < k; ++r)
        for (int64_t c = 0; c < cols; ++c)
          dst[r * cols + c] = trans_b ? src[c * k + r] : src[r * cols + c];
      Tensor s = Tensor::Empty(DataType::kFloat, {cols});
      for (int64_t c = 0; c < cols; ++c)
        s.data<float>()[c] = ws->data<float>()[ws->numel() == 1 ? 0 : c] * alpha;
      const std::string base = n.name.empty() ? ed.value(n.outputs[0]).name : n.name;

      int out = n.outputs[0];
      std::vector<int> absorbed;
      if (!bias) {  // MatMul -> Add(row)
        const int add = ed.SoleConsumer(out);
        if (add >= 0 && IsOnnxOp(ed.node(add), "Add") && ed.node(add).opset >= 7 &&
            ed.node(add).inputs.size() == 2 && ed.node(add).inputs[0] != ed.node(add).inputs[1]) {
          const ir::Node& an = ed.node(add);
          const int bias_v = an.inputs[0] == out ? an.inputs[1] : an.inputs[0];
          bias = RowBiasOf(ed, bias_v, cols, *a_rank);
          if (bias) {
            absorbed.push_back(add);
            out = an.outputs[0];
          }
        }
      }
      ir::Node q;
      q.name = n.name;
      q.op_type = "QMatMul";
      q.domain = "kiln";
      q.opset = 1;
      q.attrs["activation"] = StringAttr("");
      if (auto m = MatchActivation(ed, out)) {
        for (int r : m->nodes) absorbed.push_back(r);
        SetActivationAttrs(*m, &q);
        out = m->output;
        ++activations;
      }
      q.inputs = {xn.inputs[0],
                  xn.inputs[1],
                  xn.HasInput(2) ? xn.inputs[2] : -1,
                  ed.AddConstant(base + "_int8_weight", std::move(b)),
                  ed.AddConstant(base + "_weight_scales", std::move(s)),
                  bias ? ed.AddConstant(base + "_bias", std::move(*bias)) : -1};
      // A QuantizeLinear that alone reads the result (one scale and zero point) moves in.
      const int qn = ed.SoleConsumer(out);
      if (qn >= 0 && IsOnnxOp(ed.node(qn), "QuantizeLinear")) {
        const ir::Node& qz = ed.node(qn);
        const Tensor* ys = ed.ConstantOf(qz.inputs.size() >= 2 ? qz.inputs[1] : -1);
        const Tensor* yz = ed.ConstantOf(qz.HasInput(2) ? qz.inputs[2] : -1);
        if (qz.outputs.size() == 1 && qz.inputs[0] == out && IsScalarOf(ys, {DataType::kFloat}) &&
            IsScalarOf(yz, {DataType::kUInt8, DataType::kInt8}) &&
            qz.GetInt("output_dtype", 0) == 0) {
          q.inputs.push_back(qz.inputs[1]);
          q.inputs.push_back(qz.inputs[2]);
          absorbed.push_back(qn);
          out = qz.outputs[0];
          ++requantized;
        }
      }
      q.outputs = {out};
      for (int r : absorbed) ed.RemoveNode(r);
      ed.ReplaceNode(ni, std::move(q));
      RemoveUnreadDequantize(ed, ops);
      ++fused;
    }
    if (fused + leftovers.folded() == 0) return false;
    KILN_RETURN_IF_ERROR(ed.Commit());
    summary_ =
        "fused " + std::to_string(fused) +
        " DequantizeLinear+MatMul/Gemm pairs into QMatMul (int8 matrix products" +
        (activations ? ", " + std::to_string(activations) + " with an activation" : std::string()) +
        (requantized ? ", " + std::to_string(requantized) +
                           " writing int8 for the QuantizeLinear they absorbed"
                     : std::string()) +
        ")";
    summary_ += leftovers.Summary();
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> MakeFuseQdqMatMulPass() { return std::make_unique<FuseQdqMatMulPass>(); }

}  // namespace kiln::passes
