#include "kiln/tensor.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <new>

namespace kiln {

DataType SequenceOf(DataType element) {
  return static_cast<DataType>(kSequenceTypeBit | static_cast<int>(element));
}

DataType OptionalOf(DataType type) {
  return static_cast<DataType>(kOptionalTypeBit | static_cast<int>(type));
}

bool IsSequenceType(DataType t) {
  return (static_cast<int>(t) & (kSequenceTypeBit | kOptionalTypeBit)) == kSequenceTypeBit;
}

bool IsOptionalType(DataType t) { return (static_cast<int>(t) & kOptionalTypeBit) != 0; }

DataType ContainedType(DataType t) {
  const int v = static_cast<int>(t);
  if (v & kOptionalTypeBit) return static_cast<DataType>(v & ~kOptionalTypeBit);
  if (v & kSequenceTypeBit) return static_cast<DataType>(v & ~kSequenceTypeBit);
  return DataType::kUndefined;
}

bool IsPlainDataType(DataType t) { return DataTypeSize(t) > 0; }

size_t DataTypeSize(DataType t) {
  switch (t) {
    case DataType::kFloat:
    case DataType::kInt32:
    case DataType::kUInt32:
      return 4;
    case DataType::kUInt8:
    case DataType::kInt8:
    case DataType::kBool:
    case DataType::kFloat8E4M3FN:
    case DataType::kFloat8E4M3FNUZ:
    case DataType::kFloat8E5M2:
    case DataType::kFloat8E5M2FNUZ:
    case DataType::kUInt4:
    case DataType::kInt4:
    case DataType::kFloat4E2M1:
    case DataType::kFloat8E8M0:
      return 1;
    case DataType::kUInt16:
    case DataType::kInt16:
    case DataType::kFloat16:
    case DataType::kBFloat16:
      return 2;
    case DataType::kInt64:
    case DataType::kDouble:
    case DataType::kUInt64:
      return 8;
    case DataType::kUndefined:
    case DataType::kString:
      return 0;
  }
  return 0;
}

namespace {
const char* TensorTypeName(DataType t);
}  // namespace

const char* DataTypeName(DataType t) {
  if (!IsSequenceType(t) && !IsOptionalType(t)) return TensorTypeName(t);
  // Composite names, made once: every element type in both kinds and optional(sequence(T)).
  static const auto* names = [] {
    auto* m = new std::map<int, std::string>;
    for (int e = 0; e < 0x100; ++e) {
      const std::string base = TensorTypeName(static_cast<DataType>(e));
      if (base == "unknown") continue;
      (*m)[kSequenceTypeBit | e] = "sequence(" + base + ")";
      (*m)[kOptionalTypeBit | e] = "optional(" + base + ")";
      (*m)[kOptionalTypeBit | kSequenceTypeBit | e] = "optional(sequence(" + base + "))";
    }
    return m;
  }();
  auto it = names->find(static_cast<int>(t));
  return it == names->end() ? "unknown" : it->second.c_str();
}

namespace {

const char* TensorTypeName(DataType t) {
  switch (t) {
    case DataType::kUndefined:
      return "undefined";
    case DataType::kFloat:
      return "float32";
    case DataType::kUInt8:
      return "uint8";
    case DataType::kInt8:
      return "int8";
    case DataType::kUInt16:
      return "uint16";
    case DataType::kInt16:
      return "int16";
    case DataType::kInt32:
      return "int32";
    case DataType::kInt64:
      return "int64";
    case DataType::kString:
      return "string";
    case DataType::kBool:
      return "bool";
    case DataType::kFloat16:
      return "float16";
    case DataType::kDouble:
      return "float64";
    case DataType::kUInt32:
      return "uint32";
    case DataType::kUInt64:
      return "uint64";
    case DataType::kBFloat16:
      return "bfloat16";
    case DataType::kFloat8E4M3FN:
      return "float8_e4m3fn";
    case DataType::kFloat8E4M3FNUZ:
      return "float8_e4m3fnuz";
    case DataType::kFloat8E5M2:
      return "float8_e5m2";
    case DataType::kFloat8E5M2FNUZ:
      return "float8_e5m2fnuz";
    case DataType::kUInt4:
      return "uint4";
    case DataType::kInt4:
      return "int4";
    case DataType::kFloat4E2M1:
      return "float4_e2m1fn";
    case DataType::kFloat8E8M0:
      return "float8_e8m0fnu";
  }
  return "unknown";
}

}  // namespace

bool IsPackedInFiles(DataType t) {
  return t == DataType::kUInt4 || t == DataType::kInt4 || t == DataType::kFloat4E2M1;
}

bool IsIoDataType(DataType t) {
  if (IsOptionalType(t) || IsSequenceType(t)) {
    const DataType c = ContainedType(t);
    return IsSequenceType(c) ? IsIoDataType(ContainedType(c))
                             : (c == DataType::kString || DataTypeSize(c) > 0);
  }
  return t == DataType::kString || DataTypeSize(t) > 0;
}

bool IsSupportedDataType(DataType t) {
  switch (t) {
    case DataType::kFloat:
    case DataType::kDouble:
    case DataType::kBool:
    case DataType::kInt8:
    case DataType::kInt16:
    case DataType::kInt32:
    case DataType::kInt64:
    case DataType::kUInt8:
    case DataType::kUInt16:
    case DataType::kUInt32:
    case DataType::kUInt64:
      return true;
    default:
      return false;
  }
}

int64_t NumElements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string ShapeToString(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

Tensor Tensor::Empty(DataType dtype, Shape shape) { return Empty(dtype, std::move(shape), 0); }

namespace {

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KILN_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define KILN_ASAN 1
#endif

// Tensors this large get their own pages from the kernel and give them back when freed. Through
// malloc they would not always: glibc raises its mmap threshold to the size of each mapped block
// it frees (up to 32 MiB), so after the first model is closed, weights of the next come from its
// heaps, and the memory of a model loaded on one thread and freed on another stays in the
// process (kiln serve's model unload measured +32 MiB per load cycle that way:
// tests/serving/repository_check.py). Under ASan, malloc, so its checks see them.
constexpr size_t kMapBytes = size_t{4} << 20;

// 64-byte aligned storage of at least `bytes` (rounded up to 64), zeroed when `zero`.
std::shared_ptr<void> Allocate(size_t bytes, bool zero) {
  size_t alloc = ((bytes + 63) / 64) * 64;
  if (alloc == 0) alloc = 64;
#ifndef KILN_ASAN
  if (alloc >= kMapBytes) {
    void* m = mmap(nullptr, alloc, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) throw std::bad_alloc();
    // Fresh anonymous pages read as zero: no memset, and untouched pages cost nothing.
    return std::shared_ptr<void>(m, [alloc](void* q) { munmap(q, alloc); });
  }
#endif
  void* p = std::aligned_alloc(64, alloc);
  if (!p) throw std::bad_alloc();
  if (zero) std::memset(p, 0, alloc);
  return std::shared_ptr<void>(p, [](void* q) { std::free(q); });
}
}  // namespace

Tensor Tensor::Strings(Shape shape) {
  Tensor t;
  t.dtype_ = DataType::kString;
  t.shape_ = std::move(shape);
  std::shared_ptr<std::string[]> s(new std::string[std::max<int64_t>(t.numel(), 1)]);
  t.data_ = s.get();
  t.owner_ = std::move(s);
  return t;
}

namespace {
const std::vector<Tensor>& NoItems() {
  static const std::vector<Tensor> none;
  return none;
}
}  // namespace

Tensor Tensor::Sequence(DataType element, std::vector<Tensor> items) {
  Tensor t;
  t.dtype_ = SequenceOf(element);
  auto v = std::make_shared<std::vector<Tensor>>(std::move(items));
  t.data_ = v.get();
  t.owner_ = std::move(v);
  return t;
}

Tensor Tensor::Optional(DataType type, const Tensor* value) {
  Tensor t =
      Sequence(DataType::kUndefined, value ? std::vector<Tensor>{*value} : std::vector<Tensor>{});
  t.dtype_ = OptionalOf(type);
  return t;
}

const std::vector<Tensor>& Tensor::items() const {
  if ((IsSequenceType(dtype_) || IsOptionalType(dtype_)) && data_ != nullptr)
    return *static_cast<const std::vector<Tensor>*>(data_);
  return NoItems();
}

Tensor Tensor::Empty(DataType dtype, Shape shape, size_t min_bytes) {
  if (dtype == DataType::kString) return Strings(std::move(shape));
  if (IsSequenceType(dtype)) return Sequence(ContainedType(dtype), {});
  if (IsOptionalType(dtype)) return Optional(ContainedType(dtype), nullptr);
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.owner_ = Allocate(std::max(t.bytes(), min_bytes), /*zero=*/true);
  t.data_ = t.owner_.get();
  return t;
}

Tensor Tensor::View(DataType dtype, Shape shape, void* data) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.data_ = data;
  return t;
}

Tensor Tensor::Adopt(DataType dtype, Shape shape, void* data, std::shared_ptr<void> owner) {
  Tensor t = View(dtype, std::move(shape), data);
  t.owner_ = std::move(owner);
  return t;
}

Tensor Tensor::Reshaped(Shape shape) const {
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::Clone() const {
  if (dtype_ == DataType::kString) {
    Tensor t = Strings(shape_);
    std::copy(data<std::string>(), data<std::string>() + numel(), t.data<std::string>());
    return t;
  }
  if (IsSequenceType(dtype_) || IsOptionalType(dtype_)) {
    std::vector<Tensor> items_copy;
    for (const Tensor& item : items()) items_copy.push_back(item.Clone());
    Tensor t = Sequence(DataType::kUndefined, std::move(items_copy));
    t.dtype_ = dtype_;
    return t;
  }
  // Every byte is copied over, so the storage is not zeroed first (one pass over a large output
  // instead of two).
  Tensor t;
  t.dtype_ = dtype_;
  t.shape_ = shape_;
  t.owner_ = Allocate(bytes(), /*zero=*/false);
  t.data_ = t.owner_.get();
  if (bytes()) std::memcpy(t.data_, data_, bytes());
  return t;
}

}  // namespace kiln
