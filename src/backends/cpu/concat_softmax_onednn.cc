// cpu.concat.onednn: Concat of float32 inputs on oneDNN's concat primitive. Inputs are read in
// whatever layout they arrive (channels-last or blocked convolution outputs, as in YOLO necks and
// GoogLeNet), and the output takes the layout oneDNN picks, so no reorder is inserted around it;
// above 4 inputs it takes them plain (see kMaxConcatInputs); empty inputs and rank 0 are
// declined (reference kernel).
// cpu.softmax.onednn / cpu.logsoftmax.onednn: Softmax and LogSoftmax on oneDNN's softmax_v2
// (softmax_accurate / softmax_log: the maximum is subtracted first, as the reference does), plain
// layout. Opset >= 13 normalises along `axis`; before 13 the input is viewed as 2-D
// [prod(dims[:axis]), prod(dims[axis:])] and each row is normalised, as ONNX defines.
#include <algorithm>
#include <cstring>

#include "backends/cpu/onednn_common.h"
#include "core/threading.h"
#include "ops/axis_attrs.h"
#include "ops/common.h"

namespace kiln::backends::cpu {
namespace {

using dnnl::memory;
using runtime::KernelSupport;
using runtime::TensorInfo;

// oneDNN's concat of channels-last inputs along channels copies each input's channels pixel by
// pixel. With many inputs that loses to block copies of plain inputs (plus one conversion per new
// input): DenseNet-121's concats of 2 to 25 inputs took 4.3 ms per run at batch 1 that way
// against 3.6 ms with plain inputs, while with up to 4 inputs the layouts are kept (SqueezeNet
// 1.1: 3.75 -> 2.63 ms end to end, GoogLeNet 11.9 -> 10.4 ms; `kiln bench --profile`, 2 threads,
// 2026-11-22). Above 4 inputs oneDNN's concat declines, and cpu.concat.copy below takes the
// inputs plain and copies blocks in parallel (oneDNN's concat of many plain inputs was slower
// still: 6.9 ms; the single-threaded reference spent 106 ms per run at batch 32).
constexpr size_t kMaxConcatInputs = 4;

// The op's axis (ops::AxisAttrs, as written) normalized against `rank`.
int64_t AxisOf(const ops::AxisAttrs& a, size_t rank) {
  return a.axis < 0 ? a.axis + static_cast<int64_t>(rank) : a.axis;
}
int64_t AxisOf(const ir::Op& op, size_t rank) {
  return AxisOf(runtime::AttrsOf<ops::AxisAttrs>(op), rank);
}

// The shape checks both concat kernels share; `copy_any_type`: any dtype (block copies).
KernelSupport ConcatShapes(const ir::Op& op, const std::vector<TensorInfo>& in,
                           bool copy_any_type) {
  if (in.empty()) return {false, "no inputs"};
  const size_t rank = in[0].shape.size();
  if (rank == 0 || rank > 12) return {false, "rank must be 1..12"};
  const int64_t axis = AxisOf(op, rank);
  if (axis < 0 || axis >= static_cast<int64_t>(rank)) return {false, "axis out of range"};
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i].dtype != DataType::kFloat && !copy_any_type) return {false, "needs float32 inputs"};
    if (in[i].shape.size() != rank) return {false, "inputs differ in rank"};
    for (int64_t d : in[i].shape)
      if (d <= 0) return {false, "an input is empty or has unknown dims"};
  }
  return {true, ""};
}

KernelSupport SupportsConcat(const ir::Node&, const ir::Op& op, const std::vector<TensorInfo>& in) {
  if (in.size() > kMaxConcatInputs) return {false, "more than 4 inputs: cpu.concat.copy"};
  // Small plain inputs: cpu.concat.copy's memcpys beat a oneDNN call's fixed cost (Silero VAD's
  // [1, 128] state stack: 12 us in oneDNN, `kiln bench --profile`, AMD EPYC, 2026-11-24).
  bool plain = true;
  int64_t bytes = 0;
  for (const TensorInfo& t : in) {
    plain = plain && !t.layout;
    bytes += NumElements(t.shape) * static_cast<int64_t>(DataTypeSize(t.dtype));
  }
  if (plain && bytes <= kSmallCopyBytes)
    return {false, "small plain inputs (cpu.concat.copy copies them)"};
  // 8-bit inputs of one type (quantized values on one grid: fuse_qdq_add) join as they are.
  const bool eight_bit = in[0].dtype == DataType::kUInt8 || in[0].dtype == DataType::kInt8;
  for (const TensorInfo& t : in)
    if (eight_bit && t.dtype != in[0].dtype) return {false, "8-bit inputs differ in type"};
  return ConcatShapes(op, in, eight_bit);
}

KernelSupport SupportsConcatCopy(const ir::Node&, const ir::Op& op,
                                 const std::vector<TensorInfo>& in) {
  for (const TensorInfo& t : in)
    if (t.dtype != in[0].dtype) return {false, "inputs differ in dtype"};
  return ConcatShapes(op, in, true);
}

