// Helpers shared by the sequence and optional ops (src/ops/sequence/): reading a sequence input,
// a position input, and copying tensors into and out of sequences.
//
// Items of a sequence are immutable and shared between handles. A plain tensor input may be a
// view of the run's arena, reused after the node: it is copied (Clone) before it goes into a
// sequence or an optional, and an item handed out as a plain tensor output is copied too, so no
// later in-place kernel writes into storage a sequence holds.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/op.h"
#include "kiln/tensor.h"

namespace kiln::ops::seq {

// Base of the sequence and optional ops: they take and make non-plain values, and Compute assigns
// every output (the executor allocates none for them).
class ValueOp : public ir::Op {
 public:
  using ir::Op::Op;
  bool ShapesFromRun() const override { return true; }
  bool TakesNonPlainValues() const override { return true; }
};

// Input i as a sequence; RunError naming `what` when it is missing or not a sequence.
StatusOr<const Tensor*> SequenceInput(const ir::Op& op, const ir::ComputeContext& ctx, size_t i,
                                      const std::string& what);

// A position input: one int32 or int64 element (a scalar; ONNX's reference also takes [1]).
StatusOr<int64_t> ReadPosition(const ir::Op& op, const Tensor& t, const std::string& what);

// Infer: input i, when present and known, must be a sequence; `what` names it.
Status ExpectSequenceInput(const ir::InferContext& ctx, size_t i, const std::string& what);
// Infer: input i, when present and known, must be a tensor of int32 or int64.
Status ExpectIntInput(const ir::InferContext& ctx, size_t i, const std::string& what);

// True for the tensor types (not sequence, optional or undefined).
inline bool IsTensorType(DataType t) {
  return t != DataType::kUndefined && !IsSequenceType(t) && !IsOptionalType(t);
}

// "float32[2,3]" or "sequence(float32) of 4" for messages.
std::string Describe(const Tensor& t);

// Copies elements [begin, begin + count) of `src` along a flattened view (outer, n, inner) into
// `dst` at offset `dst_begin` of its own (outer, dst_n, inner) view: a block of rows per outer
// index. Strings are copied element by element, other types by bytes.
void CopyBlock(const Tensor& src, int64_t outer, int64_t n, int64_t inner, int64_t begin,
               int64_t count, Tensor* dst, int64_t dst_n, int64_t dst_begin);

}  // namespace kiln::ops::seq
