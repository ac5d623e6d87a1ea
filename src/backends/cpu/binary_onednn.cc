// cpu.<op>.onednn for Add, Sub, Mul, Div, float32, on oneDNN's binary
// primitive with broadcasting. oneDNN broadcasts only its second source, so commutative ops swap
// their operands when the first is the broadcast one (EfficientNet's Mul(scale[N,C,1,1],
// x[N,C,H,W])); ranks are aligned by prepending 1s. The output takes the first source's layout,
// so blocked tensors flow through residual adds and squeeze-excite multiplies without reorders.
// Two full-size operands in different layouts (ConvNeXt's residual Add of a plain block output
// and a blocked convolution output) are not given to the primitive as they are: oneDNN 2.6 runs
// mixed layouts in reference code (6 ms for one [1,192,28,28] Add on AVX2). The second is
// reordered into the first's layout in scratch first (a jit reorder), then added.
// A plain broadcast operand of a blocked one is reordered into the blocked format (below).
// A constant one-element second operand (PP-OCR's hard-swish as x + 3, x / 6 on blocked conv
// outputs) runs as oneDNN's eltwise linear, alpha * x + beta, in the first operand's layout: the
// binary primitive runs a blocked tensor with a plain scalar in reference code (0.84 ms for one
// [1,32,6,96] Add on AVX2). Add, Sub and Mul are exact that way (alpha 1 or beta 0); x / c
// becomes x * (1 / c), within one rounding of the division.
#include "backends/cpu/onednn_common.h"
#include "ops/common.h"

namespace kiln::backends::cpu {
namespace {

using dnnl::memory;
using runtime::KernelSupport;
using runtime::TensorInfo;

bool Commutative(const std::string& t) { return t == "Add" || t == "Mul"; }

dnnl::algorithm AlgOf(const std::string& t) {
  if (t == "Add") return dnnl::algorithm::binary_add;
  if (t == "Sub") return dnnl::algorithm::binary_sub;
  if (t == "Mul") return dnnl::algorithm::binary_mul;
  return dnnl::algorithm::binary_div;
}

// Which input plays oneDNN's src0 (full-size), or -1 when neither matches the output shape.
int FullInput(const ir::Node& node, const std::vector<TensorInfo>& in, const Shape& out) {
  if (in[0].shape == out) return 0;
  if (in[1].shape == out && Commutative(node.op_type)) return 1;
  return -1;
}

// `dims` in the channel blocking of `like` (aBcd8b, aBcd16b, ... for ranks 3 to 5), or a zero
// desc when `like` is not blocked on channels alone.
memory::desc ChannelBlockedLike(const memory::desc& like, const memory::dims& dims) {
  const auto& blk = like.data.format_desc.blocking;
  if (like.data.format_kind != dnnl_blocked || blk.inner_nblks != 1 || blk.inner_idxs[0] != 1)
    return memory::desc();
  using tag = memory::format_tag;
  const int64_t b = blk.inner_blks[0];
  tag t = tag::undef;
  if (b == 8)
    t = dims.size() == 3   ? tag::aBc8b
        : dims.size() == 4 ? tag::aBcd8b
        : dims.size() == 5 ? tag::aBcde8b
                           : tag::undef;
  if (b == 16)
    t = dims.size() == 3   ? tag::aBc16b
        : dims.size() == 4 ? tag::aBcd16b
        : dims.size() == 5 ? tag::aBcde16b
                           : tag::undef;
  if (t == tag::undef) return memory::desc();
  return memory::desc(dims, memory::data_type::f32, t);
}

class BinaryOneDnn final : public runtime::Kernel {
 public:
  explicit BinaryOneDnn(const ir::Node& node) : node_(node) {}
  // Supports() has checked that a blocked operand has the output's rank; Prepare reads either
  // operand in whatever layout it arrives.
  bool AcceptsLayout(size_t input) const override { return input < 2; }

  Status Prepare(runtime::PrepareContext* ctx) override {
    return Guard(node_, [&] {
      const Shape& out = ctx->outputs[0].shape;
      full_ = FullInput(node_, ctx->inputs, out);
      if (full_ < 0) throw dnnl::error(dnnl_unimplemented, "no full-size operand");
      const TensorInfo& a = ctx->inputs[full_];
      const TensorInfo& b = ctx->inputs[1 - full_];
      src0_ = InputDesc(a);
      const Tensor* bc = ctx->constants[1 - full_];
      if (bc != nullptr && bc->numel() == 1 && bc->dtype() == DataType::kFloat &&
          (full_ == 0 || Commutative(node_.op_type))) {
        const float c = bc->data<float>()[0];
        float alpha = 1.f, beta = 0.f;
        if (node_.op_type == "Add") beta = c;
        if (node_.op_type == "Sub") beta = -c;
        if (node_.op_type == "Mul") alpha = c;
        if (node_.op_type == "Div") alpha = 1.f / c;
        dnnl::primitive_attr attr;
        attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
        dnnl::eltwise_forward::desc d(dnnl::prop_kind::forward_inference,
                                      dnnl::algorithm::eltwise_linear, src0_, alpha, beta);
        linear_pd_ = dnnl::eltwise_forward::primitive_desc(d, attr, Engine());
        linear_ = dnnl::eltwise_forward(linear_pd_);
        scalar_ = true;
        ctx->outputs[0].layout = a.layout;
        return;
      }
      if (b.layout) {
        src1_ = InputDesc(b);
      } else {
        Shape bs(out.size() - b.shape.size(), 1);
        bs.insert(bs.end(), b.shape.begin(), b.shape.end());
        src1_ = PlainDesc(bs);
      }
      src1_in_ = src1_;
      if (b.shape == out && src1_ != src0_) {
        src1_ = src0_;
        src1_reorder_ = MakeReorder(src1_in_, src1_);
      }
      dnnl::primitive_attr attr;
      attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
      // A plain broadcast operand ([1,C,1,1]) with a channel-blocked first operand (aBcd8b):
      // the operand is reordered into the same blocking in scratch at each run (C floats); as
      // given, oneDNN 2.6 runs the pair in reference code (117 ms for PP-OCR's
      // [1,24,320,320] + [1,24,1,1] on AVX2).
      if (a.layout && !b.layout && b.shape != out) {
        const memory::desc blocked = ChannelBlockedLike(src0_, src1_.dims());
        if (!blocked.is_zero()) {
          src1_ = blocked;
          src1_reorder_ = MakeReorder(src1_in_, src1_);
        }
      }
      dnnl::binary::desc d(AlgOf(node_.op_type), src0_, src1_, src0_);
      pd_ = dnnl::binary::primitive_desc(d, attr, Engine());
      prim_ = dnnl::binary(pd_);
      descs_ = PdDescs(pd_);
      ctx->outputs[0].layout = a.layout;
    });
  }

