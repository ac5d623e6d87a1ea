// cuda.<op>.kernel for elementwise ops and pure reshapes, float32 or (precision fp16 between
// kernels) float16 storage, computed in float32:
// - unary activations and math (Relu, Sigmoid, Tanh, LeakyRelu, HardSigmoid, HardSwish, Elu, Gelu,
// Clip,
//   Erf, Exp, Log, Sqrt, Neg, Abs, Reciprocal) through kernels/activation.cu, in place when the
//   planner allows; Clip's min/max inputs (opset >= 11) must be constant;
// - broadcast binary ops (Add, Sub, Mul, Div, Pow, and two-input Max/Min) through
//   kernels/binary.cu, up to rank 6 after merging dims;
// - Reshape, Flatten, Squeeze, Unsqueeze, Identity and inference Dropout (any dtype): the output
//   shares the input's buffer when the planner allows, else one device-to-device copy;
// - Cast between float32 and float16 (kernels/cast.cu, round to nearest even; the casts the
//   session inserts around float16 activations, runtime/half_values.h), or to its own type (a
//   copy).
#include <limits>

#include "backends/cuda/ops/cuda_kernel.h"
#include "ops/activation.h"

namespace kiln::cuda {
namespace {

using runtime::KernelSupport;
using runtime::TensorInfo;

class UnaryCuda final : public runtime::Kernel {
 public:
  explicit UnaryCuda(const ir::Node& node) : node_(node) {}

  Status Prepare(runtime::PrepareContext* ctx) override {
    if (!ops::UnaryOfNode(node_, ctx->constants, &act_))
      return Unsupported(node_.Describe() + ": not a unary op this kernel runs");
    return OkStatus();
  }
  int InPlaceInput() const override { return 0; }
  Status Run(const ir::ComputeContext& ctx) const override {
    const cudaError_t e = WithStorage(ctx.in(0).dtype(), [&](auto t) {
      using T = decltype(t);
      return cuda_kernels::LaunchActivation<T>(InAs<T>(ctx, 0), OutAs<T>(ctx, 0), ctx.in(0).numel(),
                                               static_cast<int>(act_.kind), act_.alpha, act_.beta,
                                               StreamOf(ctx));
    });
    return CheckLaunch(e, "activation", node_);
  }

 private:
  ir::Node node_;
  ops::Activation act_;
};

KernelSupport SupportsUnary(const ir::Node& node, const ir::Op&,
                            const std::vector<TensorInfo>& in) {
  if (in[0].dtype != DataType::kFloat && in[0].dtype != DataType::kFloat16)
    return {false, "needs float32 or float16"};
  if (node.op_type == "Clip" && node.opset >= 11)
    for (size_t i = 1; i < in.size(); ++i)
      if (in[i].dtype != DataType::kUndefined && in[i].dtype != DataType::kFloat)
        return {false, "needs float32 min/max"};
  return {true, ""};
}

cuda_math::BinaryOp BinaryOf(const std::string& op) {
  using B = cuda_math::BinaryOp;
  if (op == "Sub") return B::kSub;
  if (op == "Mul") return B::kMul;
  if (op == "Div") return B::kDiv;
  if (op == "Pow") return B::kPow;
  if (op == "Max") return B::kMax;
  if (op == "Min") return B::kMin;
  return B::kAdd;
}

class BinaryCuda final : public runtime::Kernel {
 public:
  explicit BinaryCuda(const ir::Node& node) : node_(node), op_(BinaryOf(node.op_type)) {}

  Status Prepare(runtime::PrepareContext* ctx) override {
    if (!cuda_math::MakeBroadcastIndex(ctx->inputs[0].shape, ctx->inputs[1].shape,
                                       ctx->outputs[0].shape, &index_))
      return Unsupported("cannot broadcast " + ShapeToString(ctx->inputs[0].shape) + " and " +
                         ShapeToString(ctx->inputs[1].shape) + " within rank 6");
    same_shape_a_ = ctx->inputs[0].shape == ctx->outputs[0].shape;
    return OkStatus();
  }
  int InPlaceInput() const override { return same_shape_a_ ? 0 : -1; }
  Status Run(const ir::ComputeContext& ctx) const override {
    const cudaError_t e = WithStorage(ctx.in(0).dtype(), [&](auto t) {
      using T = decltype(t);
      return cuda_kernels::LaunchBinary<T>(static_cast<int>(op_), InAs<T>(ctx, 0), InAs<T>(ctx, 1),
                                           OutAs<T>(ctx, 0), index_, StreamOf(ctx));
    });
    return CheckLaunch(e, "binary", node_);
  }

