// Small helpers the string ops (src/ops/text/) share: making string tensors and string-list
// attributes for their cases, and the dtype check their reference kernels do before reading
// strings (ShapesFromRun ops are not inferred before they run, so Compute checks too).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "ir/op.h"
#include "ops/op_cases.h"

namespace kiln::ops {

// A string tensor holding `values` in row-major order (values.size() must be NumElements(shape)).
inline Tensor StringTensor(const std::vector<std::string>& values, Shape shape) {
  Tensor t = Tensor::Strings(std::move(shape));
  std::string* p = t.data<std::string>();
  for (size_t i = 0; i < values.size() && static_cast<int64_t>(i) < t.numel(); ++i)
    p[i] = values[i];
  return t;
}

// Sets a list-of-strings attribute on a case (stopwords, keys_strings).
inline void SetStringsAttr(OpCase& c, const std::string& name, std::vector<std::string> values) {
  ir::Attribute a;
  a.type = ir::Attribute::Type::kStrings;
  a.strings = std::move(values);
  c.attrs[name] = std::move(a);
}

// "input 0 (X) must be a string tensor; got float32" unless the input is present and a string
// tensor.
inline Status ExpectStringInput(const ir::Op& op, const ir::ComputeContext& ctx, size_t i,
                                const char* name) {
  if (!ctx.has(i)) return op.RunError(std::string("input ") + name + " is required");
  if (ctx.in(i).dtype() != DataType::kString)
    return op.RunError(std::string("input ") + name + " must be a string tensor; got " +
                       DataTypeName(ctx.in(i).dtype()));
  return OkStatus();
}

}  // namespace kiln::ops
