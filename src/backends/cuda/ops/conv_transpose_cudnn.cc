// cuda.convtranspose.cudnn: ConvTranspose on 2-D NCHW float32 through cuDNN's backward-data
// convolution (the transposed convolution is the gradient of a forward convolution with respect
// to its input): X [N, C, H, W] plays dy, W [C, M/group, kh, kw] the filter, Y dx. Output size
// s*(I-1) + output_padding + (k-1)*d + 1 - pad_begin - pad_end, checked against kiln's shape;
// output_padding < stride is absorbed by the forward convolution's floor, so any valid value
// works. The algorithm is chosen once per shape by cuDNN's heuristics
// (cudnnGetConvolutionBackwardDataAlgorithm_v7); FP32 FMA math; workspace from the arena; the bias
// in the conv epilogue kernel. Declines asymmetric pads, auto_pad SAME_* and output_shape (their
// pads depend on the output size; the reference kernel handles them). fp16 sessions run it in
// float32. With SessionOptions::tune the algorithm comes from cuDNN's exhaustive search
// (cudnnFindConvolutionBackwardDataAlgorithm) or the plan cache ("algo N").
#include "backends/cuda/ops/cudnn_conv.h"
#include "ops/nn/conv_transpose.h"
#include "ops/nn/spatial.h"

namespace kiln::cuda {
namespace {

using runtime::KernelSupport;
using runtime::TensorInfo;

class ConvTransposeCudnn final : public runtime::Kernel {
 public:
  ConvTransposeCudnn(const ir::Node& node, const ir::Op& op)
      : node_(node), a_(runtime::AttrsOf<ops::ConvTransposeAttrs>(op)) {}

  Status Prepare(runtime::PrepareContext* ctx) override {
    Status s = DoPrepare(ctx);
    return s.ok() ? s : s.AddContext("while preparing cuDNN transposed convolution");
  }
  size_t ScratchBytes() const override { return workspace_bytes_; }
  std::string variant() const override { return AlgoVariant(tuned_, static_cast<int>(algo_)); }

  Status Run(const ir::ComputeContext& ctx) const override {
    cudaStream_t stream = StreamOf(ctx);
    KILN_ASSIGN_OR_RETURN(cudnnHandle_t h, CudnnHandle(stream));
    const float one = 1.f, zero = 0.f;
    float* y = ctx.out(0).data<float>();
    // Backward data of the forward convolution Y -> X: X is its dy, Y its dx.
    KILN_CUDNN_CHECK(cudnnConvolutionBackwardData(h, &one, d_.w, ctx.in(1).raw(), d_.y,
                                                  ctx.in(0).raw(), d_.conv, algo_, ctx.scratch,
                                                  workspace_bytes_, &zero, d_.x, y));
    if (!ctx.has(2)) return OkStatus();
    return CheckLaunch(cuda_kernels::LaunchConvEpilogue<float>(
                           y, ctx.in(2).data<float>(), nullptr, batch_, channels_, hw_,
                           static_cast<int>(cuda_math::Activation::kNone), 0.f, 0.f, stream),
                       "bias epilogue", node_);
  }

