// DataType, Shape and Tensor: a dense, row-major, host tensor. A Tensor either owns its buffer
// (shared, reference counted: copies alias the same memory) or views memory owned elsewhere (an
// arena, a caller's buffer). Thread-safety: a Tensor is a value; concurrent reads are safe, writes
// to shared data need external synchronization. Sizes are in elements unless named *_bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kiln/status.h"

namespace kiln {

// Values match ONNX TensorProto.DataType.
enum class DataType : int {
  kUndefined = 0,
  kFloat = 1,
  kUInt8 = 2,
  kInt8 = 3,
  kUInt16 = 4,
  kInt16 = 5,
  kInt32 = 6,
  kInt64 = 7,
  kString = 8,
  kBool = 9,
  kFloat16 = 10,
  kDouble = 11,
  kUInt32 = 12,
  kUInt64 = 13,
  kBFloat16 = 16,
  // The 8-bit floats (ONNX 1.15+, E8M0 1.18+) and the 4-bit types (1.16+). kiln stores each of
  // them in one byte per element: the 4-bit types unpacked (int4 sign-extended, uint4 and
  // float4e2m1 in the low nibble); model files and TensorProtos keep ONNX's packed form, two
  // values per byte, low nibble first.
  kFloat8E4M3FN = 17,
  kFloat8E4M3FNUZ = 18,
  kFloat8E5M2 = 19,
  kFloat8E5M2FNUZ = 20,
  kUInt4 = 21,
  kInt4 = 22,
  kFloat4E2M1 = 23,
  kFloat8E8M0 = 24,
};

// ONNX's non-tensor types, sequence(T) and optional(X), are kiln DataTypes outside TensorProto's
// range: the element or contained type in the low byte, a kind bit above it. A Tensor of such a
// type is a handle (rank 0, no element storage) to its items (Tensor::Sequence, Tensor::Optional).
inline constexpr int kSequenceTypeBit = 0x100;
inline constexpr int kOptionalTypeBit = 0x200;
// sequence(element); element must be a tensor type.
DataType SequenceOf(DataType element);
// optional(type); type a tensor or a sequence type.
DataType OptionalOf(DataType type);
bool IsSequenceType(DataType t);
bool IsOptionalType(DataType t);
// sequence(T) -> T, optional(X) -> X; kUndefined for tensor types.
DataType ContainedType(DataType t);
// True for the types whose elements are fixed-size bytes (DataTypeSize > 0): all tensor types but
// kString. Only these live in arenas, are copied by bytes and may be constant-folded by size.
bool IsPlainDataType(DataType t);

// Bytes per element; 0 for kUndefined, kString (std::string elements owned by the tensor) and
// the sequence and optional types.
size_t DataTypeSize(DataType t);
// "float32", "int64", "float8_e4m3fn", ... (numpy's and ml_dtypes' names); "string";
// "sequence(float32)", "optional(sequence(int64))".
const char* DataTypeName(DataType t);
// True for the 4-bit types, which ONNX packs two to a byte in files (kiln's tensors do not).
bool IsPackedInFiles(DataType t);
// True for the types kiln's reference kernels compute on: float32, float64, bool and the 8, 16, 32
// and 64-bit signed and unsigned integers (float16 and bfloat16 models are computed in float32).
// Each op says in its shape inference which of them it takes.
bool IsSupportedDataType(DataType t);
// True for the types a model's inputs and outputs may have: every type a Tensor can hold (all but
// kUndefined), strings, and sequences and optionals of them. Each op says in its shape inference
// which types it takes.
bool IsIoDataType(DataType t);

template <typename T>
struct DataTypeOf;
template <>
struct DataTypeOf<float> {
  static constexpr DataType value = DataType::kFloat;
};
template <>
struct DataTypeOf<double> {
  static constexpr DataType value = DataType::kDouble;
};
template <>
struct DataTypeOf<int64_t> {
  static constexpr DataType value = DataType::kInt64;
};
template <>
struct DataTypeOf<int32_t> {
  static constexpr DataType value = DataType::kInt32;
};
template <>
struct DataTypeOf<uint8_t> {
  static constexpr DataType value = DataType::kUInt8;
};
template <>
struct DataTypeOf<int8_t> {
  static constexpr DataType value = DataType::kInt8;
};
template <>
struct DataTypeOf<int16_t> {
  static constexpr DataType value = DataType::kInt16;
};
template <>
struct DataTypeOf<uint16_t> {
  static constexpr DataType value = DataType::kUInt16;
};
template <>
struct DataTypeOf<uint32_t> {
  static constexpr DataType value = DataType::kUInt32;
};
template <>
struct DataTypeOf<uint64_t> {
  static constexpr DataType value = DataType::kUInt64;
};
template <>
struct DataTypeOf<std::string> {
  static constexpr DataType value = DataType::kString;
};
template <>
struct DataTypeOf<bool> {
  static constexpr DataType value = DataType::kBool;
};

using Shape = std::vector<int64_t>;

// Product of dims (1 for a scalar). Dims must be >= 0.
int64_t NumElements(const Shape& shape);
// "[1,3,224,224]".
std::string ShapeToString(const Shape& shape);

class Tensor {
 public:
  Tensor() = default;