 private:
  ir::Node node_;
  cuda_math::BinaryOp op_;
  cuda_math::BroadcastIndex index_{};
  bool same_shape_a_ = false;
};

KernelSupport SupportsBinary(const ir::Node&, const ir::Op&, const std::vector<TensorInfo>& in) {
  if (in.size() != 2) return {false, "needs exactly two inputs"};
  if (!FloatOrHalf(in, {0, 1})) return {false, "needs two float32 or two float16 inputs"};
  return {true, ""};
}

// Same bytes, new shape.
class ReshapeCuda final : public runtime::Kernel {
 public:
  explicit ReshapeCuda(const ir::Node& node) : node_(node) {}
  int InPlaceInput() const override { return 0; }
  Status Run(const ir::ComputeContext& ctx) const override {
    if (ctx.in(0).raw() == ctx.out(0).raw()) return OkStatus();
    KILN_CUDA_CHECK(cudaMemcpyAsync(ctx.out(0).raw(), ctx.in(0).raw(), ctx.out(0).bytes(),
                                    cudaMemcpyDeviceToDevice, StreamOf(ctx)));
    return OkStatus();
  }

 private:
  ir::Node node_;
};

KernelSupport SupportsReshape(const ir::Node& node, const ir::Op&, const std::vector<TensorInfo>&) {
  if (node.op_type == "Dropout" && node.outputs.size() > 1 && node.outputs[1] >= 0)
    return {false, "Dropout's mask output is requested"};
  if (node.op_type == "Dropout" && node.opset >= 12 && node.HasInput(2))
    return {false,
            "Dropout's training_mode is given (random dropout runs on the reference kernel)"};
  return {true, ""};
}

class CastCuda final : public runtime::Kernel {
 public:
  explicit CastCuda(const ir::Node& node) : node_(node) {}
  Status Run(const ir::ComputeContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    Tensor& y = ctx.out(0);
    cudaStream_t s = StreamOf(ctx);
    if (x.dtype() == y.dtype()) {
      if (x.raw() != y.raw())
        KILN_CUDA_CHECK(cudaMemcpyAsync(y.raw(), x.raw(), y.bytes(), cudaMemcpyDeviceToDevice, s));
      return OkStatus();
    }
    if (x.dtype() == DataType::kFloat)
      return CheckLaunch(
          cuda_kernels::LaunchFloatToHalf(x.data<float>(), y.data<uint16_t>(), x.numel(), s),
          "float16 cast", node_);
    return CheckLaunch(
        cuda_kernels::LaunchHalfToFloat(x.data<uint16_t>(), y.data<float>(), x.numel(), s),
        "float32 cast", node_);
  }
  int InPlaceInput() const override { return 0; }  // used only when the sizes match (a copy)

