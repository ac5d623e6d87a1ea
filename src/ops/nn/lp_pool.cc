// LpPool (opsets 1, 2, 11, 18, 22) and GlobalLpPool (1, 2, 22). Reference kernels.
//
// Layout: X [N, C, D1..Dn] row-major, Y [N, C, O1..On]; GlobalLpPool gives [N, C, 1, ..., 1].
// y = (sum over the window's taps of |x|^p)^(1/p), the sum in double. Padded taps (and the
// ceil_mode overhang) hold zero, so they add nothing: no divisor, unlike AveragePool. (ONNX's
// Python reference computes kernel size * AveragePool(|x|^p), which scales windows in the
// ceil_mode overhang by kernel size / taps inside; kiln keeps the Lp norm the spec defines, as
// ONNX Runtime does. No node test has ceil_mode.)
// p: a float attribute at opset 1 (default 2.0), an int from opset 2 (default 2); it must be > 0.
// Window geometry (spatial.h): kernel_shape, strides, pads, auto_pad; dilations and ceil_mode
// from opset 18 (as AveragePool, a window must start inside the input or its begin padding).
// dtypes: float32 (float16 as float32), float64. Limits: 1 to 3 spatial dims for LpPool, any
// rank >= 2 for GlobalLpPool.
#include <cmath>
#include <memory>
#include <vector>

#include "ops/common.h"
#include "ops/nn/spatial.h"
#include "ops/op_cases.h"
#include "ops/typed_dispatch.h"

namespace kiln::ops {
namespace {

using ir::ComputeContext;
using ir::InferContext;
using ir::Node;
using ir::Op;
using nn::Geometry3;
using nn::Window;

struct LpPoolAttrs : ir::OpAttrs {
  nn::WindowAttrs window;
  bool ceil_mode = false;
  double p = 2.0;
};

// p as the opset defines it: a float at opset 1, an int after.
Status ParseP(const Node& node, double* p) {
  if (node.opset < 2) {
    const float v = node.GetFloat("p", 2.f);
    if (!(v > 0.f)) return ir::AttrError(node, "p must be > 0; got " + std::to_string(v));
    *p = v;
    return OkStatus();
  }
  const int64_t v = node.GetInt("p", 2);
  if (v <= 0) return ir::AttrError(node, "p must be > 0; got " + std::to_string(v));
  *p = static_cast<double>(v);
  return OkStatus();
}

// |x|^p for the common powers without pow().
double AbsPow(double x, double p) {
  const double a = std::fabs(x);
  if (p == 1.0) return a;
  if (p == 2.0) return a * a;
  return std::pow(a, p);
}

double Root(double s, double p) {
  if (p == 1.0) return s;
  if (p == 2.0) return std::sqrt(s);
  return std::pow(s, 1.0 / p);
}

Status ExpectFloating(InferContext& ctx) {
  return ctx.ExpectDtype(0, {DataType::kFloat, DataType::kDouble});
}

class LpPoolOp final : public Op {
 public:
  static StatusOr<std::unique_ptr<Op>> Create(const Node& node) {
    std::unique_ptr<LpPoolOp> op(new LpPoolOp(node));
    LpPoolAttrs& a = op->a_;
    KILN_RETURN_IF_ERROR(
        nn::ParseWindowAttrs(node, /*allow_dilations=*/node.opset >= 18, &a.window));
    if (a.window.kernel_shape.empty())
      return ir::AttrError(node, "kernel_shape is required; got none");
    const int64_t ceil_mode = node.GetInt("ceil_mode", 0);
    if (ceil_mode != 0 && ceil_mode != 1)
      return ir::AttrError(node, "ceil_mode must be 0 or 1; got " + std::to_string(ceil_mode));
    if (ceil_mode == 1 && node.opset < 18)
      return ir::AttrError(node, "ceil_mode is defined from opset 18; got ceil_mode 1");
    a.ceil_mode = ceil_mode == 1;
    KILN_RETURN_IF_ERROR(ParseP(node, &a.p));
    return std::unique_ptr<Op>(std::move(op));
  }

