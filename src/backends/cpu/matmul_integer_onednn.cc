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
// An int8 A goes in as uint8 (v + 128, zero point + 128: exact; oneDNN 2.6's int8 source with a
// zero point is a reference gemm).
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "backends/cpu/onednn_common.h"
#include "ops/quant/quant_common.h"

namespace kiln::backends::cpu {
namespace {

using dnnl::memory;
using runtime::KernelSupport;
using runtime::TensorInfo;

class MatMulIntegerOneDnn final : public runtime::Kernel {
 public:
  explicit MatMulIntegerOneDnn(const ir::Node& node) : node_(node) {}

  Status Prepare(runtime::PrepareContext* ctx) override {
    return Guard(node_, [&] { DoPrepare(ctx); });
  }

  // Scratch: A as uint8, repeated `parts_` times along K (when it is copied), then oneDNN's.
  size_t ScratchBytes() const override { return ABytes() + descs_.scratchpad.get_size(); }

  std::string variant() const override {
    return parts_ == 1 ? "" : std::to_string(parts_) + " weight parts";
  }

  Status Run(const ir::ComputeContext& ctx) const override {
    return Guard(node_, [&] {
      char* scratch = static_cast<char*>(ctx.scratch);
      const Tensor& a = ctx.in(0);
      int32_t zero = node_.HasInput(2) ? ops::quant::ReadQuant(ctx.in(2), 0) : 0;
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
          sp(descs_.scratchpad, scratch + ABytes());
      RunMemory zm(zero_desc_, &zero);
      Execute(prim_, {{DNNL_ARG_SRC, am.get()},
                      {DNNL_ARG_WEIGHTS, weights_.get()},
                      {DNNL_ARG_DST, y.get()},
                      {DNNL_ARG_SCRATCHPAD, sp.get()},
                      {DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, zm.get()}});
      ThreadStream().wait();
    });
  }

 private:
  size_t ABytes() const {
    return copy_a_ ? static_cast<size_t>((m_ * k_ * parts_ + 63) / 64 * 64) : 0;
  }

  void DoPrepare(runtime::PrepareContext* ctx) {
    const TensorInfo& ai = ctx->inputs[0];
    const Tensor& b = *ctx->constants[1];
    k_ = b.shape()[0];
    const int64_t n = b.shape()[1];
    m_ = NumElements(ai.shape) / k_;

    // B - b_zero_point (per tensor or per column), split into parts (onednn_common.h).
    const Tensor* bz = node_.HasInput(3) ? ctx->constants[3] : nullptr;
    const SplitWeights sw(
        b, bz, [n](int64_t i) { return i % n; }, Int8Vnni() ? 127 : 64);
    parts_ = sw.parts;
    Tensor split = Tensor::Empty(DataType::kInt8, {parts_ * k_, n});
    int8_t* sp = split.data<int8_t>();
    for (int64_t i = 0; i < k_ * n; ++i)
      for (int p = 0; p < parts_; ++p) sp[p * k_ * n + i] = sw.Part(i, p);

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
    const std::string variant = SplitWeights::Variant("matmulinteger", parts_, bz);
    const memory::desc plain({parts_ * k_, n}, memory::data_type::s8, memory::format_tag::ab);
    weights_ = PackWeights(plain, b, pd_.weights_desc(), &packed_b_, ctx->weights, &split, variant);
  }

  ir::Node node_;
  int64_t m_ = 0, k_ = 0;
  int parts_ = 1;
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
                                        "cpu",
                                        10,
                                        SupportsMatMulInteger,
                                        CreateKernel<MatMulIntegerOneDnn>,
                                        {1, 3}});

}  // namespace
}  // namespace kiln::backends::cpu
