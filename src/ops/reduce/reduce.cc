// Reduce* ops: ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd, ReduceL1, ReduceL2,
// ReduceLogSum, ReduceLogSumExp, ReduceSumSquare.
//
// Axes come from the `axes` attribute, except ReduceSum at opset >= 13 and every Reduce* at opset
// 18, which take them as optional input 1 (a shape input: its values fix the output shape) with
// `noop_with_empty_axes`: no or empty axes reduce everything, or, with noop_with_empty_axes=1,
// copy the input unchanged. `keepdims` (default 1) keeps reduced dims as size 1.
//
// Reference algorithm: one pass over the input in row-major order; each element's output offset
// is tracked incrementally with strides that are 0 along reduced dims; accumulators are double
// for float32 and float64, int64 for signed and uint64 for unsigned integer inputs (so sums of
// 64-bit integers stay exact; integer sums and products wrap in 64 bits before the conversion to
// the output type). ReduceLogSumExp makes a first pass for the per-output maximum and sums
// exp(x - max) (numerically stable; float64 shifts only where exp(x) would overflow or underflow).
// Reducing over an empty dim gives the identity of the reduction (0 for sums, 1 for products,
// -inf/lowest for Max, +inf/max for Min, NaN for a float Mean, 0 for an integer Mean).
// Dtypes (ONNX's lists): float32 and float64 for all; int32, int64, uint32, uint64 for every kind
// but LogSum and LogSumExp; Max and Min also on int8, uint8, int16, uint16, and bool from opset 20.
// NaN propagates through Max and Min.
#include "ops/reduce/reduce.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "ops/common.h"
#include "ops/op_cases.h"
#include "ops/tensor/tensor_util.h"

