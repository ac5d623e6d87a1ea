// KServe v2 documents (kserve.h). JSON through nlohmann-json; tensor data either as JSON numbers
// (flat or nested, row-major) or, with the binary tensor data extension, as raw little-endian
// bytes after the JSON header.
#include "serving/kserve.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <type_traits>

#include "core/half.h"
#include "kiln/version.h"

namespace kiln::serving {

using nlohmann::json;

namespace {

struct TypeName {
  DataType type;
  const char* kserve;
};
constexpr TypeName kTypes[] = {
    {DataType::kBool, "BOOL"},     {DataType::kUInt8, "UINT8"},   {DataType::kUInt16, "UINT16"},
    {DataType::kUInt32, "UINT32"}, {DataType::kUInt64, "UINT64"}, {DataType::kInt8, "INT8"},
    {DataType::kInt16, "INT16"},   {DataType::kInt32, "INT32"},   {DataType::kInt64, "INT64"},
    {DataType::kFloat16, "FP16"},  {DataType::kFloat, "FP32"},    {DataType::kDouble, "FP64"},
    {DataType::kBFloat16, "BF16"},
};

// Appends every number of a (possibly nested) JSON array to `out`, row-major.
Status Flatten(const json& j, std::vector<const json*>* out) {
  if (j.is_array()) {
    for (const json& e : j) KILN_RETURN_IF_ERROR(Flatten(e, out));
    return OkStatus();
  }
  if (!j.is_number() && !j.is_boolean())
    return InvalidArgument("tensor data must hold numbers (or booleans for BOOL); got " +
                           std::string(j.type_name()));
  out->push_back(&j);
  return OkStatus();
}

// A JSON number as T without undefined behaviour. Floating types: a value beyond float32's range
// becomes +-inf (numpy's astype does the same). Integer types: a fraction is truncated toward
// zero, as a C cast does, and a value outside T's range (or NaN) is refused (false).
template <typename T>
bool JsonToValue(const json& v, T* out) {
  if (v.is_boolean()) {
    *out = static_cast<T>(v.get<bool>());
    return true;
  }
  if constexpr (std::is_floating_point_v<T>) {
    const double d = v.get<double>();
    if (std::is_same_v<T, float> && std::isfinite(d) &&
        std::fabs(d) > std::numeric_limits<float>::max()) {
      *out = static_cast<T>(d > 0 ? std::numeric_limits<float>::infinity()
                                  : -std::numeric_limits<float>::infinity());
    } else {
      *out = static_cast<T>(d);
    }
    return true;
  } else {
    if (v.is_number_unsigned()) {
      const uint64_t u = v.get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<T>::max())) return false;
      *out = static_cast<T>(u);
      return true;
    }
    if (v.is_number_integer()) {
      const int64_t s = v.get<int64_t>();
      if (s < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
          (s > 0 &&
           static_cast<uint64_t>(s) > static_cast<uint64_t>(std::numeric_limits<T>::max())))
        return false;
      *out = static_cast<T>(s);
      return true;
    }
    // A float for an integer tensor: in range after truncation (2^digits is exact in a double).
    const double d = std::trunc(v.get<double>());
    const double hi = std::ldexp(1.0, std::numeric_limits<T>::digits);
    const double lo = std::numeric_limits<T>::is_signed ? -hi : 0.0;
    if (!(d >= lo && d < hi)) return false;
    *out = static_cast<T>(d);
    return true;
  }
}

template <typename T>
Status StoreAll(const std::vector<const json*>& values, void* dst, const std::string& name) {
  T* d = static_cast<T*>(dst);
  for (size_t i = 0; i < values.size(); ++i)
    if (!JsonToValue(*values[i], &d[i]))
      return InvalidArgument("input '" + name + "': data[" + std::to_string(i) +
                             "] = " + values[i]->dump() + " does not fit the tensor's type");
  return OkStatus();
}