// cpu.concat.copy: plain inputs of any dtype, one contiguous block per (outer index, input)
// copied into place, blocks split into pieces of at least 256 KiB and spread over the threads.
class ConcatCopy final : public runtime::Kernel {
 public:
  ConcatCopy(const ir::Node& node, const ir::Op& op)
      : node_(node), a_(runtime::AttrsOf<ops::AxisAttrs>(op)) {}

  Status Prepare(runtime::PrepareContext* ctx) override {
    const Shape& ys = ctx->outputs[0].shape;
    const int64_t axis = AxisOf(a_, ys.size());
    const size_t esz = DataTypeSize(ctx->inputs[0].dtype);
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < static_cast<int64_t>(ys.size()); ++d) {
      if (d < axis) outer *= ys[d];
      if (d > axis) inner *= ys[d];
    }
    const size_t out_row = static_cast<size_t>(ys[axis] * inner) * esz;
    constexpr size_t kPiece = 256 << 10;
    pieces_.clear();
    for (int64_t o = 0; o < outer; ++o) {
      size_t dst = static_cast<size_t>(o) * out_row;
      for (size_t i = 0; i < ctx->inputs.size(); ++i) {
        const size_t row = static_cast<size_t>(ctx->inputs[i].shape[axis] * inner) * esz;
        for (size_t at = 0; at < row; at += kPiece)
          pieces_.push_back(
              {i, static_cast<size_t>(o) * row + at, dst + at, std::min(kPiece, row - at)});
        dst += row;
      }
    }
    // Small copies stay on this thread (handing them to the pool costs more than the copy).
    const int64_t bytes = NumElements(ys) * static_cast<int64_t>(esz);
    grain_ =
        bytes <= kSmallCopyBytes ? std::max<int64_t>(static_cast<int64_t>(pieces_.size()), 1) : 1;
    return OkStatus();
  }

  Status Run(const ir::ComputeContext& ctx) const override {
    char* y = static_cast<char*>(ctx.out(0).raw());
    ParallelFor(static_cast<int64_t>(pieces_.size()), grain_, [&](int64_t b, int64_t e) {
      for (int64_t k = b; k < e; ++k) {
        const Piece& p = pieces_[static_cast<size_t>(k)];
        std::memcpy(y + p.dst, static_cast<const char*>(ctx.in(p.input).raw()) + p.src, p.bytes);
      }
    });
    return OkStatus();
  }

 private:
  struct Piece {
    size_t input, src, dst, bytes;
  };
  ir::Node node_;
  ops::AxisAttrs a_;
  std::vector<Piece> pieces_;
  int64_t grain_ = 1;  // pieces per thread before ParallelFor splits (all: serial)
};

class ConcatOneDnn final : public runtime::Kernel {
 public:
  ConcatOneDnn(const ir::Node& node, const ir::Op& op)
      : node_(node), a_(runtime::AttrsOf<ops::AxisAttrs>(op)) {}
  bool AcceptsLayout(size_t) const override { return true; }

  Status Prepare(runtime::PrepareContext* ctx) override {
    return Guard(node_, [&] {
      srcs_.clear();
      for (const TensorInfo& t : ctx->inputs) srcs_.push_back(InputDesc(t));
      dnnl::primitive_attr attr;
      attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
      const Shape& ys = ctx->outputs[0].shape;
      const int axis = static_cast<int>(AxisOf(a_, ys.size()));
      // All inputs plain: a plain output (what the graph's consumers read without a reorder).
      bool plain = true;
      for (const TensorInfo& t : ctx->inputs) plain = plain && !t.layout;
      const auto dt = srcs_[0].data_type();
      pd_ = plain ? dnnl::concat::primitive_desc(PlainDesc(ys, dt), axis, srcs_, Engine(), attr)
                  : dnnl::concat::primitive_desc(axis, srcs_, Engine(), attr);
      prim_ = dnnl::concat(pd_);
      descs_ = PdDescs(pd_);
      // Plain 8-bit values need no layout (LayoutFor keeps only plain float32 without one).
      ctx->outputs[0].layout =
          pd_.dst_desc() == PlainDesc(ys, dt) ? nullptr : LayoutFor(pd_.dst_desc(), ys);
    });
  }

  size_t ScratchBytes() const override { return pd_.scratchpad_desc().get_size(); }

  Status Run(const ir::ComputeContext& ctx) const override {
    return Guard(node_, [&] {
      RunMemoryList memories;
      ExecArg args[RunMemoryList::kMax];
      size_t n = 0;
      for (size_t i = 0; i < srcs_.size(); ++i)
        args[n++] = {DNNL_ARG_MULTIPLE_SRC + static_cast<int>(i),
                     memories.Add(srcs_[i], ctx.in(i).raw())};
      args[n++] = {DNNL_ARG_DST, memories.Add(descs_.dst, ctx.out(0).raw())};
      args[n++] = {DNNL_ARG_SCRATCHPAD, memories.Add(descs_.scratchpad, ctx.scratch)};
      Execute(prim_, args, n);
      ThreadStream().wait();
    });
  }

