// DFT (opsets 17, 20) and STFT (17). Reference kernels: the plain O(N^2) sum per output bin in
// double, twiddles from a table of exp(-+2 pi i m / N), m = k*n mod N (no FFT).
//
// Complex values are a last dim of 2 (real, imaginary); a last dim of 1 is a real signal.
// DFT: input [..., 1 | 2]; the transform runs along `axis` (an attribute at opset 17, default 1;
// an optional int scalar input 2 from opset 20, default -2), which may be any dim but the last
// (negative counts from the back). dft_length (optional int scalar input 1, default the axis'
// extent) zero-pads or truncates the signal. y[k] = sum_n x[n] e^(-2 pi i k n / N); inverse = 1
// uses e^(+...) and divides by N. onesided = 1 keeps bins [0, N/2] (real input only, as the spec
// says). Output: input's shape with the axis' extent N (or N/2 + 1) and a last dim of 2.
// STFT: signal [batch, length, 1 | 2], frame_step (int scalar), optional window [W] (signal's
// dtype), optional frame_length (int scalar; default W, else the signal's length; equal to W
// when both are given). frames = 1 + (length - frame_length) / frame_step; each frame (times the
// window) is transformed with N = frame_length. onesided (default 1) keeps N/2 + 1 bins (real
// signal and window only). Output [batch, frames, bins, 2].
// dtypes: float32 (float16 as float32), float64; lengths int32 or int64, known before the run
// (they set the output shape).
#include <algorithm>
#include <cmath>
#include <memory>
#include <numbers>
#include <vector>

#include "ops/common.h"
#include "ops/op_cases.h"
#include "ops/tensor/tensor_util.h"
#include "ops/typed_dispatch.h"

namespace kiln::ops {
namespace {

struct DftAttrs : ir::OpAttrs {
  int64_t axis = 1;  // opset 17's attribute (opset 20: the input, default -2)
  bool inverse = false, onesided = false;
};

// One line: samples x[n * x_stride + c] (c < channels: 1 real, 2 complex) for n < len, times
// window[n] when given, transformed with length N into bins y[k * y_stride + {0, 1}], k < bins.
struct DftLine {
  int64_t len, channels, n, bins;
  bool inverse;
  std::vector<double> cos_table, sin_table;  // e^(sign 2 pi i m / N) for m < N

  DftLine(int64_t len, int64_t channels, int64_t n, int64_t bins, bool inverse)
      : len(len), channels(channels), n(n), bins(bins), inverse(inverse) {
    const double sign = inverse ? 1.0 : -1.0;
    for (int64_t m = 0; m < n; ++m) {
      const double a = 2.0 * std::numbers::pi * static_cast<double>(m) / static_cast<double>(n);
      cos_table.push_back(std::cos(a));
      sin_table.push_back(sign * std::sin(a));
    }
  }

  template <typename T>
  void Run(const T* x, int64_t x_stride, const T* window, T* y, int64_t y_stride) const {
    const int64_t used = std::min(len, n);
    for (int64_t k = 0; k < bins; ++k) {
      double re = 0, im = 0;
      for (int64_t i = 0; i < used; ++i) {
        const double w = window ? static_cast<double>(window[i]) : 1.0;
        const double xr = x[i * x_stride] * w;
        const double xi = channels == 2 ? x[i * x_stride + 1] * w : 0.0;
        const int64_t m = (k * i) % n;
        re += xr * cos_table[m] - xi * sin_table[m];
        im += xr * sin_table[m] + xi * cos_table[m];
      }
      const double scale = inverse ? 1.0 / static_cast<double>(n) : 1.0;
      y[k * y_stride] = static_cast<T>(re * scale);
      y[k * y_stride + 1] = static_cast<T>(im * scale);
    }
  }
};

// A known positive int scalar input (dft_length, frame_step, frame_length).
StatusOr<int64_t> KnownLength(const ir::InferContext& ctx, size_t i, const std::string& what) {
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> v, KnownInts(ctx, i, what));
  if (v.size() != 1) return ctx.Error(what + " must be a scalar; got " + IntsToString(v));
  if (v[0] < 1) return ctx.Error(what + " must be >= 1; got " + std::to_string(v[0]));
  return v[0];
}

class DftOp final : public ir::Op {
 public:
  static StatusOr<std::unique_ptr<ir::Op>> Create(const ir::Node& node) {
    std::unique_ptr<DftOp> op(new DftOp(node));
    op->a_.axis = node.GetInt("axis", 1);
    for (const char* name : {"inverse", "onesided"}) {
      const int64_t v = node.GetInt(name, 0);
      if (v != 0 && v != 1)
        return ir::AttrError(node, std::string(name) + " must be 0 or 1; got " + std::to_string(v));
    }
    op->a_.inverse = node.GetInt("inverse", 0) == 1;
    op->a_.onesided = node.GetInt("onesided", 0) == 1;
    return std::unique_ptr<ir::Op>(std::move(op));
  }

