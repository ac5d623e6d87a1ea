// QAveragePool (domain "kiln", opset 1): an average pooling of an int8 tensor, written by the graph
// optimizer (src/passes/fuse_qdq_add.cc) in place of an AveragePool or GlobalAveragePool of QDQ
// models whose input is dequantized and whose output is quantized again (ONNX Runtime's
// QLinearAveragePool and QLinearGlobalAveragePool, expanded by expand_qlinear, have this form):
//
//   Y = QuantizeLinear(pool(DequantizeLinear(X, x_scale, x_zero_point)), y_scale, y_zero_point)
//
// Inputs: 0 X (uint8 or int8, [N, C, spatial...]), 1 x_scale (float32, one element),
// 2 x_zero_point (optional, X's type, one element), 3 y_scale (float32, one element),
// 4 y_zero_point (uint8 or int8, one element: Y's type).
// Attributes: `pool` ("AveragePool" or "GlobalAveragePool"), `pool_opset` (the opset of the node
// it replaced, which fixes what AveragePool's attributes mean), and that pool's own attributes
// (kernel_shape, strides, pads, auto_pad, ceil_mode, count_include_pad, dilations), parsed and
// checked by the pool op itself.
//
// Reference kernel: X dequantized in float32 as DequantizeLinear's reference kernel does it, the
// pool's own reference kernel, then QuantizeLinear's arithmetic: the unfused QDQ graph, bit for
// bit.
#include <memory>
#include <string>

#include "ops/attrs.h"
#include "ops/common.h"
#include "ops/quant/quant_common.h"

namespace kiln::ops {
namespace {

using ir::ComputeContext;
using ir::InferContext;
using ir::Node;
using ir::Op;

class QAveragePoolOp : public Op {
 public:
  static StatusOr<std::unique_ptr<Op>> Create(const Node& node) {
    std::unique_ptr<QAveragePoolOp> op(new QAveragePoolOp(node));
    const std::string pool = node.GetString("pool", "");
    if (pool != "AveragePool" && pool != "GlobalAveragePool")
      return ir::AttrError(node,
                           "QAveragePool's pool must be \"AveragePool\" or "
                           "\"GlobalAveragePool\"; got \"" +
                               pool + "\"");
    if (node.inputs.size() != 5)
      return ir::AttrError(
          node, "QAveragePool takes 5 inputs; got " + std::to_string(node.inputs.size()));
    const int64_t pool_opset = node.GetInt("pool_opset", 0);
    // The pool's node: the same name (its errors name this node), the float pool's attributes.
    Node& inner = op->pool_node_;
    inner.name = node.name;
    inner.op_type = pool;
    inner.domain = "";
    inner.opset = static_cast<int>(pool_opset);
    inner.attrs = node.attrs;
    inner.attrs.erase("pool");
    inner.attrs.erase("pool_opset");
    inner.inputs = {node.inputs[0]};
    inner.outputs = {node.outputs.empty() ? -1 : node.outputs[0]};
    std::string why;
    const ir::OpDef* def = ir::OpRegistry::Global().Find("", pool, inner.opset, &why);
    if (def == nullptr)
      return ir::AttrError(node, "QAveragePool's pool_opset " + std::to_string(pool_opset) +
                                     " has no " + pool + ": " + why);
    auto created = def->create(inner);
    if (!created.ok()) return created.status();
    op->pool_ = std::move(*created);
    if (const PoolAttrs* p = op->pool_->attrs<PoolAttrs>()) *static_cast<PoolAttrs*>(&op->a_) = *p;
    op->a_.global = pool == "GlobalAveragePool";
    return std::unique_ptr<Op>(std::move(op));
  }

  const ir::OpAttrs* attributes() const override { return &a_; }

  Status Infer(InferContext& ctx) const override {
    if (!ctx.has_input(0) || !quant::Is8Bit(ctx.dtype(0)))
      return ctx.Error("X must be uint8 or int8");
    for (int s : {1, 3}) {
      KILN_RETURN_IF_ERROR(ctx.ExpectDtype(s, {DataType::kFloat}));
      if (NumElements(ctx.shape(s)) != 1)
        return ctx.Error(std::string(s == 1 ? "x" : "y") + "_scale must have one element");
    }
    if (ctx.has_input(2) && (ctx.dtype(2) != ctx.dtype(0) || NumElements(ctx.shape(2)) != 1))
      return ctx.Error("x_zero_point must be one element of X's type");
    if (!ctx.has_input(4) || !quant::Is8Bit(ctx.dtype(4)) || NumElements(ctx.shape(4)) != 1)
      return ctx.Error("y_zero_point must be one uint8 or int8 element");
    InferContext pool(pool_node_, {DataType::kFloat}, {ctx.shape(0)}, {nullptr});
    KILN_RETURN_IF_ERROR(pool_->Infer(pool));
    ctx.SetOutput(0, ctx.dtype(4), pool.out_shapes()[0]);
    return OkStatus();
  }

  Status Compute(const ComputeContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    const float sx = ctx.in(1).data<float>()[0];
    const int32_t zx = ctx.has(2) ? quant::ReadQuant(ctx.in(2), 0) : 0;
    const float sy = ctx.in(3).data<float>()[0];
    const int32_t zy = quant::ReadQuant(ctx.in(4), 0);
    Tensor& y = ctx.out(0);
    Tensor xf = Tensor::Empty(DataType::kFloat, x.shape());
    float* d = xf.data<float>();
    for (int64_t i = 0, n = x.numel(); i < n; ++i)
      d[i] = static_cast<float>(quant::ReadQuant(x, i) - zx) * sx;
    Tensor yf = Tensor::Empty(DataType::kFloat, y.shape());
    ComputeContext pool;
    pool.inputs = {&xf};
    pool.outputs = {&yf};
    KILN_RETURN_IF_ERROR(pool_->Compute(pool));
    quant::QuantizeTensor(yf.data<float>(), sy, zy, &y);
    return OkStatus();
  }

 private:
  explicit QAveragePoolOp(const Node& node) : Op(node) {}
  Node pool_node_;
  std::unique_ptr<Op> pool_;
  QPoolAttrs a_;
};

KILN_REGISTER_OP_DOMAIN("kiln", "QAveragePool", 1, 1, &QAveragePoolOp::Create);

}  // namespace
}  // namespace kiln::ops