  // Allocates zero-initialised, 64-byte aligned storage.
  static Tensor Empty(DataType dtype, Shape shape);
  // Same, with at least `min_bytes` of storage (a backend's padded or blocked layout may need more
  // than numel * element size).
  static Tensor Empty(DataType dtype, Shape shape, size_t min_bytes);
  // Wraps memory owned by someone else; `data` must outlive every copy of the tensor.
  static Tensor View(DataType dtype, Shape shape, void* data);
  // Wraps `data` and shares `owner`, which keeps it alive for as long as any copy of the tensor
  // exists (a request body that holds several tensors, a buffer of the caller's).
  static Tensor Adopt(DataType dtype, Shape shape, void* data, std::shared_ptr<void> owner);
  // A 1-D or scalar tensor from values (convenience for constants and tests).
  template <typename T>
  static Tensor FromVector(const std::vector<T>& values, Shape shape);
  // A string tensor: numel() std::string elements, each empty, owned by the tensor
  // (data<std::string>()). Empty(kString, shape) makes the same.
  static Tensor Strings(Shape shape);
  // A sequence(element) value holding `items` (each a tensor of type `element`, shapes may
  // differ). Empty(SequenceOf(t), {}) makes an empty sequence.
  static Tensor Sequence(DataType element, std::vector<Tensor> items);
  // An optional(type) value: holding *value, or none when value is null. Empty(OptionalOf(t), {})
  // makes a none.
  static Tensor Optional(DataType type, const Tensor* value);

  DataType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  int64_t numel() const { return NumElements(shape_); }
  size_t bytes() const { return static_cast<size_t>(numel()) * DataTypeSize(dtype_); }
  bool defined() const { return dtype_ != DataType::kUndefined; }

  void* raw() { return data_; }
  const void* raw() const { return data_; }
  template <typename T>
  T* data() {
    return static_cast<T*>(data_);
  }
  template <typename T>
  const T* data() const {
    return static_cast<const T*>(data_);
  }

  // A sequence's items, or an optional's contained value (none: empty); empty for tensors. Items
  // are shared with every copy of the handle (values are immutable once made).
  const std::vector<Tensor>& items() const;
  // An optional that holds a value.
  bool has_element() const { return IsOptionalType(dtype_) && !items().empty(); }

  // Same storage, new shape with the same element count.
  Tensor Reshaped(Shape shape) const;
  // A deep copy with its own storage (strings copied, sequence and optional items cloned).
  Tensor Clone() const;

 private:
  DataType dtype_ = DataType::kUndefined;
  Shape shape_;
  std::shared_ptr<void> owner_;
  void* data_ = nullptr;
};

template <typename T>
Tensor Tensor::FromVector(const std::vector<T>& values, Shape shape) {
  Tensor t = Empty(DataTypeOf<T>::value, std::move(shape));
  T* dst = t.data<T>();
  for (size_t i = 0; i < values.size() && static_cast<int64_t>(i) < t.numel(); ++i)
    dst[i] = values[i];
  return t;
}

}  // namespace kiln
