// Unary elementwise ops (activations and math). Reference: one pass over the elements. float32
// computes in float, or in double and rounded once where float loses accuracy against ONNX's numpy
// reference (trigonometric and hyperbolic functions, Mish, Celu, Swish); float64 computes in
// double. Neg runs on float32/float64 and the signed integers, Abs and Sign on every numeric dtype
// (integer Neg and Abs of the most negative value wrap to it, as numpy); Not on bool; IsNaN/IsInf
// give bool. Clip-6 takes min/max attributes, Clip-11+ inputs, on every numeric dtype.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <type_traits>

#include "ops/activation.h"
#include "ops/common.h"
#include "ops/op_cases.h"
#include "ops/tensor/tensor_util.h"
#include "ops/typed_dispatch.h"

namespace kiln::ops {
namespace {

using ir::ComputeContext;
using ir::InferContext;
using ir::Node;
using ir::Op;

// A floating-point unary op (float32 and float64) described by a generic function of x (called
// with a float or a double) and the node's float attributes.
class FloatUnaryOp : public Op {
 public:
  template <typename G>
  FloatUnaryOp(const Node& node, G g)
      : Op(node),
        f32_([g](float x) { return static_cast<float>(g(x)); }),
        f64_([g](double x) { return static_cast<double>(g(x)); }) {}
  Status Infer(InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(0, {DataType::kFloat, DataType::kDouble}));
    ctx.SetOutput(0, ctx.dtype(0), ctx.shape(0));
    return OkStatus();
  }
  Status Compute(const ComputeContext& ctx) const override {
    return DispatchFloating(ctx.in(0).dtype(), describe(), [&](auto tag) {
      using T = decltype(tag);
      const auto& fn = [this]() -> const auto& {
        if constexpr (std::is_same_v<T, float>)
          return f32_;
        else
          return f64_;
      }
      ();
      const T* src = ctx.in(0).data<T>();
      T* dst = ctx.out(0).data<T>();
      for (int64_t i = 0, n = ctx.in(0).numel(); i < n; ++i) dst[i] = fn(src[i]);
      return OkStatus();
    });
  }

