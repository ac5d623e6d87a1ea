// cpu.qconv.onednn: kiln.QConv (src/ops/quant/qconv.cc) as a oneDNN int8 convolution:
// uint8/int8 source, int8 weights, float32 destination (or uint8/int8 when the QConv absorbed a
// QuantizeLinear: a last linear post-op divides by y_scale after the activation, a per-tensor
// y_zero_point is oneDNN's destination zero point, oneDNN rounds to nearest even and saturates;
// per-channel y_scale: a binary multiply post-op by 1/y_scale[m] instead, then, for non-zero
// per-channel zero points, a binary add post-op of y_zero_point[m] before the rounding), output
// scales x_scale * w_scale[m] per output channel, float32 bias (divided by those scales: oneDNN 2.6
// adds the bias before scaling), the residual Z as a sum post-op and the activation as an eltwise
// post-op.
//
// oneDNN picks the source, weight and destination layouts (format_tag::any); the int8 weights are
// reordered once (oneDNN's reorder also applies what its ISA needs: the s8-source compensation,
// with halved weights on CPUs without VNNI). With a uint8 source on a CPU without VNNI, kiln
// halves the weights itself (7 bits, scales doubled): vpmaddubsw's 16-bit pair sums would
// saturate otherwise (ONNX Runtime's "reduce_range" does the same for this reason). The source
// arrives from QuantizeLinear, plain or in the layout of the float value it quantized
// (cpu.quantizelinear.loop keeps it), and is reordered at run time only when the primitive wants
// another layout. A non-zero x_zero_point (ONNX Runtime's asymmetric activations) is oneDNN's
// run-time source zero point; an int8 source with one is fed as uint8 (sign bit flipped, zero
// point + 128: exact), the uint8 path being oneDNN's fast one; so is an int8 source without one
// of a depthwise convolution on a CPU without VNNI (oneDNN would halve its weights). A channel
// with a zero output scale is its bias alone (weights zeroed, scale 1). Limits: 1-3 spatial dims;
// QConvAdd: a convolution activation oneDNN can apply in A's units (AppendActivationInUnits).
//
// cpu.qconvdw.onednn: kiln.QConvDw (a 1x1 QConv and the depthwise QConv reading its output) as
// one oneDNN int8 1x1 convolution with a depthwise post-op (post_ops::append_dw): the 1x1's
// output A is quantized row by row into a small buffer the depthwise half reads while it is in
// cache, never written whole. A is rounded and saturated as the QConv writes it (output scales,
// activation, 1/a_scale), the depthwise half has its own scales a_scale * wd_scale[m] (its bias
// divided by them, as the 1x1's), then its activation and 1/y_scale: the two QConvs' arithmetic
// (QConvDwKernelTest compares them bit for bit). Limits (supports()): 2-D, an ungrouped 1x1 first
// half with stride 1 and no padding, a 3x3 depthwise half with equal strides (1 or 2) and pads 1
// (the pass fuses nothing else). What the depthwise post-op cannot compute exactly (zero points,
// odd depthwise weights under an int8 A without VNNI, a zero depthwise scale with a bias:
// FusedDwExact) runs as the two QConvs one after the other, A in scratch (variant "unfused").
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backends/cpu/onednn_common.h"
#include "ops/nn/conv.h"
#include "ops/quant/qconv.h"
#include "ops/quant/quant_common.h"

namespace kiln::backends::cpu {
namespace {

using dnnl::memory;
using runtime::KernelSupport;
using runtime::TensorInfo;

// Sets the rows `rows` of int8 weights [M, ...] to 0 (channels whose output is their bias
// alone); returns the packed weights' cache variant naming them.
std::string ZeroedRows(Tensor* w, const std::vector<int64_t>& rows) {
  const int64_t per = w->numel() / std::max<int64_t>(1, w->shape()[0]);
  std::string variant = "zeroed";
  for (int64_t r : rows) {
    std::memset(w->data<int8_t>() + r * per, 0, static_cast<size_t>(per));
    variant += "," + std::to_string(r);
  }
  return variant;
}

class QConvOneDnn final : public runtime::Kernel {
 public:
  QConvOneDnn(const ir::Node& node, const ir::Op& op)
      : node_(node),
        a_(runtime::AttrsOf<ops::ConvAttrs>(op)),
        add_(node.op_type == "QConvAdd"),
        dw_(node.op_type == "QConvDw"),
        sum_relu_(add_ && runtime::AttrsOf<ops::QConvAddAttrs>(op).sum_relu),
        sum_in_(add_ ? 9 : 6) {}
  // A plain QConv with these attributes (QConvDw's halves when they run one after the other).
  QConvOneDnn(const ir::Node& node, const ops::ConvAttrs& a) : node_(node), a_(a) {}

