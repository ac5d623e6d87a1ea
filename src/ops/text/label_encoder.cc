// LabelEncoder (ai.onnx.ml, opsets 1-4): maps each element of X through a table of keys to values,
// a default where a key is missing. Y has X's shape.
//   Opset 1: classes_strings; a string X gives int64 Y, each element's index among the classes
//   (default_int64, -1, when absent); an int64 X gives string Y, the class at that index
//   (default_string, "_Unused", out of range).
//   Opsets 2-4: exactly one of keys_strings, keys_int64s, keys_floats (4: keys_tensor) and one of
//   values_strings, values_int64s, values_floats (4: values_tensor), of equal length; a key given
//   twice maps to its last value (ONNX's reference builds a dict). X's dtype must be the keys'
//   (string, int64, float; 4 also int32, int16, double from keys_tensor) and Y's is the values'.
//   Default: default_string ("_Unused"), default_int64 (-1), default_float (-0.0) for the values_*
//   lists; for values_tensor, default_tensor (one element, the values' dtype) or those defaults.
//   Float keys: NaN matches NaN and -0.0 matches 0.0, as ONNX's reference (a Python dict).
// A string Y is made by the run (ShapesFromRun); a numeric Y is inferred and allocated as usual.
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "ops/common.h"
#include "ops/op_cases.h"
#include "ops/text/text_common.h"
#include "ops/typed_dispatch.h"

namespace kiln::ops {
namespace {

constexpr const char* kMl = "ai.onnx.ml";
using D = DataType;

struct LabelEncoderAttrs : ir::OpAttrs {
  bool classes_v1 = false;  // opset 1: classes_strings, direction from X's dtype
  D key_type = D::kUndefined, value_type = D::kUndefined;
  Tensor keys, values;  // 1-D, of key_type and value_type
  Tensor fallback;      // one element of value_type (opset 1: both directions' defaults below)
  std::string default_string = "_Unused";
  int64_t default_int64 = -1;
};

bool IsTableType(D t) {
  return t == D::kString || t == D::kInt64 || t == D::kInt32 || t == D::kInt16 || t == D::kFloat ||
         t == D::kDouble;
}

// Element i of an int64, int32 or int16 tensor.
int64_t IntAt(const Tensor& t, int64_t i) {
  if (t.dtype() == D::kInt32) return t.data<int32_t>()[i];
  if (t.dtype() == D::kInt16) return t.data<int16_t>()[i];
  return t.data<int64_t>()[i];
}

// Element i of a 1-D tensor of a table type written into element j of another of the same dtype.
void CopyElement(const Tensor& src, int64_t i, Tensor& dst, int64_t j) {
  (void)DispatchAmong<std::string, int64_t, int32_t, int16_t, float, double>(
      src.dtype(), "", [&](auto tag) {
        using T = decltype(tag);
        dst.data<T>()[j] = src.data<T>()[i];
        return OkStatus();
      });
}

class LabelEncoderOp final : public ir::Op {
 public:
  static StatusOr<std::unique_ptr<ir::Op>> Create(const ir::Node& node) {
    std::unique_ptr<LabelEncoderOp> op(new LabelEncoderOp(node));
    LabelEncoderAttrs& a = op->a_;
    a.default_string = node.GetString("default_string", "_Unused");
    a.default_int64 = node.GetInt("default_int64", -1);
    if (node.opset <= 1) {
      a.classes_v1 = true;
      auto it = node.attrs.find("classes_strings");
      const std::vector<std::string> none;
      const auto& classes = it == node.attrs.end() ? none : it->second.strings;
      a.keys = StringTensor(classes, {static_cast<int64_t>(classes.size())});
      a.key_type = D::kString;
    } else {
      KILN_ASSIGN_OR_RETURN(a.keys, Table(node, "keys"));
      KILN_ASSIGN_OR_RETURN(a.values, Table(node, "values"));
      a.key_type = a.keys.dtype();
      a.value_type = a.values.dtype();
      if (a.keys.numel() != a.values.numel())
        return ir::AttrError(node, "keys and values must have the same length; got " +
                                       std::to_string(a.keys.numel()) + " keys and " +
                                       std::to_string(a.values.numel()) + " values");
      KILN_ASSIGN_OR_RETURN(a.fallback, Default(node, a.value_type, node.HasAttr("values_tensor")));
    }
    op->Index();
    return std::unique_ptr<ir::Op>(std::move(op));
  }

