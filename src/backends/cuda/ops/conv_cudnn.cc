// cuda.conv.cudnn: Conv and kiln.FusedConv (Y = act(Conv(X, W) + B + Z)) for 2-D NCHW float32
// through cuDNN's convolution forward, with grouped and depthwise convolutions as cuDNN groups.
// Prepare builds the descriptors for the concrete shapes, checks cuDNN's output size against
// kiln's, and picks the algorithm once with cuDNN's heuristics
// (cudnnGetConvolutionForwardAlgorithm_v7, first candidate that fits in 256 MiB of workspace); the
// workspace comes from the arena's scratch. Math is plain FP32 FMA (CUDNN_FMA_MATH: no TF32), so
// results match the CPU within fp32 summation-order differences. Bias, residual and activation run
// after the convolution in one epilogue kernel (kernels/epilogue.cu). Asymmetric padding declines
// (cuDNN's legacy descriptor is symmetric).
// --precision fp16: cuDNN convolves float16 on Tensor Cores with float32 accumulation, the weights
// converted once at Prepare. X, Z and Y are float16 themselves when the session keeps
// activations float16 between kernels (runtime/half_values.h); otherwise X is converted into
// scratch and Y converted back to float32.
// With SessionOptions::tune the algorithm comes from cuDNN's exhaustive search instead
// (cudnnFindConvolutionForwardAlgorithm: every algorithm timed on the device), or from the plan
// cache's earlier search ("algo N"); the kernel name then shows "[algo N]".
#include "backends/cuda/ops/cudnn_conv.h"
#include "ops/nn/conv.h"
#include "ops/nn/spatial.h"

namespace kiln::cuda {
namespace {

using runtime::KernelSupport;
using runtime::TensorInfo;

class ConvCudnn final : public runtime::Kernel {
 public:
  ConvCudnn(const ir::Node& node, const ir::Op& op)
      : node_(node), a_(runtime::AttrsOf<ops::ConvAttrs>(op)) {}

  Status Prepare(runtime::PrepareContext* ctx) override {
    Status s = DoPrepare(ctx);
    return s.ok() ? s : s.AddContext("while preparing cuDNN convolution");
  }
  // Scratch: [X half | Y half (both only for float32 X) | W half (non-constant W only) | cuDNN
  // workspace] in fp16, else the workspace alone.
  size_t ScratchBytes() const override { return half_bytes_ + workspace_bytes_; }
  std::string variant() const override { return AlgoVariant(tuned_, static_cast<int>(algo_)); }
  // Not in place: the convolution writes Y before the epilogue reads the residual Z.
  Status Run(const ir::ComputeContext& ctx) const override {
    cudaStream_t stream = StreamOf(ctx);
    KILN_ASSIGN_OR_RETURN(cudnnHandle_t h, CudnnHandle(stream));
    const float one = 1.f, zero = 0.f;
    void* y = ctx.out(0).raw();
    const void* x = ctx.in(0).raw();
    const void* w = ctx.in(1).raw();
    char* scratch = static_cast<char*>(ctx.scratch);
    uint16_t* y_half = nullptr;  // cuDNN's float16 output when Y is float32
    if (fp16_ && !half_io_) {
      auto* x_half = reinterpret_cast<uint16_t*>(scratch);
      y_half = reinterpret_cast<uint16_t*>(scratch + AlignScratch(x_elems_ * 2));
      KILN_RETURN_IF_ERROR(
          CheckLaunch(cuda_kernels::LaunchFloatToHalf(ctx.in(0).data<float>(), x_half,
                                                      static_cast<int64_t>(x_elems_), stream),
                      "float16 cast", node_));
      x = x_half;
    }
    if (fp16_) {
      if (w_half_) {
        w = w_half_.get();
      } else {
        auto* wh = reinterpret_cast<uint16_t*>(scratch + w_half_offset_);
        KILN_RETURN_IF_ERROR(CheckLaunch(
            cuda_kernels::LaunchFloatToHalf(ctx.in(1).data<float>(), wh, ctx.in(1).numel(), stream),
            "float16 cast", node_));
        w = wh;
      }
    }
    KILN_CUDNN_CHECK(cudnnConvolutionForward(h, &one, d_.x, x, d_.w, w, d_.conv, algo_,
                                             scratch + half_bytes_, workspace_bytes_, &zero, d_.y,
                                             y_half != nullptr ? static_cast<void*>(y_half) : y));
    if (y_half != nullptr)
      KILN_RETURN_IF_ERROR(
          CheckLaunch(cuda_kernels::LaunchHalfToFloat(y_half, static_cast<float*>(y),
                                                      static_cast<int64_t>(y_elems_), stream),
                      "float32 cast", node_));
    if (!needs_epilogue_) return OkStatus();
    const float* bias = ctx.has(2) ? ctx.in(2).data<float>() : nullptr;
    const cudaError_t e = WithStorage(ctx.out(0).dtype(), [&](auto t) {
      using T = decltype(t);
      return cuda_kernels::LaunchConvEpilogue<T>(
          static_cast<T*>(y), bias, ctx.has(3) ? InAs<T>(ctx, 3) : nullptr, batch_, channels_, hw_,
          static_cast<int>(act_), act_alpha_, act_beta_, stream);
    });
    return CheckLaunch(e, "conv epilogue", node_);
  }