namespace kiln::ops {
namespace {

using ir::ComputeContext;
using ir::InferContext;
using ir::Node;
using ir::Op;

enum class ReduceKind { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kLogSum, kLogSumExp, kSumSquare };

bool AcceptsIntegers(ReduceKind k) {
  return k != ReduceKind::kLogSum && k != ReduceKind::kLogSumExp;
}
bool AcceptsSmallIntegers(ReduceKind k) { return k == ReduceKind::kMax || k == ReduceKind::kMin; }

// Calls f(in_offset, out_offset) for every input element; out_strides are 0 on reduced dims.
template <typename F>
void ForEachReduced(const Shape& in, const std::vector<int64_t>& out_strides, F&& f) {
  const int64_t n = NumElements(in);
  if (n == 0) return;
  const int64_t r = static_cast<int64_t>(in.size());
  std::vector<int64_t> idx(in.size(), 0);
  int64_t o = 0;
  for (int64_t i = 0; i < n; ++i) {
    f(i, o);
    for (int64_t d = r - 1; d >= 0; --d) {
      if (++idx[d] < in[d]) {
        o += out_strides[d];
        break;
      }
      o -= out_strides[d] * (in[d] - 1);
      idx[d] = 0;
    }
  }
}

template <typename T>
void ReduceTyped(ReduceKind kind, const Tensor& x, const std::vector<bool>& reduced, Tensor& y) {
  using Acc = std::conditional_t<std::is_floating_point_v<T>, double,
                                 std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>>;
  const Shape& in = x.shape();
  const int64_t out_n = y.numel();
  const int64_t in_n = x.numel();
  const int64_t count = out_n == 0 ? 0 : in_n / out_n;

  // Output strides over the input's dims (kept dims only; reduced dims contribute nothing).
  std::vector<int64_t> out_strides(in.size(), 0);
  int64_t stride = 1;
  for (int64_t d = static_cast<int64_t>(in.size()) - 1; d >= 0; --d) {
    if (reduced[d]) continue;
    out_strides[d] = stride;
    stride *= in[d];
  }

  const T* src = x.data<T>();
  T* dst = y.data<T>();
  Acc init = 0;
  if (kind == ReduceKind::kProd) init = 1;
  constexpr bool kInf = std::numeric_limits<Acc>::has_infinity;
  if (kind == ReduceKind::kMax)
    init = kInf ? -std::numeric_limits<Acc>::infinity()
                : static_cast<Acc>(std::numeric_limits<T>::lowest());
  if (kind == ReduceKind::kMin)
    init = kInf ? std::numeric_limits<Acc>::infinity()
                : static_cast<Acc>(std::numeric_limits<T>::max());
  std::vector<Acc> acc(static_cast<size_t>(out_n), init);

  std::vector<double> shift;  // ReduceLogSumExp: per-output max (0 when not finite)
  if (kind == ReduceKind::kLogSumExp) {
    shift.assign(static_cast<size_t>(out_n), -std::numeric_limits<double>::infinity());
    ForEachReduced(in, out_strides, [&](int64_t i, int64_t o) {
      shift[o] = std::max(shift[o], static_cast<double>(src[i]));
    });
    // float64 keeps the plain log(sum(exp(x))) unless exp would overflow or underflow (|max| >
    // 700), so that it matches numpy's (ONNX's reference) to the bit.
    for (double& s : shift)
      if (!std::isfinite(s) || (std::is_same_v<T, double> && std::fabs(s) <= 700.0)) s = 0.0;
  }

  ForEachReduced(in, out_strides, [&](int64_t i, int64_t o) {
    const Acc v = static_cast<Acc>(src[i]);
    Acc& a = acc[o];
    switch (kind) {
      case ReduceKind::kSum:
      case ReduceKind::kMean:
      case ReduceKind::kLogSum:
        a = WrapAdd(a, v);
        break;
      case ReduceKind::kMax:
        if (IsNan(v) || v > a) a = IsNan(a) ? a : v;
        break;
      case ReduceKind::kMin:
        if (IsNan(v) || v < a) a = IsNan(a) ? a : v;
        break;
      case ReduceKind::kProd:
        a = WrapMul(a, v);
        break;
      case ReduceKind::kL1:
        if constexpr (std::is_signed_v<Acc>)
          a = WrapAdd(a, v < 0 ? WrapNeg(v) : v);
        else
          a = WrapAdd(a, v);
        break;
      case ReduceKind::kL2:
      case ReduceKind::kSumSquare:
        a = WrapAdd(a, WrapMul(v, v));
        break;
      case ReduceKind::kLogSumExp:
        a += static_cast<Acc>(std::exp(static_cast<double>(src[i]) - shift[o]));
        break;
    }
  });

  for (int64_t o = 0; o < out_n; ++o) {
    Acc a = acc[o];
    switch (kind) {
      case ReduceKind::kMean:
        if constexpr (std::is_floating_point_v<Acc>)
          a = a / static_cast<Acc>(count);
        else
          a = DivideOrZero(a, static_cast<Acc>(count));
        break;
      case ReduceKind::kL2:
        a = static_cast<Acc>(std::sqrt(static_cast<double>(a)));
        break;
      case ReduceKind::kLogSum:
        a = static_cast<Acc>(std::log(static_cast<double>(a)));
        break;
      case ReduceKind::kLogSumExp:
        a = static_cast<Acc>(std::log(static_cast<double>(a)) + shift[o]);
        break;
      default:
        break;
    }
    dst[o] = static_cast<T>(a);
  }
}

class ReduceOp : public Op {
 public:
  const ir::OpAttrs* attributes() const override { return &a_; }
  ReduceOp(const Node& node, ReduceKind kind) : Op(node), kind_(kind) {
    a_.axes_from_input = (kind == ReduceKind::kSum && node.opset >= 13) || node.opset >= 18;
    a_.keepdims = node.GetInt("keepdims", 1) != 0;
    a_.noop_with_empty_axes = node.GetInt("noop_with_empty_axes", 0) != 0;
    a_.axes = node.GetInts("axes");
  }

