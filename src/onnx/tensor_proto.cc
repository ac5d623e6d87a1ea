// TensorProto decoding: raw_data or typed fields, and external data confined to the model folder.
#include "onnx/tensor_proto.h"

#include <onnx/onnx-data_pb.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/float8.h"
#include "core/shape_span.h"
#include "onnx/tensor_proto_internal.h"

namespace kiln::onnxio {
namespace fs = std::filesystem;

namespace {

constexpr int64_t kMaxTensorBytes = int64_t{1} << 40;

bool ReadWholeFile(const std::string& path, std::string* out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  std::ostringstream ss;
  ss << f.rdbuf();
  *out = ss.str();
  return static_cast<bool>(f) || f.eof();
}

// Resolves an external-data location inside `model_dir`, rejecting absolute paths, `..`
// components and symlinks that lead outside the folder.
StatusOr<std::string> ResolveExternal(const std::string& location, const std::string& model_dir,
                                      const std::string& what) {
  if (model_dir.empty())
    return InvalidModel(what + " uses external data '" + location +
                        "' but the model was not loaded from a file");
  fs::path loc(location);
  if (location.empty() || loc.is_absolute() || loc.has_root_name() || loc.has_root_directory())
    return InvalidModel(what + ": external data path must be relative to the model folder; got '" +
                        location + "'");
  for (const auto& part : loc)
    if (part == "..")
      return InvalidModel(what + ": external data path must not contain '..'; got '" + location +
                          "'");
  std::error_code ec;
  fs::path root = fs::canonical(fs::path(model_dir), ec);
  if (ec) return NotFound(what + ": model folder '" + model_dir + "' is not accessible");
  fs::path full = fs::canonical(root / loc, ec);
  if (ec)
    return NotFound(what + ": external data file '" + location + "' not found in '" +
                    root.string() + "'");
  auto rel = full.lexically_relative(root);
  if (rel.empty() || *rel.begin() == "..")
    return InvalidModel(what + ": external data path '" + location +
                        "' resolves outside the model folder (to '" + full.string() + "')");
  return full.string();
}

template <typename Src, typename Dst>
void CopyConvert(const Src& src, Dst* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<Dst>(src.Get(static_cast<int>(i)));
}

bool StoredAsInt32(DataType dtype) {
  switch (dtype) {
    case DataType::kInt32:
    case DataType::kInt16:
    case DataType::kInt8:
    case DataType::kUInt16:
    case DataType::kUInt8:
    case DataType::kBool:
    case DataType::kFloat16:
    case DataType::kBFloat16:
    case DataType::kFloat8E4M3FN:
    case DataType::kFloat8E4M3FNUZ:
    case DataType::kFloat8E5M2:
    case DataType::kFloat8E5M2FNUZ:
    case DataType::kFloat8E8M0:
    case DataType::kUInt4:
    case DataType::kInt4:
    case DataType::kFloat4E2M1:
      return true;
    default:
      return false;
  }
}

// Bytes a tensor of numel elements takes in a file: the 4-bit types two to a byte.
size_t FileBytes(DataType dtype, int64_t numel) {
  if (IsPackedInFiles(dtype)) return static_cast<size_t>((numel + 1) / 2);
  return static_cast<size_t>(numel) * DataTypeSize(dtype);
}

// Unpacks a 4-bit tensor read in ONNX's packed form (`t` holds it in its first bytes) in place,
// from the end so no byte is overwritten before it is read.
void UnpackInPlace(Tensor* t) {
  uint8_t* p = static_cast<uint8_t*>(t->raw());
  for (int64_t i = t->numel(); i-- > 0;) p[i] = UnpackNibble(p, i, t->dtype());
}

// How many values the typed field that holds `dtype` carries (ONNX stores the small integer types,
// bool and the 16-bit floats in int32_data); -1 for a type kiln does not read.
int64_t TypedValueCount(const onnx::TensorProto& proto, DataType dtype) {
  switch (dtype) {
    case DataType::kFloat:
      return proto.float_data_size();
    case DataType::kDouble:
      return proto.double_data_size();
    case DataType::kInt64:
      return proto.int64_data_size();
    case DataType::kUInt32:
    case DataType::kUInt64:
      return proto.uint64_data_size();
    default:
      return StoredAsInt32(dtype) ? proto.int32_data_size() : -1;
  }
}

// The dims, checked: none negative, their product with each 0 counted as 1 within
// kMaxTensorBytes (an empty tensor's other dims too: core/shape_span.h).
Status ReadDims(const onnx::TensorProto& proto, const std::string& what, Shape* shape,
                int64_t* numel) {
  for (int64_t d : proto.dims()) {
    if (d < 0) return InvalidModel(what + ": negative dimension " + std::to_string(d));
    shape->push_back(d);
  }
  if (!ShapeSpanFits(*shape, kMaxTensorBytes))
    return InvalidModel(what + ": tensor is implausibly large; dims " + ShapeToString(*shape));
  *numel = NumElements(*shape);
  return OkStatus();
}

// String tensors: string_data only (ONNX stores no raw or external form for them).
StatusOr<Tensor> StringsFromProto(const onnx::TensorProto& proto, const std::string& what) {
  Shape shape;
  int64_t numel = 1;
  KILN_RETURN_IF_ERROR(ReadDims(proto, what, &shape, &numel));
  if (proto.has_raw_data() || proto.data_location() == onnx::TensorProto::EXTERNAL)
    return InvalidModel(what +
                        ": a string tensor keeps its values in string_data, not raw or "
                        "external data");
  if (proto.string_data_size() != numel)
    return InvalidModel(what + ": holds " + std::to_string(proto.string_data_size()) +
                        " strings; dims " + ShapeToString(shape) + " need " +
                        std::to_string(numel));
  Tensor t = Tensor::Strings(shape);
  for (int64_t i = 0; i < numel; ++i)
    t.data<std::string>()[i] = proto.string_data(static_cast<int>(i));
  return t;
}

// Sequences and optionals of ONNX's test data (SequenceProto, OptionalProto), nested at most this
// deep.
constexpr int kMaxValueDepth = 4;

StatusOr<Tensor> ValueFromSequence(const onnx::SequenceProto& sp, const std::string& what,
                                   int depth);

StatusOr<Tensor> ValueFromOptional(const onnx::OptionalProto& op, const std::string& what,
                                   int depth) {
  if (depth > kMaxValueDepth) return InvalidArgument(what + ": values nest too deeply");
  switch (op.elem_type()) {
    case onnx::OptionalProto::UNDEFINED:  // a none whose type the reader knows
      return Tensor::Optional(DataType::kUndefined, nullptr);
    case onnx::OptionalProto::TENSOR: {
      const DataType t = static_cast<DataType>(op.tensor_value().data_type());
      if (!op.has_tensor_value()) return Tensor::Optional(t, nullptr);
      KILN_ASSIGN_OR_RETURN(Tensor v, TensorFromProto(op.tensor_value(), "", what));
      return Tensor::Optional(v.dtype(), &v);
    }
    case onnx::OptionalProto::SEQUENCE: {
      if (!op.has_sequence_value())
        return InvalidArgument(what + ": an optional sequence of unknown type with no value");
      KILN_ASSIGN_OR_RETURN(Tensor v, ValueFromSequence(op.sequence_value(), what, depth + 1));
      return Tensor::Optional(v.dtype(), &v);
    }
    default:
      return Unsupported(what + ": optional of element type " + std::to_string(op.elem_type()) +
                         " (kiln has optional tensors and sequences)");
  }
}

StatusOr<Tensor> ValueFromSequence(const onnx::SequenceProto& sp, const std::string& what,
                                   int depth) {
  if (depth > kMaxValueDepth) return InvalidArgument(what + ": values nest too deeply");
  if (sp.elem_type() != onnx::SequenceProto::TENSOR)
    return Unsupported(what + ": sequence of element type " + std::to_string(sp.elem_type()) +
                       " (kiln has sequences of tensors)");
  std::vector<Tensor> items;
  DataType elem = DataType::kUndefined;
  for (const auto& tp : sp.tensor_values()) {
    KILN_ASSIGN_OR_RETURN(Tensor v, TensorFromProto(tp, "", what));
    if (elem != DataType::kUndefined && v.dtype() != elem)
      return InvalidArgument(what + ": sequence items of types " + DataTypeName(elem) + " and " +
                             DataTypeName(v.dtype()));
    elem = v.dtype();
    items.push_back(std::move(v));
  }
  return Tensor::Sequence(elem, std::move(items));
}

}  // namespace

StatusOr<Tensor> ParseValueProto(const std::string& bytes, DataType expected, std::string* name) {
  const std::string what = "value of type " + std::string(DataTypeName(expected));
  if (IsSequenceType(expected)) {
    onnx::SequenceProto sp;
    if (!sp.ParseFromString(bytes)) return InvalidArgument("not a valid ONNX SequenceProto");
    if (name) *name = sp.name();
    KILN_ASSIGN_OR_RETURN(Tensor v, ValueFromSequence(sp, what, 0));
    // An empty sequence carries no item type: it has the expected one.
    return v.items().empty() ? Tensor::Sequence(ContainedType(expected), {}) : v;
  }
  if (IsOptionalType(expected)) {
    onnx::OptionalProto op;
    if (!op.ParseFromString(bytes)) return InvalidArgument("not a valid ONNX OptionalProto");
    if (name) *name = op.name();
    KILN_ASSIGN_OR_RETURN(Tensor v, ValueFromOptional(op, what, 0));
    return v.has_element() ? v : Tensor::Optional(ContainedType(expected), nullptr);
  }
  return ParseTensorProto(bytes, name);
}

StatusOr<Tensor> TensorFromProto(const onnx::TensorProto& proto, const std::string& model_dir,
                                 const std::string& what) {
  auto dtype = static_cast<DataType>(proto.data_type());
  if (dtype == DataType::kString) return StringsFromProto(proto, what);
  size_t es = DataTypeSize(dtype);
  if (es == 0)
    return Unsupported(what + ": tensor data type " + std::to_string(proto.data_type()) +
                       " is not supported");
  Shape shape;
  int64_t numel = 1;
  KILN_RETURN_IF_ERROR(ReadDims(proto, what, &shape, &numel));
  if (numel * static_cast<int64_t>(es) > kMaxTensorBytes)
    return InvalidModel(what + ": tensor is implausibly large; dims " + ShapeToString(shape));
  const size_t bytes = FileBytes(dtype, numel);

  if (proto.data_location() == onnx::TensorProto::EXTERNAL) {
    std::string location;
    int64_t offset = 0, length = -1;
    for (const auto& kv : proto.external_data()) {
      try {
        if (kv.key() == "location") location = kv.value();
        if (kv.key() == "offset") offset = std::stoll(kv.value());
        if (kv.key() == "length") length = std::stoll(kv.value());
      } catch (...) {
        return InvalidModel(what + ": external data field '" + kv.key() + "' is not a number: '" +
                            kv.value() + "'");
      }
    }
    KILN_ASSIGN_OR_RETURN(std::string path, ResolveExternal(location, model_dir, what));
    if (length < 0) length = static_cast<int64_t>(bytes);
    if (offset < 0 || length != static_cast<int64_t>(bytes))
      return InvalidModel(what + ": external data length " + std::to_string(length) +
                          " does not match the tensor's " + std::to_string(bytes) + " bytes");
    std::error_code ec;
    auto file_size = fs::file_size(path, ec);
    if (ec || static_cast<uint64_t>(offset) + bytes > file_size)
      return InvalidModel(what + ": external data file '" + location + "' is too short (" +
                          std::to_string(ec ? 0 : file_size) + " bytes) for offset " +
                          std::to_string(offset) + " + " + std::to_string(bytes) + " bytes");
    Tensor t = Tensor::Empty(dtype, shape);
    std::ifstream f(path, std::ios::binary);
    f.seekg(offset);
    if (bytes && !f.read(static_cast<char*>(t.raw()), static_cast<std::streamsize>(bytes)))
      return InvalidModel(what + ": failed to read external data file '" + location + "'");
    if (IsPackedInFiles(dtype)) UnpackInPlace(&t);
    return t;
  }

  // The data must be present before anything is allocated: a few bytes of protobuf claiming huge
  // dims must not make kiln allocate (and zero) gigabytes. Found by tests/fuzz/loader_fuzz.cc: a
  // 100-byte model asked for 8 GiB.
  if (proto.has_raw_data()) {
    if (proto.raw_data().size() != bytes)
      return InvalidModel(what + ": raw_data holds " + std::to_string(proto.raw_data().size()) +
                          " bytes; dims " + ShapeToString(shape) + " of " + DataTypeName(dtype) +
                          " need " + std::to_string(bytes));
    Tensor t = Tensor::Empty(dtype, shape);
    if (bytes) std::memcpy(t.raw(), proto.raw_data().data(), bytes);
    if (IsPackedInFiles(dtype)) UnpackInPlace(&t);
    return t;
  }
  const int64_t present = TypedValueCount(proto, dtype);
  if (IsPackedInFiles(dtype)) {  // int32_data holds one packed byte (two values) per entry
    if (present != static_cast<int64_t>(bytes))
      return InvalidModel(what + ": holds " + std::to_string(present) + " packed bytes; dims " +
                          ShapeToString(shape) + " of " + DataTypeName(dtype) + " need " +
                          std::to_string(bytes));
    Tensor t = Tensor::Empty(dtype, shape);
    for (int64_t i = 0; i < present; ++i)
      static_cast<uint8_t*>(t.raw())[i] =
          static_cast<uint8_t>(proto.int32_data(static_cast<int>(i)));
    UnpackInPlace(&t);
    return t;
  }
  if (present < 0)
    return Unsupported(what + ": tensor data type " + DataTypeName(dtype) + " is not supported");
  if (present != numel)
    return InvalidModel(what + ": holds " + std::to_string(present) + " values; dims " +
                        ShapeToString(shape) + " need " + std::to_string(numel));
  Tensor t = Tensor::Empty(dtype, shape);
  switch (dtype) {
    case DataType::kFloat:
      CopyConvert(proto.float_data(), t.data<float>(), numel);
      break;
    case DataType::kDouble:
      CopyConvert(proto.double_data(), t.data<double>(), numel);
      break;
    case DataType::kInt64:
      CopyConvert(proto.int64_data(), t.data<int64_t>(), numel);
      break;
    case DataType::kUInt32:
    case DataType::kUInt64:
      if (dtype == DataType::kUInt32)
        CopyConvert(proto.uint64_data(), t.data<uint32_t>(), numel);
      else
        CopyConvert(proto.uint64_data(), t.data<uint64_t>(), numel);
      break;
    default: {  // the int32_data types (TypedValueCount refused every other)
      for (int64_t i = 0; i < numel; ++i) {
        int32_t v = proto.int32_data(static_cast<int>(i));
        char* dst = static_cast<char*>(t.raw()) + i * es;
        switch (dtype) {
          case DataType::kInt32:
            std::memcpy(dst, &v, 4);
            break;
          case DataType::kBool:
            *reinterpret_cast<bool*>(dst) = v != 0;
            break;
          case DataType::kInt8:
          case DataType::kUInt8:
          case DataType::kFloat8E4M3FN:
          case DataType::kFloat8E4M3FNUZ:
          case DataType::kFloat8E5M2:
          case DataType::kFloat8E5M2FNUZ:
          case DataType::kFloat8E8M0:
            *dst = static_cast<char>(v);
            break;
          default: {
            uint16_t h = static_cast<uint16_t>(v);
            std::memcpy(dst, &h, 2);
          }
        }
      }
      break;
    }
  }
  return t;
}

StatusOr<Tensor> ParseTensorProto(const std::string& bytes, std::string* name) {
  onnx::TensorProto proto;
  if (!proto.ParseFromString(bytes)) return InvalidArgument("not a valid ONNX TensorProto");
  if (name) *name = proto.name();
  return TensorFromProto(proto, "", "tensor '" + proto.name() + "'");
}

StatusOr<Tensor> ReadTensorProtoFile(const std::string& path, std::string* name) {
  std::string bytes;
  if (!ReadWholeFile(path, &bytes)) return NotFound("cannot read '" + path + "'");
  auto t = ParseTensorProto(bytes, name);
  if (!t.ok()) return Status(t.status()).AddContext("while reading '" + path + "'");
  return t;
}

Status TensorToProto(const Tensor& t, const std::string& name, onnx::TensorProto* proto) {
  proto->Clear();
  proto->set_name(name);
  proto->set_data_type(static_cast<int>(t.dtype()));
  for (int64_t d : t.shape()) proto->add_dims(d);
  if (!IsPlainDataType(t.dtype()) && t.dtype() != DataType::kString)
    return InvalidArgument("cannot write a " + std::string(DataTypeName(t.dtype())) +
                           " value as a TensorProto");
  if (t.dtype() == DataType::kString) {
    for (int64_t i = 0; i < t.numel(); ++i) proto->add_string_data(t.data<std::string>()[i]);
  } else if (IsPackedInFiles(t.dtype())) {  // two values per byte, low nibble first
    std::string packed(FileBytes(t.dtype(), t.numel()), '\0');
    const uint8_t* p = static_cast<const uint8_t*>(t.raw());
    for (int64_t i = 0; i < t.numel(); ++i)
      packed[i / 2] = static_cast<char>(packed[i / 2] | ((p[i] & 0xF) << ((i % 2) * 4)));
    proto->set_raw_data(packed);
  } else if (t.bytes() > 0) {
    proto->set_raw_data(t.raw(), t.bytes());
  }
  return OkStatus();
}

Status WriteTensorProtoFile(const Tensor& t, const std::string& name, const std::string& path) {
  onnx::TensorProto proto;
  KILN_RETURN_IF_ERROR(TensorToProto(t, name, &proto));
  std::ofstream f(path, std::ios::binary);
  if (!f || !proto.SerializeToOstream(&f)) return InvalidArgument("cannot write '" + path + "'");
  return OkStatus();
}

}  // namespace kiln::onnxio
