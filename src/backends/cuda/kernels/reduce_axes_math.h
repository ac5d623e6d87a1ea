// ReduceSum / ReduceMean / ReduceMax / ReduceMin / ReduceSumSquare / ReduceL2 over a set of axes,
// shared by reduce_axes.cu and its CPU tests. Float32, dense row-major input; the output holds the
// kept dims in order (keepdims only changes the caller's output shape, not the data).
// MakeReduceAxesShape drops size-1 dims and merges adjacent dims that are both kept or both
// reduced, then describes the work two ways:
//   contiguous: the reduced dims form one block, so the input is [outer, reduce, inner] and output
//     o = (a, k) reduces x[a, 0..reduce, k]; one block per output folds it with the
//     reduce_math.h order (ReducePartial, then the kernel_util.cuh tree).
//   strided (always filled): output o's base offset from the kept dims, then one thread walks the
//     reduced dims in row-major order with an odometer (StridedReduceAt), a sequential fold.
// The kernel uses a block per output when contiguous and the rows are long enough to occupy a
// block (count >= 32 with inner == 1, or count >= kReduceThreads), else a thread per output (for
// inner > 1 neighbouring threads then read neighbouring elements).
// Arithmetic: each element is loaded as x, x*x (SumSquare, L2) or -x (Min, reduced as a Max and
// negated back), folded as a float sum or max, then finished (Mean / count, sqrt for L2). Max and
// Min propagate NaN as the reference does: the per-thread fold keeps a NaN, and the block path
// sums NaN-or-zero partials in a second tree. Empty reductions (a reduced dim of 0) give the
// reference's identities: 0 for Sum, SumSquare and L2, NaN for Mean, -inf for Max, +inf for Min.
// The reference accumulates in double; results differ by float rounding.
#pragma once

#include <cmath>
#include <vector>

#include "backends/cuda/kernels/hd.h"
#include "backends/cuda/kernels/layout_math.h"
#include "backends/cuda/kernels/reduce_math.h"