  static StatusOr<std::unique_ptr<Op>> Create(const Node& node, ReduceKind kind) {
    const int64_t keepdims = node.GetInt("keepdims", 1);
    if (keepdims != 0 && keepdims != 1)
      return ir::AttrError(node, "keepdims must be 0 or 1; got " + std::to_string(keepdims));
    const int64_t noop = node.GetInt("noop_with_empty_axes", 0);
    if (noop != 0 && noop != 1)
      return ir::AttrError(node,
                           "noop_with_empty_axes must be 0 or 1; got " + std::to_string(noop));
    auto op = std::make_unique<ReduceOp>(node, kind);
    if (op->a_.axes_from_input && node.HasAttr("axes"))
      return ir::AttrError(node, "axes is an input (not an attribute) at opset " +
                                     std::to_string(node.opset) + "; got an `axes` attribute");
    return std::unique_ptr<Op>(std::move(op));
  }

  std::vector<int> ShapeInputs() const override {
    return a_.axes_from_input ? std::vector<int>{1} : std::vector<int>{};
  }

  Status Infer(InferContext& ctx) const override {
    using D = DataType;
    if (AcceptsSmallIntegers(kind_)) {
      KILN_RETURN_IF_ERROR(ExpectNumeric(ctx, 0, /*with_bool=*/opset() >= 20));
    } else if (AcceptsIntegers(kind_)) {
      KILN_RETURN_IF_ERROR(ctx.ExpectDtype(
          0, {D::kFloat, D::kDouble, D::kInt32, D::kInt64, D::kUInt32, D::kUInt64}));
    } else {
      KILN_RETURN_IF_ERROR(ctx.ExpectDtype(0, {D::kFloat, D::kDouble}));
    }
    const Tensor* axes = nullptr;
    if (a_.axes_from_input && ctx.has_input(1)) {
      KILN_RETURN_IF_ERROR(ctx.ExpectDtype(1, {DataType::kInt64}));
      axes = ctx.value(1);
      if (!axes) return ctx.Error("the axes input (1) must be known to infer the output shape");
      if (axes->rank() > 1)
        return ctx.Error("the axes input must be 1-D; got shape " + ShapeToString(axes->shape()));
    }
    std::vector<bool> reduced;
    std::string why;
    if (!ResolveAxes(ctx.shape(0), axes, &reduced, &why)) return ctx.Error(why);
    Shape out;
    for (size_t d = 0; d < reduced.size(); ++d) {
      if (!reduced[d])
        out.push_back(ctx.shape(0)[d]);
      else if (a_.keepdims)
        out.push_back(1);
    }
    ctx.SetOutput(0, ctx.dtype(0), std::move(out));
    return OkStatus();
  }

  Status Compute(const ComputeContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    std::vector<bool> reduced;
    std::string why;
    const Tensor* axes = a_.axes_from_input && ctx.has(1) ? &ctx.in(1) : nullptr;
    if (!ResolveAxes(x.shape(), axes, &reduced, &why)) return RunError(why);
    bool any = false;
    for (bool r : reduced) any = any || r;
    if (!any) {  // noop_with_empty_axes: the output is the input
      if (x.bytes() != ctx.out(0).bytes()) return RunError("output size does not match the input");
      if (x.bytes()) std::memcpy(ctx.out(0).raw(), x.raw(), x.bytes());
      return OkStatus();
    }
    if (x.dtype() == DataType::kBool) {  // one byte, 0 or 1: max is any, min is all
      ReduceTyped<uint8_t>(kind_, x, reduced, ctx.out(0));
      return OkStatus();
    }
    KILN_DISPATCH_NUMERIC(x.dtype(), describe(), ReduceTyped<T>(kind_, x, reduced, ctx.out(0)));
    return OkStatus();
  }

