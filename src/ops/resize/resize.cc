// Resize (opsets 10, 11..17) and Upsample (opsets 7..8 with a `scales` attribute, 9+ with a
// `scales` input): N-dimensional nearest, n-linear and n-cubic interpolation.
//
// Inputs: Upsample-9 and Resize-10 take (X, scales); Resize-11+ takes (X, roi, scales, sizes), with
// exactly one of scales/sizes non-empty (an empty `scales` tensor stands for "absent" at opset 11;
// roi and scales may be omitted from opset 13). scales and sizes are shape inputs: their values fix
// the output shape, floor(in * scale) computed in float32 as ONNX shape inference and ONNX Runtime
// do (roi does not change the output shape, also as they do).
//
// Coordinates (per dim, x = output index, scale as given or out/in when `sizes` is used,
// L = in * scale, the "resized length" of the ONNX reference):
//   half_pixel            (x + 0.5) / scale - 0.5
//   pytorch_half_pixel    out > 1 ? (x + 0.5) / scale - 0.5 : 0
//   align_corners         L == 1 ? 0 : x * (in - 1) / (L - 1)
//   asymmetric            x / scale
//   tf_half_pixel_for_nn  (x + 0.5) / scale   (also spelled tf_half_pixel_for_nearest)
//   tf_crop_and_resize    roi-based; outside [0, in - 1] the output is extrapolation_value
// Resize-10 and Upsample use asymmetric coordinates and the pre-opset-11 nearest rounding
// (ceil when the dim is downsampled, truncation otherwise), as ONNX Runtime does.
// nearest_mode: round_prefer_floor (default), round_prefer_ceil, floor, ceil. linear: 2 taps
// floor(x), floor(x)+1; cubic: 4 taps floor(x)-1 .. floor(x)+2 with Keys' kernel (cubic_coeff_a,
// default -0.75); taps outside the input are clamped to the edge, or, with exclude_outside=1,
// dropped and the remaining weights renormalised. Separable: the N-D weight is the product of
// the per-dim weights.
//
// Reference algorithm: per dim, precompute each output coordinate's taps (index, weight) with
// zero-weight taps dropped; per output element, sum the product of weights over the cartesian
// product of the dims' taps (double accumulation). Integer outputs are rounded and saturated.
// Dtypes: float32, int32, int64, uint8, int8. Resize-18/19 (opsets 18..24): axes,
// keep_aspect_ratio_policy, half_pixel_symmetric and antialias are implemented.
// antialias=1 (linear and cubic; refused for nearest, as ONNX's reference does): when a dim
// shrinks (scale s < 1) the filter is stretched by 1/s, so every input pixel contributes; the
// taps are base + i for i in [start, 2 - start) with start = floor(-support / s) + 1 (support 1
// for linear, 2 for cubic), base = ceil(x) - 1 (x an integer: x - 1, as ONNX's reference frames
// it), weight kernel((base + i - x) * s), normalised to sum 1. Taps outside the input are
// clamped to the edge (or dropped with exclude_outside).
#include "ops/resize/resize.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "ops/common.h"
#include "ops/op_cases.h"
#include "ops/resize/keys_cubic.h"

namespace kiln::ops {
namespace {

using ir::ComputeContext;
using ir::InferContext;
using ir::Node;
using ir::Op;

using Interp = ResizeInterp;
using Coord = ResizeCoord;
using Rounding = ResizeRounding;
using AspectPolicy = ResizeAspectPolicy;

using DimTaps = ResizeDimTaps;

template <typename T>
T CastResult(double v) {
  if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(v);
  } else {
    if (std::isnan(v)) return T{0};
    v = std::nearbyint(v);
    // double(max) may round up (int64: 2^63), so compare with >= before converting.
    if (v >= static_cast<double>(std::numeric_limits<T>::max()))
      return std::numeric_limits<T>::max();
    if (v <= static_cast<double>(std::numeric_limits<T>::lowest()))
      return std::numeric_limits<T>::lowest();
    return static_cast<T>(v);
  }
}

class ResizeOp : public Op {
 public:
  ResizeOp(const Node& node, bool upsample) : Op(node) { a_.upsample = upsample; }
  const ir::OpAttrs* attributes() const override { return &a_; }

  static StatusOr<std::unique_ptr<Op>> CreateResize(const Node& node) {
    return Create(node, false);
  }
  static StatusOr<std::unique_ptr<Op>> CreateUpsample(const Node& node) {
    return Create(node, true);
  }

  std::vector<int> ShapeInputs() const override {
    if (a_.upsample && opset() < 9) return {};
    if (!modern()) return {1};
    return {2, 3};
  }