  Status Infer(InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ExpectFloating(ctx));
    const Shape& x = ctx.shape(0);
    if (x.size() < 3)
      return ctx.Error("X must be [N, C, spatial...] with at least one spatial dim; got rank " +
                       std::to_string(x.size()));
    if (x.size() > 5)
      return Unsupported("failed to infer shapes of " + describe() +
                         ": kiln's LpPool handles 1 to 3 spatial dims; got " +
                         std::to_string(x.size() - 2));
    Window win;
    const std::string err = Resolve(x, &win);
    if (!err.empty()) return ctx.Error(err);
    Shape y = {x[0], x[1]};
    y.insert(y.end(), win.out.begin(), win.out.end());
    ctx.SetOutput(0, ctx.dtype(0), y);
    return OkStatus();
  }

  Status Compute(const ComputeContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    Window win;
    const std::string err = Resolve(x.shape(), &win);
    if (!err.empty()) return RunError(err);
    const Geometry3 g = nn::ToGeometry3(win);
    const int64_t planes = x.shape()[0] * x.shape()[1];
    return DispatchFloating(x.dtype(), describe(), [&](auto tag) {
      using T = decltype(tag);
      Run<T>(x.data<T>(), g, planes, ctx.out(0).data<T>());
      return OkStatus();
    });
  }

  const ir::OpAttrs* attributes() const override { return &a_; }

 private:
  explicit LpPoolOp(const Node& node) : Op(node) {}

  std::string Resolve(const Shape& x, Window* win) const {
    const std::vector<int64_t> in(x.begin() + 2, x.end());
    return nn::ForwardWindow(a_.window, in, {}, a_.ceil_mode, win);
  }

  // Every tap of every window; taps outside the input are padding (zero).
  template <typename T>
  void Run(const T* x, const Geometry3& g, int64_t planes, T* y) const {
    for (int64_t pl = 0; pl < planes; ++pl) {
      const T* xp = x + pl * g.in_size();
      for (int64_t od = 0; od < g.out[0]; ++od)
        for (int64_t oh = 0; oh < g.out[1]; ++oh)
          for (int64_t ow = 0; ow < g.out[2]; ++ow) {
            double sum = 0;
            for (int64_t td = 0; td < g.k[0]; ++td) {
              const int64_t id = od * g.s[0] - g.pb[0] + td * g.d[0];
              if (id < 0 || id >= g.in[0]) continue;
              for (int64_t th = 0; th < g.k[1]; ++th) {
                const int64_t ih = oh * g.s[1] - g.pb[1] + th * g.d[1];
                if (ih < 0 || ih >= g.in[1]) continue;
                const T* row = xp + (id * g.in[1] + ih) * g.in[2];
                for (int64_t tw = 0; tw < g.k[2]; ++tw) {
                  const int64_t iw = ow * g.s[2] - g.pb[2] + tw * g.d[2];
                  if (iw >= 0 && iw < g.in[2]) sum += AbsPow(row[iw], a_.p);
                }
              }
            }
            *y++ = static_cast<T>(Root(sum, a_.p));
          }
    }
  }

  LpPoolAttrs a_;
};

// GlobalLpPool: the Lp norm of each (n, c) plane.
class GlobalLpPoolOp final : public Op {
 public:
  static StatusOr<std::unique_ptr<Op>> Create(const Node& node) {
    std::unique_ptr<GlobalLpPoolOp> op(new GlobalLpPoolOp(node));
    KILN_RETURN_IF_ERROR(ParseP(node, &op->a_.p));
    return std::unique_ptr<Op>(std::move(op));
  }

  Status Infer(InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ExpectFloating(ctx));
    const Shape& x = ctx.shape(0);
    if (x.size() < 2)
      return ctx.Error("X must be [N, C, spatial...]; got rank " + std::to_string(x.size()));
    Shape y(x.size(), 1);
    y[0] = x[0];
    y[1] = x[1];
    ctx.SetOutput(0, ctx.dtype(0), y);
    return OkStatus();
  }

  Status Compute(const ComputeContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    return DispatchFloating(x.dtype(), describe(), [&](auto tag) {
      using T = decltype(tag);
      Run<T>(x, ctx.out(0).data<T>());
      return OkStatus();
    });
  }

