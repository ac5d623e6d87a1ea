// Pooling: MaxPool (opsets 1, 8, 10, 11, 12), AveragePool (opsets 1, 7, 10, 11),
// GlobalMaxPool and GlobalAveragePool (opset 1). Reference kernels.
//
// Layout: X [N, C, D1..Dn] row-major, Y [N, C, O1..On]; Global pools give [N, C, 1, ..., 1].
// dtypes: float32; MaxPool also int8/uint8 from opset 12.
//
// Window geometry (spatial.h): kernel_shape, strides, pads, auto_pad, dilations (MaxPool only;
// AveragePool gained them in opset 19, past kiln's range), ceil_mode. With ceil_mode a window
// must start inside the input or its begin padding, as PyTorch and later ONNX opsets define.
//
// MaxPool: padded taps are skipped; ties keep the first tap in row-major window order. The
// optional Indices output (int64) is the flattened position over the whole input tensor:
// (n*C + c) * prod(spatial) + spatial offset, the offset row-major for storage_order 0 and
// column-major (first spatial dim fastest) for storage_order 1. A window holding no input
// element yields the type's lowest value and index -1.
// AveragePool: sums in double; the divisor counts only input elements, or with
// count_include_pad the window clipped to the padded input (not the ceil_mode overhang).
//
// Limits: 1 to 3 spatial dims for MaxPool/AveragePool (more is Unsupported); any rank >= 2 for
// the Global pools.
#include "ops/nn/pool.h"

#include <limits>
#include <memory>
#include <vector>

#include "ops/common.h"
#include "ops/nn/spatial.h"
#include "ops/op_cases.h"

namespace kiln::ops {
namespace {

using ir::ComputeContext;
using ir::InferContext;
using ir::Node;
using ir::Op;
using nn::CeilDiv;
using nn::FloorDiv;
using nn::Geometry3;
using nn::Window;

// Shared attribute parsing and shape inference of the windowed pools.
class WindowPoolOp : public Op {
 public:
  const ir::OpAttrs* attributes() const override { return &a_; }

 protected:
  explicit WindowPoolOp(const Node& node) : Op(node) {}

  Status ParseCommon(const Node& node, bool allow_dilations) {
    KILN_RETURN_IF_ERROR(nn::ParseWindowAttrs(node, allow_dilations, &a_.window));
    if (a_.window.kernel_shape.empty())
      return ir::AttrError(node, "kernel_shape is required; got none");
    const int64_t ceil_mode = node.GetInt("ceil_mode", 0);
    if (ceil_mode != 0 && ceil_mode != 1)
      return ir::AttrError(node, "ceil_mode must be 0 or 1; got " + std::to_string(ceil_mode));
    a_.ceil_mode = ceil_mode == 1;
    return OkStatus();
  }

  // Validates X (rank 3 to 5) and resolves the window for its shape.
  Status InferWindow(InferContext& ctx, Window* win) const {
    const Shape& x = ctx.shape(0);
    if (x.size() < 3)
      return ctx.Error("X must be [N, C, spatial...] with at least one spatial dim; got rank " +
                       std::to_string(x.size()));
    if (x.size() > 5)
      return Unsupported("failed to infer shapes of " + describe() +
                         ": kiln's pooling handles 1 to 3 spatial dims; got " +
                         std::to_string(x.size() - 2));
    std::string err = Resolve(x, win);
    if (!err.empty()) return ctx.Error(err);
    return OkStatus();
  }

  std::string Resolve(const Shape& x, Window* win) const {
    std::vector<int64_t> in(x.begin() + 2, x.end());
    return nn::ForwardWindow(a_.window, in, {}, a_.ceil_mode, win);
  }

  static Shape OutShape(const Shape& x, const Window& win) {
    Shape y = {x[0], x[1]};
    y.insert(y.end(), win.out.begin(), win.out.end());
    return y;
  }

