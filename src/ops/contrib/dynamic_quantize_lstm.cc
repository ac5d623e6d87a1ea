// com.microsoft DynamicQuantizeLSTM (opset 1): ONNX's LSTM with 8-bit weights, as ONNX Runtime's
// quantize_dynamic writes it for an LSTM node.
//
// Inputs: X, W [dirs, input_size, 4H], R [dirs, H, 4H] (uint8 or int8: the ONNX weights
// transposed), B, sequence_lens, initial_h, initial_c, P (as LSTM), then W_scale, W_zero_point,
// R_scale, R_zero_point: [dirs] (per tensor, per direction) or [dirs, 4H] (per gate row); zero
// points of the weights' type. Attributes: LSTM's (direction, hidden_size, activations,
// activation_alpha/beta, clip, input_forget; layout is always 0). Gate order i, o, f, c.
//
// Reference kernel: W and R dequantized to float32 ((q - zp) * scale) and transposed to LSTM's
// [dirs, 4H, input_size] and [dirs, 4H, H], then kiln's LSTM reference kernel (ops/nn/lstm.cc,
// made at load from this node's attributes). ORT instead quantizes X and each h_t dynamically
// to uint8 and multiplies in integers, so its outputs differ from this one by that activation
// quantization error (measured in tests/models/contrib_ops_check.py).
#include <memory>
#include <string>
#include <vector>

#include "ops/common.h"
#include "ops/op_cases.h"
#include "ops/quant/quant_common.h"

namespace kiln::ops {
namespace {

using ir::ComputeContext;
using ir::InferContext;
using ir::Node;

constexpr int kWScale = 8, kWZp = 9, kRScale = 10, kRZp = 11;

// q [dirs, rows, cols] (cols = 4H) dequantized and transposed to [dirs, cols, rows]; scale and
// zero point per direction ([dirs]) or per column ([dirs, cols]).
Tensor DequantizeTransposed(const Tensor& q, const Tensor& scale, const Tensor& zp) {
  const int64_t dirs = q.shape()[0], rows = q.shape()[1], cols = q.shape()[2];
  Tensor out = Tensor::Empty(DataType::kFloat, {dirs, cols, rows});
  const bool per_column = scale.numel() == dirs * cols && cols > 1;
  const float* s = scale.data<float>();
  float* o = out.data<float>();
  for (int64_t d = 0; d < dirs; ++d)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        const int64_t k = per_column ? d * cols + c : d;
        const int32_t v = quant::ReadQuant(q, (d * rows + r) * cols + c) - quant::ReadQuant(zp, k);
        o[(d * cols + c) * rows + r] = static_cast<float>(v) * s[k];
      }
  return out;
}

class DynamicQuantizeLstmOp final : public ir::Op {
 public:
  static StatusOr<std::unique_ptr<ir::Op>> Create(const Node& node) {
    std::unique_ptr<DynamicQuantizeLstmOp> op(new DynamicQuantizeLstmOp(node));
    if (node.num_explicit_inputs() != 12)
      return ir::AttrError(node,
                           "DynamicQuantizeLSTM takes 12 inputs (X, W, R, B, sequence_lens, "
                           "initial_h, initial_c, P, W_scale, W_zero_point, R_scale, "
                           "R_zero_point; the optional ones may be empty); got " +
                               std::to_string(node.num_explicit_inputs()));
    Node inner;
    inner.name = node.name;
    inner.op_type = "LSTM";
    inner.opset = 14;
    inner.attrs = node.attrs;
    inner.attrs.erase("layout");
    for (int i = 0; i < 8; ++i) inner.inputs.push_back(i);
    for (size_t o = 0; o < node.outputs.size(); ++o)
      inner.outputs.push_back(static_cast<int>(8 + o));
    const ir::OpDef* def = ir::OpRegistry::Global().Find("", "LSTM", 14);
    if (def == nullptr) return Internal(node.Describe() + ": kiln has no LSTM");
    auto made = def->create(inner);
    if (!made.ok()) return Status(made.status()).AddContext("in the LSTM of " + node.Describe());
    op->lstm_ = std::move(*made);
    op->lstm_node_ = std::move(inner);
    return std::unique_ptr<ir::Op>(std::move(op));
  }