 private:
  ir::Node node_;
  ops::AxisAttrs a_;
  std::vector<memory::desc> srcs_;
  dnnl::concat::primitive_desc pd_;
  PdDescs descs_;
  dnnl::concat prim_;
};

// The shape softmax runs over and the axis within it: the input itself (opset >= 13) or its
// 2-D view (before 13).
void SoftmaxView(const ir::Node& node, const ops::AxisAttrs& attrs, const Shape& xs, Shape* view,
                 int* axis) {
  const int64_t rank = static_cast<int64_t>(xs.size());
  const int64_t a = AxisOf(attrs, xs.size());
  if (node.opset >= 13) {
    *view = xs;
    *axis = static_cast<int>(a);
    return;
  }
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < rank; ++d) (d < a ? outer : inner) *= xs[d];
  *view = {outer, inner};
  *axis = 1;
}

KernelSupport SupportsSoftmax(const ir::Node&, const ir::Op& op,
                              const std::vector<TensorInfo>& in) {
  if (std::string why = DenseFloatInput(in); !why.empty()) return {false, why};
  const Shape& xs = in[0].shape;
  const int64_t rank = static_cast<int64_t>(xs.size());
  const int64_t a = AxisOf(op, xs.size());
  if (a < 0 || a >= rank) return {false, "axis out of range (or the empty trailing part)"};
  return {true, ""};
}

class SoftmaxOneDnn final : public runtime::Kernel {
 public:
  SoftmaxOneDnn(const ir::Node& node, const ir::Op& op)
      : node_(node), a_(runtime::AttrsOf<ops::AxisAttrs>(op)) {}

  Status Prepare(runtime::PrepareContext* ctx) override {
    return Guard(node_, [&] {
      Shape view;
      int axis = 0;
      SoftmaxView(node_, a_, ctx->inputs[0].shape, &view, &axis);
      data_ = PlainDesc(view);
      dnnl::primitive_attr attr;
      attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
      const auto alg = node_.op_type == "LogSoftmax" ? dnnl::algorithm::softmax_log
                                                     : dnnl::algorithm::softmax_accurate;
      dnnl::softmax_v2_forward::desc d(dnnl::prop_kind::forward_inference, alg, data_, data_, axis);
      pd_ = dnnl::softmax_v2_forward::primitive_desc(d, attr, Engine());
      prim_ = dnnl::softmax_v2_forward(pd_);
      descs_ = PdDescs(pd_);
    });
  }

  int InPlaceInput() const override { return 0; }
  size_t ScratchBytes() const override { return pd_.scratchpad_desc().get_size(); }

  Status Run(const ir::ComputeContext& ctx) const override {
    return ExecuteSrcDst(node_, prim_, descs_.scratchpad, data_, data_, ctx);
  }

 private:
  ir::Node node_;
  ops::AxisAttrs a_;
  memory::desc data_;
  dnnl::softmax_v2_forward::primitive_desc pd_;
  PdDescs descs_;
  dnnl::softmax_v2_forward prim_;
};

KILN_REGISTER_KERNEL(runtime::KernelDef{"cpu.concat.onednn",
                                        "Concat",
                                        "",
                                        1,
                                        ir::kMaxOpset,
                                        Backend::kCpu,
                                        10,
                                        SupportsConcat,
                                        CreateKernel<ConcatOneDnn>,
                                        {}});
// Below oneDNN's concat (10), above the reference (0).
KILN_REGISTER_KERNEL(runtime::KernelDef{"cpu.concat.copy",
                                        "Concat",
                                        "",
                                        1,
                                        ir::kMaxOpset,
                                        Backend::kCpu,
                                        5,
                                        SupportsConcatCopy,
                                        CreateKernel<ConcatCopy>,
                                        {}});
KILN_REGISTER_KERNEL(runtime::KernelDef{"cpu.softmax.onednn",
                                        "Softmax",
                                        "",
                                        1,
                                        ir::kMaxOpset,
                                        Backend::kCpu,
                                        10,
                                        SupportsSoftmax,
                                        CreateKernel<SoftmaxOneDnn>,
                                        {}});
KILN_REGISTER_KERNEL(runtime::KernelDef{"cpu.logsoftmax.onednn",
                                        "LogSoftmax",
                                        "",
                                        1,
                                        ir::kMaxOpset,
                                        Backend::kCpu,
                                        10,
                                        SupportsSoftmax,
                                        CreateKernel<SoftmaxOneDnn>,
                                        {}});

}  // namespace
}  // namespace kiln::backends::cpu