  PoolAttrs a_;
};

class MaxPoolOp : public WindowPoolOp {
 public:
  static StatusOr<std::unique_ptr<Op>> Create(const Node& node) {
    std::unique_ptr<MaxPoolOp> op(new MaxPoolOp(node));
    KILN_RETURN_IF_ERROR(op->ParseCommon(node, /*allow_dilations=*/true));
    const int64_t so = node.GetInt("storage_order", 0);
    if (so != 0 && so != 1)
      return ir::AttrError(node, "storage_order must be 0 (row major) or 1 (column major); got " +
                                     std::to_string(so));
    op->a_.col_major_indices = so == 1;
    return std::unique_ptr<Op>(std::move(op));
  }

  Status Infer(InferContext& ctx) const override {
    if (opset() >= 12)
      KILN_RETURN_IF_ERROR(
          ctx.ExpectDtype(0, {DataType::kFloat, DataType::kUInt8, DataType::kInt8}));
    else
      KILN_RETURN_IF_ERROR(ctx.ExpectDtype(0, {DataType::kFloat}));
    Window win;
    KILN_RETURN_IF_ERROR(InferWindow(ctx, &win));
    const Shape y = OutShape(ctx.shape(0), win);
    ctx.SetOutput(0, ctx.dtype(0), y);
    if (ctx.num_outputs() > 1) ctx.SetOutput(1, DataType::kInt64, y);
    return OkStatus();
  }

  Status Compute(const ComputeContext& ctx) const override {
    const Tensor& xt = ctx.in(0);
    Window win;
    std::string err = Resolve(xt.shape(), &win);
    if (!err.empty()) return RunError(err);
    const Geometry3 g = nn::ToGeometry3(win);
    const int64_t planes = xt.shape()[0] * xt.shape()[1];
    int64_t* indices =
        ctx.outputs.size() > 1 && ctx.outputs[1] ? ctx.outputs[1]->data<int64_t>() : nullptr;
    switch (xt.dtype()) {
      case DataType::kFloat:
        Run<float>(xt.data<float>(), g, planes, ctx.out(0).data<float>(), indices);
        break;
      case DataType::kUInt8:
        Run<uint8_t>(xt.data<uint8_t>(), g, planes, ctx.out(0).data<uint8_t>(), indices);
        break;
      case DataType::kInt8:
        Run<int8_t>(xt.data<int8_t>(), g, planes, ctx.out(0).data<int8_t>(), indices);
        break;
      default:
        return Unsupported("failed to run " + describe() + ": unsupported dtype " +
                           DataTypeName(xt.dtype()));
    }
    return OkStatus();
  }

 private:
  explicit MaxPoolOp(const Node& node) : WindowPoolOp(node) {}

  // Taps k in [lo, hi) of one dim whose position start + k*d lies in [0, in).
  static void TapRange(int64_t start, int64_t k, int64_t d, int64_t in, int64_t* lo, int64_t* hi) {
    *lo = std::max<int64_t>(0, CeilDiv(-start, d));
    *hi = std::min<int64_t>(k, FloorDiv(in - 1 - start, d) + 1);
    if (*hi < *lo) *hi = *lo;
  }

