// Strided gather: an odometer over all but the innermost output dimension, with a tight inner
// loop over the last one; elements are copied as uint8/16/32/64 words when the element size is
// 1/2/4/8 bytes, memcpy otherwise.
#include "ops/tensor/tensor_util.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "ops/common.h"
#include "ops/tensor/cast.h"

namespace kiln::ops {
namespace {

template <typename E>
void GatherTyped(E* dst, const E* src, const Shape& out, const std::vector<int64_t>& st,
                 int64_t offset) {
  const size_t r = out.size();
  if (r == 0) {
    dst[0] = src[offset];
    return;
  }
  const int64_t inner = out[r - 1], inner_stride = st[r - 1];
  int64_t outer = 1;
  for (size_t d = 0; d + 1 < r; ++d) outer *= out[d];
  // The odometer on the stack up to rank 16, so a warm run allocates nothing here.
  int64_t small[16] = {};
  std::vector<int64_t> large;
  int64_t* idx = small;
  if (r > 16) {
    large.assign(r, 0);
    idx = large.data();
  }
  int64_t base = offset;
  for (int64_t o = 0; o < outer; ++o) {
    const E* s = src + base;
    if (inner_stride == 1) {
      for (int64_t i = 0; i < inner; ++i) dst[i] = s[i];
    } else {
      for (int64_t i = 0; i < inner; ++i) dst[i] = s[i * inner_stride];
    }
    dst += inner;
    for (int64_t d = static_cast<int64_t>(r) - 2; d >= 0; --d) {
      if (++idx[d] < out[d]) {
        base += st[d];
        break;
      }
      base -= st[d] * (out[d] - 1);
      idx[d] = 0;
    }
  }
}

}  // namespace

void StridedGather(void* dst, const void* src, const Shape& out_shape,
                   const std::vector<int64_t>& src_strides, int64_t src_offset, size_t esz) {
  if (NumElements(out_shape) == 0) return;
  switch (esz) {
    case 1:
      GatherTyped(static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(src), out_shape,
                  src_strides, src_offset);
      return;
    case 2:
      GatherTyped(static_cast<uint16_t*>(dst), static_cast<const uint16_t*>(src), out_shape,
                  src_strides, src_offset);
      return;
    case 4:
      GatherTyped(static_cast<uint32_t*>(dst), static_cast<const uint32_t*>(src), out_shape,
                  src_strides, src_offset);
      return;
    case 8:
      GatherTyped(static_cast<uint64_t*>(dst), static_cast<const uint64_t*>(src), out_shape,
                  src_strides, src_offset);
      return;
    default: {
      // Rare sizes: per-element memcpy with the same odometer.
      const size_t r = out_shape.size();
      const int64_t n = NumElements(out_shape);
      std::vector<int64_t> idx(r, 0);
      int64_t s = src_offset;
      auto* d = static_cast<unsigned char*>(dst);
      const auto* b = static_cast<const unsigned char*>(src);
      for (int64_t i = 0; i < n; ++i) {
        std::memcpy(d + i * esz, b + s * static_cast<int64_t>(esz), esz);
        for (int64_t k = static_cast<int64_t>(r) - 1; k >= 0; --k) {
          if (++idx[k] < out_shape[k]) {
            s += src_strides[k];
            break;
          }
          s -= src_strides[k] * (out_shape[k] - 1);
          idx[k] = 0;
        }
      }
    }
  }
}

void TransposeBytes(void* dst, const void* src, const Shape& src_shape,
                    const std::vector<int64_t>& perm, size_t esz) {
  const auto in_strides = Strides(src_shape);
  Shape out(perm.size());
  std::vector<int64_t> st(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) {
    out[i] = src_shape[perm[i]];
    st[i] = in_strides[perm[i]];
  }
  StridedGather(dst, src, out, st, 0, esz);
}

void FillBytes(void* dst, int64_t n, const void* value, size_t esz) {
  auto* d = static_cast<unsigned char*>(dst);
  for (int64_t i = 0; i < n; ++i) std::memcpy(d + i * esz, value, esz);
}

int64_t TruncToInt64(double v) {
  if (std::isnan(v)) return 0;
  if (v >= 9223372036854775807.0) return std::numeric_limits<int64_t>::max();
  if (v <= -9223372036854775808.0) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(v);
}

namespace {
template <typename T>
bool Put(T x, void* dst) {
  std::memcpy(dst, &x, sizeof(T));
  return true;
}
}  // namespace

bool StoreAsDtype(DataType dtype, double v, void* dst) {
  const int64_t i = TruncToInt64(v);
  switch (dtype) {
    case DataType::kFloat:
      return Put(static_cast<float>(v), dst);
    case DataType::kDouble:
      return Put(v, dst);
    case DataType::kBool:
      return Put(v != 0, dst);
    case DataType::kInt64:
      return Put(i, dst);
    case DataType::kInt32:
      return Put(static_cast<int32_t>(i), dst);
    case DataType::kInt16:
      return Put(static_cast<int16_t>(i), dst);
    case DataType::kInt8:
      return Put(static_cast<int8_t>(i), dst);
    case DataType::kUInt64:
      return Put(static_cast<uint64_t>(i), dst);
    case DataType::kUInt32:
      return Put(static_cast<uint32_t>(i), dst);
    case DataType::kUInt16:
      return Put(static_cast<uint16_t>(i), dst);
    case DataType::kUInt8:
      return Put(static_cast<uint8_t>(i), dst);
    default:
      return false;
  }
}

Tensor CastCopy(const Tensor& t, DataType dtype) {
  Tensor out = Tensor::Empty(dtype, t.shape());
  if (!CastElements(t.dtype(), dtype, t.raw(), out.raw(), t.numel())) return Tensor();
  return out;
}

Status ExpectFixedSize(const ir::InferContext& ctx, size_t i) {
  if (!ctx.has_input(i)) return ctx.Error("input " + std::to_string(i) + " is required; got none");
  if (DataTypeSize(ctx.dtype(i)) > 0) return OkStatus();
  return Unsupported("failed to infer shapes of " + ctx.node().Describe() + ": input " +
                     std::to_string(i) + " must have a fixed-size element type; got " +
                     DataTypeName(ctx.dtype(i)));
}

StatusOr<std::vector<int64_t>> KnownInts(const ir::InferContext& ctx, size_t i,
                                         const std::string& what) {
  if (!ctx.has_input(i)) return ctx.Error(what + " (input " + std::to_string(i) + ") is missing");
  if (ctx.dtype(i) != DataType::kInt64 && ctx.dtype(i) != DataType::kInt32)
    return ctx.Error(what + " (input " + std::to_string(i) + ") must be int64 or int32; got " +
                     DataTypeName(ctx.dtype(i)));
  const Tensor* v = ctx.value(i);
  if (v == nullptr)
    return ctx.Error(what + " (input " + std::to_string(i) +
                     ") must be known before the node runs; got an unknown value");
  return ReadInts(*v);
}

StatusOr<std::vector<int64_t>> RunInts(const ir::Op& op, const Tensor& t, const std::string& what) {
  if (t.dtype() != DataType::kInt64 && t.dtype() != DataType::kInt32)
    return op.RunError(what + " must be int64 or int32; got " + DataTypeName(t.dtype()));
  return ReadInts(t);
}

std::string IntsToString(const std::vector<int64_t>& v) { return ShapeToString(v); }

}  // namespace kiln::ops