  std::vector<int> ShapeInputs() const override { return {1, 2}; }

  Status Infer(ir::InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(0, {DataType::kFloat, DataType::kDouble}));
    const Shape& x = ctx.shape(0);
    const int64_t r = ctx.rank(0);
    if (r < 2 || (x.back() != 1 && x.back() != 2))
      return ctx.Error("input must be [..., 1] (real) or [..., 2] (complex) with rank >= 2; got " +
                       ShapeToString(x));
    int64_t axis = a_.axis;
    if (opset() >= 20) {
      axis = -2;
      if (ctx.has_input(2)) {
        KILN_ASSIGN_OR_RETURN(std::vector<int64_t> v, KnownInts(ctx, 2, "DFT's axis"));
        if (v.size() != 1) return ctx.Error("axis must be a scalar; got " + IntsToString(v));
        axis = v[0];
      }
    }
    if (axis < -r || axis > r - 2 || axis == -1)
      return ctx.Error("axis must be in [" + std::to_string(-r) + ", -2] or [0, " +
                       std::to_string(r - 2) + "] (not the complex dim); got " +
                       std::to_string(axis));
    if (axis < 0) axis += r;
    int64_t n = x[axis];
    if (ctx.has_input(1)) {
      KILN_ASSIGN_OR_RETURN(n, KnownLength(ctx, 1, "dft_length"));
    }
    if (n < 1) return ctx.Error("the DFT length must be >= 1; got " + std::to_string(n));
    if (a_.onesided && x.back() == 2)
      return ctx.Error("onesided = 1 needs a real input (last dim 1); got " + ShapeToString(x));
    Shape y = x;
    y[axis] = a_.onesided ? n / 2 + 1 : n;
    y.back() = 2;
    ctx.SetOutput(0, ctx.dtype(0), y);
    return OkStatus();
  }

  Status Compute(const ir::ComputeContext& ctx) const override {
    const Tensor& xt = ctx.in(0);
    const Shape& x = xt.shape();
    const Shape& y = ctx.out(0).shape();
    const int64_t axis = ResolvedAxis(ctx);
    const int64_t n = ctx.has(1) ? ReadInts(ctx.in(1))[0] : x[axis];
    const int64_t outer = NumElements(Shape(x.begin(), x.begin() + axis));
    const int64_t inner = NumElements(Shape(x.begin() + axis + 1, x.end() - 1));
    const int64_t channels = x.back(), len = x[axis], bins = y[axis];
    const DftLine line(len, channels, n, bins, a_.inverse);
    return DispatchFloating(xt.dtype(), describe(), [&](auto tag) {
      using T = decltype(tag);
      const T* src = xt.data<T>();
      T* dst = ctx.out(0).data<T>();
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < inner; ++i)
          line.Run<T>(src + (o * len * inner + i) * channels, inner * channels, nullptr,
                      dst + (o * bins * inner + i) * 2, inner * 2);
      return OkStatus();
    });
  }

  const ir::OpAttrs* attributes() const override { return &a_; }

 private:
  explicit DftOp(const ir::Node& node) : Op(node) {}

  int64_t ResolvedAxis(const ir::ComputeContext& ctx) const {
    const int64_t r = ctx.in(0).rank();
    int64_t axis = a_.axis;
    if (opset() >= 20) axis = ctx.has(2) ? ReadInts(ctx.in(2))[0] : -2;
    return axis < 0 ? axis + r : axis;
  }

  DftAttrs a_;
};
KILN_REGISTER_OP("DFT", 17, ir::kMaxOpset, &DftOp::Create);

class StftOp final : public ir::Op {
 public:
  static StatusOr<std::unique_ptr<ir::Op>> Create(const ir::Node& node) {
    std::unique_ptr<StftOp> op(new StftOp(node));
    const int64_t v = node.GetInt("onesided", 1);
    if (v != 0 && v != 1)
      return ir::AttrError(node, "onesided must be 0 or 1; got " + std::to_string(v));
    op->onesided_ = v == 1;
    return std::unique_ptr<ir::Op>(std::move(op));
  }

  std::vector<int> ShapeInputs() const override { return {1, 3}; }

