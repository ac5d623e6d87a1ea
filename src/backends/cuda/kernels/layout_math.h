// Data-movement index math shared by layout.cu and its CPU tests: each output element maps to one
// source offset (or to a constant). Layout: dense row-major tensors, rank <= kMaxRank.
//   Strided gather (Transpose, Slice): dst[o] = src[offset + sum(coord_d(o) * strides[d])];
//     Transpose uses the input strides permuted, Slice the input strides times the step (negative
//     for negative steps) and offset = sum(start_d * stride_d), starts already resolved and
//     clamped by the caller as ONNX Slice specifies.
//   Pad (constant mode): c_d = o_d - pad_begin_d; outside [0, in_d) gives `value`. Negative pads
//     crop, as in the reference (ops/tensor/pad.cc).
//   Concat: one input [rows, src_cols] copied into the output [rows, dst_cols] at column offset
//     dst_col_offset (cols = axis extent * inner size).
#pragma once

#include <cstddef>
#include <vector>

#include "backends/cuda/kernels/hd.h"

namespace kiln::cuda_math {

struct GatherIndex {
  int rank;
  int64_t out_dims[kMaxRank];
  int64_t src_strides[kMaxRank];
  int64_t src_offset;
};

struct PadIndex {
  int rank;
  int64_t out_dims[kMaxRank];
  int64_t in_dims[kMaxRank];
  int64_t pad_begin[kMaxRank];
  float value;
};

struct ConcatIndex {
  int64_t rows, src_cols, dst_cols, dst_col_offset;
};

KILN_HD int64_t GatherOffset(const GatherIndex& g, int64_t i) {
  int64_t off = g.src_offset;
  for (int d = g.rank - 1; d >= 0; --d) {
    const int64_t q = i / g.out_dims[d];
    off += (i - q * g.out_dims[d]) * g.src_strides[d];
    i = q;
  }
  return off;
}

// Source offset of output element i, or -1 for the pad value.
KILN_HD int64_t PadSourceOffset(const PadIndex& p, int64_t i) {
  int64_t off = 0, stride = 1;
  for (int d = p.rank - 1; d >= 0; --d) {
    const int64_t q = i / p.out_dims[d];
    const int64_t c = (i - q * p.out_dims[d]) - p.pad_begin[d];
    if (c < 0 || c >= p.in_dims[d]) return -1;
    off += c * stride;
    stride *= p.in_dims[d];
    i = q;
  }
  return off;
}

// Destination offset of source element i.
KILN_HD int64_t ConcatDstOffset(const ConcatIndex& c, int64_t i) {
  const int64_t r = i / c.src_cols;
  return r * c.dst_cols + c.dst_col_offset + (i - r * c.src_cols);
}

inline std::vector<int64_t> RowMajorStrides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (size_t d = dims.size(); d-- > 1;) s[d - 1] = s[d] * dims[d];
  return s;
}

// Host: Transpose of `in` by `perm` (output dim d is input dim perm[d]). False when perm is not a
// permutation of 0..rank-1 or rank > kMaxRank.
inline bool MakeTransposeIndex(const std::vector<int64_t>& in, const std::vector<int64_t>& perm,
                               GatherIndex* g) {
  if (perm.size() != in.size() || in.size() > static_cast<size_t>(kMaxRank)) return false;
  const std::vector<int64_t> st = RowMajorStrides(in);
  std::vector<bool> seen(in.size(), false);
  g->rank = static_cast<int>(in.size());
  g->src_offset = 0;
  for (size_t d = 0; d < perm.size(); ++d) {
    const int64_t p = perm[d];
    if (p < 0 || p >= static_cast<int64_t>(in.size()) || seen[p]) return false;
    seen[p] = true;
    g->out_dims[d] = in[p];
    g->src_strides[d] = st[p];
  }
  return true;
}

// Host: Slice of `in` with per-dim resolved `starts`, `steps` (non-zero) and output dims `out`.
// False on mismatched lengths or rank > kMaxRank.
inline bool MakeSliceIndex(const std::vector<int64_t>& in, const std::vector<int64_t>& starts,
                           const std::vector<int64_t>& steps, const std::vector<int64_t>& out,
                           GatherIndex* g) {
  const size_t r = in.size();
  if (starts.size() != r || steps.size() != r || out.size() != r ||
      r > static_cast<size_t>(kMaxRank))
    return false;
  const std::vector<int64_t> st = RowMajorStrides(in);
  g->rank = static_cast<int>(r);
  g->src_offset = 0;
  for (size_t d = 0; d < r; ++d) {
    if (steps[d] == 0) return false;
    g->out_dims[d] = out[d];
    g->src_strides[d] = st[d] * steps[d];
    g->src_offset += starts[d] * st[d];
  }
  return true;
}

// Host: constant Pad of `in` to `out` with begin pads `pad_begin` (negative crops).
inline bool MakePadIndex(const std::vector<int64_t>& in, const std::vector<int64_t>& out,
                         const std::vector<int64_t>& pad_begin, float value, PadIndex* p) {
  const size_t r = in.size();
  if (out.size() != r || pad_begin.size() != r || r > static_cast<size_t>(kMaxRank)) return false;
  p->rank = static_cast<int>(r);
  p->value = value;
  for (size_t d = 0; d < r; ++d) {
    p->out_dims[d] = out[d];
    p->in_dims[d] = in[d];
    p->pad_begin[d] = pad_begin[d];
  }
  return true;
}

}  // namespace kiln::cuda_math
