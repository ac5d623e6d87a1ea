// GridSample (16-24) and AffineGrid (20-24): the spatial-transformer pair.
//
// GridSample: X [N, C, D1..Dr], grid [N, O1..Or, r] of normalized coordinates in [-1, 1] (the
// last grid component indexes X's last dim, as PyTorch's grid_sample orders them); output
// [N, C, O1..Or]. GridSample-16 takes 4-D X only and names its modes bilinear / nearest / bicubic;
// GridSample-20 is N-D with linear / nearest / cubic. Per dim, coordinate g maps to
// align_corners ? (g + 1) / 2 * (len - 1) : ((g + 1) * len - 1) / 2; nearest rounds half to even
// (PyTorch's rule); for nearest and linear a coordinate outside [-0.5, len - 0.5] ([0, len - 1]
// with align_corners) is clamped to [0, len - 1] (padding_mode border) or reflected about those
// bounds (reflection); cubic pads its taps only, as PyTorch and ONNX Runtime do (ONNX's
// reference also clamps a cubic coordinate with border padding; its node tests do not cover it).
// Taps: nearest 1, linear floor(x) and floor(x) + 1 with weights 1 - t, t, cubic floor(x) - 1 ..
// floor(x) + 2 with Keys' kernel (a = -0.75); a tap outside the input reads 0 (zeros), the edge
// (border) or its reflection (reflection); the N-D weight is the product of the per-dim ones. A
// non-finite coordinate reads 0. This follows ONNX's reference and PyTorch.
//
// AffineGrid: theta [N, 2, 3] (2-D) or [N, 3, 4] (3-D), size (int64 [N, C, H, W] or [N, C, D, H,
// W], a shape input); output [N, H, W, 2] or [N, D, H, W, 3] = theta applied to the base grid
// (x, y[, z], 1), whose coordinates along a dim of length L are -1 + (2i + 1) / L, or with
// align_corners -1 + 2i / (L - 1) (-1 when L = 1).
//
// Reference algorithms: plain loops, double arithmetic; float32 only.
#include "ops/resize/grid_sample.h"

#include <algorithm>
#include <cmath>

#include "ops/common.h"
#include "ops/op_cases.h"
#include "ops/resize/keys_cubic.h"