  bool AcceptsLayout(size_t input) const override {
    return input == 0 || static_cast<int>(input) == sum_in_;
  }

  Status Prepare(runtime::PrepareContext* ctx) override {
    return Guard(node_, [&] { DoPrepare(ctx); });
  }

  std::string variant() const override { return first_ ? "unfused" : ""; }

  int InPlaceInput() const override { return has_sum_ && z_desc_ == z_dst_desc_ ? sum_in_ : -1; }

  // Scratch: X as uint8 (an int8 X fed as uint8), X reordered, oneDNN's scratchpad.
  // QConvDw run as two QConvs: A, then the larger of the two halves' scratch.
  size_t ScratchBytes() const override {
    if (first_) return a_bytes_ + std::max(first_->ScratchBytes(), second_->ScratchBytes());
    return FlipBytes() + ReorderedBytes(src_reorder_, descs_.src) +
           pd_.scratchpad_desc().get_size();
  }

  Status Run(const ir::ComputeContext& ctx) const override {
    return Guard(node_, [&] {
      char* scratch = static_cast<char*>(ctx.scratch);
      if (first_) {
        first_->RunOn(ctx.in(0).raw(), scratch, scratch + a_bytes_, nullptr);
        second_->RunOn(scratch, ctx.out(0).raw(), scratch + a_bytes_, nullptr);
        return;
      }
      RunOn(ctx.in(0).raw(), ctx.out(0).raw(), scratch, &ctx);
    });
  }

 private:
  // One run from X (`x_data`) into Y (`y_data`); `ctx` gives the residual when there is one.
  void RunOn(const void* x_data, void* y_data, char* scratch, const ir::ComputeContext* ctx) const {
    if (x_to_u8_) x_data = Int8AsUint8(x_data, src_in_desc_.get_size(), scratch);
    scratch += FlipBytes();
    const void* src_data = InputAs(src_reorder_, src_in_desc_, descs_.src, x_data, scratch);
    if (has_sum_) StageResidual(ctx->in(sum_in_), &ctx->out(0), z_desc_, z_dst_desc_, z_reorder_);
    if (flip_r_) Int8AsUint8(y_data, z_dst_desc_.get_size(), y_data);
    RunMemory src(descs_.src, src_data), dst(descs_.dst, y_data),
        sp(descs_.scratchpad, scratch + ReorderedBytes(src_reorder_, descs_.src));
    Execute(prim_, {{DNNL_ARG_SRC, src.get()},
                    {DNNL_ARG_WEIGHTS, weights_.get()},
                    {DNNL_ARG_BIAS, bias_.get(true)},
                    {DNNL_ARG_DST, dst.get()},
                    {DNNL_ARG_SCRATCHPAD, sp.get()},
                    {DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, x_zero_.get(true)},
                    {DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_DST, y_zero_.get(true)},
                    {DNNL_ARG_ATTR_MULTIPLE_POST_OP(std::max(y_post_op_, 0)) | DNNL_ARG_SRC_1,
                     y_inv_scales_.get(true)},
                    {DNNL_ARG_ATTR_MULTIPLE_POST_OP(std::max(y_zero_post_op_, 0)) | DNNL_ARG_SRC_1,
                     y_zeros_.get(true)},
                    {DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_WEIGHTS, dw_weights_.get(true)},
                    {DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_BIAS, dw_bias_.get(true)}});
    ThreadStream().wait();
  }

  // QConvDw: whether the depthwise post-op computes these values exactly. It has no zero points
  // (X's, A's or Y's), its depthwise weights are halved for an int8 A without VNNI (exact for
  // even ones only), and a zero scale loses its bias (oneDNN 2.6 scales accumulator + bias).
  bool FusedDwExact(const runtime::PrepareContext& ctx) const {
    auto zero = [&](int i) {
      return !node_.HasInput(i) || ops::quant::ReadQuant(*ctx.constants[i], 0) == 0;
    };
    if (!zero(2) || !zero(8) || !zero(13)) return false;
    const Tensor& wd = *ctx.constants[9];
    if (ctx.constants[8]->dtype() == DataType::kInt8 && !Int8Vnni())
      for (int64_t i = 0; i < wd.numel(); ++i)
        if (wd.data<int8_t>()[i] % 2 != 0) return false;
    if (node_.HasInput(11)) {
      const float sa = ctx.constants[7]->data<float>()[0];
      const float* swd = ctx.constants[10]->data<float>();
      for (int64_t i = 0; i < wd.shape()[0]; ++i)
        if (sa * swd[i] == 0.f) return false;
    }
    return true;
  }

