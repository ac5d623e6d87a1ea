// cpu.resize.onednn / cpu.upsample.onednn: Resize and Upsample on oneDNN's resampling primitive,
// float32 (or uint8/int8 in mode nearest), plain layout, where oneDNN computes exactly what ONNX
// defines:
//   nearest: every spatial dim upscaled by an integer factor k (O = I*k, and a given scale equal
//     to k), with asymmetric coordinates and floor rounding (YOLO's exports; also Resize-10 and
//     Upsample), or half_pixel / pytorch_half_pixel with round_prefer_floor/ceil. oneDNN picks
//     round((y + 0.5) / k - 0.5) = floor(y / k) for those: no ties occur at integer factors.
//   linear: half_pixel (or pytorch_half_pixel with every output dim > 1) with the scale equal to
//     O/I; oneDNN clamps taps to the edge as the ONNX reference's edge padding does.
// N and C must not be scaled, antialias must be off. Scales/sizes are constants (the output shape
// depends on them); what can only be judged from their values (integer factors, scale == O/I)
// is judged in Prepare, and a node that fails it runs on the separable passes
// (resize_separable.h, variant "[separable]"), or where even those do not fit (N or C resized)
// on the reference op's own Compute ("[reference]"), so no node is refused for it.
// cpu.resize.separable / cpu.upsample.separable take every float32 Resize/Upsample that oneDNN
// cannot compute by its attributes (cubic, antialias, align_corners, asymmetric linear,
// tf_crop_and_resize, other nearest roundings, axes, keep_aspect_ratio_policy).
#include <cmath>

#include "backends/cpu/onednn_common.h"
#include "backends/cpu/resize_separable.h"
#include "ops/resize/resize.h"

namespace kiln::backends::cpu {
namespace {

using dnnl::memory;
using runtime::KernelSupport;
using runtime::TensorInfo;

bool IsResize(const ir::Node& node) { return node.op_type == "Resize"; }

// Coordinate/rounding attributes oneDNN reproduces; "" or the reason not.
std::string CheckModes(const ir::Node& node, const ops::ResizeAttrs& a) {
  using ops::ResizeCoord;
  using ops::ResizeInterp;
  using ops::ResizeRounding;
  if (!a.axes.empty()) return "the axes attribute (Resize-18)";
  if (a.antialias) return "antialias (Resize-18)";
  if (a.policy != ops::ResizeAspectPolicy::kStretch)
    return "keep_aspect_ratio_policy other than stretch";
  // Resize-10 and Upsample: asymmetric coordinates, truncation (= floor when upscaling).
  if (!IsResize(node) || node.opset < 11) {
    if (a.interp != ResizeInterp::kNearest) return "linear with asymmetric coordinates";
    return "";
  }
  const bool half_pixel =
      a.coord == ResizeCoord::kHalfPixel || a.coord == ResizeCoord::kPytorchHalfPixel;
  if (a.interp == ResizeInterp::kNearest) {
    if (a.coord == ResizeCoord::kAsymmetric && a.rounding == ResizeRounding::kFloor) return "";
    if (half_pixel && (a.rounding == ResizeRounding::kRoundPreferFloor ||
                       a.rounding == ResizeRounding::kRoundPreferCeil))
      return "";
    return "nearest with this coordinate_transformation_mode / nearest_mode";
  }
  if (a.interp == ResizeInterp::kLinear) {
    if (half_pixel) return "";
    return "linear with a coordinate_transformation_mode other than half_pixel";
  }
  return "mode cubic";
}

KernelSupport SupportsResample(const ir::Node& node, const ir::Op& op,
                               const std::vector<TensorInfo>& in) {
  // 8-bit X in mode nearest (a copy of values: shared-scale QDQ models, fuse_qdq_add).
  const bool eight_bit = in[0].dtype == DataType::kUInt8 || in[0].dtype == DataType::kInt8;
  if (eight_bit && runtime::AttrsOf<ops::ResizeAttrs>(op).interp != ops::ResizeInterp::kNearest)
    return {false, "8-bit X in a mode other than nearest"};
  if (!eight_bit && !AllFloat(in, {0})) return {false, "needs float32 X"};
  const size_t r = in[0].shape.size();
  if (r < 3 || r > 5) return {false, "1-3 spatial dims"};
  for (int64_t d : in[0].shape)
    if (d <= 0) return {false, "empty input"};
  const std::string why = CheckModes(node, runtime::AttrsOf<ops::ResizeAttrs>(op));
  if (!why.empty()) return {false, why};
  return {true, ""};
}

class ResampleOneDnn final : public runtime::Kernel {
 public:
  ResampleOneDnn(const ir::Node& node, const ir::Op& op) : node_(node), op_(op) {}

