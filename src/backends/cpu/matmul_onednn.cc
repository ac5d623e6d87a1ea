// cpu.{gemm,matmul,fusedmatmul}.onednn on oneDNN's matmul primitive, float32, with the constant
// right-hand side prepacked once in the layout oneDNN chooses. Gemm: Y = alpha*op(A)*op(B) +
// beta*C with C constant and broadcast along rows ([N], [1,N] or scalar) becoming the bias.
// MatMul / kiln.FusedMatMul: A [..., M, K] (plain, leading dims folded into M) times a constant
// 2-D B [K, N], plus FusedMatMul's bias and activation post-op. A MatMul whose B is computed or
// not 2-D runs on cpu.matmul.batched (below); other shapes decline to the reference kernel.
#include <algorithm>
#include <cstring>

#include "backends/cpu/onednn_common.h"
#include "ops/nn/gemm.h"

namespace kiln::backends::cpu {
namespace {

using dnnl::memory;
using runtime::KernelSupport;
using runtime::TensorInfo;

// A 2-D descriptor in plain row- or column-major order (no blocking, no padding).
bool IsPlain2D(const memory::desc& d) {
  const auto& b = d.data.format_desc.blocking;
  return d.data.ndims == 2 && d.data.format_kind == dnnl_blocked && b.inner_nblks == 0 &&
         ((b.strides[1] == 1 && b.strides[0] == d.data.dims[1]) ||
          (b.strides[0] == 1 && b.strides[1] == d.data.dims[0]));
}

class MatMulOneDnn final : public runtime::Kernel {
 public:
  MatMulOneDnn(const ir::Node& node, const ir::Op& op)
      : node_(node), a_(runtime::AttrsOf<ops::GemmAttrs>(op)) {}

  Status Prepare(runtime::PrepareContext* ctx) override {
    return Guard(node_, [&] { DoPrepare(ctx); });
  }

  // Scratch: A rounded to bf16 (bf16 precision only), then oneDNN's scratchpad.
  size_t ScratchBytes() const override { return ATmpBytes() + pd_.scratchpad_desc().get_size(); }

  Status Run(const ir::ComputeContext& ctx) const override {
    return Guard(node_, [&] {
      char* scratch = static_cast<char*>(ctx.scratch);
      RunMemory a(a_reorder_ ? a_compute_ : a_desc_,
                  InputAs(a_reorder_, a_desc_, a_compute_, ctx.in(0).raw(), scratch));
      RunMemory y(descs_.dst, ctx.out(0).raw()), sp(descs_.scratchpad, scratch + ATmpBytes());
      Execute(prim_, {{DNNL_ARG_SRC, a.get()},
                      {DNNL_ARG_WEIGHTS, weights_.get(true)},
                      {DNNL_ARG_BIAS, bias_.get(true)},
                      {DNNL_ARG_ATTR_OUTPUT_SCALES, scale_.get(true)},
                      {DNNL_ARG_DST, y.get()},
                      {DNNL_ARG_SCRATCHPAD, sp.get()}});
      ThreadStream().wait();
    });
  }

 private:
  size_t ATmpBytes() const { return a_reorder_ ? (a_compute_.get_size() + 63) / 64 * 64 : 0; }

