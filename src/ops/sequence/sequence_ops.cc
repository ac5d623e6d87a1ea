// The sequence ops of opset 11: SequenceEmpty, SequenceConstruct, SequenceInsert, SequenceAt,
// SequenceErase and SequenceLength. A sequence is a Tensor handle (Tensor::Sequence) to
// immutable items of one tensor type; each op builds a new sequence, sharing the input's items.
//
// SequenceEmpty: `dtype` (a TensorProto data type, default float) names the element type.
// SequenceConstruct: one or more tensors of one dtype, in order.
// SequenceInsert(S, T, position?): T (S's element type) inserted before `position` (an int32 or
// int64 scalar in [-n, n], negative counting from the back: -1 inserts before the last item);
// appended when position is absent.
// SequenceAt(S, position): the item at position in [-n, n - 1].
// SequenceErase(S, position?): S without the item at position in [-n, n - 1] (default -1, the
// last); erasing from an empty sequence is an error.
// SequenceLength(S): the number of items, an int64 scalar.
// Each assigns its outputs (ShapesFromRun); Infer checks the input kinds and sets the dtypes.
#include <memory>

#include "ops/common.h"
#include "ops/op_cases.h"
#include "ops/sequence/sequence_util.h"

namespace kiln::ops {
namespace {

using ir::ComputeContext;
using ir::InferContext;
using ir::Node;

struct SequenceEmptyAttrs : ir::OpAttrs {
  DataType dtype = DataType::kFloat;
};

class SequenceEmptyOp final : public seq::ValueOp {
 public:
  static StatusOr<std::unique_ptr<ir::Op>> Create(const Node& node) {
    std::unique_ptr<SequenceEmptyOp> op(new SequenceEmptyOp(node));
    const int64_t v = node.GetInt("dtype", static_cast<int64_t>(DataType::kFloat));
    const DataType dt = static_cast<DataType>(v);
    if (v <= 0 || v >= kSequenceTypeBit || !IsIoDataType(dt))
      return ir::AttrError(node, "dtype must be a tensor data type; got " + std::to_string(v));
    op->a_.dtype = dt;
    return std::unique_ptr<ir::Op>(std::move(op));
  }
  Status Infer(InferContext& ctx) const override {
    ctx.SetOutput(0, SequenceOf(a_.dtype), {});
    return OkStatus();
  }
  Status Compute(const ComputeContext& ctx) const override {
    if (ctx.outputs[0]) *ctx.outputs[0] = Tensor::Sequence(a_.dtype, {});
    return OkStatus();
  }
  const ir::OpAttrs* attributes() const override { return &a_; }

 private:
  using ValueOp::ValueOp;
  SequenceEmptyAttrs a_;
};

class SequenceConstructOp final : public seq::ValueOp {
 public:
  static StatusOr<std::unique_ptr<ir::Op>> Create(const Node& node) {
    if (node.inputs.empty())
      return ir::AttrError(node, "SequenceConstruct takes at least one input; got none");
    return std::unique_ptr<ir::Op>(new SequenceConstructOp(node));
  }
  Status Infer(InferContext& ctx) const override {
    DataType dt = DataType::kUndefined;
    for (size_t i = 0; i < ctx.num_inputs(); ++i) {
      if (!ctx.has_input(i)) return ctx.Error("input " + std::to_string(i) + " is missing");
      if (!seq::IsTensorType(ctx.dtype(i)))
        return ctx.Error("inputs must be tensors; input " + std::to_string(i) + " is " +
                         DataTypeName(ctx.dtype(i)));
      if (dt != DataType::kUndefined && ctx.dtype(i) != dt)
        return ctx.Error("inputs must have one dtype; input 0 is " + std::string(DataTypeName(dt)) +
                         ", input " + std::to_string(i) + " " + DataTypeName(ctx.dtype(i)));
      dt = ctx.dtype(i);
    }
    ctx.SetOutput(0, SequenceOf(dt), {});
    return OkStatus();
  }
  Status Compute(const ComputeContext& ctx) const override {
    std::vector<Tensor> items;
    for (size_t i = 0; i < ctx.inputs.size(); ++i) {
      if (!ctx.has(i)) return RunError("input " + std::to_string(i) + " is missing");
      const Tensor& t = ctx.in(i);
      if (!seq::IsTensorType(t.dtype()))
        return RunError("inputs must be tensors; input " + std::to_string(i) + " is " +
                        seq::Describe(t));
      if (i > 0 && t.dtype() != items[0].dtype())
        return RunError("inputs must have one dtype; input 0 is " +
                        std::string(DataTypeName(items[0].dtype())) + ", input " +
                        std::to_string(i) + " " + DataTypeName(t.dtype()));
      items.push_back(t.Clone());
    }
    const DataType dt = items[0].dtype();
    if (ctx.outputs[0]) *ctx.outputs[0] = Tensor::Sequence(dt, std::move(items));
    return OkStatus();
  }