namespace kiln::cuda_math {

enum class ReduceOp : int { kSum = 0, kMean, kMax, kMin, kSumSquare, kL2 };

struct ReduceAxesShape {
  int64_t outputs, count;  // output elements; input elements reduced into each
  bool contiguous;         // the [outer, reduce, inner] view below is valid
  bool block_per_output;   // the kernel's choice: a block per output (else a thread per output)
  int64_t outer, reduce, inner;
  int kept_rank, reduced_rank;  // merged dims, size-1 dims dropped
  int64_t kept_dims[kMaxRank], kept_strides[kMaxRank];
  int64_t reduced_dims[kMaxRank], reduced_strides[kMaxRank];
};

// Max and Min fold with max (Min on negated loads); the others with sum.
KILN_HD ReduceKind FoldKind(ReduceOp op) {
  return op == ReduceOp::kMax || op == ReduceOp::kMin ? ReduceKind::kMax : ReduceKind::kSum;
}

KILN_HD float ReduceLoad(ReduceOp op, float x) {
  if (op == ReduceOp::kMin) return -x;
  if (op == ReduceOp::kSumSquare || op == ReduceOp::kL2) return x * x;
  return x;
}

// One fold step; unlike Combine, a NaN `v` wins a max (and a NaN `acc` stays).
KILN_HD float FoldStep(ReduceKind k, float acc, float v) {
  if (k == ReduceKind::kSum) return acc + v;
  return v > acc || v != v ? v : acc;
}

KILN_HD float ReduceFinish(ReduceOp op, float r, int64_t count) {
  if (op == ReduceOp::kMean) return r / static_cast<float>(count);
  if (op == ReduceOp::kL2) return sqrtf(r);
  if (op == ReduceOp::kMin) return -r;
  return r;
}

// A NaN partial, else 0: summed over the block, NaN exactly when some partial is NaN.
KILN_HD float NanOrZero(float p) { return p != p ? p : 0.f; }

// Loads of one reduced row of the contiguous view.
template <typename T>
struct LoadReduced {
  const T* x;
  int64_t stride;
  ReduceOp op;
  KILN_HD float operator()(int64_t j) const { return ReduceLoad(op, ToFloat(x[j * stride])); }
};
template <typename T>
LoadReduced(const T*, int64_t, ReduceOp) -> LoadReduced<T>;

// Thread t's fold of load(j) over j = t, t + threads, ... < n (ThreadPartial with FoldStep).
template <typename Load>
KILN_HD float ReducePartial(ReduceKind k, const Load& load, int64_t n, int t, int threads) {
  float acc = ReduceInit(k);
  for (int64_t j = t; j < n; j += threads) acc = FoldStep(k, acc, load(j));
  return acc;
}

// Contiguous view: offset of output o's first element (its elements are `inner` apart).
KILN_HD int64_t ReduceRowBase(const ReduceAxesShape& s, int64_t o) {
  const int64_t a = o / s.inner;
  return a * s.reduce * s.inner + (o - a * s.inner);
}

// Strided path: output o, folded sequentially over its reduced elements in row-major order.
template <typename T>
KILN_HD float StridedReduceAt(ReduceOp op, const T* x, const ReduceAxesShape& s, int64_t o) {
  int64_t off = 0;
  for (int d = s.kept_rank - 1; d >= 0; --d) {
    const int64_t q = o / s.kept_dims[d];
    off += (o - q * s.kept_dims[d]) * s.kept_strides[d];
    o = q;
  }
  const ReduceKind k = FoldKind(op);
  float acc = ReduceInit(k);
  int64_t c[kMaxRank] = {};
  for (int64_t j = 0; j < s.count; ++j) {
    acc = FoldStep(k, acc, ReduceLoad(op, ToFloat(x[off])));
    for (int d = s.reduced_rank - 1; d >= 0; --d) {
      off += s.reduced_strides[d];
      if (++c[d] < s.reduced_dims[d]) break;
      off -= s.reduced_strides[d] * s.reduced_dims[d];
      c[d] = 0;
    }
  }
  return ReduceFinish(op, acc, s.count);
}

// Host: the description of reducing `in` over `axes` (negative count from the end). False for
// rank > kMaxRank, an axis out of range or repeated, or empty `axes`: the reference copies the
// input then (noop_with_empty_axes, or a scalar input), which the caller does; an empty `axes`
// that means "reduce all" must be passed as every axis.
inline bool MakeReduceAxesShape(const std::vector<int64_t>& in, const std::vector<int64_t>& axes,
                                ReduceAxesShape* s) {
  const int64_t rank = static_cast<int64_t>(in.size());
  if (rank > kMaxRank || axes.empty()) return false;
  std::vector<bool> reduced(in.size(), false);
  for (int64_t a : axes) {
    if (a < -rank || a >= rank || reduced[a < 0 ? a + rank : a]) return false;
    reduced[a < 0 ? a + rank : a] = true;
  }
  std::vector<int64_t> dims;  // merged
  std::vector<bool> red;
  for (int64_t d = 0; d < rank; ++d) {
    if (in[d] == 1) continue;
    if (!dims.empty() && red.back() == reduced[d]) {
      dims.back() *= in[d];
    } else {
      dims.push_back(in[d]);
      red.push_back(reduced[d]);
    }
  }
  const std::vector<int64_t> strides = RowMajorStrides(dims);
  *s = {};
  s->outputs = s->count = s->outer = s->inner = 1;
  int groups = 0;
  for (size_t d = 0; d < dims.size(); ++d) {
    if (red[d]) {
      s->reduced_dims[s->reduced_rank] = dims[d];
      s->reduced_strides[s->reduced_rank++] = strides[d];
      s->count *= dims[d];
      ++groups;
    } else {
      s->kept_dims[s->kept_rank] = dims[d];
      s->kept_strides[s->kept_rank++] = strides[d];
      s->outputs *= dims[d];
      (groups == 0 ? s->outer : s->inner) *= dims[d];
    }
  }
  s->reduce = s->count;
  s->contiguous = groups <= 1;
  s->block_per_output =
      s->contiguous && (s->inner == 1 ? s->count >= 32 : s->count >= kReduceThreads);
  return true;
}

}  // namespace kiln::cuda_math