 private:
  std::function<float(float)> f32_;
  std::function<double(double)> f64_;
};

#define KILN_FLOAT_UNARY(NAME, SINCE, ...)                           \
  StatusOr<std::unique_ptr<Op>> Create##NAME(const Node& node) {     \
    return std::unique_ptr<Op>(new FloatUnaryOp(node, __VA_ARGS__)); \
  }                                                                  \
  KILN_REGISTER_OP(#NAME, SINCE, ir::kMaxOpset, &Create##NAME)

// `T` in the lambdas below is float or double (the element type).
#define KILN_T using T = decltype(x)

KILN_FLOAT_UNARY(Erf, 9, [](auto x) { return std::erf(x); });
KILN_FLOAT_UNARY(Softplus, 1, [](auto x) {
  KILN_T;
  return x > T(20) ? x : static_cast<T>(std::log1p(std::exp(static_cast<double>(x))));
});
KILN_FLOAT_UNARY(Sqrt, 1, [](auto x) { return std::sqrt(x); });
KILN_FLOAT_UNARY(Exp, 1, [](auto x) { return std::exp(x); });
KILN_FLOAT_UNARY(Log, 1, [](auto x) { return std::log(x); });
KILN_FLOAT_UNARY(Reciprocal, 1, [](auto x) {
  KILN_T;
  return T(1) / x;
});
KILN_FLOAT_UNARY(Floor, 1, [](auto x) { return std::floor(x); });
KILN_FLOAT_UNARY(Ceil, 1, [](auto x) { return std::ceil(x); });
KILN_FLOAT_UNARY(Selu, 1,
                 [a = node.GetFloat("alpha", 1.67326319217681884765625f),
                  g = node.GetFloat("gamma", 1.05070102214813232421875f)](auto x) {
                   KILN_T;
                   return x > T(0) ? T(g) * x : T(g) * (T(a) * std::exp(x) - T(a));
                 });

// Trigonometric and hyperbolic functions (Sin..Atan since 7, Sinh..Atanh since 9; the opset-22
// versions only add types), computed in double and rounded once.
#define KILN_DOUBLE_UNARY(NAME, SINCE, FN) \
  KILN_FLOAT_UNARY(NAME, SINCE, [](auto x) { return FN(static_cast<double>(x)); })
KILN_DOUBLE_UNARY(Sin, 7, std::sin);
KILN_DOUBLE_UNARY(Cos, 7, std::cos);
KILN_DOUBLE_UNARY(Tan, 7, std::tan);
KILN_DOUBLE_UNARY(Asin, 7, std::asin);
KILN_DOUBLE_UNARY(Acos, 7, std::acos);
KILN_DOUBLE_UNARY(Atan, 7, std::atan);
KILN_DOUBLE_UNARY(Sinh, 9, std::sinh);
KILN_DOUBLE_UNARY(Cosh, 9, std::cosh);
KILN_DOUBLE_UNARY(Asinh, 9, std::asinh);
KILN_DOUBLE_UNARY(Acosh, 9, std::acosh);
KILN_DOUBLE_UNARY(Atanh, 9, std::atanh);
KILN_FLOAT_UNARY(Softsign, 1, [](auto x) {
  KILN_T;
  return x / (T(1) + std::fabs(x));
});
// Round-11: half to even (std::nearbyint under the default rounding mode, as numpy's round).
KILN_FLOAT_UNARY(Round, 11, [](auto x) { return std::nearbyint(x); });
// Mish-18: x * tanh(softplus(x)); log1p(exp(x)) overflows double only past x = 709.
KILN_FLOAT_UNARY(Mish, 18, [](auto x) {
  const double d = x;
  return d > 30.0 ? d : d * std::tanh(std::log1p(std::exp(d)));
});
KILN_FLOAT_UNARY(ThresholdedRelu, 10, [a = node.GetFloat("alpha", 1.f)](auto x) {
  KILN_T;
  return x > T(a) ? x : T(0);
});
// Shrink-9: x + bias below -lambd, x - bias above lambd, 0 between.
KILN_FLOAT_UNARY(Shrink, 9,
                 [l = node.GetFloat("lambd", 0.5f), b = node.GetFloat("bias", 0.f)](auto x) {
                   KILN_T;
                   return x < -T(l) ? x + T(b) : (x > T(l) ? x - T(b) : T(0));
                 });
// Swish-24: x * sigmoid(alpha * x).
KILN_FLOAT_UNARY(Swish, 24, [a = static_cast<double>(node.GetFloat("alpha", 1.f))](auto x) {
  return x / (1.0 + std::exp(-a * x));
});
#undef KILN_T

// Celu-12: max(0, x) + min(0, alpha * (exp(x / alpha) - 1)); alpha divides, so it must not be 0.
StatusOr<std::unique_ptr<Op>> CreateCelu(const Node& node) {
  const float alpha = node.GetFloat("alpha", 1.f);
  if (alpha == 0.f || !std::isfinite(alpha))
    return ir::AttrError(node, "alpha must be finite and nonzero; got " + std::to_string(alpha));
  return std::unique_ptr<Op>(new FloatUnaryOp(node, [a = static_cast<double>(alpha)](auto x) {
    const double d = x;
    return std::max(0.0, d) + std::min(0.0, a * std::expm1(d / a));
  }));
}
KILN_REGISTER_OP("Celu", 12, ir::kMaxOpset, &CreateCelu);

// The activations (Relu, Sigmoid, Tanh, HardSwish, LeakyRelu, HardSigmoid, Elu, Gelu-20): kiln's
// one Activation type, its defaults and math (ops/activation.h), shared with the fused ops, the
// fusion passes and the CUDA kernels; float64 through its double form (ActivateDouble). Their
// ONNX node tests anchor the formulas.
class ActivationOp : public FloatUnaryOp {
 public:
  ActivationOp(const Node& node, Activation act)
      : FloatUnaryOp(node, [act](auto x) {
          if constexpr (std::is_same_v<decltype(x), float>)
            return Activate(act, x);
          else
            return ActivateDouble(act, x);
        }) {
    a_.act = act;
  }
  static StatusOr<std::unique_ptr<Op>> Create(const Node& node) {
    if (node.op_type == "Gelu") {
      const std::string approximate = node.GetString("approximate", "none");
      if (approximate != "none" && approximate != "tanh")
        return ir::AttrError(node, "approximate must be none or tanh; got '" + approximate + "'");
    }
    Activation act;
    if (!ActivationOfNode(node, {}, &act))
      return ir::AttrError(node, "not an activation kiln knows");
    return std::unique_ptr<Op>(new ActivationOp(node, act));
  }
  const ir::OpAttrs* attributes() const override { return &a_; }

 private:
  ActivationAttrs a_;
};
KILN_REGISTER_OP("Relu", 1, ir::kMaxOpset, &ActivationOp::Create);
KILN_REGISTER_OP("Sigmoid", 1, ir::kMaxOpset, &ActivationOp::Create);
KILN_REGISTER_OP("Tanh", 1, ir::kMaxOpset, &ActivationOp::Create);
KILN_REGISTER_OP("HardSwish", 14, ir::kMaxOpset, &ActivationOp::Create);
KILN_REGISTER_OP("LeakyRelu", 1, ir::kMaxOpset, &ActivationOp::Create);
KILN_REGISTER_OP("HardSigmoid", 1, ir::kMaxOpset, &ActivationOp::Create);
KILN_REGISTER_OP("Elu", 1, ir::kMaxOpset, &ActivationOp::Create);
KILN_REGISTER_OP("Gelu", 20, ir::kMaxOpset, &ActivationOp::Create);
// fuse_gelu's node in models whose opset predates Gelu-20 (passes/fuse_gelu.cc).
KILN_REGISTER_OP_DOMAIN("kiln", "Gelu", 1, 1, &ActivationOp::Create);

// Neg (float and signed integers), Abs and Sign (every numeric dtype): y = Fn(x) in x's type.
template <typename Fn, bool kUnsigned>
class NumericUnaryOp : public Op {
 public:
  explicit NumericUnaryOp(const Node& node) : Op(node) {}
  Status Infer(InferContext& ctx) const override {
    if (kUnsigned)
      KILN_RETURN_IF_ERROR(ExpectNumeric(ctx, 0));
    else
      KILN_RETURN_IF_ERROR(
          ctx.ExpectDtype(0, {DataType::kFloat, DataType::kDouble, DataType::kInt8,
                              DataType::kInt16, DataType::kInt32, DataType::kInt64}));
    ctx.SetOutput(0, ctx.dtype(0), ctx.shape(0));
    return OkStatus();
  }
  Status Compute(const ComputeContext& ctx) const override {
    KILN_DISPATCH_NUMERIC(ctx.in(0).dtype(), describe(), {
      const T* src = ctx.in(0).data<T>();
      T* dst = ctx.out(0).data<T>();
      for (int64_t i = 0, n = ctx.in(0).numel(); i < n; ++i) dst[i] = Fn()(src[i]);
    });
    return OkStatus();
  }
};

struct NegFn {
  template <typename T>
  T operator()(T x) const {
    return WrapNeg(x);
  }
};
struct AbsFn {
  template <typename T>
  T operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>)
      return std::fabs(x);
    else if constexpr (std::is_signed_v<T>)
      return x < 0 ? WrapNeg(x) : x;
    else
      return x;
  }
};
// Sign-9: -1, 0 or 1; NaN stays NaN (as numpy's sign).
struct SignFn {
  template <typename T>
  T operator()(T x) const {
    if constexpr (std::is_signed_v<T>)
      return x > 0 ? T(1) : (x < 0 ? T(-1) : x);
    else
      return x > 0 ? T(1) : T(0);
  }
};
KILN_REGISTER_OP("Neg", 1, ir::kMaxOpset, (&ir::MakeOp<NumericUnaryOp<NegFn, false>>));
KILN_REGISTER_OP("Sign", 9, ir::kMaxOpset, (&ir::MakeOp<NumericUnaryOp<SignFn, true>>));
KILN_REGISTER_OP("Abs", 1, ir::kMaxOpset, (&ir::MakeOp<NumericUnaryOp<AbsFn, true>>));

