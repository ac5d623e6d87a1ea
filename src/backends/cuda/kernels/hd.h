// Shared by every *_math.h header of the CUDA kernels: the KILN_HD qualifier that makes a function
// callable from both host and device code (so CPU unit tests run exactly the arithmetic the GPU
// runs) and the maximum tensor rank the index structs hold. Plain C++ without nvcc.
#pragma once

#include <cstdint>

#include "core/hd.h"

namespace kiln::cuda_math {

// Rank limit of the by-value shape/stride structs passed to kernels.
constexpr int kMaxRank = 6;

// Elements of the output an index struct (BroadcastIndex, GatherIndex, PadIndex) describes.
template <typename Index>
inline int64_t OutputElements(const Index& index) {
  int64_t n = 1;
  for (int d = 0; d < index.rank; ++d) n *= index.out_dims[d];
  return n;
}

}  // namespace kiln::cuda_math
