// cpu.matmulinteger.onednn: MatMulInteger (Y int32 = (A - a_zero_point) x (B - b_zero_point)),
// what ONNX Runtime's quantize_dynamic writes for every MatMul and Gemm, on oneDNN's int8 matmul.
// A uint8/int8 [..., M, K] (plain, leading dims folded into M) with a scalar zero point that may
// be computed at run time (DynamicQuantizeLinear's), constant B [K, N] int8/uint8 with a constant
// zero point per tensor or per column.
//
// Exact, as the op is: without VNNI, oneDNN's int8 gemm sums pairs of uint8 x int8 products in
// 16 bits (vpmaddubsw), which saturate once |B| exceeds 64 with full-range A (measured: wrong sums
// with B up to +-127, exact with +-64). B - b_zero_point (constant, folded at Prepare) is then
// split into p parts of at most 64 in magnitude, stacked along K: B' = [B1; ...; Bp] [pK, N], and
// A is repeated p times along K into scratch, so A' x B' = A x (B1 + ... + Bp) in one gemm with
// no sum ever saturating (p = 2 for int8 weights; 4 for uint8 weights without a zero point). With
// VNNI (exact 32-bit dot products) p = 1 when B - b_zero_point fits int8. ONNX Runtime's own
// AVX2 kernel is not exact here (its documentation advises 7-bit weights on such CPUs).
// Trained weights rarely use their full range (per-tensor scales follow the largest value): when
// at most kSparseLimit of the values exceed 64 in magnitude, B - b_zero_point is instead clamped
// to [-64, 64] for the one gemm, and the rest (the excess of the few wide values, stored by
// column) is added exactly afterwards by a vectorized sparse loop over blocks of 8 rows of A:
// the cost of a second part falls to that of the wide values (PP-OCRv4's weights: under 1 %).
// An int8 A goes in as uint8 (v + 128, zero point + 128: exact; oneDNN 2.6's int8 source with a
// zero point is a reference gemm).
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "backends/cpu/onednn_common.h"
#include "core/threading.h"
#include "ops/quant/quant_common.h"

namespace kiln::backends::cpu {
namespace {

using dnnl::memory;
using runtime::KernelSupport;
using runtime::TensorInfo;

// Rows of A per block of the sparse correction (8 int32 lanes: one AVX2 register).
constexpr int kRows = 8;
// Blocks corrected at once (each with its own scratch), which bounds the scratch at any M.
constexpr int64_t kBlocksAtOnce = 16;
// The largest share of B's values wider than 64 handled as a sparse correction. Measured on
// ViT-B/16's 197x768x3072 with the wide values spread over every column
// (bench/make_matmul_integer_models.py, AMD EPYC AVX2): the correction costs about as much as a
// second part at 6-8 %; trained weights gather them in few columns, which costs less.
constexpr double kSparseLimit = 0.05;

// A's rows [row0, row0 + rows) minus the zero point, transposed: at[k][i] (kRows lanes, the rows
// past `rows` zero).
void TransposeBlock(const uint8_t* a, bool is_int8, int32_t zero, int64_t row0, int64_t rows,
                    int64_t k, int32_t* at) {
  for (int i = 0; i < kRows; ++i) {
    const uint8_t* src = a + (row0 + i) * k;
    for (int64_t j = 0; j < k; ++j)
      at[j * kRows + i] = i >= rows ? 0 : (is_int8 ? static_cast<int8_t>(src[j]) : src[j]) - zero;
  }
}

// corr[c][i] = sum over j in [starts[c], starts[c + 1]) of values[j] * at[ks[j]][i]: the
// correction of column cols[c] for the block's kRows rows (the AVX2 form holds one column's 8 sums
// in a register; left to itself the compiler vectorizes across the entries instead).
__attribute__((target("avx2"))) void SparseColumnsAvx2(const int32_t* at, const int32_t* starts,
                                                       size_t ncols, const int32_t* ks,
                                                       const int32_t* values, int32_t* corr) {
  for (size_t c = 0; c < ncols; ++c) {
    __m256i acc = _mm256_setzero_si256();
    for (int32_t j = starts[c]; j < starts[c + 1]; ++j) {
      const __m256i a = _mm256_loadu_si256(
          reinterpret_cast<const __m256i*>(at + static_cast<int64_t>(ks[j]) * kRows));
      acc = _mm256_add_epi32(acc, _mm256_mullo_epi32(_mm256_set1_epi32(values[j]), a));
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(corr + c * kRows), acc);
  }
}

void SparseColumns(const int32_t* at, const int32_t* starts, size_t ncols, const int32_t* ks,
                   const int32_t* values, int32_t* corr) {
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2) return SparseColumnsAvx2(at, starts, ncols, ks, values, corr);
  for (size_t c = 0; c < ncols; ++c) {
    int32_t* acc = corr + c * kRows;
    for (int i = 0; i < kRows; ++i) acc[i] = 0;
    for (int32_t j = starts[c]; j < starts[c + 1]; ++j) {
      const int32_t* a = at + static_cast<int64_t>(ks[j]) * kRows;
      for (int i = 0; i < kRows; ++i) acc[i] += values[j] * a[i];
    }
  }
}

// y[i][cols[c]] += corr[c][i] for the block's `rows` rows (y: its first row, n columns a row), row
// by row so each row's columns are visited in increasing order; wrapping, as the exact int32
// result is.
void AddCorrection(const int32_t* corr, const int32_t* cols, size_t ncols, int64_t rows, int32_t* y,
                   int64_t n) {
  for (int64_t i = 0; i < rows; ++i) {
    int32_t* row = y + i * n;
    for (size_t c = 0; c < ncols; ++c)
      row[cols[c]] = static_cast<int32_t>(static_cast<uint32_t>(row[cols[c]]) +
                                          static_cast<uint32_t>(corr[c * kRows + i]));
  }
}

class MatMulIntegerOneDnn final : public runtime::Kernel {
 public:
  explicit MatMulIntegerOneDnn(const ir::Node& node) : node_(node) {}

