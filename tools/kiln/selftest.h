// `kiln selftest`: every kernel case (selftest_cases.cc) and every bundled model run on a device
// backend and compared with kiln's reference kernels on the CPU.
#pragma once

#include <string>
#include <vector>

namespace kiln::cli {

struct SelftestCase {
  std::string name;
  std::string model;             // serialized ONNX ModelProto; every input has a fixed shape
  bool positive_inputs = false;  // inputs in [0.1, 2] (Log, Sqrt, Reciprocal, Pow)
};

std::vector<SelftestCase> SelftestCases();

}  // namespace kiln::cli
