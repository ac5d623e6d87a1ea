// Binary and variadic elementwise ops with ONNX multidirectional broadcasting: arithmetic (Add,
// Sub, Mul, Div, Pow), comparisons (Equal, Less, Greater, LessOrEqual, GreaterOrEqual -> bool),
// logic (And, Or, Xor), PRelu (slope broadcast to X), Where, and Min/Max/Sum/Mean over N inputs.
// Reference: one strided walk over the output (ForEachBroadcast2). Opset < 7 arithmetic with
// `broadcast=1, axis=k` aligns B at axis k, as those versions specified.
// Dtypes: float32, float64 and the 8/16/32/64-bit signed and unsigned integers for arithmetic,
// Min and Max (plus bool for comparisons, and strings for Equal from opset 19); Sum and Mean on
// float32, float64, int32, int64.
// Integer arithmetic is done in the type and wraps on overflow (common.h's Wrap*); integer Div
// truncates toward zero and gives 0 for a zero divisor (numpy's integer result; no trap, no
// error); Pow computes in double and converts once. float64 computes in double.
#include <climits>
#include <cmath>
#include <string>
#include <type_traits>

#include "ops/common.h"
#include "ops/op_cases.h"

namespace kiln::ops {
namespace {

using ir::ComputeContext;
using ir::InferContext;
using ir::Node;
using ir::Op;

// Shape of input 1 as the legacy (opset < 7) broadcast rule sees it.
// `axis` is the legacy attribute, or kNoAxis when the node does not use legacy broadcasting.
constexpr int64_t kNoAxis = INT64_MIN;
int64_t LegacyAxis(const Node& node) {
  if (node.opset >= 7 || node.GetInt("broadcast", 0) == 0 || !node.HasAttr("axis")) return kNoAxis;
  return node.GetInt("axis", 0);
}
Shape LegacyAligned(int64_t axis, const Shape& a, const Shape& b) {
  if (axis == kNoAxis) return b;
  if (axis < 0) axis += static_cast<int64_t>(a.size());
  Shape out = b;
  while (static_cast<int64_t>(out.size()) + axis < static_cast<int64_t>(a.size())) out.push_back(1);
  return out;
}

enum class Kind { kArith, kCompare, kLogic };

// Pow takes its own path: the exponent may have another dtype than the base.
struct PowFn {};
// Equal also compares strings (opset 19+).
struct EqFn;

template <typename Fn, Kind kKind>
class BinaryOp : public Op {
 public:
  explicit BinaryOp(const Node& node) : Op(node), legacy_axis_(LegacyAxis(node)) {}
  // Equal reads strings from opset 19 (the bool output is allocated as usual).
  bool TakesNonPlainValues() const override { return std::is_same_v<Fn, EqFn> && opset() >= 19; }

  Status Infer(InferContext& ctx) const override {
    if (ctx.dtype(0) != ctx.dtype(1) && !(std::is_same_v<Fn, PowFn>))
      return ctx.Error("inputs must have the same dtype");
    const bool strings =
        std::is_same_v<Fn, EqFn> && opset() >= 19 && ctx.dtype(0) == DataType::kString;
    if (kKind == Kind::kLogic) {
      KILN_RETURN_IF_ERROR(ctx.ExpectDtype(0, {DataType::kBool}));
    } else if (!strings) {
      KILN_RETURN_IF_ERROR(ExpectNumeric(ctx, 0, kKind == Kind::kCompare));
      if (std::is_same_v<Fn, PowFn>) KILN_RETURN_IF_ERROR(ExpectNumeric(ctx, 1));
    }
    Shape b = LegacyAligned(legacy_axis_, ctx.shape(0), ctx.shape(1));
    auto out = BroadcastShapes({ctx.shape(0), b});
    if (!out.ok()) return ctx.Error(out.status().message());
    ctx.SetOutput(0, kKind == Kind::kArith ? ctx.dtype(0) : DataType::kBool, *out);
    return OkStatus();
  }

