// MatMul (opsets 1, 9, 13): numpy matmul, the reference kernel.
//
// Layout: A [..., M, K], B [..., K, N] row-major; batch dims broadcast as numpy does. A 1-D A is
// [1, K] with M removed from the result, a 1-D B is [K, 1] with N removed (both 1-D: a scalar).
// dtypes: float32 (double accumulation), int32 and int64 (unsigned 64-bit accumulation, so
// overflow wraps to the output type without undefined behaviour).
//
// Algorithm: per broadcast batch index, one output row at a time in an accumulator row:
// acc[n] += A(m, k) * B(k, n) with the inner loop along B's contiguous rows. The float routine
// (matmul.h) is shared with kiln's FusedMatMul.
#include "ops/nn/matmul.h"

#include <memory>
#include <vector>

#include "ops/common.h"
#include "ops/nn/gemm.h"
#include "ops/op_cases.h"

namespace kiln::ops {
namespace nn {

StatusOr<MatMulDims> ComputeMatMulDims(const Shape& a, const Shape& b) {
  MatMulDims d;
  if (a.empty() || b.empty())
    return InvalidArgument("A and B must have rank >= 1; got " + ShapeToString(a) + " and " +
                           ShapeToString(b));
  if (a.size() == 1) {
    d.k = a[0];
  } else {
    d.m = a[a.size() - 2];
    d.k = a.back();
    d.batch_a.assign(a.begin(), a.end() - 2);
  }
  if (b.size() == 1) {
    d.kb = b[0];
  } else {
    d.kb = b[b.size() - 2];
    d.n = b.back();
    d.batch_b.assign(b.begin(), b.end() - 2);
  }
  if (d.k != d.kb)
    return InvalidArgument("A's last dim must equal B's " +
                           std::string(b.size() == 1 ? "only" : "second-to-last") + " dim; got " +
                           ShapeToString(a) + " and " + ShapeToString(b));
  auto batch = BroadcastShapes({d.batch_a, d.batch_b});
  if (!batch.ok()) return InvalidArgument("batch dims: " + batch.status().message());
  d.batch = *batch;
  d.out = d.batch;
  if (a.size() > 1) d.out.push_back(d.m);
  if (b.size() > 1) d.out.push_back(d.n);
  return d;
}

namespace {

template <typename T, typename Acc>
void MatMulKernel(const T* a, const T* b, T* y, const MatMulDims& d) {
  // An empty output: nothing to compute, and the other dims may multiply past int64 (A of
  // [0, 2^62, 2]: m * k overflowed; found by ASan+UBSan on the session fuzzer's regression test).
  if (d.m == 0 || d.n == 0) return;
  for (int64_t v : d.batch)
    if (v == 0) return;
  const int64_t batches = NumElements(d.batch);
  const int64_t mk = d.m * d.k, kn = d.k * d.n, mn = d.m * d.n;
  const std::vector<int64_t> sa = BroadcastStrides(d.batch_a, d.batch);
  const std::vector<int64_t> sb = BroadcastStrides(d.batch_b, d.batch);
  const size_t r = d.batch.size();
  std::vector<int64_t> idx(r, 0);
  std::vector<Acc> acc(static_cast<size_t>(d.n));
  int64_t ia = 0, ib = 0;  // batch offsets in matrices
  for (int64_t bi = 0; bi < batches; ++bi) {
    const T* ap = a + ia * mk;
    const T* bp = b + ib * kn;
    T* yp = y + bi * mn;
    for (int64_t m = 0; m < d.m; ++m) {
      std::fill(acc.begin(), acc.end(), Acc(0));
      for (int64_t k = 0; k < d.k; ++k) {
        const Acc av = static_cast<Acc>(ap[m * d.k + k]);
        const T* br = bp + k * d.n;
        for (int64_t n = 0; n < d.n; ++n) acc[n] += av * static_cast<Acc>(br[n]);
      }
      for (int64_t n = 0; n < d.n; ++n) yp[m * d.n + n] = static_cast<T>(acc[n]);
    }
    for (int64_t x = static_cast<int64_t>(r) - 1; x >= 0; --x) {  // next batch index
      if (++idx[x] < d.batch[x]) {
        ia += sa[x];
        ib += sb[x];
        break;
      }
      ia -= sa[x] * (d.batch[x] - 1);
      ib -= sb[x] * (d.batch[x] - 1);
      idx[x] = 0;
    }
  }
}

}  // namespace

void MatMulFloat(const float* a, const float* b, float* y, const MatMulDims& d) {
  MatMulKernel<float, double>(a, b, y, d);
}

void MatMulDouble(const double* a, const double* b, double* y, const MatMulDims& d) {
  MatMulKernel<double, double>(a, b, y, d);
}

}  // namespace nn

namespace {

using ir::ComputeContext;
using ir::InferContext;
using ir::Node;
using ir::Op;
using nn::MatMulDims;
using nn::MatMulKernel;

class MatMulOp : public Op {
 public:
  explicit MatMulOp(const Node& node) : Op(node) {}
  // MatMul's attributes are Gemm's defaults (no transposes, alpha = beta = 1, no activation).
  const ir::OpAttrs* attributes() const override { return &a_; }

