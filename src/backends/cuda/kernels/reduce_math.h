// The row reductions of the global pools, Softmax and LayerNormalization, shared by their kernels
// and CPU tests. A row of n elements (spaced `stride` apart) is reduced by one block of
// kReduceThreads threads: thread t folds elements t, t + T, t + 2T, ... in that order
// (ThreadPartial), then the block combines the T partials pairwise in a shared-memory tree
// (partial[t] = Combine(partial[t], partial[t + s]) for s = T/2, T/4, ..., 1; block_reduce.cuh).
// Float accumulation in this fixed order; kiln's reference kernels sum sequentially in double, so
// results differ by float rounding (tests bound it). Max keeps the left operand unless the right
// is greater, so a NaN partial may or may not survive the tree (Softmax's sum still turns NaN).
#pragma once

#include <cmath>

#include "backends/cuda/kernels/cast_math.h"
#include "backends/cuda/kernels/hd.h"

namespace kiln::cuda_math {

constexpr int kReduceThreads = 256;  // a power of two: the tree halves it

enum class ReduceKind : int { kSum = 0, kMax };

KILN_HD float ReduceInit(ReduceKind k) { return k == ReduceKind::kSum ? 0.f : -INFINITY; }

KILN_HD float Combine(ReduceKind k, float a, float b) {
  return k == ReduceKind::kSum ? a + b : (b > a ? b : a);
}

// Thread t's fold of load(j) over j = t, t + threads, ... < n. `Load` is a functor of j.
template <typename Load>
KILN_HD float ThreadPartial(ReduceKind k, const Load& load, int64_t n, int t, int threads) {
  float acc = ReduceInit(k);
  for (int64_t j = t; j < n; j += threads) acc = Combine(k, acc, load(j));
  return acc;
}

// Loads of one row: plain, exp(x - shift), squared deviation (x - mean)^2.
// T: float or Half storage (cast_math.h), loaded as float.
template <typename T>
struct LoadRow {
  const T* x;
  int64_t stride;
  KILN_HD float operator()(int64_t j) const { return ToFloat(x[j * stride]); }
};
template <typename T>
LoadRow(const T*, int64_t) -> LoadRow<T>;
template <typename T>
struct LoadExpShifted {
  const T* x;
  int64_t stride;
  float shift;
  KILN_HD float operator()(int64_t j) const { return expf(ToFloat(x[j * stride]) - shift); }
};
template <typename T>
LoadExpShifted(const T*, int64_t, float) -> LoadExpShifted<T>;
template <typename T>
struct LoadSquaredDev {
  const T* x;
  float mean;
  KILN_HD float operator()(int64_t j) const {
    const float d = ToFloat(x[j]) - mean;
    return d * d;
  }
};
template <typename T>
LoadSquaredDev(const T*, float) -> LoadSquaredDev<T>;

// x is finite (not inf, not NaN), without relying on a host or device isfinite overload.
KILN_HD bool IsFinite(float x) { return x - x == 0.f; }

}  // namespace kiln::cuda_math