namespace kiln::ops {
namespace {

using ir::ComputeContext;
using ir::InferContext;
using ir::Node;

// Reflects x about [lo, hi] until it lies inside (ONNX's reference / PyTorch's reflect).
double Reflect(double x, double lo, double hi) {
  const double range = hi - lo;
  if (range <= 0.0) return lo;
  if (x < lo) {
    const double dx = lo - x, n = std::floor(dx / range), r = dx - n * range;
    return std::fmod(n, 2.0) == 0.0 ? lo + r : hi - r;
  }
  if (x > hi) {
    const double dx = x - hi, n = std::floor(dx / range), r = dx - n * range;
    return std::fmod(n, 2.0) == 0.0 ? hi - r : lo + r;
  }
  return x;
}

}  // namespace

StatusOr<GridSampleAttrs> GridSampleAttrsOf(const Node& node) {
  GridSampleAttrs a;
  const bool v20 = node.opset >= 20;
  const std::string mode = node.GetString("mode", v20 ? "linear" : "bilinear");
  if (mode == "nearest")
    a.mode = GridMode::kNearest;
  else if (mode == (v20 ? "linear" : "bilinear"))
    a.mode = GridMode::kLinear;
  else if (mode == (v20 ? "cubic" : "bicubic"))
    a.mode = GridMode::kCubic;
  else
    return ir::AttrError(node,
                         std::string("mode must be ") +
                             (v20 ? "linear, nearest or cubic" : "bilinear, nearest or bicubic") +
                             " at this opset; got '" + mode + "'");
  const std::string pad = node.GetString("padding_mode", "zeros");
  if (pad == "zeros")
    a.padding = GridPadding::kZeros;
  else if (pad == "border")
    a.padding = GridPadding::kBorder;
  else if (pad == "reflection")
    a.padding = GridPadding::kReflection;
  else
    return ir::AttrError(node,
                         "padding_mode must be zeros, border or reflection; got '" + pad + "'");
  const int64_t align = node.GetInt("align_corners", 0);
  if (align != 0 && align != 1)
    return ir::AttrError(node, "align_corners must be 0 or 1; got " + std::to_string(align));
  a.align_corners = align == 1;
  return a;
}

int64_t GridTaps(const GridSampleAttrs& a, double v, int64_t len, int64_t* index, double* weight) {
  // In float32, as PyTorch and ONNX's reference compute it (nearest's ties depend on it).
  const auto g = static_cast<float>(v), fl = static_cast<float>(len);
  double xv = a.align_corners ? (g + 1.f) / 2.f * (fl - 1.f) : ((g + 1.f) * fl - 1.f) / 2.f;
  if (a.mode == GridMode::kNearest) xv = std::nearbyint(xv);
  const double lo = a.align_corners ? 0.0 : -0.5;
  const double hi = a.align_corners ? static_cast<double>(len - 1) : static_cast<double>(len) - 0.5;
  // Cubic pads per tap only (PyTorch's and ONNX Runtime's rule; ONNX's reference also clamps
  // the coordinate with border padding, which moves the taps).
  if (a.mode != GridMode::kCubic && (xv < lo || xv > hi)) {
    if (a.padding == GridPadding::kBorder)
      xv = std::clamp(xv, 0.0, static_cast<double>(len - 1));
    else if (a.padding == GridPadding::kReflection)
      xv = Reflect(xv, lo, hi);
  }
  // Beyond this no tap can be inside (and the casts below stay defined); NaN lands here too.
  if (!(std::abs(xv) < 1e15)) return 0;
  int64_t first = 0, taps = 1;
  double t = 0.0;
  if (a.mode == GridMode::kNearest) {
    first = static_cast<int64_t>(xv);  // truncation, as ONNX's reference casts
  } else {
    const double fl = std::floor(xv);
    t = xv - fl;
    first = static_cast<int64_t>(fl) - (a.mode == GridMode::kCubic ? 1 : 0);
    taps = a.mode == GridMode::kCubic ? 4 : 2;
  }
  int64_t kept = 0;
  for (int64_t k = 0; k < taps; ++k) {
    double w = 1.0;
    if (a.mode == GridMode::kLinear) w = k == 0 ? 1.0 - t : t;
    if (a.mode == GridMode::kCubic) w = KeysCubic(static_cast<double>(k - 1) - t, -0.75);
    int64_t i = first + k;
    if (i < 0 || i >= len) {
      if (a.padding == GridPadding::kZeros) continue;
      i = a.padding == GridPadding::kBorder
              ? std::clamp<int64_t>(i, 0, len - 1)
              : std::clamp<int64_t>(static_cast<int64_t>(Reflect(static_cast<double>(i), lo, hi)),
                                    0, len - 1);
    }
    index[kept] = i;
    weight[kept] = w;
    ++kept;
  }
  return kept;
}

namespace {

class GridSampleOp final : public ir::Op {
 public:
  explicit GridSampleOp(const Node& node) : ir::Op(node) {}

  static StatusOr<std::unique_ptr<ir::Op>> Create(const Node& node) {
    auto op = std::unique_ptr<GridSampleOp>(new GridSampleOp(node));
    auto a = GridSampleAttrsOf(node);
    if (!a.ok()) return a.status();
    op->a_ = *a;
    return std::unique_ptr<ir::Op>(std::move(op));
  }

  Status Infer(InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(0, {DataType::kFloat}));
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(1, {DataType::kFloat}));
    const int64_t rank = ctx.rank(0);
    if (opset() < 20 && rank != 4)
      return ctx.Error("X must be 4-D [N, C, H, W] before opset 20; got " +
                       ShapeToString(ctx.shape(0)));
    if (rank < 3) return ctx.Error("X must be [N, C, D1..Dr]; got " + ShapeToString(ctx.shape(0)));
    const Shape& g = ctx.shape(1);
    if (static_cast<int64_t>(g.size()) != rank || g[0] != ctx.shape(0)[0] || g.back() != rank - 2)
      return ctx.Error("grid must be [N, O1..O" + std::to_string(rank - 2) + ", " +
                       std::to_string(rank - 2) + "] with X's N; got " + ShapeToString(g) +
                       " for X " + ShapeToString(ctx.shape(0)));
    Shape out{ctx.shape(0)[0], ctx.shape(0)[1]};
    out.insert(out.end(), g.begin() + 1, g.end() - 1);
    ctx.SetOutput(0, DataType::kFloat, std::move(out));
    return OkStatus();
  }