  Status Infer(InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(0, {DataType::kFloat, DataType::kInt32, DataType::kInt64,
                                             DataType::kUInt8, DataType::kInt8}));
    const Tensor* scales = nullptr;
    const Tensor* sizes = nullptr;
    const int si = scales_index();
    if (si >= 0 && ctx.has_input(si)) {
      KILN_RETURN_IF_ERROR(ctx.ExpectDtype(si, {DataType::kFloat}));
      scales = ctx.value(si);
      if (!scales) return ctx.Error("the scales input must be known to infer the output shape");
    }
    if (modern() && ctx.has_input(3)) {
      KILN_RETURN_IF_ERROR(ctx.ExpectDtype(3, {DataType::kInt64}));
      sizes = ctx.value(3);
      if (!sizes) return ctx.Error("the sizes input must be known to infer the output shape");
    }
    if (modern() && ctx.has_input(1))
      KILN_RETURN_IF_ERROR(ctx.ExpectDtype(1, {DataType::kFloat, DataType::kDouble}));
    if (a_.coord == Coord::kTfCropAndResize) {
      const int64_t want = 2 * ctx.rank(0);
      if (!ctx.has_input(1)) return ctx.Error("tf_crop_and_resize needs the roi input; got none");
      const int64_t want_axes = a_.axes.empty() ? want : 2 * static_cast<int64_t>(a_.axes.size());
      if (ctx.value(1) && ctx.value(1)->numel() != want_axes)
        return ctx.Error(
            "roi must have 2 * " + std::string(a_.axes.empty() ? "rank" : "len(axes)") + " = " +
            std::to_string(want_axes) + " values; got " + std::to_string(ctx.value(1)->numel()));
    }
    Shape out;
    std::vector<double> scale;
    std::string why;
    if (!OutputShape(ctx.shape(0), scales, sizes, &out, &scale, &why)) return ctx.Error(why);
    ctx.SetOutput(0, ctx.dtype(0), std::move(out));
    return OkStatus();
  }

  // The output shape and every dim's taps for input shape `in`, the node's inputs by position
  // (nullptr where absent); false with the violated rule in `why`.
  bool Plan(const Shape& in, const std::vector<const Tensor*>& inputs, ResizePlan* plan,
            std::string* why) const {
    auto input = [&](int i) -> const Tensor* {
      return i >= 0 && static_cast<size_t>(i) < inputs.size() ? inputs[i] : nullptr;
    };
    const Tensor* scales = input(scales_index());
    const Tensor* sizes = modern() ? input(3) : nullptr;
    std::vector<double> scale;
    if (!OutputShape(in, scales, sizes, &plan->out, &scale, why)) return false;
    const auto rank = static_cast<int64_t>(in.size());
    std::vector<double> roi(static_cast<size_t>(2 * rank), 0.0);
    for (int64_t d = 0; d < rank; ++d) roi[rank + d] = 1.0;
    if (a_.coord == Coord::kTfCropAndResize) {
      std::vector<int64_t> dims;
      if (!Axes(rank, &dims, why)) return false;
      const auto k = static_cast<int64_t>(dims.size());
      const Tensor* r = input(1);
      if (r == nullptr || r->numel() != 2 * k) {
        *why = "tf_crop_and_resize needs roi with 2 * " + std::to_string(k) + " values; got " +
               (r != nullptr ? std::to_string(r->numel()) : std::string("none"));
        return false;
      }
      for (int64_t i = 0; i < k; ++i) {
        roi[dims[i]] = ReadScalarAsDouble(*r, i);
        roi[rank + dims[i]] = ReadScalarAsDouble(*r, k + i);
      }
    }
    plan->taps.assign(static_cast<size_t>(rank), DimTaps{});
    for (int64_t d = 0; d < rank; ++d)
      plan->taps[d] = BuildTaps(in[d], plan->out[d], scale[d], roi[d], roi[rank + d]);
    plan->extrapolation_value = a_.extrapolation_value;
    return true;
  }

  Status Compute(const ComputeContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    std::vector<const Tensor*> inputs;
    for (size_t i = 0; i < ctx.inputs.size(); ++i)
      inputs.push_back(ctx.has(i) ? &ctx.in(i) : nullptr);
    ResizePlan plan;
    std::string why;
    if (!Plan(x.shape(), inputs, &plan, &why)) return RunError(why);
    Tensor& y = ctx.out(0);
    if (plan.out != y.shape())
      return RunError("output shape " + ShapeToString(y.shape()) + " differs from the computed " +
                      ShapeToString(plan.out));
    const std::vector<DimTaps>& taps = plan.taps;
    switch (x.dtype()) {
      case DataType::kFloat:
        Run<float>(x, taps, y);
        break;
      case DataType::kInt32:
        Run<int32_t>(x, taps, y);
        break;
      case DataType::kInt64:
        Run<int64_t>(x, taps, y);
        break;
      case DataType::kUInt8:
        Run<uint8_t>(x, taps, y);
        break;
      case DataType::kInt8:
        Run<int8_t>(x, taps, y);
        break;
      default:
        return Unsupported("failed to run " + describe() + ": unsupported dtype " +
                           DataTypeName(x.dtype()));
    }
    return OkStatus();
  }

