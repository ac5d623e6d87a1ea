// UTF-8 helpers for the string ops (src/ops/text/): decoding one code point, encoding one, and
// Unicode simple case mapping. Bytes that are not well-formed UTF-8 decode as themselves, one at a
// time (DecodeUtf8 reports them as invalid), so a string with stray bytes passes through unchanged.
#pragma once

#include <cstddef>
#include <string>

namespace kiln::ops {

// The code point starting at s[pos] (pos < s.size()): stores it in *cp and returns its length in
// bytes (1-4). A malformed, overlong, surrogate or truncated sequence gives length 1 and
// *valid = false (*cp is then the byte).
size_t DecodeUtf8(const std::string& s, size_t pos, char32_t* cp, bool* valid);
// Appends the UTF-8 encoding of cp (a Unicode scalar value) to *out.
void AppendUtf8(char32_t cp, std::string* out);

// s with every code point lowercased (upper = false) or uppercased (upper = true) by Unicode's
// simple (one to one) case mapping: glibc's towlower_l/towupper_l under the C.UTF-8 locale, made
// once per process with newlocale (the global locale is never touched, so this is thread-safe).
// Where C.UTF-8 is missing, only ASCII letters change. Bytes that are not UTF-8 are kept.
std::string ChangeCase(const std::string& s, bool upper);

// Whether cp is whitespace as Python's str.split() sees it (str.isspace): ASCII \t \n \v \f \r,
// space, \x1c-\x1f, and U+0085, U+00A0, U+1680, U+2000-U+200A, U+2028, U+2029, U+202F, U+205F,
// U+3000.
bool IsPythonSpace(char32_t cp);

}  // namespace kiln::ops