Status StoreJsonData(const std::vector<const json*>& values, Tensor* t, const std::string& name) {
  void* dst = t->raw();
  switch (t->dtype()) {
    case DataType::kBool: {
      bool* d = static_cast<bool*>(dst);
      for (size_t i = 0; i < values.size(); ++i)
        d[i] = values[i]->is_boolean() ? values[i]->get<bool>() : values[i]->get<double>() != 0;
      return OkStatus();
    }
    case DataType::kUInt8:
      return StoreAll<uint8_t>(values, dst, name);
    case DataType::kUInt16:
      return StoreAll<uint16_t>(values, dst, name);
    case DataType::kUInt32:
      return StoreAll<uint32_t>(values, dst, name);
    case DataType::kUInt64:
      return StoreAll<uint64_t>(values, dst, name);
    case DataType::kInt8:
      return StoreAll<int8_t>(values, dst, name);
    case DataType::kInt16:
      return StoreAll<int16_t>(values, dst, name);
    case DataType::kInt32:
      return StoreAll<int32_t>(values, dst, name);
    case DataType::kInt64:
      return StoreAll<int64_t>(values, dst, name);
    case DataType::kFloat:
      return StoreAll<float>(values, dst, name);
    case DataType::kDouble:
      return StoreAll<double>(values, dst, name);
    case DataType::kFloat16: {
      uint16_t* d = static_cast<uint16_t*>(dst);
      for (size_t i = 0; i < values.size(); ++i) d[i] = DoubleToHalf(values[i]->get<double>());
      return OkStatus();
    }
    case DataType::kBFloat16: {
      uint16_t* d = static_cast<uint16_t*>(dst);
      for (size_t i = 0; i < values.size(); ++i) {
        float f = 0;
        JsonToValue(*values[i], &f);  // floats never fail
        d[i] = FloatToBf16(f);
      }
      return OkStatus();
    }
    default:
      return InvalidArgument("input '" + name + "': datatype not carried as JSON");
  }
}

// The tensor of `type` and `shape` holding JSON `data`. The element count is checked before
// anything is allocated: a declared shape is only a claim, the data is what was sent.
StatusOr<Tensor> TensorFromJson(const json& data, DataType type, const Shape& shape,
                                const std::string& what, const std::string& name) {
  std::vector<const json*> values;
  KILN_RETURN_IF_ERROR(Flatten(data, &values));
  if (static_cast<int64_t>(values.size()) != NumElements(shape))
    return InvalidArgument(what + " '" + name + "': shape " + ShapeToString(shape) + " holds " +
                           std::to_string(NumElements(shape)) + " elements; data has " +
                           std::to_string(values.size()));
  Tensor tensor = Tensor::Empty(type, shape);
  KILN_RETURN_IF_ERROR(StoreJsonData(values, &tensor, name));
  return tensor;
}

template <typename T>
json ArrayOf(const Tensor& t) {
  const T* s = t.data<T>();
  json a = json::array();
  a.get_ref<json::array_t&>().reserve(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) a.push_back(s[i]);
  return a;
}

json JsonData(const Tensor& t) {
  switch (t.dtype()) {
    case DataType::kBool:
      return ArrayOf<bool>(t);
    case DataType::kUInt8:
      return ArrayOf<uint8_t>(t);
    case DataType::kUInt16:
      return ArrayOf<uint16_t>(t);
    case DataType::kUInt32:
      return ArrayOf<uint32_t>(t);
    case DataType::kUInt64:
      return ArrayOf<uint64_t>(t);
    case DataType::kInt8:
      return ArrayOf<int8_t>(t);
    case DataType::kInt16:
      return ArrayOf<int16_t>(t);
    case DataType::kInt32:
      return ArrayOf<int32_t>(t);
    case DataType::kInt64:
      return ArrayOf<int64_t>(t);
    case DataType::kFloat:
      return ArrayOf<float>(t);
    case DataType::kDouble:
      return ArrayOf<double>(t);
    case DataType::kFloat16:
    case DataType::kBFloat16: {
      const uint16_t* s = t.data<uint16_t>();
      json a = json::array();
      for (int64_t i = 0; i < t.numel(); ++i)
        a.push_back(t.dtype() == DataType::kFloat16 ? HalfToFloat(s[i]) : Bf16ToFloat(s[i]));
      return a;
    }
    default:
      return json::array();
  }
}

// A JSON parameter as a bool / integer, tolerating absence.
bool BoolParam(const json& params, const char* key) {
  auto it = params.find(key);
  return it != params.end() && it->is_boolean() && it->get<bool>();
}

