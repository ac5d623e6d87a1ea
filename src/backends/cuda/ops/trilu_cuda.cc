// cuda.trilu.kernel: Trilu (ops/tensor/trilu.h) on the device (kernels/trilu.cu), any dtype of 1,
// 2, 4 or 8 bytes, float16 activations included. k must be a constant (or absent): it is read on
// the host once, in Prepare.
#include "backends/cuda/ops/cuda_kernel.h"
#include "ops/tensor/trilu.h"

namespace kiln::cuda_kernels {
// Defined in kernels/trilu.cu.
cudaError_t LaunchTrilu(const void* src, void* dst, int64_t n, int64_t rows, int64_t cols,
                        int64_t k, bool upper, int64_t elem_bytes, cudaStream_t stream);
}  // namespace kiln::cuda_kernels

namespace kiln::cuda {
namespace {

class TriluCuda final : public runtime::Kernel {
 public:
  TriluCuda(const ir::Node& node, const ir::Op& op)
      : node_(node), a_(runtime::AttrsOf<ops::TriluAttrs>(op)) {}
  Status Prepare(runtime::PrepareContext* ctx) override {
    const Shape& s = ctx->inputs[0].shape;
    rows_ = s[s.size() - 2];
    cols_ = s.back();
    n_ = NumElements(s);
    bytes_ = static_cast<int64_t>(DataTypeSize(ctx->inputs[0].dtype));
    k_ = ctx->constants.size() > 1 && ctx->constants[1] ? ctx->constants[1]->data<int64_t>()[0] : 0;
    return OkStatus();
  }
  Status Run(const ir::ComputeContext& ctx) const override {
    return CheckLaunch(cuda_kernels::LaunchTrilu(ctx.in(0).raw(), ctx.out(0).raw(), n_, rows_,
                                                 cols_, k_, a_.upper, bytes_, StreamOf(ctx)),
                       "trilu", node_);
  }

 private:
  ir::Node node_;
  ops::TriluAttrs a_;
  int64_t rows_ = 0, cols_ = 0, n_ = 0, k_ = 0, bytes_ = 0;
};

runtime::KernelSupport SupportsTrilu(const ir::Node&, const ir::Op& op,
                                     const std::vector<runtime::TensorInfo>& in) {
  if (op.attrs<ops::TriluAttrs>() == nullptr) return {false, "no Trilu attributes"};
  const size_t b = DataTypeSize(in[0].dtype);
  if (b != 1 && b != 2 && b != 4 && b != 8) return {false, "elements of 1, 2, 4 or 8 bytes only"};
  return {true, ""};
}

KILN_REGISTER_KERNEL(runtime::KernelDef{"cuda.trilu.kernel",
                                        "Trilu",
                                        "",
                                        14,
                                        ir::kMaxOpset,
                                        Backend::kCuda,
                                        10,
                                        SupportsTrilu,
                                        Make<TriluCuda>,
                                        {1},
                                        {0}});

}  // namespace
}  // namespace kiln::cuda
