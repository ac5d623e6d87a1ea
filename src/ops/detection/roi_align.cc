// RoiAlign (10-24): for each region (rois [num_rois, 4] as x1, y1, x2, y2 in input pixels times
// spatial_scale, batch_indices [num_rois] int64) and channel, an output_height x output_width grid
// of bins, each the average (mode avg) or maximum (mode max) of sampling_ratio^2 bilinear samples
// (sampling_ratio 0: ceil(roi size / bins) per axis). coordinate_transformation_mode half_pixel
// (RoiAlign-16's default) shifts the region by -0.5 pixel; output_half_pixel (RoiAlign-10's only
// behaviour) does not and makes regions at least 1x1. Samples outside [-1, size] count as zero;
// mode max takes the largest weighted corner of each sample, as ONNX's reference and ONNX Runtime
// do. Output [num_rois, C, output_height, output_width]. Reference algorithm: plain loops,
// double arithmetic; float32 only.
#include <algorithm>
#include <cmath>

#include "ops/common.h"

namespace kiln::ops {
namespace {

using ir::ComputeContext;
using ir::InferContext;
using ir::Node;

class RoiAlignOp final : public ir::Op {
 public:
  explicit RoiAlignOp(const Node& node) : ir::Op(node) {}

  static StatusOr<std::unique_ptr<ir::Op>> Create(const Node& node) {
    auto op = std::unique_ptr<RoiAlignOp>(new RoiAlignOp(node));
    const std::string mode = node.GetString("mode", "avg");
    if (mode != "avg" && mode != "max")
      return ir::AttrError(node, "mode must be avg or max; got '" + mode + "'");
    op->max_ = mode == "max";
    const std::string ctm = node.GetString("coordinate_transformation_mode",
                                           node.opset >= 16 ? "half_pixel" : "output_half_pixel");
    if (ctm != "half_pixel" && ctm != "output_half_pixel")
      return ir::AttrError(node,
                           "coordinate_transformation_mode must be half_pixel or "
                           "output_half_pixel; got '" +
                               ctm + "'");
    op->half_pixel_ = ctm == "half_pixel";
    op->oh_ = node.GetInt("output_height", 1);
    op->ow_ = node.GetInt("output_width", 1);
    op->ratio_ = node.GetInt("sampling_ratio", 0);
    op->scale_ = node.GetFloat("spatial_scale", 1.f);
    if (op->oh_ < 1 || op->ow_ < 1 || op->ratio_ < 0)
      return ir::AttrError(node,
                           "output_height and output_width must be >= 1 and sampling_ratio "
                           ">= 0; got " +
                               std::to_string(op->oh_) + ", " + std::to_string(op->ow_) + ", " +
                               std::to_string(op->ratio_));
    return std::unique_ptr<ir::Op>(std::move(op));
  }

