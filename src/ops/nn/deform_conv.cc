// DeformConv (19-24): deformable convolution (torchvision.ops.deform_conv2d), 2-D.
//
// Inputs X [N, C, H, W], W [M, C / group, kH, kW], offset [N, offset_group * kH * kW * 2, oH, oW],
// optional B [M] and mask [N, offset_group * kH * kW, oH, oW] (default 1). Attributes dilations,
// group, kernel_shape, offset_group, pads, strides as Conv's (no auto_pad). The output size is
// Conv's; offset's and mask's spatial dims must equal it. Kernel tap (i, j) of output (oh, ow)
// samples input channel c (offset group c / (C / offset_group)) at
//   h = oh * stride_h - pad_top + i * dilation_h + offset[.., ((g * kH + i) * kW + j) * 2, oh, ow]
//   w = ow * stride_w - pad_left + j * dilation_w + offset[.., ((g * kH + i) * kW + j) * 2 + 1, ..]
// by bilinear interpolation with taps outside the input reading 0, times the mask; the output is
// the grouped convolution of those samples with W, plus B. This is ONNX's reference (GridSample,
// align_corners=1, zeros padding) and torchvision's arithmetic.
// Reference algorithm: per image and offset group the sampling taps are built once and shared by
// the group's channels; the sampled columns [C/group * kH * kW, oH * oW] are multiplied by W with
// double accumulation. float32 only; 1-D and 3-D inputs are refused with that reason.
#include "ops/nn/deform_conv.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/common.h"
#include "ops/op_cases.h"

namespace kiln::ops {
namespace {

using ir::ComputeContext;
using ir::InferContext;
using ir::Node;

// One bilinear sample of a (tap, output position): 4 input offsets and weights (mask included);
// a tap outside the input has weight 0.
struct Sample {
  int64_t pos[4];
  double wt[4];
};

class DeformConvOp final : public ir::Op {
 public:
  explicit DeformConvOp(const Node& node) : ir::Op(node) {}

  static StatusOr<std::unique_ptr<ir::Op>> Create(const Node& node) {
    auto op = std::unique_ptr<DeformConvOp>(new DeformConvOp(node));
    if (node.HasAttr("auto_pad"))
      return ir::AttrError(node, "DeformConv has no auto_pad attribute; got one");
    DeformConvAttrs& a = op->a_;
    KILN_RETURN_IF_ERROR(nn::ParseWindowAttrs(node, /*allow_dilations=*/true, &a.window));
    a.group = node.GetInt("group", 1);
    a.offset_group = node.GetInt("offset_group", 1);
    if (a.group < 1 || a.offset_group < 1)
      return ir::AttrError(node, "group and offset_group must be >= 1; got " +
                                     std::to_string(a.group) + " and " +
                                     std::to_string(a.offset_group));
    return std::unique_ptr<ir::Op>(std::move(op));
  }

  const ir::OpAttrs* attributes() const override { return &a_; }

  Status Infer(InferContext& ctx) const override {
    for (size_t i = 0; i < ctx.num_inputs(); ++i)
      if (ctx.has_input(i)) KILN_RETURN_IF_ERROR(ctx.ExpectDtype(i, {DataType::kFloat}));
    nn::Window w;
    std::string why = DeformConvWindow(a_, ctx.shape(0), ctx.shape(1), &w);
    if (!why.empty()) return ctx.Error(why);
    const Shape& x = ctx.shape(0);
    const int64_t m = ctx.shape(1)[0], taps = w.kernel[0] * w.kernel[1];
    const Shape want_offset{x[0], a_.offset_group * taps * 2, w.out[0], w.out[1]};
    if (ctx.shape(2) != want_offset)
      return ctx.Error("offset must be " + ShapeToString(want_offset) + "; got " +
                       ShapeToString(ctx.shape(2)));
    if (ctx.has_input(3) && ctx.shape(3) != Shape{m})
      return ctx.Error("B must be [" + std::to_string(m) + "]; got " + ShapeToString(ctx.shape(3)));
    const Shape want_mask{x[0], a_.offset_group * taps, w.out[0], w.out[1]};
    if (ctx.has_input(4) && ctx.shape(4) != want_mask)
      return ctx.Error("mask must be " + ShapeToString(want_mask) + "; got " +
                       ShapeToString(ctx.shape(4)));
    ctx.SetOutput(0, DataType::kFloat, {x[0], m, w.out[0], w.out[1]});
    return OkStatus();
  }