  template <typename T>
  void Run(const T* x, const Geometry3& g, int64_t planes, T* y, int64_t* indices) const {
    const int64_t in_plane = g.in_size();
    for (int64_t p = 0; p < planes; ++p) {
      const T* xp = x + p * in_plane;
      for (int64_t od = 0; od < g.out[0]; ++od) {
        const int64_t sd = od * g.s[0] - g.pb[0];
        int64_t kd0, kd1;
        TapRange(sd, g.k[0], g.d[0], g.in[0], &kd0, &kd1);
        for (int64_t oh = 0; oh < g.out[1]; ++oh) {
          const int64_t sh = oh * g.s[1] - g.pb[1];
          int64_t kh0, kh1;
          TapRange(sh, g.k[1], g.d[1], g.in[1], &kh0, &kh1);
          for (int64_t ow = 0; ow < g.out[2]; ++ow) {
            const int64_t sw = ow * g.s[2] - g.pb[2];
            int64_t kw0, kw1;
            TapRange(sw, g.k[2], g.d[2], g.in[2], &kw0, &kw1);
            T best = std::numeric_limits<T>::lowest();
            int64_t bd = -1, bh = -1, bw = -1;
            for (int64_t kd = kd0; kd < kd1; ++kd) {
              const int64_t id = sd + kd * g.d[0];
              for (int64_t kh = kh0; kh < kh1; ++kh) {
                const int64_t ih = sh + kh * g.d[1];
                const T* xr = xp + (id * g.in[1] + ih) * g.in[2];
                for (int64_t kw = kw0; kw < kw1; ++kw) {
                  const int64_t iw = sw + kw * g.d[2];
                  if (bd < 0 || xr[iw] > best) {
                    best = xr[iw];
                    bd = id;
                    bh = ih;
                    bw = iw;
                  }
                }
              }
            }
            *y++ = best;
            if (indices) {
              int64_t off = -1;
              if (bd >= 0)
                off = p * in_plane + (a_.col_major_indices
                                          ? bd + bh * g.in[0] + bw * g.in[0] * g.in[1]
                                          : (bd * g.in[1] + bh) * g.in[2] + bw);
              *indices++ = off;
            }
          }
        }
      }
    }
  }
};

class AveragePoolOp : public WindowPoolOp {
 public:
  static StatusOr<std::unique_ptr<Op>> Create(const Node& node) {
    std::unique_ptr<AveragePoolOp> op(new AveragePoolOp(node));
    // dilations: AveragePool-19.
    KILN_RETURN_IF_ERROR(op->ParseCommon(node, /*allow_dilations=*/node.opset >= 19));
    const int64_t cip = node.GetInt("count_include_pad", 0);
    if (cip != 0 && cip != 1)
      return ir::AttrError(node, "count_include_pad must be 0 or 1; got " + std::to_string(cip));
    op->a_.count_include_pad = cip == 1;
    return std::unique_ptr<Op>(std::move(op));
  }

  Status Infer(InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(0, {DataType::kFloat}));
    Window win;
    KILN_RETURN_IF_ERROR(InferWindow(ctx, &win));
    ctx.SetOutput(0, DataType::kFloat, OutShape(ctx.shape(0), win));
    return OkStatus();
  }

  Status Compute(const ComputeContext& ctx) const override {
    const Tensor& xt = ctx.in(0);
    Window win;
    std::string err = Resolve(xt.shape(), &win);
    if (!err.empty()) return RunError(err);
    const Geometry3 g = nn::ToGeometry3(win);
    const int64_t planes = xt.shape()[0] * xt.shape()[1], in_plane = g.in_size();
    const float* x = xt.data<float>();
    float* y = ctx.out(0).data<float>();
    if (g.d[0] > 1 || g.d[1] > 1 || g.d[2] > 1) {
      Dilated(g, planes, x, y);
      return OkStatus();
    }
    for (int64_t p = 0; p < planes; ++p) {
      const float* xp = x + p * in_plane;
      for (int64_t od = 0; od < g.out[0]; ++od) {
        int64_t d0, d1, dn;
        Span(od, 0, g, &d0, &d1, &dn);
        for (int64_t oh = 0; oh < g.out[1]; ++oh) {
          int64_t h0, h1, hn;
          Span(oh, 1, g, &h0, &h1, &hn);
          for (int64_t ow = 0; ow < g.out[2]; ++ow) {
            int64_t w0, w1, wn;
            Span(ow, 2, g, &w0, &w1, &wn);
            double sum = 0;
            for (int64_t id = d0; id < d1; ++id)
              for (int64_t ih = h0; ih < h1; ++ih) {
                const float* xr = xp + (id * g.in[1] + ih) * g.in[2];
                for (int64_t iw = w0; iw < w1; ++iw) sum += xr[iw];
              }
            const int64_t count =
                a_.count_include_pad ? dn * hn * wn : (d1 - d0) * (h1 - h0) * (w1 - w0);
            *y++ = count > 0 ? static_cast<float>(sum / static_cast<double>(count)) : 0.f;
          }
        }
      }
    }
    return OkStatus();
  }

 private:
  explicit AveragePoolOp(const Node& node) : WindowPoolOp(node) {}