// IsNaN (opsets 9, 13, 20) and IsInf (10, 20): a bool tensor of X's shape saying which elements are
// NaN, or infinite (IsInf's detect_negative / detect_positive, both 1 by default, choose which
// signs count). On float32 and float64 (float16 and bfloat16 models are computed in float32 after
// loading, which keeps NaN and infinity); the versions after the first only add input types.
class FloatClassOp : public Op {
 public:
  static StatusOr<std::unique_ptr<Op>> Create(const Node& node) {
    std::unique_ptr<FloatClassOp> op(new FloatClassOp(node));
    op->inf_ = node.op_type == "IsInf";
    if (op->inf_) {
      const int64_t neg = node.GetInt("detect_negative", 1);
      const int64_t pos = node.GetInt("detect_positive", 1);
      if ((neg != 0 && neg != 1) || (pos != 0 && pos != 1))
        return ir::AttrError(node, "detect_negative and detect_positive must be 0 or 1; got " +
                                       std::to_string(neg) + " and " + std::to_string(pos));
      op->negative_ = neg == 1;
      op->positive_ = pos == 1;
    }
    return std::unique_ptr<Op>(std::move(op));
  }

  Status Infer(InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(0, {DataType::kFloat, DataType::kDouble}));
    ctx.SetOutput(0, DataType::kBool, ctx.shape(0));
    return OkStatus();
  }

  Status Compute(const ComputeContext& ctx) const override {
    return DispatchFloating(ctx.in(0).dtype(), describe(), [&](auto tag) {
      using T = decltype(tag);
      const T* x = ctx.in(0).data<T>();
      bool* y = ctx.out(0).data<bool>();
      const int64_t n = ctx.in(0).numel();
      for (int64_t i = 0; i < n; ++i) {
        if (!inf_)
          y[i] = std::isnan(x[i]);
        else
          y[i] = std::isinf(x[i]) && (x[i] > 0 ? positive_ : negative_);
      }
      return OkStatus();
    });
  }

 private:
  explicit FloatClassOp(const Node& node) : Op(node) {}
  bool inf_ = false;
  bool negative_ = true, positive_ = true;
};