  // QConvDw as its two QConvs, A held in scratch between them: for what the depthwise post-op
  // cannot compute exactly (FusedDwExact).
  void PrepareUnfused(runtime::PrepareContext* ctx) {
    const TensorInfo& x = ctx->inputs[0];
    const Shape& ws = ctx->inputs[3].shape;
    const int64_t m = ws[0];
    const DataType a_type = ctx->constants[8]->dtype();
    // The 1x1 QConv: inputs 0-8 are QConv's (y_scale and y_zero_point: A's).
    ir::Node first = node_;
    first.op_type = "QConv";
    first.inputs.assign(node_.inputs.begin(), node_.inputs.begin() + 9);
    first_ = std::make_unique<QConvOneDnn>(first, a_);
    runtime::PrepareContext c1 = *ctx;
    c1.inputs.assign(ctx->inputs.begin(), ctx->inputs.begin() + 9);
    c1.constants.assign(ctx->constants.begin(), ctx->constants.begin() + 9);
    c1.outputs = {TensorInfo{a_type, {x.shape[0], m, x.shape[2], x.shape[3]}, nullptr}};
    first_->DoPrepare(&c1);
    const TensorInfo a_info = c1.outputs[0];
    a_bytes_ = Align64(a_info.layout ? a_info.layout->bytes()
                                     : static_cast<size_t>(NumElements(a_info.shape)));
    // The depthwise QConv on A: A, a_scale, a_zero_point, Wd, wd_scale, Bd, -, y_scale, y_zero.
    const std::vector<int> from = {-1, 7, 8, 9, 10, 11, -1, 12, 13};
    ir::Node second = first;
    runtime::PrepareContext c2 = *ctx;
    c2.inputs.assign(9, TensorInfo{});
    c2.constants.assign(9, nullptr);
    for (size_t i = 0; i < from.size(); ++i) {
      if (from[i] < 0) continue;
      second.inputs[i] = node_.inputs[from[i]];
      c2.inputs[i] = ctx->inputs[from[i]];
      c2.constants[i] = ctx->constants[from[i]];
    }
    second.inputs[0] = node_.inputs[0];  // any id: A is no value of the graph
    second.inputs[6] = -1;
    c2.inputs[0] = a_info;
    ops::ConvAttrs dw;
    dw.conv.group = m;
    dw.conv.window.strides = node_.GetInts("dw_strides", {1, 1});
    dw.conv.window.pads = node_.GetInts("dw_pads", {1, 1, 1, 1});
    dw.conv.window.dilations = {1, 1};
    if (!ops::ParseActivation(node_, &dw.act, "dw_").ok())
      throw dnnl::error(dnnl_unimplemented, "QConvDw: the depthwise activation has no post-op");
    second_ = std::make_unique<QConvOneDnn>(second, dw);
    second_->DoPrepare(&c2);
    ctx->outputs[0].layout = c2.outputs[0].layout;
  }

