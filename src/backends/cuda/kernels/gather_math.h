// ONNX Gather index math shared by gather.cu and its CPU tests. Layout: data viewed as
// [outer, dim, inner] around `axis` (dense row-major), int64 indices flattened to [count]; the
// output is [outer, count, inner] (= data[:axis] + indices.shape + data[axis+1:]). Output element
// i = (o, j, k) reads data element (o, idx, k), idx = indices[j] (+ dim when negative). Any rank:
// the view is three products, so kMaxRank does not apply.
// Out-of-range indices (outside [-dim, dim)) never read out of bounds: the element is written as
// zero bytes. The reference rejects them with an error instead, so callers validate constant
// indices on the host first; zeros only make runtime indices memory-safe.
#pragma once

#include <vector>

#include "backends/cuda/kernels/hd.h"

namespace kiln::cuda_math {

struct GatherAxisShape {
  int64_t outer, dim, count, inner;
};

KILN_HD int64_t GatherAxisOutputs(const GatherAxisShape& s) { return s.outer * s.count * s.inner; }

// Source element of output element i, or -1 when its index is out of range (write zero).
KILN_HD int64_t GatherAxisSourceOffset(const GatherAxisShape& s, const int64_t* indices,
                                       int64_t i) {
  const int64_t row = i / s.inner, k = i - row * s.inner;
  const int64_t o = row / s.count, j = row - o * s.count;
  int64_t idx = indices[j];
  if (idx < 0) idx += s.dim;
  if (idx < 0 || idx >= s.dim) return -1;
  return (o * s.dim + idx) * s.inner + k;
}

// Host: the view of Gather over `data_dims` along `axis` (negative counts from the end) with
// `num_indices` indices (1 for rank-0 indices). False for scalar data, an axis outside
// [-rank, rank) or a negative count.
inline bool MakeGatherAxisShape(const std::vector<int64_t>& data_dims, int64_t axis,
                                int64_t num_indices, GatherAxisShape* s) {
  const int64_t rank = static_cast<int64_t>(data_dims.size());
  if (rank == 0 || axis < -rank || axis >= rank || num_indices < 0) return false;
  if (axis < 0) axis += rank;
  *s = {1, data_dims[axis], num_indices, 1};
  for (int64_t d = 0; d < axis; ++d) s->outer *= data_dims[d];
  for (int64_t d = axis + 1; d < rank; ++d) s->inner *= data_dims[d];
  return true;
}

}  // namespace kiln::cuda_math
