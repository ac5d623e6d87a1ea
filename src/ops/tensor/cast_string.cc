// Cast to and from strings, matching ONNX's reference (numpy's astype):
// - number -> string as numpy prints the value of its type: the shortest digits that read back
//   to the same value (float16 and the narrower floats: the same value of that type), positional
//   ("0.9767611", "123456790.0", "-0.0") when 1e-4 <= |x| < 1e16 or x is 0, else scientific with
//   at least two exponent digits ("1e-05", "3.4028235e+38"); "nan", "inf", "-inf". Integers in
//   decimal, bool as "True" / "False". string -> string copies.
// - string -> float types as Python's float() reads text: surrounding whitespace, a sign,
//   "nan", "inf", "infinity" in any case, digits with single underscores between them, then to
//   double and on to the type (Cast's rules for the narrow floats; past the range -> inf, below
//   it -> 0). string -> integers as int() reads base-10 text, within int64 (uint64: -2^63 to
//   2^64-1), then wrapped to the type as numpy does; string -> bool is true for any nonempty
//   text ("0" and "False" too), as numpy casts the reference's object arrays of strings.
#include "ops/tensor/cast_string.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string_view>
#include <vector>

namespace kiln::ops {
namespace {

using D = DataType;

bool IsNarrowFloat(DataType t) {
  switch (t) {
    case D::kFloat16:
    case D::kBFloat16:
    case D::kFloat8E4M3FN:
    case D::kFloat8E4M3FNUZ:
    case D::kFloat8E5M2:
    case D::kFloat8E5M2FNUZ:
    case D::kFloat4E2M1:
    case D::kFloat8E8M0:
      return true;
    default:
      return false;
  }
}

// numpy's text for a finite, nonzero value whose shortest digits are `digits` (first nonzero)
// with decimal exponent `exp` (value = d.ddd * 10^exp).
std::string NumpyText(bool negative, long double magnitude, std::string digits, int exp) {
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  std::string s = negative ? "-" : "";
  if (magnitude >= 1e-4L && magnitude < 1e16L) {
    if (exp < 0) {
      s += "0.";
      s.append(static_cast<size_t>(-exp - 1), '0');
      s += digits;
    } else if (digits.size() <= static_cast<size_t>(exp) + 1) {
      s += digits;
      s.append(static_cast<size_t>(exp) + 1 - digits.size(), '0');
      s += ".0";
    } else {
      s += digits.substr(0, static_cast<size_t>(exp) + 1) + "." + digits.substr(exp + 1);
    }
    return s;
  }
  s += digits[0];
  if (digits.size() > 1) s += "." + digits.substr(1);
  std::string e = std::to_string(exp < 0 ? -exp : exp);
  if (e.size() < 2) e.insert(0, "0");
  return s + (exp < 0 ? "e-" : "e+") + e;
}

// Splits std::to_chars' scientific text "d.ddde-XX" into its digits and exponent.
void SplitScientific(const char* begin, const char* end, std::string* digits, int* exp) {
  digits->clear();
  const char* p = begin;
  for (; p != end && *p != 'e'; ++p)
    if (*p != '.') digits->push_back(*p);
  *exp = 0;
  if (p != end) std::from_chars(p + 1 + (p[1] == '+' ? 1 : 0), end, *exp);
}

// nan, inf and zeros; nullptr for other values.
const char* SpecialText(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  if (v == 0) return std::signbit(v) ? "-0.0" : "0.0";
  return nullptr;
}

template <typename F>  // float or double: std::to_chars' shortest round-trip digits
std::string FloatText(F v) {
  if (const char* s = SpecialText(v)) return s;
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof(buf), std::fabs(v), std::chars_format::scientific);
  std::string digits;
  int exp = 0;
  SplitScientific(buf, r.ptr, &digits, &exp);
  return NumpyText(v < 0, std::fabs(static_cast<long double>(v)), digits, exp);
}

// A value of a narrow float type (widened to float exactly): the fewest digits that convert back
// to the same value of that type, the closest such. With n digits, the correctly rounded ones or,
// next to a power of two (where the gap below is half the gap above), their neighbour.
std::string NarrowFloatText(DataType t, float v) {
  if (const char* s = SpecialText(v)) return s;
  const double mag = std::fabs(static_cast<double>(v));
  CastRules nearest;
  nearest.e8m0_round = 2;
  auto round_trips = [&](double d) {
    uint8_t bits[8] = {};
    float back = 0;
    CastElements(D::kDouble, t, &d, bits, 1, nearest);
    CastElements(t, D::kFloat, bits, &back, 1);
    return back == static_cast<float>(mag);
  };
  for (int precision = 0; precision < 9; ++precision) {
    char buf[64];
    const auto r =
        std::to_chars(buf, buf + sizeof(buf), mag, std::chars_format::scientific, precision);
    std::string digits;
    int exp = 0;
    SplitScientific(buf, r.ptr, &digits, &exp);
    const uint64_t rounded = std::stoull(digits);
    const int scale = exp - precision;  // value = mantissa * 10^scale
    uint64_t best = 0;
    double best_error = 0;
    for (uint64_t m : {rounded, rounded + 1, rounded - 1}) {
      if (m == 0) continue;
      const std::string text = std::to_string(m) + "e" + std::to_string(scale);
      double d = 0;
      std::from_chars(text.data(), text.data() + text.size(), d);
      const double error = std::fabs(d - mag);
      if (round_trips(d) && (best == 0 || error < best_error)) {
        best = m;
        best_error = error;
      }
      if (best == rounded) break;
    }
    if (best != 0) {
      digits = std::to_string(best);
      return NumpyText(v < 0, mag, digits, scale + static_cast<int>(digits.size()) - 1);
    }
  }
  return FloatText(v);
}

// The text of element i in an error: quoted, cut at 64 characters.
std::string Quoted(const std::string& s) {
  return "'" + (s.size() > 64 ? s.substr(0, 64) + "..." : s) + "'";
}

std::string_view Strip(std::string_view s) {
  auto space = [](char c) {
    return c == ' ' || (c >= '\t' && c <= '\r') || (c >= '\x1c' && c <= '\x1f');
  };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

bool EqualsNoCase(std::string_view s, std::string_view word) {
  if (s.size() != word.size()) return false;
  for (size_t i = 0; i < s.size(); ++i)
    if ((s[i] | 0x20) != word[i]) return false;
  return true;
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Reads digits from s[*i] on, with single underscores between digits (Python's digitpart),
// appending the digits to `out`; the number of digits read.
size_t ReadDigits(std::string_view s, size_t* i, std::string* out) {
  size_t n = 0;
  while (*i < s.size()) {
    const char c = s[*i];
    if (IsDigit(c)) {
      out->push_back(c);
      ++n;
      ++*i;
    } else if (c == '_' && n > 0 && IsDigit(s[*i - 1]) && *i + 1 < s.size() && IsDigit(s[*i + 1])) {
      ++*i;
    } else {
      break;
    }
  }
  return n;
}

// Python's float(s); false when s does not parse.
bool ParseFloat(std::string_view s, double* out) {
  s = Strip(s);
  bool negative = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  constexpr double kInf = std::numeric_limits<double>::infinity();
  if (EqualsNoCase(s, "inf") || EqualsNoCase(s, "infinity")) {
    *out = negative ? -kInf : kInf;
    return true;
  }
  if (EqualsNoCase(s, "nan")) {
    *out = std::copysign(std::numeric_limits<double>::quiet_NaN(), negative ? -1.0 : 1.0);
    return true;
  }
  std::string text, int_digits, frac_digits;
  size_t i = 0;
  ReadDigits(s, &i, &int_digits);
  if (i < s.size() && s[i] == '.') {
    ++i;
    ReadDigits(s, &i, &frac_digits);
  }
  if (int_digits.empty() && frac_digits.empty()) return false;
  text = int_digits + "." + frac_digits;
  // The decimal exponent of the first nonzero digit, before any written exponent.
  int64_t lead = 0;
  const size_t nz = int_digits.find_first_not_of('0');
  if (nz != std::string::npos) {
    lead = static_cast<int64_t>(int_digits.size() - nz) - 1;
  } else {
    const size_t fz = frac_digits.find_first_not_of('0');
    lead = fz == std::string::npos ? 0 : -static_cast<int64_t>(fz) - 1;
  }
  int64_t written = 0;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    bool exp_negative = false;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) exp_negative = s[i++] == '-';
    std::string exp_digits;
    if (ReadDigits(s, &i, &exp_digits) == 0) return false;
    for (char c : exp_digits) written = std::min<int64_t>(written * 10 + (c - '0'), 1000000);
    if (exp_negative) written = -written;
    text += "e" + std::to_string(written);
  }
  if (i != s.size()) return false;
  double v = 0;
  const auto r = std::from_chars(text.data(), text.data() + text.size(), v);
  if (r.ec == std::errc::result_out_of_range)
    v = lead + written > 0 ? kInf : 0.0;
  else if (r.ec != std::errc() || r.ptr != text.data() + text.size())
    return false;
  *out = negative ? -v : v;
  return true;
}

enum class IntParse { kOk, kSyntax, kRange };

// Python's int(s) in base 10, within [-2^63, 2^63 - 1] (to uint64: [-2^63, 2^64 - 1]); the
// two's-complement bits in *out.
IntParse ParseInt(std::string_view s, bool to_uint64, uint64_t* out) {
  s = Strip(s);
  bool negative = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  std::string digits;
  size_t i = 0;
  if (ReadDigits(s, &i, &digits) == 0 || i != s.size()) return IntParse::kSyntax;
  const uint64_t limit = negative    ? uint64_t{1} << 63
                         : to_uint64 ? std::numeric_limits<uint64_t>::max()
                                     : (uint64_t{1} << 63) - 1;
  uint64_t m = 0;
  for (char c : digits) {
    const uint64_t d = static_cast<uint64_t>(c - '0');
    if (m > (limit - d) / 10) return IntParse::kRange;
    m = m * 10 + d;
  }
  *out = negative ? ~m + 1 : m;
  return IntParse::kOk;
}

}  // namespace

bool StringCastable(DataType t) {
  return t == D::kString || CastElements(t, t, nullptr, nullptr, 0);
}

Status CastToStrings(const Tensor& in, Tensor* out) {
  const DataType from = in.dtype();
  const int64_t n = in.numel();
  std::string* dst = out->data<std::string>();
  if (from == D::kString) {
    const std::string* src = in.data<std::string>();
    for (int64_t i = 0; i < n; ++i) dst[i] = src[i];
  } else if (from == D::kBool) {
    const bool* src = in.data<bool>();
    for (int64_t i = 0; i < n; ++i) dst[i] = src[i] ? "True" : "False";
  } else if (from == D::kFloat) {
    const float* src = in.data<float>();
    for (int64_t i = 0; i < n; ++i) dst[i] = FloatText(src[i]);
  } else if (from == D::kDouble) {
    const double* src = in.data<double>();
    for (int64_t i = 0; i < n; ++i) dst[i] = FloatText(src[i]);
  } else if (from == D::kUInt64) {
    const uint64_t* src = in.data<uint64_t>();
    for (int64_t i = 0; i < n; ++i) dst[i] = std::to_string(src[i]);
  } else if (IsNarrowFloat(from)) {
    std::vector<float> wide(static_cast<size_t>(n));
    CastElements(from, D::kFloat, in.raw(), wide.data(), n);
    for (int64_t i = 0; i < n; ++i) dst[i] = NarrowFloatText(from, wide[i]);
  } else {
    std::vector<int64_t> wide(static_cast<size_t>(n));
    if (!CastElements(from, D::kInt64, in.raw(), wide.data(), n))
      return InvalidArgument(std::string("cannot cast ") + DataTypeName(from) + " to string");
    for (int64_t i = 0; i < n; ++i) dst[i] = std::to_string(wide[i]);
  }
  return OkStatus();
}

Status CastFromStrings(const Tensor& in, Tensor* out, const CastRules& rules) {
  const DataType to = out->dtype();
  const int64_t n = in.numel();
  const std::string* src = in.data<std::string>();
  const std::string name = DataTypeName(to);
  const bool floating = to == D::kFloat || to == D::kDouble || IsNarrowFloat(to);
  if (!floating && !CastElements(to, to, nullptr, nullptr, 0))
    return InvalidArgument("cannot cast string to " + name);
  if (floating) {
    std::vector<double> values(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      if (!ParseFloat(src[i], &values[i]))
        return InvalidArgument("element " + std::to_string(i) + " does not parse as " + name +
                               "; got " + Quoted(src[i]));
    CastElements(D::kDouble, to, values.data(), out->raw(), n, rules);
    return OkStatus();
  }
  if (to == D::kBool) {
    bool* dst = out->data<bool>();
    for (int64_t i = 0; i < n; ++i) dst[i] = !src[i].empty();
    return OkStatus();
  }
  std::vector<uint64_t> bits(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const IntParse r = ParseInt(src[i], to == D::kUInt64, &bits[i]);
    if (r == IntParse::kSyntax)
      return InvalidArgument("element " + std::to_string(i) + " does not parse as " + name +
                             "; got " + Quoted(src[i]));
    if (r == IntParse::kRange)
      return InvalidArgument("element " + std::to_string(i) + " is out of range for " +
                             (to == D::kUInt64 ? name : "int64") + "; got " + Quoted(src[i]));
  }
  CastElements(to == D::kUInt64 ? D::kUInt64 : D::kInt64, to, bits.data(), out->raw(), n, rules);
  return OkStatus();
}

}  // namespace kiln::ops