  void DoPrepare(runtime::PrepareContext* ctx) {
    if (dw_ && !FusedDwExact(*ctx)) {
      PrepareUnfused(ctx);
      return;
    }
    const TensorInfo& x = ctx->inputs[0];
    const Shape& ws = ctx->inputs[3].shape;
    const Shape& ys = ctx->outputs[0].shape;
    const ConvGeometry geo = ConvGeometryFor(a_.conv, x.shape, ws);
    // X's zero point: oneDNN's run-time source zero point. oneDNN 2.6 runs an int8 source with
    // one on a reference convolution: such X is fed as uint8 instead, v + 128, zero point + 128.
    x_zero_value_ = 0;
    if (node_.HasInput(2)) {
      const Tensor& zp = *ctx->constants[2];
      x_zero_value_ = ops::quant::ReadQuant(zp, 0);
    }
    const int64_t group = a_.conv.group, m = ws[0];
    // Depthwise convolutions (one input channel per group) of a uint8 source are exact without
    // VNNI: oneDNN's depthwise int8 kernels widen to 32 bits before multiplying (QConvKernelTest's
    // full-range cases). For an int8 source oneDNN halves the weights there too (its s8-source
    // compensation): such X, zero point or not, is fed as uint8 (zero point 128: exact).
    const bool depthwise = group > 1 && ws[1] == 1 && m == group;
    x_to_u8_ = x.dtype == DataType::kInt8 && (x_zero_value_ != 0 || (depthwise && !Int8Vnni()));
    if (x_to_u8_) x_zero_value_ += 128;
    const bool src_u8 = x.dtype == DataType::kUInt8 || x_to_u8_;
    const memory::dims& wdims = geo.wdims;
    const memory::dims &strides = geo.strides, &dil = geo.dilations, &pl = geo.pad_begin,
                       &pr = geo.pad_end;

    const float sx = ctx->constants[1]->data<float>()[0];
    const float* sw = ctx->constants[4]->data<float>();
    // Without VNNI, oneDNN multiplies uint8 by int8 with vpmaddubsw, whose 16-bit pair sums
    // saturate for 255 * 127 * 2: the weights are halved (rounded to even, 7 bits) and their
    // scales doubled. (An int8 source is oneDNN's own case: it halves the weights itself.)
    // Depthwise convolutions of a uint8 source are exempt (above).
    const bool halve = src_u8 && !Int8Vnni() && !depthwise;
    const float wmul = halve ? 2.f : 1.f;
    std::vector<float> scales(static_cast<size_t>(m));
    for (int64_t i = 0; i < m; ++i) scales[i] = sx * sw[i] * wmul;
    // A quantized output: after the activation (which works on float values: Clip's bounds,
    // SiLU, ... are not scale-invariant) a linear post-op divides by y_scale; oneDNN then rounds
    // to nearest even and saturates.
    const bool quantized = node_.HasInput(7);
    const bool y_channels = quantized && ctx->constants[7]->numel() > 1;
    const float sy = quantized ? ctx->constants[7]->data<float>()[0] : 1.f;

    dnnl::post_ops ops;
    has_sum_ = add_ || node_.HasInput(6);
    if (has_sum_ && !add_) ops.append_sum(1.f);
    if (add_) {
      // QConvAdd: A = the convolution quantized as the QConv wrote it, dequantized again, plus R
      // dequantized (the sum post-op reads R, in its own type, where Y goes); the sum's Relu;
      // 1 / y_scale and y_zero_point as a QConv's quantized output. The output scales and the
      // bias put the value in A's units without its zero point (below), so the convolution's
      // own activation (Relu, LeakyRelu, SiLU or none: fuse_qconv_add's condition) is applied
      // in those units (AppendActivationInUnits), rounding
      // to nearest even and clipping to A's range shifted by za give A - za, and one
      // eltwise_linear is enough (oneDNN 2.6's AVX2 int8 convolution gives a second one the
      // first one's alpha and beta).
      const Tensor& za_t = *ctx->constants[8];
      const float za = static_cast<float>(ops::quant::ReadQuant(za_t, 0));
      const bool a_u8 = za_t.dtype() == DataType::kUInt8;
      // The convolution's activation on values in A's units (SiLU: swish with alpha sa).
      if (!AppendActivationInUnits(a_.act, sy, &ops))
        throw dnnl::error(dnnl_unimplemented,
                          "QConvAdd: this activation cannot run in the quantized output's units");
      ops.append_eltwise(1.f, dnnl::algorithm::eltwise_round, 0.f, 0.f);
      ops.append_eltwise(1.f, dnnl::algorithm::eltwise_clip, (a_u8 ? 0.f : -128.f) - za,
                         (a_u8 ? 255.f : 127.f) - za);
      a_grid_ = true;
      const DataType r_type = ctx->inputs[9].dtype;
      int32_t zr = 0;
      if (node_.HasInput(11)) {
        const Tensor& t = *ctx->constants[11];
        zr = ops::quant::ReadQuant(t, 0);
      }
      // oneDNN 2.6's AVX2 int8 convolutions read the sum operand in the destination's type
      // whatever the sum's data type says: an R of the other 8-bit type has its sign bit
      // flipped where Y goes (exact, with the zero point moved by 128).
      flip_r_ = r_type != ctx->outputs[0].dtype;
      if (flip_r_) zr += r_type == DataType::kInt8 ? 128 : -128;
      // In A's units: (A - za) + (sr / sa) (R - zr); the Relu; times sa / y_scale.
      ops.append_sum(ctx->constants[10]->data<float>()[0] / sy, zr);
      if (sum_relu_) ops.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
      ops.append_eltwise(1.f, dnnl::algorithm::eltwise_linear,
                         sy / ctx->constants[12]->data<float>()[0], 0.f);
    } else {
      if (quantized && !y_channels)
        AppendScaledActivation(a_.act, 1.f / sy, &ops);
      else
        AppendActivation(a_.act, &ops);
    }
    if (dw_) AppendDepthwise(ctx, sy, &ops);
    if (y_channels && !add_) {
      // One 1/y_scale per output channel, broadcast over the rest: [1, M, 1, ...].
      memory::dims d(ys.size(), 1);
      d[1] = m;
      const memory::desc plain = PlainDesc(Shape(d.begin(), d.end()));
      y_post_op_ = ops.len();
      ops.append_binary(dnnl::algorithm::binary_mul, plain);
      y_inv_copy_ = Tensor::Empty(DataType::kFloat, {m});
      const float* syp = ctx->constants[7]->data<float>();
      for (int64_t i = 0; i < m; ++i) y_inv_copy_.data<float>()[i] = 1.f / syp[i];
      y_inv_scales_ = memory(plain, Engine(), y_inv_copy_.raw());
      // Per-channel zero points: added in float before oneDNN rounds (round(v + z) is
      // round(v) + z but for a value exactly halfway and an odd z, within the one-step
      // tolerance of the division by the scale).
      const Tensor& zp = *ctx->constants[8];
      y_zero_copy_ = Tensor::Empty(DataType::kFloat, {m});
      bool any = false;
      for (int64_t i = 0; i < m; ++i) {
        const float z =
            zp.dtype() == DataType::kUInt8 ? zp.data<uint8_t>()[i] : zp.data<int8_t>()[i];
        y_zero_copy_.data<float>()[i] = z;
        any = any || z != 0.f;
      }
      if (any) {
        y_zero_post_op_ = ops.len();
        ops.append_binary(dnnl::algorithm::binary_add, plain);
        y_zeros_ = memory(plain, Engine(), y_zero_copy_.raw());
      }
    }
    if (a_grid_)
      for (float& v : scales) v /= sy;
    // A channel whose output scale is 0 (a zero w_scale[m]) is its bias alone: oneDNN 2.6 scales
    // (accumulator + bias), so its weights are zeroed (the accumulator is 0, the source zero
    // point's compensation too) and its scale set to 1 (the bias goes in as it is).
    const bool has_bias = node_.HasInput(5);
    std::vector<int64_t> zeroed;
    if (has_bias)
      for (int64_t i = 0; i < m; ++i)
        if (scales[i] == 0.f) {
          scales[i] = 1.f;
          zeroed.push_back(i);
        }
    dnnl::primitive_attr attr;
    attr.set_output_scales(1 << 1, scales);
    if (x_zero_value_ != 0) {
      attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
      x_zero_ =
          memory({{1}, memory::data_type::s32, memory::format_tag::x}, Engine(), &x_zero_value_);
    }
    // A per-tensor y_zero_point (ONNX Runtime's asymmetric activations before a residual Add):
    // oneDNN adds it after the post-ops, before rounding and saturating.
    y_zero_value_ = 0;
    if (quantized && !y_channels) {
      const Tensor& zp = *ctx->constants[add_ ? 13 : 8];
      y_zero_value_ = ops::quant::ReadQuant(zp, 0);
    }
    if (y_zero_value_ != 0) {
      attr.set_zero_points(DNNL_ARG_DST, 0, {DNNL_RUNTIME_S32_VAL});
      y_zero_ =
          memory({{1}, memory::data_type::s32, memory::format_tag::x}, Engine(), &y_zero_value_);
    }
    attr.set_post_ops(ops);
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);

