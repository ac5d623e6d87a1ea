// The quantized operators of ONNX Runtime's "com.microsoft" domain (opset 1) that its quantizer
// writes into QOperator-format models (quantize_static with QuantFormat.QOperator, and the int8
// models of the ONNX Model Zoo), alongside ONNX's own QLinearConv and QLinearMatMul:
//
//   QLinearAdd, QLinearMul    A, A_scale, A_zero_point, B, B_scale, B_zero_point, C_scale,
//                             C_zero_point; numpy broadcasting
//   QLinearGlobalAveragePool  X, x_scale, x_zero_point, y_scale, y_zero_point; channels_last 0
//   QLinearAveragePool        the same inputs, AveragePool's attributes; channels_last 0
//   QLinearSigmoid            the same inputs
//   QLinearLeakyRelu          the same inputs, `alpha`
//   QLinearConcat             Y_scale, Y_zero_point, then (X, x_scale, x_zero_point) per input;
//                             `axis`
//   QGemm                     A, a_scale, a_zero_point, B, b_scale, b_zero_point, C (optional
//                             int32 bias), y_scale, y_zero_point (both optional: float output
//                             without them); transA, transB, alpha
//
// Each is defined (ONNX Runtime's contrib operator documentation) as its float op between
// DequantizeLinear of every input and QuantizeLinear of the output:
//
//   Y = QuantizeLinear(op(DequantizeLinear(X_i, x_scale_i, x_zero_point_i)...), y_scale, y_zp)
//
// QGemm: Y = alpha * (A' B' + C') with C' = C * a_scale * b_scale (per column of B' where b_scale
// is), which is Gemm(A', B', C', alpha, beta = alpha); checked against ONNX Runtime 1.32's kernel
// (tests/quant/ort_qdq_check.py).
//
// Reference kernels: each input dequantized to float32 with DequantizeLinear's arithmetic, the
// float op's own reference kernel (an ai.onnx op of kiln's registry, made at load from this
// node's attributes), then QuantizeLinear's arithmetic. Scales are float32; zero points are
// optional (0, and the output takes the first input's type); A's, X's and the outputs' are one
// element; QGemm's b_scale and b_zero_point may have one element per column of B'. The graph
// optimizer rewrites these nodes into that QDQ form (passes/expand_qlinear.cc), so the CPU runs
// them with the int8 fusions and fast kernels of QDQ models.
#include "ops/quant/ms_qlinear.h"

#include <memory>
#include <string>
#include <vector>

#include "ops/common.h"
#include "ops/quant/quant_common.h"