KILN_REGISTER_OP("IsNaN", 9, ir::kMaxOpset, &FloatClassOp::Create);
KILN_REGISTER_OP("IsInf", 10, ir::kMaxOpset, &FloatClassOp::Create);

class NotOp : public Op {
 public:
  explicit NotOp(const Node& node) : Op(node) {}
  Status Infer(InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(0, {DataType::kBool}));
    ctx.SetOutput(0, DataType::kBool, ctx.shape(0));
    return OkStatus();
  }
  Status Compute(const ComputeContext& ctx) const override {
    const bool* src = ctx.in(0).data<bool>();
    bool* dst = ctx.out(0).data<bool>();
    for (int64_t i = 0, n = ctx.in(0).numel(); i < n; ++i) dst[i] = !src[i];
    return OkStatus();
  }
};
KILN_REGISTER_OP("Not", 1, ir::kMaxOpset, &ir::MakeOp<NotOp>);

// Clip: opset < 11 reads min/max attributes; opset >= 11 reads optional scalar inputs 1 and 2 of
// X's dtype. Every numeric dtype; min > max gives max (numpy's clip).
class ClipOp : public Op {
 public:
  explicit ClipOp(const Node& node)
      : Op(node),
        min_(node.GetFloat("min", -std::numeric_limits<float>::infinity())),
        max_(node.GetFloat("max", std::numeric_limits<float>::infinity())) {}
  Status Infer(InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ExpectNumeric(ctx, 0));
    auto floating = [](DataType t) { return t == DataType::kFloat || t == DataType::kFloat16; };
    for (size_t i = 1; i < 3; ++i) {
      if (!ctx.has_input(i)) continue;
      if (NumElements(ctx.shape(i)) != 1) return ctx.Error("Clip min/max must be scalars");
      if (ctx.dtype(i) != ctx.dtype(0) && !(floating(ctx.dtype(i)) && floating(ctx.dtype(0))))
        return ctx.Error("Clip min/max must have the input's dtype " +
                         std::string(DataTypeName(ctx.dtype(0))) + "; got " +
                         DataTypeName(ctx.dtype(i)));
    }
    ctx.SetOutput(0, ctx.dtype(0), ctx.shape(0));
    return OkStatus();
  }
  Status Compute(const ComputeContext& ctx) const override {
    KILN_DISPATCH_NUMERIC(ctx.in(0).dtype(), describe(), {
      T lo = std::numeric_limits<T>::lowest(), hi = std::numeric_limits<T>::max();
      if (opset() < 11) {
        lo = static_cast<T>(std::max<double>(min_, static_cast<double>(lo)));
        hi = static_cast<T>(std::min<double>(max_, static_cast<double>(hi)));
      } else {
        if (ctx.has(1)) lo = ctx.in(1).data<T>()[0];
        if (ctx.has(2)) hi = ctx.in(2).data<T>()[0];
      }
      const T* src = ctx.in(0).data<T>();
      T* dst = ctx.out(0).data<T>();
      for (int64_t i = 0, n = ctx.in(0).numel(); i < n; ++i)
        dst[i] = std::min(hi, std::max(lo, src[i]));
    });
    return OkStatus();
  }

 private:
  float min_, max_;
};
KILN_REGISTER_OP("Clip", 1, ir::kMaxOpset, &ir::MakeOp<ClipOp>);

