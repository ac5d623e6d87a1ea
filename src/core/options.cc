#include "kiln/options.h"

namespace kiln {

const char* PrecisionName(Precision p) {
  switch (p) {
    case Precision::kFp32:
      return "fp32";
    case Precision::kBf16:
      return "bf16";
    case Precision::kFp16:
      return "fp16";
  }
  return "fp32";
}

StatusOr<Precision> ParsePrecision(const std::string& name) {
  for (Precision p : {Precision::kFp32, Precision::kBf16, Precision::kFp16})
    if (name == PrecisionName(p)) return p;
  return InvalidArgument("precision must be fp32, bf16 or fp16; got '" + name + "'");
}

}  // namespace kiln