 private:
  // Fills `reduced` (one flag per input dim). A scalar input reduces to itself. When no dim is
  // reduced (only with noop_with_empty_axes) the op is an identity.
  bool ResolveAxes(const Shape& shape, const Tensor* axes_tensor, std::vector<bool>* reduced,
                   std::string* why) const {
    const int64_t rank = static_cast<int64_t>(shape.size());
    std::vector<int64_t> axes =
        a_.axes_from_input ? (axes_tensor ? ReadInts(*axes_tensor) : std::vector<int64_t>{})
                           : a_.axes;
    reduced->assign(static_cast<size_t>(rank), false);
    if (axes.empty()) {
      if (!(a_.axes_from_input && a_.noop_with_empty_axes)) reduced->assign(rank, true);
      return true;
    }
    for (int64_t a : axes) {
      if (a < -rank || a >= rank) {
        *why = "axes must be in [-rank, rank-1] = [" + std::to_string(-rank) + ", " +
               std::to_string(rank - 1) + "]; got " + std::to_string(a);
        return false;
      }
      const int64_t n = a < 0 ? a + rank : a;
      if ((*reduced)[n]) {
        *why = "axes must not name a dimension twice; got dimension " + std::to_string(n) +
               " again as axis " + std::to_string(a);
        return false;
      }
      (*reduced)[n] = true;
    }
    return true;
  }