  Status Compute(const ComputeContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    const Tensor& grid = ctx.in(1);
    const int64_t r = x.rank() - 2;
    const int64_t n = x.shape()[0], channels = x.shape()[1];
    const std::vector<int64_t> strides = Strides(x.shape());
    int64_t plane = 1, positions = 1;
    for (int64_t d = 0; d < r; ++d) {
      plane *= x.shape()[2 + d];
      positions *= grid.shape()[1 + d];
    }
    const float* src = x.data<float>();
    const float* g = grid.data<float>();
    float* y = ctx.out(0).data<float>();
    // Per dim: up to 4 taps (offset into the plane, weight); a tap reading zero padding is dropped.
    std::vector<int64_t> count(r), off(r * 4), ci(r);
    std::vector<double> wt(r * 4);
    for (int64_t b = 0; b < n; ++b) {
      for (int64_t p = 0; p < positions; ++p) {
        bool zero = false;
        for (int64_t d = 0; d < r && !zero; ++d) {
          const int64_t len = x.shape()[2 + d];
          // grid's components are in reverse dim order.
          const double v = g[(b * positions + p) * r + (r - 1 - d)];
          count[d] = GridTaps(a_, v, len, &off[d * 4], &wt[d * 4]);
          for (int64_t k = 0; k < count[d]; ++k) off[d * 4 + k] *= strides[2 + d];
          zero = count[d] == 0;
        }
        for (int64_t c = 0; c < channels; ++c) {
          const float* s = src + (b * channels + c) * plane;
          double acc = 0.0;
          if (!zero) {
            std::fill(ci.begin(), ci.end(), 0);
            while (true) {
              double w = 1.0;
              int64_t o = 0;
              for (int64_t d = 0; d < r; ++d) {
                w *= wt[d * 4 + ci[d]];
                o += off[d * 4 + ci[d]];
              }
              acc += w * static_cast<double>(s[o]);
              int64_t d = r - 1;
              for (; d >= 0; --d) {
                if (++ci[d] < count[d]) break;
                ci[d] = 0;
              }
              if (d < 0) break;
            }
          }
          y[(b * channels + c) * positions + p] = static_cast<float>(acc);
        }
      }
    }
    return OkStatus();
  }

  GridSampleAttrs a_;
};

class AffineGridOp final : public ir::Op {
 public:
  explicit AffineGridOp(const Node& node) : ir::Op(node) {}

  static StatusOr<std::unique_ptr<ir::Op>> Create(const Node& node) {
    auto op = std::unique_ptr<AffineGridOp>(new AffineGridOp(node));
    const int64_t align = node.GetInt("align_corners", 0);
    if (align != 0 && align != 1)
      return ir::AttrError(node, "align_corners must be 0 or 1; got " + std::to_string(align));
    op->a_.align_corners = align == 1;
    return std::unique_ptr<ir::Op>(std::move(op));
  }

  std::vector<int> ShapeInputs() const override { return {1}; }
  const ir::OpAttrs* attributes() const override { return &a_; }