  void DoPrepare(runtime::PrepareContext* ctx) {
    const bool gemm = node_.op_type == "Gemm";
    const Shape& as = ctx->inputs[0].shape;
    const Shape& bs = ctx->inputs[1].shape;
    const bool ta = gemm && a_.trans_a;
    const bool tb = gemm && a_.trans_b;
    const int64_t k = ta ? as[as.size() - 2] : as.back();
    const int64_t m = NumElements(as) / k;
    const int64_t n = tb ? bs[0] : bs[1];
    a_desc_ = ta ? memory::desc({m, k}, memory::data_type::f32, memory::dims{1, m})
                 : memory::desc({m, k}, memory::data_type::f32, memory::dims{k, 1});
    memory::desc b_plain = tb ? memory::desc({k, n}, memory::data_type::f32, memory::dims{1, k})
                              : memory::desc({k, n}, memory::data_type::f32, memory::dims{n, 1});
    // bf16 precision: A is rounded to bf16 into scratch at run time and B is packed as bf16, so
    // AMX/AVX512-BF16 do the products; the output (and bias) stay float32.
    const memory::data_type dt = ComputeType(ctx->precision);
    if (dt == memory::data_type::bf16) {
      a_compute_ = memory::desc({m, k}, dt, memory::format_tag::ab);
      a_reorder_ = MakeReorder(a_desc_, a_compute_);
    } else {
      a_compute_ = a_desc_;
    }
    memory::desc b_any({k, n}, dt, memory::format_tag::any);
    memory::desc y_desc({m, n}, memory::data_type::f32, memory::dims{n, 1});

    // Bias: Gemm's beta*C or FusedMatMul's third input, as [1, N].
    // oneDNN applies output scales after the bias (alpha * (A*B + bias)), so the bias is stored
    // as beta * C / alpha (Supports declines alpha == 0).
    const Tensor* c = node_.HasInput(2) ? ctx->constants[2] : nullptr;
    const float beta = gemm ? a_.beta : 1.f;
    const float alpha = gemm ? a_.alpha : 1.f;
    if (c != nullptr && beta != 0.f) {
      bias_copy_ = Tensor::Empty(DataType::kFloat, {1, n});
      const float* src = c->data<float>();
      for (int64_t j = 0; j < n; ++j)
        bias_copy_.data<float>()[j] = beta / alpha * (c->numel() == 1 ? src[0] : src[j]);
    }
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    if (alpha != 1.f) {
      attr.set_output_scales(0, {DNNL_RUNTIME_F32_VAL});
      scale_value_ = Tensor::FromVector<float>({alpha}, {1});
      scale_ = memory({{1}, memory::data_type::f32, memory::format_tag::x}, Engine(),
                      scale_value_.raw());
    }
    dnnl::post_ops ops;
    AppendActivation(a_.act, &ops);
    attr.set_post_ops(ops);
    memory::desc bias_desc({1, n}, memory::data_type::f32, memory::format_tag::ab);
    auto d = bias_copy_.defined() ? dnnl::matmul::desc(a_compute_, b_any, bias_desc, y_desc)
                                  : dnnl::matmul::desc(a_compute_, b_any, y_desc);
    pd_ = dnnl::matmul::primitive_desc(d, attr, Engine());
    // Where oneDNN keeps float32 B plain (its gemm-based matmul: CPUs without AVX512), rows of B
    // a multiple of 256 bytes apart fall on few cache sets, and products with up to a few
    // hundred rows of A ran up to 2x slower (ViT-B/16's 197x768 x 768x3072: 11-12 ms against
    // 6 ms, AMD EPYC AVX2, 2 threads). B is then packed with its rows 64 bytes further apart.
    if (dt == memory::data_type::f32 && n % 64 == 0 && IsPlain2D(pd_.weights_desc())) {
      memory::desc b_padded({k, n}, dt, memory::dims{n + 16, 1});
      auto dp = bias_copy_.defined() ? dnnl::matmul::desc(a_compute_, b_padded, bias_desc, y_desc)
                                     : dnnl::matmul::desc(a_compute_, b_padded, y_desc);
      pd_ = dnnl::matmul::primitive_desc(dp, attr, Engine());
    }
    prim_ = dnnl::matmul(pd_);
    descs_ = PdDescs(pd_);
    weights_ =
        PackWeights(b_plain, *ctx->constants[1], pd_.weights_desc(), &packed_b_, ctx->weights);
    if (bias_copy_.defined()) bias_ = memory(bias_desc, Engine(), bias_copy_.raw());
  }

  ir::Node node_;
  ops::GemmAttrs a_;
  memory::desc a_desc_, a_compute_;
  dnnl::reorder a_reorder_;
  dnnl::matmul::primitive_desc pd_;
  PdDescs descs_;
  dnnl::matmul prim_;
  Tensor packed_b_, bias_copy_, scale_value_;
  memory weights_, bias_, scale_;
};

// cpu.matmul.batched: MatMul of two computed tensors (attention's Q x K^T and P x V), A
// [..., M, K] times B [..., K, N], both plain, batch dims broadcast as numpy does (oneDNN's matmul
// takes a batch dim of 1 on either side as broadcast). Float32 in every precision.
class BatchedMatMulOneDnn final : public runtime::Kernel {
 public:
  explicit BatchedMatMulOneDnn(const ir::Node& node) : node_(node) {}

  Status Prepare(runtime::PrepareContext* ctx) override {
    return Guard(node_, [&] {
      Shape as = ctx->inputs[0].shape, bs = ctx->inputs[1].shape;
      const size_t rank = std::max(as.size(), bs.size());
      as.insert(as.begin(), rank - as.size(), 1);
      bs.insert(bs.begin(), rank - bs.size(), 1);
      Shape ys = as;
      for (size_t i = 0; i + 2 < rank; ++i) ys[i] = std::max(as[i], bs[i]);
      ys[rank - 1] = bs[rank - 1];
      a_desc_ = PlainDesc(as);
      b_desc_ = PlainDesc(bs);
      y_desc_ = PlainDesc(ys);
      dnnl::primitive_attr attr;
      attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
      pd_ = dnnl::matmul::primitive_desc(dnnl::matmul::desc(a_desc_, b_desc_, y_desc_), attr,
                                         Engine());
      prim_ = dnnl::matmul(pd_);
      scratchpad_ = pd_.scratchpad_desc();
    });
  }

  size_t ScratchBytes() const override { return scratchpad_.get_size(); }

