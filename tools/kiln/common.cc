#include "common.h"

#include <cstdio>

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

}  // namespace kiln::cli