    const memory::data_type sdt = src_u8 ? memory::data_type::u8 : memory::data_type::s8;
    src_in_desc_ = x.layout != nullptr ? InputDesc(x) : PlainDesc(x.shape, sdt);
    src_in_desc_.data.data_type = static_cast<dnnl_data_type_t>(sdt);  // flipped: same layout
    memory::desc src_any(Dims(x.shape), sdt, memory::format_tag::any);
    memory::desc w_any(wdims, memory::data_type::s8, memory::format_tag::any);
    // QConvDw: the convolution descriptor's destination is A (the depthwise post-op's own
    // destination type is Y's); oneDNN's dst_desc() is then Y's.
    const DataType a_type = dw_ ? ctx->constants[8]->dtype() : ctx->outputs[0].dtype;
    const memory::data_type ddt = !quantized                   ? memory::data_type::f32
                                  : a_type == DataType::kUInt8 ? memory::data_type::u8
                                                               : memory::data_type::s8;
    Shape a_shape = ys;
    if (dw_) a_shape = {x.shape[0], m, x.shape[2], x.shape[3]};
    memory::desc dst_any(Dims(a_shape), ddt, memory::format_tag::any);
    memory::desc b_desc({m}, memory::data_type::f32, memory::format_tag::x);
    auto desc = has_bias
                    ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                                      dnnl::algorithm::convolution_direct, src_any,
                                                      w_any, b_desc, dst_any, strides, dil, pl, pr)
                    : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                                      dnnl::algorithm::convolution_direct, src_any,
                                                      w_any, dst_any, strides, dil, pl, pr);
    pd_ = dnnl::convolution_forward::primitive_desc(desc, attr, Engine());
    prim_ = dnnl::convolution_forward(pd_);
    descs_ = PdDescs(pd_);
    if (pd_.src_desc() != src_in_desc_) src_reorder_ = MakeReorder(src_in_desc_, pd_.src_desc());

