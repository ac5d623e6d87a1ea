// Expand (numpy broadcast of the input to `shape`, bidirectionally) and Tile (repeat the input
// repeats[d] times along each dim d). Both kernels are one strided gather (tensor_util.h):
// Expand reads with stride 0 along broadcast dims; Tile views the output as
// [r0, d0, r1, d1, ...] and reads it with strides (0, s0, 0, s1, ...). Any fixed-size dtype works.
// Limits: Tile-1..5 (tiles/axis inputs) is not implemented; Tile is registered from opset 6.
#include "ops/common.h"
#include "ops/tensor/tensor_util.h"

namespace kiln::ops {
namespace {

using ir::ComputeContext;
using ir::InferContext;
using ir::Node;
using ir::Op;

class ExpandOp : public Op {
 public:
  explicit ExpandOp(const Node& node) : Op(node) {}
  std::vector<int> ShapeInputs() const override { return {1}; }
  Status Infer(InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ExpectFixedSize(ctx, 0));
    std::vector<int64_t> shape;
    KILN_ASSIGN_OR_RETURN(shape, KnownInts(ctx, 1, "Expand's shape"));
    if (ctx.rank(1) != 1)
      return ctx.Error("shape must be 1-D; got rank " + std::to_string(ctx.rank(1)));
    for (int64_t d : shape)
      if (d < 0) return ctx.Error("shape dims must be >= 0; got " + IntsToString(shape));
    auto out = BroadcastShapes({ctx.shape(0), shape});
    if (!out.ok()) return ctx.Error("input must broadcast to shape: " + out.status().message());
    ctx.SetOutput(0, ctx.dtype(0), *out);
    return OkStatus();
  }
  Status Compute(const ComputeContext& ctx) const override {
    const Tensor& in = ctx.in(0);
    Tensor& out = ctx.out(0);
    if (out.rank() < in.rank())
      return RunError("output rank " + std::to_string(out.rank()) + " is below the input's " +
                      std::to_string(in.rank()));
    StridedGather(out.raw(), in.raw(), out.shape(), BroadcastStrides(in.shape(), out.shape()), 0,
                  DataTypeSize(in.dtype()));
    return OkStatus();
  }
};
KILN_REGISTER_OP("Expand", 8, ir::kMaxOpset, &ir::MakeOp<ExpandOp>);

class TileOp : public Op {
 public:
  explicit TileOp(const Node& node) : Op(node) {}
  std::vector<int> ShapeInputs() const override { return {1}; }
  Status Infer(InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ExpectFixedSize(ctx, 0));
    std::vector<int64_t> reps;
    KILN_ASSIGN_OR_RETURN(reps, KnownInts(ctx, 1, "Tile's repeats"));
    if (static_cast<int64_t>(reps.size()) != ctx.rank(0))
      return ctx.Error("repeats must have one entry per input dim (" + std::to_string(ctx.rank(0)) +
                       "); got " + IntsToString(reps));
    Shape out = ctx.shape(0);
    for (size_t d = 0; d < reps.size(); ++d) {
      if (reps[d] < 0) return ctx.Error("repeats must be >= 0; got " + IntsToString(reps));
      out[d] *= reps[d];
    }
    ctx.SetOutput(0, ctx.dtype(0), out);
    return OkStatus();
  }
  Status Compute(const ComputeContext& ctx) const override {
    const Tensor& in = ctx.in(0);
    const Tensor& out = ctx.out(0);
    const Shape& s = in.shape();
    if (out.rank() != in.rank())
      return RunError("output rank " + std::to_string(out.rank()) + " differs from the input's " +
                      std::to_string(in.rank()));
    const auto strides = Strides(s);
    Shape view;
    std::vector<int64_t> st;
    for (size_t d = 0; d < s.size(); ++d) {
      if (s[d] == 0) return OkStatus();  // empty output
      view.push_back(out.shape()[d] / s[d]);
      view.push_back(s[d]);
      st.push_back(0);
      st.push_back(strides[d]);
    }
    StridedGather(ctx.out(0).raw(), in.raw(), view, st, 0, DataTypeSize(in.dtype()));
    return OkStatus();
  }
};
KILN_REGISTER_OP("Tile", 6, ir::kMaxOpset, &ir::MakeOp<TileOp>);

}  // namespace
}  // namespace kiln::ops