 private:
  Status DoPrepare(runtime::PrepareContext* ctx) {
    const Shape& x = ctx->inputs[0].shape;
    const Shape& w = ctx->inputs[1].shape;
    const Shape& y = ctx->outputs[0].shape;
    ops::nn::Window win;
    std::string rule =
        ops::nn::ForwardWindow(a_.conv.window, {x[2], x[3]}, {w[2], w[3]}, false, &win);
    if (!rule.empty()) return InvalidModel(node_.Describe() + ": " + rule);
    if (win.pad_begin != win.pad_end)
      return Unsupported("asymmetric padding is not supported by cuDNN's convolution descriptor");
    const int group = static_cast<int>(a_.conv.group);
    half_io_ = ctx->inputs[0].dtype == DataType::kFloat16;
    fp16_ = ctx->precision == Precision::kFp16 || half_io_;
    const cudnnDataType_t dt = fp16_ ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT;
    x_elems_ = static_cast<size_t>(NumElements(x));
    y_elems_ = static_cast<size_t>(NumElements(y));
    half_bytes_ = 0;
    if (fp16_) {
      if (!half_io_) half_bytes_ = AlignScratch(x_elems_ * 2) + AlignScratch(y_elems_ * 2);
      w_half_offset_ = half_bytes_;
      if (ctx->constants[1]) {
        KILN_ASSIGN_OR_RETURN(w_half_, UploadHalf(ctx->device, *ctx->constants[1]));
      } else {
        half_bytes_ += AlignScratch(static_cast<size_t>(NumElements(w)) * 2);
      }
    }
    KILN_RETURN_IF_ERROR(d_.Create(x, w, y, win.pad_begin.data(), win.strides.data(),
                                   win.dilations.data(), group, dt,
                                   fp16_ ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH));
    int n = 0, c = 0, h = 0, wd = 0;
    KILN_CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(d_.conv, d_.x, d_.w, &n, &c, &h, &wd));
    if (Shape{n, c, h, wd} != y)
      return Internal("cuDNN's output shape " + ShapeToString({n, c, h, wd}) +
                      " differs from kiln's " + ShapeToString(y));
    KILN_ASSIGN_OR_RETURN(cudnnHandle_t handle, CudnnHandle(nullptr));
    KILN_RETURN_IF_ERROR(ChooseCudnnAlgo<cudnnConvolutionFwdAlgoPerf_t>(
        *ctx,
        [&](int n, int* r, cudnnConvolutionFwdAlgoPerf_t* p) {
          return cudnnFindConvolutionForwardAlgorithm(handle, d_.x, d_.w, d_.conv, d_.y, n, r, p);
        },
        [&](int n, int* r, cudnnConvolutionFwdAlgoPerf_t* p) {
          return cudnnGetConvolutionForwardAlgorithm_v7(handle, d_.x, d_.w, d_.conv, d_.y, n, r, p);
        },
        [&](cudnnConvolutionFwdAlgo_t a, size_t* b) {
          return cudnnGetConvolutionForwardWorkspaceSize(handle, d_.x, d_.w, d_.conv, d_.y, a, b);
        },
        &algo_, &workspace_bytes_, &tuned_));
    const ops::Activation& act = a_.act;
    act_ = act.kind;
    act_alpha_ = act.alpha;
    act_beta_ = act.beta;
    batch_ = y[0];
    channels_ = y[1];
    hw_ = y[2] * y[3];
    needs_epilogue_ = node_.HasInput(2) || (node_.domain == "kiln" && node_.HasInput(3)) ||
                      act.kind != ops::ActivationKind::kNone;
    return OkStatus();
  }

