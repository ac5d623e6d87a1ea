// cpu.<op>.small: activations, unary math and Add/Sub/Mul/Div on small plain float32 tensors as
// plain loops on the calling thread. A oneDNN call costs a few microseconds whatever its size
// (memory objects, stream, primitive dispatch); a recurrent model such as Silero VAD's
// op18_ifless variant runs thirty-odd elementwise nodes on [1, 128]-sized tensors per call, where
// that overhead was most of their time (kiln 1.20x ONNX Runtime's latency, `kiln bench --profile`,
// AMD EPYC AVX2, 2026-11-24). Above the size limits below, or with an input in a blocked layout
// (a reorder would cost more than the call saves), the oneDNN kernels (priority 10) run instead.
// The math is kiln's one definition of each activation (ops/activation_math.h).
#include "backends/cpu/onednn_common.h"
#include "ops/activation.h"
#include "ops/common.h"

namespace kiln::backends::cpu {
namespace {

using runtime::KernelSupport;
using runtime::TensorInfo;

// Elements up to which a loop beats a oneDNN call: cheap arithmetic, and the kinds that call
// expf/tanhf/erff/sqrtf per element (not vectorized here).
constexpr int64_t kSmallCheap = 16384;
constexpr int64_t kSmallTranscendental = 512;

bool Transcendental(ops::ActivationKind k) {
  using K = ops::ActivationKind;
  return k == K::kSigmoid || k == K::kTanh || k == K::kSilu || k == K::kGelu || k == K::kGeluTanh ||
         k == K::kElu || k == K::kErf || k == K::kExp || k == K::kLog || k == K::kSqrt;
}

std::string SmallPlain(const std::vector<TensorInfo>& in, std::initializer_list<size_t> idx,
                       int64_t limit) {
  if (!AllFloat(in, idx)) return "needs float32";
  for (size_t i : idx) {
    if (in[i].layout) return "an input is in a blocked layout (the oneDNN kernel keeps it)";
    if (NumElements(in[i].shape) > limit)
      return "more than " + std::to_string(limit) + " elements (the oneDNN kernel is faster)";
  }
  return "";
}

class UnarySmall final : public runtime::Kernel {
 public:
  explicit UnarySmall(const ir::Node& node) : node_(node) {}

  Status Prepare(runtime::PrepareContext* ctx) override {
    if (!ops::UnaryOfNode(node_, ctx->constants, &act_))
      return Unsupported(node_.Describe() + ": no activation for cpu small loop");
    return OkStatus();
  }
  int InPlaceInput() const override { return 0; }

  Status Run(const ir::ComputeContext& ctx) const override {
    const float* x = ctx.in(0).data<float>();
    float* y = ctx.out(0).data<float>();
    const int64_t n = ctx.in(0).numel();
    switch (act_.kind) {  // the common kinds inlined; the rest through the shared switch
      case ops::ActivationKind::kRelu:
        for (int64_t i = 0; i < n; ++i) y[i] = ops::Relu(x[i]);
        break;
      case ops::ActivationKind::kSigmoid:
        for (int64_t i = 0; i < n; ++i) y[i] = ops::Sigmoid(x[i]);
        break;
      case ops::ActivationKind::kTanh:
        for (int64_t i = 0; i < n; ++i) y[i] = std::tanh(x[i]);
        break;
      default:
        for (int64_t i = 0; i < n; ++i) y[i] = ops::Activate(act_, x[i]);
    }
    return OkStatus();
  }

 private:
  ir::Node node_;
  ops::Activation act_;
};

KernelSupport SupportsUnarySmall(const ir::Node& node, const ir::Op&,
                                 const std::vector<TensorInfo>& in) {
  // The kind is known here except Clip's constant bounds (KernelDef::constant_inputs); Clip is
  // cheap either way.
  ops::Activation act;
  const bool known = ops::UnaryOfNode(node, {nullptr, nullptr, nullptr}, &act);
  const int64_t limit = known && Transcendental(act.kind) ? kSmallTranscendental : kSmallCheap;
  const std::string why = SmallPlain(in, {0}, limit);
  return {why.empty(), why};
}

enum class BinaryKind { kAdd, kSub, kMul, kDiv };

template <BinaryKind K>
inline float Apply(float a, float b) {
  if constexpr (K == BinaryKind::kAdd) return a + b;
  if constexpr (K == BinaryKind::kSub) return a - b;
  if constexpr (K == BinaryKind::kMul) return a * b;
  return a / b;
}

template <BinaryKind K>
class BinarySmall final : public runtime::Kernel {
 public:
  explicit BinarySmall(const ir::Node& node) : node_(node) {}

