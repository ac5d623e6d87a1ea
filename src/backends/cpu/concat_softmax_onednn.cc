// cpu.concat.onednn: Concat of float32 inputs on oneDNN's concat primitive. Inputs are read in
// whatever layout they arrive (channels-last or blocked convolution outputs, as in YOLO necks and
// GoogLeNet), and the output takes the layout oneDNN picks, so no reorder is inserted around it;
// more than 4 inputs (see kMaxConcatInputs), empty inputs and rank 0 are declined (reference).
// cpu.softmax.onednn / cpu.logsoftmax.onednn: Softmax and LogSoftmax on oneDNN's softmax_v2
// (softmax_accurate / softmax_log: the maximum is subtracted first, as the reference does), plain
// layout. Opset >= 13 normalises along `axis`; before 13 the input is viewed as 2-D
// [prod(dims[:axis]), prod(dims[axis:])] and each row is normalised, as ONNX defines.
#include "backends/cpu/onednn_common.h"
#include "ops/common.h"

namespace kiln::backends::cpu {
namespace {

using dnnl::memory;
using runtime::KernelSupport;
using runtime::TensorInfo;

// oneDNN's concat of channels-last inputs along channels copies each input's channels pixel by
// pixel. With many inputs that loses to the reference's block copies of plain inputs (plus one
// conversion per new input): DenseNet-121's concats of 2 to 25 inputs took 4.3 ms per run on
// oneDNN against 3.6 ms so, while with up to 4 inputs oneDNN wins (SqueezeNet 1.1: 3.75 -> 2.63 ms
// end to end, GoogLeNet 11.9 -> 10.4 ms; `kiln bench --profile`, 2 threads, 2026-11-22).
constexpr size_t kMaxConcatInputs = 4;

int64_t ConcatAxis(const ir::Node& node, size_t rank) {
  int64_t axis = node.GetInt("axis", 1);
  return axis < 0 ? axis + static_cast<int64_t>(rank) : axis;
}

KernelSupport SupportsConcat(const ir::Node& node, const ir::Op&,
                             const std::vector<TensorInfo>& in) {
  if (in.empty()) return {false, "no inputs"};
  if (in.size() > kMaxConcatInputs) return {false, "more than 4 inputs (measured slower)"};
  const size_t rank = in[0].shape.size();
  if (rank == 0 || rank > 12) return {false, "rank must be 1..12"};
  const int64_t axis = ConcatAxis(node, rank);
  if (axis < 0 || axis >= static_cast<int64_t>(rank)) return {false, "axis out of range"};
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i].dtype != DataType::kFloat) return {false, "needs float32 inputs"};
    if (in[i].shape.size() != rank) return {false, "inputs differ in rank"};
    for (int64_t d : in[i].shape)
      if (d <= 0) return {false, "an input is empty or has unknown dims"};
  }
  return {true, ""};
}

class ConcatOneDnn final : public runtime::Kernel {
 public:
  explicit ConcatOneDnn(const ir::Node& node) : node_(node) {}
  bool AcceptsLayout(size_t) const override { return true; }

  Status Prepare(runtime::PrepareContext* ctx) override {
    return Guard(node_.Describe(), [&] {
      srcs_.clear();
      for (const TensorInfo& t : ctx->inputs) srcs_.push_back(InputDesc(t));
      dnnl::primitive_attr attr;
      attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
      const Shape& ys = ctx->outputs[0].shape;
      const int axis = static_cast<int>(ConcatAxis(node_, ys.size()));
      // All inputs plain: a plain output (what the graph's consumers read without a reorder).
      bool plain = true;
      for (const TensorInfo& t : ctx->inputs) plain = plain && !t.layout;
      pd_ = plain ? dnnl::concat::primitive_desc(PlainDesc(ys), axis, srcs_, Engine(), attr)
                  : dnnl::concat::primitive_desc(axis, srcs_, Engine(), attr);
      prim_ = dnnl::concat(pd_);
      ctx->outputs[0].layout = LayoutFor(pd_.dst_desc(), ys);
    });
  }

  size_t ScratchBytes() const override { return pd_.scratchpad_desc().get_size(); }

