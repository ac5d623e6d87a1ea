// cuda.<op>.kernel for data-movement ops, float32 or (precision fp16 between kernels) float16:
// Transpose (rank <= 6), Concat (one copy kernel
// per input), Slice (starts/ends/axes/steps constant, resolved by the reference op's own rules in
// ops/tensor/slice.h, negative steps included) and constant-mode Pad (pads and value constant;
// negative pads crop), Split (one slice per output), all strided gathers or copies over the output
// (kernels/layout.cu); and Gather along one axis of float32, float16 or int64 data with int64
// indices (kernels/gather.cu): constant indices are range-checked once in Prepare; computed ones
// out of range produce zeros.
#include "backends/cuda/ops/cuda_kernel.h"
#include "ops/axis_attrs.h"
#include "ops/nn/spatial.h"
#include "ops/tensor/concat_split.h"
#include "ops/tensor/pad.h"
#include "ops/tensor/slice.h"
#include "ops/tensor/transpose.h"

namespace kiln::cuda {
namespace {

using runtime::KernelSupport;
using runtime::TensorInfo;

// The integer values of a constant input (int32 or int64), or an empty vector when absent.
std::vector<int64_t> ConstantInts(const runtime::PrepareContext& ctx, size_t i) {
  std::vector<int64_t> v;
  if (i >= ctx.constants.size() || ctx.constants[i] == nullptr) return v;
  const Tensor& t = *ctx.constants[i];
  for (int64_t k = 0; k < t.numel(); ++k)
    v.push_back(t.dtype() == DataType::kInt32 ? t.data<int32_t>()[k] : t.data<int64_t>()[k]);
  return v;
}

// Output `o` = the strided gather of input 0 that `index` describes, in the input's storage.
cudaError_t Gather(const ir::ComputeContext& ctx, size_t o, const cuda_math::GatherIndex& index) {
  return WithStorage(ctx.in(0).dtype(), [&](auto t) {
    using T = decltype(t);
    return cuda_kernels::LaunchStridedGather<T>(InAs<T>(ctx, 0), OutAs<T>(ctx, o), index,
                                                StreamOf(ctx));
  });
}

class TransposeCuda final : public runtime::Kernel {
 public:
  TransposeCuda(const ir::Node& node, const ir::Op& op)
      : node_(node), a_(runtime::AttrsOf<ops::TransposeAttrs>(op)) {}
  Status Prepare(runtime::PrepareContext* ctx) override {
    const Shape& x = ctx->inputs[0].shape;
    std::vector<int64_t> perm = a_.perm;
    if (!a_.has_perm)
      for (size_t d = x.size(); d-- > 0;) perm.push_back(static_cast<int64_t>(d));
    if (!cuda_math::MakeTransposeIndex(x, perm, &index_))
      return Unsupported("perm " + ops::nn::JoinInts(perm) + " of rank > 6 or invalid");
    return OkStatus();
  }
  Status Run(const ir::ComputeContext& ctx) const override {
    return CheckLaunch(Gather(ctx, 0, index_), "transpose", node_);
  }

 private:
  ir::Node node_;
  ops::TransposeAttrs a_;
  cuda_math::GatherIndex index_{};
};

class ConcatCuda final : public runtime::Kernel {
 public:
  ConcatCuda(const ir::Node& node, const ir::Op& op)
      : node_(node), a_(runtime::AttrsOf<ops::AxisAttrs>(op)) {}
  Status Prepare(runtime::PrepareContext* ctx) override {
    const Shape& y = ctx->outputs[0].shape;
    const size_t a = static_cast<size_t>(NormalizeAxis(a_.axis, y.size()));
    const int64_t outer = Product(y, 0, a), inner = Product(y, a + 1, y.size());
    int64_t offset = 0;
    for (const TensorInfo& in : ctx->inputs) {
      const int64_t cols = in.shape[a] * inner;
      copies_.push_back({outer, cols, y[a] * inner, offset});
      offset += cols;
    }
    return OkStatus();
  }
  Status Run(const ir::ComputeContext& ctx) const override {
    return WithStorage(ctx.in(0).dtype(), [&](auto t) {
      using T = decltype(t);
      for (size_t i = 0; i < copies_.size(); ++i)
        KILN_RETURN_IF_ERROR(
            CheckLaunch(cuda_kernels::LaunchConcatCopy<T>(InAs<T>(ctx, i), OutAs<T>(ctx, 0),
                                                          copies_[i], StreamOf(ctx)),
                        "concat copy", node_));
      return OkStatus();
    });
  }

