// Mod (opset 10, 13): elementwise remainder of A / B with multidirectional broadcasting.
// fmod = 0 (integers only): the result takes the divisor's sign, as Python's %; fmod = 1: the
// dividend's sign, as C's fmod (floats must use fmod = 1). Integer division by zero is a run-time
// InvalidArgument naming the element; INT_MIN % -1 is 0. float32, float64 and the 8/16/32/64-bit
// signed and unsigned integers; float16 runs as float32 (lowered).
#include <cmath>
#include <type_traits>

#include "ops/common.h"
#include "ops/op_cases.h"

namespace kiln::ops {
namespace {

struct ModAttrs : ir::OpAttrs {
  bool fmod = false;
};

// Truncated remainder (sign of a), or floored (sign of b) when !fmod. b != 0.
template <typename T>
T Remainder(T a, T b, bool fmod) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::fmod(a, b);  // Infer rejects floats with fmod = 0
  } else {
    if constexpr (std::is_signed_v<T>)
      if (b == -1) return 0;  // avoids INT_MIN % -1
    T r = static_cast<T>(a % b);
    if constexpr (std::is_signed_v<T>)
      if (!fmod && r != 0 && ((r < 0) != (b < 0))) r = static_cast<T>(r + b);
    return r;
  }
}

class ModOp final : public ir::Op {
 public:
  static StatusOr<std::unique_ptr<ir::Op>> Create(const ir::Node& node) {
    const int64_t fmod = node.GetInt("fmod", 0);
    if (fmod != 0 && fmod != 1)
      return ir::AttrError(node, "fmod must be 0 or 1; got " + std::to_string(fmod));
    auto op = std::make_unique<ModOp>(node);
    op->a_.fmod = fmod == 1;
    return std::unique_ptr<ir::Op>(std::move(op));
  }
  explicit ModOp(const ir::Node& node) : Op(node) {}

  Status Infer(ir::InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ExpectNumeric(ctx, 0));
    if (ctx.dtype(1) != ctx.dtype(0))
      return ctx.Error(std::string("B must have A's dtype ") + DataTypeName(ctx.dtype(0)) +
                       "; got " + DataTypeName(ctx.dtype(1)));
    const DataType t = ctx.dtype(0);
    if ((t == DataType::kFloat || t == DataType::kFloat16 || t == DataType::kDouble) && !a_.fmod)
      return ctx.Error("fmod must be 1 for floating-point inputs; got 0");
    auto out = BroadcastShapes({ctx.shape(0), ctx.shape(1)});
    if (!out.ok()) return ctx.Error(out.status().message());
    ctx.SetOutput(0, ctx.dtype(0), *out);
    return OkStatus();
  }

  Status Compute(const ir::ComputeContext& ctx) const override {
    KILN_DISPATCH_ALL(ctx.in(0).dtype(), describe(), return Run<T>(ctx));
    return OkStatus();
  }

  const ir::OpAttrs* attributes() const override { return &a_; }

 private:
  template <typename T>
  Status Run(const ir::ComputeContext& ctx) const {
    if constexpr (std::is_same_v<T, bool>) {
      return RunError("inputs must be numeric; got bool");
    } else {
      const T* a = ctx.in(0).data<T>();
      const T* b = ctx.in(1).data<T>();
      T* y = ctx.out(0).data<T>();
      int64_t zero_at = -1;
      ForEachBroadcast2(ctx.out(0).shape(), ctx.in(0).shape(), ctx.in(1).shape(),
                        [&](int64_t i, int64_t ia, int64_t ib) {
                          if (std::is_integral_v<T> && b[ib] == 0) {
                            if (zero_at < 0) zero_at = ib;
                            y[i] = 0;
                            return;
                          }
                          y[i] = Remainder<T>(a[ia], b[ib], a_.fmod);
                        });
      if (zero_at >= 0)
        return RunError("integer divisors must be nonzero; got 0 at B element " +
                        std::to_string(zero_at));
      return OkStatus();
    }
  }

  ModAttrs a_;
};
KILN_REGISTER_OP("Mod", 10, ir::kMaxOpset, &ModOp::Create);

// Reference cases: mixed signs for both fmod values, broadcast, INT_MIN % -1, int8 and float32.
std::vector<OpCase> ModCases() {
  std::vector<OpCase> cases;
  for (int fmod : {0, 1})
    cases.push_back(OpCase("int32 mixed signs fmod " + std::to_string(fmod), 13)
                        .Int("fmod", fmod)
                        .In(Tensor::FromVector<int32_t>({INT32_MIN, -7, 7, -7, 7, 0}, {6}))
                        .In(Tensor::FromVector<int32_t>({-1, 3, -3, -3, 3, -5}, {6})));
  cases.push_back(OpCase("int8[2,3,4] % int8[4] broadcast", 13)
                      .In(CaseInts(DataType::kInt8, {2, 3, 4}, 51, -128, 127))
                      .In(Tensor::FromVector<int8_t>({-128, 3, -7, 127}, {4})));
  cases.push_back(OpCase("float32[3,5] fmod 1", 10)
                      .Int("fmod", 1)
                      .In(CaseTensor({3, 5}, 52, -10.f, 10.f))
                      .In(CaseTensor({1, 5}, 53, 0.5f, 3.f)));
  return cases;
}
KILN_REGISTER_OP_CASES("", "Mod", &ModCases);

}  // namespace
}  // namespace kiln::ops