    const Tensor& w = *ctx->constants[3];
    const memory::desc w_plain = geo.PlainWeights(ws, group, memory::data_type::s8);
    Tensor changed = halve ? HalvedInt8(w) : Tensor();
    std::string variant = halve ? "halved" : "";
    if (!zeroed.empty()) {
      if (!halve) changed = w.Clone();
      variant += ZeroedRows(&changed, zeroed);
    }
    weights_ = PackWeights(w_plain, w, pd_.weights_desc(), &packed_w_, ctx->weights,
                           variant.empty() ? nullptr : &changed, variant);
    if (has_bias) {
      // oneDNN 2.6 scales (accumulator + bias): the bias goes in divided by the output scale.
      bias_copy_ = Tensor::Empty(DataType::kFloat, {m});
      const float* b = ctx->constants[5]->data<float>();
      for (int64_t i = 0; i < m; ++i) {
        // In A's units the bias is b / a_scale (the scales are already divided by it).
        const float bi = b[i] / (a_grid_ ? sy : 1.f);
        bias_copy_.data<float>()[i] = bi / scales[i];
      }
      bias_ = memory(b_desc, Engine(), bias_copy_.raw());
    }
    if (dw_) PackDepthwise(ctx);
    if (has_sum_) {
      // The residual in the destination's layout and in its own type (R may be int8 for a
      // uint8 Y: the sum post-op reads it as such).
      z_desc_ = InputDesc(ctx->inputs[sum_in_]);
      z_dst_desc_ = pd_.dst_desc();
      z_dst_desc_.data.data_type = z_desc_.data.data_type;
      if (z_desc_ != z_dst_desc_) z_reorder_ = MakeReorder(z_desc_, z_dst_desc_);
    }
    ctx->outputs[0].layout = LayoutFor(pd_.dst_desc(), ys);
  }

  size_t FlipBytes() const { return x_to_u8_ ? (src_in_desc_.get_size() + 63) / 64 * 64 : 0; }

  // QConvDw: checks the limits and appends the depthwise post-op (scales a_scale * wd_scale[m])
  // and its activation and 1/y_scale; `sa`: a_scale.
  void AppendDepthwise(runtime::PrepareContext* ctx, float sa, dnnl::post_ops* ops) {
    const Shape& x = ctx->inputs[0].shape;
    const Shape& w = ctx->inputs[3].shape;
    const Shape& wd = ctx->inputs[9].shape;
    const std::vector<int64_t> strides = node_.GetInts("dw_strides", {1, 1});
    const std::vector<int64_t> pads = node_.GetInts("dw_pads", {1, 1, 1, 1});
    ops::Activation dw_act;
    const bool one_by_one = x.size() == 4 && w.size() == 4 && w[2] == 1 && w[3] == 1;
    const ConvGeometry geo = one_by_one ? ConvGeometryFor(a_.conv, x, w) : ConvGeometry{};
    const bool fits = one_by_one && a_.conv.group == 1 && geo.strides == memory::dims{1, 1} &&
                      geo.pad_begin == memory::dims{0, 0} && geo.pad_end == memory::dims{0, 0} &&
                      wd.size() == 4 && wd[2] == 3 && wd[3] == 3 && strides.size() == 2 &&
                      strides[0] == strides[1] && (strides[0] == 1 || strides[0] == 2) &&
                      pads == std::vector<int64_t>{1, 1, 1, 1} &&
                      ops::quant::ReadQuant(*ctx->constants[8], 0) == 0 &&
                      ops::quant::ReadQuant(*ctx->constants[13], 0) == 0 && x_zero_value_ == 0 &&
                      ops::ParseActivation(node_, &dw_act, "dw_").ok();
    if (!fits)
      throw dnnl::error(dnnl_unimplemented,
                        "QConvDw: only a 2-D 1x1 convolution then a 3x3 depthwise one with "
                        "stride 1 or 2, pads 1 and no zero points");
    const int64_t m = wd[0];
    const float* swd = ctx->constants[10]->data<float>();
    dw_scales_.assign(static_cast<size_t>(m), 0.f);
    for (int64_t i = 0; i < m; ++i) dw_scales_[i] = sa * swd[i];
    const memory::data_type y_dt =
        ctx->outputs[0].dtype == DataType::kUInt8 ? memory::data_type::u8 : memory::data_type::s8;
    ops->append_dw(memory::data_type::s8, memory::data_type::f32, y_dt, 3, strides[0], 1, 1 << 1,
                   dw_scales_);
    if (!AppendScaledActivation(dw_act, 1.f / ctx->constants[12]->data<float>()[0], ops))
      throw dnnl::error(dnnl_unimplemented, "QConvDw: the depthwise activation has no post-op");
  }

  // QConvDw: the depthwise weights in the layout the primitive wants, and its bias (zero when
  // absent) divided by its scales (oneDNN 2.6 scales the accumulator plus the bias).
  void PackDepthwise(runtime::PrepareContext* ctx) {
    const Tensor& wd = *ctx->constants[9];
    const int64_t m = wd.shape()[0];
    const memory::desc plain({m, 1, 1, wd.shape()[2], wd.shape()[3]}, memory::data_type::s8,
                             memory::format_tag::goihw);
    dw_weights_ = PackWeights(
        plain, wd,
        pd_.query_md(dnnl::query::exec_arg_md, DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_WEIGHTS),
        &packed_dw_, ctx->weights);
    dw_bias_copy_ = Tensor::Empty(DataType::kFloat, {m});
    const float* b = node_.HasInput(11) ? ctx->constants[11]->data<float>() : nullptr;
    for (int64_t i = 0; i < m; ++i)
      dw_bias_copy_.data<float>()[i] =
          b != nullptr && dw_scales_[i] != 0.f ? b[i] / dw_scales_[i] : 0.f;
    dw_bias_ =
        memory(pd_.query_md(dnnl::query::exec_arg_md, DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_BIAS),
               Engine(), dw_bias_copy_.raw());
  }

  ir::Node node_;
  ops::ConvAttrs a_;
  bool add_ = false, dw_ = false, sum_relu_ = false, flip_r_ = false, a_grid_ = false;
  std::vector<float> dw_scales_;
  Tensor packed_dw_, dw_bias_copy_;
  memory dw_weights_, dw_bias_;
  int sum_in_ = 6;  // the residual: Z (QConv, float32) or R (QConvAdd, 8-bit)
  dnnl::convolution_forward::primitive_desc pd_;
  PdDescs descs_;
  dnnl::convolution_forward prim_;
  memory::desc src_in_desc_, z_desc_, z_dst_desc_;
  dnnl::reorder src_reorder_, z_reorder_;
  Tensor packed_w_, bias_copy_, y_inv_copy_, y_zero_copy_;
  memory weights_, bias_, y_inv_scales_, y_zeros_, x_zero_, y_zero_;
  int32_t x_zero_value_ = 0, y_zero_value_ = 0;
  bool x_to_u8_ = false;
  int y_post_op_ = -1, y_zero_post_op_ = -1;
  bool has_sum_ = false;
  // QConvDw run as two QConvs (PrepareUnfused), A's scratch bytes between them.
  std::unique_ptr<QConvOneDnn> first_, second_;
  size_t a_bytes_ = 0;
};

