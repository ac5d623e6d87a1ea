// Cast (and CastLike-15) between float32, float64, float16, bfloat16, bool, the 8/16/32/64-bit
// signed and unsigned integers, the 8-bit floats, float4e2m1 and the 4-bit integers: a double type
// dispatch into one plain loop per (from, to) pair.
// Rules: float -> integer truncates toward zero (NaN -> 0 and values beyond int64 saturate, which
// C++ would leave undefined; then two's-complement wrap to narrower ints, int4 and uint4 included,
// as numpy and ml_dtypes do on x86); integer -> integer wraps; anything -> bool is x != 0 (NaN ->
// true); bool -> number is 0/1; -> float16 and -> bfloat16 round to nearest even; -> the 8-bit
// floats and float4e2m1 as core/float8.h says (`saturate`, opset 19); -> float8e8m0 by
// `round_mode` (opset 24). Cast-1's string `to` ("FLOAT", ...) is accepted. To and from strings
// as cast_string.cc says (numpy's text and Python's parsing); a string output is made here.
#include "ops/tensor/cast.h"

#include <cmath>
#include <cstring>
#include <type_traits>

#include "core/float8.h"
#include "core/half.h"
#include "ops/common.h"
#include "ops/op_cases.h"
#include "ops/tensor/cast_string.h"
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
template <DataType D>
struct MiniFloat {  // the 8-bit floats but E8M0, and float4e2m1
  uint8_t bits = 0;
};
struct E8M0 {
  uint8_t bits = 0;
};
struct Int4 {
  int8_t v = 0;
};
struct UInt4 {
  uint8_t v = 0;
};

template <typename T>
struct IsMiniFloatTag : std::false_type {};
template <DataType D>
struct IsMiniFloatTag<MiniFloat<D>> : std::true_type {};

template <DataType D>
float MiniFloatOf(MiniFloat<D> x) {
  return MiniFloatToFloat(x.bits, D);
}
template <DataType D>
constexpr DataType MiniFloatType(MiniFloat<D>) {
  return D;
}

template <typename T>
constexpr bool kFloatLike =
    std::is_floating_point_v<T> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16> ||
    IsMiniFloatTag<T>::value || std::is_same_v<T, E8M0>;

template <typename T>
auto Widen(T x) {
  if constexpr (std::is_same_v<T, Half>)
    return HalfToFloat(x.bits);
  else if constexpr (std::is_same_v<T, BFloat16>)
    return Bf16ToFloat(x.bits);
  else if constexpr (IsMiniFloatTag<T>::value)
    return MiniFloatOf(x);
  else if constexpr (std::is_same_v<T, E8M0>)
    return E8M0ToFloat(x.bits);
  else if constexpr (std::is_same_v<T, Int4>)
    return static_cast<int32_t>(x.v);
  else if constexpr (std::is_same_v<T, UInt4>)
    return static_cast<int32_t>(x.v);
  else
    return x;
}

