// StringConcat (opset 20): Y = X + Y element by element (byte concatenation of the UTF-8
// strings), with ONNX multidirectional (numpy) broadcasting; both inputs string tensors. The
// output is made by the run (ShapesFromRun: string outputs live outside the arena); Infer gives
// its dtype and broadcast shape.
#include <memory>
#include <string>

#include "ops/common.h"
#include "ops/op_cases.h"
#include "ops/text/text_common.h"

namespace kiln::ops {
namespace {

class StringConcatOp final : public ir::Op {
 public:
  explicit StringConcatOp(const ir::Node& node) : Op(node) {}

  bool ShapesFromRun() const override { return true; }
  bool TakesNonPlainValues() const override { return true; }
  Status Infer(ir::InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(0, {DataType::kString}));
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(1, {DataType::kString}));
    auto out = BroadcastShapes({ctx.shape(0), ctx.shape(1)});
    if (!out.ok()) return ctx.Error(out.status().message());
    ctx.SetOutput(0, DataType::kString, *out);
    return OkStatus();
  }

  Status Compute(const ir::ComputeContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ExpectStringInput(*this, ctx, 0, "X"));
    KILN_RETURN_IF_ERROR(ExpectStringInput(*this, ctx, 1, "Y"));
    const Tensor& a = ctx.in(0);
    const Tensor& b = ctx.in(1);
    auto shape = BroadcastShapes({a.shape(), b.shape()});
    if (!shape.ok()) return RunError(shape.status().message());
    Tensor y = Tensor::Strings(*shape);
    const std::string* pa = a.data<std::string>();
    const std::string* pb = b.data<std::string>();
    std::string* py = y.data<std::string>();
    ForEachBroadcast2(*shape, a.shape(), b.shape(),
                      [&](int64_t i, int64_t ia, int64_t ib) { py[i] = pa[ia] + pb[ib]; });
    if (!ctx.outputs.empty() && ctx.outputs[0] != nullptr) *ctx.outputs[0] = y;
    return OkStatus();
  }
};
KILN_REGISTER_OP("StringConcat", 20, ir::kMaxOpset, &ir::MakeOp<StringConcatOp>);

// Cases: equal shapes, a scalar, both operands broadcast, UTF-8 and empty strings, an empty dim.
std::vector<OpCase> StringConcatCases() {
  std::vector<OpCase> cases;
  cases.push_back(OpCase("[3] + [3]", 20)
                      .In(StringTensor({"abc", "", "的"}, {3}))
                      .In(StringTensor({".com", "x", "中"}, {3})));
  cases.push_back(OpCase("[2,3] + scalar", 20)
                      .In(StringTensor({"a", "b", "c", "d", "e", "f"}, {2, 3}))
                      .In(StringTensor({"s"}, {})));
  cases.push_back(OpCase("[3,1] + [1,2]", 20)
                      .In(StringTensor({"x", "y", "z"}, {3, 1}))
                      .In(StringTensor({"1", "22"}, {1, 2})));
  cases.push_back(
      OpCase("[0,2] + [2]", 20).In(StringTensor({}, {0, 2})).In(StringTensor({"p", "q"}, {2})));
  return cases;
}
KILN_REGISTER_OP_CASES("", "StringConcat", &StringConcatCases);

}  // namespace
}  // namespace kiln::ops