  bool ShapesFromRun() const override { return a_.classes_v1 || a_.value_type == D::kString; }
  bool TakesNonPlainValues() const override { return true; }
  Status Infer(ir::InferContext& ctx) const override {
    if (a_.classes_v1) {
      KILN_RETURN_IF_ERROR(ctx.ExpectDtype(0, {D::kString, D::kInt64}));
      ctx.SetOutput(0, ctx.dtype(0) == D::kString ? D::kInt64 : D::kString, ctx.shape(0));
      return OkStatus();
    }
    if (ctx.dtype(0) != a_.key_type)
      return ctx.Error(std::string("X must have the keys' dtype ") + DataTypeName(a_.key_type) +
                       "; got " + DataTypeName(ctx.dtype(0)));
    ctx.SetOutput(0, a_.value_type, ctx.shape(0));
    return OkStatus();
  }

  Status Compute(const ir::ComputeContext& ctx) const override {
    if (!ctx.has(0)) return RunError("input X is required");
    const Tensor& x = ctx.in(0);
    if (a_.classes_v1) return ComputeV1(ctx);
    if (x.dtype() != a_.key_type)
      return RunError(std::string("X must have the keys' dtype ") + DataTypeName(a_.key_type) +
                      "; got " + DataTypeName(x.dtype()));
    Tensor y = ShapesFromRun() ? Tensor::Empty(a_.value_type, x.shape()) : ctx.out(0);
    if (y.dtype() != a_.value_type || y.shape() != x.shape())
      return RunError("Y must be " + std::string(DataTypeName(a_.value_type)) + " " +
                      ShapeToString(x.shape()) + "; got " + DataTypeName(y.dtype()) + " " +
                      ShapeToString(y.shape()));
    for (int64_t i = 0; i < x.numel(); ++i) {
      const int64_t k = Find(x, i);
      if (k >= 0)
        CopyElement(a_.values, k, y, i);
      else
        CopyElement(a_.fallback, 0, y, i);
    }
    if (ShapesFromRun() && !ctx.outputs.empty() && ctx.outputs[0] != nullptr) *ctx.outputs[0] = y;
    return OkStatus();
  }

  const ir::OpAttrs* attributes() const override { return &a_; }

 private:
  explicit LabelEncoderOp(const ir::Node& node) : Op(node) {}

  // keys_* or values_* (`which`): exactly one of the lists (and, from opset 4, the tensor).
  static StatusOr<Tensor> Table(const ir::Node& node, const std::string& which) {
    std::vector<std::string> present;
    for (const char* s : {"_strings", "_int64s", "_floats", "_tensor"})
      if (node.HasAttr(which + s)) present.push_back(which + s);
    if (present.size() != 1) {
      std::string got;
      for (const auto& p : present) got += (got.empty() ? "" : ", ") + p;
      return ir::AttrError(node, "exactly one of " + which + "_strings, " + which + "_int64s, " +
                                     which + "_floats, " + which + "_tensor must be set; got " +
                                     (got.empty() ? "none" : got));
    }
    const ir::Attribute& at = node.attrs.at(present[0]);
    if (present[0] == which + "_strings")
      return StringTensor(at.strings, {static_cast<int64_t>(at.strings.size())});
    if (present[0] == which + "_int64s")
      return Tensor::FromVector<int64_t>(at.ints, {static_cast<int64_t>(at.ints.size())});
    if (present[0] == which + "_floats")
      return Tensor::FromVector<float>(at.floats, {static_cast<int64_t>(at.floats.size())});
    if (node.opset < 4) return ir::AttrError(node, present[0] + " needs opset 4 or newer");
    const Tensor* t = node.GetTensor(present[0]);
    if (t == nullptr || !t->defined())
      return ir::AttrError(node, present[0] + " must be a tensor attribute");
    if (!IsTableType(t->dtype()))
      return ir::AttrError(node, present[0] +
                                     " must be string, int64, int32, int16, float32 or float64; "
                                     "got " +
                                     DataTypeName(t->dtype()));
    return t->Reshaped({t->numel()});
  }