 private:
  static StatusOr<std::unique_ptr<Op>> Create(const Node& node, bool upsample) {
    auto op = std::make_unique<ResizeOp>(node, upsample);
    const bool modern = !upsample && node.opset >= 11;
    const std::string mode = node.GetString("mode", "nearest");
    if (mode == "nearest")
      op->a_.interp = Interp::kNearest;
    else if (mode == "linear")
      op->a_.interp = Interp::kLinear;
    else if (mode == "cubic" && modern)
      op->a_.interp = Interp::kCubic;
    else
      return ir::AttrError(node, std::string(modern ? "mode must be nearest, linear or cubic"
                                                    : "mode must be nearest or linear") +
                                     "; got '" + mode + "'");
    if (!modern) {  // pre-opset-11 semantics
      op->a_.coord = Coord::kAsymmetric;
      op->a_.rounding = Rounding::kLegacy;
      if (upsample && node.opset < 9) {
        if (!node.HasAttr("scales"))
          return ir::AttrError(node, "Upsample-7 requires the `scales` attribute; got none");
        for (float s : node.GetFloats("scales")) {
          if (!(s >= 1.f) || !std::isfinite(s))
            return ir::AttrError(node, "scales must be >= 1; got " + std::to_string(s));
          op->a_.scales.push_back(s);
        }
      }
      return std::unique_ptr<Op>(std::move(op));
    }
    // Resize-18/19 additions, taken at their defaults only (refused otherwise, naming them).
    if (node.opset >= 18) {
      const int64_t antialias = node.GetInt("antialias", 0);
      if (antialias != 0 && antialias != 1)
        return ir::AttrError(node, "antialias must be 0 or 1; got " + std::to_string(antialias));
      if (antialias == 1 && op->a_.interp == Interp::kNearest)
        return ir::AttrError(node, "antialias=1 applies to modes linear and cubic; got nearest");
      op->a_.antialias = antialias == 1;
      op->a_.axes = node.GetInts("axes");
      const std::string policy = node.GetString("keep_aspect_ratio_policy", "stretch");
      if (policy == "not_larger")
        op->a_.policy = AspectPolicy::kNotLarger;
      else if (policy == "not_smaller")
        op->a_.policy = AspectPolicy::kNotSmaller;
      else if (policy != "stretch")
        return ir::AttrError(node,
                             "keep_aspect_ratio_policy must be stretch, not_larger or "
                             "not_smaller; got '" +
                                 policy + "'");
    }
    const std::string coord = node.GetString("coordinate_transformation_mode", "half_pixel");
    if (coord == "half_pixel_symmetric" && node.opset >= 19)
      op->a_.coord = Coord::kHalfPixelSymmetric;
    else if (coord == "half_pixel")
      op->a_.coord = Coord::kHalfPixel;
    else if (coord == "pytorch_half_pixel")
      op->a_.coord = Coord::kPytorchHalfPixel;
    else if (coord == "align_corners")
      op->a_.coord = Coord::kAlignCorners;
    else if (coord == "asymmetric")
      op->a_.coord = Coord::kAsymmetric;
    else if (coord == "tf_half_pixel_for_nn" || coord == "tf_half_pixel_for_nearest")
      op->a_.coord = Coord::kTfHalfPixelForNn;
    else if (coord == "tf_crop_and_resize")
      op->a_.coord = Coord::kTfCropAndResize;
    else
      return ir::AttrError(node,
                           "coordinate_transformation_mode must be half_pixel, pytorch_half_pixel, "
                           "align_corners, asymmetric, tf_half_pixel_for_nn, tf_crop_and_resize "
                           "or (opset 19+) half_pixel_symmetric; "
                           "got '" +
                               coord + "'");
    const std::string nearest = node.GetString("nearest_mode", "round_prefer_floor");
    if (nearest == "round_prefer_floor")
      op->a_.rounding = Rounding::kRoundPreferFloor;
    else if (nearest == "round_prefer_ceil")
      op->a_.rounding = Rounding::kRoundPreferCeil;
    else if (nearest == "floor")
      op->a_.rounding = Rounding::kFloor;
    else if (nearest == "ceil")
      op->a_.rounding = Rounding::kCeil;
    else
      return ir::AttrError(node,
                           "nearest_mode must be round_prefer_floor, round_prefer_ceil, "
                           "floor or ceil; got '" +
                               nearest + "'");
    const int64_t exclude = node.GetInt("exclude_outside", 0);
    if (exclude != 0 && exclude != 1)
      return ir::AttrError(node, "exclude_outside must be 0 or 1; got " + std::to_string(exclude));
    op->a_.exclude_outside = exclude != 0;
    op->a_.cubic_a = node.GetFloat("cubic_coeff_a", -0.75f);
    op->a_.extrapolation_value = node.GetFloat("extrapolation_value", 0.0f);
    return std::unique_ptr<Op>(std::move(op));
  }

  bool modern() const { return !a_.upsample && opset() >= 11; }
  // The dims scales/sizes/roi name: Resize-18's axes (negative allowed, distinct), else all.
  bool Axes(int64_t rank, std::vector<int64_t>* dims, std::string* why) const {
    dims->clear();
    if (a_.axes.empty()) {
      for (int64_t d = 0; d < rank; ++d) dims->push_back(d);
      return true;
    }
    for (int64_t a : a_.axes) {
      const int64_t d = a < 0 ? a + rank : a;
      if (d < 0 || d >= rank || std::find(dims->begin(), dims->end(), d) != dims->end()) {
        *why = "axes must be distinct and in [" + std::to_string(-rank) + ", " +
               std::to_string(rank) + "); got " + std::to_string(a);
        return false;
      }
      dims->push_back(d);
    }
    return true;
  }
  int scales_index() const {
    if (a_.upsample && opset() < 9) return -1;
    return modern() ? 2 : 1;
  }

