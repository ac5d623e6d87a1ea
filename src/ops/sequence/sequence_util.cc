// Helpers of the sequence and optional ops (sequence_util.h).
#include "ops/sequence/sequence_util.h"

#include <cstring>

namespace kiln::ops::seq {

std::string Describe(const Tensor& t) {
  if (!t.defined()) return "none";
  if (IsSequenceType(t.dtype()))
    return std::string(DataTypeName(t.dtype())) + " of " + std::to_string(t.items().size());
  if (IsOptionalType(t.dtype()))
    return std::string(DataTypeName(t.dtype())) + (t.has_element() ? "" : " (none)");
  return std::string(DataTypeName(t.dtype())) + ShapeToString(t.shape());
}

StatusOr<const Tensor*> SequenceInput(const ir::Op& op, const ir::ComputeContext& ctx, size_t i,
                                      const std::string& what) {
  if (!ctx.has(i)) return op.RunError(what + " is required; got none");
  if (!IsSequenceType(ctx.in(i).dtype()))
    return op.RunError(what + " must be a sequence; got " + Describe(ctx.in(i)));
  return &ctx.in(i);
}

StatusOr<int64_t> ReadPosition(const ir::Op& op, const Tensor& t, const std::string& what) {
  if ((t.dtype() != DataType::kInt64 && t.dtype() != DataType::kInt32) || t.numel() != 1 ||
      t.rank() > 1)
    return op.RunError(what + " must be an int32 or int64 scalar; got " + Describe(t));
  return t.dtype() == DataType::kInt64 ? t.data<int64_t>()[0]
                                       : static_cast<int64_t>(t.data<int32_t>()[0]);
}

Status ExpectSequenceInput(const ir::InferContext& ctx, size_t i, const std::string& what) {
  if (!ctx.has_input(i) || IsSequenceType(ctx.dtype(i))) return OkStatus();
  return ctx.Error(what + " must be a sequence; got " + DataTypeName(ctx.dtype(i)));
}

Status ExpectIntInput(const ir::InferContext& ctx, size_t i, const std::string& what) {
  if (!ctx.has_input(i) || ctx.dtype(i) == DataType::kInt64 || ctx.dtype(i) == DataType::kInt32)
    return OkStatus();
  return ctx.Error(what + " must be int32 or int64; got " + DataTypeName(ctx.dtype(i)));
}

void CopyBlock(const Tensor& src, int64_t outer, int64_t n, int64_t inner, int64_t begin,
               int64_t count, Tensor* dst, int64_t dst_n, int64_t dst_begin) {
  const int64_t row = count * inner;
  if (row == 0) return;
  if (src.dtype() == DataType::kString) {
    const std::string* s = src.data<std::string>();
    std::string* d = dst->data<std::string>();
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t k = 0; k < row; ++k)
        d[(o * dst_n + dst_begin) * inner + k] = s[(o * n + begin) * inner + k];
    return;
  }
  const size_t esz = DataTypeSize(src.dtype());
  const char* s = static_cast<const char*>(src.raw());
  char* d = static_cast<char*>(dst->raw());
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(d + static_cast<size_t>((o * dst_n + dst_begin) * inner) * esz,
                s + static_cast<size_t>((o * n + begin) * inner) * esz,
                static_cast<size_t>(row) * esz);
}

}  // namespace kiln::ops::seq