  std::string variant() const override {
    return use_separable_ ? "separable" : use_reference_ ? "reference" : "";
  }

  Status Prepare(runtime::PrepareContext* ctx) override {
    const Shape& xs = ctx->inputs[0].shape;
    const Shape& ys = ctx->outputs[0].shape;
    const ops::ResizeAttrs& a = runtime::AttrsOf<ops::ResizeAttrs>(op_);
    const bool nearest = a.interp == ops::ResizeInterp::kNearest;
    // The given scales, if any (Resize-11+: input 2; Resize-10, Upsample-9: input 1; Upsample-7:
    // the attribute).
    std::vector<float> scales;
    const int scales_input = IsResize(node_) && node_.opset >= 11 ? 2 : 1;
    if (node_.HasInput(scales_input) && static_cast<size_t>(scales_input) < ctx->constants.size() &&
        ctx->constants[scales_input] && ctx->constants[scales_input]->numel() > 0) {
      const Tensor& s = *ctx->constants[scales_input];
      scales.assign(s.data<float>(), s.data<float>() + s.numel());
    } else if (!IsResize(node_) && node_.opset < 9) {
      scales = a.scales;
    }
    use_reference_ = ys.size() != xs.size() || ys[0] != xs[0] || ys[1] != xs[1];
    const bool pytorch = a.coord == ops::ResizeCoord::kPytorchHalfPixel;
    for (size_t i = 2; i < xs.size() && !use_reference_; ++i) {
      if (!scales.empty() && scales.size() != xs.size()) {
        use_reference_ = true;
        break;
      }
      const float given = scales.empty() ? 0.f : scales[i];
      if (nearest) {
        // An integer upscale, and the given scale (if any) exactly that integer.
        const int64_t factor = ys[i] / xs[i];
        use_reference_ = use_reference_ || ys[i] % xs[i] != 0 ||
                         (given != 0.f && given != static_cast<float>(factor));
      } else {
        use_reference_ =
            use_reference_ || (pytorch && ys[i] <= 1) ||
            (given != 0.f && given * static_cast<float>(xs[i]) != static_cast<float>(ys[i]));
      }
    }
    const DataType xt = ctx->inputs[0].dtype;
    if (use_reference_) {
      std::string why;
      // The separable passes are float32 only.
      use_separable_ = xt == DataType::kFloat && separable_.Prepare(op_, *ctx, &why);
      return OkStatus();
    }
    return Guard(node_, [&] {
      const memory::data_type dt = xt == DataType::kUInt8  ? memory::data_type::u8
                                   : xt == DataType::kInt8 ? memory::data_type::s8
                                                           : memory::data_type::f32;
      src_ = PlainDesc(xs, dt);
      dst_ = PlainDesc(ys, dt);
      dnnl::primitive_attr attr;
      attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
      dnnl::resampling_forward::desc d(
          dnnl::prop_kind::forward_inference,
          nearest ? dnnl::algorithm::resampling_nearest : dnnl::algorithm::resampling_linear, src_,
          dst_);
      pd_ = dnnl::resampling_forward::primitive_desc(d, attr, Engine());
      prim_ = dnnl::resampling_forward(pd_);
      descs_ = PdDescs(pd_);
    });
  }

  size_t ScratchBytes() const override {
    if (use_separable_) return separable_.ScratchBytes();
    return use_reference_ ? 0 : pd_.scratchpad_desc().get_size();
  }