  Status Compute(const ComputeContext& ctx) const override {
    const Tensor& a = ctx.in(0);
    const Tensor& b = ctx.in(1);
    Tensor& y = ctx.out(0);
    Shape bs = LegacyAligned(legacy_axis_, a.shape(), b.shape());
    if constexpr (kKind == Kind::kLogic) {
      const bool* pa = a.data<bool>();
      const bool* pb = b.data<bool>();
      bool* py = y.data<bool>();
      ForEachBroadcast2(y.shape(), a.shape(), bs,
                        [&](int64_t i, int64_t ia, int64_t ib) { py[i] = Fn()(pa[ia], pb[ib]); });
    } else if constexpr (kKind == Kind::kCompare) {
      if (std::is_same_v<Fn, EqFn> && a.dtype() == DataType::kString &&
          b.dtype() == DataType::kString) {
        const std::string* pa = a.data<std::string>();
        const std::string* pb = b.data<std::string>();
        bool* py = y.data<bool>();
        ForEachBroadcast2(y.shape(), a.shape(), bs,
                          [&](int64_t i, int64_t ia, int64_t ib) { py[i] = pa[ia] == pb[ib]; });
        return OkStatus();
      }
      KILN_DISPATCH_ALL(a.dtype(), describe(), Apply<T, bool>(a, b, bs, y));
    } else if constexpr (std::is_same_v<Fn, PowFn>) {
      KILN_DISPATCH_NUMERIC(a.dtype(), describe(), ComputePow<T>(a.data<T>(), a.shape(), b, bs, y));
    } else {
      KILN_DISPATCH_NUMERIC(a.dtype(), describe(), Apply<T, T>(a, b, bs, y));
    }
    return OkStatus();
  }

 private:
  template <typename T, typename Out>
  static void Apply(const Tensor& a, const Tensor& b, const Shape& bs, Tensor& y) {
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    Out* py = y.data<Out>();
    ForEachBroadcast2(y.shape(), a.shape(), bs, [&](int64_t i, int64_t ia, int64_t ib) {
      py[i] = static_cast<Out>(Fn()(pa[ia], pb[ib]));
    });
  }

  // The exponent may have any numeric dtype; computed in double, converted to T once.
  template <typename T>
  static void ComputePow(const T* pa, const Shape& as, const Tensor& b, const Shape& bs,
                         Tensor& y) {
    T* py = y.data<T>();
    ForEachBroadcast2(y.shape(), as, bs, [&](int64_t i, int64_t ia, int64_t ib) {
      const double e = ReadScalarAsDouble(b, ib);
      py[i] = static_cast<T>(std::pow(static_cast<double>(pa[ia]), e));
    });
  }