  // AveragePool-19 with dilations: every tap visited; the divisor counts the taps inside the
  // input, or with count_include_pad those inside the padded input (not the ceil_mode overhang).
  void Dilated(const Geometry3& g, int64_t planes, const float* x, float* y) const {
    for (int64_t p = 0; p < planes; ++p) {
      const float* xp = x + p * g.in_size();
      for (int64_t od = 0; od < g.out[0]; ++od)
        for (int64_t oh = 0; oh < g.out[1]; ++oh)
          for (int64_t ow = 0; ow < g.out[2]; ++ow) {
            const int64_t o[3] = {od, oh, ow};
            double sum = 0;
            int64_t inside = 0, padded = 0;
            for (int64_t td = 0; td < g.k[0]; ++td)
              for (int64_t th = 0; th < g.k[1]; ++th)
                for (int64_t tw = 0; tw < g.k[2]; ++tw) {
                  const int64_t t[3] = {td, th, tw};
                  int64_t pos[3];
                  bool in = true, in_padded = true;
                  for (int i = 0; i < 3; ++i) {
                    pos[i] = o[i] * g.s[i] - g.pb[i] + t[i] * g.d[i];
                    in = in && pos[i] >= 0 && pos[i] < g.in[i];
                    in_padded = in_padded && pos[i] < g.in[i] + g.pe[i];
                  }
                  padded += in_padded;
                  if (!in) continue;
                  ++inside;
                  sum += xp[(pos[0] * g.in[1] + pos[1]) * g.in[2] + pos[2]];
                }
            const int64_t count = a_.count_include_pad ? padded : inside;
            *y++ = count > 0 ? static_cast<float>(sum / static_cast<double>(count)) : 0.f;
          }
    }
  }

  // Output position o along dim i: input range [lo, hi) and the window's size within the padded
  // input (the count_include_pad divisor).
  static void Span(int64_t o, int i, const Geometry3& g, int64_t* lo, int64_t* hi,
                   int64_t* padded) {
    const int64_t start = o * g.s[i] - g.pb[i];
    const int64_t end = std::min(start + g.k[i], g.in[i] + g.pe[i]);
    *padded = end - start;
    *lo = std::max<int64_t>(start, 0);
    *hi = std::max(*lo, std::min(end, g.in[i]));
  }
};

// GlobalMaxPool / GlobalAveragePool: one reduction per (n, c) plane.
template <bool kMax>
class GlobalPoolOp : public Op {
 public:
  explicit GlobalPoolOp(const Node& node) : Op(node) {}

  Status Infer(InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(0, {DataType::kFloat}));
    const Shape& x = ctx.shape(0);
    if (x.size() < 2)
      return ctx.Error("X must be [N, C, spatial...]; got rank " + std::to_string(x.size()));
    Shape y(x.size(), 1);
    y[0] = x[0];
    y[1] = x[1];
    ctx.SetOutput(0, DataType::kFloat, y);
    return OkStatus();
  }

  Status Compute(const ComputeContext& ctx) const override {
    const Tensor& xt = ctx.in(0);
    const int64_t planes = xt.shape()[0] * xt.shape()[1];
    const int64_t plane = planes > 0 ? xt.numel() / planes : 0;
    const float* x = xt.data<float>();
    float* y = ctx.out(0).data<float>();
    for (int64_t p = 0; p < planes; ++p) {
      const float* xp = x + p * plane;
      if (kMax) {
        float best = plane > 0 ? xp[0] : 0.f;
        for (int64_t i = 1; i < plane; ++i) best = xp[i] > best ? xp[i] : best;
        y[p] = best;
      } else {
        double sum = 0;
        for (int64_t i = 0; i < plane; ++i) sum += xp[i];
        y[p] = plane > 0 ? static_cast<float>(sum / static_cast<double>(plane)) : 0.f;
      }
    }
    return OkStatus();
  }
};

KILN_REGISTER_OP("MaxPool", 1, ir::kMaxOpset, &MaxPoolOp::Create);
KILN_REGISTER_OP("AveragePool", 1, ir::kMaxOpset, &AveragePoolOp::Create);
KILN_REGISTER_OP("GlobalMaxPool", 1, ir::kMaxOpset, &ir::MakeOp<GlobalPoolOp<true>>);
KILN_REGISTER_OP("GlobalAveragePool", 1, ir::kMaxOpset, &ir::MakeOp<GlobalPoolOp<false>>);