  // The output shape and the per-dim scale used by the coordinate transform.
  // The output shape, within kiln's limits: each dim at most 2^24 and 2^27 elements in all (the
  // taps are one entry per output index of a dim; the session fuzzer reached a 64 GB tap table).
  bool OutputShape(const Shape& in, const Tensor* scales_t, const Tensor* sizes_t, Shape* out,
                   std::vector<double>* scale, std::string* why) const {
    if (!OutputShapeUnbounded(in, scales_t, sizes_t, out, scale, why)) return false;
    constexpr int64_t kMaxDim = int64_t{1} << 24, kMaxElements = int64_t{1} << 27;
    int64_t elements = 1;
    for (size_t d = 0; d < out->size(); ++d) {
      if ((*out)[d] > kMaxDim) {
        *why = "output dim " + std::to_string(d) + " would be " + std::to_string((*out)[d]) +
               ", past kiln's limit of 2^24";
        return false;
      }
      elements = std::min(elements * std::max<int64_t>((*out)[d], 1), kMaxElements + 1);
    }
    if (elements > kMaxElements) {
      *why = "the output would have " + ShapeToString(*out) +
             ", past kiln's limit of 2^27 elements for Resize";
      return false;
    }
    return true;
  }

  bool OutputShapeUnbounded(const Shape& in, const Tensor* scales_t, const Tensor* sizes_t,
                            Shape* out, std::vector<double>* scale, std::string* why) const {
    const int64_t rank = static_cast<int64_t>(in.size());
    std::vector<float> scales;
    if (scales_index() < 0)
      scales = a_.scales;
    else if (scales_t)
      for (int64_t i = 0; i < scales_t->numel(); ++i) scales.push_back(scales_t->data<float>()[i]);
    const bool has_sizes = sizes_t && sizes_t->numel() > 0;
    if (!scales.empty() && has_sizes) {
      *why = "only one of scales and sizes may be given; got both";
      return false;
    }
    out->assign(static_cast<size_t>(rank), 0);
    scale->assign(static_cast<size_t>(rank), 1.0);
    // Resize-18's axes: scales/sizes name those dims only; the others keep scale 1 and their size.
    std::vector<int64_t> dims;
    if (!Axes(rank, &dims, why)) return false;
    const auto k = static_cast<int64_t>(dims.size());
    if (!a_.axes.empty()) {
      if (!scales.empty()) {
        if (static_cast<int64_t>(scales.size()) != k) {
          *why = "scales must have one value per axis (" + std::to_string(k) + "); got " +
                 std::to_string(scales.size());
          return false;
        }
        std::vector<float> full(static_cast<size_t>(rank), 1.f);
        for (int64_t i = 0; i < k; ++i) full[dims[i]] = scales[i];
        scales = std::move(full);
      }
    }
    if (has_sizes) {
      std::vector<int64_t> sizes = ReadInts(*sizes_t);
      if (!a_.axes.empty()) {
        if (static_cast<int64_t>(sizes.size()) != k) {
          *why = "sizes must have one value per axis (" + std::to_string(k) + "); got " +
                 std::to_string(sizes.size());
          return false;
        }
        std::vector<int64_t> full(in.begin(), in.end());
        for (int64_t i = 0; i < k; ++i) full[dims[i]] = sizes[i];
        sizes = std::move(full);
      }
      if (a_.policy != AspectPolicy::kStretch && static_cast<int64_t>(sizes.size()) == rank) {
        // One scale for every named dim: the largest that fits (not_larger) or the smallest that
        // covers (not_smaller) the requested sizes; sizes = round(scale * in).
        double common = a_.policy == AspectPolicy::kNotLarger ? 1e300 : 0.0;
        for (int64_t d : dims) {
          if (in[d] == 0) continue;
          const double r = static_cast<double>(sizes[d]) / static_cast<double>(in[d]);
          common =
              a_.policy == AspectPolicy::kNotLarger ? std::min(common, r) : std::max(common, r);
        }
        if (common == 1e300) common = 1.0;
        for (int64_t d : dims) {
          sizes[d] = static_cast<int64_t>(std::floor(common * static_cast<double>(in[d]) + 0.5));
          (*scale)[d] = common;
        }
        for (int64_t d = 0; d < rank; ++d) (*out)[d] = sizes[d];
        return true;
      }
      if (static_cast<int64_t>(sizes.size()) != rank) {
        *why = "sizes must have one value per input dim (" + std::to_string(rank) + "); got " +
               std::to_string(sizes.size());
        return false;
      }
      for (int64_t d = 0; d < rank; ++d) {
        if (sizes[d] < 0 || (in[d] == 0 && sizes[d] != 0)) {
          *why = "sizes must be >= 0 (and 0 where the input dim is 0); got " +
                 std::to_string(sizes[d]) + " at dim " + std::to_string(d);
          return false;
        }
        (*out)[d] = sizes[d];
        (*scale)[d] = in[d] == 0 ? 1.0 : static_cast<double>(sizes[d]) / static_cast<double>(in[d]);
      }
      return true;
    }
    if (scales.empty()) {
      *why = modern() ? "one of scales and sizes must be non-empty; got neither"
                      : "scales must have one value per input dim; got none";
      return false;
    }
    if (static_cast<int64_t>(scales.size()) != rank) {
      *why = "scales must have one value per input dim (" + std::to_string(rank) + "); got " +
             std::to_string(scales.size());
      return false;
    }
    for (int64_t d = 0; d < rank; ++d) {
      const float s = scales[d];
      if (!(s > 0.f) || !std::isfinite(s) || (a_.upsample && s < 1.f)) {
        *why = std::string("scales must be ") + (a_.upsample ? ">= 1" : "> 0") + "; got " +
               std::to_string(s) + " at dim " + std::to_string(d);
        return false;
      }
      // A dim past 2^40 cannot be allocated: refused before the conversion to int64 (which
      // would be undefined past 2^63; the session fuzzer found scales of 1e20).
      const double dim = std::floor(static_cast<double>(static_cast<float>(in[d]) * s));
      if (dim > static_cast<double>(int64_t{1} << 40)) {
        *why = "scales[" + std::to_string(d) + "] = " + std::to_string(s) + " makes dim " +
               std::to_string(d) + " " + std::to_string(dim) + " long, past 2^40";
        return false;
      }
      (*out)[d] = static_cast<int64_t>(dim);
      (*scale)[d] = s;
    }
    return true;
  }