namespace kiln::ops {
namespace {

using ir::ComputeContext;
using ir::InferContext;
using ir::Node;
using ir::Op;

// One quantized input: its data, scale and zero-point slots (zero point -1: none).
struct Operand {
  int data, scale, zero_point;
};

enum class Kind { kUnary, kBinary, kConcat, kGemm };

Kind KindOf(const std::string& op_type) {
  if (op_type == "QLinearAdd" || op_type == "QLinearMul") return Kind::kBinary;
  if (op_type == "QLinearConcat") return Kind::kConcat;
  if (op_type == "QGemm") return Kind::kGemm;
  return Kind::kUnary;
}

// Dequantizes q (uint8/int8, or int32 for QGemm's C) with a per-tensor scale and zero point, or
// one per index of `axis` (scale with as many elements as q's dim `axis`).
Tensor Dequantize(const Tensor& q, const float* scale, const Tensor* zero_point,
                  const quant::QuantAxis& qa) {
  Tensor out = Tensor::Empty(DataType::kFloat, q.shape());
  float* o = out.data<float>();
  for (int64_t i = 0, n = q.numel(); i < n; ++i) {
    const int64_t c = qa.channel(i);
    const int32_t z = zero_point != nullptr ? quant::ReadQuant(*zero_point, c) : 0;
    o[i] = static_cast<float>(quant::ReadQuant(q, i) - z) * scale[c];
  }
  return out;
}

class MsQLinearOp : public Op {
 public:
  static StatusOr<std::unique_ptr<Op>> Create(const Node& node) {
    std::unique_ptr<MsQLinearOp> op(new MsQLinearOp(node));
    const quant::MsQLinearForm* form = quant::FindMsQLinearForm(node.op_type);
    if (form == nullptr) return Internal(node.Describe() + ": no quantized form");
    op->form_ = *form;
    op->kind_ = KindOf(node.op_type);
    const size_t n = node.num_explicit_inputs();
    auto arity = [&](size_t lo, size_t hi) -> Status {
      if (n >= lo && n <= hi) return OkStatus();
      return ir::AttrError(node, node.op_type + " takes " + std::to_string(lo) +
                                     (hi == lo ? "" : " to " + std::to_string(hi)) +
                                     " inputs; got " + std::to_string(n));
    };
    auto slot = [&](size_t i) { return i < n && node.inputs[i] >= 0 ? static_cast<int>(i) : -1; };
    switch (op->kind_) {
      case Kind::kUnary:
        KILN_RETURN_IF_ERROR(arity(4, 5));
        op->operands_ = {{0, 1, slot(2)}};
        op->y_scale_ = 3, op->y_zero_point_ = slot(4);
        break;
      case Kind::kBinary:
        KILN_RETURN_IF_ERROR(arity(7, 8));
        op->operands_ = {{0, 1, slot(2)}, {3, 4, slot(5)}};
        op->y_scale_ = 6, op->y_zero_point_ = slot(7);
        break;
      case Kind::kConcat:
        if (n < 5 || (n - 2) % 3 != 0)
          return ir::AttrError(node,
                               "QLinearConcat takes Y_scale, Y_zero_point and then "
                               "(X, x_scale, x_zero_point) per input; got " +
                                   std::to_string(n) + " inputs");
        for (size_t i = 2; i < n; i += 3)
          op->operands_.push_back(
              {static_cast<int>(i), static_cast<int>(i + 1), static_cast<int>(i + 2)});
        op->y_scale_ = 0, op->y_zero_point_ = 1;
        break;
      case Kind::kGemm:
        KILN_RETURN_IF_ERROR(arity(6, 9));
        op->operands_ = {{0, 1, slot(2)}, {3, 4, slot(5)}};
        op->bias_ = slot(6);
        op->y_scale_ = slot(7), op->y_zero_point_ = slot(8);
        if (op->y_zero_point_ >= 0 && op->y_scale_ < 0)
          return ir::AttrError(node, "QGemm has y_zero_point without y_scale");
        break;
    }
    if (node.GetInt("channels_last", 0) != 0)
      return Unsupported("failed to load " + node.Describe() +
                         ": channels_last 1 (NHWC input) is not supported; kiln takes NCHW");
    // The float op, from this node's attributes (channels_last dropped; QGemm's beta is alpha).
    Node inner;
    inner.name = node.name;
    inner.op_type = op->form_.inner;
    inner.opset = op->form_.inner_opset;
    inner.attrs = node.attrs;
    inner.attrs.erase("channels_last");
    if (op->kind_ == Kind::kGemm) {
      inner.attrs.erase("beta");
      ir::Attribute beta;
      beta.type = ir::Attribute::Type::kFloat;
      beta.f = node.GetFloat("alpha", 1.f);
      inner.attrs["beta"] = beta;
    }
    const int inputs = op->kind_ == Kind::kGemm ? (op->bias_ >= 0 ? 3 : 2)
                                                : static_cast<int>(op->operands_.size());
    for (int i = 0; i < inputs; ++i) inner.inputs.push_back(i);
    inner.outputs = {0};
    const ir::OpDef* def = ir::OpRegistry::Global().Find("", inner.op_type, inner.opset);
    if (def == nullptr)
      return Internal(node.Describe() + ": kiln has no " + inner.op_type + " to compute it with");
    auto made = def->create(inner);
    if (!made.ok())
      return Status(made.status()).AddContext("in the float op of " + node.Describe());
    op->inner_ = std::move(*made);
    op->inner_node_ = std::move(inner);
    op->trans_b_ = node.GetInt("transB", 0) != 0;
    return std::unique_ptr<Op>(std::move(op));
  }