template <typename U, typename T>
U ConvertOne(T x, const CastRules& rules) {
  const auto v = Widen(x);
  if constexpr (std::is_same_v<U, bool>) {
    return v != 0;
  } else if constexpr (std::is_same_v<U, Half>) {
    return Half{DoubleToHalf(static_cast<double>(v))};
  } else if constexpr (std::is_same_v<U, BFloat16>) {
    return BFloat16{FloatToBf16Rounded(static_cast<float>(v))};
  } else if constexpr (IsMiniFloatTag<U>::value) {
    return U{FloatToMiniFloat(static_cast<double>(v), MiniFloatType(U{}), rules.saturate)};
  } else if constexpr (std::is_same_v<U, E8M0>) {
    return E8M0{FloatToE8M0(static_cast<float>(v), rules.saturate, rules.e8m0_round)};
  } else if constexpr (std::is_same_v<U, Int4> || std::is_same_v<U, UInt4>) {
    int64_t i;
    if constexpr (kFloatLike<T>)
      i = TruncToInt64(static_cast<double>(v));
    else
      i = static_cast<int64_t>(v);
    if constexpr (std::is_same_v<U, Int4>)
      return Int4{WrapToInt4(i)};
    else
      return UInt4{WrapToUInt4(i)};
  } else if constexpr (std::is_integral_v<U> && kFloatLike<T>) {
    return static_cast<U>(TruncToInt64(static_cast<double>(v)));
  } else {
    return static_cast<U>(v);
  }
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
    case DataType::kFloat8E4M3FN:
      f(MiniFloat<DataType::kFloat8E4M3FN>{});
      return true;
    case DataType::kFloat8E4M3FNUZ:
      f(MiniFloat<DataType::kFloat8E4M3FNUZ>{});
      return true;
    case DataType::kFloat8E5M2:
      f(MiniFloat<DataType::kFloat8E5M2>{});
      return true;
    case DataType::kFloat8E5M2FNUZ:
      f(MiniFloat<DataType::kFloat8E5M2FNUZ>{});
      return true;
    case DataType::kFloat4E2M1:
      f(MiniFloat<DataType::kFloat4E2M1>{});
      return true;
    case DataType::kFloat8E8M0:
      f(E8M0{});
      return true;
    case DataType::kInt4:
      f(Int4{});
      return true;
    case DataType::kUInt4:
      f(UInt4{});
      return true;
    default:
      return false;
  }
}

bool ParseTypeName(const std::string& s, DataType* t) {
  static const std::pair<const char*, DataType> kNames[] = {
      {"FLOAT", DataType::kFloat},     {"DOUBLE", DataType::kDouble},
      {"FLOAT16", DataType::kFloat16}, {"BFLOAT16", DataType::kBFloat16},
      {"BOOL", DataType::kBool},       {"INT8", DataType::kInt8},
      {"INT16", DataType::kInt16},     {"INT32", DataType::kInt32},
      {"INT64", DataType::kInt64},     {"UINT8", DataType::kUInt8},
      {"UINT16", DataType::kUInt16},   {"UINT32", DataType::kUInt32},
      {"UINT64", DataType::kUInt64},   {"STRING", DataType::kString}};
  for (const auto& [name, type] : kNames)
    if (s == name) {
      *t = type;
      return true;
    }
  return false;
}

// `saturate` (19+) and `round_mode` (24+): absent before those opsets, so their defaults apply.
Status ParseRules(const Node& node, CastRules* r) {
  const int64_t sat = node.GetInt("saturate", 1);
  if (sat != 0 && sat != 1)
    return ir::AttrError(node, "saturate must be 0 or 1; got " + std::to_string(sat));
  r->saturate = sat == 1;
  const std::string mode = node.GetString("round_mode", "up");
  if (mode == "up")
    r->e8m0_round = 0;
  else if (mode == "down")
    r->e8m0_round = 1;
  else if (mode == "nearest")
    r->e8m0_round = 2;
  else
    return ir::AttrError(node, "round_mode must be 'up', 'down' or 'nearest'; got '" + mode + "'");
  return OkStatus();
}

