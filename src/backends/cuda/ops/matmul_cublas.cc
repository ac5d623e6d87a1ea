// cuda.{matmul,gemm,fusedmatmul}.cublas: float32 matrix products through cuBLAS (plain FP32, no
// TF32: cuBLAS's default math mode). Row-major C[M,N] = A[M,K] B[K,N] is computed as the
// column-major product C^T = B^T A^T, so no data moves. MatMul: A [..., M, K] and B [..., K, N]
// with equal batch dims, or one side 2-D (broadcast over the other's batch) through
// cublasSgemmStridedBatched; other batch broadcasts decline. Gemm: transA/transB, alpha, and beta*C
// with C of [N] or [1,N] (a row bias, beta folded in by the epilogue when beta == 1) or [M,N]
// (copied into Y, then accumulated with beta). kiln.FusedMatMul: A [..., M, K] times B [K, N] plus
// bias [N] and the activation, in the row-bias epilogue (kernels/epilogue.cu).
// --precision fp16: A (and a non-constant B) converted to float16 in scratch, a constant B once at
// Prepare; cublasGemmEx / cublasGemmStridedBatchedEx multiply in float16 on Tensor Cores with
// float32 accumulation (CUBLAS_COMPUTE_32F) and write float32 Y. When the session keeps
// activations float16 between kernels (runtime/half_values.h), A, B and Y are float16 themselves
// (a constant B converted once at load) and nothing is converted at run time; Gemm's C and the
// bias stay float32.
#include "backends/cuda/ops/cuda_kernel.h"
#include "ops/nn/gemm.h"

namespace kiln::cuda {
namespace {

using runtime::KernelSupport;
using runtime::TensorInfo;

struct Product {
  int64_t batch = 1, m = 0, n = 0, k = 0;
  int64_t stride_a = 0, stride_b = 0;  // 0: broadcast over the batch
  bool trans_a = false, trans_b = false;
};

// MatMul / FusedMatMul shapes; "" when supported, else the reason.
std::string MatMulProduct(const Shape& a, const Shape& b, Product* p) {
  if (a.size() < 2 || b.size() < 2) return "needs A and B of rank >= 2";
  p->m = a[a.size() - 2];
  p->k = a.back();
  p->n = b.back();
  if (b[b.size() - 2] != p->k) return "inner dimensions differ";
  int64_t batch_a = 1, batch_b = 1;
  for (size_t d = 0; d + 2 < a.size(); ++d) batch_a *= a[d];
  for (size_t d = 0; d + 2 < b.size(); ++d) batch_b *= b[d];
  if (b.size() == 2) {  // fold A's batch into M: one plain GEMM
    p->m *= batch_a;
    return "";
  }
  const bool same =
      a.size() == b.size() && std::equal(a.begin(), a.end() - 2, b.begin(), b.end() - 2);
  if (!same && a.size() != 2) return "batch dims broadcast between A and B";
  p->batch = batch_b;
  p->stride_a = a.size() == 2 ? 0 : p->m * p->k;
  p->stride_b = p->k * p->n;
  return "";
}

class MatMulCublas final : public runtime::Kernel {
 public:
  MatMulCublas(const ir::Node& node, const ir::Op& op)
      : node_(node), a_(runtime::AttrsOf<ops::GemmAttrs>(op)) {}

  Status Prepare(runtime::PrepareContext* ctx) override {
    const Shape& a = ctx->inputs[0].shape;
    const Shape& b = ctx->inputs[1].shape;
    if (node_.op_type == "Gemm") {
      p_.trans_a = a_.trans_a;
      p_.trans_b = a_.trans_b;
      p_.m = p_.trans_a ? a[1] : a[0];
      p_.k = p_.trans_a ? a[0] : a[1];
      p_.n = p_.trans_b ? b[0] : b[1];
      alpha_ = a_.alpha;
      beta_ = a_.beta;
      if (node_.HasInput(2)) {
        const Shape& c = ctx->inputs[2].shape;
        full_c_ = c == Shape{p_.m, p_.n};
        row_bias_ = !full_c_;
      }
    } else {
      std::string why = MatMulProduct(a, b, &p_);
      if (!why.empty()) return Unsupported(why);
      row_bias_ = node_.domain == "kiln" && node_.HasInput(2);
      const ops::Activation& act = a_.act;
      act_ = act.kind;
      act_alpha_ = act.alpha;
      act_beta_ = act.beta;
    }
    half_io_ = ctx->inputs[0].dtype == DataType::kFloat16;
    fp16_ = ctx->precision == Precision::kFp16 || half_io_;
    a_elems_ = static_cast<size_t>(NumElements(a));
    b_elems_ = static_cast<size_t>(NumElements(b));
    if (fp16_ && !half_io_ && ctx->constants[1]) {
      KILN_ASSIGN_OR_RETURN(b_half_, UploadHalf(ctx->device, *ctx->constants[1]));
    }
    return OkStatus();
  }