 private:
  using ValueOp::ValueOp;
};

// Position p of a sequence of n items checked against [lo, n + hi_offset]; negative p counts
// from the back. The normalized position, or a RunError naming the range.
StatusOr<int64_t> NormalizePosition(const ir::Op& op, int64_t p, int64_t n, int64_t hi) {
  if (p < -n || p > hi)
    return op.RunError("position must be in [" + std::to_string(-n) + ", " + std::to_string(hi) +
                       "] for a sequence of " + std::to_string(n) + " items; got " +
                       std::to_string(p));
  return p < 0 ? p + n : p;
}

class SequenceInsertOp final : public seq::ValueOp {
 public:
  static StatusOr<std::unique_ptr<ir::Op>> Create(const Node& node) {
    if (node.inputs.size() < 2 || node.inputs[0] < 0 || node.inputs[1] < 0)
      return ir::AttrError(node, "SequenceInsert takes input_sequence and tensor");
    return std::unique_ptr<ir::Op>(new SequenceInsertOp(node));
  }
  Status Infer(InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(seq::ExpectSequenceInput(ctx, 0, "input_sequence"));
    KILN_RETURN_IF_ERROR(seq::ExpectIntInput(ctx, 2, "position"));
    if (ctx.has_input(0) && ctx.has_input(1) && ContainedType(ctx.dtype(0)) != ctx.dtype(1))
      return ctx.Error("tensor must have the sequence's element type " +
                       std::string(DataTypeName(ContainedType(ctx.dtype(0)))) + "; got " +
                       DataTypeName(ctx.dtype(1)));
    ctx.SetOutput(0, ctx.dtype(0), {});
    return OkStatus();
  }
  Status Compute(const ComputeContext& ctx) const override {
    KILN_ASSIGN_OR_RETURN(const Tensor* s, seq::SequenceInput(*this, ctx, 0, "input_sequence"));
    if (!ctx.has(1)) return RunError("tensor is required; got none");
    const Tensor& t = ctx.in(1);
    const DataType elem = ContainedType(s->dtype());
    if (t.dtype() != elem)
      return RunError("tensor must have the sequence's element type " +
                      std::string(DataTypeName(elem)) + "; got " + seq::Describe(t));
    std::vector<Tensor> items = s->items();
    const int64_t n = static_cast<int64_t>(items.size());
    int64_t pos = n;
    if (ctx.has(2)) {
      KILN_ASSIGN_OR_RETURN(int64_t p, seq::ReadPosition(*this, ctx.in(2), "position"));
      KILN_ASSIGN_OR_RETURN(pos, NormalizePosition(*this, p, n, n));
    }
    items.insert(items.begin() + pos, t.Clone());
    if (ctx.outputs[0]) *ctx.outputs[0] = Tensor::Sequence(elem, std::move(items));
    return OkStatus();
  }

