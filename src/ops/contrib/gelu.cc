// The Gelu family of ONNX Runtime's "com.microsoft" domain (opset 1), as ORT's transformers
// optimizer and torch exports with ORT fusions write them:
//
//   Gelu       Y = 0.5 x (1 + erf(x / sqrt(2)))
//   FastGelu   X, optional bias [H] (H = X's last dim), added first: v = X + bias;
//              Y = 0.5 v (1 + tanh(sqrt(2 / pi) (v + 0.044715 v^3)))
//   BiasGelu   A, B [H] (required, 1-D, A's last dim): v = A + B, then Gelu (erf)
//   QuickGelu  Y = x sigmoid(alpha x), `alpha` default 1.702
//
// Reference kernel: the bias added in float32 (as ORT does), the function in double, rounded to
// float32. float32 only.
#include <cmath>
#include <memory>
#include <string>

#include "ops/common.h"
#include "ops/op_cases.h"

namespace kiln::ops {
namespace {

using ir::ComputeContext;
using ir::InferContext;
using ir::Node;

enum class GeluKind { kGelu, kFast, kBias, kQuick };

class MsGeluOp final : public ir::Op {
 public:
  static StatusOr<std::unique_ptr<ir::Op>> Create(const Node& node) {
    std::unique_ptr<MsGeluOp> op(new MsGeluOp(node));
    const std::string& t = node.op_type;
    op->kind_ = t == "FastGelu"    ? GeluKind::kFast
                : t == "BiasGelu"  ? GeluKind::kBias
                : t == "QuickGelu" ? GeluKind::kQuick
                                   : GeluKind::kGelu;
    op->alpha_ = node.GetFloat("alpha", 1.702f);
    const size_t n = node.num_explicit_inputs();
    const size_t most = op->kind_ == GeluKind::kFast || op->kind_ == GeluKind::kBias ? 2 : 1;
    const size_t least = op->kind_ == GeluKind::kBias ? 2 : 1;
    if (n < least || n > most)
      return ir::AttrError(node, t + " takes " + std::to_string(least) +
                                     (most == least ? "" : " or " + std::to_string(most)) +
                                     " inputs; got " + std::to_string(n));
    return std::unique_ptr<ir::Op>(std::move(op));
  }

  Status Infer(InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(0, {DataType::kFloat}));
    if (ctx.has_input(1)) {
      KILN_RETURN_IF_ERROR(ctx.ExpectDtype(1, {DataType::kFloat}));
      const Shape& x = ctx.shape(0);
      const Shape& b = ctx.shape(1);
      if (x.empty() || b.size() != 1 || b[0] != x.back())
        return ctx.Error("the bias must be 1-D with X's last dim (X " + ShapeToString(x) +
                         "); got " + ShapeToString(b));
    } else if (kind_ == GeluKind::kBias) {
      return ctx.Error("BiasGelu needs its bias input B");
    }
    ctx.SetOutput(0, DataType::kFloat, ctx.shape(0));
    return OkStatus();
  }

  Status Compute(const ComputeContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    const float* xp = x.data<float>();
    const float* bias = ctx.has(1) ? ctx.in(1).data<float>() : nullptr;
    const int64_t h = bias != nullptr ? ctx.in(1).numel() : 1;
    float* y = ctx.out(0).data<float>();
    constexpr double kSqrtHalf = 0.70710678118654752440;
    constexpr double kSqrt2OverPi = 0.79788456080286535588;
    for (int64_t i = 0, n = x.numel(); i < n; ++i) {
      const double v = bias != nullptr ? static_cast<double>(xp[i] + bias[i % h]) : xp[i];
      double r = 0.0;
      switch (kind_) {
        case GeluKind::kGelu:
        case GeluKind::kBias:
          r = 0.5 * v * (1.0 + std::erf(v * kSqrtHalf));
          break;
        case GeluKind::kFast:
          r = 0.5 * v * (1.0 + std::tanh(kSqrt2OverPi * (v + 0.044715 * v * v * v)));
          break;
        case GeluKind::kQuick:
          r = v / (1.0 + std::exp(-static_cast<double>(alpha_) * v));
          break;
      }
      y[i] = static_cast<float>(r);
    }
    return OkStatus();
  }

 private:
  explicit MsGeluOp(const Node& node) : Op(node) {}
  GeluKind kind_ = GeluKind::kGelu;
  float alpha_ = 1.702f;
};

StatusOr<std::unique_ptr<ir::Op>> CreateMsGelu(const Node& node) { return MsGeluOp::Create(node); }

KILN_REGISTER_OP_DOMAIN("com.microsoft", "Gelu", 1, 1, &CreateMsGelu);
KILN_REGISTER_OP_DOMAIN("com.microsoft", "FastGelu", 1, 1, &CreateMsGelu);
KILN_REGISTER_OP_DOMAIN("com.microsoft", "BiasGelu", 1, 1, &CreateMsGelu);
KILN_REGISTER_OP_DOMAIN("com.microsoft", "QuickGelu", 1, 1, &CreateMsGelu);

// Kernel cases: odd shapes, a size-1 dim, values past the tanh/erf knees (-4..4), the bias where
// the op takes one, QuickGelu with its default and another alpha.
std::vector<OpCase> GeluCases() {
  return {OpCase("[2,3,7]", 1).In(CaseTensor({2, 3, 7}, 11, -4.f, 4.f)),
          OpCase("[1,5,1]", 1).In(CaseTensor({1, 5, 1}, 12, -4.f, 4.f))};
}
std::vector<OpCase> FastGeluCases() {
  return {
      OpCase("[2,3,7] no bias", 1).In(CaseTensor({2, 3, 7}, 21, -4.f, 4.f)),
      OpCase("[2,3,7] + bias [7]", 1)
          .In(CaseTensor({2, 3, 7}, 22, -4.f, 4.f))
          .Const(CaseTensor({7}, 23)),
      OpCase("[5,1] + bias [1]", 1).In(CaseTensor({5, 1}, 24, -4.f, 4.f)).In(CaseTensor({1}, 25))};
}
std::vector<OpCase> BiasGeluCases() {
  return {
      OpCase("[2,3,7] + [7]", 1)
          .In(CaseTensor({2, 3, 7}, 31, -4.f, 4.f))
          .Const(CaseTensor({7}, 32)),
      OpCase("[1,1,9] + [9]", 1).In(CaseTensor({1, 1, 9}, 33, -4.f, 4.f)).In(CaseTensor({9}, 34))};
}
std::vector<OpCase> QuickGeluCases() {
  return {
      OpCase("[2,3,7] alpha default", 1).In(CaseTensor({2, 3, 7}, 41, -6.f, 6.f)),
      OpCase("[3,1,5] alpha 1.0", 1).In(CaseTensor({3, 1, 5}, 42, -6.f, 6.f)).Float("alpha", 1.f)};
}
KILN_REGISTER_OP_CASES("com.microsoft", "Gelu", &GeluCases);
KILN_REGISTER_OP_CASES("com.microsoft", "FastGelu", &FastGeluCases);
KILN_REGISTER_OP_CASES("com.microsoft", "BiasGelu", &BiasGeluCases);
KILN_REGISTER_OP_CASES("com.microsoft", "QuickGelu", &QuickGeluCases);

}  // namespace
}  // namespace kiln::ops