KernelSupport SupportsQConv(const ir::Node& node, const ir::Op& op,
                            const std::vector<TensorInfo>& in) {
  if (in[0].dtype != DataType::kUInt8 && in[0].dtype != DataType::kInt8)
    return {false, "needs uint8 or int8 X"};
  if (in[0].shape.size() < 3 || in[0].shape.size() > 5) return {false, "needs 1-3 spatial dims"};
  if (node.HasInput(5) && in[5].dtype != DataType::kFloat) return {false, "needs float32 B"};
  const ops::Activation& act = runtime::AttrsOf<ops::ConvAttrs>(op).act;
  dnnl::post_ops probe;
  if (!AppendActivation(act, &probe))
    return {false, std::string("activation '") + ops::ActivationName(act.kind) +
                       "' has no oneDNN post-op"};
  return {true, ""};
}

// QConvAdd: QConv's conditions, and the convolution's activation in A's units (a post-op before
// the rounding to A's grid; fuse_qconv_add fuses only those).
KernelSupport SupportsQConvAdd(const ir::Node& node, const ir::Op& op,
                               const std::vector<TensorInfo>& in) {
  KernelSupport k = SupportsQConv(node, op, in);
  if (!k.ok) return k;
  const ops::Activation& act = runtime::AttrsOf<ops::ConvAttrs>(op).act;
  dnnl::post_ops probe;
  if (!AppendActivationInUnits(act, 1.f, &probe))
    return {false, std::string("activation '") + ops::ActivationName(act.kind) +
                       "' has no post-op in the quantized output's units"};
  return {true, ""};
}

