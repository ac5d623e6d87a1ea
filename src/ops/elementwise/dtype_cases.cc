// Kernel cases (ops/op_cases.h) of the elementwise ops on their dtypes other than float32: the
// 8/16/32/64-bit signed and unsigned integers, float64 and bool. The float32 cases live with each
// op (binary.cc, unary.cc); these add to them. Today every fast kernel of these ops takes float32
// only, so the harness runs these on the reference kernels (EveryCaseRunsOnItsReference); a fast
// kernel that takes another dtype is checked on them automatically. Integer cases reach the
// types' limits (wrapping), zero divisors and INT_MIN / -1.
#include <cstdint>
#include <limits>
#include <string>

#include "ops/op_cases.h"
#include "ops/tensor/tensor_util.h"

namespace kiln::ops {
namespace {

using D = DataType;

// Seeded values in [lo, hi] of `dtype` (integers) or in [lo, hi) (float64).
Tensor Values(D dtype, const Shape& shape, uint32_t seed, int64_t lo, int64_t hi) {
  if (dtype == D::kDouble)
    return CastCopy(CaseTensor(shape, seed, static_cast<float>(lo), static_cast<float>(hi)), dtype);
  return CastCopy(CaseInts(D::kInt64, shape, seed, lo, hi), dtype);
}

// One per dtype, with broadcasting of each kind (equal shapes, a scalar, both operands broadcast).
struct TypedPair {
  D dtype;
  Shape a, b;
  int64_t lo, hi;
};
const std::vector<TypedPair>& TypedPairs() {
  static const std::vector<TypedPair> pairs = {
      {D::kInt8, {3, 1, 7}, {7}, -128, 127},
      {D::kUInt8, {2, 3, 5}, {3, 1}, 0, 255},
      {D::kInt16, {3, 4}, {}, -32768, 32767},
      {D::kUInt16, {5}, {2, 5}, 0, 65535},
      {D::kInt32, {1, 7}, {3, 1}, -1000, 1000},
      {D::kUInt32, {3, 1, 5}, {3, 1, 5}, 0, 4294967295LL},
      {D::kInt64, {2, 1, 4}, {3, 1}, -1000000, 1000000},
      {D::kUInt64, {4, 3}, {3}, 0, 1000000},
      {D::kDouble, {3, 1, 7}, {1, 7}, -2, 2},
  };
  return pairs;
}

std::vector<OpCase> TypedBinary(const std::string& op, int opset, bool nonzero_b) {
  std::vector<OpCase> cases;
  uint32_t seed = 201;
  for (const TypedPair& p : TypedPairs()) {
    const int64_t lo = nonzero_b && p.dtype == D::kDouble ? 1 : p.lo;
    cases.push_back(
        OpCase(op + " " + DataTypeName(p.dtype) + ShapeToString(p.a) + " " + ShapeToString(p.b),
               opset)
            .In(Values(p.dtype, p.a, seed, p.lo, p.hi))
            .In(Values(p.dtype, p.b, seed + 1, lo, p.hi)));
    seed += 2;
  }
  return cases;
}

// Add/Sub/Mul/Div on every numeric dtype, plus the int32 edges: INT_MIN / -1 (wraps), x / 0 (0),
// INT_MAX + 1 (wraps).
std::vector<OpCase> ArithmeticCases(const std::string& op) {
  std::vector<OpCase> cases = TypedBinary(op, 14, op == "Div");
  const int32_t kMin = std::numeric_limits<int32_t>::min();
  const int32_t kMax = std::numeric_limits<int32_t>::max();
  cases.push_back(OpCase(op + " int32 edges", 14)
                      .In(Tensor::FromVector<int32_t>({kMin, kMax, kMax, -7, 7, kMin}, {6}))
                      .In(Tensor::FromVector<int32_t>({-1, 1, 0, 2, -2, kMin}, {6})));
  return cases;
}
std::vector<OpCase> AddDtypeCases() { return ArithmeticCases("Add"); }
std::vector<OpCase> SubDtypeCases() { return ArithmeticCases("Sub"); }
std::vector<OpCase> MulDtypeCases() { return ArithmeticCases("Mul"); }
std::vector<OpCase> DivDtypeCases() { return ArithmeticCases("Div"); }
KILN_REGISTER_OP_CASES("", "Add", &AddDtypeCases);
KILN_REGISTER_OP_CASES("", "Sub", &SubDtypeCases);
KILN_REGISTER_OP_CASES("", "Mul", &MulDtypeCases);
KILN_REGISTER_OP_CASES("", "Div", &DivDtypeCases);

// Pow: float64 and integer bases with exponents of other dtypes.
std::vector<OpCase> PowDtypeCases() {
  std::vector<OpCase> cases;
  cases.push_back(OpCase("Pow float64[3,1,7] ^ float64[7]", 15)
                      .In(Values(D::kDouble, {3, 1, 7}, 211, 0, 3))
                      .In(Values(D::kDouble, {7}, 212, -2, 2)));
  cases.push_back(OpCase("Pow int64[2,5] ^ uint8[5]", 15)
                      .In(Values(D::kInt64, {2, 5}, 213, -9, 9))
                      .In(Values(D::kUInt8, {5}, 214, 0, 5)));
  cases.push_back(OpCase("Pow float32[3,4] ^ uint64[]", 15)
                      .In(CaseTensor({3, 4}, 215, 0.f, 2.f))
                      .In(Values(D::kUInt64, {}, 216, 0, 4)));
  return cases;
}
KILN_REGISTER_OP_CASES("", "Pow", &PowDtypeCases);

// Comparisons on every numeric dtype and bool.
std::vector<OpCase> CompareCases(const std::string& op) {
  std::vector<OpCase> cases = TypedBinary(op, 16, false);
  cases.push_back(OpCase(op + " bool[3,1,7] bool[7]", 16)
                      .In(CaseInts(D::kBool, {3, 1, 7}, 221, 0, 1))
                      .In(CaseInts(D::kBool, {7}, 222, 0, 1)));
  return cases;
}
std::vector<OpCase> EqualCases() { return CompareCases("Equal"); }
std::vector<OpCase> LessCases() { return CompareCases("Less"); }
std::vector<OpCase> GreaterCases() { return CompareCases("Greater"); }
std::vector<OpCase> LessOrEqualCases() { return CompareCases("LessOrEqual"); }
std::vector<OpCase> GreaterOrEqualCases() { return CompareCases("GreaterOrEqual"); }
KILN_REGISTER_OP_CASES("", "Equal", &EqualCases);
KILN_REGISTER_OP_CASES("", "Less", &LessCases);
KILN_REGISTER_OP_CASES("", "Greater", &GreaterCases);
KILN_REGISTER_OP_CASES("", "LessOrEqual", &LessOrEqualCases);
KILN_REGISTER_OP_CASES("", "GreaterOrEqual", &GreaterOrEqualCases);

// And, Or, Xor: equal shapes, a scalar, both operands broadcast.
std::vector<OpCase> LogicCases(const std::string& op) {
  std::vector<OpCase> cases;
  uint32_t seed = 231;
  for (auto [a, b] :
       {std::pair<Shape, Shape>{{3, 1, 7}, {3, 1, 7}}, {{2, 5}, {}}, {{3, 1}, {1, 4}}}) {
    cases.push_back(OpCase(op + " " + ShapeToString(a) + " " + ShapeToString(b), 7)
                        .In(CaseInts(D::kBool, a, seed, 0, 1))
                        .In(CaseInts(D::kBool, b, seed + 1, 0, 1)));
    seed += 2;
  }
  return cases;
}
std::vector<OpCase> AndCases() { return LogicCases("And"); }
std::vector<OpCase> OrCases() { return LogicCases("Or"); }
std::vector<OpCase> XorCases() { return LogicCases("Xor"); }
KILN_REGISTER_OP_CASES("", "And", &AndCases);
KILN_REGISTER_OP_CASES("", "Or", &OrCases);
KILN_REGISTER_OP_CASES("", "Xor", &XorCases);

// Min and Max on every numeric dtype (two and three operands); Sum and Mean on float64 and int32.
std::vector<OpCase> VariadicCases(const std::string& op) {
  std::vector<OpCase> cases;
  if (op == "Min" || op == "Max") {
    cases = TypedBinary(op, 13, false);
  } else {
    cases.push_back(OpCase(op + " float32 [2,3,5] [3,1] [5]", 13)
                        .In(CaseTensor({2, 3, 5}, 241))
                        .In(CaseTensor({3, 1}, 242))
                        .In(CaseTensor({5}, 243)));
    cases.push_back(
        OpCase(op + " int32 of one [3,1,7]", 13).In(Values(D::kInt32, {3, 1, 7}, 244, -100, 100)));
  }
  cases.push_back(OpCase(op + " float64 [2,3,5] [3,1] [5]", 13)
                      .In(Values(D::kDouble, {2, 3, 5}, 245, -2, 2))
                      .In(Values(D::kDouble, {3, 1}, 246, -2, 2))
                      .In(Values(D::kDouble, {5}, 247, -2, 2)));
  return cases;
}
std::vector<OpCase> MinDtypeCases() { return VariadicCases("Min"); }
std::vector<OpCase> MaxDtypeCases() { return VariadicCases("Max"); }
std::vector<OpCase> SumCases() { return VariadicCases("Sum"); }
std::vector<OpCase> MeanCases() { return VariadicCases("Mean"); }
KILN_REGISTER_OP_CASES("", "Min", &MinDtypeCases);
KILN_REGISTER_OP_CASES("", "Max", &MaxDtypeCases);
KILN_REGISTER_OP_CASES("", "Sum", &SumCases);
KILN_REGISTER_OP_CASES("", "Mean", &MeanCases);

// Where on a float32, an int16 and a float64 pair (copied as bytes), all three inputs broadcast.
std::vector<OpCase> WhereCases() {
  std::vector<OpCase> cases;
  uint32_t seed = 251;
  for (D t : {D::kFloat, D::kInt16, D::kDouble}) {
    cases.push_back(OpCase(std::string("Where ") + DataTypeName(t) + " [3,1,1] [1,4,1] [5]", 16)
                        .In(CaseInts(D::kBool, {3, 1, 1}, seed, 0, 1))
                        .In(Values(t, {1, 4, 1}, seed + 1, -100, 100))
                        .In(Values(t, {5}, seed + 2, -100, 100)));
    seed += 3;
  }
  return cases;
}
KILN_REGISTER_OP_CASES("", "Where", &WhereCases);

// PRelu: a per-channel slope on float32, float64, int32 and uint32.
std::vector<OpCase> PReluCases() {
  std::vector<OpCase> cases;
  uint32_t seed = 261;
  for (D t : {D::kFloat, D::kDouble, D::kInt32, D::kUInt32}) {
    const int64_t lo = t == D::kUInt32 ? 0 : -5;
    cases.push_back(OpCase(std::string("PRelu ") + DataTypeName(t) + " [2,3,5] slope [3,1]", 16)
                        .In(Values(t, {2, 3, 5}, seed, lo, 5))
                        .In(Values(t, {3, 1}, seed + 1, 0, 3)));
    seed += 2;
  }
  return cases;
}
KILN_REGISTER_OP_CASES("", "PRelu", &PReluCases);

// Neg (signed), Abs and Sign (every numeric dtype), with each type's minimum for the wrap.
std::vector<OpCase> SignedUnaryCases(const std::string& op) {
  std::vector<OpCase> cases;
  uint32_t seed = 271;
  for (const TypedPair& p : TypedPairs()) {
    const bool is_unsigned = p.dtype == D::kUInt8 || p.dtype == D::kUInt16 ||
                             p.dtype == D::kUInt32 || p.dtype == D::kUInt64;
    if (op == "Neg" && is_unsigned) continue;
    cases.push_back(OpCase(op + " " + DataTypeName(p.dtype) + ShapeToString(p.a), 13)
                        .In(Values(p.dtype, p.a, seed++, p.lo, p.hi)));
  }
  return cases;
}
std::vector<OpCase> NegDtypeCases() { return SignedUnaryCases("Neg"); }
std::vector<OpCase> AbsDtypeCases() { return SignedUnaryCases("Abs"); }
std::vector<OpCase> SignCases() { return SignedUnaryCases("Sign"); }
KILN_REGISTER_OP_CASES("", "Neg", &NegDtypeCases);
KILN_REGISTER_OP_CASES("", "Abs", &AbsDtypeCases);
KILN_REGISTER_OP_CASES("", "Sign", &SignCases);

// Clip-13 on int8 (both bounds), uint16 (lower bound only) and float64 (min > max gives max).
std::vector<OpCase> ClipDtypeCases() {
  std::vector<OpCase> cases;
  cases.push_back(OpCase("Clip int8[3,1,7] [-5, 100]", 13)
                      .In(Values(D::kInt8, {3, 1, 7}, 291, -128, 127))
                      .Const(Tensor::FromVector<int8_t>({-5}, {}))
                      .Const(Tensor::FromVector<int8_t>({100}, {})));
  cases.push_back(OpCase("Clip uint16[2,5] min 1000", 13)
                      .In(Values(D::kUInt16, {2, 5}, 292, 0, 65535))
                      .Const(Tensor::FromVector<uint16_t>({1000}, {})));
  cases.push_back(OpCase("Clip float64[3,4] min 1 > max -1", 13)
                      .In(Values(D::kDouble, {3, 4}, 293, -2, 2))
                      .Const(Tensor::FromVector<double>({1.0}, {}))
                      .Const(Tensor::FromVector<double>({-1.0}, {})));
  return cases;
}
KILN_REGISTER_OP_CASES("", "Clip", &ClipDtypeCases);

// Mod on uint16 and int64 (fmod 0, zero divisors left out: they are an error) and float64 fmod 1.
std::vector<OpCase> ModDtypeCases() {
  std::vector<OpCase> cases;
  cases.push_back(OpCase("Mod uint16[3,5] % uint16[5]", 13)
                      .In(Values(D::kUInt16, {3, 5}, 301, 0, 65535))
                      .In(Values(D::kUInt16, {5}, 302, 1, 300)));
  cases.push_back(OpCase("Mod int64[3,2] % int64[3,1]", 13)
                      .In(Values(D::kInt64, {3, 2}, 303, -1000, 1000))
                      .In(Tensor::FromVector<int64_t>({-7, 3, 1}, {3, 1})));
  cases.push_back(OpCase("Mod float64[3,5] fmod 1", 13)
                      .Int("fmod", 1)
                      .In(Values(D::kDouble, {3, 5}, 304, -10, 10))
                      .In(Values(D::kDouble, {1, 5}, 305, 1, 3)));
  return cases;
}
KILN_REGISTER_OP_CASES("", "Mod", &ModDtypeCases);

}  // namespace
}  // namespace kiln::ops