// Kernel cases (ops/op_cases.h), after the former selftest cases and
// the former hand-written kernel tests (PoolsOnBlockedInput, PoolsOnPlainInput,
// ChannelScaleAndGlobalAverage): windows with strides, symmetric and asymmetric pads, ceil_mode
// (also where the last window would start in the end padding, which ceil_mode then drops),
// auto_pad, 1-D and 3-D, channel counts off the vector width, size-1 dims.
struct PoolShape {
  Shape x;
  std::vector<int64_t> kernel, strides, pads, dilations;
  bool ceil_mode;
  const char* auto_pad;
};

OpCase PoolCase(const std::string& op, const PoolShape& p, int opset, uint32_t seed) {
  OpCase c(op + " x" + ShapeToString(p.x) + " kernel " + ShapeToString(p.kernel) +
               (p.strides.empty() ? "" : " strides " + ShapeToString(p.strides)) +
               (p.pads.empty() ? "" : " pads " + ShapeToString(p.pads)) +
               (p.dilations.empty() ? "" : " dilations " + ShapeToString(p.dilations)) +
               (p.ceil_mode ? " ceil_mode" : "") + (*p.auto_pad ? " " : "") + p.auto_pad,
           opset);
  c.In(CaseTensor(p.x, seed)).Ints("kernel_shape", p.kernel);
  if (!p.strides.empty()) c.Ints("strides", p.strides);
  if (!p.pads.empty()) c.Ints("pads", p.pads);
  if (!p.dilations.empty()) c.Ints("dilations", p.dilations);
  if (p.ceil_mode) c.Int("ceil_mode", 1);
  if (*p.auto_pad) c.Str("auto_pad", p.auto_pad);
  return c;
}

// MaxPool-12: also dilations, int8 and uint8 (QDQ models; oneDNN pools them), and the Indices
// output and storage_order 1 (the kernels decline: the reference only).
std::vector<OpCase> MaxPoolCases() {
  const PoolShape shapes[] = {
      {{2, 3, 13, 13}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {}, false, ""},
      {{2, 3, 9, 9}, {2, 2}, {2, 2}, {}, {}, true, ""},
      {{2, 16, 11, 13}, {3, 3}, {2, 2}, {1, 0, 1, 0}, {}, false, ""},
      {{2, 16, 11, 13}, {3, 3}, {2, 2}, {1, 0, 1, 0}, {}, true, ""},
      {{2, 5, 17}, {3}, {2}, {1, 1}, {}, false, ""},
      {{1, 12, 11, 9}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {}, false, ""},
      {{1, 3, 6, 7, 5}, {3, 3, 3}, {2, 2, 2}, {1, 1, 1, 1, 1, 1}, {}, false, ""},
      {{1, 4, 11, 10}, {3, 3}, {1, 2}, {}, {2, 2}, false, ""},
      {{1, 3, 10, 9}, {3, 3}, {2, 2}, {}, {}, false, "SAME_UPPER"},
      {{1, 3, 10, 9}, {2, 3}, {2, 2}, {}, {}, false, "SAME_LOWER"},
      {{1, 1, 1, 7}, {1, 3}, {}, {}, {}, false, ""},
      {{1, 2, 5, 5}, {2, 2}, {2, 2}, {1, 1, 1, 1}, {}, true, ""},
      {{1, 3, 8, 6}, {3, 2}, {3, 2}, {0, 1, 2, 0}, {}, true, ""},
  };
  std::vector<OpCase> cases;
  uint32_t seed = 60;
  for (const PoolShape& p : shapes) cases.push_back(PoolCase("MaxPool", p, 12, seed++));
  const PoolShape q = {{1, 5, 9, 7}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {}, false, ""};
  for (DataType t : {DataType::kInt8, DataType::kUInt8}) {
    OpCase c = PoolCase("MaxPool", q, 12, seed++);
    c.name += t == DataType::kInt8 ? " int8" : " uint8";
    c.inputs[0].value = t == DataType::kInt8 ? CaseInts(t, q.x, seed++, -128, 127)
                                             : CaseInts(t, q.x, seed++, 0, 255);
    cases.push_back(std::move(c));
  }
  OpCase indices = PoolCase("MaxPool", q, 12, seed++).Outputs(2);
  indices.name += " with Indices";
  cases.push_back(indices);
  indices.name += ", storage_order 1";
  cases.push_back(indices.Int("storage_order", 1));
  return cases;
}
KILN_REGISTER_OP_CASES("", "MaxPool", &MaxPoolCases);