  Status Infer(ir::InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(0, {DataType::kFloat, DataType::kDouble}));
    const Shape& x = ctx.shape(0);
    if (x.size() != 3 || (x[2] != 1 && x[2] != 2))
      return ctx.Error(
          "signal must be [batch, length, 1] (real) or [batch, length, 2] (complex); got " +
          ShapeToString(x));
    KILN_ASSIGN_OR_RETURN(const int64_t step, KnownLength(ctx, 1, "frame_step"));
    int64_t frame = x[1];
    if (ctx.has_input(2)) {
      if (ctx.dtype(2) != ctx.dtype(0) || ctx.rank(2) != 1)
        return ctx.Error("window must be 1-D with the signal's dtype; got " +
                         std::string(DataTypeName(ctx.dtype(2))) + ShapeToString(ctx.shape(2)));
      frame = ctx.shape(2)[0];
    }
    if (ctx.has_input(3)) {
      KILN_ASSIGN_OR_RETURN(const int64_t fl, KnownLength(ctx, 3, "frame_length"));
      if (ctx.has_input(2) && fl != frame)
        return ctx.Error("frame_length must equal the window's length " + std::to_string(frame) +
                         "; got " + std::to_string(fl));
      frame = fl;
    }
    if (frame < 1 || frame > x[1])
      return ctx.Error("the frame length must be in [1, signal length " + std::to_string(x[1]) +
                       "]; got " + std::to_string(frame));
    if (onesided_ && x[2] == 2)
      return ctx.Error("onesided = 1 needs a real signal (last dim 1); got " + ShapeToString(x));
    const int64_t frames = 1 + (x[1] - frame) / step;
    ctx.SetOutput(0, ctx.dtype(0), {x[0], frames, onesided_ ? frame / 2 + 1 : frame, 2});
    return OkStatus();
  }

  Status Compute(const ir::ComputeContext& ctx) const override {
    const Tensor& xt = ctx.in(0);
    const Shape& y = ctx.out(0).shape();
    const int64_t batch = y[0], frames = y[1], bins = y[2], len = xt.shape()[1];
    const int64_t channels = xt.shape()[2], step = ReadInts(ctx.in(1))[0];
    const int64_t frame =
        ctx.has(2) ? ctx.in(2).numel() : (ctx.has(3) ? ReadInts(ctx.in(3))[0] : len);
    const DftLine line(frame, channels, frame, bins, false);
    return DispatchFloating(xt.dtype(), describe(), [&](auto tag) {
      using T = decltype(tag);
      const T* window = ctx.has(2) ? ctx.in(2).data<T>() : nullptr;
      for (int64_t b = 0; b < batch; ++b)
        for (int64_t f = 0; f < frames; ++f)
          line.Run<T>(xt.data<T>() + (b * len + f * step) * channels, channels, window,
                      ctx.out(0).data<T>() + (b * frames + f) * bins * 2, 2);
      return OkStatus();
    });
  }

 private:
  explicit StftOp(const ir::Node& node) : Op(node) {}
  bool onesided_ = true;
};
KILN_REGISTER_OP("STFT", 17, ir::kMaxOpset, &StftOp::Create);

// Cases: real and complex input, each axis (an attribute at 17, an input at 20), dft_length
// padding and truncating, inverse, onesided, odd lengths; STFT with and without a window,
// onesided and not, a complex signal.
std::vector<OpCase> DftCases() {
  std::vector<OpCase> cases;
  cases.push_back(OpCase("real [2,7,1] axis 1", 17).In(CaseTensor({2, 7, 1}, 1)));
  cases.push_back(
      OpCase("complex [3,5,2] axis 1 inverse", 17).In(CaseTensor({3, 5, 2}, 2)).Int("inverse", 1));
  cases.push_back(OpCase("real [2,3,6,1] axis 2 dft_length 9 onesided", 17)
                      .In(CaseTensor({2, 3, 6, 1}, 3))
                      .Const(CaseInt64s({9}))
                      .Int("axis", 2)
                      .Int("onesided", 1));
  cases.push_back(OpCase("complex [4,3,2] axis -3 dft_length 3 (opset 20)", 20)
                      .In(CaseTensor({4, 3, 2}, 4))
                      .Const(CaseInt64s({3}))
                      .Const(CaseInt64s({-3})));
  cases.push_back(OpCase("real [1,8,1] default axis (opset 20)", 20).In(CaseTensor({1, 8, 1}, 5)));
  return cases;
}
KILN_REGISTER_OP_CASES("", "DFT", &DftCases);

std::vector<OpCase> StftCases() {
  std::vector<OpCase> cases;
  cases.push_back(OpCase("real [2,37,1] step 5 window 8", 17)
                      .In(CaseTensor({2, 37, 1}, 6))
                      .Const(CaseInt64s({5}))
                      .In(CaseTensor({8}, 7, 0.f, 1.f)));
  cases.push_back(OpCase("real [1,20,1] step 3 frame_length 7 two-sided", 17)
                      .In(CaseTensor({1, 20, 1}, 8))
                      .Const(CaseInt64s({3}))
                      .Omitted()
                      .Const(CaseInt64s({7}))
                      .Int("onesided", 0));
  cases.push_back(OpCase("complex [1,9,2] step 2 window 4 two-sided", 17)
                      .In(CaseTensor({1, 9, 2}, 9))
                      .Const(CaseInt64s({2}))
                      .In(CaseTensor({4}, 10))
                      .Int("onesided", 0));
  return cases;
}
KILN_REGISTER_OP_CASES("", "STFT", &StftCases);

}  // namespace
}  // namespace kiln::ops
