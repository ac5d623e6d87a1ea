// Det (opsets 11, 22): X [..., M, M] (float32, float16 as float32, float64) gives the
// determinant of each matrix, shape [...]. Reference kernel: Gaussian elimination with partial
// pivoting in double (a zero pivot column gives 0); a 0x0 matrix has determinant 1.
#include <cmath>
#include <memory>
#include <utility>
#include <vector>

#include "ops/common.h"
#include "ops/op_cases.h"
#include "ops/typed_dispatch.h"

namespace kiln::ops {
namespace {

// Determinant of the m x m matrix `a` (row-major, overwritten).
double Determinant(std::vector<double>& a, int64_t m) {
  double det = 1.0;
  for (int64_t c = 0; c < m; ++c) {
    int64_t pivot = c;
    for (int64_t r = c + 1; r < m; ++r)
      if (std::fabs(a[r * m + c]) > std::fabs(a[pivot * m + c])) pivot = r;
    if (a[pivot * m + c] == 0.0) return 0.0;
    if (pivot != c) {
      for (int64_t k = 0; k < m; ++k) std::swap(a[c * m + k], a[pivot * m + k]);
      det = -det;
    }
    const double p = a[c * m + c];
    det *= p;
    for (int64_t r = c + 1; r < m; ++r) {
      const double f = a[r * m + c] / p;
      for (int64_t k = c; k < m; ++k) a[r * m + k] -= f * a[c * m + k];
    }
  }
  return det;
}

class DetOp final : public ir::Op {
 public:
  explicit DetOp(const ir::Node& node) : Op(node) {}

  Status Infer(ir::InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(0, {DataType::kFloat, DataType::kDouble}));
    const Shape& x = ctx.shape(0);
    if (x.size() < 2 || x[x.size() - 1] != x[x.size() - 2])
      return ctx.Error("X must be [..., M, M] (square matrices); got " + ShapeToString(x));
    ctx.SetOutput(0, ctx.dtype(0), Shape(x.begin(), x.end() - 2));
    return OkStatus();
  }

  Status Compute(const ir::ComputeContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    const int64_t m = x.shape().back();
    const int64_t count = ctx.out(0).numel();
    return DispatchFloating(x.dtype(), describe(), [&](auto tag) {
      using T = decltype(tag);
      std::vector<double> a(static_cast<size_t>(m * m));
      for (int64_t b = 0; b < count; ++b) {
        const T* src = x.data<T>() + b * m * m;
        for (int64_t i = 0; i < m * m; ++i) a[i] = src[i];
        ctx.out(0).data<T>()[b] = static_cast<T>(Determinant(a, m));
      }
      return OkStatus();
    });
  }
};
KILN_REGISTER_OP("Det", 11, ir::kMaxOpset, &ir::MakeOp<DetOp>);

// Cases: a batch of 3x3, a 1x1, a singular matrix, a pivot-needing matrix, a 5x5.
std::vector<OpCase> DetCases() {
  std::vector<OpCase> cases;
  cases.push_back(OpCase("[2,4,3,3]", 11).In(CaseTensor({2, 4, 3, 3}, 1)));
  cases.push_back(OpCase("[1,1]", 11).In(CaseTensor({1, 1}, 2)));
  cases.push_back(OpCase("singular [3,3]", 11).In(CaseFloats({1, 2, 3, 2, 4, 6, 0, 1, 5}, {3, 3})));
  cases.push_back(
      OpCase("zero leading pivot [2,2,2]", 11).In(CaseFloats({0, 1, 2, 3, 0, 0, 5, 0}, {2, 2, 2})));
  cases.push_back(OpCase("[5,5]", 22).In(CaseTensor({5, 5}, 3, -2.f, 2.f)));
  return cases;
}
KILN_REGISTER_OP_CASES("", "Det", &DetCases);

}  // namespace
}  // namespace kiln::ops