// Kernel cases (ops/op_cases.h): a size-1 axis with odd sizes, a size above the small kernels'
// limits (512 for transcendentals, 16384 otherwise), and a 4-D activation map.
std::vector<OpCase> ShapesFor(const std::string& op, int opset, float lo, float hi) {
  std::vector<OpCase> cases;
  uint32_t seed = 1;
  for (const Shape& s : std::vector<Shape>{{3, 1, 7}, {2, 16, 9, 11}, {1, 3, 130, 129}})
    cases.push_back(OpCase(op + " " + ShapeToString(s), opset).In(CaseTensor(s, seed++, lo, hi)));
  return cases;
}
// The same and a float64 case (the reference's double instantiation; fast kernels take float32).
std::vector<OpCase> UnaryCases(const std::string& op, int opset, float lo, float hi) {
  std::vector<OpCase> cases = ShapesFor(op, opset, lo, hi);
  cases.push_back(OpCase(op + " float64[3,1,7]", opset)
                      .In(CastCopy(CaseTensor({3, 1, 7}, 4, lo, hi), DataType::kDouble)));
  return cases;
}
#define KILN_UNARY_CASES(NAME, OPSET, LO, HI)                                    \
  std::vector<OpCase> NAME##Cases() { return UnaryCases(#NAME, OPSET, LO, HI); } \
  KILN_REGISTER_OP_CASES("", #NAME, &NAME##Cases)
// Relu: float32 only; the harness's own tests (tests/kernels) run proof kernels on its three cases.
std::vector<OpCase> ReluCases() { return ShapesFor("Relu", 14, -2.f, 2.f); }
KILN_REGISTER_OP_CASES("", "Relu", &ReluCases);
KILN_UNARY_CASES(Sigmoid, 13, -6.f, 6.f);
KILN_UNARY_CASES(Tanh, 13, -3.f, 3.f);
KILN_UNARY_CASES(HardSwish, 14, -4.f, 4.f);
KILN_UNARY_CASES(HardSigmoid, 6, -4.f, 4.f);
KILN_UNARY_CASES(Abs, 13, -2.f, 2.f);
KILN_UNARY_CASES(Neg, 13, -2.f, 2.f);
KILN_UNARY_CASES(Exp, 13, -4.f, 4.f);
KILN_UNARY_CASES(Log, 13, 0.05f, 4.f);
KILN_UNARY_CASES(Sqrt, 13, 0.f, 4.f);
KILN_UNARY_CASES(Reciprocal, 13, 0.25f, 4.f);
KILN_UNARY_CASES(Erf, 13, -3.f, 3.f);
KILN_UNARY_CASES(Floor, 13, -4.f, 4.f);
KILN_UNARY_CASES(Round, 11, -4.f, 4.f);
KILN_UNARY_CASES(Sin, 7, -4.f, 4.f);
KILN_UNARY_CASES(Softplus, 1, -4.f, 30.f);

std::vector<OpCase> AttributeActivationCases() {
  std::vector<OpCase> cases = UnaryCases("LeakyRelu", 16, -2.f, 2.f);
  cases[1].Float("alpha", 0.2f);
  return cases;
}
KILN_REGISTER_OP_CASES("", "LeakyRelu", &AttributeActivationCases);

std::vector<OpCase> EluCases() {
  std::vector<OpCase> cases = UnaryCases("Elu", 6, -3.f, 2.f);
  cases[2].Float("alpha", 0.7f);
  return cases;
}
KILN_REGISTER_OP_CASES("", "Elu", &EluCases);

// Gelu-20 in both forms, and kiln.Gelu (fuse_gelu's node for older opsets).
std::vector<OpCase> GeluCases() {
  std::vector<OpCase> cases = UnaryCases("Gelu", 20, -4.f, 4.f);
  for (OpCase c : UnaryCases("Gelu tanh", 20, -4.f, 4.f))
    cases.push_back(c.Str("approximate", "tanh"));
  return cases;
}
KILN_REGISTER_OP_CASES("", "Gelu", &GeluCases);
std::vector<OpCase> KilnGeluCases() { return ShapesFor("kiln.Gelu", 1, -4.f, 4.f); }
KILN_REGISTER_OP_CASES("kiln", "Gelu", &KilnGeluCases);

// Clip-13 with both bounds as constants, only a lower bound (ReLU6's and ReLU's forms), and
// opset 6's attributes.
std::vector<OpCase> ClipCases() {
  std::vector<OpCase> cases;
  uint32_t seed = 11;
  for (const Shape& s : std::vector<Shape>{{3, 1, 7}, {2, 16, 9, 11}, {1, 3, 130, 129}}) {
    cases.push_back(OpCase("Clip [0, 6] " + ShapeToString(s), 13)
                        .In(CaseTensor(s, seed++, -8.f, 8.f))
                        .Const(CaseFloats({0.f}, {}))
                        .Const(CaseFloats({6.f}, {})));
    cases.push_back(OpCase("Clip min only " + ShapeToString(s), 13)
                        .In(CaseTensor(s, seed++, -2.f, 2.f))
                        .Const(CaseFloats({-0.5f}, {})));
  }
  cases.push_back(OpCase("Clip-6 attributes", 6)
                      .In(CaseTensor({2, 16, 9, 11}, seed++, -2.f, 2.f))
                      .Float("min", -1.f)
                      .Float("max", 0.5f));
  return cases;
}
KILN_REGISTER_OP_CASES("", "Clip", &ClipCases);

}  // namespace
}  // namespace kiln::ops