  Status Compute(const ComputeContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    const Tensor& wt = ctx.in(1);
    nn::Window win;
    const std::string why = DeformConvWindow(a_, x.shape(), wt.shape(), &win);
    if (!why.empty()) return RunError(why);
    const int64_t n = x.shape()[0], c = x.shape()[1], h = x.shape()[2], w = x.shape()[3];
    const int64_t m = wt.shape()[0], kh = win.kernel[0], kw = win.kernel[1];
    const int64_t oh = win.out[0], ow = win.out[1], taps = kh * kw, positions = oh * ow;
    const int64_t c_per_group = c / a_.group, m_per_group = m / a_.group;
    const int64_t c_per_offset_group = c / a_.offset_group;
    const float* xs = x.data<float>();
    const float* ws = wt.data<float>();
    const float* off = ctx.in(2).data<float>();
    const float* bias = ctx.has(3) ? ctx.in(3).data<float>() : nullptr;
    const float* mask = ctx.has(4) ? ctx.in(4).data<float>() : nullptr;
    float* y = ctx.out(0).data<float>();
    std::vector<Sample> samples(static_cast<size_t>(taps * positions));
    // Sampled columns of one group: [c_per_group * taps, positions].
    std::vector<double> cols(static_cast<size_t>(c_per_group * taps * positions));
    std::vector<double> acc(static_cast<size_t>(positions));
    for (int64_t b = 0; b < n; ++b) {
      for (int64_t g = 0; g < a_.group; ++g) {
        int64_t built = -1;  // the offset group `samples` holds
        for (int64_t ci = 0; ci < c_per_group; ++ci) {
          const int64_t ch = g * c_per_group + ci;
          const int64_t og = ch / c_per_offset_group;
          if (og != built) {
            BuildSamples(off, mask, b, og, win, h, w, samples.data());
            built = og;
          }
          const float* plane = xs + (b * c + ch) * h * w;
          for (int64_t t = 0; t < taps; ++t)
            for (int64_t p = 0; p < positions; ++p) {
              const Sample& s = samples[t * positions + p];
              double v = 0.0;
              for (int q = 0; q < 4; ++q)
                if (s.wt[q] != 0.0) v += s.wt[q] * plane[s.pos[q]];
              cols[(ci * taps + t) * positions + p] = v;
            }
        }
        for (int64_t mo = 0; mo < m_per_group; ++mo) {
          const int64_t oc = g * m_per_group + mo;
          std::fill(acc.begin(), acc.end(), bias ? static_cast<double>(bias[oc]) : 0.0);
          const float* wrow = ws + oc * c_per_group * taps;
          for (int64_t k = 0; k < c_per_group * taps; ++k) {
            const double wk = wrow[k];
            const double* col = cols.data() + k * positions;
            for (int64_t p = 0; p < positions; ++p) acc[p] += wk * col[p];
          }
          float* dst = y + (b * m + oc) * positions;
          for (int64_t p = 0; p < positions; ++p) dst[p] = static_cast<float>(acc[p]);
        }
      }
    }
    return OkStatus();
  }

 private:
  void BuildSamples(const float* off, const float* mask, int64_t b, int64_t og,
                    const nn::Window& win, int64_t h, int64_t w, Sample* samples) const {
    const int64_t kh = win.kernel[0], kw = win.kernel[1], taps = kh * kw;
    const int64_t oh = win.out[0], ow = win.out[1], positions = oh * ow;
    const float* o = off + (b * a_.offset_group + og) * taps * 2 * positions;
    const float* mk = mask ? mask + (b * a_.offset_group + og) * taps * positions : nullptr;
    for (int64_t i = 0; i < kh; ++i)
      for (int64_t j = 0; j < kw; ++j) {
        const int64_t t = i * kw + j;
        for (int64_t py = 0; py < oh; ++py)
          for (int64_t px = 0; px < ow; ++px) {
            const int64_t p = py * ow + px;
            Sample& s = samples[t * positions + p];
            const double yy =
                static_cast<double>(py * win.strides[0] - win.pad_begin[0] + i * win.dilations[0]) +
                o[(t * 2) * positions + p];
            const double xx =
                static_cast<double>(px * win.strides[1] - win.pad_begin[1] + j * win.dilations[1]) +
                o[(t * 2 + 1) * positions + p];
            const double scale = mk ? static_cast<double>(mk[t * positions + p]) : 1.0;
            DeformTaps(yy, xx, h, w, scale, s.pos, s.wt);
          }
      }
  }