  Status Infer(InferContext& ctx) const override {
    for (int i : {0, 1, 2, kWScale, kWZp, kRScale, kRZp})
      if (!ctx.has_input(i)) return ctx.Error("input " + std::to_string(i) + " is required");
    std::vector<DataType> dtypes;
    std::vector<Shape> shapes;
    for (int i = 0; i < 8; ++i) {
      dtypes.push_back(ctx.has_input(i) ? ctx.dtype(i) : DataType::kUndefined);
      shapes.push_back(ctx.has_input(i) ? ctx.shape(i) : Shape{});
    }
    for (int w : {1, 2}) {
      const std::string name = w == 1 ? "W" : "R";
      if (!quant::Is8Bit(ctx.dtype(w))) return ctx.Error(name + " must be uint8 or int8");
      const Shape& s = ctx.shape(w);
      if (s.size() != 3)
        return ctx.Error(name + " must be 3-D [dirs, rows, 4H]; got " + ShapeToString(s));
      const int scale = w == 1 ? kWScale : kRScale, zp = w == 1 ? kWZp : kRZp;
      const Shape per_tensor = {s[0]}, per_column = {s[0], s[2]};
      if (ctx.dtype(scale) != DataType::kFloat ||
          (ctx.shape(scale) != per_tensor && ctx.shape(scale) != per_column))
        return ctx.Error(name + "_scale must be float32 " + ShapeToString(per_tensor) + " or " +
                         ShapeToString(per_column) + "; got " + ShapeToString(ctx.shape(scale)));
      if (ctx.dtype(zp) != ctx.dtype(w) || ctx.shape(zp) != ctx.shape(scale))
        return ctx.Error(name + "_zero_point must have " + name + "'s type and " + name +
                         "_scale's shape " + ShapeToString(ctx.shape(scale)));
      dtypes[w] = DataType::kFloat;
      shapes[w] = {s[0], s[2], s[1]};
    }
    InferContext sub(lstm_node_, dtypes, shapes, std::vector<const Tensor*>(dtypes.size()));
    KILN_RETURN_IF_ERROR(lstm_->Infer(sub));
    for (size_t o = 0; o < ctx.num_outputs() && o < sub.out_dtypes().size(); ++o)
      ctx.SetOutput(o, sub.out_dtypes()[o], sub.out_shapes()[o]);
    return OkStatus();
  }

  Status Compute(const ComputeContext& ctx) const override {
    const Tensor w = DequantizeTransposed(ctx.in(1), ctx.in(kWScale), ctx.in(kWZp));
    const Tensor r = DequantizeTransposed(ctx.in(2), ctx.in(kRScale), ctx.in(kRZp));
    ComputeContext inner;
    for (int i = 0; i < 8; ++i)
      inner.inputs.push_back(i == 1 ? &w : (i == 2 ? &r : (ctx.has(i) ? &ctx.in(i) : nullptr)));
    inner.outputs = ctx.outputs;
    return lstm_->Compute(inner);
  }

 private:
  explicit DynamicQuantizeLstmOp(const Node& node) : Op(node) {}
  Node lstm_node_;
  std::unique_ptr<ir::Op> lstm_;
};

StatusOr<std::unique_ptr<ir::Op>> CreateDynamicQuantizeLstm(const Node& node) {
  return DynamicQuantizeLstmOp::Create(node);
}

KILN_REGISTER_OP_DOMAIN("com.microsoft", "DynamicQuantizeLSTM", 1, 1, &CreateDynamicQuantizeLstm);

// Kernel cases: forward with int8 per-tensor weights and every optional input; bidirectional
// with uint8 per-column weights, sequence_lens and three outputs; reverse, batch 1, no B.
OpCase QLstmCase(const std::string& direction, int64_t batch, int64_t h, bool u8, bool per_column,
                 bool optional_inputs, int outputs, uint32_t seed) {
  const int64_t seq = 4, in = 5, dirs = direction == "bidirectional" ? 2 : 1;
  const DataType t = u8 ? DataType::kUInt8 : DataType::kInt8;
  const int64_t lo = u8 ? 0 : -128, hi = u8 ? 255 : 127;
  const Shape scale = per_column ? Shape{dirs, 4 * h} : Shape{dirs};
  OpCase c(direction + " batch " + std::to_string(batch) + " H " + std::to_string(h) +
               (u8 ? " uint8" : " int8") + (per_column ? " per-column" : " per-direction") +
               (optional_inputs ? " with B, sequence_lens, initial states, P" : ""),
           1);
  c.In(CaseTensor({seq, batch, in}, seed))
      .Const(CaseInts(t, {dirs, in, 4 * h}, seed + 1, lo, hi))
      .Const(CaseInts(t, {dirs, h, 4 * h}, seed + 2, lo, hi));
  if (optional_inputs) {
    std::vector<int32_t> lens(static_cast<size_t>(batch), static_cast<int32_t>(seq));
    lens[0] = 2;
    c.Const(CaseTensor({dirs, 8 * h}, seed + 3))
        .In(Tensor::FromVector<int32_t>(lens, {batch}))
        .In(CaseTensor({dirs, batch, h}, seed + 4))
        .In(CaseTensor({dirs, batch, h}, seed + 5))
        .Const(CaseTensor({dirs, 3 * h}, seed + 6));
  } else {
    c.Omitted().Omitted().Omitted().Omitted().Omitted();
  }
  const int64_t zlo = u8 ? 120 : -4, zhi = u8 ? 136 : 4;
  c.Const(CaseTensor(scale, seed + 7, 0.002f, 0.01f))
      .Const(CaseInts(t, scale, seed + 8, zlo, zhi))
      .Const(CaseTensor(scale, seed + 9, 0.002f, 0.01f))
      .Const(CaseInts(t, scale, seed + 10, zlo, zhi));
  c.Str("direction", direction).Int("hidden_size", h).Outputs(outputs);
  return c;
}
std::vector<OpCase> DynamicQuantizeLstmCases() {
  return {QLstmCase("forward", 3, 6, false, false, true, 3, 600),
          QLstmCase("bidirectional", 2, 5, true, true, true, 3, 620),
          QLstmCase("reverse", 1, 3, false, true, false, 2, 640)};
}
KILN_REGISTER_OP_CASES("com.microsoft", "DynamicQuantizeLSTM", &DynamicQuantizeLstmCases);

}  // namespace
}  // namespace kiln::ops