  // Maps output coordinate x of one dim into input coordinates.
  double Original(int64_t x_out, int64_t in, int64_t out, double scale, double roi_start,
                  double roi_end) const {
    const double x = static_cast<double>(x_out);
    const double length = static_cast<double>(in) * scale;
    switch (a_.coord) {
      case Coord::kHalfPixel:
        return (x + 0.5) / scale - 0.5;
      case Coord::kHalfPixelSymmetric: {
        // Centred: the offset makes up for the output length being rounded to an integer.
        const double adjustment = static_cast<double>(out) / length;
        const double center = static_cast<double>(in) / 2.0;
        return center * (1.0 - adjustment) + (x + 0.5) / scale - 0.5;
      }
      case Coord::kPytorchHalfPixel:
        return out > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
      case Coord::kAlignCorners:
        return length == 1.0 ? 0.0 : x * static_cast<double>(in - 1) / (length - 1.0);
      case Coord::kAsymmetric:
        return x / scale;
      case Coord::kTfHalfPixelForNn:
        return (x + 0.5) / scale;
      case Coord::kTfCropAndResize:
        if (length == 1.0) return 0.5 * (roi_start + roi_end) * static_cast<double>(in - 1);
        return roi_start * static_cast<double>(in - 1) +
               x * (roi_end - roi_start) * static_cast<double>(in - 1) / (length - 1.0);
    }
    return 0.0;
  }

  int64_t NearestIndex(double x, double scale) const {
    const double fl = std::floor(x);
    const double frac = x - fl;
    switch (a_.rounding) {
      case Rounding::kRoundPreferFloor:
        return static_cast<int64_t>(frac <= 0.5 ? fl : fl + 1);
      case Rounding::kRoundPreferCeil:
        return static_cast<int64_t>(frac < 0.5 ? fl : fl + 1);
      case Rounding::kFloor:
        return static_cast<int64_t>(fl);
      case Rounding::kCeil:
        return static_cast<int64_t>(std::ceil(x));
      case Rounding::kLegacy:
        return static_cast<int64_t>(scale < 1.0 ? std::ceil(x) : std::trunc(x));
    }
    return 0;
  }

  DimTaps BuildTaps(int64_t in, int64_t out, double scale, double roi_start, double roi_end) const {
    DimTaps t;
    // Antialiasing shrinks the filter's argument by s = min(scale, 1): taps base + i for i in
    // [start, 2 - start).
    const bool wide = a_.antialias && a_.interp != Interp::kNearest;
    const double s = std::min(scale, 1.0);
    const double support = a_.interp == Interp::kCubic ? 2.0 : 1.0;
    const int64_t start = wide ? static_cast<int64_t>(std::floor(-support / s)) + 1 : 0;
    if (wide) t.stride = std::max<int64_t>(2 - 2 * start, 1);
    t.count.assign(static_cast<size_t>(out), 0);
    t.index.assign(static_cast<size_t>(out * t.stride), 0);
    t.weight.assign(static_cast<size_t>(out * t.stride), 0.0);
    const double a = a_.cubic_a;
    std::vector<int64_t> idx(static_cast<size_t>(t.stride));
    std::vector<double> w(static_cast<size_t>(t.stride));
    for (int64_t o = 0; o < out; ++o) {
      const double x = Original(o, in, out, scale, roi_start, roi_end);
      if (a_.coord == Coord::kTfCropAndResize && (x < 0.0 || x > static_cast<double>(in - 1)))
        continue;  // count 0: extrapolation_value
      int n = 0;
      if (a_.interp == Interp::kNearest) {
        idx[0] = NearestIndex(x, scale);
        w[0] = 1.0;
        n = 1;
      } else {
        if (wide) {
          const double fl = std::floor(x);
          const double base = fl == x ? x - 1.0 : fl;  // ONNX's ratio is in (0, 1]
          double sum = 0.0;
          for (int64_t i = start; i < 2 - start; ++i, ++n) {
            const double d = (base + static_cast<double>(i) - x) * s;
            idx[n] = static_cast<int64_t>(base) + i;
            w[n] =
                a_.interp == Interp::kLinear ? std::max(0.0, 1.0 - std::abs(d)) : KeysCubic(d, a);
            sum += w[n];
          }
          if (sum != 0.0)
            for (int j = 0; j < n; ++j) w[j] /= sum;
        } else {
          const double fl = std::floor(x);
          const double r = x - fl;
          const int64_t base = static_cast<int64_t>(fl);
          if (a_.interp == Interp::kLinear) {
            idx[0] = base;
            w[0] = 1.0 - r;
            idx[1] = base + 1;
            w[1] = r;
            n = 2;
          } else {  // Keys cubic kernel at distances 1 + r, r, 1 - r, 2 - r
            for (int j = 0; j < 4; ++j) {
              idx[j] = base - 1 + j;
              w[j] = KeysCubic(static_cast<double>(j - 1) - r, a);
            }
            n = 4;
          }
        }
        if (a_.exclude_outside) {
          double sum = 0.0;
          for (int j = 0; j < n; ++j) {
            if (idx[j] < 0 || idx[j] >= in) w[j] = 0.0;
            sum += w[j];
          }
          if (sum != 0.0)
            for (int j = 0; j < n; ++j) w[j] /= sum;
        }
      }
      int kept = 0;
      for (int j = 0; j < n; ++j) {
        if (w[j] == 0.0 && !(j == n - 1 && kept == 0)) continue;
        t.index[o * t.stride + kept] = std::clamp<int64_t>(idx[j], 0, std::max<int64_t>(in - 1, 0));
        t.weight[o * t.stride + kept] = w[j];
        ++kept;
      }
      t.count[o] = kept;
    }
    return t;
  }