 private:
  Status DoPrepare(runtime::PrepareContext* ctx) {
    const Shape& x = ctx->inputs[0].shape;
    const Shape& w = ctx->inputs[1].shape;
    const Shape& y = ctx->outputs[0].shape;
    // The attributes as written (ops::ConvTransposeAttrs); empty means the defaults.
    const int group = static_cast<int>(a_.group);
    auto or_default = [](const std::vector<int64_t>& v, std::vector<int64_t> d) {
      return v.empty() ? d : v;
    };
    std::vector<int64_t> strides = or_default(a_.window.strides, {1, 1});
    std::vector<int64_t> dil = or_default(a_.window.dilations, {1, 1});
    std::vector<int64_t> pads = or_default(a_.window.pads, {0, 0, 0, 0});
    std::vector<int64_t> outpad = or_default(a_.output_padding, {0, 0});
    if (strides.size() != 2 || dil.size() != 2 || pads.size() != 4 || outpad.size() != 2)
      return Unsupported("needs 2-D strides, dilations, pads and output_padding");
    for (int d = 0; d < 2; ++d) {
      const int64_t want = strides[d] * (x[2 + d] - 1) + outpad[d] + (w[2 + d] - 1) * dil[d] + 1 -
                           pads[d] - pads[2 + d];
      if (want != y[2 + d])
        return Internal("output size " + std::to_string(want) + " differs from kiln's " +
                        ShapeToString(y));
    }
    // The forward convolution Y -> X has filter [C (its output channels), M/group, kh, kw]:
    // exactly W.
    KILN_RETURN_IF_ERROR(d_.Create(y, w, x, pads.data(), strides.data(), dil.data(), group,
                                   CUDNN_DATA_FLOAT, CUDNN_FMA_MATH));
    KILN_ASSIGN_OR_RETURN(cudnnHandle_t handle, CudnnHandle(nullptr));
    KILN_RETURN_IF_ERROR(ChooseCudnnAlgo<cudnnConvolutionBwdDataAlgoPerf_t>(
        *ctx,
        [&](int n, int* r, cudnnConvolutionBwdDataAlgoPerf_t* p) {
          return cudnnFindConvolutionBackwardDataAlgorithm(handle, d_.w, d_.y, d_.conv, d_.x, n, r,
                                                           p);
        },
        [&](int n, int* r, cudnnConvolutionBwdDataAlgoPerf_t* p) {
          return cudnnGetConvolutionBackwardDataAlgorithm_v7(handle, d_.w, d_.y, d_.conv, d_.x, n,
                                                             r, p);
        },
        [&](cudnnConvolutionBwdDataAlgo_t a, size_t* b) {
          return cudnnGetConvolutionBackwardDataWorkspaceSize(handle, d_.w, d_.y, d_.conv, d_.x, a,
                                                              b);
        },
        &algo_, &workspace_bytes_, &tuned_));
    batch_ = y[0];
    channels_ = y[1];
    hw_ = y[2] * y[3];
    return OkStatus();
  }

  ir::Node node_;
  ops::ConvTransposeAttrs a_;
  CudnnConvDescriptors d_;
  cudnnConvolutionBwdDataAlgo_t algo_ = CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
  size_t workspace_bytes_ = 0;
  bool tuned_ = false;
  int64_t batch_ = 0, channels_ = 0, hw_ = 0;
};

KernelSupport SupportsConvTranspose(const ir::Node&, const ir::Op& op,
                                    const std::vector<TensorInfo>& in) {
  const ops::ConvTransposeAttrs& a = runtime::AttrsOf<ops::ConvTransposeAttrs>(op);
  if (!AllFloat(in)) return {false, "needs float32 tensors"};
  if (in[0].shape.size() != 4) return {false, "needs a 2-D transposed convolution (NCHW)"};
  if (!a.output_shape.empty()) return {false, "output_shape given (pads follow from it)"};
  if (a.window.auto_pad == ops::nn::AutoPad::kSameUpper ||
      a.window.auto_pad == ops::nn::AutoPad::kSameLower)
    return {false, "auto_pad SAME_UPPER / SAME_LOWER"};
  const std::vector<int64_t>& pads = a.window.pads;
  if (pads.size() == 4 && (pads[0] != pads[2] || pads[1] != pads[3]))
    return {false, "asymmetric pads " + ops::nn::JoinInts(pads)};
  return {true, ""};
}

KILN_REGISTER_KERNEL(runtime::KernelDef{"cuda.convtranspose.cudnn",
                                        "ConvTranspose",
                                        "",
                                        1,
                                        ir::kMaxOpset,
                                        Backend::kCuda,
                                        10,
                                        SupportsConvTranspose,
                                        Make<ConvTransposeCudnn>,
                                        {}});

}  // namespace
}  // namespace kiln::cuda
