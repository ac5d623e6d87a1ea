// The integer bit ops: BitwiseAnd, BitwiseOr, BitwiseXor (opset 18; two tensors of one integer
// dtype, multidirectional broadcasting), BitwiseNot (18) and BitShift (11; uint8/16/32/64 only,
// `direction` "LEFT" or "RIGHT", required). Reference: one strided walk over the output
// (ForEachBroadcast2), computed in the element type. Dtypes of the Bitwise* ops: the 8/16/32/64-bit
// signed and unsigned integers (bool is And/Or/Xor/Not's). A shift by the type's width or more
// gives 0 in both directions (numpy's left_shift/right_shift on unsigned types; C++ leaves it
// undefined); left shifts drop the bits shifted out.
#include <string>

#include "ops/common.h"
#include "ops/op_cases.h"
#include "ops/tensor/tensor_util.h"
#include "ops/typed_dispatch.h"

namespace kiln::ops {
namespace {

enum class BitOp { kAnd, kOr, kXor, kShiftLeft, kShiftRight };

struct BitShiftAttrs : ir::OpAttrs {
  bool left = true;  // direction "LEFT"; false for "RIGHT"
};

bool IsShift(BitOp op) { return op == BitOp::kShiftLeft || op == BitOp::kShiftRight; }

template <typename T>
T ApplyBits(BitOp op, T a, T b) {
  constexpr T kBits = static_cast<T>(sizeof(T) * 8);
  switch (op) {
    case BitOp::kAnd:
      return static_cast<T>(a & b);
    case BitOp::kOr:
      return static_cast<T>(a | b);
    case BitOp::kXor:
      return static_cast<T>(a ^ b);
    case BitOp::kShiftLeft:
      return b >= kBits ? T(0) : static_cast<T>(static_cast<WrapUnsigned<T>>(a) << b);
    case BitOp::kShiftRight:
      return b >= kBits ? T(0) : static_cast<T>(a >> b);
  }
  return a;
}

// Runs f(T{}) for the integer dtypes the op takes (unsigned only for BitShift).
template <typename F>
Status DispatchBits(BitOp op, DataType dtype, const std::string& describe, F&& f) {
  if (IsShift(op)) return DispatchAmong<uint8_t, uint16_t, uint32_t, uint64_t>(dtype, describe, f);
  return DispatchAmong<int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t>(
      dtype, describe, f);
}

Status ExpectBitsDtype(BitOp op, const ir::InferContext& ctx, size_t i) {
  using D = DataType;
  if (IsShift(op)) return ctx.ExpectDtype(i, {D::kUInt8, D::kUInt16, D::kUInt32, D::kUInt64});
  return ctx.ExpectDtype(i, {D::kInt8, D::kInt16, D::kInt32, D::kInt64, D::kUInt8, D::kUInt16,
                             D::kUInt32, D::kUInt64});
}

// BitwiseAnd/Or/Xor and BitShift: y = a (op) b with broadcasting, in a's dtype.
class BitwiseBinaryOp final : public ir::Op {
 public:
  BitwiseBinaryOp(const ir::Node& node, BitOp op) : Op(node), op_(op) {}

  static StatusOr<std::unique_ptr<ir::Op>> Create(const ir::Node& node) {
    BitOp op = BitOp::kAnd;
    if (node.op_type == "BitwiseOr") op = BitOp::kOr;
    if (node.op_type == "BitwiseXor") op = BitOp::kXor;
    auto result = std::make_unique<BitwiseBinaryOp>(node, op);
    if (node.op_type == "BitShift") {
      if (!node.HasAttr("direction"))
        return ir::AttrError(node, "direction (\"LEFT\" or \"RIGHT\") is required; got none");
      const std::string direction = node.GetString("direction", "");
      if (direction != "LEFT" && direction != "RIGHT")
        return ir::AttrError(node,
                             "direction must be \"LEFT\" or \"RIGHT\"; got \"" + direction + "\"");
      result->shift_.left = direction == "LEFT";
      result->op_ = result->shift_.left ? BitOp::kShiftLeft : BitOp::kShiftRight;
    }
    return std::unique_ptr<ir::Op>(std::move(result));
  }

  Status Infer(ir::InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ExpectBitsDtype(op_, ctx, 0));
    if (ctx.dtype(1) != ctx.dtype(0))
      return ctx.Error(std::string("inputs must have the same dtype; got ") +
                       DataTypeName(ctx.dtype(0)) + " and " + DataTypeName(ctx.dtype(1)));
    auto out = BroadcastShapes({ctx.shape(0), ctx.shape(1)});
    if (!out.ok()) return ctx.Error(out.status().message());
    ctx.SetOutput(0, ctx.dtype(0), *out);
    return OkStatus();
  }

  Status Compute(const ir::ComputeContext& ctx) const override {
    const Tensor& a = ctx.in(0);
    const Tensor& b = ctx.in(1);
    Tensor& y = ctx.out(0);
    return DispatchBits(op_, a.dtype(), describe(), [&](auto tag) {
      using T = decltype(tag);
      const T* pa = a.data<T>();
      const T* pb = b.data<T>();
      T* py = y.data<T>();
      ForEachBroadcast2(y.shape(), a.shape(), b.shape(), [&](int64_t i, int64_t ia, int64_t ib) {
        py[i] = ApplyBits(op_, pa[ia], pb[ib]);
      });
      return OkStatus();
    });
  }

  const ir::OpAttrs* attributes() const override { return IsShift(op_) ? &shift_ : nullptr; }