  Status Prepare(runtime::PrepareContext* ctx) override {
    return Guard(node_, [&] { DoPrepare(ctx); });
  }

  // Scratch: A as uint8, repeated `parts_` times along K (when it is copied), the transposed
  // blocks of the sparse correction, then oneDNN's.
  size_t ScratchBytes() const override {
    return ABytes() + BlockBytes() + descs_.scratchpad.get_size();
  }

  std::string variant() const override {
    if (!sparse_cols_.empty()) return "clamped weights + sparse rest";
    return parts_ == 1 ? "" : std::to_string(parts_) + " weight parts";
  }

  Status Run(const ir::ComputeContext& ctx) const override {
    return Guard(node_, [&] {
      char* scratch = static_cast<char*>(ctx.scratch);
      const Tensor& a = ctx.in(0);
      const int32_t a_zero = node_.HasInput(2) ? ops::quant::ReadQuant(ctx.in(2), 0) : 0;
      int32_t zero = a_zero;
      const void* a_data = a.raw();
      if (copy_a_) {
        // Each row of A, `parts_` times, as uint8.
        const auto* src = static_cast<const uint8_t*>(a.raw());
        auto* dst = reinterpret_cast<uint8_t*>(scratch);
        const uint8_t flip = a.dtype() == DataType::kInt8 ? 0x80 : 0;
        for (int64_t r = 0; r < m_; ++r) {
          const uint8_t* row = src + r * k_;
          for (int p = 0; p < parts_; ++p, dst += k_) {
            if (flip == 0) {
              std::memcpy(dst, row, static_cast<size_t>(k_));
            } else {
              for (int64_t i = 0; i < k_; ++i) dst[i] = row[i] ^ flip;
            }
          }
        }
        a_data = scratch;
        if (flip != 0) zero += 128;
      }
      RunMemory am(descs_.src, a_data), y(descs_.dst, ctx.out(0).raw()),
          sp(descs_.scratchpad, scratch + ABytes() + BlockBytes());
      RunMemory zm(zero_desc_, &zero);
      Execute(prim_, {{DNNL_ARG_SRC, am.get()},
                      {DNNL_ARG_WEIGHTS, weights_.get()},
                      {DNNL_ARG_DST, y.get()},
                      {DNNL_ARG_SCRATCHPAD, sp.get()},
                      {DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, zm.get()}});
      ThreadStream().wait();
      if (!sparse_cols_.empty()) AddSparseRest(a, a_zero, scratch + ABytes(), &ctx.out(0));
    });
  }

