// Broadcast binary arithmetic (Add, Sub, Mul, Div, Pow, Max, Min) shared by binary.cu and its CPU
// tests. Layout: dense row-major tensors; A and B broadcast to the output with numpy rules (right
// aligned, each dim equal or 1). BroadcastIndex holds the output dims and each operand's element
// strides (0 on broadcast dims); MakeBroadcastIndex merges adjacent dims that walk both operands
// contiguously and drops size-1 output dims, so a same-shape pair becomes rank 1 with strides 1
// and a scalar operand rank 1 with stride 0 (binary.cu's flat fast path). Limits: float32; at most
// kMaxRank dims after merging. Max/Min follow std::max/std::min argument order (the reference's
// NaN behaviour); Pow is powf (the reference uses double pow, a few ulp apart).
#pragma once

#include <cmath>
#include <cstddef>
#include <vector>

#include "backends/cuda/kernels/hd.h"

namespace kiln::cuda_math {

enum class BinaryOp : int { kAdd = 0, kSub, kMul, kDiv, kPow, kMax, kMin };

struct BroadcastIndex {
  int rank;
  int64_t out_dims[kMaxRank];
  int64_t a_strides[kMaxRank];
  int64_t b_strides[kMaxRank];
};

KILN_HD float ApplyBinary(BinaryOp op, float a, float b) {
  switch (op) {
    case BinaryOp::kAdd:
      return a + b;
    case BinaryOp::kSub:
      return a - b;
    case BinaryOp::kMul:
      return a * b;
    case BinaryOp::kDiv:
      return a / b;
    case BinaryOp::kPow:
      return powf(a, b);
    case BinaryOp::kMax:
      return a < b ? b : a;
    case BinaryOp::kMin:
      return b < a ? b : a;
  }
  return a;
}

// Output linear index -> element offsets into A and B.
KILN_HD void BroadcastOffsets(const BroadcastIndex& index, int64_t i, int64_t* a_offset,
                              int64_t* b_offset) {
  int64_t oa = 0, ob = 0;
  for (int d = index.rank - 1; d >= 0; --d) {
    const int64_t q = i / index.out_dims[d];
    const int64_t r = i - q * index.out_dims[d];
    oa += r * index.a_strides[d];
    ob += r * index.b_strides[d];
    i = q;
  }
  *a_offset = oa;
  *b_offset = ob;
}

// Host: fills `index` for A `a` and B `b` broadcast to `out`. False when a dim of A or B is
// neither 1 nor the output's, an operand has more dims than the output, or more than kMaxRank
// dims remain after merging.
inline bool MakeBroadcastIndex(const std::vector<int64_t>& a, const std::vector<int64_t>& b,
                               const std::vector<int64_t>& out, BroadcastIndex* index) {
  const size_t rank = out.size();
  if (a.size() > rank || b.size() > rank) return false;
  // Right-aligned element strides of an operand over the output dims (0 where broadcast).
  auto strides = [&](const std::vector<int64_t>& s, std::vector<int64_t>* st) {
    st->assign(rank, 0);
    int64_t stride = 1;
    for (size_t k = 0; k < s.size(); ++k) {
      const size_t d = rank - 1 - k, sd = s.size() - 1 - k;
      if (s[sd] != out[d] && s[sd] != 1) return false;
      (*st)[d] = s[sd] == 1 ? 0 : stride;
      stride *= s[sd];
    }
    return true;
  };
  std::vector<int64_t> sa, sb;
  if (!strides(a, &sa) || !strides(b, &sb)) return false;
  // Merge dim d into the kept dim after it when both operands step through them as one.
  std::vector<int64_t> dims, ka, kb;
  for (size_t k = rank; k-- > 0;) {
    if (out[k] == 1) continue;
    if (!dims.empty() && sa[k] == ka.back() * dims.back() && sb[k] == kb.back() * dims.back()) {
      dims.back() *= out[k];
      continue;
    }
    dims.push_back(out[k]);
    ka.push_back(sa[k]);
    kb.push_back(sb[k]);
  }
  if (dims.size() > static_cast<size_t>(kMaxRank)) return false;
  index->rank = static_cast<int>(dims.size());
  for (int d = 0; d < index->rank; ++d) {
    const size_t k = dims.size() - 1 - static_cast<size_t>(d);
    index->out_dims[d] = dims[k];
    index->a_strides[d] = ka[k];
    index->b_strides[d] = kb[k];
  }
  return true;
}

}  // namespace kiln::cuda_math