  int InPlaceInput() const override { return full_; }  // oneDNN supports dst == src
  // Scratch: the second operand in the first's layout (when they differ), then the scratchpad.
  size_t ScratchBytes() const override {
    if (scalar_) return linear_pd_.scratchpad_desc().get_size();
    return ReorderedBytes(src1_reorder_, src1_) + pd_.scratchpad_desc().get_size();
  }
  std::string variant() const override { return scalar_ ? "linear" : ""; }

  Status Run(const ir::ComputeContext& ctx) const override {
    return Guard(node_, [&] {
      char* scratch = static_cast<char*>(ctx.scratch);
      if (scalar_) {
        RunMemory src(src0_, ctx.in(full_).raw());
        RunMemory dst(src0_, ctx.out(0).raw());
        RunMemory sp(linear_pd_.scratchpad_desc(), scratch);
        Execute(linear_, {{DNNL_ARG_SRC, src.get()},
                          {DNNL_ARG_DST, dst.get()},
                          {DNNL_ARG_SCRATCHPAD, sp.get()}});
        ThreadStream().wait();
        return;
      }
      RunMemory s0(src0_, ctx.in(full_).raw());
      RunMemory s1(src1_,
                   InputAs(src1_reorder_, src1_in_, src1_, ctx.in(1 - full_).raw(), scratch));
      RunMemory dst(src0_, ctx.out(0).raw());
      RunMemory sp(descs_.scratchpad, scratch + ReorderedBytes(src1_reorder_, src1_));
      Execute(prim_, {{DNNL_ARG_SRC_0, s0.get()},
                      {DNNL_ARG_SRC_1, s1.get()},
                      {DNNL_ARG_DST, dst.get()},
                      {DNNL_ARG_SCRATCHPAD, sp.get()}});
      ThreadStream().wait();
    });
  }

 private:
  ir::Node node_;
  int full_ = 0;
  memory::desc src0_, src1_, src1_in_;  // src1_in_: the second operand as it arrives
  dnnl::reorder src1_reorder_;          // src1_in_ -> src1_ when they differ
  dnnl::binary::primitive_desc pd_;
  PdDescs descs_;
  dnnl::binary prim_;
  bool scalar_ = false;  // a constant one-element operand: eltwise linear instead
  dnnl::eltwise_forward::primitive_desc linear_pd_;
  dnnl::eltwise_forward linear_;
};

KernelSupport SupportsBinary(const ir::Node& node, const ir::Op&,
                             const std::vector<TensorInfo>& in) {
  if (!AllFloat(in, {0, 1})) return {false, "needs float32 inputs"};
  if (node.opset < 7) return {false, "legacy broadcast attributes"};
  auto out = ops::BroadcastShapes({in[0].shape, in[1].shape});
  if (!out.ok()) return {false, "shapes do not broadcast"};
  int full = FullInput(node, in, *out);
  if (full < 0) return {false, "neither operand has the output shape"};
  const TensorInfo& other = in[1 - full];
  if (other.layout && other.shape != *out && other.shape.size() != out->size())
    return {false, "broadcast operand in a blocked layout with a different rank"};
  if (out->size() > 12 || out->empty()) return {false, "rank must be 1..12"};
  return {true, ""};
}

#define KILN_BINARY_KERNEL(OP, NAME)                                  \
  KILN_REGISTER_KERNEL(runtime::KernelDef{"cpu." NAME ".onednn",      \
                                          OP,                         \
                                          "",                         \
                                          7,                          \
                                          ir::kMaxOpset,              \
                                          Backend::kCpu,              \
                                          10,                         \
                                          SupportsBinary,             \
                                          CreateKernel<BinaryOneDnn>, \
                                          {}})
KILN_BINARY_KERNEL("Add", "add");
KILN_BINARY_KERNEL("Sub", "sub");
KILN_BINARY_KERNEL("Mul", "mul");
KILN_BINARY_KERNEL("Div", "div");

}  // namespace
}  // namespace kiln::backends::cpu