  ir::Node node_;
  ops::ConvAttrs a_;
  CudnnConvDescriptors d_;
  cudnnConvolutionFwdAlgo_t algo_ = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  size_t workspace_bytes_ = 0;
  bool fp16_ = false, tuned_ = false;
  bool half_io_ = false;  // X, Z and Y are float16 (activations float16 between kernels)
  size_t x_elems_ = 0, y_elems_ = 0, half_bytes_ = 0, w_half_offset_ = 0;
  std::shared_ptr<void> w_half_;  // prepacked float16 weights (fp16, constant W)
  cuda_math::Activation act_ = cuda_math::Activation::kNone;
  float act_alpha_ = 0, act_beta_ = 0;
  int64_t batch_ = 0, channels_ = 0, hw_ = 0;
  bool needs_epilogue_ = false;
};

KernelSupport SupportsConv(const ir::Node&, const ir::Op& op, const std::vector<TensorInfo>& in) {
  const ops::nn::WindowAttrs& win = runtime::AttrsOf<ops::ConvAttrs>(op).conv.window;
  if (!FloatOrHalf(in, {0, 3}))
    return {false, "needs float32 tensors (X and Z may be float16), W and B float32"};
  if (in[0].shape.size() != 4) return {false, "needs a 2-D convolution (NCHW input)"};
  const std::vector<int64_t>& pads = win.pads;
  if (pads.size() == 4 && (pads[0] != pads[2] || pads[1] != pads[3]))
    return {false, "asymmetric pads " + ops::nn::JoinInts(pads) + " (cuDNN needs symmetric)"};
  if (win.auto_pad == ops::nn::AutoPad::kSameUpper || win.auto_pad == ops::nn::AutoPad::kSameLower)
    return {false, "auto_pad SAME_UPPER / SAME_LOWER may pad asymmetrically"};
  return {true, ""};
}

KILN_REGISTER_KERNEL(runtime::KernelDef{"cuda.conv.cudnn",
                                        "Conv",
                                        "",
                                        1,
                                        ir::kMaxOpset,
                                        Backend::kCuda,
                                        10,
                                        SupportsConv,
                                        Make<ConvCudnn>,
                                        {},
                                        {0},
                                        {Precision::kFp32, Precision::kFp16}});
KILN_REGISTER_KERNEL(runtime::KernelDef{"cuda.fusedconv.cudnn",
                                        "FusedConv",
                                        "kiln",
                                        1,
                                        1,
                                        Backend::kCuda,
                                        10,
                                        SupportsConv,
                                        Make<ConvCudnn>,
                                        {},
                                        {0, 3},
                                        {Precision::kFp32, Precision::kFp16}});

}  // namespace
}  // namespace kiln::cuda