  Status Infer(InferContext& ctx) const override {
    std::vector<DataType> dtypes;
    std::vector<Shape> shapes;
    for (size_t k = 0; k < operands_.size(); ++k) {
      const Operand& o = operands_[k];
      const std::string x = "input " + std::to_string(o.data);
      if (!ctx.has_input(o.data) || !quant::Is8Bit(ctx.dtype(o.data)))
        return ctx.Error(x + " must be uint8 or int8");
      if (!ctx.has_input(o.scale) || ctx.dtype(o.scale) != DataType::kFloat)
        return ctx.Error("the scale of " + x + " (input " + std::to_string(o.scale) +
                         ") must be float32");
      if (o.zero_point >= 0 && ctx.has_input(o.zero_point) &&
          ctx.dtype(o.zero_point) != ctx.dtype(o.data))
        return ctx.Error("the zero point of " + x + " must have its type");
      const bool per_column = kind_ == Kind::kGemm && k == 1;
      if (!per_column) {
        if (NumElements(ctx.shape(o.scale)) != 1 ||
            (o.zero_point >= 0 && ctx.has_input(o.zero_point) &&
             NumElements(ctx.shape(o.zero_point)) != 1))
          return ctx.Error("the scale and zero point of " + x + " must have one element");
      } else {
        quant::QuantAxis qa;
        if (ctx.rank(o.data) != 2) return ctx.Error("B must be 2-D");
        const std::string err = quant::ResolveQuantAxis(
            ctx.shape(o.data), ctx.shape(o.scale),
            o.zero_point >= 0 && ctx.has_input(o.zero_point) ? &ctx.shape(o.zero_point) : nullptr,
            ColumnAxis(), &qa);
        if (!err.empty()) return ctx.Error("b_scale: " + err);
      }
      dtypes.push_back(DataType::kFloat);
      shapes.push_back(ctx.shape(o.data));
    }
    if (kind_ == Kind::kGemm && bias_ >= 0) {
      KILN_RETURN_IF_ERROR(ctx.ExpectDtype(bias_, {DataType::kInt32}));
      dtypes.push_back(DataType::kFloat);
      shapes.push_back(ctx.shape(bias_));
    }
    InferContext sub(inner_node_, dtypes, shapes, std::vector<const Tensor*>(dtypes.size()));
    KILN_RETURN_IF_ERROR(inner_->Infer(sub));
    const Shape& y = sub.out_shapes()[0];
    if (kind_ == Kind::kGemm && bias_ >= 0) {
      // C' is dequantized per column of B' where b_scale is: its last dim must be N's.
      const Shape& c = ctx.shape(bias_);
      if (!c.empty() && c.back() != y.back() && c.back() != 1)
        return ctx.Error("C must broadcast along Y's columns " + ShapeToString(y) + "; got " +
                         ShapeToString(c));
    }
    if (y_scale_ < 0) {  // QGemm with a float output
      ctx.SetOutput(0, DataType::kFloat, y);
      return OkStatus();
    }
    if (!ctx.has_input(y_scale_) || ctx.dtype(y_scale_) != DataType::kFloat ||
        NumElements(ctx.shape(y_scale_)) != 1)
      return ctx.Error("the output scale (input " + std::to_string(y_scale_) +
                       ") must be one float32 element");
    DataType yt = ctx.dtype(operands_[0].data);
    if (y_zero_point_ >= 0 && ctx.has_input(y_zero_point_)) {
      if (!quant::Is8Bit(ctx.dtype(y_zero_point_)) || NumElements(ctx.shape(y_zero_point_)) != 1)
        return ctx.Error("the output zero point must be one uint8 or int8 element");
      yt = ctx.dtype(y_zero_point_);
    }
    ctx.SetOutput(0, yt, y);
    return OkStatus();
  }

