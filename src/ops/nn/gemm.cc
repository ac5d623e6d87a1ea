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
#include "ops/nn/gemm.h"

#include <cstdio>
#include <memory>
#include <vector>

#include "ops/common.h"
#include "ops/op_cases.h"

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

// Kernel cases (ops/op_cases.h), A an input, B and C constants (cpu.gemm.onednn prepacks B and
// folds beta * C / alpha into its bias) unless a case says otherwise: transA / transB, alpha and
// beta, C as [N], [1,N], a scalar, [1] (oneDNN's row bias), full [M,N] (cuBLAS), [M,1] (the
// reference only), beta 0, no C, M = 1 and K = 1, N = 64 (oneDNN pads B's rows), alpha 0, a
// computed B (cuBLAS, not oneDNN), opset 9.
struct GemmShape {
  Shape a, b, c;  // c empty: no C
  bool ta, tb;
  float alpha, beta;
  bool b_const;
  int opset;
};

std::vector<OpCase> GemmCases() {
  const GemmShape shapes[] = {
      {{5, 7}, {9, 7}, {9}, false, true, 0.75f, 1.f, true, 13},
      {{5, 7}, {7, 9}, {5, 9}, false, false, 0.75f, 0.5f, true, 13},
      {{7, 5}, {7, 9}, {1, 9}, true, false, 1.5f, 1.f, true, 13},
      {{7, 5}, {9, 7}, {9}, true, true, 1.f, 0.5f, true, 13},
      {{5, 7}, {7, 9}, {}, false, false, 1.f, 1.f, true, 13},
      {{5, 7}, {7, 9}, {1}, false, false, 1.f, 1.f, true, 13},
      {{1, 7}, {7, 9}, {}, false, false, 1.f, 1.f, true, 13},
      {{6, 1}, {1, 5}, {5}, false, false, 1.f, 1.f, true, 13},
      {{5, 7}, {9, 7}, {9}, false, true, 1.f, 0.f, true, 13},
      {{9, 24}, {64, 24}, {64}, false, true, 1.f, 1.f, true, 13},
      {{5, 7}, {7, 9}, {5, 1}, false, false, 1.f, 1.f, true, 13},
      {{5, 7}, {7, 9}, {9}, false, false, 1.f, 1.f, false, 13},
      {{5, 7}, {7, 9}, {9}, false, false, 0.f, 1.f, true, 13},
      {{3, 300}, {17, 300}, {17}, false, true, 1.f, 1.f, true, 9},
  };
  std::vector<OpCase> cases;
  uint32_t seed = 300;
  for (const GemmShape& g : shapes) {
    char params[64];
    std::snprintf(params, sizeof(params), " alpha %g beta %g", g.alpha, g.beta);
    OpCase c("A" + ShapeToString(g.a) + (g.ta ? "^T" : "") + " B" + ShapeToString(g.b) +
                 (g.tb ? "^T" : "") + (g.b_const ? "" : " (computed)") +
                 (g.c.empty() ? " no C" : " C" + ShapeToString(g.c)) + params,
             g.opset);
    c.In(CaseTensor(g.a, seed++));
    Tensor b = CaseTensor(g.b, seed++);
    if (g.b_const)
      c.Const(b);
    else
      c.In(b);
    if (!g.c.empty()) c.Const(CaseTensor(g.c, seed++));
    if (g.ta) c.Int("transA", 1);
    if (g.tb) c.Int("transB", 1);
    if (g.alpha != 1.f) c.Float("alpha", g.alpha);
    if (g.beta != 1.f) c.Float("beta", g.beta);
    cases.push_back(std::move(c));
  }
  return cases;
}
KILN_REGISTER_OP_CASES("", "Gemm", &GemmCases);

}  // namespace
}  // namespace kiln::ops
