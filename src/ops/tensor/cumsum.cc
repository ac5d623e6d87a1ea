// CumSum (opset 11, 14): running sums of x along `axis`, given as an int32/int64 scalar (or
// 1-element) input that may be negative. exclusive = 1 leaves each element out of its own sum
// (the first becomes 0); reverse = 1 sums from the end. float32 and float64 sums accumulate in
// double; int32, int64, uint32 and uint64 sums wrap. An axis outside [-rank, rank) is an error at
// inference when the axis is known, at run time otherwise.
#include <type_traits>

#include "ops/common.h"
#include "ops/op_cases.h"
#include "ops/tensor/tensor_util.h"

namespace kiln::ops {
namespace {

struct CumSumAttrs : ir::OpAttrs {
  bool exclusive = false, reverse = false;
};

// Accumulator type: double for floats, the unsigned type of the same width for integers (wraps).
template <typename T, bool kFloat = std::is_floating_point_v<T>>
struct CumAccOf {
  using type = double;
};
template <typename T>
struct CumAccOf<T, false> {
  using type = std::make_unsigned_t<T>;
};
template <typename T>
using CumAcc = typename CumAccOf<T>::type;

class CumSumOp final : public ir::Op {
 public:
  static StatusOr<std::unique_ptr<ir::Op>> Create(const ir::Node& node) {
    auto op = std::make_unique<CumSumOp>(node);
    for (auto [name, field] :
         {std::pair{"exclusive", &op->a_.exclusive}, std::pair{"reverse", &op->a_.reverse}}) {
      const int64_t v = node.GetInt(name, 0);
      if (v != 0 && v != 1)
        return ir::AttrError(node, std::string(name) + " must be 0 or 1; got " + std::to_string(v));
      *field = v == 1;
    }
    return std::unique_ptr<ir::Op>(std::move(op));
  }
  explicit CumSumOp(const ir::Node& node) : Op(node) {}

  Status Infer(ir::InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(
        ctx.ExpectDtype(0, {DataType::kFloat, DataType::kDouble, DataType::kInt32, DataType::kInt64,
                            DataType::kUInt32, DataType::kUInt64}));
    if (!ctx.has_input(1)) return ctx.Error("axis (input 1) is required; got none");
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(1, {DataType::kInt64, DataType::kInt32}));
    if (NumElements(ctx.shape(1)) != 1 || ctx.rank(1) > 1)
      return ctx.Error("axis must be a scalar or a 1-element 1-D tensor; got shape " +
                       ShapeToString(ctx.shape(1)));
    if (ctx.value(1) != nullptr) {
      const int64_t axis = ReadInts(*ctx.value(1))[0];
      if (!NormalizeAxis(axis, ctx.rank(0)).ok()) return ctx.Error(AxisRule(axis, ctx.rank(0)));
    }
    ctx.SetOutput(0, ctx.dtype(0), ctx.shape(0));
    return OkStatus();
  }

  Status Compute(const ir::ComputeContext& ctx) const override {
    KILN_DISPATCH_NUMERIC(ctx.in(0).dtype(), describe(), return Run<T>(ctx));
    return OkStatus();
  }

  const ir::OpAttrs* attributes() const override { return &a_; }

 private:
  static std::string AxisRule(int64_t axis, int64_t rank) {
    return "axis must be in [" + std::to_string(-rank) + ", " + std::to_string(rank) + "); got " +
           std::to_string(axis);
  }

  template <typename T>
  Status Run(const ir::ComputeContext& ctx) const {
    const Tensor& x = ctx.in(0);
    std::vector<int64_t> axes;
    KILN_ASSIGN_OR_RETURN(axes, RunInts(*this, ctx.in(1), "axis"));
    if (axes.size() != 1) return RunError("axis must have 1 element; got " + IntsToString(axes));
    auto axis = NormalizeAxis(axes[0], x.rank());
    if (!axis.ok()) return RunError(AxisRule(axes[0], x.rank()));
    const Shape& s = x.shape();
    const int64_t len = s[*axis];
    const int64_t inner = NumElements(Shape(s.begin() + *axis + 1, s.end()));
    const int64_t outer = NumElements(Shape(s.begin(), s.begin() + *axis));
    const T* src = x.data<T>();
    T* dst = ctx.out(0).data<T>();
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        CumAcc<T> acc = 0;
        for (int64_t step = 0; step < len; ++step) {
          const int64_t j = a_.reverse ? len - 1 - step : step;
          const int64_t at = (o * len + j) * inner + i;
          const CumAcc<T> v = static_cast<CumAcc<T>>(src[at]);
          if (!a_.exclusive) acc += v;
          dst[at] = static_cast<T>(acc);
          if (a_.exclusive) acc += v;
        }
      }
    return OkStatus();
  }

  CumSumAttrs a_;
};
KILN_REGISTER_OP("CumSum", 11, ir::kMaxOpset, &CumSumOp::Create);

// Reference cases: every exclusive/reverse pair on a middle axis, int64 and int32 data, 1-D axis.
std::vector<OpCase> CumSumCases() {
  std::vector<OpCase> cases;
  uint32_t seed = 41;
  for (int ex : {0, 1})
    for (int rev : {0, 1})
      cases.push_back(OpCase("float32[2,5,3] axis 1 exclusive " + std::to_string(ex) + " reverse " +
                                 std::to_string(rev),
                             14)
                          .Int("exclusive", ex)
                          .Int("reverse", rev)
                          .In(CaseTensor({2, 5, 3}, seed++))
                          .Const(Tensor::FromVector<int64_t>({1}, {})));
  cases.push_back(OpCase("int64[3,4] axis -1 as [1] int32", 11)
                      .In(CaseInts(DataType::kInt64, {3, 4}, seed++, -1000, 1000))
                      .In(Tensor::FromVector<int32_t>({-1}, {1})));
  cases.push_back(OpCase("int32[7] reverse exclusive", 14)
                      .Int("exclusive", 1)
                      .Int("reverse", 1)
                      .In(CaseInts(DataType::kInt32, {7}, seed++, -1000, 1000))
                      .In(Tensor::FromVector<int64_t>({0}, {})));
  return cases;
}
KILN_REGISTER_OP_CASES("", "CumSum", &CumSumCases);

}  // namespace
}  // namespace kiln::ops