  // Scratch (fp16 with float32 A only): A in float16, then B in float16 when B is not constant.
  size_t ScratchBytes() const override {
    if (!fp16_ || half_io_) return 0;
    return AlignScratch(a_elems_ * 2) + (b_half_ ? 0 : AlignScratch(b_elems_ * 2));
  }

  Status Run(const ir::ComputeContext& ctx) const override {
    cudaStream_t stream = StreamOf(ctx);
    KILN_ASSIGN_OR_RETURN(cublasHandle_t h, CublasHandle(stream));
    float beta = 0.f;
    if (full_c_) {
      if (half_io_) {
        KILN_RETURN_IF_ERROR(CheckLaunch(
            cuda_kernels::LaunchFloatToHalf(ctx.in(2).data<float>(), OutAs<uint16_t>(ctx, 0),
                                            ctx.out(0).numel(), stream),
            "float16 cast", node_));
      } else {
        KILN_CUDA_CHECK(cudaMemcpyAsync(ctx.out(0).raw(), ctx.in(2).raw(), ctx.out(0).bytes(),
                                        cudaMemcpyDeviceToDevice, stream));
      }
      beta = beta_;
    }
    // Column-major view: Y^T[N,M] = op(B)^T[N,K] * op(A)^T[K,M].
    const cublasOperation_t op_b = p_.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_a = p_.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const int m = static_cast<int>(p_.m), n = static_cast<int>(p_.n), k = static_cast<int>(p_.k);
    const int ldb = p_.trans_b ? k : n, lda = p_.trans_a ? m : k;
    const float* a = fp16_ ? nullptr : ctx.in(0).data<float>();
    const float* b = fp16_ ? nullptr : ctx.in(1).data<float>();
    float* y = fp16_ ? nullptr : ctx.out(0).data<float>();
    if (fp16_) {
      KILN_RETURN_IF_ERROR(Fp16Product(ctx, h, op_a, op_b, lda, ldb, beta));
    } else if (p_.batch == 1) {
      KILN_CUBLAS_CHECK(cublasSgemm(h, op_b, op_a, n, m, k, &alpha_, b, ldb, a, lda, &beta, y, n));
    } else {
      KILN_CUBLAS_CHECK(cublasSgemmStridedBatched(h, op_b, op_a, n, m, k, &alpha_, b, ldb,
                                                  p_.stride_b, a, lda, p_.stride_a, &beta, y, n,
                                                  p_.m * p_.n, static_cast<int>(p_.batch)));
    }
    if (!row_bias_ && act_ == cuda_math::Activation::kNone) return OkStatus();
    const float* bias = row_bias_ ? ctx.in(2).data<float>() : nullptr;
    const cudaError_t e = WithStorage(ctx.out(0).dtype(), [&](auto t) {
      using T = decltype(t);
      return cuda_kernels::LaunchRowBiasEpilogue<T>(OutAs<T>(ctx, 0), bias, p_.batch * p_.m, p_.n,
                                                    static_cast<int>(act_), act_alpha_, act_beta_,
                                                    stream);
    });
    return CheckLaunch(e, "row-bias epilogue", node_);
  }