 private:
  size_t ABytes() const { return copy_a_ ? Align64(static_cast<size_t>(m_ * k_ * parts_)) : 0; }
  int64_t Blocks() const { return (m_ + kRows - 1) / kRows; }
  int64_t BlocksAtOnce() const { return std::min(Blocks(), kBlocksAtOnce); }
  // Per block: A's rows transposed [K][kRows], then the corrections [columns][kRows].
  int64_t CorrInts() const { return static_cast<int64_t>(sparse_cols_.size()) * kRows; }
  size_t BlockBytes() const {
    return sparse_cols_.empty()
               ? 0
               : static_cast<size_t>(BlocksAtOnce() * (k_ * kRows + CorrInts())) * 4;
  }

  // Y += (A - a_zero) x rest, block by block of kRows rows.
  void AddSparseRest(const Tensor& a, int32_t a_zero, char* scratch, Tensor* y) const {
    const auto* src = static_cast<const uint8_t*>(a.raw());
    const bool is_int8 = a.dtype() == DataType::kInt8;
    auto* at_all = reinterpret_cast<int32_t*>(scratch);
    int32_t* corr_all = at_all + BlocksAtOnce() * k_ * kRows;
    int32_t* out = y->data<int32_t>();
    for (int64_t first = 0; first < Blocks(); first += kBlocksAtOnce) {
      ParallelFor(std::min(kBlocksAtOnce, Blocks() - first), 1, [&](int64_t b, int64_t e) {
        for (int64_t slot = b; slot < e; ++slot) {
          int32_t* at = at_all + slot * k_ * kRows;
          int32_t* corr = corr_all + slot * CorrInts();
          const int64_t row0 = (first + slot) * kRows, rows = std::min<int64_t>(kRows, m_ - row0);
          TransposeBlock(src, is_int8, a_zero, row0, rows, k_, at);
          SparseColumns(at, sparse_starts_.data(), sparse_cols_.size(), sparse_k_.data(),
                        sparse_values_.data(), corr);
          AddCorrection(corr, sparse_cols_.data(), sparse_cols_.size(), rows, out + row0 * n_, n_);
        }
      });
    }
  }

