// Helpers shared by the tensor-manipulation ops (src/ops/tensor/*): these ops only move data, so
// their kernels copy elements as opaque 1/2/4/8-byte words (any dtype with a fixed size works),
// and a single strided-gather routine serves Transpose, Slice, Expand and Depth/SpaceToDepth.
// Also: reading the int values of shape-carrying inputs during inference with good errors.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/op.h"
#include "kiln/status.h"
#include "kiln/tensor.h"

namespace kiln::ops {

// dst[i] = src[src_offset + sum_d idx_d(i) * src_strides[d]] for every index of `out_shape`
// (row-major in dst). Strides and offset are in elements and may be negative or zero
// (broadcast). `esz` is the element size in bytes.
void StridedGather(void* dst, const void* src, const Shape& out_shape,
                   const std::vector<int64_t>& src_strides, int64_t src_offset, size_t esz);

// dst = transpose(src, perm): dst dim i is src dim perm[i]. perm must be a permutation.
void TransposeBytes(void* dst, const void* src, const Shape& src_shape,
                    const std::vector<int64_t>& perm, size_t esz);

// Fills n elements of `esz` bytes at dst with the element at `value`.
void FillBytes(void* dst, int64_t n, const void* value, size_t esz);

// Truncates toward zero, saturating at the int64 range; NaN becomes 0 (C++ leaves these undefined).
int64_t TruncToInt64(double v);

// Stores `v` converted to dtype at dst (one element). Integers truncate toward zero (TruncToInt64,
// then two's-complement wrap); bool is v != 0. False for dtypes it cannot store (string, float16,
// bfloat16).
bool StoreAsDtype(DataType dtype, double v, void* dst);

// A new tensor holding `t`'s values converted to `dtype` with Cast's rules (test cases build
// float64 and 16-bit inputs from CaseTensor/CaseInts this way); an empty tensor when Cast cannot
// convert between the two.
Tensor CastCopy(const Tensor& t, DataType dtype);

// Error unless input i is present (InvalidModel) with a fixed-size dtype (else Unsupported).
Status ExpectFixedSize(const ir::InferContext& ctx, size_t i);

// The values of int32/int64 input i, which must be known (a shape input). `what` names the
// input in errors ("Reshape's shape").
StatusOr<std::vector<int64_t>> KnownInts(const ir::InferContext& ctx, size_t i,
                                         const std::string& what);

// Error for a shape input's values read at run time: the tensor must be int32/int64.
StatusOr<std::vector<int64_t>> RunInts(const ir::Op& op, const Tensor& t, const std::string& what);

// "[1,2,3]" for messages.
std::string IntsToString(const std::vector<int64_t>& v);

}  // namespace kiln::ops