 private:
  ir::Node node_;
  ops::AxisAttrs a_;
  std::vector<cuda_math::ConcatIndex> copies_;
};

class SliceCuda final : public runtime::Kernel {
 public:
  SliceCuda(const ir::Node& node, const ir::Op& op)
      : node_(node), a_(runtime::AttrsOf<ops::SliceAttrs>(op)) {}
  Status Prepare(runtime::PrepareContext* ctx) override {
    const Shape& x = ctx->inputs[0].shape;
    ops::SlicePlan plan;
    std::string err;
    if (node_.opset < 10) {
      std::vector<int64_t> axes = a_.axes;
      err =
          ops::MakeSlicePlan(x, a_.starts, a_.ends, a_.has_axes ? &axes : nullptr, nullptr, &plan);
    } else {
      std::vector<int64_t> axes = ConstantInts(*ctx, 3), steps = ConstantInts(*ctx, 4);
      err = ops::MakeSlicePlan(x, ConstantInts(*ctx, 1), ConstantInts(*ctx, 2),
                               node_.HasInput(3) ? &axes : nullptr,
                               node_.HasInput(4) ? &steps : nullptr, &plan);
    }
    if (!err.empty()) return InvalidModel(node_.Describe() + ": " + err);
    if (!cuda_math::MakeSliceIndex(x, plan.start, plan.step, plan.out, &index_))
      return Unsupported("slice of rank > 6");
    return OkStatus();
  }
  Status Run(const ir::ComputeContext& ctx) const override {
    return CheckLaunch(Gather(ctx, 0, index_), "slice", node_);
  }

 private:
  ir::Node node_;
  ops::SliceAttrs a_;
  cuda_math::GatherIndex index_{};
};

class PadCuda final : public runtime::Kernel {
 public:
  PadCuda(const ir::Node& node, const ir::Op& op)
      : node_(node), a_(runtime::AttrsOf<ops::PadAttrs>(op)) {}
  Status Prepare(runtime::PrepareContext* ctx) override {
    const Shape& x = ctx->inputs[0].shape;
    std::vector<int64_t> pads;
    float value = 0.f;
    if (node_.opset < 11) {
      pads = a_.pads;
      value = a_.value;
    } else {
      pads = ConstantInts(*ctx, 1);
      if (node_.HasInput(2)) value = ctx->constants[2]->data<float>()[0];
    }
    if (pads.size() != 2 * x.size())
      return InvalidModel(node_.Describe() + ": pads must have 2 * rank entries; got " +
                          ops::nn::JoinInts(pads));
    std::vector<int64_t> begin(pads.begin(), pads.begin() + static_cast<long>(x.size()));
    if (!cuda_math::MakePadIndex(x, ctx->outputs[0].shape, begin, value, &index_))
      return Unsupported("pad of rank > 6");
    return OkStatus();
  }
  Status Run(const ir::ComputeContext& ctx) const override {
    const cudaError_t e = WithStorage(ctx.in(0).dtype(), [&](auto t) {
      using T = decltype(t);
      return cuda_kernels::LaunchPadConstant<T>(InAs<T>(ctx, 0), OutAs<T>(ctx, 0), index_,
                                                StreamOf(ctx));
    });
    return CheckLaunch(e, "pad", node_);
  }

 private:
  ir::Node node_;
  ops::PadAttrs a_;
  cuda_math::PadIndex index_{};
};

// Split: each output is a slice of the input along the axis, at the running offset of the outputs
// before it (sizes from the planned output shapes, so every opset's way of giving them works).
class SplitCuda final : public runtime::Kernel {
 public:
  SplitCuda(const ir::Node& node, const ir::Op& op)
      : node_(node), axis_(runtime::AttrsOf<ops::SplitAttrs>(op).axis) {}
  Status Prepare(runtime::PrepareContext* ctx) override {
    const Shape& x = ctx->inputs[0].shape;
    const size_t axis = static_cast<size_t>(NormalizeAxis(axis_, x.size()));
    int64_t offset = 0;
    for (const TensorInfo& out : ctx->outputs) {
      cuda_math::GatherIndex index{};
      if (out.dtype == DataType::kUndefined) {  // an omitted output
        pieces_.push_back(index);
        continue;
      }
      std::vector<int64_t> starts(x.size(), 0), steps(x.size(), 1);
      starts[axis] = offset;
      if (!cuda_math::MakeSliceIndex(x, starts, steps, out.shape, &index))
        return Unsupported("split of rank > 6");
      pieces_.push_back(index);
      offset += out.shape[axis];
    }
    return OkStatus();
  }
  Status Run(const ir::ComputeContext& ctx) const override {
    for (size_t o = 0; o < pieces_.size(); ++o) {
      if (ctx.outputs[o] == nullptr) continue;
      KILN_RETURN_IF_ERROR(CheckLaunch(Gather(ctx, o, pieces_[o]), "split", node_));
    }
    return OkStatus();
  }