  Status Compute(const ComputeContext& ctx) const override {
    std::vector<Tensor> floats;
    for (size_t k = 0; k < operands_.size(); ++k) {
      const Operand& o = operands_[k];
      const Tensor& q = ctx.in(o.data);
      const Tensor* zp =
          o.zero_point >= 0 && ctx.has(o.zero_point) ? &ctx.in(o.zero_point) : nullptr;
      quant::QuantAxis qa;
      if (ctx.in(o.scale).numel() != 1)
        quant::ResolveQuantAxis(q.shape(), ctx.in(o.scale).shape(), nullptr, ColumnAxis(), &qa);
      floats.push_back(Dequantize(q, ctx.in(o.scale).data<float>(), zp, qa));
    }
    if (kind_ == Kind::kGemm && bias_ >= 0) {
      // C' = C * (a_scale * b_scale[n]), the scale product in float32 as QuantizeLinear's
      // callers compute it.
      const Tensor& c = ctx.in(bias_);
      const Tensor& bs = ctx.in(operands_[1].scale);
      const float as = ctx.in(operands_[0].scale).data<float>()[0];
      const int64_t cols = c.shape().empty() ? 1 : c.shape().back();
      std::vector<float> scale(static_cast<size_t>(cols));
      for (int64_t j = 0; j < cols; ++j)
        scale[j] = as * bs.data<float>()[bs.numel() == 1 ? 0 : (cols == 1 ? 0 : j)];
      quant::QuantAxis qa;
      if (cols > 1) qa.channels = cols, qa.inner = 1;
      floats.push_back(Dequantize(c, scale.data(), nullptr, qa));
    }
    std::vector<const Tensor*> ins;
    for (const Tensor& f : floats) ins.push_back(&f);
    Tensor& y = ctx.out(0);
    if (y.dtype() == DataType::kFloat) {
      ComputeContext inner{ins, {&y}};
      return inner_->Compute(inner);
    }
    Tensor result = Tensor::Empty(DataType::kFloat, y.shape());
    ComputeContext inner{ins, {&result}};
    KILN_RETURN_IF_ERROR(inner_->Compute(inner));
    const int32_t zy = y_zero_point_ >= 0 && ctx.has(y_zero_point_)
                           ? quant::ReadQuant(ctx.in(y_zero_point_), 0)
                           : 0;
    quant::QuantizeTensor(result.data<float>(), ctx.in(y_scale_).data<float>()[0], zy, &y);
    return OkStatus();
  }

 private:
  explicit MsQLinearOp(const Node& node) : Op(node) {}

  // QGemm's B' columns: axis 0 of B when transB, else axis 1.
  int64_t ColumnAxis() const { return trans_b_ ? 0 : 1; }

  Node inner_node_;  // the float op's node (its inputs and outputs numbered 0..n)
  bool trans_b_ = false;
  quant::MsQLinearForm form_{};
  Kind kind_ = Kind::kUnary;
  std::vector<Operand> operands_;
  int bias_ = -1, y_scale_ = -1, y_zero_point_ = -1;
  std::unique_ptr<Op> inner_;
};

StatusOr<std::unique_ptr<Op>> CreateMsQLinear(const Node& node) {
  return MsQLinearOp::Create(node);
}

}  // namespace

// One registration per entry of kMsQLinearForms.
KILN_REGISTER_OP_DOMAIN("com.microsoft", "QLinearAdd", 1, 1, &CreateMsQLinear);
KILN_REGISTER_OP_DOMAIN("com.microsoft", "QLinearMul", 1, 1, &CreateMsQLinear);
KILN_REGISTER_OP_DOMAIN("com.microsoft", "QLinearGlobalAveragePool", 1, 1, &CreateMsQLinear);
KILN_REGISTER_OP_DOMAIN("com.microsoft", "QLinearAveragePool", 1, 1, &CreateMsQLinear);
KILN_REGISTER_OP_DOMAIN("com.microsoft", "QLinearSigmoid", 1, 1, &CreateMsQLinear);
KILN_REGISTER_OP_DOMAIN("com.microsoft", "QLinearLeakyRelu", 1, 1, &CreateMsQLinear);
KILN_REGISTER_OP_DOMAIN("com.microsoft", "QLinearConcat", 1, 1, &CreateMsQLinear);
KILN_REGISTER_OP_DOMAIN("com.microsoft", "QGemm", 1, 1, &CreateMsQLinear);

}  // namespace kiln::ops
