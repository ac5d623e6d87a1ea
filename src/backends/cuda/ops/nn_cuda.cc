// cuda.<op>.kernel for the NCHW network ops besides convolution and matrix products, float32 or
// (precision fp16 between kernels) float16 X and Y, computed in float32:
// MaxPool / AveragePool (2-D, pads, strides, dilations, ceil_mode, count_include_pad; MaxPool's
// Indices output declines), GlobalAveragePool / GlobalMaxPool, Softmax / LogSoftmax (opset >= 13
// along one axis; earlier opsets over the flattened trailing dims), LayerNormalization (ONNX
// opset 17 and kiln's fused one; Mean/InvStdDev outputs decline). Geometry comes from kiln's own
// shape rules (ops/nn/spatial.h), so the device computes exactly the windows the reference kernels
// do.
#include "backends/cuda/ops/cuda_kernel.h"
#include "ops/axis_attrs.h"
#include "ops/nn/norm.h"
#include "ops/nn/pool.h"
#include "ops/nn/spatial.h"

namespace kiln::cuda {
namespace {

using runtime::KernelSupport;
using runtime::TensorInfo;

class PoolCuda final : public runtime::Kernel {
 public:
  PoolCuda(const ir::Node& node, const ir::Op& op)
      : node_(node), a_(runtime::AttrsOf<ops::PoolAttrs>(op)) {}

  Status Prepare(runtime::PrepareContext* ctx) override {
    const Shape& x = ctx->inputs[0].shape;
    const Shape& y = ctx->outputs[0].shape;
    planes_ = x[0] * x[1];
    if (node_.op_type == "GlobalAveragePool" || node_.op_type == "GlobalMaxPool") {
      plane_size_ = x[2] * x[3];
      return OkStatus();
    }
    ops::nn::Window win;
    std::string rule = ops::nn::ForwardWindow(a_.window, {x[2], x[3]}, {}, a_.ceil_mode, &win);
    if (!rule.empty()) return InvalidModel(node_.Describe() + ": " + rule);
    p_ = {x[2],
          x[3],
          y[2],
          y[3],
          win.kernel[0],
          win.kernel[1],
          win.strides[0],
          win.strides[1],
          win.dilations[0],
          win.dilations[1],
          win.pad_begin[0],
          win.pad_begin[1],
          win.pad_end[0],
          win.pad_end[1],
          a_.count_include_pad};
    return OkStatus();
  }

  Status Run(const ir::ComputeContext& ctx) const override {
    return WithStorage(ctx.in(0).dtype(), [&](auto t) {
      using T = decltype(t);
      const T* x = InAs<T>(ctx, 0);
      T* y = OutAs<T>(ctx, 0);
      cudaStream_t s = StreamOf(ctx);
      const std::string& op = node_.op_type;
      if (op == "MaxPool")
        return CheckLaunch(cuda_kernels::LaunchMaxPool2d<T>(x, y, planes_, p_, s), "max pool",
                           node_);
      if (op == "AveragePool")
        return CheckLaunch(cuda_kernels::LaunchAveragePool2d<T>(x, y, planes_, p_, s),
                           "average pool", node_);
      return CheckLaunch(
          cuda_kernels::LaunchGlobalPool<T>(x, y, planes_, plane_size_, op == "GlobalMaxPool", s),
          "global pool", node_);
    });
  }

 private:
  ir::Node node_;
  ops::PoolAttrs a_;
  cuda_math::Pool2dParams p_{};
  int64_t planes_ = 0, plane_size_ = 0;
};

KernelSupport SupportsPool(const ir::Node& node, const ir::Op& op,
                           const std::vector<TensorInfo>& in) {
  if (in[0].dtype != DataType::kFloat && in[0].dtype != DataType::kFloat16)
    return {false, "needs float32 or float16"};
  if (node.op_type == "AveragePool")
    for (int64_t d : runtime::AttrsOf<ops::PoolAttrs>(op).window.dilations)
      if (d != 1) return {false, "dilated AveragePool (opset 19)"};
  if (in[0].shape.size() != 4) return {false, "needs 2-D pooling (NCHW input)"};
  if (node.outputs.size() > 1 && node.outputs[1] >= 0) return {false, "Indices output requested"};
  return {true, ""};
}

class SoftmaxCuda final : public runtime::Kernel {
 public:
  SoftmaxCuda(const ir::Node& node, const ir::Op& op)
      : node_(node), axis_(runtime::AttrsOf<ops::AxisAttrs>(op).axis) {}
  Status Prepare(runtime::PrepareContext* ctx) override {
    const Shape& x = ctx->inputs[0].shape;
    const bool per_axis = node_.opset >= 13;
    const int64_t axis = NormalizeAxis(axis_, x.size());
    const size_t a = static_cast<size_t>(axis);
    if (per_axis)
      shape_ = {Product(x, 0, a), x[a], Product(x, a + 1, x.size())};
    else
      shape_ = {Product(x, 0, a), Product(x, a, x.size()), 1};
    return OkStatus();
  }
  Status Run(const ir::ComputeContext& ctx) const override {
    const cudaError_t e = WithStorage(ctx.in(0).dtype(), [&](auto t) {
      using T = decltype(t);
      return cuda_kernels::LaunchSoftmax<T>(InAs<T>(ctx, 0), OutAs<T>(ctx, 0), shape_,
                                            node_.op_type == "LogSoftmax", StreamOf(ctx));
    });
    return CheckLaunch(e, "softmax", node_);
  }