  Status Prepare(runtime::PrepareContext* ctx) override {
    a_shape_ = ctx->inputs[0].shape;
    b_shape_ = ctx->inputs[1].shape;
    out_shape_ = ctx->outputs[0].shape;
    return OkStatus();
  }
  // Input 0 when it has the output's shape (the planner checks the sizes match).
  int InPlaceInput() const override { return a_shape_ == out_shape_ ? 0 : -1; }

  Status Run(const ir::ComputeContext& ctx) const override {
    const float* a = ctx.in(0).data<float>();
    const float* b = ctx.in(1).data<float>();
    float* y = ctx.out(0).data<float>();
    const int64_t n = NumElements(out_shape_);
    const int64_t na = NumElements(a_shape_), nb = NumElements(b_shape_);
    if (na == n && nb == n) {
      for (int64_t i = 0; i < n; ++i) y[i] = Apply<K>(a[i], b[i]);
    } else if (na == n && nb == 1) {
      const float s = b[0];
      for (int64_t i = 0; i < n; ++i) y[i] = Apply<K>(a[i], s);
    } else if (nb == n && na == 1) {
      const float s = a[0];
      for (int64_t i = 0; i < n; ++i) y[i] = Apply<K>(s, b[i]);
    } else {
      ops::ForEachBroadcast2(
          out_shape_, a_shape_, b_shape_,
          [&](int64_t o, int64_t ia, int64_t ib) { y[o] = Apply<K>(a[ia], b[ib]); });
    }
    return OkStatus();
  }

 private:
  ir::Node node_;
  Shape a_shape_, b_shape_, out_shape_;
};

KernelSupport SupportsBinarySmall(const ir::Node& node, const ir::Op&,
                                  const std::vector<TensorInfo>& in) {
  if (node.opset < 7) return {false, "legacy broadcast attributes"};
  std::string why = SmallPlain(in, {0, 1}, kSmallCheap);
  if (why.empty()) {
    auto out = ops::BroadcastShapes({in[0].shape, in[1].shape});
    if (!out.ok())
      why = "shapes do not broadcast";
    else if (NumElements(*out) > kSmallCheap)
      why = "more than " + std::to_string(kSmallCheap) + " output elements";
  }
  return {why.empty(), why};
}

#define KILN_UNARY_SMALL(OP, NAME, CONSTS)                                                \
  KILN_REGISTER_KERNEL(runtime::KernelDef{"cpu." NAME ".small", OP, "", 1, ir::kMaxOpset, \
                                          Backend::kCpu, 12, SupportsUnarySmall,          \
                                          CreateKernel<UnarySmall>, CONSTS})
KILN_UNARY_SMALL("Relu", "relu", {});
KILN_UNARY_SMALL("LeakyRelu", "leakyrelu", {});
KILN_UNARY_SMALL("Clip", "clip", (std::vector<int>{1, 2}));
KILN_UNARY_SMALL("Sigmoid", "sigmoid", {});
KILN_UNARY_SMALL("Tanh", "tanh", {});
KILN_UNARY_SMALL("HardSwish", "hardswish", {});
KILN_UNARY_SMALL("Elu", "elu", {});
KILN_UNARY_SMALL("Gelu", "gelu", {});
KILN_REGISTER_KERNEL(runtime::KernelDef{"cpu.gelu.small",
                                        "Gelu",
                                        "kiln",
                                        1,
                                        1,
                                        Backend::kCpu,
                                        12,
                                        SupportsUnarySmall,
                                        CreateKernel<UnarySmall>,
                                        {}});
KILN_UNARY_SMALL("Exp", "exp", {});
KILN_UNARY_SMALL("Sqrt", "sqrt", {});
KILN_UNARY_SMALL("Abs", "abs", {});

#define KILN_BINARY_SMALL(OP, NAME, KIND)                                              \
  KILN_REGISTER_KERNEL(runtime::KernelDef{"cpu." NAME ".small",                        \
                                          OP,                                          \
                                          "",                                          \
                                          7,                                           \
                                          ir::kMaxOpset,                               \
                                          Backend::kCpu,                               \
                                          12,                                          \
                                          SupportsBinarySmall,                         \
                                          CreateKernel<BinarySmall<BinaryKind::KIND>>, \
                                          {}})
KILN_BINARY_SMALL("Add", "add", kAdd);
KILN_BINARY_SMALL("Sub", "sub", kSub);
KILN_BINARY_SMALL("Mul", "mul", kMul);
KILN_BINARY_SMALL("Div", "div", kDiv);

}  // namespace
}  // namespace kiln::backends::cpu
