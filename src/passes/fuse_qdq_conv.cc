// fuse_qdq_conv: in QDQ models (kiln quantize's, ONNX Runtime's quantize_static, NNCF's), a
// convolution whose input and weight both come from DequantizeLinear
//
//   Xq -> DequantizeLinear -> Conv / FusedConv <- DequantizeLinear <- Wq (int8 constant)
//
// becomes kiln's QConv (src/ops/quant/qconv.cc), which reads Xq and Wq directly so the CPU runs
// an int8 convolution (cpu.qconv.onednn). FusedConv's activation and residual are kept, so this
// pass runs after the conv fusions. Conditions: X dequantized per tensor (one scale and zero
// point, constants) from uint8/int8; W an int8 constant dequantized per tensor or per output
// channel (axis 0) with zero points 0; X's zero point any constant (ONNX Runtime's asymmetric
// uint8 activations: the kernel gives it to oneDNN as the source zero point), 0 where X has one
// scale per channel (depthwise); B, if any, float32.
// Anything else is left alone (it runs in float32 through the Q/DQ reference kernels, as the QDQ
// graph says). The DequantizeLinear nodes go when nothing else reads them.
#include <memory>

#include "passes/graph_edit.h"
#include "passes/pass.h"
#include "passes/qdq_match.h"
#include "passes/shape_probe.h"

namespace kiln::passes {
namespace {

// One-element constant of `dtype`, or absent (-1) when `optional`.
bool ScalarConstant(const GraphEditor& ed, int v, std::initializer_list<DataType> dtypes,
                    bool optional) {
  if (v < 0) return optional;
  const Tensor* t = ed.ConstantOf(v);
  if (t == nullptr || t->numel() != 1) return false;
  for (DataType d : dtypes)
    if (t->dtype() == d) return true;
  return false;
}

class FuseQdqConvPass : public Pass {
 public:
  std::string name() const override { return "fuse_qdq_conv"; }