  ReduceKind kind_;
  ReduceAttrs a_;
};

#define KILN_REDUCE_OP(NAME, KIND)                               \
  StatusOr<std::unique_ptr<Op>> Create##NAME(const Node& node) { \
    return ReduceOp::Create(node, ReduceKind::KIND);             \
  }                                                              \
  KILN_REGISTER_OP(#NAME, 1, ir::kMaxOpset, &Create##NAME)

KILN_REDUCE_OP(ReduceSum, kSum);
KILN_REDUCE_OP(ReduceMean, kMean);
KILN_REDUCE_OP(ReduceMax, kMax);
KILN_REDUCE_OP(ReduceMin, kMin);
KILN_REDUCE_OP(ReduceProd, kProd);
KILN_REDUCE_OP(ReduceL1, kL1);
KILN_REDUCE_OP(ReduceL2, kL2);
KILN_REDUCE_OP(ReduceLogSum, kLogSum);
KILN_REDUCE_OP(ReduceLogSumExp, kLogSumExp);
KILN_REDUCE_OP(ReduceSumSquare, kSumSquare);

// Kernel cases (ops/op_cases.h). cuda.<reduce>.kernel takes float32 up to rank 6 with the axes
// attribute or a constant int64 axes input; other dtypes run on the reference only. Axes
// trailing (global pooling), leading, non-contiguous, negative, single size-1, all and none
// (everything, or with noop_with_empty_axes a copy), keepdims 0 and 1; axes as the attribute
// (opset 13, 11, 1) and the input (ReduceSum-13, Reduce*-18). LogSum gets positive inputs.
std::vector<OpCase> ReduceCasesFor(const std::string& op, ReduceKind kind) {
  struct Spec {
    Shape x;
    std::vector<int64_t> axes;  // empty: none given
    int64_t keepdims;
    int opset = 13;
  };
  const std::vector<Spec> specs = {
      {{2, 3, 4, 5}, {2, 3}, 1},
      {{2, 3, 4, 5}, {1}, 0},
      {{2, 3, 4, 5}, {0, 2}, 0},
      {{2, 3, 4, 5}, {-1}, 1},
      {{2, 3, 4, 5}, {0, 1, 2, 3}, 0},
      {{2, 3, 4, 5}, {}, 1},
      {{3, 1, 7}, {1}, 0},
      {{2, 16, 9, 11}, {2, 3}, 1},
      {{1, 3, 130, 129}, {1}, 1},
      {{2, 1, 3, 1, 4, 5}, {1, 3, 5}, 0},
      {{3, 1, 7}, {-3, 2}, 1, 18},
      {{2, 16, 9, 11}, {}, 0, 18},
      {{3, 1, 7}, {0}, 1, 11},
      {{5, 2}, {1}, 0, 1},
  };
  const bool positive = kind == ReduceKind::kLogSum;
  std::vector<OpCase> cases;
  uint32_t seed = 401;
  for (const Spec& s : specs) {
    const bool from_input = (kind == ReduceKind::kSum && s.opset >= 13) || s.opset >= 18;
    OpCase c(op + "-" + std::to_string(s.opset) + " " + ShapeToString(s.x) + " axes " +
                 (s.axes.empty() ? "none" : IntsToString(s.axes)) + " keepdims " +
                 std::to_string(s.keepdims),
             s.opset);
    c.In(CaseTensor(s.x, seed++, positive ? 0.1f : -1.f, positive ? 2.f : 1.f));
    c.Int("keepdims", s.keepdims);
    if (!s.axes.empty() && from_input) c.Const(CaseInt64s(s.axes));
    if (!s.axes.empty() && !from_input) c.Ints("axes", s.axes);
    cases.push_back(std::move(c));
  }
  // Empty axes with noop_with_empty_axes: the input unchanged.
  cases.push_back(OpCase(op + "-18 [3,1,7] empty axes, noop_with_empty_axes", 18)
                      .In(CaseTensor({3, 1, 7}, seed++, 0.1f, 2.f))
                      .Const(CaseInt64s({}))
                      .Int("noop_with_empty_axes", 1));
  if (AcceptsIntegers(kind)) {
    OpCase c(op + "-13 int64[2,3,4] axes [0,2]", 13);
    c.In(CaseInts(DataType::kInt64, {2, 3, 4}, seed++, -9, 9));
    if (kind == ReduceKind::kSum)
      c.Const(CaseInt64s({0, 2}));
    else
      c.Ints("axes", {0, 2});
    cases.push_back(std::move(c));
  }
  // float64 for every kind; uint32 where integers are taken; int16 for Max and Min.
  cases.push_back(OpCase(op + "-18 float64[2,3,4] axes [1]", 18)
                      .In(CastCopy(CaseTensor({2, 3, 4}, seed++, positive ? 0.1f : -1.f, 2.f),
                                   DataType::kDouble))
                      .Const(CaseInt64s({1})));
  if (AcceptsIntegers(kind))
    cases.push_back(
        OpCase(op + "-18 uint32[3,1,5] axes [0,2]", 18)
            .In(CastCopy(CaseInts(DataType::kInt64, {3, 1, 5}, seed++, 0, 9), DataType::kUInt32))
            .Const(CaseInt64s({0, 2})));
  if (AcceptsSmallIntegers(kind))
    cases.push_back(OpCase(op + "-18 int16[2,5] axes [1]", 18)
                        .In(CastCopy(CaseInts(DataType::kInt64, {2, 5}, seed++, -32768, 32767),
                                     DataType::kInt16))
                        .Const(CaseInt64s({1})));
  if (AcceptsSmallIntegers(kind))
    cases.push_back(OpCase(op + "-20 int8[3,1,7] axes [2], keepdims 0", 20)
                        .In(CaseInts(DataType::kInt8, {3, 1, 7}, seed++, -128, 127))
                        .Const(CaseInt64s({2}))
                        .Int("keepdims", 0));
  return cases;
}

#define KILN_REDUCE_CASES(NAME, KIND)                                                   \
  std::vector<OpCase> NAME##Cases() { return ReduceCasesFor(#NAME, ReduceKind::KIND); } \
  KILN_REGISTER_OP_CASES("", #NAME, &NAME##Cases)

KILN_REDUCE_CASES(ReduceSum, kSum);
KILN_REDUCE_CASES(ReduceMean, kMean);
KILN_REDUCE_CASES(ReduceMax, kMax);
KILN_REDUCE_CASES(ReduceMin, kMin);
KILN_REDUCE_CASES(ReduceSumSquare, kSumSquare);
KILN_REDUCE_CASES(ReduceL2, kL2);
// Reference-only ops (cpu.<op>.ref), cheap to cover with the same cases.
KILN_REDUCE_CASES(ReduceProd, kProd);
KILN_REDUCE_CASES(ReduceL1, kL1);
KILN_REDUCE_CASES(ReduceLogSum, kLogSum);
KILN_REDUCE_CASES(ReduceLogSumExp, kLogSumExp);

}  // namespace
}  // namespace kiln::ops