  Status Infer(InferContext& ctx) const override {
    if (!ctx.has_input(0) || !ctx.has_input(1)) return ctx.Error("inputs A and B are required");
    KILN_RETURN_IF_ERROR(
        ctx.ExpectDtype(0, {DataType::kFloat, DataType::kInt32, DataType::kInt64}));
    if (ctx.dtype(1) != ctx.dtype(0))
      return ctx.Error(std::string("A and B must have the same dtype; got ") +
                       DataTypeName(ctx.dtype(0)) + " and " + DataTypeName(ctx.dtype(1)));
    auto d = nn::ComputeMatMulDims(ctx.shape(0), ctx.shape(1));
    if (!d.ok()) return ctx.Error(d.status().message());
    ctx.SetOutput(0, ctx.dtype(0), d->out);
    return OkStatus();
  }

  Status Compute(const ComputeContext& ctx) const override {
    auto d = nn::ComputeMatMulDims(ctx.in(0).shape(), ctx.in(1).shape());
    if (!d.ok()) return RunError(d.status().message());
    switch (ctx.in(0).dtype()) {
      case DataType::kFloat:
        MatMulKernel<float, double>(ctx.in(0).data<float>(), ctx.in(1).data<float>(),
                                    ctx.out(0).data<float>(), *d);
        break;
      case DataType::kInt32:
        MatMulKernel<int32_t, uint64_t>(ctx.in(0).data<int32_t>(), ctx.in(1).data<int32_t>(),
                                        ctx.out(0).data<int32_t>(), *d);
        break;
      case DataType::kInt64:
        MatMulKernel<int64_t, uint64_t>(ctx.in(0).data<int64_t>(), ctx.in(1).data<int64_t>(),
                                        ctx.out(0).data<int64_t>(), *d);
        break;
      default:
        return Unsupported("failed to run " + describe() + ": unsupported dtype " +
                           DataTypeName(ctx.in(0).dtype()));
    }
    return OkStatus();
  }

 private:
  GemmAttrs a_;
};

KILN_REGISTER_OP("MatMul", 1, ir::kMaxOpset, &ir::MakeOp<MatMulOp>);

// Kernel cases (ops/op_cases.h), after the former hand-written kernel tests and
// the former selftest cases: a constant 2-D B (cpu.matmul.onednn prepacks it; A's leading dims
// fold into M; N = 128 pads B's rows), M = 1, N = 1; two computed operands (cpu.matmul.batched,
// cuBLAS): equal batch dims, batch dims broadcast either way (cuBLAS declines), ranks that differ,
// a computed 2-D B, attention's Q x K^T; 1-D operands (the reference only).
std::vector<OpCase> MatMulCases() {
  struct Operands {
    Shape a, b;
    bool b_const;
  };
  const Operands shapes[] = {
      {{6, 10}, {10, 12}, true},
      {{2, 3, 6, 10}, {10, 12}, true},
      {{3, 7, 40}, {40, 128}, true},
      {{1, 1, 17}, {17, 5}, true},
      {{3, 1, 7}, {7, 1}, true},
      {{2, 3, 5, 8}, {2, 3, 8, 6}, false},
      {{2, 1, 5, 8}, {1, 3, 8, 6}, false},
      {{5, 8}, {4, 8, 7}, false},
      {{4, 2, 5, 8}, {8, 3}, false},
      {{1, 4, 33, 16}, {1, 4, 16, 33}, false},
      {{8}, {8, 6}, true},
      {{3, 5, 8}, {8}, false},
      {{8}, {8}, false},
  };
  std::vector<OpCase> cases;
  uint32_t seed = 40;
  for (const Operands& o : shapes) {
    OpCase c(ShapeToString(o.a) + " x " + ShapeToString(o.b) + (o.b_const ? " (constant)" : ""),
             13);
    c.In(CaseTensor(o.a, seed++));
    Tensor b = CaseTensor(o.b, seed++);
    if (o.b_const)
      c.Const(b);
    else
      c.In(b);
    cases.push_back(std::move(c));
  }
  return cases;
}
KILN_REGISTER_OP_CASES("", "MatMul", &MatMulCases);

}  // namespace
}  // namespace kiln::ops
