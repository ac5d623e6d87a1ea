// cpu.split.onednn: Split of a float32 tensor (fp32 or bf16 storage) or an 8-bit one as one oneDNN
// reorder per output from a sub-memory view of the input, so the input is read in its producer's
// layout (YOLOv8's C2f blocks split a convolution's channels-last output) and each output keeps
// that layout: no conversion to plain and back around the node. Layouts with blocked dims (nChw16c)
// are declined (a split offset need not fall on a block), as are omitted outputs.
// The output shapes (hence the split sizes, whatever their source) come from shape inference.
#include "backends/cpu/onednn_common.h"
#include "ops/common.h"
#include "ops/tensor/concat_split.h"

namespace kiln::backends::cpu {
namespace {

using dnnl::memory;
using runtime::KernelSupport;
using runtime::TensorInfo;

// A dense layout that is only a permutation of the dims (plain, channels-last), no inner blocks.
bool Unblocked(const memory::desc& d) {
  return d.data.format_kind == dnnl_blocked && d.data.format_desc.blocking.inner_nblks == 0;
}

// `dims` laid out in the same dim order as `like` (dense strides).
memory::desc SameOrder(const memory::desc& like, const memory::dims& dims) {
  const int n = like.data.ndims;
  std::vector<int> order(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
  const auto* st = like.data.format_desc.blocking.strides;
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return st[a] > st[b]; });
  memory::dims strides(static_cast<size_t>(n));
  memory::dim s = 1;
  for (int k = n - 1; k >= 0; --k) {
    strides[static_cast<size_t>(order[static_cast<size_t>(k)])] = s;
    s *= dims[static_cast<size_t>(order[static_cast<size_t>(k)])];
  }
  return memory::desc(dims, like.data_type(), strides);
}

KernelSupport SupportsSplit(const ir::Node& node, const ir::Op&,
                            const std::vector<TensorInfo>& in) {
  // float32, or 8-bit (shared-scale QDQ models: fuse_qdq_add splits the quantized values).
  const bool eight_bit = in[0].dtype == DataType::kUInt8 || in[0].dtype == DataType::kInt8;
  if (eight_bit) {
    for (int64_t d : in[0].shape)
      if (d <= 0) return {false, "empty input"};
  } else if (std::string why = DenseFloatInput(in); !why.empty()) {
    return {false, why};
  }
  for (int o : node.outputs)
    if (o < 0) return {false, "an output is omitted"};
  if (!Unblocked(InputDesc(in[0]))) return {false, "blocked input layout"};
  // Small plain inputs: the reference kernel's memcpys beat a oneDNN call's fixed cost (Silero
  // VAD's gate split: 17-21 us in oneDNN, `kiln bench --profile`, AMD EPYC, 2026-11-24).
  if (!in[0].layout &&
      NumElements(in[0].shape) * static_cast<int64_t>(DataTypeSize(in[0].dtype)) <= kSmallCopyBytes)
    return {false, "small plain input (the reference kernel's copies are faster)"};
  return {true, ""};
}

class SplitOneDnn final : public runtime::Kernel {
 public:
  SplitOneDnn(const ir::Node& node, const ir::Op& op)
      : node_(node), axis_(runtime::AttrsOf<ops::SplitAttrs>(op).axis) {}
  bool AcceptsLayout(size_t input) const override { return input == 0; }

  Status Prepare(runtime::PrepareContext* ctx) override {
    return Guard(node_, [&] {
      src_ = InputDesc(ctx->inputs[0]);
      const int64_t rank = static_cast<int64_t>(ctx->inputs[0].shape.size());
      int64_t axis = axis_;
      if (axis < 0) axis += rank;
      memory::dims offsets(static_cast<size_t>(rank), 0);
      parts_.clear();
      for (runtime::TensorInfo& out : ctx->outputs) {
        const memory::dims dims = Dims(out.shape);
        Part p;
        p.sub = src_.submemory_desc(dims, offsets);
        p.dst = SameOrder(src_, dims);
        p.reorder = dnnl::reorder(dnnl::reorder::primitive_desc(Engine(), p.sub, Engine(), p.dst));
        out.layout = LayoutFor(p.dst, out.shape);
        offsets[static_cast<size_t>(axis)] += out.shape[static_cast<size_t>(axis)];
        parts_.push_back(std::move(p));
      }
    });
  }

  Status Run(const ir::ComputeContext& ctx) const override {
    return Guard(node_, [&] {
      for (size_t i = 0; i < parts_.size(); ++i) {
        RunMemory src(parts_[i].sub, ctx.in(0).raw()), dst(parts_[i].dst, ctx.out(i).raw());
        Execute(parts_[i].reorder, {{DNNL_ARG_FROM, src.get()}, {DNNL_ARG_TO, dst.get()}});
      }
      ThreadStream().wait();
    });
  }

 private:
  struct Part {
    memory::desc sub, dst;
    dnnl::reorder reorder;
  };
  ir::Node node_;
  int64_t axis_;  // as written (ops::SplitAttrs)
  memory::desc src_;
  std::vector<Part> parts_;
};

KILN_REGISTER_KERNEL(runtime::KernelDef{"cpu.split.onednn",
                                        "Split",
                                        "",
                                        1,
                                        ir::kMaxOpset,
                                        Backend::kCpu,
                                        10,
                                        SupportsSplit,
                                        CreateKernel<SplitOneDnn>,
                                        {}});

}  // namespace
}  // namespace kiln::backends::cpu
