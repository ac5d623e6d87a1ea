// cuda.<op>.kernel for reductions and resizing, float32 or (precision fp16 between kernels)
// float16 X and Y, computed in float32:
// - ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceSumSquare, ReduceL2 over any axes (the
//   `axes` attribute, or the constant axes input of ReduceSum-13 / Reduce*-18; no axes reduce
//   everything, or with noop_with_empty_axes copy the input), keepdims via the output shape
//   (kernels/reduce_axes.cu);
// - Resize (10, 11, 13+) and Upsample (7, 9) on NCHW inputs, nearest or linear on H and W only,
//   with constant scales or sizes; coordinate modes half_pixel, pytorch_half_pixel,
//   align_corners, asymmetric; the pre-opset-11 rounding for Resize-10 and Upsample
//   (kernels/resize.cu). Cubic, tf_crop_and_resize, tf_half_pixel_for_nn and exclude_outside
//   decline.
#include "backends/cuda/ops/cuda_kernel.h"
#include "ops/reduce/reduce.h"
#include "ops/resize/resize.h"

namespace kiln::cuda {
namespace {

using runtime::KernelSupport;
using runtime::TensorInfo;

cuda_math::ReduceOp ReduceOf(const std::string& op) {
  using R = cuda_math::ReduceOp;
  if (op == "ReduceMean") return R::kMean;
  if (op == "ReduceMax") return R::kMax;
  if (op == "ReduceMin") return R::kMin;
  if (op == "ReduceSumSquare") return R::kSumSquare;
  if (op == "ReduceL2") return R::kL2;
  return R::kSum;
}

class ReduceCuda final : public runtime::Kernel {
 public:
  ReduceCuda(const ir::Node& node, const ir::Op& op)
      : node_(node), op_(ReduceOf(node.op_type)), a_(runtime::AttrsOf<ops::ReduceAttrs>(op)) {}
  Status Prepare(runtime::PrepareContext* ctx) override {
    const Shape& x = ctx->inputs[0].shape;
    const bool axes_input = a_.axes_from_input;
    std::vector<int64_t> axes = axes_input ? std::vector<int64_t>{} : a_.axes;
    if (axes_input && node_.HasInput(1)) {
      const Tensor& t = *ctx->constants[1];
      for (int64_t k = 0; k < t.numel(); ++k) axes.push_back(t.data<int64_t>()[k]);
    }
    if (axes.empty()) {
      if (axes_input && a_.noop_with_empty_axes) {
        copy_ = true;
        return OkStatus();
      }
      for (size_t d = 0; d < x.size(); ++d) axes.push_back(static_cast<int64_t>(d));
    }
    if (x.empty()) {  // a scalar reduces to itself
      copy_ = true;
      return OkStatus();
    }
    if (!cuda_math::MakeReduceAxesShape(x, axes, &shape_))
      return Unsupported("axes " + std::to_string(axes.size()) + " of rank " +
                         std::to_string(x.size()) + " (rank > 6 or invalid axes)");
    return OkStatus();
  }
  Status Run(const ir::ComputeContext& ctx) const override {
    if (copy_) {
      KILN_CUDA_CHECK(cudaMemcpyAsync(ctx.out(0).raw(), ctx.in(0).raw(), ctx.out(0).bytes(),
                                      cudaMemcpyDeviceToDevice, StreamOf(ctx)));
      return OkStatus();
    }
    const cudaError_t e = WithStorage(ctx.in(0).dtype(), [&](auto t) {
      using T = decltype(t);
      return cuda_kernels::LaunchReduceAxes<T>(InAs<T>(ctx, 0), OutAs<T>(ctx, 0), shape_,
                                               static_cast<int>(op_), StreamOf(ctx));
    });
    return CheckLaunch(e, "reduce", node_);
  }