  // The one-element default of the values' dtype.
  static StatusOr<Tensor> Default(const ir::Node& node, D type, bool from_tensor) {
    const Tensor* dt = from_tensor ? node.GetTensor("default_tensor") : nullptr;
    if (dt != nullptr && dt->defined()) {
      if (dt->dtype() != type || dt->numel() != 1)
        return ir::AttrError(node, std::string("default_tensor must hold one ") +
                                       DataTypeName(type) + " (the values' dtype); got " +
                                       DataTypeName(dt->dtype()) + " " +
                                       ShapeToString(dt->shape()));
      return dt->Reshaped({1});
    }
    Tensor t = Tensor::Empty(type, {1});
    const bool list = !from_tensor;
    switch (type) {
      case D::kString:
        t.data<std::string>()[0] = list ? node.GetString("default_string", "_Unused") : "_Unused";
        break;
      case D::kFloat:
        t.data<float>()[0] = list ? node.GetFloat("default_float", -0.f) : -0.f;
        break;
      case D::kDouble:
        t.data<double>()[0] = -0.0;
        break;
      case D::kInt64:
        t.data<int64_t>()[0] = list ? node.GetInt("default_int64", -1) : -1;
        break;
      case D::kInt32:
        t.data<int32_t>()[0] = -1;
        break;
      case D::kInt16:
        t.data<int16_t>()[0] = -1;
        break;
      default:
        break;
    }
    return t;
  }

  // Builds the lookup tables from the keys; a key given twice keeps its last position.
  void Index() {
    const Tensor& k = a_.keys;
    for (int64_t i = 0; i < k.numel(); ++i) {
      switch (k.dtype()) {
        case D::kString:
          strings_[k.data<std::string>()[i]] = i;
          break;
        case D::kInt64:
        case D::kInt32:
        case D::kInt16:
          ints_[IntAt(k, i)] = i;
          break;
        default: {
          const double v = ReadScalarAsDouble(k, i);
          if (std::isnan(v))
            nan_ = i;
          else
            floats_[v] = i;
        }
      }
    }
  }

  // The position of X[i] among the keys, or -1.
  int64_t Find(const Tensor& x, int64_t i) const {
    switch (x.dtype()) {
      case D::kString: {
        auto it = strings_.find(x.data<std::string>()[i]);
        return it == strings_.end() ? -1 : it->second;
      }
      case D::kInt64:
      case D::kInt32:
      case D::kInt16: {
        auto it = ints_.find(IntAt(x, i));
        return it == ints_.end() ? -1 : it->second;
      }
      default: {
        const double v = ReadScalarAsDouble(x, i);
        if (std::isnan(v)) return nan_;
        auto it = floats_.find(v);
        return it == floats_.end() ? -1 : it->second;
      }
    }
  }

