#include "kiln/tensor.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

namespace kiln {

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

const char* DataTypeName(DataType t) {
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

bool IsPackedInFiles(DataType t) {
  return t == DataType::kUInt4 || t == DataType::kInt4 || t == DataType::kFloat4E2M1;
}

bool IsIoDataType(DataType t) { return DataTypeSize(t) > 0; }

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

Tensor Tensor::Empty(DataType dtype, Shape shape, size_t min_bytes) {
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