 private:
  ir::Node node_;
  cuda_math::ReduceOp op_;
  ops::ReduceAttrs a_;
  cuda_math::ReduceAxesShape shape_{};
  bool copy_ = false;
};

KernelSupport SupportsReduce(const ir::Node& node, const ir::Op&,
                             const std::vector<TensorInfo>& in) {
  if (in[0].dtype != DataType::kFloat && in[0].dtype != DataType::kFloat16)
    return {false, "needs float32 or float16"};
  if (in[0].shape.size() > static_cast<size_t>(cuda_math::kMaxRank)) return {false, "rank > 6"};
  if (node.HasInput(1) && in[1].dtype != DataType::kInt64) return {false, "needs int64 axes"};
  return {true, ""};
}

class ResizeCuda final : public runtime::Kernel {
 public:
  ResizeCuda(const ir::Node& node, const ir::Op& op)
      : node_(node), a_(runtime::AttrsOf<ops::ResizeAttrs>(op)) {}
  Status Prepare(runtime::PrepareContext* ctx) override {
    const Shape& x = ctx->inputs[0].shape;
    const Shape& y = ctx->outputs[0].shape;
    const bool legacy = node_.op_type == "Upsample" || node_.opset < 11;
    std::vector<double> scales;
    const Tensor* sc = nullptr;
    if (node_.op_type == "Upsample" && node_.opset < 9) {
      for (float f : a_.scales) scales.push_back(f);
    } else {
      const size_t scales_input = legacy ? 1 : 2;
      if (node_.HasInput(scales_input)) sc = ctx->constants[scales_input];
      if (sc && sc->numel() > 0)
        for (int64_t k = 0; k < sc->numel(); ++k) scales.push_back(sc->data<float>()[k]);
    }
    if (scales.empty())  // sizes given: the scale is out / in
      for (size_t d = 0; d < x.size(); ++d)
        scales.push_back(static_cast<double>(y[d]) / static_cast<double>(x[d]));
    const auto m = a_.interp == ops::ResizeInterp::kNearest ? cuda_math::ResizeMode::kNearest
                                                            : cuda_math::ResizeMode::kLinear;
    auto coord = cuda_math::ResizeCoord::kAsymmetric;
    auto nearest = cuda_math::ResizeNearest::kLegacy;
    if (!legacy) {
      using C = ops::ResizeCoord;
      using N = ops::ResizeRounding;
      coord = a_.coord == C::kHalfPixel          ? cuda_math::ResizeCoord::kHalfPixel
              : a_.coord == C::kPytorchHalfPixel ? cuda_math::ResizeCoord::kPytorchHalfPixel
              : a_.coord == C::kAlignCorners     ? cuda_math::ResizeCoord::kAlignCorners
                                                 : cuda_math::ResizeCoord::kAsymmetric;
      nearest = a_.rounding == N::kRoundPreferCeil ? cuda_math::ResizeNearest::kRoundPreferCeil
                : a_.rounding == N::kFloor         ? cuda_math::ResizeNearest::kFloor
                : a_.rounding == N::kCeil          ? cuda_math::ResizeNearest::kCeil
                                                   : cuda_math::ResizeNearest::kRoundPreferFloor;
    }
    if (!cuda_math::MakeResize2dParams(x, y, scales, m, coord, nearest, &p_))
      return Unsupported("resizes N or C, or is not 4-D");
    planes_ = x[0] * x[1];
    return OkStatus();
  }
  Status Run(const ir::ComputeContext& ctx) const override {
    const cudaError_t e = WithStorage(ctx.in(0).dtype(), [&](auto t) {
      using T = decltype(t);
      return cuda_kernels::LaunchResize2d<T>(InAs<T>(ctx, 0), OutAs<T>(ctx, 0), planes_, p_,
                                             StreamOf(ctx));
    });
    return CheckLaunch(e, "resize", node_);
  }

 private:
  ir::Node node_;
  ops::ResizeAttrs a_;
  cuda_math::Resize2dParams p_{};
  int64_t planes_ = 0;
};

KernelSupport SupportsResize(const ir::Node& node, const ir::Op& op,
                             const std::vector<TensorInfo>& in) {
  const ops::ResizeAttrs& a = runtime::AttrsOf<ops::ResizeAttrs>(op);
  using C = ops::ResizeCoord;
  if (in[0].dtype != DataType::kFloat && in[0].dtype != DataType::kFloat16)
    return {false, "needs float32 or float16"};
  if (in[0].shape.size() != 4) return {false, "needs a 4-D NCHW input"};
  if (a.interp == ops::ResizeInterp::kCubic) return {false, "mode cubic (nearest and linear only)"};
  if (node.op_type == "Resize" && node.opset >= 11 && a.coord != C::kHalfPixel &&
      a.coord != C::kPytorchHalfPixel && a.coord != C::kAlignCorners && a.coord != C::kAsymmetric)
    return {false,
            "coordinate_transformation_mode other than half_pixel, pytorch_half_pixel, "
            "align_corners or asymmetric"};
  if (a.exclude_outside) return {false, "exclude_outside"};
  if (a.antialias) return {false, "antialias (Resize-18)"};
  if (!a.axes.empty() || a.policy != ops::ResizeAspectPolicy::kStretch)
    return {false, "axes or keep_aspect_ratio_policy (Resize-18)"};
  return {true, ""};
}

#define KILN_CUDA_REDUCE(op, name)                          \
  KILN_REGISTER_KERNEL(runtime::KernelDef{name,             \
                                          op,               \
                                          "",               \
                                          1,                \
                                          ir::kMaxOpset,    \
                                          Backend::kCuda,   \
                                          10,               \
                                          SupportsReduce,   \
                                          Make<ReduceCuda>, \
                                          {1},              \
                                          {0}})
// The axes input (when present) is read once in Prepare.
KILN_CUDA_REDUCE("ReduceSum", "cuda.reducesum.kernel");
KILN_CUDA_REDUCE("ReduceMean", "cuda.reducemean.kernel");
KILN_CUDA_REDUCE("ReduceMax", "cuda.reducemax.kernel");
KILN_CUDA_REDUCE("ReduceMin", "cuda.reducemin.kernel");
KILN_CUDA_REDUCE("ReduceSumSquare", "cuda.reducesumsquare.kernel");
KILN_CUDA_REDUCE("ReduceL2", "cuda.reducel2.kernel");
// scales / sizes (inputs 1-3) are read once in Prepare.
KILN_REGISTER_KERNEL(runtime::KernelDef{"cuda.resize.kernel",
                                        "Resize",
                                        "",
                                        10,
                                        ir::kMaxOpset,
                                        Backend::kCuda,
                                        10,
                                        SupportsResize,
                                        Make<ResizeCuda>,
                                        {1, 2, 3},
                                        {0}});
KILN_REGISTER_KERNEL(runtime::KernelDef{"cuda.upsample.kernel",
                                        "Upsample",
                                        "",
                                        7,
                                        ir::kMaxOpset,
                                        Backend::kCuda,
                                        10,
                                        SupportsResize,
                                        Make<ResizeCuda>,
                                        {1},
                                        {0}});

}  // namespace
}  // namespace kiln::cuda