  int64_t legacy_axis_;
};

struct AddFn {
  template <typename T>
  T operator()(T a, T b) const {
    return WrapAdd(a, b);
  }
};
struct SubFn {
  template <typename T>
  T operator()(T a, T b) const {
    return WrapSub(a, b);
  }
};
struct MulFn {
  template <typename T>
  T operator()(T a, T b) const {
    return WrapMul(a, b);
  }
};
struct DivFn {
  template <typename T>
  T operator()(T a, T b) const {
    return DivideOrZero(a, b);
  }
};
struct EqFn {
  template <typename T>
  bool operator()(T a, T b) const {
    return a == b;
  }
};
struct LtFn {
  template <typename T>
  bool operator()(T a, T b) const {
    return a < b;
  }
};
struct GtFn {
  template <typename T>
  bool operator()(T a, T b) const {
    return a > b;
  }
};
struct LeFn {
  template <typename T>
  bool operator()(T a, T b) const {
    return a <= b;
  }
};
struct GeFn {
  template <typename T>
  bool operator()(T a, T b) const {
    return a >= b;
  }
};
struct AndFn {
  bool operator()(bool a, bool b) const { return a && b; }
};
struct OrFn {
  bool operator()(bool a, bool b) const { return a || b; }
};
struct XorFn {
  bool operator()(bool a, bool b) const { return a != b; }
};

KILN_REGISTER_OP("Add", 1, ir::kMaxOpset, (&ir::MakeOp<BinaryOp<AddFn, Kind::kArith>>));
KILN_REGISTER_OP("Sub", 1, ir::kMaxOpset, (&ir::MakeOp<BinaryOp<SubFn, Kind::kArith>>));
KILN_REGISTER_OP("Mul", 1, ir::kMaxOpset, (&ir::MakeOp<BinaryOp<MulFn, Kind::kArith>>));
KILN_REGISTER_OP("Div", 1, ir::kMaxOpset, (&ir::MakeOp<BinaryOp<DivFn, Kind::kArith>>));
KILN_REGISTER_OP("Pow", 1, ir::kMaxOpset, (&ir::MakeOp<BinaryOp<PowFn, Kind::kArith>>));
KILN_REGISTER_OP("Equal", 1, ir::kMaxOpset, (&ir::MakeOp<BinaryOp<EqFn, Kind::kCompare>>));
KILN_REGISTER_OP("Less", 1, ir::kMaxOpset, (&ir::MakeOp<BinaryOp<LtFn, Kind::kCompare>>));
KILN_REGISTER_OP("Greater", 1, ir::kMaxOpset, (&ir::MakeOp<BinaryOp<GtFn, Kind::kCompare>>));
KILN_REGISTER_OP("LessOrEqual", 12, ir::kMaxOpset, (&ir::MakeOp<BinaryOp<LeFn, Kind::kCompare>>));
KILN_REGISTER_OP("GreaterOrEqual", 12, ir::kMaxOpset,
                 (&ir::MakeOp<BinaryOp<GeFn, Kind::kCompare>>));
KILN_REGISTER_OP("And", 1, ir::kMaxOpset, (&ir::MakeOp<BinaryOp<AndFn, Kind::kLogic>>));
KILN_REGISTER_OP("Or", 1, ir::kMaxOpset, (&ir::MakeOp<BinaryOp<OrFn, Kind::kLogic>>));
KILN_REGISTER_OP("Xor", 1, ir::kMaxOpset, (&ir::MakeOp<BinaryOp<XorFn, Kind::kLogic>>));

// PRelu: y = x < 0 ? slope * x : x, slope broadcast unidirectionally to X. float32, float64,
// int32, int64, uint32, uint64 (PRelu-16's list; unsigned X is never negative).
class PReluOp : public Op {
 public:
  explicit PReluOp(const Node& node) : Op(node) {}
  Status Infer(InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(
        ctx.ExpectDtype(0, {DataType::kFloat, DataType::kDouble, DataType::kInt32, DataType::kInt64,
                            DataType::kUInt32, DataType::kUInt64}));
    // float16 goes with float32 (float16 models compute in float32 after lowering).
    auto f32 = [](DataType t) { return t == DataType::kFloat || t == DataType::kFloat16; };
    if (ctx.dtype(1) != ctx.dtype(0) && !(f32(ctx.dtype(0)) && f32(ctx.dtype(1))))
      return ctx.Error(std::string("slope must have X's dtype ") + DataTypeName(ctx.dtype(0)) +
                       "; got " + DataTypeName(ctx.dtype(1)));
    auto out = BroadcastShapes({ctx.shape(0), SlopeShape(ctx.shape(0), ctx.shape(1))});
    if (!out.ok() || *out != ctx.shape(0)) return ctx.Error("slope must broadcast to X's shape");
    ctx.SetOutput(0, f32(ctx.dtype(0)) ? DataType::kFloat : ctx.dtype(0), ctx.shape(0));
    return OkStatus();
  }
  Status Compute(const ComputeContext& ctx) const override {
    KILN_DISPATCH_NUMERIC(ctx.in(0).dtype(), describe(), Run<T>(ctx));
    return OkStatus();
  }