json SpecJson(const TensorSpec& s) {
  return {{"name", s.name}, {"datatype", KServeDatatype(s.dtype)}, {"shape", s.dims}};
}

// Triton's config dims: without the batch dimension when the model batches.
std::vector<int64_t> ConfigDims(const TensorSpec& s, bool batched) {
  if (batched && !s.dims.empty()) return {s.dims.begin() + 1, s.dims.end()};
  return s.dims;
}

json StatPair(uint64_t count, uint64_t ns) { return {{"count", count}, {"ns", ns}}; }

// The tensors of an "inputs" (request) or "outputs" (response) array: JSON data, or binary data
// taken in order from `binary` (when the message has Inference-Header-Content-Length).
// With `owner`, binary data on a 64-byte boundary is adopted, not copied.
Status ParseTensorList(const json& list, bool has_json_length, std::string_view* binary,
                       const char* what, std::vector<NamedTensor>* out,
                       const std::shared_ptr<void>& owner = nullptr) {
  for (const json& in : list) {
    if (!in.is_object() || !in.contains("name") || !in["name"].is_string())
      return InvalidArgument(std::string("every ") + what + " needs a \"name\"");
    const std::string name = in["name"].get<std::string>();
    if (!in.contains("datatype") || !in["datatype"].is_string())
      return InvalidArgument(std::string(what) + " '" + name + "' has no \"datatype\"");
    const std::string dt = in["datatype"].get<std::string>();
    const DataType type = FromKServeDatatype(dt);
    if (type == DataType::kUndefined)
      return InvalidArgument(std::string(what) + " '" + name + "': datatype " + dt +
                             " is not supported");
    if (!in.contains("shape") || !in["shape"].is_array())
      return InvalidArgument(std::string(what) + " '" + name + "' has no \"shape\"");
    Shape shape;
    for (const json& d : in["shape"]) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0)
        return InvalidArgument(std::string(what) + " '" + name + "': shape " + in["shape"].dump() +
                               " must hold non-negative integers");
      shape.push_back(d.get<int64_t>());
    }
    int64_t numel = 1;
    for (int64_t d : shape) {
      if (d != 0 && numel > (int64_t{1} << 40) / d)
        return InvalidArgument(std::string(what) + " '" + name + "': shape " +
                               ShapeToString(shape) + " is too large");
      numel *= d;
    }
    const size_t bytes = static_cast<size_t>(numel) * DataTypeSize(type);
    std::optional<size_t> binary_size;
    if (in.contains("parameters") && in["parameters"].is_object() &&
        in["parameters"].contains("binary_data_size")) {
      const json& b = in["parameters"]["binary_data_size"];
      if (!b.is_number_integer() || b.get<int64_t>() < 0)
        return InvalidArgument(std::string(what) + " '" + name +
                               "': binary_data_size must be an integer");
      binary_size = b.get<size_t>();
    }
    if (binary_size) {
      if (!has_json_length)
        return InvalidArgument(std::string(what) + " '" + name +
                               "' names binary_data_size but the request has no "
                               "Inference-Header-Content-Length header");
      if (*binary_size != bytes)
        return InvalidArgument(std::string(what) + " '" + name + "': " + dt + ShapeToString(shape) +
                               " is " + std::to_string(bytes) + " bytes; binary_data_size is " +
                               std::to_string(*binary_size));
      if (binary->size() < bytes)
        return InvalidArgument(std::string(what) + " '" + name + "': the body ends " +
                               std::to_string(bytes - binary->size()) +
                               " bytes before its binary data does");
      char* at = const_cast<char*>(binary->data());
      Tensor t;
      if (owner && bytes > 0 && reinterpret_cast<std::uintptr_t>(at) % 64 == 0) {
        t = Tensor::Adopt(type, shape, at, owner);
      } else {
        t = Tensor::Empty(type, shape);
        if (bytes > 0) std::memcpy(t.raw(), at, bytes);
      }
      binary->remove_prefix(bytes);
      out->push_back({name, std::move(t)});
      continue;
    }
    if (!in.contains("data"))
      return InvalidArgument(std::string(what) + " '" + name +
                             "' has neither \"data\" nor binary_data_size");
    KILN_ASSIGN_OR_RETURN(Tensor t, TensorFromJson(in["data"], type, shape, what, name));
    out->push_back({name, std::move(t)});
  }
  return OkStatus();
}

}  // namespace

