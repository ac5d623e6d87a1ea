#include "common.h"

#include <cstdio>
#include <fstream>

#ifdef KILN_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif

#include "core/npy.h"
#include "onnx/tensor_proto.h"

namespace kiln::cli {

int ExitCodeFor(const Status& s) { return s.ok() ? 0 : 10 + static_cast<int>(s.code()); }

int Fail(const Status& s) {
  std::fprintf(stderr, "kiln: error: %s\n", s.ToString().c_str());
  return ExitCodeFor(s);
}

StatusOr<Tensor> ReadTensorFile(const std::string& path) {
  auto ends = [&](const char* ext) {
    std::string e = ext;
    return path.size() >= e.size() && path.compare(path.size() - e.size(), e.size(), e) == 0;
  };
  if (ends(".npy")) return ReadNpyFile(path);
  if (ends(".pb")) return onnxio::ReadTensorProtoFile(path);
  return InvalidArgument("'" + path + "': unknown tensor file type; expected .npy or .pb");
}

std::string OneDnnVersion() {
#ifdef KILN_HAVE_DNNL
  const dnnl_version_t* v = dnnl_version();
  return std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
#else
  return "not linked";
#endif
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

std::string SanitizeFileName(const std::string& name) {
  std::string out = name;
  for (char& c : out) {
    bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-';
    if (!ok) c = '_';
  }
  if (out.empty() || out == "." || out == "..") out = "_" + out;
  return out;
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