  Status Infer(InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(0, {DataType::kFloat}));
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(1, {DataType::kInt64}));
    const Tensor* size = ctx.value(1);
    if (!size) return ctx.Error("the size input must be known to infer the output shape");
    Shape out;
    std::string why;
    if (!OutputShape(ctx.shape(0), ReadInts(*size), &out, &why)) return ctx.Error(why);
    ctx.SetOutput(0, DataType::kFloat, std::move(out));
    return OkStatus();
  }

  Status Compute(const ComputeContext& ctx) const override {
    const Tensor& theta = ctx.in(0);
    Shape out;
    std::string why;
    const std::vector<int64_t> size = ReadInts(ctx.in(1));
    if (!OutputShape(theta.shape(), size, &out, &why)) return RunError(why);
    const int64_t r = static_cast<int64_t>(size.size()) - 2;  // 2 or 3 spatial dims
    // Base coordinates per spatial dim (in size order: [D,] H, W).
    std::vector<std::vector<double>> base(r);
    for (int64_t d = 0; d < r; ++d) {
      const int64_t len = size[2 + d];
      for (int64_t i = 0; i < len; ++i) base[d].push_back(AffineGridBase(i, len, a_.align_corners));
    }
    int64_t positions = 1;
    for (int64_t d = 0; d < r; ++d) positions *= size[2 + d];
    const float* th = theta.data<float>();
    float* y = ctx.out(0).data<float>();
    std::vector<int64_t> idx(r, 0);
    for (int64_t b = 0; b < size[0]; ++b) {
      const float* t = th + b * r * (r + 1);
      std::fill(idx.begin(), idx.end(), 0);
      for (int64_t p = 0; p < positions; ++p) {
        // Homogeneous point (x, y[, z], 1): x runs along the last dim.
        double pt[4];
        for (int64_t k = 0; k < r; ++k) pt[k] = base[r - 1 - k][idx[r - 1 - k]];
        pt[r] = 1.0;
        for (int64_t row = 0; row < r; ++row) {
          double acc = 0.0;
          for (int64_t k = 0; k <= r; ++k) acc += static_cast<double>(t[row * (r + 1) + k]) * pt[k];
          y[(b * positions + p) * r + row] = static_cast<float>(acc);
        }
        for (int64_t d = r - 1; d >= 0; --d) {
          if (++idx[d] < size[2 + d]) break;
          idx[d] = 0;
        }
      }
    }
    return OkStatus();
  }

 private:
  static bool OutputShape(const Shape& theta, const std::vector<int64_t>& size, Shape* out,
                          std::string* why) {
    if (size.size() != 4 && size.size() != 5) {
      *why = "size must be [N, C, H, W] or [N, C, D, H, W]; got " + std::to_string(size.size()) +
             " values";
      return false;
    }
    const int64_t r = static_cast<int64_t>(size.size()) - 2;
    if (theta.size() != 3 || theta[1] != r || theta[2] != r + 1) {
      *why = "theta must be [N, " + std::to_string(r) + ", " + std::to_string(r + 1) + "] for a " +
             std::to_string(r) + "-D size; got " + ShapeToString(theta);
      return false;
    }
    for (int64_t v : size)
      if (v < 0) {
        *why = "size must be >= 0; got " + ShapeToString(Shape(size.begin(), size.end()));
        return false;
      }
    if (size[0] != theta[0]) {
      *why = "size's N (" + std::to_string(size[0]) + ") must equal theta's (" +
             std::to_string(theta[0]) + ")";
      return false;
    }
    out->assign({size[0]});
    out->insert(out->end(), size.begin() + 2, size.end());
    out->push_back(r);
    return true;
  }

  AffineGridAttrs a_;
};

KILN_REGISTER_OP("GridSample", 16, ir::kMaxOpset, &GridSampleOp::Create);
KILN_REGISTER_OP("AffineGrid", 20, ir::kMaxOpset, &AffineGridOp::Create);

// Kernel cases (ops/op_cases.h) for cpu.gridsample.loops: every mode, padding and align_corners
// on 4-D X (GridSample-16's names) and 5-D X (GridSample-20's), grid coordinates up to 2.3
// outside [-1, 1] (every padding rule), more positions than one block (64); few channels (a
// gather per plane), 20 (channels-last from 16 channels with 4 taps or more) and 260 (more than
// one pass of 256 channels); NaN and infinite coordinates (read as 0).
OpCase GridSampleCase(int opset, const Shape& x, const Shape& grid, const std::string& mode,
                      const std::string& padding, int64_t align, uint32_t seed) {
  OpCase c("GridSample-" + std::to_string(opset) + " " + ShapeToString(x) + " grid " +
               ShapeToString(grid) + " " + mode + " " + padding + " align_corners " +
               std::to_string(align),
           opset);
  c.In(CaseTensor(x, seed)).In(CaseTensor(grid, seed + 1000, -2.3f, 2.3f));
  return c.Str("mode", mode).Str("padding_mode", padding).Int("align_corners", align);
}