  const ir::OpAttrs* attributes() const override { return &a_; }

 private:
  explicit GlobalLpPoolOp(const Node& node) : Op(node) {}

  template <typename T>
  void Run(const Tensor& xt, T* y) const {
    const int64_t planes = xt.shape()[0] * xt.shape()[1];
    const int64_t plane = planes > 0 ? xt.numel() / planes : 0;
    const T* x = xt.data<T>();
    for (int64_t pl = 0; pl < planes; ++pl) {
      double sum = 0;
      for (int64_t i = 0; i < plane; ++i) sum += AbsPow(x[pl * plane + i], a_.p);
      y[pl] = static_cast<T>(Root(sum, a_.p));
    }
  }

  LpPoolAttrs a_;
};

KILN_REGISTER_OP("LpPool", 1, ir::kMaxOpset, &LpPoolOp::Create);
KILN_REGISTER_OP("GlobalLpPool", 1, ir::kMaxOpset, &GlobalLpPoolOp::Create);

// Cases: 1-D to 3-D, strides, pads, auto_pad, dilations and ceil_mode (opset 18), p 1, 2 and 3,
// the float p of opset 1, size-1 dims.
std::vector<OpCase> LpPoolCases() {
  std::vector<OpCase> cases;
  cases.push_back(OpCase("[2,3,17] kernel 3 stride 2 pads 1 1 p 3", 11)
                      .In(CaseTensor({2, 3, 17}, 1))
                      .Ints("kernel_shape", {3})
                      .Ints("strides", {2})
                      .Ints("pads", {1, 1})
                      .Int("p", 3));
  cases.push_back(OpCase("[1,2,7,9] kernel 3x2 p 1", 11)
                      .In(CaseTensor({1, 2, 7, 9}, 2))
                      .Ints("kernel_shape", {3, 2})
                      .Int("p", 1));
  cases.push_back(OpCase("[1,3,10,9] kernel 3x3 stride 2 SAME_LOWER", 11)
                      .In(CaseTensor({1, 3, 10, 9}, 3))
                      .Ints("kernel_shape", {3, 3})
                      .Ints("strides", {2, 2})
                      .Str("auto_pad", "SAME_LOWER"));
  cases.push_back(OpCase("[1,2,9,8] kernel 2x2 dilations 2x1 ceil_mode stride 2", 18)
                      .In(CaseTensor({1, 2, 9, 8}, 4))
                      .Ints("kernel_shape", {2, 2})
                      .Ints("strides", {2, 2})
                      .Ints("dilations", {2, 1})
                      .Ints("pads", {1, 0, 0, 1})
                      .Int("ceil_mode", 1));
  cases.push_back(OpCase("[1,1,3,4,5] kernel 2x2x2 p 4", 18)
                      .In(CaseTensor({1, 1, 3, 4, 5}, 5))
                      .Ints("kernel_shape", {2, 2, 2})
                      .Int("p", 4));
  cases.push_back(OpCase("[1,1,1,5] kernel 1x3 float p 2.0 (opset 1)", 1)
                      .In(CaseTensor({1, 1, 1, 5}, 6))
                      .Ints("kernel_shape", {1, 3})
                      .Float("p", 2.f));
  return cases;
}
KILN_REGISTER_OP_CASES("", "LpPool", &LpPoolCases);

std::vector<OpCase> GlobalLpPoolCases() {
  std::vector<OpCase> cases;
  cases.push_back(OpCase("[2,3,5,7] p 2", 2).In(CaseTensor({2, 3, 5, 7}, 7)));
  cases.push_back(OpCase("[1,4,9] p 3", 2).In(CaseTensor({1, 4, 9}, 8)).Int("p", 3));
  cases.push_back(OpCase("[1,1,1,1] p 1", 2).In(CaseTensor({1, 1, 1, 1}, 9)).Int("p", 1));
  return cases;
}
KILN_REGISTER_OP_CASES("", "GlobalLpPool", &GlobalLpPoolCases);

}  // namespace
}  // namespace kiln::ops
