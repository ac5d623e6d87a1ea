// The optional ops: Optional (15), OptionalHasElement (15, 18) and OptionalGetElement (15, 18).
// An optional is a Tensor handle (Tensor::Optional) holding one tensor or sequence, or none.
//
// Optional(input?): `type` (a TypeProto attribute: a tensor or sequence type) is required when
//   input is omitted, giving a none of that type; with an input, the optional holds it (and
//   `type`, when given, must be the input's type).
// OptionalHasElement(input): whether the optional holds a value (a bool scalar). From 18 the
//   input may also be a tensor or a sequence (true) or omitted (false); 15-17 take an optional.
// OptionalGetElement(input): the optional's value; a none is a run error. From 18 a tensor or
//   sequence input is returned as is; 15-17 take an optional.
// Tensor values are copied into and out of optionals (sequence_util.h); sequences are shared.
#include <memory>

#include "ops/common.h"
#include "ops/op_cases.h"
#include "ops/sequence/sequence_util.h"

namespace kiln::ops {
namespace {

using ir::ComputeContext;
using ir::InferContext;
using ir::Node;

// A tensor or sequence type an optional may hold.
bool Holdable(DataType t) { return seq::IsTensorType(t) || IsSequenceType(t); }

struct OptionalAttrs : ir::OpAttrs {
  DataType type = DataType::kUndefined;  // kUndefined: no `type` attribute
};

class OptionalOp final : public seq::ValueOp {
 public:
  static StatusOr<std::unique_ptr<ir::Op>> Create(const Node& node) {
    std::unique_ptr<OptionalOp> op(new OptionalOp(node));
    auto it = node.attrs.find("type");
    if (it != node.attrs.end()) {
      if (!Holdable(it->second.tp))
        return ir::AttrError(node, std::string("type must be a tensor or sequence type; got ") +
                                       DataTypeName(it->second.tp));
      op->a_.type = it->second.tp;
    }
    const bool has_input = !node.inputs.empty() && node.inputs[0] >= 0;
    if (!has_input && op->a_.type == DataType::kUndefined)
      return ir::AttrError(node, "an Optional without input needs the `type` attribute; got none");
    return std::unique_ptr<ir::Op>(std::move(op));
  }
  Status Infer(InferContext& ctx) const override {
    DataType t = a_.type;
    if (ctx.has_input(0)) {
      if (!Holdable(ctx.dtype(0)))
        return ctx.Error("input must be a tensor or a sequence; got " +
                         std::string(DataTypeName(ctx.dtype(0))));
      if (t != DataType::kUndefined && t != ctx.dtype(0))
        return ctx.Error("input must have the type attribute's type " +
                         std::string(DataTypeName(t)) + "; got " + DataTypeName(ctx.dtype(0)));
      t = ctx.dtype(0);
    }
    ctx.SetOutput(0, OptionalOf(t), {});
    return OkStatus();
  }
  Status Compute(const ComputeContext& ctx) const override {
    if (!ctx.has(0)) {
      if (a_.type == DataType::kUndefined)
        return RunError("an Optional without input needs the `type` attribute; got none");
      if (ctx.outputs[0]) *ctx.outputs[0] = Tensor::Optional(a_.type, nullptr);
      return OkStatus();
    }
    const Tensor& x = ctx.in(0);
    if (!Holdable(x.dtype()))
      return RunError("input must be a tensor or a sequence; got " + seq::Describe(x));
    if (a_.type != DataType::kUndefined && a_.type != x.dtype())
      return RunError("input must have the type attribute's type " +
                      std::string(DataTypeName(a_.type)) + "; got " + seq::Describe(x));
    const Tensor value = IsSequenceType(x.dtype()) ? x : x.Clone();
    if (ctx.outputs[0]) *ctx.outputs[0] = Tensor::Optional(x.dtype(), &value);
    return OkStatus();
  }
  const ir::OpAttrs* attributes() const override { return &a_; }

 private:
  using ValueOp::ValueOp;
  OptionalAttrs a_;
};

// The rule for OptionalHasElement's and OptionalGetElement's input kinds at this opset.
std::string InputRule(int opset) {
  return opset >= 18 ? "input must be an optional, a tensor or a sequence"
                     : "input must be an optional (a tensor or sequence from opset 18)";
}
bool InputKindOk(DataType t, int opset) {
  return IsOptionalType(t) || (opset >= 18 && Holdable(t));
}

class OptionalHasElementOp final : public seq::ValueOp {
 public:
  static StatusOr<std::unique_ptr<ir::Op>> Create(const Node& node) {
    if (node.opset < 18 && (node.inputs.empty() || node.inputs[0] < 0))
      return ir::AttrError(node, "OptionalHasElement before opset 18 needs its input; got none");
    return std::unique_ptr<ir::Op>(new OptionalHasElementOp(node));
  }
  Status Infer(InferContext& ctx) const override {
    if (ctx.has_input(0) && !InputKindOk(ctx.dtype(0), opset()))
      return ctx.Error(InputRule(opset()) + "; got " + DataTypeName(ctx.dtype(0)));
    ctx.SetOutput(0, DataType::kBool, {});
    return OkStatus();
  }
  Status Compute(const ComputeContext& ctx) const override {
    bool has = false;
    if (ctx.has(0)) {
      const Tensor& x = ctx.in(0);
      if (!InputKindOk(x.dtype(), opset()))
        return RunError(InputRule(opset()) + "; got " + seq::Describe(x));
      has = IsOptionalType(x.dtype()) ? x.has_element() : true;
    }
    if (ctx.outputs[0]) {
      Tensor out = Tensor::Empty(DataType::kBool, {});
      out.data<bool>()[0] = has;
      *ctx.outputs[0] = std::move(out);
    }
    return OkStatus();
  }