 private:
  using ValueOp::ValueOp;
};

class SequenceAtOp final : public seq::ValueOp {
 public:
  static StatusOr<std::unique_ptr<ir::Op>> Create(const Node& node) {
    if (node.inputs.size() != 2 || node.inputs[0] < 0 || node.inputs[1] < 0)
      return ir::AttrError(node, "SequenceAt takes input_sequence and position");
    return std::unique_ptr<ir::Op>(new SequenceAtOp(node));
  }
  Status Infer(InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(seq::ExpectSequenceInput(ctx, 0, "input_sequence"));
    KILN_RETURN_IF_ERROR(seq::ExpectIntInput(ctx, 1, "position"));
    ctx.SetOutput(0, ContainedType(ctx.dtype(0)), {});
    return ctx.Error("the item's shape is known only by running it");
  }
  Status Compute(const ComputeContext& ctx) const override {
    KILN_ASSIGN_OR_RETURN(const Tensor* s, seq::SequenceInput(*this, ctx, 0, "input_sequence"));
    if (!ctx.has(1)) return RunError("position is required; got none");
    KILN_ASSIGN_OR_RETURN(int64_t p, seq::ReadPosition(*this, ctx.in(1), "position"));
    const int64_t n = static_cast<int64_t>(s->items().size());
    KILN_ASSIGN_OR_RETURN(int64_t pos, NormalizePosition(*this, p, n, n - 1));
    if (ctx.outputs[0]) *ctx.outputs[0] = s->items()[pos].Clone();
    return OkStatus();
  }

 private:
  using ValueOp::ValueOp;
};

class SequenceEraseOp final : public seq::ValueOp {
 public:
  static StatusOr<std::unique_ptr<ir::Op>> Create(const Node& node) {
    if (node.inputs.empty() || node.inputs[0] < 0)
      return ir::AttrError(node, "SequenceErase takes input_sequence");
    return std::unique_ptr<ir::Op>(new SequenceEraseOp(node));
  }
  Status Infer(InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(seq::ExpectSequenceInput(ctx, 0, "input_sequence"));
    KILN_RETURN_IF_ERROR(seq::ExpectIntInput(ctx, 1, "position"));
    ctx.SetOutput(0, ctx.dtype(0), {});
    return OkStatus();
  }
  Status Compute(const ComputeContext& ctx) const override {
    KILN_ASSIGN_OR_RETURN(const Tensor* s, seq::SequenceInput(*this, ctx, 0, "input_sequence"));
    std::vector<Tensor> items = s->items();
    const int64_t n = static_cast<int64_t>(items.size());
    if (n == 0) return RunError("cannot erase from an empty sequence");
    int64_t p = -1;
    if (ctx.has(1)) {
      KILN_ASSIGN_OR_RETURN(p, seq::ReadPosition(*this, ctx.in(1), "position"));
    }
    KILN_ASSIGN_OR_RETURN(int64_t pos, NormalizePosition(*this, p, n, n - 1));
    items.erase(items.begin() + pos);
    if (ctx.outputs[0])
      *ctx.outputs[0] = Tensor::Sequence(ContainedType(s->dtype()), std::move(items));
    return OkStatus();
  }

 private:
  using ValueOp::ValueOp;
};

class SequenceLengthOp final : public seq::ValueOp {
 public:
  static StatusOr<std::unique_ptr<ir::Op>> Create(const Node& node) {
    if (node.inputs.empty() || node.inputs[0] < 0)
      return ir::AttrError(node, "SequenceLength takes input_sequence");
    return std::unique_ptr<ir::Op>(new SequenceLengthOp(node));
  }
  Status Infer(InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(seq::ExpectSequenceInput(ctx, 0, "input_sequence"));
    ctx.SetOutput(0, DataType::kInt64, {});
    return OkStatus();
  }
  Status Compute(const ComputeContext& ctx) const override {
    KILN_ASSIGN_OR_RETURN(const Tensor* s, seq::SequenceInput(*this, ctx, 0, "input_sequence"));
    if (ctx.outputs[0])
      *ctx.outputs[0] =
          Tensor::FromVector<int64_t>({static_cast<int64_t>(s->items().size())}, Shape{});
    return OkStatus();
  }