  // Opset 1: string -> index among classes_strings; int64 -> the class at that index.
  Status ComputeV1(const ir::ComputeContext& ctx) const {
    const Tensor& x = ctx.in(0);
    Tensor y;
    if (x.dtype() == D::kString) {
      y = Tensor::Empty(D::kInt64, x.shape());
      for (int64_t i = 0; i < x.numel(); ++i) {
        const int64_t k = Find(x, i);
        y.data<int64_t>()[i] = k >= 0 ? k : a_.default_int64;
      }
    } else if (x.dtype() == D::kInt64) {
      y = Tensor::Strings(x.shape());
      const int64_t n = a_.keys.numel();
      for (int64_t i = 0; i < x.numel(); ++i) {
        const int64_t k = x.data<int64_t>()[i];
        y.data<std::string>()[i] =
            k >= 0 && k < n ? a_.keys.data<std::string>()[k] : a_.default_string;
      }
    } else {
      return RunError(std::string("X must be string or int64; got ") + DataTypeName(x.dtype()));
    }
    if (!ctx.outputs.empty() && ctx.outputs[0] != nullptr) *ctx.outputs[0] = y;
    return OkStatus();
  }

  LabelEncoderAttrs a_;
  std::unordered_map<std::string, int64_t> strings_;
  std::unordered_map<int64_t, int64_t> ints_;
  std::map<double, int64_t> floats_;  // -0.0 and 0.0 compare equal
  int64_t nan_ = -1;
};
KILN_REGISTER_OP_DOMAIN(kMl, "LabelEncoder", 1, 4, &LabelEncoderOp::Create);

OpCase WithStrings(OpCase c, const std::string& name, std::vector<std::string> v) {
  SetStringsAttr(c, name, std::move(v));
  return c;
}

// Cases: each direction of opset 1; string -> int64, int64 -> string, float -> float with NaN and
// -0.0 keys, a repeated key, defaults given and not; opset 4's tensors (int32 values, double keys).
std::vector<OpCase> LabelEncoderCases() {
  std::vector<OpCase> cases;
  const float nan = std::nanf("");
  cases.push_back(WithStrings(OpCase("v1 string -> index", 1)
                                  .In(StringTensor({"b", "z", "a"}, {3}))
                                  .Int("default_int64", 7),
                              "classes_strings", {"a", "b"}));
  cases.push_back(WithStrings(
      OpCase("v1 index -> string", 1).In(Tensor::FromVector<int64_t>({1, 5, -1, 0}, {2, 2})),
      "classes_strings", {"a", "b"}));
  cases.push_back(WithStrings(OpCase("string -> int64, default", 2)
                                  .In(StringTensor({"a", "b", "d", "c", "g", "a"}, {2, 3}))
                                  .Ints("values_int64s", {0, 1, 2, 9})
                                  .Int("default_int64", 42),
                              "keys_strings", {"a", "b", "c", "a"}));
  cases.push_back(WithStrings(OpCase("int64 -> string", 2)
                                  .In(Tensor::FromVector<int64_t>({3, 1, 2, 3}, {4}))
                                  .Ints("keys_int64s", {1, 3}),
                              "values_strings", {"one", "three"}));
  cases.push_back(OpCase("float -> float, NaN and -0 keys", 4)
                      .In(CaseFloats({nan, 0.f, 1.5f, 2.f, -0.f}, {5}))
                      .Floats("keys_floats", {nan, -0.f, 1.5f})
                      .Floats("values_floats", {10.f, 20.f, 30.f})
                      .Float("default_float", 5.f));
  OpCase tensors("double keys_tensor -> int32 values_tensor", 4);
  tensors.In(Tensor::FromVector<double>({2.0, 3.0, 4.0}, {3}));
  auto tensor_attr = [&](const std::string& name, Tensor t) {
    ir::Attribute at;
    at.type = ir::Attribute::Type::kTensor;
    at.t = std::move(t);
    tensors.attrs[name] = std::move(at);
  };
  tensor_attr("keys_tensor", Tensor::FromVector<double>({2.0, 4.0}, {2}));
  tensor_attr("values_tensor", Tensor::FromVector<int32_t>({20, 40}, {2}));
  tensor_attr("default_tensor", Tensor::FromVector<int32_t>({-7}, {1}));
  cases.push_back(std::move(tensors));
  return cases;
}
KILN_REGISTER_OP_CASES(kMl, "LabelEncoder", &LabelEncoderCases);

}  // namespace
}  // namespace kiln::ops