  StatusOr<bool> Run(ir::Graph& graph) override {
    summary_.clear();
    if (!HasOnnxOp(graph, {"DequantizeLinear"})) return false;
    const ShapeProbe probe = ShapeProbe::Run(graph);
    GraphEditor ed(graph);
    int fused = 0, per_tensor = 0, requantized = 0, channel_inputs = 0;
    FloatLeftovers leftovers;  // dequantized-input convolutions left float, and why
    for (int ni = 0; ni < ed.num_nodes(); ++ni) {
      if (!ed.alive(ni)) continue;
      const ir::Node& n = ed.node(ni);
      if (!IsOnnxOp(n, "Conv") && !IsKilnOp(n, "FusedConv")) continue;
      QdqOperands ops;
      if (!MatchQdqOperands(ed, probe, n, &leftovers, &ops)) continue;
      const int dw = ops.w_dq;
      auto left = [&](const std::string& why) { leftovers.Decline(ed, n, dw, why); };
      const ir::Node& xn = ed.node(ops.x_dq);
      const ir::Node& wn = ed.node(dw);
      const DataType xt = ops.x_type;
      // A depthwise convolution (one input channel per group, one output per group) may have
      // one input scale per channel: output channel c reads only input channel c, so the scale
      // folds into the weight's.
      const Tensor* xs = ed.ConstantOf(xn.inputs[1]);
      const Tensor* xz = xn.HasInput(2) ? ed.ConstantOf(xn.inputs[2]) : nullptr;
      const int64_t group = n.GetInt("group", 1);
      const Tensor* wq0 = ed.ConstantOf(wn.inputs.size() >= 2 ? wn.inputs[0] : -1);
      const bool depthwise = wq0 != nullptr && wq0->rank() >= 3 && group > 1 &&
                             wq0->shape()[0] == group && wq0->shape()[1] == 1;
      const int64_t x_axis = xn.GetInt("axis", 1);
      const bool x_channels = xs != nullptr && xs->dtype() == DataType::kFloat && xs->rank() == 1 &&
                              xs->numel() == group && depthwise &&
                              (x_axis == 1 || x_axis == 1 - probe.rank(xn.inputs[0]).value_or(0)) &&
                              (xz == nullptr || (xz->dtype() == xt && xz->numel() == group));
      if (!x_channels && (!ScalarConstant(ed, xn.inputs[1], {DataType::kFloat}, false) ||
                          !ScalarConstant(ed, xn.HasInput(2) ? xn.inputs[2] : -1, {xt}, true))) {
        left(depthwise ? "its input scale or zero point is neither one constant nor one per "
                         "channel"
                       : "its input scale or zero point is not one constant");
        continue;
      }
      // A per-tensor zero point goes to the kernel (oneDNN's source zero point); per-channel
      // ones would have to fold into the weights like the scales, which they cannot.
      if (xn.HasInput(2) && (xz == nullptr || (x_channels && !AllZero(*xz)))) {
        left("its per-channel input zero points are not 0");
        continue;
      }
      // W: an int8 constant, symmetric, per tensor or per output channel.
      if (wn.inputs.size() < 2) {
        left("its weight has no scale");
        continue;
      }
      const Tensor* wq = ed.ConstantOf(wn.inputs[0]);
      const Tensor* ws = ed.ConstantOf(wn.inputs[1]);
      if (wq == nullptr || ws == nullptr || wq->dtype() != DataType::kInt8 || wq->rank() < 3 ||
          ws->dtype() != DataType::kFloat) {
        left("its weight is not an int8 constant with float32 scales");
        continue;
      }
      const int64_t m = wq->shape()[0];
      const int64_t axis = wn.GetInt("axis", 1);
      const bool channel_scales =
          ws->numel() == m && ws->rank() == 1 && (axis == 0 || axis == -wq->rank());
      if (ws->numel() != 1 && !channel_scales) {
        left("its weight scales are neither per tensor nor per output channel");
        continue;
      }
      if (wn.HasInput(2)) {
        const Tensor* wz = ed.ConstantOf(wn.inputs[2]);
        if (wz == nullptr || wz->dtype() != DataType::kInt8 || wz->numel() != ws->numel() ||
            !AllZero(*wz)) {
          left("its weight zero points are not 0");
          continue;
        }
      }
      if (n.HasInput(2) && probe.dtype(n.inputs[2]) != DataType::kFloat) {
        left("its bias is not float32");
        continue;
      }
      if (!ImportKilnDomain(graph)) return false;

      int scale_v = wn.inputs[1], x_scale_v = xn.inputs[1],
          x_zero_v = xn.HasInput(2) ? xn.inputs[2] : -1;
      if (ws->numel() != m || ws->rank() != 1) ++per_tensor;
      if (ws->numel() != m || ws->rank() != 1 || x_channels) {
        // One weight scale per channel, times the input's per-channel scale (depthwise).
        Tensor s = Tensor::Empty(DataType::kFloat, {m});
        for (int64_t i = 0; i < m; ++i)
          s.data<float>()[i] = ws->data<float>()[ws->numel() == 1 ? 0 : i] *
                               (x_channels ? xs->data<float>()[i] : 1.f);
        scale_v = ed.AddConstant(
            ed.value(wn.inputs[1]).name + (x_channels ? "_times_input_scales" : "_per_channel"),
            std::move(s));
      }
      if (x_channels) {
        Tensor one = Tensor::Empty(DataType::kFloat, {});
        one.data<float>()[0] = 1.f;
        x_scale_v = ed.AddConstant(ed.value(xn.inputs[1]).name + "_folded", std::move(one));
        Tensor zero = Tensor::Empty(xt, {});
        static_cast<char*>(zero.raw())[0] = 0;
        x_zero_v =
            ed.AddConstant(ed.value(xn.inputs[1]).name + "_folded_zero_point", std::move(zero));
        ++channel_inputs;
      }
      ir::Node q;
      q.name = n.name;
      q.op_type = "QConv";
      q.domain = "kiln";
      q.opset = 1;
      q.attrs = n.attrs;
      q.inputs = {xn.inputs[0],
                  x_scale_v,
                  x_zero_v,
                  wn.inputs[0],
                  scale_v,
                  n.HasInput(2) ? n.inputs[2] : -1,
                  n.HasInput(3) ? n.inputs[3] : -1};
      q.outputs = n.outputs;
      // A QuantizeLinear that alone reads the result (per tensor, or per output channel along
      // axis 1; any zero points) moves into the convolution: it then writes uint8/int8
      // directly (not with a residual Z).
      const int qn = ed.SoleConsumer(n.outputs[0]);
      if (qn >= 0 && !n.HasInput(3) && IsOnnxOp(ed.node(qn), "QuantizeLinear")) {
        const ir::Node& qz = ed.node(qn);
        const int zv = qz.HasInput(2) ? qz.inputs[2] : -1;
        const Tensor* ys = ed.ConstantOf(qz.inputs.size() >= 2 ? qz.inputs[1] : -1);
        const Tensor* yz = ed.ConstantOf(zv);
        const int64_t y_axis = qz.GetInt("axis", 1);
        const bool y_ok = ys != nullptr && yz != nullptr && ys->dtype() == DataType::kFloat &&
                          (yz->dtype() == DataType::kUInt8 || yz->dtype() == DataType::kInt8) &&
                          ((ys->numel() == 1 && yz->numel() == 1) ||
                           (ys->rank() == 1 && ys->numel() == m && yz->numel() == m &&
                            (y_axis == 1 || y_axis == 1 - probe.rank(n.outputs[0]).value_or(0))));
        if (qz.outputs.size() == 1 && qz.inputs[0] == n.outputs[0] && y_ok &&
            qz.GetInt("output_dtype", 0) == 0) {
          q.inputs.resize(9, -1);
          q.inputs[7] = qz.inputs[1];
          q.inputs[8] = zv;
          q.outputs = qz.outputs;
          ed.RemoveNode(qn);
          ++requantized;
        }
      }
      ed.ReplaceNode(ni, std::move(q));
      RemoveUnreadDequantize(ed, ops);
      ++fused;
    }
    if (fused + leftovers.folded() == 0) return false;
    KILN_RETURN_IF_ERROR(ed.Commit());
    summary_ = "fused " + std::to_string(fused) +
               " DequantizeLinear+Conv pairs into QConv (int8 convolutions" +
               (per_tensor ? ", " + std::to_string(per_tensor) + " with per-tensor weight scales"
                           : std::string()) +
               (channel_inputs ? ", " + std::to_string(channel_inputs) +
                                     " depthwise with per-channel input scales folded into "
                                     "their weights'"
                               : std::string()) +
               (requantized ? ", " + std::to_string(requantized) +
                                  " writing int8 for the QuantizeLinear they absorbed"
                            : std::string()) +
               ")";
    summary_ += leftovers.Summary();
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> MakeFuseQdqConvPass() { return std::make_unique<FuseQdqConvPass>(); }

}  // namespace kiln::passes