 private:
  using ValueOp::ValueOp;
};

class OptionalGetElementOp final : public seq::ValueOp {
 public:
  static StatusOr<std::unique_ptr<ir::Op>> Create(const Node& node) {
    if (node.inputs.empty() || node.inputs[0] < 0)
      return ir::AttrError(node, "OptionalGetElement needs its input; got none");
    return std::unique_ptr<ir::Op>(new OptionalGetElementOp(node));
  }
  Status Infer(InferContext& ctx) const override {
    if (!ctx.has_input(0)) return OkStatus();
    const DataType t = ctx.dtype(0);
    if (!InputKindOk(t, opset())) return ctx.Error(InputRule(opset()) + "; got " + DataTypeName(t));
    const DataType out = IsOptionalType(t) ? ContainedType(t) : t;
    ctx.SetOutput(0, out, {});
    if (IsSequenceType(out)) return OkStatus();
    return ctx.Error("the value's shape is known only by running it");
  }
  Status Compute(const ComputeContext& ctx) const override {
    if (!ctx.has(0)) return RunError("input is required; got none");
    const Tensor& x = ctx.in(0);
    if (!InputKindOk(x.dtype(), opset()))
      return RunError(InputRule(opset()) + "; got " + seq::Describe(x));
    const Tensor* value = &x;
    if (IsOptionalType(x.dtype())) {
      if (!x.has_element())
        return RunError("the optional input is none (" + std::string(DataTypeName(x.dtype())) +
                        " without a value); there is no element to get");
      value = &x.items()[0];
    }
    if (ctx.outputs[0]) *ctx.outputs[0] = IsSequenceType(value->dtype()) ? *value : value->Clone();
    return OkStatus();
  }

 private:
  using ValueOp::ValueOp;
};

KILN_REGISTER_OP("Optional", 15, ir::kMaxOpset, &OptionalOp::Create);
KILN_REGISTER_OP("OptionalHasElement", 15, ir::kMaxOpset, &OptionalHasElementOp::Create);
KILN_REGISTER_OP("OptionalGetElement", 15, ir::kMaxOpset, &OptionalGetElementOp::Create);

// ---- Cases ----

ir::Attribute TypeAttr(DataType t) {
  ir::Attribute a;
  a.tp = t;
  return a;
}

Tensor TwoItems() {
  return Tensor::Sequence(DataType::kFloat, {CaseTensor({2, 3}, 951), CaseTensor({1}, 952)});
}

std::vector<OpCase> OptionalCases() {
  std::vector<OpCase> cases;
  cases.push_back(OpCase("a tensor", 15).In(CaseTensor({2, 3}, 941)));
  cases.push_back(OpCase("a sequence", 15).In(TwoItems()));
  OpCase typed("a tensor, type given", 15);
  typed.In(CaseTensor({3}, 942)).attrs["type"] = TypeAttr(DataType::kFloat);
  cases.push_back(std::move(typed));
  OpCase none("none of float32", 15);
  none.attrs["type"] = TypeAttr(DataType::kFloat);
  cases.push_back(std::move(none));
  OpCase none_seq("none of sequence(int64)", 15);
  none_seq.Omitted().attrs["type"] = TypeAttr(SequenceOf(DataType::kInt64));
  cases.push_back(std::move(none_seq));
  return cases;
}
KILN_REGISTER_OP_CASES("", "Optional", &OptionalCases);

std::vector<OpCase> OptionalHasElementCases() {
  const Tensor t = CaseTensor({2}, 961);
  return {
      OpCase("optional holding a tensor", 15).In(Tensor::Optional(DataType::kFloat, &t)),
      OpCase("none optional", 15).In(Tensor::Optional(DataType::kFloat, nullptr)),
      OpCase("a tensor (18)", 18).In(t),
      OpCase("a sequence (18)", 18).In(TwoItems()),
      OpCase("omitted (18)", 18).Omitted(),
  };
}
KILN_REGISTER_OP_CASES("", "OptionalHasElement", &OptionalHasElementCases);

std::vector<OpCase> OptionalGetElementCases() {
  const Tensor t = CaseTensor({2, 2}, 971);
  const Tensor s = TwoItems();
  return {
      OpCase("optional tensor", 15).In(Tensor::Optional(DataType::kFloat, &t)),
      OpCase("optional sequence", 15).In(Tensor::Optional(s.dtype(), &s)),
      OpCase("a tensor (18)", 18).In(t),
      OpCase("a sequence (18)", 18).In(s),
  };
}
KILN_REGISTER_OP_CASES("", "OptionalGetElement", &OptionalGetElementCases);

}  // namespace
}  // namespace kiln::ops