// QConvDw: QConv's conditions, and both halves' activations as post-ops.
KernelSupport SupportsQConvDw(const ir::Node& node, const ir::Op& op,
                              const std::vector<TensorInfo>& in) {
  KernelSupport k = SupportsQConv(node, op, in);
  if (!k.ok) return k;
  if (in[0].shape.size() != 4) return {false, "needs 2-D X"};
  // The shapes the depthwise post-op computes (zero points and weights: see FusedDwExact).
  const Shape& w = in[3].shape;
  const Shape& wd = in[9].shape;
  const ops::ConvAttrs& a = runtime::AttrsOf<ops::ConvAttrs>(op);
  if (w.size() != 4 || w[2] != 1 || w[3] != 1 || a.conv.group != 1)
    return {false, "the first convolution is no ungrouped 1x1 one"};
  try {
    const ConvGeometry geo = ConvGeometryFor(a.conv, in[0].shape, w);
    if (geo.strides != memory::dims{1, 1} || geo.pad_begin != memory::dims{0, 0} ||
        geo.pad_end != memory::dims{0, 0})
      return {false, "the 1x1 convolution has strides or pads"};
  } catch (const dnnl::error&) {
    return {false, "the 1x1 convolution's window does not fit X"};
  }
  const std::vector<int64_t> strides = node.GetInts("dw_strides", {1, 1});
  if (wd.size() != 4 || wd[2] != 3 || wd[3] != 3 || strides.size() != 2 ||
      strides[0] != strides[1] || (strides[0] != 1 && strides[0] != 2) ||
      node.GetInts("dw_pads", {1, 1, 1, 1}) != std::vector<int64_t>{1, 1, 1, 1})
    return {false, "the depthwise convolution is no 3x3 one with stride 1 or 2 and pads 1"};
  ops::Activation dw_act;
  dnnl::post_ops probe;
  if (!ops::ParseActivation(node, &dw_act, "dw_").ok() || !AppendActivation(dw_act, &probe))
    return {false, "the depthwise activation has no oneDNN post-op"};
  return {true, ""};
}

// x_scale, x_zero_point, Wq, w_scale, B, y_scale and y_zero_point must be constant.
KILN_REGISTER_KERNEL(runtime::KernelDef{"cpu.qconv.onednn",
                                        "QConv",
                                        "kiln",
                                        1,
                                        1,
                                        Backend::kCpu,
                                        10,
                                        SupportsQConv,
                                        CreateKernel<QConvOneDnn>,
                                        {1, 2, 3, 4, 5, 7, 8}});
// QConvAdd: also a_scale, a_zero_point, r_scale, r_zero_point, y_scale and y_zero_point.
KILN_REGISTER_KERNEL(runtime::KernelDef{"cpu.qconvadd.onednn",
                                        "QConvAdd",
                                        "kiln",
                                        1,
                                        1,
                                        Backend::kCpu,
                                        10,
                                        SupportsQConvAdd,
                                        CreateKernel<QConvOneDnn>,
                                        {1, 2, 3, 4, 5, 7, 8, 10, 11, 12, 13}});
// QConvDw: also Wd, wd_scale, Bd, y_scale and y_zero_point.
KILN_REGISTER_KERNEL(runtime::KernelDef{"cpu.qconvdw.onednn",
                                        "QConvDw",
                                        "kiln",
                                        1,
                                        1,
                                        Backend::kCpu,
                                        10,
                                        SupportsQConvDw,
                                        CreateKernel<QConvOneDnn>,
                                        {1, 2, 3, 4, 5, 7, 8, 9, 10, 11, 12, 13}});

}  // namespace
}  // namespace kiln::backends::cpu
