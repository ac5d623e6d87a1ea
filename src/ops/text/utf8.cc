// UTF-8 decoding, encoding, simple case mapping and whitespace classes (see utf8.h).
#include "ops/text/utf8.h"

#include <locale.h>
#include <wctype.h>

namespace kiln::ops {

size_t DecodeUtf8(const std::string& s, size_t pos, char32_t* cp, bool* valid) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char b0 = byte(pos);
  *valid = true;
  *cp = b0;
  if (b0 < 0x80) return 1;
  size_t len = 0;
  char32_t v = 0, min = 0;
  if ((b0 & 0xE0) == 0xC0) {
    len = 2, v = b0 & 0x1F, min = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3, v = b0 & 0x0F, min = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4, v = b0 & 0x07, min = 0x10000;
  }
  if (len == 0 || pos + len > s.size()) {
    *valid = false;
    return 1;
  }
  for (size_t k = 1; k < len; ++k) {
    const unsigned char b = byte(pos + k);
    if ((b & 0xC0) != 0x80) {
      *valid = false;
      return 1;
    }
    v = (v << 6) | (b & 0x3F);
  }
  if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) {
    *valid = false;
    return 1;
  }
  *cp = v;
  return len;
}

void AppendUtf8(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

namespace {

// C.UTF-8's LC_CTYPE, made once and kept for the life of the process; (locale_t)0 when the C
// library has none.
locale_t Utf8Ctype() {
  static const locale_t loc = newlocale(LC_CTYPE_MASK, "C.UTF-8", static_cast<locale_t>(0));
  return loc;
}

}  // namespace

std::string ChangeCase(const std::string& s, bool upper) {
  const locale_t loc = Utf8Ctype();
  std::string out;
  out.reserve(s.size());
  for (size_t pos = 0; pos < s.size();) {
    char32_t cp = 0;
    bool valid = true;
    const size_t len = DecodeUtf8(s, pos, &cp, &valid);
    if (!valid) {
      out.push_back(s[pos]);
    } else if (cp < 0x80) {
      if (upper && cp >= 'a' && cp <= 'z') cp -= 'a' - 'A';
      if (!upper && cp >= 'A' && cp <= 'Z') cp += 'a' - 'A';
      out.push_back(static_cast<char>(cp));
    } else if (loc == static_cast<locale_t>(0)) {
      out.append(s, pos, len);
    } else {
      const wint_t w = static_cast<wint_t>(cp);
      const wint_t m = upper ? towupper_l(w, loc) : towlower_l(w, loc);
      const char32_t mapped = static_cast<char32_t>(m);
      // A mapping outside the scalar values would not encode; keep the original then.
      if (mapped > 0x10FFFF || (mapped >= 0xD800 && mapped <= 0xDFFF))
        out.append(s, pos, len);
      else
        AppendUtf8(mapped, &out);
    }
    pos += len;
  }
  return out;
}

bool IsPythonSpace(char32_t cp) {
  if (cp == ' ' || (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x1F)) return true;
  if (cp < 0x80) return false;
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
         cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

}  // namespace kiln::ops