// AveragePool-11 with and without count_include_pad; ceil_mode (oneDNN declines it: its divisor
// at the border differs; CUDA runs it); AveragePool-19's dilations (the reference only).
std::vector<OpCase> AveragePoolCases() {
  struct Avg {
    PoolShape p;
    bool count_include_pad;
  };
  const Avg shapes[] = {
      {{{2, 3, 12, 12}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {}, false, ""}, false},
      {{{2, 3, 12, 12}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {}, true, ""}, true},
      {{{2, 16, 11, 13}, {3, 2}, {}, {1, 1, 1, 1}, {}, false, ""}, false},
      {{{2, 16, 11, 13}, {3, 2}, {}, {1, 1, 1, 1}, {}, false, ""}, true},
      {{{1, 4, 9, 8}, {3, 3}, {2, 1}, {0, 1, 2, 0}, {}, false, ""}, true},
      {{{2, 5, 17}, {3}, {2}, {1, 1}, {}, false, ""}, false},
      {{{1, 12, 11, 9}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {}, false, ""}, true},
      {{{1, 3, 6, 7, 5}, {3, 3, 3}, {2, 2, 2}, {1, 1, 1, 1, 1, 1}, {}, false, ""}, false},
      {{{1, 3, 10, 9}, {3, 3}, {2, 2}, {}, {}, false, "SAME_UPPER"}, false},
      {{{1, 3, 10, 9}, {2, 2}, {2, 2}, {}, {}, false, "SAME_LOWER"}, true},
      {{{1, 1, 1, 7}, {1, 3}, {}, {0, 1, 0, 1}, {}, false, ""}, false},
      {{{1, 2, 5, 5}, {2, 2}, {2, 2}, {1, 1, 1, 1}, {}, true, ""}, true},
      {{{1, 3, 8, 6}, {3, 2}, {3, 2}, {0, 1, 2, 0}, {}, true, ""}, false},
  };
  std::vector<OpCase> cases;
  uint32_t seed = 90;
  for (const Avg& a : shapes) {
    OpCase c = PoolCase("AveragePool", a.p, 11, seed++);
    if (a.count_include_pad) {
      c.Int("count_include_pad", 1);
      c.name += " count_include_pad";
    }
    cases.push_back(std::move(c));
  }
  const PoolShape dilated = {{1, 2, 9, 9}, {2, 2}, {1, 1}, {1, 1, 1, 1}, {2, 2}, false, ""};
  cases.push_back(PoolCase("AveragePool", dilated, 19, seed++));
  return cases;
}
KILN_REGISTER_OP_CASES("", "AveragePool", &AveragePoolCases);

// Global pools: 1-D to 3-D, channel counts off the vector width, a [1,1,1,1] input.
std::vector<OpCase> GlobalPoolCases(const std::string& op) {
  std::vector<OpCase> cases;
  uint32_t seed = op == "GlobalMaxPool" ? 120 : 130;
  for (const Shape& s : std::vector<Shape>{
           {2, 5, 7, 7}, {2, 19, 12, 12}, {3, 7, 9, 11}, {2, 5, 17}, {1, 6, 3, 4, 5}, {1, 1, 1, 1}})
    cases.push_back(OpCase(op + " " + ShapeToString(s), 1).In(CaseTensor(s, seed++)));
  return cases;
}
std::vector<OpCase> GlobalMaxPoolCases() { return GlobalPoolCases("GlobalMaxPool"); }
std::vector<OpCase> GlobalAveragePoolCases() { return GlobalPoolCases("GlobalAveragePool"); }
KILN_REGISTER_OP_CASES("", "GlobalMaxPool", &GlobalMaxPoolCases);
KILN_REGISTER_OP_CASES("", "GlobalAveragePool", &GlobalAveragePoolCases);

}  // namespace
}  // namespace kiln::ops