  DeformConvAttrs a_;
};

}  // namespace

std::string DeformConvWindow(const DeformConvAttrs& a, const Shape& x, const Shape& w,
                             nn::Window* win) {
  if (x.size() != 4)
    return "X must be 4-D [N, C, H, W] (kiln implements 2-D DeformConv); got " + ShapeToString(x);
  if (w.size() != 4) return "W must be [M, C / group, kH, kW]; got " + ShapeToString(w);
  if (x[1] % a.group != 0 || w[1] * a.group != x[1] || w[0] % a.group != 0)
    return "X's channels (" + std::to_string(x[1]) + ") must equal W's dim 1 (" +
           std::to_string(w[1]) + ") times group (" + std::to_string(a.group) +
           ") and W's dim 0 (" + std::to_string(w[0]) + ") must be a multiple of group";
  if (x[1] % a.offset_group != 0)
    return "X's channels (" + std::to_string(x[1]) + ") must be a multiple of offset_group (" +
           std::to_string(a.offset_group) + ")";
  return nn::ForwardWindow(a.window, {x[2], x[3]}, {w[2], w[3]}, /*ceil_mode=*/false, win);
}

namespace {

KILN_REGISTER_OP("DeformConv", 19, ir::kMaxOpset, &DeformConvOp::Create);

// Kernel cases (ops/op_cases.h), after the former hand-written kernel tests (DeformConvOneDnn)
// and the former selftest cases: groups, offset groups that do not align with the groups (one
// group's channels spanning two offset groups), strides, dilations, asymmetric pads, with and
// without mask and B, W constant and computed (cpu.deformconv.onednn packs a constant W once),
// offsets of up to 3.5 pixels (samples partly or wholly outside) with one NaN; the last case has
// more output positions (169) than one block of the kernel's columns holds (160 for 5x5 x 128
// channels), so it runs two blocks.
struct DeformShape {
  Shape x;
  int64_t m, kh, kw, group, offset_group, stride, dilation;
  std::vector<int64_t> pads;
  bool mask, bias, constant_w;
};

OpCase DeformCase(const DeformShape& d, uint32_t seed) {
  const int64_t oh = (d.x[2] + d.pads[0] + d.pads[2] - (d.kh - 1) * d.dilation - 1) / d.stride + 1;
  const int64_t ow = (d.x[3] + d.pads[1] + d.pads[3] - (d.kw - 1) * d.dilation - 1) / d.stride + 1;
  const int64_t taps = d.kh * d.kw;
  const Shape ws{d.m, d.x[1] / d.group, d.kh, d.kw};
  OpCase c("x" + ShapeToString(d.x) + " w" + ShapeToString(ws) + " group " +
               std::to_string(d.group) + " offset_group " + std::to_string(d.offset_group) +
               " stride " + std::to_string(d.stride) + " dilation " + std::to_string(d.dilation) +
               " pads " + ShapeToString(d.pads) + (d.mask ? " mask" : "") + (d.bias ? " B" : "") +
               (d.constant_w ? "" : " W computed"),
           19);
  c.In(CaseTensor(d.x, seed));
  Tensor w = CaseTensor(ws, seed + 1);
  if (d.constant_w)
    c.Const(w);
  else
    c.In(w);
  Tensor off = CaseTensor({d.x[0], d.offset_group * taps * 2, oh, ow}, seed + 2, -3.5f, 3.5f);
  off.data<float>()[off.numel() / 3] = std::nanf("");
  c.In(off);
  if (d.bias)
    c.Const(CaseTensor({d.m}, seed + 3));
  else if (d.mask)
    c.Omitted();
  if (d.mask) c.In(CaseTensor({d.x[0], d.offset_group * taps, oh, ow}, seed + 4, 0.f, 1.f));
  c.Ints("kernel_shape", {d.kh, d.kw})
      .Ints("strides", {d.stride, d.stride})
      .Ints("dilations", {d.dilation, d.dilation})
      .Ints("pads", d.pads)
      .Int("group", d.group)
      .Int("offset_group", d.offset_group);
  return c;
}

std::vector<OpCase> DeformConvCases() {
  const DeformShape shapes[] = {
      {{1, 4, 7, 6}, 5, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, true, true, true},
      {{2, 6, 8, 7}, 4, 3, 2, 2, 3, 2, 1, {0, 1, 2, 0}, true, false, false},
      {{1, 8, 9, 9}, 6, 2, 3, 2, 4, 1, 2, {1, 0, 1, 2}, false, true, true},
      {{2, 3, 5, 5}, 3, 1, 1, 3, 1, 1, 1, {0, 0, 0, 0}, false, false, true},
      {{2, 6, 9, 8}, 4, 3, 3, 2, 3, 1, 1, {1, 1, 1, 1}, true, true, true},
      {{1, 128, 13, 13}, 4, 5, 5, 1, 2, 1, 1, {2, 2, 2, 2}, true, true, true},
  };
  std::vector<OpCase> cases;
  uint32_t seed = 700;
  for (const DeformShape& d : shapes) {
    cases.push_back(DeformCase(d, seed));
    seed += 5;
  }
  return cases;
}
KILN_REGISTER_OP_CASES("", "DeformConv", &DeformConvCases);

}  // namespace
}  // namespace kiln::ops