 private:
  using ValueOp::ValueOp;
};

KILN_REGISTER_OP("SequenceEmpty", 11, ir::kMaxOpset, &SequenceEmptyOp::Create);
KILN_REGISTER_OP("SequenceConstruct", 11, ir::kMaxOpset, &SequenceConstructOp::Create);
KILN_REGISTER_OP("SequenceInsert", 11, ir::kMaxOpset, &SequenceInsertOp::Create);
KILN_REGISTER_OP("SequenceAt", 11, ir::kMaxOpset, &SequenceAtOp::Create);
KILN_REGISTER_OP("SequenceErase", 11, ir::kMaxOpset, &SequenceEraseOp::Create);
KILN_REGISTER_OP("SequenceLength", 11, ir::kMaxOpset, &SequenceLengthOp::Create);

// ---- Cases ----

// Three float items of different shapes: [2,3], [1], [3,1].
Tensor ThreeItems() {
  return Tensor::Sequence(DataType::kFloat,
                          {CaseTensor({2, 3}, 801), CaseTensor({1}, 802), CaseTensor({3, 1}, 803)});
}

Tensor StringsOf(const std::vector<std::string>& v) {
  Tensor t = Tensor::Strings({static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.data<std::string>()[i] = v[i];
  return t;
}

std::vector<OpCase> SequenceEmptyCases() {
  return {OpCase("default float", 11), OpCase("int64", 11).Int("dtype", 7),
          OpCase("string", 11).Int("dtype", 8)};
}
KILN_REGISTER_OP_CASES("", "SequenceEmpty", &SequenceEmptyCases);

std::vector<OpCase> SequenceConstructCases() {
  return {OpCase("one float item", 11).In(CaseTensor({2, 3}, 811)),
          OpCase("three float items of different shapes", 11)
              .In(CaseTensor({2, 3}, 812))
              .In(CaseTensor({1}, 813))
              .In(CaseTensor({}, 814)),
          OpCase("two int64 items", 11).In(CaseInt64s({1, 2, 3})).In(CaseInt64s({4})),
          OpCase("two string items", 11).In(StringsOf({"a", "bc"})).In(StringsOf({"d"}))};
}
KILN_REGISTER_OP_CASES("", "SequenceConstruct", &SequenceConstructCases);

std::vector<OpCase> SequenceInsertCases() {
  std::vector<OpCase> cases;
  cases.push_back(OpCase("append, no position", 11).In(ThreeItems()).In(CaseTensor({4}, 821)));
  for (int64_t p : {0, 1, 3, -1, -3}) {
    cases.push_back(OpCase("position " + std::to_string(p), 11)
                        .In(ThreeItems())
                        .In(CaseTensor({2, 2}, 822))
                        .In(Tensor::FromVector<int64_t>({p}, Shape{})));
  }
  cases.push_back(OpCase("int32 position 0 into an empty sequence", 11)
                      .In(Tensor::Sequence(DataType::kFloat, {}))
                      .In(CaseTensor({3}, 823))
                      .In(Tensor::FromVector<int32_t>({0}, Shape{})));
  cases.push_back(OpCase("string item", 11)
                      .In(Tensor::Sequence(DataType::kString, {StringsOf({"x"})}))
                      .In(StringsOf({"y", "z"})));
  return cases;
}
KILN_REGISTER_OP_CASES("", "SequenceInsert", &SequenceInsertCases);

std::vector<OpCase> SequenceAtCases() {
  std::vector<OpCase> cases;
  for (int64_t p : {0, 2, -1, -3})
    cases.push_back(OpCase("position " + std::to_string(p), 11)
                        .In(ThreeItems())
                        .In(Tensor::FromVector<int64_t>({p}, Shape{})));
  cases.push_back(OpCase("int32 position 1", 11)
                      .In(ThreeItems())
                      .In(Tensor::FromVector<int32_t>({1}, Shape{})));
  return cases;
}
KILN_REGISTER_OP_CASES("", "SequenceAt", &SequenceAtCases);

std::vector<OpCase> SequenceEraseCases() {
  std::vector<OpCase> cases;
  cases.push_back(OpCase("default: the last", 11).In(ThreeItems()));
  for (int64_t p : {0, 1, -3})
    cases.push_back(OpCase("position " + std::to_string(p), 11)
                        .In(ThreeItems())
                        .In(Tensor::FromVector<int64_t>({p}, Shape{})));
  return cases;
}
KILN_REGISTER_OP_CASES("", "SequenceErase", &SequenceEraseCases);

std::vector<OpCase> SequenceLengthCases() {
  return {OpCase("three items", 11).In(ThreeItems()),
          OpCase("empty", 11).In(Tensor::Sequence(DataType::kInt64, {}))};
}
KILN_REGISTER_OP_CASES("", "SequenceLength", &SequenceLengthCases);

}  // namespace
}  // namespace kiln::ops