const char* KServeDatatype(DataType t) {
  for (const TypeName& n : kTypes)
    if (n.type == t) return n.kserve;
  return "";
}

DataType FromKServeDatatype(std::string_view name) {
  for (const TypeName& n : kTypes)
    if (name == n.kserve) return n.type;
  return DataType::kUndefined;
}

std::string TritonConfigType(DataType t) {
  std::string k = KServeDatatype(t);
  return k.empty() ? "TYPE_INVALID" : "TYPE_" + k;
}

std::string ErrorJson(const std::string& message) { return json{{"error", message}}.dump(); }

StatusOr<InferRequest> ParseHttpInferRequest(std::string_view body,
                                             std::optional<size_t> json_length,
                                             std::shared_ptr<void> owner) {
  if (json_length && *json_length > body.size())
    return InvalidArgument("Inference-Header-Content-Length is " + std::to_string(*json_length) +
                           " but the body has " + std::to_string(body.size()) + " bytes");
  const std::string_view header = json_length ? body.substr(0, *json_length) : body;
  std::string_view binary = json_length ? body.substr(*json_length) : std::string_view();
  json j = json::parse(header, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument("the request body is not valid JSON");
  if (!j.is_object()) return InvalidArgument("the request body must be a JSON object");
  InferRequest r;
  try {
    if (j.contains("id") && j["id"].is_string()) r.id = j["id"].get<std::string>();
    if (j.contains("parameters") && j["parameters"].is_object()) {
      const json& p = j["parameters"];
      r.binary_data_output = BoolParam(p, "binary_data_output");
      if (p.contains("timeout") && p["timeout"].is_number_integer())
        r.timeout_us = p["timeout"].get<int64_t>();
      if (p.contains("priority") && p["priority"].is_number_integer())
        r.priority = p["priority"].get<int>();
    }
    if (!j.contains("inputs") || !j["inputs"].is_array())
      return InvalidArgument("the request has no \"inputs\" array");
    KILN_RETURN_IF_ERROR(
        ParseTensorList(j["inputs"], json_length.has_value(), &binary, "input", &r.inputs, owner));
    if (!binary.empty())
      return InvalidArgument(std::to_string(binary.size()) +
                             " bytes of binary data follow the last binary input");
    if (j.contains("outputs")) {
      if (!j["outputs"].is_array()) return InvalidArgument("\"outputs\" must be an array");
      for (const json& o : j["outputs"]) {
        if (!o.is_object() || !o.contains("name") || !o["name"].is_string())
          return InvalidArgument("every requested output needs a \"name\"");
        RequestedOutput ro{o["name"].get<std::string>(), r.binary_data_output};
        if (o.contains("parameters") && o["parameters"].is_object() &&
            o["parameters"].contains("binary_data"))
          ro.binary = BoolParam(o["parameters"], "binary_data");
        r.outputs.push_back(std::move(ro));
      }
    }
  } catch (const json::exception& e) {
    return InvalidArgument(std::string("malformed request: ") + e.what());
  }
  return r;
}

StatusOr<std::vector<SelectedOutput>> SelectOutputs(const std::string& model,
                                                    const InferRequest& request,
                                                    const std::vector<NamedTensor>& outputs) {
  std::vector<RequestedOutput> wanted = request.outputs;
  if (wanted.empty())
    for (const NamedTensor& o : outputs) wanted.push_back({o.name, request.binary_data_output});
  std::vector<SelectedOutput> selected;
  for (const RequestedOutput& w : wanted) {
    auto it = std::find_if(outputs.begin(), outputs.end(),
                           [&](const NamedTensor& o) { return o.name == w.name; });
    if (it == outputs.end())
      return InvalidArgument("requested output '" + w.name + "' is not an output of model '" +
                             model + "'");
    selected.push_back({w, &it->tensor});
  }
  return selected;
}

StatusOr<HttpInferResponse> BuildHttpInferResponse(const std::string& model,
                                                   const std::string& version,
                                                   const InferRequest& request,
                                                   std::vector<NamedTensor> outputs) {
  KILN_ASSIGN_OR_RETURN(std::vector<SelectedOutput> selected,
                        SelectOutputs(model, request, outputs));
  json j = {{"model_name", model}, {"model_version", version}};
  if (!request.id.empty()) j["id"] = request.id;
  json outs = json::array();
  std::vector<const Tensor*> binary;
  for (const SelectedOutput& sel : selected) {
    const Tensor& t = *sel.tensor;
    json o = {
        {"name", sel.request.name}, {"datatype", KServeDatatype(t.dtype())}, {"shape", t.shape()}};
    if (sel.request.binary) {
      o["parameters"] = {{"binary_data_size", t.bytes()}};
      binary.push_back(&t);
    } else {
      o["data"] = JsonData(t);
    }
    outs.push_back(std::move(o));
  }
  j["outputs"] = std::move(outs);
  HttpInferResponse r;
  r.body = j.dump();
  if (!binary.empty()) {
    r.json_length = r.body.size();
    size_t total = r.body.size();
    for (const Tensor* t : binary) total += t->bytes();
    r.body.reserve(total);
    for (const Tensor* t : binary) r.body.append(static_cast<const char*>(t->raw()), t->bytes());
  }
  return r;
}

std::string BuildHttpInferRequestBody(const std::vector<NamedTensor>& inputs, bool binary,
                                      std::optional<size_t>* json_length, bool append_tensors) {
  json list = json::array();
  for (const NamedTensor& in : inputs) {
    json t = {{"name", in.name},
              {"datatype", KServeDatatype(in.tensor.dtype())},
              {"shape", in.tensor.shape()}};
    if (binary)
      t["parameters"] = {{"binary_data_size", in.tensor.bytes()}};
    else
      t["data"] = JsonData(in.tensor);
    list.push_back(std::move(t));
  }
  json j = {{"inputs", std::move(list)}, {"parameters", {{"binary_data_output", binary}}}};
  std::string body = j.dump();
  json_length->reset();
  if (binary) {
    *json_length = body.size();
    if (!append_tensors) return body;
    for (const NamedTensor& in : inputs)
      body.append(static_cast<const char*>(in.tensor.raw()), in.tensor.bytes());
  }
  return body;
}

StatusOr<std::vector<NamedTensor>> ParseHttpInferResponse(std::string_view body,
                                                          std::optional<size_t> json_length) {
  if (json_length && *json_length > body.size())
    return InvalidArgument("Inference-Header-Content-Length exceeds the response body");
  std::string_view binary = json_length ? body.substr(*json_length) : std::string_view();
  json j = json::parse(json_length ? body.substr(0, *json_length) : body, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("outputs") || !j["outputs"].is_array())
    return InvalidArgument("the response is not a KServe v2 infer response");
  std::vector<NamedTensor> outputs;
  try {
    KILN_RETURN_IF_ERROR(
        ParseTensorList(j["outputs"], json_length.has_value(), &binary, "output", &outputs));
  } catch (const json::exception& e) {
    return InvalidArgument(std::string("malformed response: ") + e.what());
  }
  return outputs;
}

StatusOr<std::vector<TensorSpec>> ParseModelMetadataInputs(std::string_view body) {
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("inputs") || !j["inputs"].is_array())
    return InvalidArgument("the response is not a KServe v2 model metadata document");
  std::vector<TensorSpec> specs;
  try {
    for (const json& in : j["inputs"]) {
      TensorSpec s;
      s.name = in.at("name").get<std::string>();
      s.dtype = FromKServeDatatype(in.at("datatype").get<std::string>());
      const json& shape = in.at("shape");
      if (!shape.is_array())
        return InvalidArgument("model metadata: an input's shape is not a list");
      for (const json& d : shape) {
        // A dim is an integer in int64's range (-1 for a variable one); 2.2e21 is not.
        if (!d.is_number_integer() ||
            (d.is_number_unsigned() &&
             d.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())))
          return InvalidArgument("model metadata: input '" + s.name +
                                 "' has a shape dim that is not an int64: " + d.dump());
        s.dims.push_back(d.get<int64_t>());
      }
      s.dim_names.assign(s.dims.size(), "");
      s.rank_known = true;
      specs.push_back(std::move(s));
    }
  } catch (const json::exception& e) {
    return InvalidArgument(std::string("malformed model metadata: ") + e.what());
  }
  return specs;
}

