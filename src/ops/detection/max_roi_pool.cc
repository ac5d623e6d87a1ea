// MaxRoiPool (1-24; Fast R-CNN's RoI pooling): for each region (rois [num_rois, 5] as batch
// index, x1, y1, x2, y2 in input pixels) and channel, a pooled_shape[0] x pooled_shape[1] grid
// of bins, each the maximum of the input pixels it covers. The corners are scaled by
// spatial_scale and rounded to whole pixels; the region spans x1..x2 inclusive (at least one
// pixel); bin i of n over a region of size s covers [floor(i s / n), ceil((i + 1) s / n)) from
// the region's start, clipped to the image. A bin with no pixel inside the image is 0. This is
// the operator's definition as Caffe and ONNX Runtime compute it. Reference algorithm: plain
// loops; float32 and float64.
#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/common.h"
#include "ops/op_cases.h"

namespace kiln::ops {
namespace {

using ir::ComputeContext;
using ir::InferContext;
using ir::Node;

class MaxRoiPoolOp final : public ir::Op {
 public:
  explicit MaxRoiPoolOp(const Node& node) : ir::Op(node) {}

  static StatusOr<std::unique_ptr<ir::Op>> Create(const Node& node) {
    auto op = std::unique_ptr<MaxRoiPoolOp>(new MaxRoiPoolOp(node));
    if (!node.HasAttr("pooled_shape")) return ir::AttrError(node, "pooled_shape is required");
    const std::vector<int64_t> ps = node.GetInts("pooled_shape");
    if (ps.size() != 2 || ps[0] < 1 || ps[1] < 1)
      return ir::AttrError(node, "pooled_shape must be two sizes >= 1; got " + ShapeToString(ps));
    op->ph_ = ps[0];
    op->pw_ = ps[1];
    op->scale_ = node.GetFloat("spatial_scale", 1.f);
    if (!(op->scale_ > 0.f) || !std::isfinite(op->scale_))
      return ir::AttrError(
          node, "spatial_scale must be a finite number > 0; got " + std::to_string(op->scale_));
    return std::unique_ptr<ir::Op>(std::move(op));
  }

  Status Infer(InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(0, {DataType::kFloat, DataType::kDouble}));
    if (ctx.dtype(1) != ctx.dtype(0))
      return ctx.Error(std::string("rois must have X's type ") + DataTypeName(ctx.dtype(0)) +
                       "; got " + DataTypeName(ctx.dtype(1)));
    if (ctx.rank(0) != 4)
      return ctx.Error("X must be [N, C, H, W]; got " + ShapeToString(ctx.shape(0)));
    if (ctx.rank(1) != 2 || ctx.shape(1)[1] != 5)
      return ctx.Error("rois must be [num_rois, 5]; got " + ShapeToString(ctx.shape(1)));
    ctx.SetOutput(0, ctx.dtype(0), {ctx.shape(1)[0], ctx.shape(0)[1], ph_, pw_});
    return OkStatus();
  }

  Status Compute(const ComputeContext& ctx) const override {
    return ctx.in(0).dtype() == DataType::kDouble ? Run<double>(ctx) : Run<float>(ctx);
  }

 private:
  template <typename T>
  Status Run(const ComputeContext& ctx) const {
    const Tensor& x = ctx.in(0);
    const int64_t n = x.shape()[0], channels = x.shape()[1], h = x.shape()[2], w = x.shape()[3];
    const int64_t rois = ctx.in(1).shape()[0];
    const T* roi = ctx.in(1).data<T>();
    const T* src = x.data<T>();
    T* y = ctx.out(0).data<T>();
    for (int64_t r = 0; r < rois; ++r) {
      const T* box = roi + r * 5;
      const double b = static_cast<double>(box[0]);
      if (!(b >= 0 && b < static_cast<double>(n)) || b != std::floor(b))
        return RunError("roi " + std::to_string(r) + " has batch index " + std::to_string(b) +
                        "; X holds " + std::to_string(n) + " images");
      const int64_t start_w = std::lround(static_cast<double>(box[1]) * scale_);
      const int64_t start_h = std::lround(static_cast<double>(box[2]) * scale_);
      const int64_t end_w = std::lround(static_cast<double>(box[3]) * scale_);
      const int64_t end_h = std::lround(static_cast<double>(box[4]) * scale_);
      const int64_t rh = std::max<int64_t>(end_h - start_h + 1, 1);
      const int64_t rw = std::max<int64_t>(end_w - start_w + 1, 1);
      const double bin_h = static_cast<double>(rh) / static_cast<double>(ph_);
      const double bin_w = static_cast<double>(rw) / static_cast<double>(pw_);
      for (int64_t c = 0; c < channels; ++c) {
        const T* plane = src + (static_cast<int64_t>(b) * channels + c) * h * w;
        T* out = y + (r * channels + c) * ph_ * pw_;
        for (int64_t i = 0; i < ph_; ++i) {
          const int64_t h0 = std::clamp<int64_t>(
              static_cast<int64_t>(std::floor(static_cast<double>(i) * bin_h)) + start_h, 0, h);
          const int64_t h1 = std::clamp<int64_t>(
              static_cast<int64_t>(std::ceil(static_cast<double>(i + 1) * bin_h)) + start_h, 0, h);
          for (int64_t j = 0; j < pw_; ++j) {
            const int64_t w0 = std::clamp<int64_t>(
                static_cast<int64_t>(std::floor(static_cast<double>(j) * bin_w)) + start_w, 0, w);
            const int64_t w1 = std::clamp<int64_t>(
                static_cast<int64_t>(std::ceil(static_cast<double>(j + 1) * bin_w)) + start_w, 0,
                w);
            T best = -std::numeric_limits<T>::max();
            for (int64_t yy = h0; yy < h1; ++yy)
              for (int64_t xx = w0; xx < w1; ++xx) best = std::max(best, plane[yy * w + xx]);
            out[i * pw_ + j] = (h1 <= h0 || w1 <= w0) ? T(0) : best;
          }
        }
      }
    }
    return OkStatus();
  }

  int64_t ph_ = 1, pw_ = 1;
  float scale_ = 1.f;
};

KILN_REGISTER_OP("MaxRoiPool", 1, ir::kMaxOpset, &MaxRoiPoolOp::Create);

Tensor Rois(const std::vector<float>& v) {
  return Tensor::FromVector<float>(v, {static_cast<int64_t>(v.size() / 5), 5});
}

std::vector<OpCase> MaxRoiPoolCases() {
  std::vector<OpCase> cases;
  cases.push_back(OpCase("2 images, 3 rois, 2x2 bins", 1)
                      .In(CaseTensor({2, 3, 7, 9}, 1))
                      .In(Rois({0, 0, 0, 8, 6, 1, 2, 1, 5, 4, 1, 3, 3, 3, 3}))
                      .Ints("pooled_shape", {2, 2}));
  cases.push_back(OpCase("scale 0.5, a roi past the image, 3x1 bins", 1)
                      .In(CaseTensor({1, 2, 5, 5}, 2))
                      .In(Rois({0, 2, 2, 20, 20, 0, 0, 0, 3, 9}))
                      .Ints("pooled_shape", {3, 1})
                      .Float("spatial_scale", 0.5f));
  return cases;
}
KILN_REGISTER_OP_CASES("", "MaxRoiPool", &MaxRoiPoolCases);

}  // namespace
}  // namespace kiln::ops