  template <typename T>
  void Run(const Tensor& x, const std::vector<DimTaps>& taps, Tensor& y) const {
    const Shape& out = y.shape();
    const int64_t rank = static_cast<int64_t>(out.size());
    const std::vector<int64_t> in_strides = Strides(x.shape());
    const T* src = x.data<T>();
    T* dst = y.data<T>();
    const int64_t total = y.numel();
    // Output multi-index and, per output, the tap counter of each dim (one buffer).
    std::vector<int64_t> counters(static_cast<size_t>(2 * rank) + 1, 0);
    int64_t* oi = counters.data();
    int64_t* ci = counters.data() + rank;
    for (int64_t n = 0; n < total; ++n) {
      bool outside = false;
      for (int64_t d = 0; d < rank; ++d) outside = outside || taps[d].count[oi[d]] == 0;
      double acc = 0.0;
      if (outside) {
        acc = a_.extrapolation_value;
      } else {
        std::fill(ci, ci + rank, 0);
        while (true) {
          double w = 1.0;
          int64_t off = 0;
          for (int64_t d = 0; d < rank; ++d) {
            const int64_t k = oi[d] * taps[d].stride + ci[d];
            w *= taps[d].weight[k];
            off += taps[d].index[k] * in_strides[d];
          }
          acc += w * static_cast<double>(src[off]);
          int64_t d = rank - 1;
          for (; d >= 0; --d) {
            if (++ci[d] < taps[d].count[oi[d]]) break;
            ci[d] = 0;
          }
          if (d < 0) break;
        }
      }
      dst[n] = CastResult<T>(acc);
      for (int64_t d = rank - 1; d >= 0; --d) {
        if (++oi[d] < out[d]) break;
        oi[d] = 0;
      }
    }
  }

  ResizeAttrs a_;
};

}  // namespace

bool ResizePlanOf(const ir::Op& op, const Shape& in, const std::vector<const Tensor*>& inputs,
                  ResizePlan* plan, std::string* why) {
  const auto* resize = dynamic_cast<const ResizeOp*>(&op);
  if (resize == nullptr) {
    *why = "not a Resize or Upsample op";
    return false;
  }
  return resize->Plan(in, inputs, plan, why);
}

namespace {

KILN_REGISTER_OP("Resize", 10, ir::kMaxOpset, &ResizeOp::CreateResize);
// Upsample is deprecated from opset 10; models importing a later opset still get the opset-9
// behaviour rather than a load failure.
KILN_REGISTER_OP("Upsample", 7, ir::kMaxOpset, &ResizeOp::CreateUpsample);

// Kernel cases (ops/op_cases.h). cpu.resize.onednn computes on oneDNN what oneDNN does as ONNX
// defines (nearest: integer upscales with asymmetric/floor, or half_pixel/pytorch_half_pixel with
// round_prefer_floor/ceil; linear: half_pixel, pytorch_half_pixel with outputs > 1; Resize-10 and
// Upsample nearest), other values (downscales, non-integer or non-O/I scales) on its separable
// passes ("[separable]"), N or C resized on the reference ("[reference]"); 8-bit X in nearest.
// cpu.resize.separable takes every float32 attribute set (cubic, antialias, exclude_outside,
// align_corners, asymmetric linear, tf_crop_and_resize, axes, keep_aspect_ratio_policy).
// cuda.resize.kernel: 4-D float32, nearest or linear, coordinates half_pixel, pytorch_half_pixel,
// align_corners or asymmetric, no exclude_outside/antialias/axes/policy.
std::string FloatsText(const std::vector<float>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]).substr(0, 4);
  return s + "]";
}

// Resize-`opset` of X `x`: scales (sizes when `scales` is empty) as constants, with roi (empty
// unless given) and an empty scales in front from opset 11.
OpCase ResizeCase(int opset, const Shape& x, const std::string& mode, const std::string& coord,
                  const std::string& nearest, const std::vector<float>& scales,
                  const std::vector<int64_t>& sizes, uint32_t seed,
                  const std::vector<float>& roi = {}) {
  OpCase c(
      "Resize-" + std::to_string(opset) + " " + ShapeToString(x) + " " + mode + " " + coord +
          (nearest.empty() ? "" : " " + nearest) +
          (scales.empty() ? " sizes " + ShapeToString(sizes) : " scales " + FloatsText(scales)),
      opset);
  c.In(CaseTensor(x, seed)).Str("mode", mode);
  if (!coord.empty()) c.Str("coordinate_transformation_mode", coord);
  if (!nearest.empty()) c.Str("nearest_mode", nearest);
  const auto n = [](size_t k) { return Shape{static_cast<int64_t>(k)}; };
  if (opset < 11) return c.Const(CaseFloats(scales, n(scales.size())));
  c.Const(CaseFloats(roi, n(roi.size()))).Const(CaseFloats(scales, n(scales.size())));
  if (!sizes.empty()) c.Const(CaseInt64s(sizes));
  return c;
}