 private:
  BitOp op_;
  BitShiftAttrs shift_;
};
KILN_REGISTER_OP("BitwiseAnd", 18, ir::kMaxOpset, &BitwiseBinaryOp::Create);
KILN_REGISTER_OP("BitwiseOr", 18, ir::kMaxOpset, &BitwiseBinaryOp::Create);
KILN_REGISTER_OP("BitwiseXor", 18, ir::kMaxOpset, &BitwiseBinaryOp::Create);
KILN_REGISTER_OP("BitShift", 11, ir::kMaxOpset, &BitwiseBinaryOp::Create);

// BitwiseNot: y = ~x in x's integer dtype.
class BitwiseNotOp final : public ir::Op {
 public:
  explicit BitwiseNotOp(const ir::Node& node) : Op(node) {}

  Status Infer(ir::InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ExpectBitsDtype(BitOp::kAnd, ctx, 0));
    ctx.SetOutput(0, ctx.dtype(0), ctx.shape(0));
    return OkStatus();
  }

  Status Compute(const ir::ComputeContext& ctx) const override {
    return DispatchBits(BitOp::kAnd, ctx.in(0).dtype(), describe(), [&](auto tag) {
      using T = decltype(tag);
      const T* src = ctx.in(0).data<T>();
      T* dst = ctx.out(0).data<T>();
      for (int64_t i = 0, n = ctx.in(0).numel(); i < n; ++i) dst[i] = static_cast<T>(~src[i]);
      return OkStatus();
    });
  }
};
KILN_REGISTER_OP("BitwiseNot", 18, ir::kMaxOpset, &ir::MakeOp<BitwiseNotOp>);

// Reference cases: every integer dtype once, equal shapes with a size-1 dim, broadcasting both
// ways, a scalar operand; BitShift with shifts past the width.
Tensor Ints(DataType dtype, const Shape& shape, uint32_t seed, int64_t lo, int64_t hi) {
  return CastCopy(CaseInts(DataType::kInt64, shape, seed, lo, hi), dtype);
}

std::vector<OpCase> BitwiseCases(const std::string& op) {
  struct Spec {
    DataType dtype;
    Shape a, b;
    int64_t lo, hi;
  };
  using D = DataType;
  const std::vector<Spec> specs = {
      {D::kInt8, {3, 1, 7}, {3, 1, 7}, -128, 127},
      {D::kUInt8, {2, 3, 4, 5}, {3, 4, 5}, 0, 255},
      {D::kInt16, {3, 4, 5}, {3, 4, 5}, -32768, 32767},
      {D::kUInt16, {2, 1, 5}, {3, 1}, 0, 65535},
      {D::kInt32, {3, 5}, {}, -2147483648LL, 2147483647LL},
      {D::kUInt32, {5}, {2, 3, 5}, 0, 4294967295LL},
      {D::kInt64, {1, 7}, {3, 1}, INT64_MIN, INT64_MAX},
      {D::kUInt64, {3, 4, 1}, {5}, 0, INT64_MAX},
  };
  std::vector<OpCase> cases;
  uint32_t seed = 71;
  for (const Spec& s : specs) {
    cases.push_back(
        OpCase(op + " " + DataTypeName(s.dtype) + ShapeToString(s.a) + " " + ShapeToString(s.b), 18)
            .In(Ints(s.dtype, s.a, seed, s.lo, s.hi))
            .In(Ints(s.dtype, s.b, seed + 1, s.lo, s.hi)));
    seed += 2;
  }
  return cases;
}
std::vector<OpCase> BitwiseAndCases() { return BitwiseCases("BitwiseAnd"); }
std::vector<OpCase> BitwiseOrCases() { return BitwiseCases("BitwiseOr"); }
std::vector<OpCase> BitwiseXorCases() { return BitwiseCases("BitwiseXor"); }
KILN_REGISTER_OP_CASES("", "BitwiseAnd", &BitwiseAndCases);
KILN_REGISTER_OP_CASES("", "BitwiseOr", &BitwiseOrCases);
KILN_REGISTER_OP_CASES("", "BitwiseXor", &BitwiseXorCases);

std::vector<OpCase> BitwiseNotCases() {
  std::vector<OpCase> cases;
  uint32_t seed = 91;
  for (DataType t : {DataType::kInt8, DataType::kUInt8, DataType::kInt16, DataType::kUInt16,
                     DataType::kInt32, DataType::kUInt32, DataType::kInt64, DataType::kUInt64})
    cases.push_back(OpCase(std::string("BitwiseNot ") + DataTypeName(t) + "[3,1,7]", 18)
                        .In(Ints(t, {3, 1, 7}, seed++, 0, 127)));
  return cases;
}
KILN_REGISTER_OP_CASES("", "BitwiseNot", &BitwiseNotCases);

// Shift amounts 0..width+2 so some reach or pass the width.
std::vector<OpCase> BitShiftCases() {
  std::vector<OpCase> cases;
  uint32_t seed = 101;
  for (const char* dir : {"LEFT", "RIGHT"})
    for (auto [t, bits] : {std::pair{DataType::kUInt8, 8}, std::pair{DataType::kUInt16, 16},
                           std::pair{DataType::kUInt32, 32}, std::pair{DataType::kUInt64, 64}}) {
      cases.push_back(OpCase(std::string("BitShift ") + dir + " " + DataTypeName(t) + "[2,3,5]", 11)
                          .Str("direction", dir)
                          .In(Ints(t, {2, 3, 5}, seed, 0, 255))
                          .In(Ints(t, {3, 1}, seed + 1, 0, bits + 2)));
      seed += 2;
    }
  return cases;
}
KILN_REGISTER_OP_CASES("", "BitShift", &BitShiftCases);

}  // namespace
}  // namespace kiln::ops