std::string ServerMetadataJson() {
  return json{
      {"name", "kiln"},
      {"version", KILN_VERSION_TEXT},
      {"extensions", {"binary_tensor_data", "statistics", "model_configuration", "metrics"}}}
      .dump();
}

std::string ModelMetadataJson(const ModelDescription& m) {
  json in = json::array(), out = json::array();
  for (const TensorSpec& s : m.inputs) in.push_back(SpecJson(s));
  for (const TensorSpec& s : m.outputs) out.push_back(SpecJson(s));
  return json{{"name", m.name},
              {"versions", {m.version}},
              {"platform", "onnxruntime_onnx"},
              {"inputs", in},
              {"outputs", out}}
      .dump();
}

std::string ModelConfigJson(const ModelDescription& m) {
  const bool batched = m.max_batch_size > 0;
  json in = json::array(), out = json::array();
  for (const TensorSpec& s : m.inputs)
    in.push_back({{"name", s.name},
                  {"data_type", TritonConfigType(s.dtype)},
                  {"format", "FORMAT_NONE"},
                  {"dims", ConfigDims(s, batched)}});
  for (const TensorSpec& s : m.outputs)
    out.push_back({{"name", s.name},
                   {"data_type", TritonConfigType(s.dtype)},
                   {"dims", ConfigDims(s, batched)}});
  json c = {{"name", m.name},
            {"platform", "onnxruntime_onnx"},
            {"backend", "kiln"},
            {"max_batch_size", m.max_batch_size},
            {"input", in},
            {"output", out},
            {"instance_group", {{{"name", m.name}, {"kind", "KIND_CPU"}, {"count", m.instances}}}}};
  if (batched)
    c["dynamic_batching"] = {{"preferred_batch_size", m.policy.preferred_sizes},
                             {"max_queue_delay_microseconds", m.policy.max_queue_delay_us},
                             {"default_queue_policy", {{"max_queue_size", m.policy.max_queue}}}};
  return c.dump();
}

