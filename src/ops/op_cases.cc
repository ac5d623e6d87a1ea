#include "ops/op_cases.h"

#include <memory>
#include <mutex>
#include <random>
#include <utility>

#include "ir/op.h"

namespace kiln::ops {
namespace {

struct Entry {
  std::string domain, op_type;
  CaseFactory cases;
};

std::mutex& CasesMutex() {
  static auto* m = new std::mutex();
  return *m;
}
std::vector<Entry>& Entries() {
  static auto* v = new std::vector<Entry>();
  return *v;
}

ir::Attribute MakeAttr(ir::Attribute::Type type) {
  ir::Attribute a;
  a.type = type;
  return a;
}

}  // namespace

OpCase& OpCase::Int(const std::string& n, int64_t v) {
  ir::Attribute a = MakeAttr(ir::Attribute::Type::kInt);
  a.i = v;
  attrs[n] = std::move(a);
  return *this;
}

OpCase& OpCase::Float(const std::string& n, float v) {
  ir::Attribute a = MakeAttr(ir::Attribute::Type::kFloat);
  a.f = v;
  attrs[n] = std::move(a);
  return *this;
}

OpCase& OpCase::Str(const std::string& n, const std::string& v) {
  ir::Attribute a = MakeAttr(ir::Attribute::Type::kString);
  a.s = v;
  attrs[n] = std::move(a);
  return *this;
}

OpCase& OpCase::Ints(const std::string& n, std::vector<int64_t> v) {
  ir::Attribute a = MakeAttr(ir::Attribute::Type::kInts);
  a.ints = std::move(v);
  attrs[n] = std::move(a);
  return *this;
}

OpCase& OpCase::Floats(const std::string& n, std::vector<float> v) {
  ir::Attribute a = MakeAttr(ir::Attribute::Type::kFloats);
  a.floats = std::move(v);
  attrs[n] = std::move(a);
  return *this;
}

Tensor CaseTensor(const Shape& shape, uint32_t seed, float lo, float hi) {
  Tensor t = Tensor::Empty(DataType::kFloat, shape);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = d(rng);
  return t;
}

Tensor CaseInts(DataType dtype, const Shape& shape, uint32_t seed, int64_t lo, int64_t hi) {
  Tensor t = Tensor::Empty(dtype, shape);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> d(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) {
    const int64_t v = d(rng);
    switch (dtype) {
      case DataType::kInt8:
        t.data<int8_t>()[i] = static_cast<int8_t>(v);
        break;
      case DataType::kUInt8:
        t.data<uint8_t>()[i] = static_cast<uint8_t>(v);
        break;
      case DataType::kInt32:
        t.data<int32_t>()[i] = static_cast<int32_t>(v);
        break;
      case DataType::kInt64:
        t.data<int64_t>()[i] = v;
        break;
      case DataType::kBool:
        t.data<bool>()[i] = v != 0;
        break;
      default:
        break;  // other dtypes: zeros
    }
  }
  return t;
}

Tensor CaseInt64s(const std::vector<int64_t>& v) {
  return Tensor::FromVector<int64_t>(v, {static_cast<int64_t>(v.size())});
}

Tensor CaseFloats(const std::vector<float>& v, const Shape& shape) {
  return Tensor::FromVector<float>(v, shape);
}

OpCasesRegistrar::OpCasesRegistrar(const char* domain, const char* op_type, CaseFactory cases) {
  std::lock_guard<std::mutex> lock(CasesMutex());
  Entries().push_back({domain, op_type, cases});
}

std::vector<OpCase> CasesFor(const std::string& domain, const std::string& op_type) {
  std::vector<CaseFactory> factories;
  {
    std::lock_guard<std::mutex> lock(CasesMutex());
    for (const Entry& e : Entries())
      if (e.domain == domain && e.op_type == op_type) factories.push_back(e.cases);
  }
  std::vector<OpCase> out;
  for (CaseFactory f : factories) {
    std::vector<OpCase> c = f();
    for (auto& x : c) out.push_back(std::move(x));
  }
  return out;
}

bool HasCases(const std::string& domain, const std::string& op_type) {
  std::lock_guard<std::mutex> lock(CasesMutex());
  for (const Entry& e : Entries())
    if (e.domain == domain && e.op_type == op_type) return true;
  return false;
}

ir::Node CaseNode(const std::string& domain, const std::string& op_type, const OpCase& c) {
  ir::Node node;
  node.name = "case";
  node.op_type = op_type;
  node.domain = domain;
  node.opset = c.opset;
  node.attrs = c.attrs;
  int id = 0;
  for (const auto& in : c.inputs) {
    node.inputs.push_back(in.value.defined() ? id : -1);
    ++id;
  }
  for (int o = 0; o < c.num_outputs; ++o) node.outputs.push_back(id++);
  return node;
}

StatusOr<CaseOutputs> InferCase(const ir::Node& node, const ir::Op& op,
                                const std::vector<CaseInput>& inputs) {
  if (op.ShapesFromRun()) {  // control flow, NMS: the run assigns each output
    const size_t n = node.outputs.size();
    return CaseOutputs{std::vector<DataType>(n, DataType::kUndefined), std::vector<Shape>(n)};
  }
  std::vector<DataType> dtypes;
  std::vector<Shape> shapes;
  std::vector<const Tensor*> values;
  for (const auto& x : inputs) {
    dtypes.push_back(x.value.dtype());
    shapes.push_back(x.value.shape());
    values.push_back(x.value.defined() ? &x.value : nullptr);
  }
  ir::InferContext ctx(node, dtypes, shapes, values);
  KILN_RETURN_IF_ERROR(op.Infer(ctx));
  return CaseOutputs{ctx.out_dtypes(), ctx.out_shapes()};
}

StatusOr<std::vector<Tensor>> ReferenceOutputs(const ir::Op& op,
                                               const std::vector<CaseInput>& inputs,
                                               const CaseOutputs& inferred) {
  ir::ComputeContext ctx;
  for (const auto& x : inputs) ctx.inputs.push_back(x.value.defined() ? &x.value : nullptr);
  std::vector<Tensor> outs(inferred.dtypes.size());
  for (size_t o = 0; o < outs.size(); ++o) {
    if (!op.ShapesFromRun()) outs[o] = Tensor::Empty(inferred.dtypes[o], inferred.shapes[o]);
    ctx.outputs.push_back(&outs[o]);
  }
  KILN_RETURN_IF_ERROR(op.Compute(ctx));
  return outs;
}

Status RunCaseOnReference(const std::string& domain, const std::string& op_type, const OpCase& c) {
  const ir::Node node = CaseNode(domain, op_type, c);
  std::string why;
  const ir::OpDef* def = ir::OpRegistry::Global().Find(domain, op_type, c.opset, &why);
  if (def == nullptr) return InvalidArgument("no op definition for the case: " + why);
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<ir::Op> op, def->create(node));
  KILN_ASSIGN_OR_RETURN(CaseOutputs inferred, InferCase(node, *op, c.inputs));
  KILN_ASSIGN_OR_RETURN(std::vector<Tensor> outs, ReferenceOutputs(*op, c.inputs, inferred));
  if (outs.size() != static_cast<size_t>(c.num_outputs))
    return InvalidArgument("the reference gave " + std::to_string(outs.size()) + " outputs");
  return OkStatus();
}

}  // namespace kiln::ops
