// Cast (and CastLike-15) between float32, float64, float16, bfloat16, bool and the 8/16/32/64-bit
// signed and unsigned integers: a double type dispatch into one plain loop per (from, to) pair.
// Rules: float -> integer truncates toward zero (NaN -> 0 and values beyond int64 saturate, which
// C++ would leave undefined; then two's-complement wrap to narrower ints, as numpy does on x86);
// integer -> integer wraps; anything -> bool is x != 0 (NaN -> true); bool -> number is 0/1;
// -> float16 rounds to nearest even; float -> bfloat16 truncates the low 16 bits (what ONNX 1.12's
// test data encodes). Cast-1's string `to` ("FLOAT", ...) is accepted. Strings are not supported.
#include "ops/tensor/cast.h"

#include <cmath>
#include <cstring>
#include <type_traits>

#include "core/half.h"
#include "ops/attrs.h"
#include "ops/common.h"
#include "ops/tensor/tensor_util.h"

namespace kiln::ops {
namespace {

using ir::ComputeContext;
using ir::InferContext;
using ir::Node;
using ir::Op;

struct Half {
  uint16_t bits = 0;
};
struct BFloat16 {
  uint16_t bits = 0;
};

template <typename T>
constexpr bool kFloatLike =
    std::is_floating_point_v<T> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

template <typename T>
auto Widen(T x) {
  if constexpr (std::is_same_v<T, Half>)
    return HalfToFloat(x.bits);
  else if constexpr (std::is_same_v<T, BFloat16>)
    return Bf16ToFloat(x.bits);
  else
    return x;
}

template <typename U, typename T>
U ConvertOne(T x) {
  const auto v = Widen(x);
  if constexpr (std::is_same_v<U, bool>)
    return v != 0;
  else if constexpr (std::is_same_v<U, Half>)
    return Half{DoubleToHalf(static_cast<double>(v))};
  else if constexpr (std::is_same_v<U, BFloat16>)
    return BFloat16{FloatToBf16(static_cast<float>(v))};
  else if constexpr (std::is_integral_v<U> && kFloatLike<T>)
    return static_cast<U>(TruncToInt64(static_cast<double>(v)));
  else
    return static_cast<U>(v);
}

// Calls f(T{}) for dtype t; false when t is not castable.
template <typename F>
bool DispatchCastType(DataType t, F&& f) {
  switch (t) {
    case DataType::kFloat:
      f(float{});
      return true;
    case DataType::kDouble:
      f(double{});
      return true;
    case DataType::kFloat16:
      f(Half{});
      return true;
    case DataType::kBFloat16:
      f(BFloat16{});
      return true;
    case DataType::kBool:
      f(bool{});
      return true;
    case DataType::kInt8:
      f(int8_t{});
      return true;
    case DataType::kInt16:
      f(int16_t{});
      return true;
    case DataType::kInt32:
      f(int32_t{});
      return true;
    case DataType::kInt64:
      f(int64_t{});
      return true;
    case DataType::kUInt8:
      f(uint8_t{});
      return true;
    case DataType::kUInt16:
      f(uint16_t{});
      return true;
    case DataType::kUInt32:
      f(uint32_t{});
      return true;
    case DataType::kUInt64:
      f(uint64_t{});
      return true;
    default:
      return false;
  }
}

bool Castable(DataType t) {
  return DispatchCastType(t, [](auto) {});
}

bool ParseTypeName(const std::string& s, DataType* t) {
  static const std::pair<const char*, DataType> kNames[] = {
      {"FLOAT", DataType::kFloat},     {"DOUBLE", DataType::kDouble},
      {"FLOAT16", DataType::kFloat16}, {"BFLOAT16", DataType::kBFloat16},
      {"BOOL", DataType::kBool},       {"INT8", DataType::kInt8},
      {"INT16", DataType::kInt16},     {"INT32", DataType::kInt32},
      {"INT64", DataType::kInt64},     {"UINT8", DataType::kUInt8},
      {"UINT16", DataType::kUInt16},   {"UINT32", DataType::kUInt32},
      {"UINT64", DataType::kUInt64}};
  for (const auto& [name, type] : kNames)
    if (s == name) {
      *t = type;
      return true;
    }
  return false;
}

class CastOp : public Op {
 public:
  // CastLike: the target type is input 1's (to_ unset).
  static StatusOr<std::unique_ptr<Op>> CreateCastLike(const Node& node) {
    return std::unique_ptr<Op>(new CastOp(node, DataType::kUndefined));
  }
  static StatusOr<std::unique_ptr<Op>> Create(const Node& node) {
    auto it = node.attrs.find("to");
    if (it == node.attrs.end())
      return ir::AttrError(node, "the `to` attribute is required; got none");
    DataType to = DataType::kUndefined;
    if (it->second.type == ir::Attribute::Type::kString) {
      if (!ParseTypeName(it->second.s, &to))
        return ir::AttrError(node, "`to` must name a castable type; got '" + it->second.s + "'");
    } else {
      to = static_cast<DataType>(it->second.i);
    }
    if (!Castable(to))
      return ir::AttrError(node, "`to` must be a numeric or bool type; got " +
                                     std::string(DataTypeName(to)) + " (" +
                                     std::to_string(static_cast<int>(to)) + ")");
    return std::unique_ptr<Op>(new CastOp(node, to));
  }
  Status Infer(InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ExpectFixedSize(ctx, 0));
    if (to_ == DataType::kUndefined && !ctx.has_input(1))
      return ctx.Error("CastLike needs target_type (input 1); got none");
    const DataType to = to_ != DataType::kUndefined ? to_ : ctx.dtype(1);
    for (DataType t : {ctx.dtype(0), to})
      if (!Castable(t))
        return Unsupported("failed to infer shapes of " + describe() +
                           ": Cast supports numeric and bool types; got " + DataTypeName(t));
    ctx.SetOutput(0, to, ctx.shape(0));
    return OkStatus();
  }
  Status Compute(const ComputeContext& ctx) const override {
    const Tensor& in = ctx.in(0);
    Tensor& out = ctx.out(0);
    if (!CastElements(in.dtype(), out.dtype(), in.raw(), out.raw(), in.numel()))
      return RunError(std::string("cannot cast ") + DataTypeName(in.dtype()) + " to " +
                      DataTypeName(out.dtype()));
    return OkStatus();
  }
  const ir::OpAttrs* attributes() const override { return &a_; }

 private:
  CastOp(const Node& node, DataType to) : Op(node), to_(to) { a_.to = to; }
  DataType to_;
  CastAttrs a_;
};
}  // namespace

bool CastElements(DataType from, DataType to, const void* src, void* dst, int64_t n) {
  bool dst_ok = false;
  const bool src_ok = DispatchCastType(from, [&](auto src_tag) {
    using T = decltype(src_tag);
    dst_ok = DispatchCastType(to, [&](auto dst_tag) {
      using U = decltype(dst_tag);
      const T* s = static_cast<const T*>(src);
      U* d = static_cast<U*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = ConvertOne<U>(s[i]);
    });
  });
  return src_ok && dst_ok;
}

namespace {

KILN_REGISTER_OP("Cast", 1, ir::kMaxOpset, &CastOp::Create);
KILN_REGISTER_OP("CastLike", 15, ir::kMaxOpset, &CastOp::CreateCastLike);

}  // namespace
}  // namespace kiln::ops