  Status Run(const ir::ComputeContext& ctx) const override {
    if (use_separable_) {
      separable_.Run(ctx.in(0).data<float>(), ctx.out(0).data<float>(), ctx.scratch);
      return OkStatus();
    }
    if (use_reference_) return op_.Compute(ctx);
    return ExecuteSrcDst(node_, prim_, descs_.scratchpad, src_, dst_, ctx);
  }

 private:
  ir::Node node_;
  const ir::Op& op_;
  bool use_reference_ = false, use_separable_ = false;
  SeparableResize separable_;
  memory::desc src_, dst_;
  dnnl::resampling_forward::primitive_desc pd_;
  PdDescs descs_;
  dnnl::resampling_forward prim_;
};

std::unique_ptr<runtime::Kernel> CreateResample(const ir::Node& node, const ir::Op& op) {
  return std::make_unique<ResampleOneDnn>(node, op);
}

// The separable passes alone, for what oneDNN cannot do by the attributes; the reference op
// where the values do not fit them (N or C resized).
class ResizeSeparable final : public runtime::Kernel {
 public:
  explicit ResizeSeparable(const ir::Op& op) : op_(op) {}

  std::string variant() const override { return use_reference_ ? "reference" : ""; }

  Status Prepare(runtime::PrepareContext* ctx) override {
    std::string why;
    use_reference_ = !separable_.Prepare(op_, *ctx, &why);
    return OkStatus();
  }

  size_t ScratchBytes() const override { return use_reference_ ? 0 : separable_.ScratchBytes(); }

  Status Run(const ir::ComputeContext& ctx) const override {
    if (use_reference_) return op_.Compute(ctx);
    separable_.Run(ctx.in(0).data<float>(), ctx.out(0).data<float>(), ctx.scratch);
    return OkStatus();
  }

 private:
  const ir::Op& op_;
  bool use_reference_ = false;
  SeparableResize separable_;
};

KernelSupport SupportsSeparable(const ir::Node&, const ir::Op& op,
                                const std::vector<TensorInfo>& in) {
  if (!AllFloat(in, {0})) return {false, "needs float32 X"};
  if (in[0].shape.empty()) return {false, "a scalar X"};
  for (int64_t d : in[0].shape)
    if (d <= 0) return {false, "empty input"};
  if (op.attrs<ops::ResizeAttrs>() == nullptr) return {false, "no Resize attributes"};
  return {true, ""};
}

std::unique_ptr<runtime::Kernel> CreateSeparable(const ir::Node&, const ir::Op& op) {
  return std::make_unique<ResizeSeparable>(op);
}

// Resize's roi/scales/sizes and Upsample's scales fix the output shape: constants only.
KILN_REGISTER_KERNEL(runtime::KernelDef{"cpu.resize.onednn",
                                        "Resize",
                                        "",
                                        10,
                                        ir::kMaxOpset,
                                        Backend::kCpu,
                                        10,
                                        SupportsResample,
                                        CreateResample,
                                        {1, 2, 3}});
KILN_REGISTER_KERNEL(runtime::KernelDef{"cpu.upsample.onednn",
                                        "Upsample",
                                        "",
                                        7,
                                        ir::kMaxOpset,
                                        Backend::kCpu,
                                        10,
                                        SupportsResample,
                                        CreateResample,
                                        {1}});
KILN_REGISTER_KERNEL(runtime::KernelDef{"cpu.resize.separable",
                                        "Resize",
                                        "",
                                        10,
                                        ir::kMaxOpset,
                                        Backend::kCpu,
                                        5,
                                        SupportsSeparable,
                                        CreateSeparable,
                                        {1, 2, 3}});
KILN_REGISTER_KERNEL(runtime::KernelDef{"cpu.upsample.separable",
                                        "Upsample",
                                        "",
                                        7,
                                        ir::kMaxOpset,
                                        Backend::kCpu,
                                        5,
                                        SupportsSeparable,
                                        CreateSeparable,
                                        {1}});

}  // namespace
}  // namespace kiln::backends::cpu