class CastOp : public Op {
 public:
  // CastLike: the target type is input 1's (to_ unset).
  static StatusOr<std::unique_ptr<Op>> CreateCastLike(const Node& node) {
    std::unique_ptr<CastOp> op(new CastOp(node, DataType::kUndefined));
    KILN_RETURN_IF_ERROR(ParseRules(node, &op->a_.rules));
    return std::unique_ptr<Op>(std::move(op));
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
    if (!StringCastable(to))
      return ir::AttrError(node, "`to` must be a numeric, bool or string type; got " +
                                     std::string(DataTypeName(to)) + " (" +
                                     std::to_string(static_cast<int>(to)) + ")");
    std::unique_ptr<CastOp> op(new CastOp(node, to));
    KILN_RETURN_IF_ERROR(ParseRules(node, &op->a_.rules));
    return std::unique_ptr<Op>(std::move(op));
  }
  Status Infer(InferContext& ctx) const override {
    if (!ctx.has_input(0)) return ctx.Error("input 0 is required; got none");
    if (to_ == DataType::kUndefined && !ctx.has_input(1))
      return ctx.Error("CastLike needs target_type (input 1); got none");
    const DataType to = to_ != DataType::kUndefined ? to_ : ctx.dtype(1);
    for (DataType t : {ctx.dtype(0), to})
      if (!StringCastable(t))
        return Unsupported("failed to infer shapes of " + describe() +
                           ": Cast supports numeric, bool and string types; got " +
                           DataTypeName(t));
    ctx.SetOutput(0, to, ctx.shape(0));
    return OkStatus();
  }
  bool TakesNonPlainValues() const override { return true; }
  Status Compute(const ComputeContext& ctx) const override {
    const Tensor& in = ctx.in(0);
    const DataType to = to_ != DataType::kUndefined ? to_ : ctx.in(1).dtype();
    if (to == DataType::kString) {  // made here: the executor allocates no strings
      if (ctx.outputs.empty() || ctx.outputs[0] == nullptr) return OkStatus();
      Tensor out = Tensor::Strings(in.shape());
      Status s = CastToStrings(in, &out);
      if (!s.ok()) return RunError(s.message());
      *ctx.outputs[0] = std::move(out);
      return OkStatus();
    }
    Tensor& out = ctx.out(0);
    if (in.dtype() == DataType::kString) {
      Status s = CastFromStrings(in, &out, a_.rules);
      return s.ok() ? s : RunError(s.message());
    }
    if (!CastElements(in.dtype(), out.dtype(), in.raw(), out.raw(), in.numel(), a_.rules))
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

bool CastElements(DataType from, DataType to, const void* src, void* dst, int64_t n,
                  const CastRules& rules) {
  bool dst_ok = false;
  const bool src_ok = DispatchCastType(from, [&](auto src_tag) {
    using T = decltype(src_tag);
    dst_ok = DispatchCastType(to, [&](auto dst_tag) {
      using U = decltype(dst_tag);
      const T* s = static_cast<const T*>(src);
      U* d = static_cast<U*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = ConvertOne<U>(s[i], rules);
    });
  });
  return src_ok && dst_ok;
}

namespace {

KILN_REGISTER_OP("Cast", 1, ir::kMaxOpset, &CastOp::Create);
KILN_REGISTER_OP("CastLike", 15, ir::kMaxOpset, &CastOp::CreateCastLike);

// Kernel cases (ops/op_cases.h). Inputs of every dtype are float32 values in [-300, 300] (int8
// and uint8 wrap) converted by the op's own rules. Casts to integers and bool also meet NaN,
// infinities and values past int64 (truncation, saturation, NaN -> 0); casts to float32/float16
// meet NaN only, and casts to float64 neither: the harness compares |got - want| (NaN for equal
// infinities) and compares float64 outputs as integers (NaN never equal). [3,70,101] is above
// cpu.cast.parallel's range of 16384 elements (several ranges), [3,1,7] below it.
Tensor CastCaseInput(DataType dtype, DataType to, const Shape& shape, uint32_t seed) {
  Tensor f = CaseTensor(shape, seed, -300.f, 300.f);
  float* p = f.data<float>();
  const bool to_float = to == DataType::kFloat || to == DataType::kFloat16 ||
                        to == DataType::kDouble || to == DataType::kBFloat16;
  const float special[] = {std::nanf(""), INFINITY, -INFINITY, 1e30f, -1e30f, 255.5f, -0.5f};
  const int64_t n = to == DataType::kDouble ? 0 : to_float ? 1 : 7;
  for (int64_t i = 0; i < n && i < f.numel(); ++i) p[i] = special[i];
  if (dtype == DataType::kFloat) return f;
  Tensor t = Tensor::Empty(dtype, shape);
  CastElements(DataType::kFloat, dtype, f.raw(), t.raw(), f.numel());
  return t;
}

Tensor Texts(const std::vector<std::string>& values, const Shape& shape) {
  Tensor t = Tensor::Strings(shape);
  for (size_t i = 0; i < values.size() && static_cast<int64_t>(i) < t.numel(); ++i)
    t.data<std::string>()[i] = values[i];
  return t;
}

// To and from strings (the reference only: no fast kernel takes strings): numpy's text for
// specials, zeros, both notations and integers; Python's parsing of signs, spaces, underscores,
// specials in any case, overflow and underflow; integers wrapping to int8; bool from nonempty.
std::vector<OpCase> StringCastCases() {
  using D = DataType;
  const auto to = [](D t) { return static_cast<int64_t>(t); };
  std::vector<OpCase> cases;
  cases.push_back(OpCase("Cast float32 -> string [2,5]", 13)
                      .In(CaseFloats({0.9767611f, std::nanf(""), INFINITY, -INFINITY, -0.f, 1e-5f,
                                      1e20f, 123456789.f, -2.5f, 1e-4f},
                                     {2, 5}))
                      .Int("to", to(D::kString)));
  cases.push_back(OpCase("Cast string -> float32 [3,4]", 13)
                      .In(Texts({"0.47892547", "NaN", "INF", "+INF", "-INF", " 1.5\n", "1_000",
                                 "-1e-999", "1e999", ".5", "5.", "-infinity"},
                                {3, 4}))
                      .Int("to", to(D::kFloat)));
  cases.push_back(OpCase("Cast string -> int64 [4]", 13)
                      .In(Texts({"12", " -7 ", "+007", "9223372036854775807"}, {4}))
                      .Int("to", to(D::kInt64)));
  cases.push_back(OpCase("Cast string -> int8 [3] (wraps)", 19)
                      .In(Texts({"300", "-129", "1_0"}, {3}))
                      .Int("to", to(D::kInt8)));
  cases.push_back(OpCase("Cast string -> bool [3]", 13)
                      .In(Texts({"0", "", "False"}, {3}))
                      .Int("to", to(D::kBool)));
  cases.push_back(
      OpCase("Cast string -> float64 scalar", 13).In(Texts({"0.1"}, {})).Int("to", to(D::kDouble)));
  cases.push_back(
      OpCase("Cast int32 -> string [2,3]", 13)
          .In(Tensor::FromVector<int32_t>({0, -5, 7, 2147483647, -2147483647, 42}, {2, 3}))
          .Int("to", to(D::kString)));
  cases.push_back(OpCase("Cast bool -> string [2]", 13)
                      .In(Tensor::FromVector<bool>({true, false}, {2}))
                      .Int("to", to(D::kString)));
  cases.push_back(OpCase("Cast float64 -> string [4]", 13)
                      .In(Tensor::FromVector<double>({0.1, 1e16, 1.0 / 3, 5e-324}, {4}))
                      .Int("to", to(D::kString)));
  cases.push_back(
      OpCase("Cast string -> string [0,3]", 13).In(Texts({}, {0, 3})).Int("to", to(D::kString)));
  cases.push_back(OpCase("Cast-1 to 'STRING' [1,3]", 1)
                      .In(CaseTensor({1, 3}, 7, -300.f, 300.f))
                      .Str("to", "STRING"));
  return cases;
}

std::vector<OpCase> CastCases() {
  using D = DataType;
  struct Pair {
    D from, to;
  };
  // Outputs in the dtypes the harness compares (float32/16, double, int64/32/8, uint8, bool);
  // inputs of every castable dtype. float32 <-> float16 and float32 -> float32 are also what
  // cuda.cast.kernel takes.
  const Pair pairs[] = {
      {D::kFloat, D::kInt32},   {D::kInt32, D::kFloat},    {D::kFloat, D::kInt64},
      {D::kInt64, D::kFloat},   {D::kFloat, D::kFloat16},  {D::kFloat16, D::kFloat},
      {D::kFloat, D::kFloat},   {D::kFloat, D::kDouble},   {D::kDouble, D::kFloat},
      {D::kFloat, D::kUInt8},   {D::kFloat, D::kInt8},     {D::kFloat, D::kBool},
      {D::kBool, D::kFloat},    {D::kUInt8, D::kFloat},    {D::kInt8, D::kInt32},
      {D::kInt64, D::kInt32},   {D::kInt32, D::kInt64},    {D::kBFloat16, D::kFloat},
      {D::kInt16, D::kFloat16}, {D::kUInt16, D::kInt64},   {D::kUInt32, D::kDouble},
      {D::kUInt64, D::kInt8},   {D::kDouble, D::kFloat16}, {D::kFloat16, D::kInt8},
      {D::kInt64, D::kBool},    {D::kInt64, D::kInt64}};
  std::vector<OpCase> cases;
  uint32_t seed = 61;
  for (const Pair& p : pairs)
    for (const Shape& s : std::vector<Shape>{{3, 70, 101}, {3, 1, 7}}) {
      const std::string name = std::string("Cast ") + DataTypeName(p.from) + " -> " +
                               DataTypeName(p.to) + " " + ShapeToString(s);
      cases.push_back(OpCase(name, 13)
                          .In(CastCaseInput(p.from, p.to, s, seed++))
                          .Int("to", static_cast<int64_t>(p.to)));
    }
  // Cast-1's string `to`, Cast-6, Cast-19 and -21 (same rules for these types), a scalar.
  cases.push_back(OpCase("Cast-1 to 'FLOAT16' [2,3,5]", 1)
                      .In(CastCaseInput(D::kFloat, D::kFloat16, {2, 3, 5}, seed++))
                      .Str("to", "FLOAT16"));
  cases.push_back(OpCase("Cast-6 float32 -> int32 [5,1,3]", 6)
                      .In(CastCaseInput(D::kFloat, D::kInt32, {5, 1, 3}, seed++))
                      .Int("to", static_cast<int64_t>(D::kInt32)));
  cases.push_back(OpCase("Cast-19 float16 -> float32 [1,1,33]", 19)
                      .In(CastCaseInput(D::kFloat16, D::kFloat, {1, 1, 33}, seed++))
                      .Int("to", static_cast<int64_t>(D::kFloat)));
  cases.push_back(OpCase("Cast-21 int32 -> float32 scalar", 21)
                      .In(CastCaseInput(D::kInt32, D::kFloat, {}, seed++))
                      .Int("to", static_cast<int64_t>(D::kFloat)));
  for (OpCase& c : StringCastCases()) cases.push_back(std::move(c));
  return cases;
}
KILN_REGISTER_OP_CASES("", "Cast", &CastCases);

// CastLike-15: the target dtype from input 1 (its values unused). Not "like float16": the harness
// widens every float16 input to float32 for the reference kernel, the target_type input too, so
// the reference would cast to float32.
std::vector<OpCase> CastLikeCases() {
  using D = DataType;
  const std::pair<D, D> pairs[] = {{D::kFloat, D::kInt64},   {D::kInt64, D::kFloat},
                                   {D::kFloat16, D::kFloat}, {D::kFloat, D::kUInt8},
                                   {D::kInt32, D::kBool},    {D::kFloat, D::kInt8}};
  std::vector<OpCase> cases;
  uint32_t seed = 91;
  for (const auto& [from, to] : pairs)
    for (const Shape& s : std::vector<Shape>{{3, 70, 101}, {1, 3, 1}}) {
      const std::string name = std::string("CastLike ") + DataTypeName(from) + " like " +
                               DataTypeName(to) + " " + ShapeToString(s);
      Tensor x = CastCaseInput(from, to, s, seed++);
      cases.push_back(OpCase(name, 15).In(x).In(CastCaseInput(to, to, {1}, seed++)));
    }
  cases.push_back(OpCase("CastLike float32 like string [3,4]", 15)
                      .In(CaseTensor({3, 4}, seed++))
                      .In(Texts({"0.9767611"}, {1})));
  cases.push_back(OpCase("CastLike string like float32 [2,2]", 15)
                      .In(Texts({"0.47892547", "NaN", "-INF", "1e-05"}, {2, 2}))
                      .In(CaseTensor({1}, seed++)));
  return cases;
}
KILN_REGISTER_OP_CASES("", "CastLike", &CastLikeCases);

}  // namespace
}  // namespace kiln::ops