 private:
  ir::Node node_;
  int64_t axis_;  // as written (ops::SplitAttrs)
  std::vector<cuda_math::GatherIndex> pieces_;
};

class GatherCuda final : public runtime::Kernel {
 public:
  GatherCuda(const ir::Node& node, const ir::Op& op)
      : node_(node), axis_(runtime::AttrsOf<ops::AxisAttrs>(op).axis) {}
  Status Prepare(runtime::PrepareContext* ctx) override {
    const Shape& x = ctx->inputs[0].shape;
    const int64_t axis = NormalizeAxis(axis_, x.size());
    if (const Tensor* idx = ctx->constants[1]) {
      for (int64_t k = 0; k < idx->numel(); ++k) {
        const int64_t v = idx->data<int64_t>()[k];
        if (v < -x[axis] || v >= x[axis])
          return InvalidModel(node_.Describe() + ": index " + std::to_string(v) +
                              " is out of range for axis " + std::to_string(axis) + " of size " +
                              std::to_string(x[axis]));
      }
    }
    if (!cuda_math::MakeGatherAxisShape(x, axis, NumElements(ctx->inputs[1].shape), &shape_))
      return Unsupported("invalid axis");
    elem_bytes_ = static_cast<int64_t>(DataTypeSize(ctx->inputs[0].dtype));
    return OkStatus();
  }
  Status Run(const ir::ComputeContext& ctx) const override {
    return CheckLaunch(
        cuda_kernels::LaunchGatherAxis(ctx.in(0).raw(), ctx.in(1).data<int64_t>(), ctx.out(0).raw(),
                                       shape_, elem_bytes_, StreamOf(ctx)),
        "gather", node_);
  }

 private:
  ir::Node node_;
  int64_t axis_;  // as written (ops::AxisAttrs)
  cuda_math::GatherAxisShape shape_{};
  int64_t elem_bytes_ = 4;
};

KernelSupport SupportsGather(const ir::Node&, const ir::Op&, const std::vector<TensorInfo>& in) {
  if (in[0].dtype != DataType::kFloat && in[0].dtype != DataType::kFloat16 &&
      in[0].dtype != DataType::kInt64)
    return {false, "needs float32, float16 or int64 data"};
  if (in[1].dtype != DataType::kInt64) return {false, "needs int64 indices"};
  return {true, ""};
}

KernelSupport SupportsData(const ir::Node&, const ir::Op&, const std::vector<TensorInfo>& in) {
  if (in[0].dtype != DataType::kFloat && in[0].dtype != DataType::kFloat16)
    return {false, "needs float32 or float16 data"};
  if (in[0].shape.size() > static_cast<size_t>(cuda_math::kMaxRank)) return {false, "rank > 6"};
  return {true, ""};
}

KernelSupport SupportsConcat(const ir::Node&, const ir::Op&, const std::vector<TensorInfo>& in) {
  return FloatOrHalf(in, {runtime::kAllInputs})
             ? KernelSupport{true, ""}
             : KernelSupport{false, "needs all float32 or all float16 inputs"};
}

KernelSupport SupportsPad(const ir::Node& node, const ir::Op& op,
                          const std::vector<TensorInfo>& in) {
  if (runtime::AttrsOf<ops::PadAttrs>(op).mode != ops::PadMode::kConstant)
    return {false, "mode other than constant"};
  if (node.opset >= 18 && node.HasInput(3)) return {false, "the axes input (Pad-18)"};
  if (node.opset >= 11 && node.HasInput(2) && in[2].dtype != DataType::kFloat)
    return {false, "needs a float32 constant_value"};
  return SupportsData(node, op, in);
}

// Slice's starts/ends/axes/steps and Pad's pads/value are read once in Prepare.
KILN_REGISTER_KERNEL(runtime::KernelDef{"cuda.transpose.kernel",
                                        "Transpose",
                                        "",
                                        1,
                                        ir::kMaxOpset,
                                        Backend::kCuda,
                                        10,
                                        SupportsData,
                                        Make<TransposeCuda>,
                                        {},
                                        {0}});
KILN_REGISTER_KERNEL(runtime::KernelDef{"cuda.concat.kernel",
                                        "Concat",
                                        "",
                                        4,
                                        ir::kMaxOpset,
                                        Backend::kCuda,
                                        10,
                                        SupportsConcat,
                                        Make<ConcatCuda>,
                                        {},
                                        {runtime::kAllInputs}});
KILN_REGISTER_KERNEL(runtime::KernelDef{"cuda.slice.kernel",
                                        "Slice",
                                        "",
                                        1,
                                        ir::kMaxOpset,
                                        Backend::kCuda,
                                        10,
                                        SupportsData,
                                        Make<SliceCuda>,
                                        {1, 2, 3, 4},
                                        {0}});
KILN_REGISTER_KERNEL(runtime::KernelDef{"cuda.split.kernel",
                                        "Split",
                                        "",
                                        1,
                                        ir::kMaxOpset,
                                        Backend::kCuda,
                                        10,
                                        SupportsData,
                                        Make<SplitCuda>,
                                        {},
                                        {0}});
KILN_REGISTER_KERNEL(runtime::KernelDef{"cuda.gather.kernel",
                                        "Gather",
                                        "",
                                        1,
                                        ir::kMaxOpset,
                                        Backend::kCuda,
                                        10,
                                        SupportsGather,
                                        Make<GatherCuda>,
                                        {},
                                        {0}});
KILN_REGISTER_KERNEL(runtime::KernelDef{"cuda.pad.kernel",
                                        "Pad",
                                        "",
                                        1,
                                        ir::kMaxOpset,
                                        Backend::kCuda,
                                        10,
                                        SupportsPad,
                                        Make<PadCuda>,
                                        {1, 2},
                                        {0}});

}  // namespace
}  // namespace kiln::cuda
