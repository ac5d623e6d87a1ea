// Kernel test cases that live with their op. Each op that has a fast kernel on some backend
// registers, next to its code, a function returning its cases: one node's attributes, opset and
// input tensors (constant or not). The kernel harness (kiln/diagnostics.h, CheckKernels) runs
// every registered kernel of a backend on every case of its op that the kernel supports, against
// the op's reference kernel (ir::Op::Compute), with outputs prefilled with NaN and guard bytes
// past their end. A kernel whose op has no cases, or that supports none of them, fails the suite.
//
//   std::vector<OpCase> ReluCases() {
//     return {OpCase("odd sizes", 13).In(CaseTensor({3, 1, 7}, 1))};
//   }
//   KILN_REGISTER_OP_CASES("", "Relu", &ReluCases);
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "kiln/status.h"
#include "kiln/tensor.h"

namespace kiln::ir {
class Op;
}

namespace kiln::ops {

struct CaseInput {
  Tensor value;           // undefined: an omitted optional input
  bool constant = false;  // a weight (an initializer): kernels may prepack it
};

struct OpCase {
  OpCase() = default;
  OpCase(std::string name, int opset) : name(std::move(name)), opset(opset) {}

  std::string name;  // what the case covers: "3x3 stride 2, pads 1 0 1 0"
  int opset = 13;
  std::map<std::string, ir::Attribute> attrs;
  std::vector<CaseInput> inputs;
  int num_outputs = 1;
  // |kernel - reference| <= atol + rtol * |reference| per element of float outputs; integer and
  // bool outputs within atol (so equal unless a case says otherwise, with its reason).
  double atol = 1e-4, rtol = 1e-4;

  OpCase& In(Tensor t) {
    inputs.push_back({std::move(t), false});
    return *this;
  }
  OpCase& Const(Tensor t) {
    inputs.push_back({std::move(t), true});
    return *this;
  }
  OpCase& Omitted() {
    inputs.push_back({Tensor(), false});
    return *this;
  }
  OpCase& Int(const std::string& n, int64_t v);
  OpCase& Float(const std::string& n, float v);
  OpCase& Str(const std::string& n, const std::string& v);
  OpCase& Ints(const std::string& n, std::vector<int64_t> v);
  OpCase& Floats(const std::string& n, std::vector<float> v);
  OpCase& Outputs(int n) {
    num_outputs = n;
    return *this;
  }
  OpCase& Tolerance(double abs, double rel) {
    atol = abs;
    rtol = rel;
    return *this;
  }
};

// Seeded uniform float32 values in [lo, hi).
Tensor CaseTensor(const Shape& shape, uint32_t seed, float lo = -1.f, float hi = 1.f);
// Seeded integers in [lo, hi] of an integer dtype (int8, uint8, int32, int64).
Tensor CaseInts(DataType dtype, const Shape& shape, uint32_t seed, int64_t lo, int64_t hi);
// A 1-D int64 tensor (axes, shapes, pads as inputs).
Tensor CaseInt64s(const std::vector<int64_t>& v);
// A float32 tensor of given values.
Tensor CaseFloats(const std::vector<float>& v, const Shape& shape);

using CaseFactory = std::vector<OpCase> (*)();

struct OpCasesRegistrar {
  OpCasesRegistrar(const char* domain, const char* op_type, CaseFactory cases);
};

// Every case registered for (domain, op_type), in registration order; empty when none.
std::vector<OpCase> CasesFor(const std::string& domain, const std::string& op_type);
// Whether any case is registered for (domain, op_type).
bool HasCases(const std::string& domain, const std::string& op_type);
// The node a case describes for (domain, op_type): inputs are values 0..n-1 (-1 when omitted),
// outputs the values after them.
ir::Node CaseNode(const std::string& domain, const std::string& op_type, const OpCase& c);
// Output dtypes and shapes of `node` on `inputs` (every input's value known).
struct CaseOutputs {
  std::vector<DataType> dtypes;
  std::vector<Shape> shapes;
};
StatusOr<CaseOutputs> InferCase(const ir::Node& node, const ir::Op& op,
                                const std::vector<CaseInput>& inputs);
// The reference kernel's outputs on `inputs`.
StatusOr<std::vector<Tensor>> ReferenceOutputs(const ir::Op& op,
                                               const std::vector<CaseInput>& inputs,
                                               const CaseOutputs& inferred);
// Creates the op for the case, infers and runs its reference kernel; the error says which step
// failed.
Status RunCaseOnReference(const std::string& domain, const std::string& op_type, const OpCase& c);

}  // namespace kiln::ops

#define KILN_REGISTER_OP_CASES(domain, op_type, factory)                                    \
  static ::kiln::ops::OpCasesRegistrar KILN_CONCAT_(kiln_op_cases_registrar_, __COUNTER__)( \
      domain, op_type, factory)