std::string ModelStatsJson(const std::vector<std::pair<ModelDescription, ModelCounters>>& models) {
  json list = json::array();
  for (const auto& [m, c] : models) {
    json batches = json::array();
    for (const auto& [size, cn] : c.batch_stats)
      batches.push_back({{"batch_size", size},
                         {"compute_input", StatPair(0, 0)},
                         {"compute_infer", StatPair(cn.first, cn.second)},
                         {"compute_output", StatPair(0, 0)}});
    list.push_back({{"name", m.name},
                    {"version", m.version},
                    {"last_inference", c.last_inference_ms},
                    {"inference_count", c.inference_count},
                    {"execution_count", c.execution_count},
                    {"inference_stats",
                     {{"success", StatPair(c.success_count, c.success_ns)},
                      {"fail", StatPair(c.fail_count, c.fail_ns)},
                      {"queue", StatPair(c.queue_count, c.queue_ns)},
                      {"compute_input", StatPair(c.compute_count, 0)},
                      {"compute_infer", StatPair(c.compute_count, c.compute_ns)},
                      {"compute_output", StatPair(c.compute_count, 0)},
                      {"cache_hit", StatPair(0, 0)},
                      {"cache_miss", StatPair(0, 0)}}},
                    {"batch_stats", batches}});
  }
  return json{{"model_stats", list}}.dump();
}

Status CheckLoadParameter(const std::string& key) {
  if (key == "config" || key.rfind("file:", 0) == 0)
    return Unsupported(
        "kiln serve loads models from its repository folders only; a load request's '" + key +
        "' parameter is not supported");
  return OkStatus();
}

Status CheckLoadRequestBody(std::string_view body) {
  if (body.empty()) return OkStatus();
  const json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return InvalidArgument("the request body must be a JSON object");
  auto p = j.find("parameters");
  if (p == j.end()) return OkStatus();
  if (!p->is_object()) return InvalidArgument("'parameters' must be an object");
  for (const auto& [key, value] : p->items()) KILN_RETURN_IF_ERROR(CheckLoadParameter(key));
  return OkStatus();
}

}  // namespace kiln::serving
