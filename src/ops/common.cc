#include "ops/common.h"

#include <algorithm>

#include "core/float8.h"
#include "core/half.h"

namespace kiln::ops {

StatusOr<Shape> BroadcastShapes(const std::vector<Shape>& shapes) {
  size_t r = 0;
  for (const auto& s : shapes) r = std::max(r, s.size());
  Shape out(r, 1);
  for (const auto& s : shapes) {
    size_t off = r - s.size();
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t d = s[i];
      int64_t& o = out[off + i];
      if (d == o || d == 1) continue;
      if (o == 1) {
        o = d;
        continue;
      }
      std::string all;
      for (const auto& t : shapes) all += (all.empty() ? "" : " and ") + ShapeToString(t);
      return InvalidArgument("shapes are not broadcastable (dimension " + std::to_string(off + i) +
                             ": " + std::to_string(o) + " vs " + std::to_string(d) + "); got " +
                             all);
    }
  }
  return out;
}

std::vector<int64_t> Strides(const Shape& shape) {
  // A tensor that holds elements has strides that fit in int64; an empty one's other dims may
  // multiply past it ([0, 2^62, 4]: the session fuzzer's MatMul on one overflowed here). Such a
  // stride is 0: it addresses nothing, since the tensor has no element.
  std::vector<int64_t> s(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i) {
    int64_t v = 0;
    s[i] = __builtin_mul_overflow(s[i + 1], shape[i + 1], &v) ? 0 : v;
  }
  return s;
}

std::vector<int64_t> BroadcastStrides(const Shape& shape, const Shape& out) {
  std::vector<int64_t> s(out.size(), 0);
  auto own = Strides(shape);
  size_t off = out.size() - shape.size();
  for (size_t i = 0; i < shape.size(); ++i) s[off + i] = shape[i] == 1 ? 0 : own[i];
  return s;
}

StatusOr<int64_t> NormalizeAxis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= std::max<int64_t>(rank, 1) || (rank == 0 && axis != 0 && axis != -1))
    return InvalidArgument("axis " + std::to_string(axis) + " is out of range for rank " +
                           std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

std::vector<int64_t> ReadInts(const Tensor& t) {
  std::vector<int64_t> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (t.dtype() == DataType::kInt64)
      v[i] = t.data<int64_t>()[i];
    else if (t.dtype() == DataType::kInt32)
      v[i] = t.data<int32_t>()[i];
    else
      v[i] = static_cast<int64_t>(ReadScalarAsDouble(t, i));
  }
  return v;
}

Status ExpectNumeric(const ir::InferContext& ctx, size_t i, bool with_bool) {
  using D = DataType;
  if (with_bool)
    return ctx.ExpectDtype(i, {D::kFloat, D::kDouble, D::kInt8, D::kInt16, D::kInt32, D::kInt64,
                               D::kUInt8, D::kUInt16, D::kUInt32, D::kUInt64, D::kBool});
  return ctx.ExpectDtype(i, {D::kFloat, D::kDouble, D::kInt8, D::kInt16, D::kInt32, D::kInt64,
                             D::kUInt8, D::kUInt16, D::kUInt32, D::kUInt64});
}

double ReadScalarAsDouble(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DataType::kFloat:
      return t.data<float>()[i];
    case DataType::kDouble:
      return t.data<double>()[i];
    case DataType::kInt64:
      return static_cast<double>(t.data<int64_t>()[i]);
    case DataType::kInt32:
      return t.data<int32_t>()[i];
    case DataType::kBool:
      return t.data<bool>()[i] ? 1.0 : 0.0;
    case DataType::kUInt8:
      return t.data<uint8_t>()[i];
    case DataType::kInt8:
      return t.data<int8_t>()[i];
    case DataType::kFloat16:
      return HalfToFloat(t.data<uint16_t>()[i]);
    case DataType::kBFloat16:
      return Bf16ToFloat(t.data<uint16_t>()[i]);
    case DataType::kInt16:
      return t.data<int16_t>()[i];
    case DataType::kUInt16:
      return t.data<uint16_t>()[i];
    case DataType::kUInt32:
      return t.data<uint32_t>()[i];
    case DataType::kUInt64:
      return static_cast<double>(t.data<uint64_t>()[i]);
    case DataType::kInt4:
      return t.data<int8_t>()[i];
    case DataType::kUInt4:
      return t.data<uint8_t>()[i];
    case DataType::kFloat8E8M0:
      return E8M0ToFloat(t.data<uint8_t>()[i]);
    case DataType::kFloat8E4M3FN:
    case DataType::kFloat8E4M3FNUZ:
    case DataType::kFloat8E5M2:
    case DataType::kFloat8E5M2FNUZ:
    case DataType::kFloat4E2M1:
      return MiniFloatToFloat(t.data<uint8_t>()[i], t.dtype());
    default:
      return 0.0;
  }
}

}  // namespace kiln::ops
