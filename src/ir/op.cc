#include "ir/op.h"

#include <algorithm>

namespace kiln::ir {

InferContext::InferContext(const Node& node, std::vector<DataType> dtypes,
                           std::vector<Shape> shapes, std::vector<const Tensor*> values)
    : node_(node),
      dtypes_(std::move(dtypes)),
      shapes_(std::move(shapes)),
      values_(std::move(values)),
      out_dtypes_(node.outputs.size(), DataType::kUndefined),
      out_shapes_(node.outputs.size()),
      out_values_(node.outputs.size()) {}

void InferContext::SetOutput(size_t i, DataType dtype, Shape shape) {
  if (i >= out_dtypes_.size()) return;
  out_dtypes_[i] = dtype;
  out_shapes_[i] = std::move(shape);
}

void InferContext::SetOutputValue(size_t i, Tensor value) {
  if (i >= out_values_.size()) return;
  out_dtypes_[i] = value.dtype();
  out_shapes_[i] = value.shape();
  out_values_[i] = std::move(value);
}

Status InferContext::Error(const std::string& rule) const {
  std::string s = "failed to infer shapes of " + node_.Describe() + ": " + rule + "; inputs ";
  for (size_t i = 0; i < dtypes_.size(); ++i) {
    if (i) s += ", ";
    s += has_input(i) ? std::string(DataTypeName(dtypes_[i])) + ShapeToString(shapes_[i])
                      : std::string("(omitted)");
  }
  return InvalidModel(s);
}

Status InferContext::ExpectDtype(size_t i, std::initializer_list<DataType> allowed) const {
  if (!has_input(i)) return OkStatus();
  if (std::find(allowed.begin(), allowed.end(), dtypes_[i]) != allowed.end()) return OkStatus();
  // float16 goes wherever float32 does, as in ONNX's type lists. Float16 models are computed in
  // float32 (passes/lower_float16.h); float16 values reach only kernels that declare them
  // (runtime/half_values.h), so inference admits them and the kernels decide.
  if (dtypes_[i] == DataType::kFloat16 &&
      std::find(allowed.begin(), allowed.end(), DataType::kFloat) != allowed.end())
    return OkStatus();
  std::string names;
  for (DataType t : allowed) names += std::string(names.empty() ? "" : "/") + DataTypeName(t);
  return Unsupported("failed to infer shapes of " + node_.Describe() + ": input " +
                     std::to_string(i) + " must be " + names + "; got " + DataTypeName(dtypes_[i]));
}

Status Op::RunError(const std::string& rule) const {
  return InvalidArgument("failed to run " + describe_ + ": " + rule);
}

Status AttrError(const Node& node, const std::string& rule) {
  return InvalidModel("failed to load " + node.Describe() + ": " + rule);
}

OpRegistry& OpRegistry::Global() {
  static OpRegistry* r = new OpRegistry();
  return *r;
}

void OpRegistry::Register(OpDef def) { defs_.push_back(std::make_unique<OpDef>(std::move(def))); }

const OpDef* OpRegistry::Find(const std::string& domain, const std::string& op_type, int opset,
                              std::string* why) const {
  std::string d = domain == "ai.onnx" ? "" : domain;
  bool known = false;
  int lo = 1 << 30, hi = 0;
  for (const auto& def : defs_) {
    if (def->op_type != op_type || def->domain != d) continue;
    known = true;
    lo = std::min(lo, def->since);
    hi = std::max(hi, def->until);
    if (opset >= def->since && opset <= def->until) return def.get();
  }
  if (why) {
    if (!known)
      *why = "op not implemented in kiln";
    else
      *why = "kiln implements " + op_type + " for opsets " + std::to_string(lo) + ".." +
             std::to_string(hi) + " only";
  }
  return nullptr;
}

std::vector<const OpDef*> OpRegistry::All() const {
  std::vector<const OpDef*> v;
  for (const auto& d : defs_) v.push_back(d.get());
  return v;
}

OpRegistrar::OpRegistrar(const char* op_type, int since, int until, OpFactory create) {
  OpRegistry::Global().Register(OpDef{op_type, "", since, until, create});
}

OpRegistrar::OpRegistrar(const char* domain, const char* op_type, int since, int until,
                         OpFactory create) {
  OpRegistry::Global().Register(OpDef{op_type, domain, since, until, create});
}

}  // namespace kiln::ir