 private:
  template <typename T>
  void Run(const ComputeContext& ctx) const {
    const T* x = ctx.in(0).data<T>();
    const T* s = ctx.in(1).data<T>();
    T* y = ctx.out(0).data<T>();
    ForEachBroadcast2(ctx.in(0).shape(), ctx.in(0).shape(),
                      SlopeShape(ctx.in(0).shape(), ctx.in(1).shape()),
                      [&](int64_t i, int64_t ix, int64_t is) {
                        if constexpr (std::is_signed_v<T>)
                          y[i] = x[ix] < T(0) ? WrapMul(s[is], x[ix]) : x[ix];
                        else
                          y[i] = x[ix];
                      });
  }
  // Opsets before 7 allowed a 1-D slope matching the channel axis (axis 1).
  Shape SlopeShape(const Shape& x, const Shape& s) const {
    if (opset() < 7 && s.size() == 1 && x.size() > 2 && s[0] == x[1] && s[0] != 1) {
      Shape r(x.size() - 1, 1);
      r[0] = s[0];
      return r;
    }
    return s;
  }
};
KILN_REGISTER_OP("PRelu", 1, ir::kMaxOpset, &ir::MakeOp<PReluOp>);

class WhereOp : public Op {
 public:
  explicit WhereOp(const Node& node) : Op(node) {}
  Status Infer(InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(0, {DataType::kBool}));
    if (ctx.dtype(1) != ctx.dtype(2)) return ctx.Error("X and Y must have the same dtype");
    auto out = BroadcastShapes({ctx.shape(0), ctx.shape(1), ctx.shape(2)});
    if (!out.ok()) return ctx.Error(out.status().message());
    ctx.SetOutput(0, ctx.dtype(1), *out);
    return OkStatus();
  }
  Status Compute(const ComputeContext& ctx) const override {
    const Tensor &c = ctx.in(0), &x = ctx.in(1), &yv = ctx.in(2);
    Tensor& out = ctx.out(0);
    const size_t es = DataTypeSize(x.dtype());
    auto sc = BroadcastStrides(c.shape(), out.shape());
    auto sx = BroadcastStrides(x.shape(), out.shape());
    auto sy = BroadcastStrides(yv.shape(), out.shape());
    const Shape& os = out.shape();
    const int64_t n = out.numel();
    std::vector<int64_t> idx(os.size(), 0);
    const bool* pc = c.data<bool>();
    const char* px = static_cast<const char*>(x.raw());
    const char* py = static_cast<const char*>(yv.raw());
    char* po = static_cast<char*>(out.raw());
    for (int64_t i = 0; i < n; ++i) {
      int64_t ic = 0, ix = 0, iy = 0;
      for (size_t d = 0; d < os.size(); ++d) {
        ic += idx[d] * sc[d];
        ix += idx[d] * sx[d];
        iy += idx[d] * sy[d];
      }
      const char* src = pc[ic] ? px + ix * es : py + iy * es;
      for (size_t k = 0; k < es; ++k) po[i * es + k] = src[k];
      for (int64_t d = static_cast<int64_t>(os.size()) - 1; d >= 0; --d) {
        if (++idx[d] < os[d]) break;
        idx[d] = 0;
      }
    }
    return OkStatus();
  }
};
KILN_REGISTER_OP("Where", 9, ir::kMaxOpset, &ir::MakeOp<WhereOp>);

enum class Variadic { kMin, kMax, kSum, kMean };

// Min and Max take every numeric dtype; a NaN in any input makes the element NaN (numpy's
// minimum/maximum). Sum and Mean take float32, float64, int32, int64 (integer sums wrap, an
// integer Mean truncates).
template <Variadic kV>
class VariadicOp : public Op {
 public:
  explicit VariadicOp(const Node& node) : Op(node) {}
  Status Infer(InferContext& ctx) const override {
    if (ctx.num_inputs() == 0) return ctx.Error("needs at least one input");
    std::vector<Shape> shapes;
    for (size_t i = 0; i < ctx.num_inputs(); ++i) {
      if (ctx.dtype(i) != ctx.dtype(0)) return ctx.Error("inputs must have the same dtype");
      shapes.push_back(ctx.shape(i));
    }
    if (kV == Variadic::kMin || kV == Variadic::kMax)
      KILN_RETURN_IF_ERROR(ExpectNumeric(ctx, 0));
    else
      KILN_RETURN_IF_ERROR(ctx.ExpectDtype(
          0, {DataType::kFloat, DataType::kDouble, DataType::kInt32, DataType::kInt64}));
    auto out = BroadcastShapes(shapes);
    if (!out.ok()) return ctx.Error(out.status().message());
    ctx.SetOutput(0, ctx.dtype(0), *out);
    return OkStatus();
  }
  Status Compute(const ComputeContext& ctx) const override {
    Tensor& y = ctx.out(0);
    KILN_DISPATCH_NUMERIC(y.dtype(), describe(), {
      T* py = y.data<T>();
      const Tensor& a0 = ctx.in(0);
      ForEachBroadcast2(y.shape(), a0.shape(), a0.shape(),
                        [&](int64_t i, int64_t ia, int64_t) { py[i] = a0.data<T>()[ia]; });
      for (size_t k = 1; k < ctx.inputs.size(); ++k) {
        const Tensor& ak = ctx.in(k);
        const T* pk = ak.data<T>();
        ForEachBroadcast2(y.shape(), y.shape(), ak.shape(), [&](int64_t i, int64_t, int64_t ib) {
          const T v = pk[ib];
          if constexpr (kV == Variadic::kMin)
            py[i] = v < py[i] || IsNan(v) ? v : py[i];
          else if constexpr (kV == Variadic::kMax)
            py[i] = v > py[i] || IsNan(v) ? v : py[i];
          else
            py[i] = WrapAdd(py[i], v);
        });
      }
      if constexpr (kV == Variadic::kMean) {
        const T n = static_cast<T>(ctx.inputs.size());
        for (int64_t i = 0; i < y.numel(); ++i) py[i] = DivideOrZero(py[i], n);
      }
    });
    return OkStatus();
  }
};
KILN_REGISTER_OP("Min", 1, ir::kMaxOpset, &ir::MakeOp<VariadicOp<Variadic::kMin>>);
KILN_REGISTER_OP("Max", 1, ir::kMaxOpset, &ir::MakeOp<VariadicOp<Variadic::kMax>>);
KILN_REGISTER_OP("Sum", 1, ir::kMaxOpset, &ir::MakeOp<VariadicOp<Variadic::kSum>>);
KILN_REGISTER_OP("Mean", 1, ir::kMaxOpset, &ir::MakeOp<VariadicOp<Variadic::kMean>>);

// Kernel cases (ops/op_cases.h): equal shapes (small and above the small kernels' 16384
// elements), a per-channel operand [N,C,H,W] x [1,C,1,1] (constant too: SE blocks' scale), a
// scalar, both operands broadcast ([1,3,1,7] with [2,1,5,1]) and the broadcast operand first.
std::vector<OpCase> BinaryCases(const std::string& op, float lo, float hi) {
  struct Pair {
    Shape a, b;
    bool b_const;
  };
  const std::vector<Pair> pairs = {{{3, 1, 7}, {3, 1, 7}, false},
                                   {{1, 3, 130, 129}, {1, 3, 130, 129}, false},
                                   {{2, 16, 9, 11}, {1, 16, 1, 1}, false},
                                   {{2, 16, 9, 11}, {1, 16, 1, 1}, true},
                                   {{2, 16, 9, 11}, {}, true},
                                   {{1, 3, 1, 7}, {2, 1, 5, 1}, false},
                                   {{16, 1, 1}, {2, 16, 9, 11}, false}};
  std::vector<OpCase> cases;
  uint32_t seed = 21;
  for (const Pair& p : pairs) {
    OpCase c(op + " " + ShapeToString(p.a) + " " + ShapeToString(p.b) + (p.b_const ? " const" : ""),
             14);
    c.In(CaseTensor(p.a, seed++, -2.f, 2.f));
    Tensor b = CaseTensor(p.b, seed++, lo, hi);
    if (p.b_const)
      c.Const(b);
    else
      c.In(b);
    cases.push_back(std::move(c));
  }
  return cases;
}
std::vector<OpCase> AddCases() { return BinaryCases("Add", -2.f, 2.f); }
std::vector<OpCase> SubCases() { return BinaryCases("Sub", -2.f, 2.f); }
std::vector<OpCase> MulCases() { return BinaryCases("Mul", -2.f, 2.f); }
std::vector<OpCase> DivCases() { return BinaryCases("Div", 0.5f, 2.f); }
KILN_REGISTER_OP_CASES("", "Add", &AddCases);
KILN_REGISTER_OP_CASES("", "Sub", &SubCases);
KILN_REGISTER_OP_CASES("", "Mul", &MulCases);
KILN_REGISTER_OP_CASES("", "Div", &DivCases);

// Pow with a positive base (a negative base with a fractional exponent is NaN on both sides).
std::vector<OpCase> PowCases() {
  std::vector<OpCase> cases;
  cases.push_back(OpCase("Pow [2,16,9,11] ^ [2,16,9,11]", 15)
                      .In(CaseTensor({2, 16, 9, 11}, 41, 0.1f, 2.f))
                      .In(CaseTensor({2, 16, 9, 11}, 42, -2.f, 2.f)));
  cases.push_back(OpCase("Pow [3,1,7] ^ 2 (constant)", 15)
                      .In(CaseTensor({3, 1, 7}, 43, 0.1f, 2.f))
                      .Const(CaseFloats({2.f}, {})));
  cases.push_back(OpCase("Pow [1,3,1,7] ^ [2,1,5,1]", 15)
                      .In(CaseTensor({1, 3, 1, 7}, 44, 0.1f, 2.f))
                      .In(CaseTensor({2, 1, 5, 1}, 45, -1.f, 1.f)));
  return cases;
}
KILN_REGISTER_OP_CASES("", "Pow", &PowCases);

// Min and Max: two operands with broadcasting, one operand, three operands.
std::vector<OpCase> MinMaxCases(const std::string& op) {
  std::vector<OpCase> cases = BinaryCases(op, -2.f, 2.f);
  cases.push_back(OpCase(op + " of one [3,1,7]", 13).In(CaseTensor({3, 1, 7}, 51)));
  cases.push_back(OpCase(op + " of three", 13)
                      .In(CaseTensor({2, 3, 5}, 52))
                      .In(CaseTensor({3, 1}, 53))
                      .In(CaseTensor({5}, 54)));
  return cases;
}
// Equal on strings (opset 19): equal shapes and broadcast.
std::vector<OpCase> EqualStringCases() {
  auto strings = [](std::vector<std::string> v, Shape shape) {
    Tensor t = Tensor::Strings(std::move(shape));
    for (size_t i = 0; i < v.size(); ++i) t.data<std::string>()[i] = v[i];
    return t;
  };
  return {OpCase("strings [2,3] == [3]", 19)
              .In(strings({"a", "", "cc", "x", "b", "cc"}, {2, 3}))
              .In(strings({"a", "b", "cc"}, {3})),
          OpCase("strings [2] == [2]", 19)
              .In(strings({"s1", "s2"}, {2}))
              .In(strings({"s1", "s3"}, {2}))};
}
KILN_REGISTER_OP_CASES("", "Equal", &EqualStringCases);

std::vector<OpCase> MinCases() { return MinMaxCases("Min"); }
std::vector<OpCase> MaxCases() { return MinMaxCases("Max"); }
KILN_REGISTER_OP_CASES("", "Min", &MinCases);
KILN_REGISTER_OP_CASES("", "Max", &MaxCases);

}  // namespace
}  // namespace kiln::ops