 private:
  ir::Node node_;
  int64_t axis_;  // as written, the opset's default applied (ops::AxisAttrs)
  cuda_math::SoftmaxShape shape_{};
};

class LayerNormCuda final : public runtime::Kernel {
 public:
  LayerNormCuda(const ir::Node& node, const ir::Op& op)
      : node_(node), a_(runtime::AttrsOf<ops::NormAttrs>(op)) {}
  Status Prepare(runtime::PrepareContext* ctx) override {
    const Shape& x = ctx->inputs[0].shape;
    const size_t a = static_cast<size_t>(NormalizeAxis(a_.axis, x.size()));
    rows_ = Product(x, 0, a);
    cols_ = Product(x, a, x.size());
    if (NumElements(ctx->inputs[1].shape) != cols_ ||
        (node_.HasInput(2) && NumElements(ctx->inputs[2].shape) != cols_))
      return Unsupported("Scale and B must cover the normalized dims exactly (no broadcasting)");
    epsilon_ = a_.epsilon;
    return OkStatus();
  }
  Status Run(const ir::ComputeContext& ctx) const override {
    const float* beta = ctx.has(2) ? ctx.in(2).data<float>() : nullptr;
    const cudaError_t e = WithStorage(ctx.in(0).dtype(), [&](auto t) {
      using T = decltype(t);
      return cuda_kernels::LaunchLayerNorm<T>(InAs<T>(ctx, 0), OutAs<T>(ctx, 0),
                                              ctx.in(1).data<float>(), beta, rows_, cols_, epsilon_,
                                              StreamOf(ctx));
    });
    return CheckLaunch(e, "layer norm", node_);
  }

 private:
  ir::Node node_;
  ops::NormAttrs a_;
  int64_t rows_ = 0, cols_ = 0;
  float epsilon_ = 1e-5f;
};

KernelSupport SupportsFloatOneOutput(const ir::Node& node, const ir::Op&,
                                     const std::vector<TensorInfo>& in) {
  if (!FloatOrHalf(in, {0})) return {false, "needs float32 (X may be float16)"};
  for (size_t o = 1; o < node.outputs.size(); ++o)
    if (node.outputs[o] >= 0) return {false, "optional output " + std::to_string(o) + " requested"};
  return {true, ""};
}

// Scale and B must cover the normalized dims whole: the kernel does not broadcast them (a case
// with Scale [5] over [2,3,5] at axis 1 was accepted here and refused in Prepare, failing a load).
KernelSupport SupportsLayerNorm(const ir::Node& node, const ir::Op& op,
                                const std::vector<TensorInfo>& in) {
  KernelSupport s = SupportsFloatOneOutput(node, op, in);
  if (!s.ok) return s;
  const Shape& x = in[0].shape;
  const auto& a = runtime::AttrsOf<ops::NormAttrs>(op);
  const int64_t cols = Product(x, static_cast<size_t>(NormalizeAxis(a.axis, x.size())), x.size());
  for (size_t i = 1; i < 3 && i < in.size(); ++i)
    if (in[i].dtype != DataType::kUndefined && NumElements(in[i].shape) != cols)
      return {false, "Scale and B must cover the normalized dims exactly (no broadcasting)"};
  return {true, ""};
}

#define KILN_CUDA_NN(op, domain, since, until, name, supports, kernel) \
  KILN_REGISTER_KERNEL(runtime::KernelDef{                             \
      name, op, domain, since, until, Backend::kCuda, 10, supports, Make<kernel>, {}, {0}})
KILN_CUDA_NN("MaxPool", "", 1, ir::kMaxOpset, "cuda.maxpool.kernel", SupportsPool, PoolCuda);
KILN_CUDA_NN("AveragePool", "", 1, ir::kMaxOpset, "cuda.averagepool.kernel", SupportsPool,
             PoolCuda);
KILN_CUDA_NN("GlobalAveragePool", "", 1, ir::kMaxOpset, "cuda.globalaveragepool.kernel",
             SupportsPool, PoolCuda);
KILN_CUDA_NN("GlobalMaxPool", "", 1, ir::kMaxOpset, "cuda.globalmaxpool.kernel", SupportsPool,
             PoolCuda);
KILN_CUDA_NN("Softmax", "", 1, ir::kMaxOpset, "cuda.softmax.kernel", SupportsFloatOneOutput,
             SoftmaxCuda);
KILN_CUDA_NN("LogSoftmax", "", 1, ir::kMaxOpset, "cuda.logsoftmax.kernel", SupportsFloatOneOutput,
             SoftmaxCuda);
KILN_CUDA_NN("LayerNormalization", "", 17, ir::kMaxOpset, "cuda.layernormalization.kernel",
             SupportsLayerNorm, LayerNormCuda);
KILN_CUDA_NN("LayerNormalization", "kiln", 1, 1, "cuda.layernormalization.kernel",
             SupportsLayerNorm, LayerNormCuda);

}  // namespace
}  // namespace kiln::cuda
