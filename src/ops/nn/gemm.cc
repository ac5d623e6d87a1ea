// Gemm (opsets 1, 6, 7, 9, 11, 13): Y = alpha * A' * B' + beta * C, the reference kernel.
//
// Layout: A [M, K] ([K, M] with transA), B [K, N] ([N, K] with transB), row-major; C optional
// (required before opset 11 by the spec, accepted missing here), unidirectionally broadcast to
// [M, N] (scalar, [N], [M, 1], [1, N], [M, N]). The opset < 7 `broadcast` attribute is accepted
// and ignored: broadcasting is always allowed. float32 only.
//
// Algorithm: one output row at a time in double accumulators, the inner loop along B's rows
// (axpy form, contiguous; a transposed B is copied to [K, N] first). When beta == 0, C is not
// read (as ONNX Runtime does), so NaNs in an unused C do not leak.
#include <memory>
#include <vector>

#include "ops/attrs.h"
#include "ops/common.h"

namespace kiln::ops {
namespace {

using ir::ComputeContext;
using ir::InferContext;
using ir::Node;
using ir::Op;

class GemmOp : public Op {
 public:
  const ir::OpAttrs* attributes() const override { return &a_; }
  static StatusOr<std::unique_ptr<Op>> Create(const Node& node) {
    std::unique_ptr<GemmOp> op(new GemmOp(node));
    op->a_.alpha = node.GetFloat("alpha", 1.0f);
    op->a_.beta = node.GetFloat("beta", 1.0f);
    const int64_t ta = node.GetInt("transA", 0), tb = node.GetInt("transB", 0);
    if (ta != 0 && ta != 1)
      return ir::AttrError(node, "transA must be 0 or 1; got " + std::to_string(ta));
    if (tb != 0 && tb != 1)
      return ir::AttrError(node, "transB must be 0 or 1; got " + std::to_string(tb));
    op->a_.trans_a = ta == 1;
    op->a_.trans_b = tb == 1;
    return std::unique_ptr<Op>(std::move(op));
  }

  Status Infer(InferContext& ctx) const override {
    if (!ctx.has_input(0) || !ctx.has_input(1)) return ctx.Error("inputs A and B are required");
    for (size_t i = 0; i < 3; ++i) KILN_RETURN_IF_ERROR(ctx.ExpectDtype(i, {DataType::kFloat}));
    if (ctx.rank(0) != 2 || ctx.rank(1) != 2)
      return ctx.Error("A and B must be 2-D; got ranks " + std::to_string(ctx.rank(0)) + " and " +
                       std::to_string(ctx.rank(1)));
    int64_t m, k, n;
    Dims(ctx.shape(0), ctx.shape(1), &m, &k, &n);
    const int64_t kb = a_.trans_b ? ctx.shape(1)[1] : ctx.shape(1)[0];
    if (k != kb)
      return ctx.Error("the inner dims of A" + std::string(a_.trans_a ? "^T" : "") + " and B" +
                       (a_.trans_b ? "^T" : "") + " must match; got " + std::to_string(k) +
                       " and " + std::to_string(kb));
    const Shape y = {m, n};
    if (ctx.has_input(2)) {
      auto b = BroadcastShapes({y, ctx.shape(2)});
      if (!b.ok() || *b != y)
        return ctx.Error("C must broadcast to the output shape " + ShapeToString(y) + "; got " +
                         ShapeToString(ctx.shape(2)));
    }
    ctx.SetOutput(0, DataType::kFloat, y);
    return OkStatus();
  }

  Status Compute(const ComputeContext& ctx) const override {
    const Tensor& at = ctx.in(0);
    const Tensor& bt = ctx.in(1);
    int64_t m_dim, k_dim, n_dim;
    Dims(at.shape(), bt.shape(), &m_dim, &k_dim, &n_dim);
    const float* a = at.data<float>();
    const float* b = bt.data<float>();
    float* y = ctx.out(0).data<float>();
    // A(m, k) = a[m * am + k * ak].
    const int64_t am = a_.trans_a ? 1 : k_dim, ak = a_.trans_a ? m_dim : 1;
    // C(m, n) = c[m * cm + n * cn], strides 0 along broadcast dims; C unused when beta == 0.
    const float* c = ctx.has(2) && a_.beta != 0.f ? ctx.in(2).data<float>() : nullptr;
    int64_t cm = 0, cn = 0;
    if (c) {
      const std::vector<int64_t> cs = BroadcastStrides(ctx.in(2).shape(), Shape{m_dim, n_dim});
      cm = cs[0];
      cn = cs[1];
    }
    const double alpha = a_.alpha, beta = a_.beta;
    std::vector<double> acc(static_cast<size_t>(n_dim));
    // With transB, B is first copied to [K, N] so both cases run the contiguous axpy loop.
    std::vector<float> b_kn;
    if (a_.trans_b) {
      b_kn.resize(static_cast<size_t>(k_dim * n_dim));
      for (int64_t n = 0; n < n_dim; ++n)
        for (int64_t k = 0; k < k_dim; ++k) b_kn[k * n_dim + n] = b[n * k_dim + k];
      b = b_kn.data();
    }
    for (int64_t m = 0; m < m_dim; ++m) {
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t k = 0; k < k_dim; ++k) {
        const double av = a[m * am + k * ak];
        const float* br = b + k * n_dim;
        for (int64_t n = 0; n < n_dim; ++n) acc[n] += av * br[n];
      }
      float* yr = y + m * n_dim;
      if (c) {
        for (int64_t n = 0; n < n_dim; ++n)
          yr[n] = static_cast<float>(alpha * acc[n] + beta * c[m * cm + n * cn]);
      } else {
        for (int64_t n = 0; n < n_dim; ++n) yr[n] = static_cast<float>(alpha * acc[n]);
      }
    }
    return OkStatus();
  }

 private:
  explicit GemmOp(const Node& node) : Op(node) {}

  void Dims(const Shape& a, const Shape& b, int64_t* m, int64_t* k, int64_t* n) const {
    *m = a_.trans_a ? a[1] : a[0];
    *k = a_.trans_a ? a[0] : a[1];
    *n = a_.trans_b ? b[0] : b[1];
  }

  GemmAttrs a_;
};

KILN_REGISTER_OP("Gemm", 1, ir::kMaxOpset, &GemmOp::Create);

}  // namespace
}  // namespace kiln::ops