OpCase Named(OpCase c, const std::string& extra) {
  c.name += ", " + extra;
  return c;
}

// Nearest: oneDNN's integer upscales, its separable fallbacks, the separable kernel's modes.
std::vector<OpCase> NearestResizeCases() {
  const Shape x = {2, 3, 5, 4};
  const std::string n = "nearest";
  uint32_t seed = 501;
  return {
      ResizeCase(13, x, n, "asymmetric", "floor", {1, 1, 2, 2}, {}, seed++),
      ResizeCase(13, x, n, "half_pixel", "round_prefer_floor", {1, 1, 3, 2}, {}, seed++),
      ResizeCase(13, x, n, "pytorch_half_pixel", "round_prefer_ceil", {}, {2, 3, 15, 8}, seed++),
      ResizeCase(13, x, n, "asymmetric", "floor", {1, 1, 0.5f, 1}, {}, seed++),
      ResizeCase(13, x, n, "asymmetric", "floor", {1, 1, 2.5f, 2}, {}, seed++),
      ResizeCase(13, x, n, "half_pixel", "round_prefer_floor", {}, {2, 3, 3, 7}, seed++),
      ResizeCase(13, x, n, "align_corners", "round_prefer_floor", {1, 1, 2, 2}, {}, seed++),
      ResizeCase(13, x, n, "asymmetric", "round_prefer_floor", {1, 1, 2, 2}, {}, seed++),
      ResizeCase(13, x, n, "half_pixel", "ceil", {1, 1, 1.5f, 0.75f}, {}, seed++),
      ResizeCase(13, x, n, "tf_half_pixel_for_nn", "round_prefer_floor", {1, 1, 2, 3}, {}, seed++),
      ResizeCase(13, x, n, "align_corners", "round_prefer_floor", {1, 2, 1, 1}, {}, seed++),
      ResizeCase(13, x, n, "asymmetric", "floor", {1, 2, 2, 1}, {}, seed++),
      ResizeCase(11, {2, 3, 7}, n, "asymmetric", "floor", {1, 1, 3}, {}, seed++),
      ResizeCase(10, x, n, "", "", {1, 1, 2, 3}, {}, seed++),
      ResizeCase(10, x, n, "", "", {1, 1, 0.6f, 1.5f}, {}, seed++),
  };
}

// Linear and cubic: oneDNN's half_pixel, its separable fallbacks, the separable kernel's modes.
std::vector<OpCase> LinearResizeCases() {
  const Shape x = {2, 3, 5, 4};
  const std::string l = "linear", c = "cubic";
  uint32_t seed = 531;
  return {
      ResizeCase(13, x, l, "half_pixel", "", {1, 1, 2, 2}, {}, seed++),
      ResizeCase(13, x, l, "half_pixel", "", {}, {2, 3, 8, 11}, seed++),
      ResizeCase(13, x, l, "pytorch_half_pixel", "", {}, {2, 3, 2, 8}, seed++),
      ResizeCase(13, {1, 3, 40, 33}, l, "half_pixel", "", {1, 1, 2, 2}, {}, seed++),
      ResizeCase(13, x, l, "pytorch_half_pixel", "", {1, 1, 0.5f, 2}, {}, seed++),
      ResizeCase(13, x, l, "pytorch_half_pixel", "", {}, {2, 3, 1, 8}, seed++),
      ResizeCase(13, x, l, "half_pixel", "", {1, 1, 2.5f, 2}, {}, seed++),
      ResizeCase(13, x, l, "half_pixel", "", {}, {2, 3, 3, 3}, seed++),
      ResizeCase(13, x, l, "asymmetric", "", {1, 1, 2, 2}, {}, seed++),
      ResizeCase(13, x, l, "align_corners", "", {}, {2, 3, 9, 7}, seed++),
      ResizeCase(13, {1, 2, 3, 4, 5}, l, "half_pixel", "", {1, 1, 2, 2, 2}, {}, seed++),
      ResizeCase(13, {5, 4}, l, "half_pixel", "", {}, {9, 7}, seed++),
      ResizeCase(10, x, l, "", "", {1, 1, 2, 2}, {}, seed++),
      ResizeCase(19, x, l, "half_pixel_symmetric", "", {1, 1, 1.6f, 2.5f}, {}, seed++),
      ResizeCase(13, x, c, "half_pixel", "", {1, 1, 2, 2}, {}, seed++),
      Named(ResizeCase(13, x, c, "asymmetric", "", {1, 1, 1.5f, 2.5f}, {}, seed++)
                .Int("exclude_outside", 1)
                .Float("cubic_coeff_a", -0.5f),
            "exclude_outside, a -0.5"),
      Named(ResizeCase(18, x, c, "half_pixel", "", {1, 1, 0.5f, 0.6f}, {}, seed++)
                .Int("antialias", 1),
            "antialias"),
      Named(ResizeCase(18, x, l, "pytorch_half_pixel", "", {}, {2, 3, 3, 2}, seed++)
                .Int("antialias", 1),
            "antialias"),
  };
}