  Status Run(const ir::ComputeContext& ctx) const override {
    return Guard(node_, [&] {
      RunMemory a(a_desc_, ctx.in(0).raw()), b(b_desc_, ctx.in(1).raw());
      RunMemory y(y_desc_, ctx.out(0).raw()), sp(scratchpad_, ctx.scratch);
      Execute(prim_, {{DNNL_ARG_SRC, a.get()},
                      {DNNL_ARG_WEIGHTS, b.get()},
                      {DNNL_ARG_DST, y.get()},
                      {DNNL_ARG_SCRATCHPAD, sp.get()}});
      ThreadStream().wait();
    });
  }

 private:
  ir::Node node_;
  memory::desc a_desc_, b_desc_, y_desc_, scratchpad_;
  dnnl::matmul::primitive_desc pd_;
  dnnl::matmul prim_;
};

KernelSupport SupportsBatchedMatMul(const ir::Node&, const ir::Op&,
                                    const std::vector<TensorInfo>& in) {
  if (!AllFloat(in, {0, 1})) return {false, "needs float32 A and B"};
  const Shape& as = in[0].shape;
  const Shape& bs = in[1].shape;
  if (as.size() < 2 || bs.size() < 2) return {false, "A and B must have rank >= 2"};
  if (std::max(as.size(), bs.size()) > DNNL_MAX_NDIMS) return {false, "rank above 12"};
  for (const Shape* s : {&as, &bs})
    for (int64_t d : *s)
      if (d <= 0) return {false, "empty input"};
  for (size_t i = 3; i <= std::min(as.size(), bs.size()); ++i) {
    const int64_t x = as[as.size() - i], y = bs[bs.size() - i];
    if (x != y && x != 1 && y != 1) return {false, "batch dims do not broadcast"};
  }
  return {true, ""};
}

KernelSupport SupportsMatMul(const ir::Node& node, const ir::Op& op,
                             const std::vector<TensorInfo>& in) {
  const ops::GemmAttrs& a = runtime::AttrsOf<ops::GemmAttrs>(op);
  if (!AllFloat(in, {0, 1})) return {false, "needs float32 A and B"};
  if (in[1].shape.size() != 2) return {false, "B must be 2-D"};
  const Shape& as = in[0].shape;
  // oneDNN's matmul divides by these sizes when it plans (SIGFPE on an [0,4] A: found by
  // kiln_session_fuzz); empty products are the reference kernel's.
  for (const Shape* s : {&as, &in[1].shape})
    for (int64_t d : *s)
      if (d <= 0) return {false, "empty input"};
  if (node.op_type == "Gemm") {
    if (as.size() != 2) return {false, "A must be 2-D"};
    if (a.alpha == 0.f) return {false, "alpha == 0"};
    if (node.HasInput(2)) {
      const Shape& cs = in[2].shape;
      const int64_t n = a.trans_b ? in[1].shape[0] : in[1].shape[1];
      bool row = NumElements(cs) == 1 || (cs.size() == 1 && cs[0] == n) ||
                 (cs.size() == 2 && cs[0] == 1 && cs[1] == n);
      if (!row) return {false, "C must broadcast along rows ([N], [1,N] or scalar)"};
    }
  } else if (as.size() < 2) {
    return {false, "A must have rank >= 2"};
  }
  if (node.domain == "kiln") {
    dnnl::post_ops probe;
    if (!AppendActivation(a.act, &probe)) return {false, "activation has no oneDNN post-op"};
  }
  return {true, ""};
}

KILN_REGISTER_KERNEL(runtime::KernelDef{"cpu.gemm.onednn",
                                        "Gemm",
                                        "",
                                        7,
                                        ir::kMaxOpset,
                                        Backend::kCpu,
                                        10,
                                        SupportsMatMul,
                                        CreateKernel<MatMulOneDnn>,
                                        {1, 2},
                                        {},
                                        {Precision::kFp32, Precision::kBf16}});
KILN_REGISTER_KERNEL(runtime::KernelDef{"cpu.matmul.onednn",
                                        "MatMul",
                                        "",
                                        1,
                                        ir::kMaxOpset,
                                        Backend::kCpu,
                                        10,
                                        SupportsMatMul,
                                        CreateKernel<MatMulOneDnn>,
                                        {1},
                                        {},
                                        {Precision::kFp32, Precision::kBf16}});
// Below cpu.matmul.onednn, which prepacks a constant 2-D B.
KILN_REGISTER_KERNEL(runtime::KernelDef{"cpu.matmul.batched",
                                        "MatMul",
                                        "",
                                        1,
                                        ir::kMaxOpset,
                                        Backend::kCpu,
                                        9,
                                        SupportsBatchedMatMul,
                                        CreateKernel<BatchedMatMulOneDnn>,
                                        {}});
KILN_REGISTER_KERNEL(runtime::KernelDef{"cpu.fusedmatmul.onednn",
                                        "FusedMatMul",
                                        "kiln",
                                        1,
                                        1,
                                        Backend::kCpu,
                                        10,
                                        SupportsMatMul,
                                        CreateKernel<MatMulOneDnn>,
                                        {1, 2},
                                        {},
                                        {Precision::kFp32, Precision::kBf16}});

}  // namespace
}  // namespace kiln::backends::cpu
