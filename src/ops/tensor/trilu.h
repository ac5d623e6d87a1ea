// Trilu (opset 14): keeps the upper (upper = 1, the default) or lower triangle of the last two
// dims of x [..., rows, cols] and zeroes the rest; the optional int64 scalar input k moves the
// diagonal (upper keeps col - row >= k, lower keeps col - row <= k). Any fixed-size dtype.
//
// The typed attributes and the column span each row keeps, written once (KILN_HD) for the
// reference kernel (trilu.cc), the CPU kernel (backends/cpu/trilu_loops.cc) and the CUDA kernel
// (backends/cuda/kernels/trilu.cu). ONNX's node tests (test_tril*, test_triu*) anchor it.
#pragma once

#include <cstdint>

#include "core/hd.h"
#include "ir/op.h"

namespace kiln::ops {

struct TriluAttrs : ir::OpAttrs {
  bool upper = true;
};

// Columns [begin, end) of row `row` (of a matrix with `rows` rows and `cols` columns) that Trilu
// keeps. Any k: it is clamped to [-(rows + 1), cols + 1] first, which changes no span and keeps
// row + k from overflowing.
struct TriluSpan {
  int64_t begin, end;
};
KILN_HD TriluSpan TriluKeptColumns(int64_t row, int64_t rows, int64_t cols, int64_t k, bool upper) {
  k = k < -(rows + 1) ? -(rows + 1) : (k > cols + 1 ? cols + 1 : k);
  const int64_t edge = upper ? row + k : row + k + 1;  // first kept (upper), first dropped (lower)
  const int64_t e = edge < 0 ? 0 : (edge > cols ? cols : edge);
  return upper ? TriluSpan{e, cols} : TriluSpan{0, e};
}

}  // namespace kiln::ops