 private:
  ir::Node node_;
};

KernelSupport SupportsCast(const ir::Node&, const ir::Op& op, const std::vector<TensorInfo>& in) {
  const DataType to = runtime::AttrsOf<ops::CastAttrs>(op).to;
  const DataType from = in[0].dtype;
  auto float_kind = [](DataType t) { return t == DataType::kFloat || t == DataType::kFloat16; };
  if (to == DataType::kUndefined) return {false, "CastLike"};
  if (from == DataType::kString || to == DataType::kString) return {false, "strings"};
  if (from == to) return {true, ""};
  if (float_kind(from) && float_kind(to)) return {true, ""};
  return {false, "casts between float32 and float16 only"};
}

#define KILN_CUDA_UNARY(op, name)                          \
  KILN_REGISTER_KERNEL(runtime::KernelDef{name,            \
                                          op,              \
                                          "",              \
                                          1,               \
                                          ir::kMaxOpset,   \
                                          Backend::kCuda,  \
                                          10,              \
                                          SupportsUnary,   \
                                          Make<UnaryCuda>, \
                                          {},              \
                                          {0}})
KILN_CUDA_UNARY("Relu", "cuda.relu.kernel");
KILN_CUDA_UNARY("Sigmoid", "cuda.sigmoid.kernel");
KILN_CUDA_UNARY("Tanh", "cuda.tanh.kernel");
KILN_CUDA_UNARY("LeakyRelu", "cuda.leakyrelu.kernel");
KILN_CUDA_UNARY("HardSigmoid", "cuda.hardsigmoid.kernel");
KILN_CUDA_UNARY("HardSwish", "cuda.hardswish.kernel");
KILN_CUDA_UNARY("Elu", "cuda.elu.kernel");
KILN_CUDA_UNARY("Gelu", "cuda.gelu.kernel");
KILN_REGISTER_KERNEL(runtime::KernelDef{"cuda.gelu.kernel",
                                        "Gelu",
                                        "kiln",
                                        1,
                                        1,
                                        Backend::kCuda,
                                        10,
                                        SupportsUnary,
                                        Make<UnaryCuda>,
                                        {},
                                        {0}});
KILN_CUDA_UNARY("Erf", "cuda.erf.kernel");
KILN_CUDA_UNARY("Exp", "cuda.exp.kernel");
KILN_CUDA_UNARY("Log", "cuda.log.kernel");
KILN_CUDA_UNARY("Sqrt", "cuda.sqrt.kernel");
KILN_CUDA_UNARY("Neg", "cuda.neg.kernel");
KILN_CUDA_UNARY("Abs", "cuda.abs.kernel");
KILN_CUDA_UNARY("Reciprocal", "cuda.reciprocal.kernel");
// Clip's min and max inputs are read once in Prepare, so they must be constant.
KILN_REGISTER_KERNEL(runtime::KernelDef{"cuda.clip.kernel",
                                        "Clip",
                                        "",
                                        1,
                                        ir::kMaxOpset,
                                        Backend::kCuda,
                                        10,
                                        SupportsUnary,
                                        Make<UnaryCuda>,
                                        {1, 2},
                                        {0}});

KILN_REGISTER_KERNEL(runtime::KernelDef{"cuda.cast.kernel",
                                        "Cast",
                                        "",
                                        1,
                                        ir::kMaxOpset,
                                        Backend::kCuda,
                                        10,
                                        SupportsCast,
                                        Make<CastCuda>,
                                        {}});

#define KILN_CUDA_BINARY(op, name, since)                   \
  KILN_REGISTER_KERNEL(runtime::KernelDef{name,             \
                                          op,               \
                                          "",               \
                                          since,            \
                                          ir::kMaxOpset,    \
                                          Backend::kCuda,   \
                                          10,               \
                                          SupportsBinary,   \
                                          Make<BinaryCuda>, \
                                          {},               \
                                          {0, 1}})
// Opset 7 is where these ops took numpy broadcasting.
KILN_CUDA_BINARY("Add", "cuda.add.kernel", 7);
KILN_CUDA_BINARY("Sub", "cuda.sub.kernel", 7);
KILN_CUDA_BINARY("Mul", "cuda.mul.kernel", 7);
KILN_CUDA_BINARY("Div", "cuda.div.kernel", 7);
KILN_CUDA_BINARY("Pow", "cuda.pow.kernel", 7);
KILN_CUDA_BINARY("Max", "cuda.max.kernel", 8);
KILN_CUDA_BINARY("Min", "cuda.min.kernel", 8);

#define KILN_CUDA_RESHAPE(op, name)                          \
  KILN_REGISTER_KERNEL(runtime::KernelDef{name,              \
                                          op,                \
                                          "",                \
                                          1,                 \
                                          ir::kMaxOpset,     \
                                          Backend::kCuda,    \
                                          10,                \
                                          SupportsReshape,   \
                                          Make<ReshapeCuda>, \
                                          {},                \
                                          {0}})
KILN_CUDA_RESHAPE("Reshape", "cuda.reshape.copy");
KILN_CUDA_RESHAPE("Flatten", "cuda.flatten.copy");
KILN_CUDA_RESHAPE("Squeeze", "cuda.squeeze.copy");
KILN_CUDA_RESHAPE("Unsqueeze", "cuda.unsqueeze.copy");
KILN_CUDA_RESHAPE("Identity", "cuda.identity.copy");
KILN_CUDA_RESHAPE("Dropout", "cuda.dropout.copy");

}  // namespace
}  // namespace kiln::cuda
