// LRN (opsets 1, 13): local response normalization across channels, the reference kernel.
//
// Layout: X [N, C, D1..Dn] row-major, float32. For each element,
//   square_sum = sum of x[n, j, ...]^2 for j in [c - floor((size-1)/2), c + ceil((size-1)/2)]
//                clipped to [0, C), in double,
//   y = x / (bias + alpha / size * square_sum)^beta.
// Cost O(N * C * size * spatial); a running window sum would be faster but drifts.
#include <cmath>
#include <memory>

#include "ops/common.h"

namespace kiln::ops {
namespace {

using ir::ComputeContext;
using ir::InferContext;
using ir::Node;
using ir::Op;

class LrnOp : public Op {
 public:
  static StatusOr<std::unique_ptr<Op>> Create(const Node& node) {
    std::unique_ptr<LrnOp> op(new LrnOp(node));
    if (!node.HasAttr("size")) return ir::AttrError(node, "attribute size is required; got none");
    op->size_ = node.GetInt("size", 1);
    if (op->size_ < 1)
      return ir::AttrError(node, "size must be >= 1; got " + std::to_string(op->size_));
    op->alpha_ = node.GetFloat("alpha", 1e-4f);
    op->beta_ = node.GetFloat("beta", 0.75f);
    op->bias_ = node.GetFloat("bias", 1.0f);
    return std::unique_ptr<Op>(std::move(op));
  }

  Status Infer(InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(0, {DataType::kFloat}));
    if (ctx.rank(0) < 2)
      return ctx.Error("X must be [N, C, ...]; got rank " + std::to_string(ctx.rank(0)));
    ctx.SetOutput(0, DataType::kFloat, ctx.shape(0));
    return OkStatus();
  }

  Status Compute(const ComputeContext& ctx) const override {
    const Tensor& xt = ctx.in(0);
    const int64_t n_batch = xt.shape()[0], c_dim = xt.shape()[1];
    const int64_t plane = n_batch * c_dim > 0 ? xt.numel() / (n_batch * c_dim) : 0;
    const int64_t before = (size_ - 1) / 2, after = size_ - 1 - before;
    const double scale = static_cast<double>(alpha_) / static_cast<double>(size_);
    const float* x = xt.data<float>();
    float* y = ctx.out(0).data<float>();
    for (int64_t n = 0; n < n_batch; ++n) {
      const float* xn = x + n * c_dim * plane;
      float* yn = y + n * c_dim * plane;
      for (int64_t c = 0; c < c_dim; ++c) {
        const int64_t c0 = std::max<int64_t>(0, c - before);
        const int64_t c1 = std::min<int64_t>(c_dim - 1, c + after);
        for (int64_t i = 0; i < plane; ++i) {
          double ss = 0;
          for (int64_t j = c0; j <= c1; ++j) {
            const double v = xn[j * plane + i];
            ss += v * v;
          }
          const double v = xn[c * plane + i];
          yn[c * plane + i] = static_cast<float>(v / std::pow(bias_ + scale * ss, beta_));
        }
      }
    }
    return OkStatus();
  }

 private:
  explicit LrnOp(const Node& node) : Op(node) {}
  int64_t size_ = 1;
  float alpha_ = 1e-4f, beta_ = 0.75f, bias_ = 1.0f;
};

KILN_REGISTER_OP("LRN", 1, ir::kMaxOpset, &LrnOp::Create);

}  // namespace
}  // namespace kiln::ops
