// DepthToSpace and SpaceToDepth on NCHW tensors with block size b, written as the ONNX spec does:
// a reshape to 6-D and a transpose (a strided gather, see tensor_util.h), so any fixed-size dtype
// works.
//   DepthToSpace DCR: [N,b,b,C/b^2,H,W] perm (0,3,4,1,5,2) -> [N,C/b^2,H*b,W*b]
//   DepthToSpace CRD: [N,C/b^2,b,b,H,W] perm (0,1,4,2,5,3) -> [N,C/b^2,H*b,W*b]  (opset 11+)
//   SpaceToDepth:     [N,C,H/b,b,W/b,b] perm (0,3,5,1,2,4) -> [N,C*b^2,H/b,W/b]
#include "ops/common.h"
#include "ops/tensor/tensor_util.h"

namespace kiln::ops {
namespace {

using ir::ComputeContext;
using ir::InferContext;
using ir::Node;
using ir::Op;

class SpaceDepthOp : public Op {
 public:
  template <bool kToSpace>
  static StatusOr<std::unique_ptr<Op>> Create(const Node& node) {
    const int64_t b = node.GetInt("blocksize", 0);
    if (!node.HasAttr("blocksize") || b < 1)
      return ir::AttrError(node, "blocksize is required and must be >= 1; got " +
                                     (node.HasAttr("blocksize") ? std::to_string(b) : "none"));
    const std::string mode = node.GetString("mode", "DCR");
    if (kToSpace && mode != "DCR" && mode != "CRD")
      return ir::AttrError(node, "mode must be DCR or CRD; got '" + mode + "'");
    return std::unique_ptr<Op>(new SpaceDepthOp(node, kToSpace, b, mode == "CRD"));
  }
  Status Infer(InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ExpectFixedSize(ctx, 0));
    if (ctx.rank(0) != 4)
      return ctx.Error("input must be 4-D NCHW; got rank " + std::to_string(ctx.rank(0)));
    const Shape& s = ctx.shape(0);
    if (to_space_) {
      if (s[1] % (b_ * b_) != 0)
        return ctx.Error("channels must divide by blocksize^2 = " + std::to_string(b_ * b_) +
                         "; got " + std::to_string(s[1]));
      ctx.SetOutput(0, ctx.dtype(0), {s[0], s[1] / (b_ * b_), s[2] * b_, s[3] * b_});
    } else {
      if (s[2] % b_ != 0 || s[3] % b_ != 0)
        return ctx.Error("height and width must divide by blocksize " + std::to_string(b_) +
                         "; got " + std::to_string(s[2]) + "x" + std::to_string(s[3]));
      ctx.SetOutput(0, ctx.dtype(0), {s[0], s[1] * b_ * b_, s[2] / b_, s[3] / b_});
    }
    return OkStatus();
  }
  Status Compute(const ComputeContext& ctx) const override {
    const Tensor& in = ctx.in(0);
    const Shape& s = in.shape();
    const int64_t n = s[0], c = s[1], h = s[2], w = s[3], b = b_;
    Shape six;
    std::vector<int64_t> perm;
    if (to_space_ && !crd_) {
      six = {n, b, b, c / (b * b), h, w};
      perm = {0, 3, 4, 1, 5, 2};
    } else if (to_space_) {
      six = {n, c / (b * b), b, b, h, w};
      perm = {0, 1, 4, 2, 5, 3};
    } else {
      six = {n, c, h / b, b, w / b, b};
      perm = {0, 3, 5, 1, 2, 4};
    }
    TransposeBytes(ctx.out(0).raw(), in.raw(), six, perm, DataTypeSize(in.dtype()));
    return OkStatus();
  }

 private:
  SpaceDepthOp(const Node& node, bool to_space, int64_t b, bool crd)
      : Op(node), to_space_(to_space), b_(b), crd_(crd) {}
  bool to_space_;
  int64_t b_;
  bool crd_;
};
KILN_REGISTER_OP("DepthToSpace", 1, ir::kMaxOpset, &SpaceDepthOp::Create<true>);
KILN_REGISTER_OP("SpaceToDepth", 1, ir::kMaxOpset, &SpaceDepthOp::Create<false>);

}  // namespace
}  // namespace kiln::ops