// Resize-11's roi for tf_crop_and_resize, Resize-13 with roi and scales omitted, Resize-18's
// axes and keep_aspect_ratio_policy, 8-bit X (oneDNN, nearest only).
std::vector<OpCase> OtherResizeCases() {
  const Shape x = {2, 3, 5, 4};
  uint32_t seed = 561;
  std::vector<OpCase> cases;
  // kiln selftest's former Resize cases, on [1,3,5,6].
  const Shape st = {1, 3, 5, 6};
  cases.push_back(ResizeCase(13, st, "nearest", "asymmetric", "floor", {1, 1, 2, 2}, {}, seed++));
  cases.push_back(
      ResizeCase(13, st, "linear", "half_pixel", "round_prefer_floor", {}, {1, 3, 3, 4}, seed++));
  cases.push_back(ResizeCase(13, st, "linear", "align_corners", "round_prefer_floor",
                             {1, 1, 1.5f, 1.5f}, {}, seed++));
  cases.push_back(
      ResizeCase(13, st, "cubic", "half_pixel", "round_prefer_floor", {1, 1, 2, 2}, {}, seed++));
  cases.push_back(Named(ResizeCase(11, x, "linear", "tf_crop_and_resize", "", {}, {2, 3, 6, 5},
                                   seed++, {0, 0, 0.2f, -0.1f, 1, 1, 0.9f, 1.3f})
                            .Float("extrapolation_value", 7.5f),
                        "roi, extrapolation 7.5"));
  OpCase omitted("Resize-13 [2,3,5,4] linear half_pixel, roi and scales omitted, sizes [2,3,7,6]",
                 13);
  omitted.In(CaseTensor(x, seed++)).Str("mode", "linear").Omitted().Omitted();
  cases.push_back(omitted.Const(CaseInt64s({2, 3, 7, 6})));
  OpCase axes("Resize-18 [2,3,5,4] cubic axes [3,2] scales [1.5,2]", 18);
  axes.In(CaseTensor(x, seed++)).Str("mode", "cubic").Ints("axes", {3, 2});
  cases.push_back(axes.Omitted().Const(CaseFloats({1.5f, 2.f}, {2})));
  for (const char* policy : {"not_larger", "not_smaller"}) {
    OpCase p(std::string("Resize-18 [2,3,5,4] linear sizes [8,9] axes [2,3] ") + policy, 18);
    p.In(CaseTensor(x, seed++)).Str("mode", "linear").Ints("axes", {2, 3});
    p.Str("keep_aspect_ratio_policy", policy).Omitted().Omitted();
    cases.push_back(p.Const(CaseInt64s({8, 9})));
  }
  for (DataType t : {DataType::kUInt8, DataType::kInt8}) {
    OpCase c = ResizeCase(13, x, "nearest", "asymmetric", "floor", {1, 1, 2, 3}, {}, seed++);
    c.inputs[0].value = CaseInts(t, x, seed++, t == DataType::kUInt8 ? 0 : -128, 127);
    cases.push_back(Named(c, DataTypeName(t)));
  }
  return cases;
}

std::vector<OpCase> ResizeCases() {
  std::vector<OpCase> cases = NearestResizeCases();
  for (auto* more : {&LinearResizeCases, &OtherResizeCases})
    for (OpCase& c : more()) cases.push_back(std::move(c));
  return cases;
}
KILN_REGISTER_OP_CASES("", "Resize", &ResizeCases);

// Upsample-9 (scales input) and -7 (attribute): oneDNN's integer nearest upscales, its separable
// fallback (a scale of 1.5), N or C upsampled (the reference), linear (separable), 8-bit X.
std::vector<OpCase> UpsampleCases() {
  struct Spec {
    int opset;
    std::string mode;
    Shape x;
    std::vector<float> scales;
    DataType dtype = DataType::kFloat;
  };
  const std::vector<Spec> specs = {
      {9, "nearest", {1, 2, 3, 4}, {1, 1, 2, 3}},
      {7, "nearest", {2, 3, 5, 4}, {1, 1, 2, 3}},
      {9, "nearest", {2, 3, 5, 4}, {1, 1, 1.5f, 2}},
      {9, "nearest", {2, 3, 5, 4}, {1, 2, 1, 1}},
      {9, "linear", {2, 3, 5, 4}, {1, 1, 2, 2}},
      {7, "linear", {2, 3, 5, 4}, {1, 1, 1.5f, 3}},
      {9, "nearest", {2, 3, 7}, {1, 1, 2}},
      {13, "nearest", {1, 3, 33, 20}, {1, 1, 2, 2}},
      {9, "nearest", {2, 3, 5, 4}, {1, 1, 2, 2}, DataType::kUInt8},
  };
  std::vector<OpCase> cases;
  uint32_t seed = 581;
  for (const Spec& s : specs) {
    OpCase c("Upsample-" + std::to_string(s.opset) + " " + DataTypeName(s.dtype) +
                 ShapeToString(s.x) + " " + s.mode + " scales " + FloatsText(s.scales),
             s.opset);
    c.In(s.dtype == DataType::kFloat ? CaseTensor(s.x, seed++)
                                     : CaseInts(s.dtype, s.x, seed++, 0, 255));
    c.Str("mode", s.mode);
    if (s.opset < 9)
      c.Floats("scales", s.scales);
    else
      c.Const(CaseFloats(s.scales, {static_cast<int64_t>(s.scales.size())}));
    cases.push_back(std::move(c));
  }
  return cases;
}
KILN_REGISTER_OP_CASES("", "Upsample", &UpsampleCases);

}  // namespace
}  // namespace kiln::ops
