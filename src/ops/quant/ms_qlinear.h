// The com.microsoft quantized operators kiln implements (ms_qlinear.cc) and the ai.onnx float op
// each is defined by (between DequantizeLinear of its inputs and QuantizeLinear of its output):
// shared by their reference kernels and by the optimizer's expansion (passes/expand_qlinear.cc).
#pragma once

#include <string>

namespace kiln::ops::quant {

struct MsQLinearForm {
  const char* op_type;  // the com.microsoft operator
  const char* inner;    // the ai.onnx float op
  int inner_opset;      // the version of it whose semantics the operator has
};

inline constexpr MsQLinearForm kMsQLinearForms[] = {
    {"QLinearAdd", "Add", 14},
    {"QLinearMul", "Mul", 14},
    {"QLinearGlobalAveragePool", "GlobalAveragePool", 1},
    {"QLinearAveragePool", "AveragePool", 19},
    {"QLinearSigmoid", "Sigmoid", 13},
    {"QLinearLeakyRelu", "LeakyRelu", 16},
    {"QLinearConcat", "Concat", 13},
    {"QGemm", "Gemm", 13},
};

// The form of com.microsoft `op_type`, or nullptr when kiln has none.
inline const MsQLinearForm* FindMsQLinearForm(const std::string& op_type) {
  for (const MsQLinearForm& f : kMsQLinearForms)
    if (op_type == f.op_type) return &f;
  return nullptr;
}

}  // namespace kiln::ops::quant
