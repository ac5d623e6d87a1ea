// cpu.transpose.onednn: Transpose of float32 or uint8/int8 as a oneDNN reorder from a
// permuted view of the input (memory::desc::permute_axes) to a plain output. Reads blocked
// inputs directly, so ConvNeXt's NCHW->NHWC Transpose after a convolution that already wrote NHWC
// is a straight copy. Threaded by oneDNN.
#include <numeric>

#include "backends/cpu/onednn_common.h"
#include "ops/tensor/transpose.h"

namespace kiln::backends::cpu {
namespace {

using dnnl::memory;
using runtime::KernelSupport;
using runtime::TensorInfo;

class TransposeOneDnn final : public runtime::Kernel {
 public:
  TransposeOneDnn(const ir::Node& node, const ir::Op& op)
      : node_(node), perm_(runtime::AttrsOf<ops::TransposeAttrs>(op).perm) {}
  bool AcceptsLayout(size_t input) const override { return input == 0; }

  Status Prepare(runtime::PrepareContext* ctx) override {
    return Guard(node_, [&] {
      const Shape& xs = ctx->inputs[0].shape;
      const int r = static_cast<int>(xs.size());
      std::vector<int64_t> perm = perm_;
      if (perm.empty())
        for (int i = r - 1; i >= 0; --i) perm.push_back(i);
      std::vector<int> inverse(r);
      for (int i = 0; i < r; ++i) inverse[(perm[i] + r) % r] = i;
      src_ = InputDesc(ctx->inputs[0]).permute_axes(inverse);
      dst_ = PlainDesc(ctx->outputs[0].shape, src_.data_type());
      reorder_ = MakeReorder(src_, dst_);
    });
  }

  Status Run(const ir::ComputeContext& ctx) const override {
    return Guard(node_, [&] {
      RunMemory s(src_, ctx.in(0).raw()), d(dst_, ctx.out(0).raw());
      Execute(reorder_, {{DNNL_ARG_FROM, s.get()}, {DNNL_ARG_TO, d.get()}});
      ThreadStream().wait();
    });
  }

 private:
  ir::Node node_;
  std::vector<int64_t> perm_;  // as written (ops::TransposeAttrs); empty: reversed
  memory::desc src_, dst_;
  dnnl::reorder reorder_;
};

KernelSupport SupportsTranspose(const ir::Node&, const ir::Op&, const std::vector<TensorInfo>& in) {
  if (in[0].dtype != DataType::kFloat && in[0].dtype != DataType::kUInt8 &&
      in[0].dtype != DataType::kInt8)
    return {false, "needs float32 or 8-bit"};
  if (in[0].shape.empty() || in[0].shape.size() > 12) return {false, "rank must be 1..12"};
  if (NumElements(in[0].shape) == 0) return {false, "empty tensor"};
  return {true, ""};
}

KILN_REGISTER_KERNEL(runtime::KernelDef{"cpu.transpose.onednn",
                                        "Transpose",
                                        "",
                                        1,
                                        ir::kMaxOpset,
                                        Backend::kCpu,
                                        10,
                                        SupportsTranspose,
                                        CreateKernel<TransposeOneDnn>,
                                        {}});

}  // namespace
}  // namespace kiln::backends::cpu