  void DoPrepare(runtime::PrepareContext* ctx) {
    const TensorInfo& ai = ctx->inputs[0];
    const Tensor& b = *ctx->constants[1];
    k_ = b.shape()[0];
    const int64_t n = b.shape()[1];
    n_ = n;
    m_ = NumElements(ai.shape) / k_;

    // B - b_zero_point (per tensor or per column), split into parts (onednn_common.h).
    const Tensor* bz = node_.HasInput(3) ? ctx->constants[3] : nullptr;
    const SplitWeights sw(
        b, bz, [n](int64_t i) { return i % n; }, Int8Vnni() ? 127 : 64);
    parts_ = sw.parts;
    // Few wide values: one gemm on B clamped to [-64, 64], the excess as a sparse correction
    // (by column: its rows k and values).
    sparse_cols_.clear();
    sparse_starts_.clear();
    sparse_k_.clear();
    sparse_values_.clear();
    if (parts_ > 1 && !Int8Vnni()) {
      int64_t wide = 0;
      for (int32_t v : sw.centered) wide += std::abs(v) > 64;
      if (static_cast<double>(wide) <= kSparseLimit * static_cast<double>(k_ * n)) {
        for (int64_t col = 0; col < n; ++col) {
          const auto start = static_cast<int32_t>(sparse_k_.size());
          for (int64_t row = 0; row < k_; ++row) {
            const int32_t v = sw.centered[row * n + col];
            const int32_t clamped = std::clamp(v, -64, 64);
            if (v == clamped) continue;
            sparse_k_.push_back(static_cast<int32_t>(row));
            sparse_values_.push_back(v - clamped);
          }
          if (static_cast<int32_t>(sparse_k_.size()) == start) continue;
          sparse_cols_.push_back(static_cast<int32_t>(col));
          sparse_starts_.push_back(start);
        }
        sparse_starts_.push_back(static_cast<int32_t>(sparse_k_.size()));
        parts_ = 1;
      }
    }
    Tensor split = Tensor::Empty(DataType::kInt8, {parts_ * k_, n});
    int8_t* sp = split.data<int8_t>();
    if (!sparse_cols_.empty()) {
      for (int64_t i = 0; i < k_ * n; ++i)
        sp[i] = static_cast<int8_t>(std::clamp(sw.centered[i], -64, 64));
    } else {
      for (int64_t i = 0; i < k_ * n; ++i)
        for (int p = 0; p < parts_; ++p) sp[p * k_ * n + i] = sw.Part(i, p);
    }

    copy_a_ = parts_ > 1 || ai.dtype == DataType::kInt8;
    const memory::data_type adt =
        copy_a_ || ai.dtype == DataType::kUInt8 ? memory::data_type::u8 : memory::data_type::s8;
    memory::desc a_desc({m_, parts_ * k_}, adt, memory::format_tag::ab);
    memory::desc b_any({parts_ * k_, n}, memory::data_type::s8, memory::format_tag::any);
    memory::desc y_desc({m_, n}, memory::data_type::s32, memory::format_tag::ab);
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
    zero_desc_ = memory::desc({1}, memory::data_type::s32, memory::format_tag::x);
    pd_ = dnnl::matmul::primitive_desc(dnnl::matmul::desc(a_desc, b_any, y_desc), attr, Engine());
    prim_ = dnnl::matmul(pd_);
    descs_ = PdDescs(pd_);

    // The packed weights depend on B, its zero point and the split: all in the cache's key.
    const std::string variant = SplitWeights::Variant(
        sparse_cols_.empty() ? "matmulinteger" : "matmulinteger-clamped", parts_, bz);
    const memory::desc plain({parts_ * k_, n}, memory::data_type::s8, memory::format_tag::ab);
    weights_ = PackWeights(plain, b, pd_.weights_desc(), &packed_b_, ctx->weights, &split, variant);
  }

  ir::Node node_;
  int64_t m_ = 0, k_ = 0, n_ = 0;
  int parts_ = 1;
  // The sparse rest, by column: columns with entries, where each starts (one more, the end),
  // then the entries' rows and values.
  std::vector<int32_t> sparse_cols_, sparse_starts_, sparse_k_, sparse_values_;
  bool copy_a_ = false;
  memory::desc zero_desc_;
  dnnl::matmul::primitive_desc pd_;
  PdDescs descs_;
  dnnl::matmul prim_;
  Tensor packed_b_;
  memory weights_;
};

using ops::quant::Is8Bit;

KernelSupport SupportsMatMulInteger(const ir::Node& node, const ir::Op&,
                                    const std::vector<TensorInfo>& in) {
  if (!Is8Bit(in[0].dtype) || !Is8Bit(in[1].dtype)) return {false, "needs uint8/int8 A and B"};
  if (in[0].shape.size() < 2 || NumElements(in[0].shape) == 0)
    return {false, "needs A of rank >= 2, not empty"};
  if (in[1].shape.size() != 2 || NumElements(in[1].shape) == 0) return {false, "B must be 2-D"};
  if (node.HasInput(2) && NumElements(in[2].shape) != 1)
    return {false, "a_zero_point per row of A"};
  return {true, ""};
}

// B and b_zero_point must be constant.
KILN_REGISTER_KERNEL(runtime::KernelDef{"cpu.matmulinteger.onednn",
                                        "MatMulInteger",
                                        "",
                                        10,
                                        ir::kMaxOpset,
                                        Backend::kCpu,
                                        10,
                                        SupportsMatMulInteger,
                                        CreateKernel<MatMulIntegerOneDnn>,
                                        {1, 3}});

}  // namespace
}  // namespace kiln::backends::cpu