  Status Infer(InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(0, {DataType::kFloat}));
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(1, {DataType::kFloat}));
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(2, {DataType::kInt64}));
    if (ctx.rank(0) != 4)
      return ctx.Error("X must be [N, C, H, W]; got " + ShapeToString(ctx.shape(0)));
    if (ctx.rank(1) != 2 || ctx.shape(1)[1] != 4)
      return ctx.Error("rois must be [num_rois, 4]; got " + ShapeToString(ctx.shape(1)));
    if (ctx.shape(2) != Shape{ctx.shape(1)[0]})
      return ctx.Error("batch_indices must be [num_rois] = " + ShapeToString({ctx.shape(1)[0]}) +
                       "; got " + ShapeToString(ctx.shape(2)));
    ctx.SetOutput(0, DataType::kFloat, {ctx.shape(1)[0], ctx.shape(0)[1], oh_, ow_});
    return OkStatus();
  }

  Status Compute(const ComputeContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    const int64_t n = x.shape()[0], channels = x.shape()[1], h = x.shape()[2], w = x.shape()[3];
    const int64_t rois = ctx.in(1).shape()[0];
    const float* roi = ctx.in(1).data<float>();
    const int64_t* batch = ctx.in(2).data<int64_t>();
    float* y = ctx.out(0).data<float>();
    struct Sample {
      int64_t pos[4];
      double wt[4];
    };
    std::vector<Sample> samples;
    for (int64_t r = 0; r < rois; ++r) {
      if (batch[r] < 0 || batch[r] >= n)
        return RunError("batch_indices[" + std::to_string(r) + "] must be in [0, " +
                        std::to_string(n) + "); got " + std::to_string(batch[r]));
      const double off = half_pixel_ ? 0.5 : 0.0;
      const double x0 = roi[r * 4] * static_cast<double>(scale_) - off;
      const double y0 = roi[r * 4 + 1] * static_cast<double>(scale_) - off;
      double rw = roi[r * 4 + 2] * static_cast<double>(scale_) - off - x0;
      double rh = roi[r * 4 + 3] * static_cast<double>(scale_) - off - y0;
      if (!half_pixel_) {
        rw = std::max(rw, 1.0);
        rh = std::max(rh, 1.0);
      }
      const double bin_h = rh / oh_, bin_w = rw / ow_;
      const int64_t gh = ratio_ > 0 ? ratio_ : static_cast<int64_t>(std::ceil(rh / oh_));
      const int64_t gw = ratio_ > 0 ? ratio_ : static_cast<int64_t>(std::ceil(rw / ow_));
      const double count = static_cast<double>(std::max<int64_t>(gh * gw, 1));
      samples.clear();
      for (int64_t ph = 0; ph < oh_; ++ph)
        for (int64_t pw = 0; pw < ow_; ++pw)
          for (int64_t iy = 0; iy < gh; ++iy)
            for (int64_t ix = 0; ix < gw; ++ix) {
              double yy = y0 + ph * bin_h + (iy + 0.5) * bin_h / gh;
              double xx = x0 + pw * bin_w + (ix + 0.5) * bin_w / gw;
              Sample s{};
              if (yy < -1.0 || yy > h || xx < -1.0 || xx > w) {
                samples.push_back(s);
                continue;
              }
              yy = std::max(yy, 0.0);
              xx = std::max(xx, 0.0);
              int64_t y_lo = static_cast<int64_t>(yy), x_lo = static_cast<int64_t>(xx), y_hi, x_hi;
              if (y_lo >= h - 1) {
                y_hi = y_lo = h - 1;
                yy = static_cast<double>(y_lo);
              } else {
                y_hi = y_lo + 1;
              }
              if (x_lo >= w - 1) {
                x_hi = x_lo = w - 1;
                xx = static_cast<double>(x_lo);
              } else {
                x_hi = x_lo + 1;
              }
              const double ly = yy - y_lo, lx = xx - x_lo, hy = 1.0 - ly, hx = 1.0 - lx;
              s = {{y_lo * w + x_lo, y_lo * w + x_hi, y_hi * w + x_lo, y_hi * w + x_hi},
                   {hy * hx, hy * lx, ly * hx, ly * lx}};
              samples.push_back(s);
            }
      for (int64_t c = 0; c < channels; ++c) {
        const float* plane = x.data<float>() + (batch[r] * channels + c) * h * w;
        const Sample* s = samples.data();
        for (int64_t b = 0; b < oh_ * ow_; ++b) {
          double v = 0.0;
          for (int64_t k = 0; k < gh * gw; ++k, ++s) {
            if (max_) {
              double m = s->wt[0] * plane[s->pos[0]];
              for (int q = 1; q < 4; ++q) m = std::max(m, s->wt[q] * plane[s->pos[q]]);
              v = k == 0 ? m : std::max(v, m);
            } else {
              for (int q = 0; q < 4; ++q) v += s->wt[q] * plane[s->pos[q]];
            }
          }
          y[((r * channels + c) * oh_ * ow_) + b] = static_cast<float>(max_ ? v : v / count);
        }
      }
    }
    return OkStatus();
  }

 private:
  bool max_ = false, half_pixel_ = true;
  int64_t oh_ = 1, ow_ = 1, ratio_ = 0;
  float scale_ = 1.f;
};

KILN_REGISTER_OP("RoiAlign", 10, ir::kMaxOpset, &RoiAlignOp::Create);

}  // namespace
}  // namespace kiln::ops
