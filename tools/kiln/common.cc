#include "common.h"

#include <cstdio>
#include <fstream>

namespace kiln::cli {

int ExitCodeFor(const Status& s) { return s.ok() ? 0 : 10 + static_cast<int>(s.code()); }

int Fail(const Status& s) {
  std::fprintf(stderr, "kiln: error: %s\n", s.ToString().c_str());
  return ExitCodeFor(s);
}

StatusOr<Shape> ParseDims(const std::string& name, const std::string& text) {
  Shape s;
  size_t p = 0;
  while (p <= text.size()) {
    size_t e = text.find('x', p);
    if (e == std::string::npos) e = text.size();
    std::string tok = text.substr(p, e - p);
    if (tok.empty() || tok.size() > 12 || tok.find_first_not_of("0123456789") != std::string::npos)
      return InvalidArgument("--shape " + name + "=" + text +
                             ": expected positive integer dims separated by 'x', e.g. " + name +
                             "=1x3x224x224");
    int64_t d = std::stoll(tok);
    if (d <= 0)
      return InvalidArgument("--shape " + name + "=" + text + ": dims must be positive, got " +
                             tok);
    s.push_back(d);
    p = e + 1;
  }
  return s;
}

Status WriteJsonReport(const std::string& path, const std::string& text, FILE* out) {
  if (path == "-") {
    std::fputs(text.c_str(), stdout);
    return OkStatus();
  }
  std::ofstream f(path);
  f << text;
  f.close();
  if (!f) return InvalidArgument("--json: cannot write '" + path + "'");
  std::fprintf(out, "json: %s\n", path.c_str());
  return OkStatus();
}

}  // namespace kiln::cli
