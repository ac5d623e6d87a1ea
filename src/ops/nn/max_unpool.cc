// MaxUnpool (opsets 9, 11, 22): X [N, C, D1..Dn] (float32, float16 as float32, float64), I int64
// of X's shape (MaxPool's Indices), optional output_shape (int64 [rank], known before the run).
// The unpooled shape per spatial dim is (in - 1) * stride + kernel - pad_begin - pad_end; Y of
// that shape is zero except Y.flat[I[i]] = X.flat[i] (indices over the whole tensor, as MaxPool
// writes them; one out of range is a run-time error; later writes win). With output_shape, as
// ONNX's reference and node tests: that unpooled tensor is placed at the start of a zero
// tensor of output_shape, which must be at least as large in every dim.
#include <cstring>
#include <memory>

#include "ops/common.h"
#include "ops/nn/spatial.h"
#include "ops/op_cases.h"
#include "ops/tensor/tensor_util.h"
#include "ops/typed_dispatch.h"

namespace kiln::ops {
namespace {

struct MaxUnpoolAttrs : ir::OpAttrs {
  nn::WindowAttrs window;  // kernel_shape, strides, pads (no auto_pad, no dilations)
};

class MaxUnpoolOp final : public ir::Op {
 public:
  static StatusOr<std::unique_ptr<ir::Op>> Create(const ir::Node& node) {
    std::unique_ptr<MaxUnpoolOp> op(new MaxUnpoolOp(node));
    KILN_RETURN_IF_ERROR(nn::ParseWindowAttrs(node, /*allow_dilations=*/false, &op->a_.window));
    if (op->a_.window.kernel_shape.empty())
      return ir::AttrError(node, "kernel_shape is required; got none");
    return std::unique_ptr<ir::Op>(std::move(op));
  }

  std::vector<int> ShapeInputs() const override { return {2}; }

  Status Infer(ir::InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(0, {DataType::kFloat, DataType::kDouble}));
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(1, {DataType::kInt64}));
    const Shape& x = ctx.shape(0);
    if (x.size() < 3) return ctx.Error("X must be [N, C, spatial...]; got " + ShapeToString(x));
    if (ctx.shape(1) != x)
      return ctx.Error("I must have X's shape " + ShapeToString(x) + "; got " +
                       ShapeToString(ctx.shape(1)));
    nn::Window w;
    const std::string err = nn::ResolveWindowAttrs(a_.window, x.size() - 2, {}, &w);
    if (!err.empty()) return ctx.Error(err);
    Shape y = Unpooled(x, w);
    for (int64_t d : y)
      if (d < 0) return ctx.Error("pads exceed the unpooled size; got " + ShapeToString(y));
    if (ctx.has_input(2)) {
      KILN_ASSIGN_OR_RETURN(std::vector<int64_t> out, KnownInts(ctx, 2, "output_shape"));
      if (out.size() != x.size())
        return ctx.Error("output_shape must have X's rank " + std::to_string(x.size()) + "; got " +
                         IntsToString(out));
      for (size_t d = 0; d < out.size(); ++d)
        if (out[d] < y[d])
          return ctx.Error("output_shape must be at least the unpooled shape " + ShapeToString(y) +
                           "; got " + IntsToString(out));
      y = out;
    }
    ctx.SetOutput(0, ctx.dtype(0), y);
    return OkStatus();
  }

  Status Compute(const ir::ComputeContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    const int64_t* idx = ctx.in(1).data<int64_t>();
    nn::Window w;
    nn::ResolveWindowAttrs(a_.window, x.rank() - 2, {}, &w);
    const Shape u = Unpooled(x.shape(), w);
    const Shape& ys = ctx.out(0).shape();
    const int64_t limit = NumElements(u);
    for (int64_t i = 0; i < x.numel(); ++i)
      if (idx[i] < 0 || idx[i] >= limit)
        return RunError("I must index the unpooled tensor " + ShapeToString(u) +
                        " (values in [0, " + std::to_string(limit) + ")); got " +
                        std::to_string(idx[i]) + " at element " + std::to_string(i));
    // Unpooled flat index -> output flat index (the same unless output_shape is larger).
    const std::vector<int64_t> ust = Strides(u), yst = Strides(ys);
    auto place = [&](int64_t f) {
      int64_t o = 0;
      for (size_t d = 0; d < u.size(); ++d) o += (f / ust[d] % u[d]) * yst[d];
      return o;
    };
    std::memset(ctx.out(0).raw(), 0, ctx.out(0).bytes());
    return DispatchFloating(x.dtype(), describe(), [&](auto tag) {
      using T = decltype(tag);
      for (int64_t i = 0; i < x.numel(); ++i) ctx.out(0).data<T>()[place(idx[i])] = x.data<T>()[i];
      return OkStatus();
    });
  }

  const ir::OpAttrs* attributes() const override { return &a_; }

 private:
  explicit MaxUnpoolOp(const ir::Node& node) : Op(node) {}

  static Shape Unpooled(const Shape& x, const nn::Window& w) {
    Shape y = {x[0], x[1]};
    for (size_t i = 0; i + 2 < x.size(); ++i)
      y.push_back((x[i + 2] - 1) * w.strides[i] + w.kernel[i] - w.pad_begin[i] - w.pad_end[i]);
    return y;
  }

  MaxUnpoolAttrs a_;
};
KILN_REGISTER_OP("MaxUnpool", 9, ir::kMaxOpset, &MaxUnpoolOp::Create);

// Cases: 2-D with MaxPool-like indices, pads, a larger output_shape, 1-D.
std::vector<OpCase> MaxUnpoolCases() {
  std::vector<OpCase> cases;
  cases.push_back(OpCase("[1,2,2,2] kernel 2 stride 2", 11)
                      .In(CaseTensor({1, 2, 2, 2}, 1))
                      .In(Tensor::FromVector<int64_t>({0, 3, 9, 14, 16, 22, 25, 31}, {1, 2, 2, 2}))
                      .Ints("kernel_shape", {2, 2})
                      .Ints("strides", {2, 2}));
  cases.push_back(OpCase("[1,1,2,3] kernel 3 stride 2 pads 1, output_shape [1,1,5,7]", 11)
                      .In(CaseTensor({1, 1, 2, 3}, 2))
                      .In(Tensor::FromVector<int64_t>({0, 7, 4, 10, 13, 14}, {1, 1, 2, 3}))
                      .Const(CaseInt64s({1, 1, 5, 7}))
                      .Ints("kernel_shape", {3, 3})
                      .Ints("strides", {2, 2})
                      .Ints("pads", {1, 1, 1, 1}));
  cases.push_back(OpCase("[2,1,3] kernel 2", 11)
                      .In(CaseTensor({2, 1, 3}, 3))
                      .In(Tensor::FromVector<int64_t>({1, 2, 3, 4, 5, 7}, {2, 1, 3}))
                      .Ints("kernel_shape", {2}));
  return cases;
}
KILN_REGISTER_OP_CASES("", "MaxUnpool", &MaxUnpoolCases);

}  // namespace
}  // namespace kiln::ops