 private:
  Status Fp16Product(const ir::ComputeContext& ctx, cublasHandle_t h, cublasOperation_t op_a,
                     cublasOperation_t op_b, int lda, int ldb, float beta) const {
    cudaStream_t stream = StreamOf(ctx);
    char* scratch = static_cast<char*>(ctx.scratch);
    const void* a = ctx.in(0).raw();
    const void* b = half_io_ ? ctx.in(1).raw() : b_half_.get();
    if (!half_io_) {
      auto* ah = reinterpret_cast<uint16_t*>(scratch);
      KILN_RETURN_IF_ERROR(
          CheckLaunch(cuda_kernels::LaunchFloatToHalf(ctx.in(0).data<float>(), ah,
                                                      static_cast<int64_t>(a_elems_), stream),
                      "float16 cast", node_));
      a = ah;
    }
    if (!half_io_ && !b_half_) {
      auto* bh = reinterpret_cast<uint16_t*>(scratch + AlignScratch(a_elems_ * 2));
      KILN_RETURN_IF_ERROR(
          CheckLaunch(cuda_kernels::LaunchFloatToHalf(ctx.in(1).data<float>(), bh,
                                                      static_cast<int64_t>(b_elems_), stream),
                      "float16 cast", node_));
      b = bh;
    }
    const int m = static_cast<int>(p_.m), n = static_cast<int>(p_.n), k = static_cast<int>(p_.k);
    void* y = ctx.out(0).raw();
    const cudaDataType_t yt = half_io_ ? CUDA_R_16F : CUDA_R_32F;
    if (p_.batch == 1) {
      KILN_CUBLAS_CHECK(cublasGemmEx(h, op_b, op_a, n, m, k, &alpha_, b, CUDA_R_16F, ldb, a,
                                     CUDA_R_16F, lda, &beta, y, yt, n, CUBLAS_COMPUTE_32F,
                                     CUBLAS_GEMM_DEFAULT));
    } else {
      KILN_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
          h, op_b, op_a, n, m, k, &alpha_, b, CUDA_R_16F, ldb, p_.stride_b, a, CUDA_R_16F, lda,
          p_.stride_a, &beta, y, yt, n, p_.m * p_.n, static_cast<int>(p_.batch), CUBLAS_COMPUTE_32F,
          CUBLAS_GEMM_DEFAULT));
    }
    return OkStatus();
  }

  ir::Node node_;
  ops::GemmAttrs a_;
  Product p_;
  bool fp16_ = false;
  bool half_io_ = false;  // A, B and Y are float16 (activations float16 between kernels)
  size_t a_elems_ = 0, b_elems_ = 0;
  std::shared_ptr<void> b_half_;  // prepacked float16 B (fp16, constant B)
  float alpha_ = 1.f, beta_ = 1.f;
  bool full_c_ = false, row_bias_ = false;
  cuda_math::Activation act_ = cuda_math::Activation::kNone;
  float act_alpha_ = 0, act_beta_ = 0;
};

KernelSupport SupportsMatMul(const ir::Node&, const ir::Op&, const std::vector<TensorInfo>& in) {
  if (!FloatOrHalf(in, {0, 1}))
    return {false, "needs float32 tensors (A and B may both be float16), bias float32"};
  Product p;
  std::string why = MatMulProduct(in[0].shape, in[1].shape, &p);
  if (!why.empty()) return {false, why};
  return {true, ""};
}

KernelSupport SupportsGemm(const ir::Node& node, const ir::Op& op,
                           const std::vector<TensorInfo>& in) {
  const ops::GemmAttrs& a = runtime::AttrsOf<ops::GemmAttrs>(op);
  if (!FloatOrHalf(in, {0, 1}))
    return {false, "needs float32 tensors (A and B may both be float16), C float32"};
  if (in[0].shape.size() != 2 || in[1].shape.size() != 2) return {false, "needs 2-D A and B"};
  if (!node.HasInput(2)) return {true, ""};
  const int64_t m = a.trans_a ? in[0].shape[1] : in[0].shape[0];
  const int64_t n = a.trans_b ? in[1].shape[0] : in[1].shape[1];
  const Shape& c = in[2].shape;
  if (c == Shape{m, n}) return {true, ""};
  if ((c == Shape{n} || c == Shape{1, n}) && a.beta == 1.f) return {true, ""};
  return {false,
          "C of shape " + ShapeToString(c) + " (supported: [M,N], or [N] / [1,N] with beta 1)"};
}

KILN_REGISTER_KERNEL(runtime::KernelDef{"cuda.matmul.cublas",
                                        "MatMul",
                                        "",
                                        1,
                                        ir::kMaxOpset,
                                        Backend::kCuda,
                                        10,
                                        SupportsMatMul,
                                        Make<MatMulCublas>,
                                        {},
                                        {0, 1},
                                        {Precision::kFp32, Precision::kFp16}});
KILN_REGISTER_KERNEL(runtime::KernelDef{"cuda.fusedmatmul.cublas",
                                        "FusedMatMul",
                                        "kiln",
                                        1,
                                        1,
                                        Backend::kCuda,
                                        10,
                                        SupportsMatMul,
                                        Make<MatMulCublas>,
                                        {},
                                        {0, 1},
                                        {Precision::kFp32, Precision::kFp16}});
KILN_REGISTER_KERNEL(runtime::KernelDef{"cuda.gemm.cublas",
                                        "Gemm",
                                        "",
                                        1,
                                        ir::kMaxOpset,
                                        Backend::kCuda,
                                        10,
                                        SupportsGemm,
                                        Make<MatMulCublas>,
                                        {},
                                        {0, 1},
                                        {Precision::kFp32, Precision::kFp16}});

}  // namespace
}  // namespace kiln::cuda