  Status Run(const ir::ComputeContext& ctx) const override {
    return Guard(node_.Describe(), [&] {
      std::unordered_map<int, memory> args;
      for (size_t i = 0; i < srcs_.size(); ++i)
        args[DNNL_ARG_MULTIPLE_SRC + static_cast<int>(i)] =
            memory(srcs_[i], Engine(), const_cast<void*>(ctx.in(i).raw()));
      args[DNNL_ARG_DST] = memory(pd_.dst_desc(), Engine(), ctx.out(0).raw());
      args[DNNL_ARG_SCRATCHPAD] = memory(pd_.scratchpad_desc(), Engine(), ctx.scratch);
      prim_.execute(ThreadStream(), args);
      ThreadStream().wait();
    });
  }

 private:
  ir::Node node_;
  std::vector<memory::desc> srcs_;
  dnnl::concat::primitive_desc pd_;
  dnnl::concat prim_;
};

// The shape softmax runs over and the axis within it: the input itself (opset >= 13) or its
// 2-D view (before 13).
void SoftmaxView(const ir::Node& node, const Shape& xs, Shape* view, int* axis) {
  const int64_t rank = static_cast<int64_t>(xs.size());
  int64_t a = node.GetInt("axis", node.opset >= 13 ? -1 : 1);
  if (a < 0) a += rank;
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

KernelSupport SupportsSoftmax(const ir::Node& node, const ir::Op&,
                              const std::vector<TensorInfo>& in) {
  if (!AllFloat(in, {0})) return {false, "needs float32 input"};
  const Shape& xs = in[0].shape;
  if (xs.empty() || xs.size() > 12) return {false, "rank must be 1..12"};
  for (int64_t d : xs)
    if (d <= 0) return {false, "empty input"};
  const int64_t rank = static_cast<int64_t>(xs.size());
  int64_t a = node.GetInt("axis", node.opset >= 13 ? -1 : 1);
  if (a < 0) a += rank;
  if (a < 0 || a >= rank) return {false, "axis out of range (or the empty trailing part)"};
  return {true, ""};
}

class SoftmaxOneDnn final : public runtime::Kernel {
 public:
  explicit SoftmaxOneDnn(const ir::Node& node) : node_(node) {}

  Status Prepare(runtime::PrepareContext* ctx) override {
    return Guard(node_.Describe(), [&] {
      Shape view;
      int axis = 0;
      SoftmaxView(node_, ctx->inputs[0].shape, &view, &axis);
      data_ = PlainDesc(view);
      dnnl::primitive_attr attr;
      attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
      const auto alg = node_.op_type == "LogSoftmax" ? dnnl::algorithm::softmax_log
                                                     : dnnl::algorithm::softmax_accurate;
      dnnl::softmax_v2_forward::desc d(dnnl::prop_kind::forward_inference, alg, data_, data_, axis);
      pd_ = dnnl::softmax_v2_forward::primitive_desc(d, attr, Engine());
      prim_ = dnnl::softmax_v2_forward(pd_);
    });
  }

  int InPlaceInput() const override { return 0; }
  size_t ScratchBytes() const override { return pd_.scratchpad_desc().get_size(); }

  Status Run(const ir::ComputeContext& ctx) const override {
    return ExecuteSrcDst(node_.Describe(), prim_, pd_, data_, data_, ctx);
  }

 private:
  ir::Node node_;
  memory::desc data_;
  dnnl::softmax_v2_forward::primitive_desc pd_;
  dnnl::softmax_v2_forward prim_;
};

KILN_REGISTER_KERNEL(runtime::KernelDef{"cpu.concat.onednn",
                                        "Concat",
                                        "",
                                        1,
                                        ir::kMaxOpset,
                                        "cpu",
                                        10,
                                        SupportsConcat,
                                        CreateKernel<ConcatOneDnn>,
                                        {}});
KILN_REGISTER_KERNEL(runtime::KernelDef{"cpu.softmax.onednn",
                                        "Softmax",
                                        "",
                                        1,
                                        ir::kMaxOpset,
                                        "cpu",
                                        10,
                                        SupportsSoftmax,
                                        CreateKernel<SoftmaxOneDnn>,
                                        {}});
KILN_REGISTER_KERNEL(runtime::KernelDef{"cpu.logsoftmax.onednn",
                                        "LogSoftmax",
                                        "",
                                        1,
                                        ir::kMaxOpset,
                                        "cpu",
                                        10,
                                        SupportsSoftmax,
                                        CreateKernel<SoftmaxOneDnn>,
                                        {}});

}  // namespace
}  // namespace kiln::backends::cpu