std::vector<OpCase> GridSampleCases() {
  const char* const paddings[] = {"zeros", "border", "reflection"};
  std::vector<OpCase> cases;
  uint32_t seed = 601;
  int64_t align = 0;
  for (const char* mode : {"bilinear", "nearest", "bicubic"})
    for (const char* padding : paddings)
      for (int64_t a : {0, 1})
        cases.push_back(GridSampleCase(16, {2, 5, 7, 9}, {2, 6, 13, 2}, mode, padding, a, seed++));
  for (const char* mode : {"bilinear", "bicubic", "nearest"})
    for (const char* padding : paddings)
      cases.push_back(
          GridSampleCase(16, {2, 20, 7, 9}, {2, 6, 13, 2}, mode, padding, align ^= 1, seed++));
  for (const char* mode : {"linear", "nearest", "cubic"})
    for (const char* padding : paddings)
      cases.push_back(
          GridSampleCase(20, {2, 3, 4, 5, 6}, {2, 3, 4, 7, 3}, mode, padding, align ^= 1, seed++));
  // kiln selftest's former cases: [2,C,9,11] through a [2,7,6,2] grid.
  cases.push_back(GridSampleCase(16, {2, 5, 9, 11}, {2, 7, 6, 2}, "bilinear", "zeros", 0, seed++));
  cases.push_back(
      GridSampleCase(16, {2, 5, 9, 11}, {2, 7, 6, 2}, "bicubic", "reflection", 0, seed++));
  cases.push_back(
      GridSampleCase(16, {2, 24, 9, 11}, {2, 7, 6, 2}, "bilinear", "border", 0, seed++));
  cases.push_back(
      GridSampleCase(20, {1, 260, 3, 4, 5}, {1, 2, 3, 4, 3}, "linear", "zeros", 0, seed++));
  cases.push_back(GridSampleCase(20, {1, 260, 5, 4}, {1, 3, 7, 2}, "cubic", "border", 1, seed++));
  cases.push_back(
      GridSampleCase(20, {1, 1, 1, 1}, {1, 3, 1, 2}, "linear", "reflection", 0, seed++));
  for (const char* mode : {"bilinear", "bicubic"}) {
    OpCase c = GridSampleCase(16, {2, 17, 5, 3}, {2, 4, 3, 2}, mode, "zeros", 0, seed++);
    float* g = c.inputs[1].value.data<float>();
    g[0] = std::nanf("");
    g[3] = INFINITY;
    g[6] = -INFINITY;
    c.name += ", NaN and infinite coordinates";
    cases.push_back(std::move(c));
  }
  return cases;
}
KILN_REGISTER_OP_CASES("", "GridSample", &GridSampleCases);

// cpu.affinegrid.loops: 2-D and 3-D, both align_corners, two thetas, dims of length 1.
std::vector<OpCase> AffineGridCases() {
  std::vector<OpCase> cases;
  uint32_t seed = 661;
  for (const std::vector<int64_t>& size : {std::vector<int64_t>{2, 3, 7, 9},
                                           {2, 3, 9, 7},
                                           {2, 1, 1, 5},
                                           {2, 4, 3, 5, 6},
                                           {2, 1, 4, 1, 3}})
    for (const int64_t align : {0, 1}) {
      const int64_t r = static_cast<int64_t>(size.size()) - 2;
      cases.push_back(OpCase("AffineGrid size " + ShapeToString(size) + " align_corners " +
                                 std::to_string(align),
                             20)
                          .In(CaseTensor({2, r, r + 1}, seed++, -1.5f, 1.5f))
                          .Const(CaseInt64s(size))
                          .Int("align_corners", align));
    }
  return cases;
}
KILN_REGISTER_OP_CASES("", "AffineGrid", &AffineGridCases);

}  // namespace
}  // namespace kiln::ops
