// Conv (opsets 1, 11): N-D direct convolution, the reference kernel.
//
// Layout: X [N, C, D1..Dn], W [M, C/group, k1..kn], optional B [M], Y [N, M, O1..On], row-major;
// float32 only. Groups and depthwise (group == C) are the same loop. auto_pad NOTSET / VALID /
// SAME_UPPER / SAME_LOWER, strides, dilations and asymmetric pads follow the ONNX formulas
// (spatial.h).
//
// Algorithm: for each (n, m) an output plane of double accumulators starts at the bias; for each
// input channel of m's group and each kernel tap, the tap's weight times the input is added over
// the output positions whose tap lands inside the input (ranges computed per tap, so the inner
// loop has no bounds tests and walks the input with the stride). Double accumulation keeps
// the result independent of summation order, as an oracle should be.
//
// Limits: 1 to 3 spatial dims (more is Unsupported); no quantized or half types.
// The routine itself (conv.h) is shared with kiln's FusedConv (src/ops/fused/fused_conv.cc).
#include "ops/nn/conv.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "ops/common.h"
#include "ops/op_cases.h"

namespace kiln::ops {
namespace nn {

Status ParseConvParams(const ir::Node& node, ConvParams* params) {
  KILN_RETURN_IF_ERROR(ParseWindowAttrs(node, /*allow_dilations=*/true, &params->window));
  params->group = node.GetInt("group", 1);
  if (params->group < 1)
    return ir::AttrError(node, "group must be >= 1; got " + std::to_string(params->group));
  return OkStatus();
}

namespace {

// Resolves the window for concrete X and W shapes; returns the violated rule or "".
std::string Resolve(const ConvParams& p, const Shape& x, const Shape& w, Window* win) {
  std::vector<int64_t> in(x.begin() + 2, x.end()), kernel(w.begin() + 2, w.end());
  return ForwardWindow(p.window, in, kernel, /*ceil_mode=*/false, win);
}

}  // namespace

StatusOr<Shape> InferConvShape(const ConvParams& params, const ir::InferContext& ctx,
                               const std::string& describe) {
  const int64_t group = params.group;
  KILN_RETURN_IF_ERROR(ctx.ExpectDtype(0, {DataType::kFloat}));
  KILN_RETURN_IF_ERROR(ctx.ExpectDtype(1, {DataType::kFloat}));
  KILN_RETURN_IF_ERROR(ctx.ExpectDtype(2, {DataType::kFloat}));
  if (!ctx.has_input(0) || !ctx.has_input(1)) return ctx.Error("Conv needs inputs X and W");
  const Shape& x = ctx.shape(0);
  const Shape& w = ctx.shape(1);
  if (x.size() < 3)
    return ctx.Error("X must be [N, C, spatial...] with at least one spatial dim; got rank " +
                     std::to_string(x.size()));
  if (x.size() > 5)
    return Unsupported("failed to infer shapes of " + describe +
                       ": kiln's Conv handles 1 to 3 spatial dims; got " +
                       std::to_string(x.size() - 2));
  if (w.size() != x.size())
    return ctx.Error("W must have the rank of X (" + std::to_string(x.size()) + "); got rank " +
                     std::to_string(w.size()));
  if (w[1] * group != x[1])
    return ctx.Error(
        "W's dim 1 times group must equal X's channels; got W[1]=" + std::to_string(w[1]) +
        ", group=" + std::to_string(group) + ", X channels=" + std::to_string(x[1]));
  if (w[0] % group != 0)
    return ctx.Error("W's output channels must be divisible by group; got " + std::to_string(w[0]) +
                     " and group " + std::to_string(group));
  if (ctx.has_input(2) && (ctx.rank(2) != 1 || ctx.shape(2)[0] != w[0]))
    return ctx.Error("B must be 1-D with W's output channels (" + std::to_string(w[0]) + "); got " +
                     ShapeToString(ctx.shape(2)));
  Window win;
  std::string err = Resolve(params, x, w, &win);
  if (!err.empty()) return ctx.Error(err);
  Shape y = {x[0], w[0]};
  y.insert(y.end(), win.out.begin(), win.out.end());
  return y;
}

namespace {

// The loop of both routines below: for each (n, m), `store(n, m, acc)` receives the output plane
// of double accumulators (bias included).
template <typename T, typename Store>
std::string ConvLoop(const ConvParams& params, const Shape& xs, const T* x, const Shape& ws,
                     const T* w, const double* bias, Store store) {
  Window win;
  std::string err = Resolve(params, xs, ws, &win);
  if (!err.empty()) return err;
  const Geometry3 g = ToGeometry3(win);
  const int64_t group = params.group;
  const int64_t n_batch = xs[0], c_in = xs[1], m_out = ws[0];
  const int64_t cg = c_in / group, mg = m_out / group;
  const int64_t in_plane = g.in_size(), out_plane = g.out_size(), k_size = g.k_size();
  std::vector<double> acc(static_cast<size_t>(out_plane));
  for (int64_t n = 0; n < n_batch; ++n) {
    for (int64_t m = 0; m < m_out; ++m) {
      const int64_t grp = m / mg;
      std::fill(acc.begin(), acc.end(), bias ? bias[m] : 0.0);
      for (int64_t c = 0; c < cg; ++c) {
        const T* xp = x + (n * c_in + grp * cg + c) * in_plane;
        const T* wk = w + (m * cg + c) * k_size;
        for (int64_t kd = 0; kd < g.k[0]; ++kd) {
          const int64_t td = kd * g.d[0];
          int64_t od0, od1;
          ValidOutputRange(g.out[0], g.in[0], g.s[0], g.pb[0], td, &od0, &od1);
          for (int64_t kh = 0; kh < g.k[1]; ++kh) {
            const int64_t th = kh * g.d[1];
            int64_t oh0, oh1;
            ValidOutputRange(g.out[1], g.in[1], g.s[1], g.pb[1], th, &oh0, &oh1);
            for (int64_t kw = 0; kw < g.k[2]; ++kw) {
              const int64_t tw = kw * g.d[2];
              int64_t ow0, ow1;
              ValidOutputRange(g.out[2], g.in[2], g.s[2], g.pb[2], tw, &ow0, &ow1);
              const double wv = wk[(kd * g.k[1] + kh) * g.k[2] + kw];
              for (int64_t od = od0; od < od1; ++od) {
                const int64_t id = od * g.s[0] - g.pb[0] + td;
                for (int64_t oh = oh0; oh < oh1; ++oh) {
                  const int64_t ih = oh * g.s[1] - g.pb[1] + th;
                  const int64_t xb = (id * g.in[1] + ih) * g.in[2] - g.pb[2] + tw;
                  double* ar = acc.data() + (od * g.out[1] + oh) * g.out[2];
                  for (int64_t ow = ow0; ow < ow1; ++ow) ar[ow] += wv * xp[xb + ow * g.s[2]];
                }
              }
            }
          }
        }
      }
      store(n, m, acc);
    }
  }
  return "";
}

}  // namespace

std::string ConvReference(const ConvParams& params, const Tensor& xt, const Tensor& wt,
                          const Tensor* bt, Tensor* yt) {
  std::vector<double> bias;
  if (bt != nullptr) bias.assign(bt->data<float>(), bt->data<float>() + bt->numel());
  const int64_t m_out = wt.shape()[0];
  const int64_t out_plane = yt->numel() / std::max<int64_t>(1, yt->shape()[0] * m_out);
  float* y = yt->data<float>();
  return ConvLoop(params, xt.shape(), xt.data<float>(), wt.shape(), wt.data<float>(),
                  bt != nullptr ? bias.data() : nullptr,
                  [&](int64_t n, int64_t m, const std::vector<double>& acc) {
                    float* yp = y + (n * m_out + m) * out_plane;
                    for (int64_t i = 0; i < out_plane; ++i) yp[i] = static_cast<float>(acc[i]);
                  });
}

std::string AddResidualAndActivate(const Activation& act, const Tensor* z, Tensor* y) {
  float* yp = y->data<float>();
  const int64_t n = y->numel();
  if (z != nullptr) {
    if (z->shape() != y->shape())
      return "Z must have exactly the output shape " + ShapeToString(y->shape()) + "; got " +
             ShapeToString(z->shape());
    const float* zp = z->data<float>();
    for (int64_t i = 0; i < n; ++i) yp[i] += zp[i];
  }
  ApplyActivation(act, yp, n);
  return "";
}

std::string ConvReferenceF64(const ConvParams& params, const Shape& xs, const double* x,
                             const Shape& ws, const double* w, const double* bias, double* y,
                             int64_t out_plane) {
  const int64_t m_out = ws[0];
  return ConvLoop(params, xs, x, ws, w, bias,
                  [&](int64_t n, int64_t m, const std::vector<double>& acc) {
                    std::copy(acc.begin(), acc.end(), y + (n * m_out + m) * out_plane);
                  });
}

}  // namespace nn

namespace {

using ir::ComputeContext;
using ir::InferContext;
using ir::Node;
using ir::Op;

class ConvOp : public Op {
 public:
  static StatusOr<std::unique_ptr<Op>> Create(const Node& node) {
    std::unique_ptr<ConvOp> op(new ConvOp(node));
    KILN_RETURN_IF_ERROR(nn::ParseConvParams(node, &op->a_.conv));
    return std::unique_ptr<Op>(std::move(op));
  }

  Status Infer(InferContext& ctx) const override {
    KILN_ASSIGN_OR_RETURN(Shape y, nn::InferConvShape(a_.conv, ctx, describe()));
    ctx.SetOutput(0, DataType::kFloat, y);
    return OkStatus();
  }

  const ir::OpAttrs* attributes() const override { return &a_; }

  Status Compute(const ComputeContext& ctx) const override {
    std::string err = nn::ConvReference(a_.conv, ctx.in(0), ctx.in(1),
                                        ctx.has(2) ? &ctx.in(2) : nullptr, &ctx.out(0));
    return err.empty() ? OkStatus() : RunError(err);
  }

 private:
  explicit ConvOp(const Node& node) : Op(node) {}
  ConvAttrs a_;
};

KILN_REGISTER_OP("Conv", 1, ir::kMaxOpset, &ConvOp::Create);

// Kernel cases (ops/op_cases.h): X an input, W and B constants (the CPU kernels prepack them).
// oneDNN's and cuDNN's shapes (the former hand-written kernel tests, ConvKernelTest, and
// the former selftest cases): padded, strided, depthwise (also with 2 outputs per channel),
// grouped and dilated, one channel, 1x1, 7x7, auto_pad SAME_UPPER / SAME_LOWER / VALID,
// asymmetric pads, a height-1 map, 1-D and 3-D.
OpCase ConvCase(const std::string& name, const Shape& x, const Shape& w, bool bias, uint32_t seed) {
  OpCase c(name, 11);
  c.In(CaseTensor(x, seed)).Const(CaseTensor(w, seed + 1));
  if (bias) c.Const(CaseTensor({w[0]}, seed + 2));
  return c;
}

std::vector<OpCase> ConvShapeCases() {
  std::vector<OpCase> c;
  c.push_back(ConvCase("3x3 pads 1, 3->8 [1,3,17,13]", {1, 3, 17, 13}, {8, 3, 3, 3}, true, 1)
                  .Ints("pads", {1, 1, 1, 1}));
  c.push_back(
      ConvCase("3x3 stride 2 pads 1, 16->32 [2,16,15,15]", {2, 16, 15, 15}, {32, 16, 3, 3}, true, 4)
          .Ints("strides", {2, 2})
          .Ints("pads", {1, 1, 1, 1}));
  c.push_back(ConvCase("depthwise 3x3 pads 1 [1,16,9,11]", {1, 16, 9, 11}, {16, 1, 3, 3}, true, 7)
                  .Int("group", 16)
                  .Ints("pads", {1, 1, 1, 1}));
  c.push_back(ConvCase("depthwise 5x5 stride 2 pads 2, no B [1,32,14,14]", {1, 32, 14, 14},
                       {32, 1, 5, 5}, false, 10)
                  .Int("group", 32)
                  .Ints("strides", {2, 2})
                  .Ints("pads", {2, 2, 2, 2}));
  c.push_back(ConvCase("2 groups, dilation 2, pads 2, 8->12 [1,8,12,12]", {1, 8, 12, 12},
                       {12, 4, 3, 3}, true, 13)
                  .Int("group", 2)
                  .Ints("dilations", {2, 2})
                  .Ints("pads", {2, 2, 2, 2}));
  c.push_back(ConvCase("depthwise, 2 outputs per channel, 3x3 stride 2 [1,4,7,6]", {1, 4, 7, 6},
                       {8, 1, 3, 3}, true, 46)
                  .Int("group", 4)
                  .Ints("strides", {2, 2}));
  c.push_back(ConvCase("one channel 3x3 [1,1,5,5]", {1, 1, 5, 5}, {1, 1, 3, 3}, true, 49));
  c.push_back(ConvCase("1x1, 24->64 [1,24,7,7]", {1, 24, 7, 7}, {64, 24, 1, 1}, true, 16));
  c.push_back(ConvCase("4x4 stride 3 SAME_UPPER [1,4,10,9]", {1, 4, 10, 9}, {6, 4, 4, 4}, true, 19)
                  .Ints("strides", {3, 3})
                  .Str("auto_pad", "SAME_UPPER"));
  c.push_back(
      ConvCase("4x4 stride 3 SAME_LOWER, no B [1,4,10,9]", {1, 4, 10, 9}, {6, 4, 4, 4}, false, 22)
          .Ints("strides", {3, 3})
          .Str("auto_pad", "SAME_LOWER"));
  c.push_back(ConvCase("2x2 VALID, 2->3 [1,2,6,5]", {1, 2, 6, 5}, {3, 2, 2, 2}, true, 25)
                  .Str("auto_pad", "VALID"));
  c.push_back(
      ConvCase("7x7 stride 2 pads 3, 3->8 [2,3,23,23]", {2, 3, 23, 23}, {8, 3, 7, 7}, true, 28)
          .Ints("strides", {2, 2})
          .Ints("pads", {3, 3, 3, 3}));
  c.push_back(ConvCase("3x2 strides 1 2, asymmetric pads 0 1 2 0 [1,3,10,7]", {1, 3, 10, 7},
                       {5, 3, 3, 2}, true, 31)
                  .Ints("strides", {1, 2})
                  .Ints("pads", {0, 1, 2, 0}));
  c.push_back(ConvCase("1x3 on a height-1 map [1,4,1,9]", {1, 4, 1, 9}, {3, 4, 1, 3}, true, 34)
                  .Ints("pads", {0, 1, 0, 1}));
  c.push_back(ConvCase("1-D k3 stride 2 pads 1 [2,5,23]", {2, 5, 23}, {7, 5, 3}, true, 37)
                  .Ints("strides", {2})
                  .Ints("pads", {1, 1}));
  c.push_back(ConvCase("3-D 3x3x3 pads 1 [1,3,6,7,5]", {1, 3, 6, 7, 5}, {4, 3, 3, 3, 3}, true, 40)
                  .Ints("pads", {1, 1, 1, 1, 1, 1}));
  c.push_back(ConvCase("3-D 2x3x1 strides 2 1 1, dilations 1 2 1 [1,2,7,9,3]", {1, 2, 7, 9, 3},
                       {3, 2, 2, 3, 1}, false, 43)
                  .Ints("strides", {2, 1, 1})
                  .Ints("dilations", {1, 2, 1}));
  return c;
}

// cpu.conv.winograd's shapes (3x3, stride 1, C and K multiples of 8 from 16, at least 8 4x4
// tiles; the former hand-written kernel tests, ConvWinograd): partial edge tiles, no, symmetric
// and asymmetric pads, K with a last panel of 8 channels, 200 tiles, C above 256 (two passes).
// Transformed weights above 4 MB (the shared chunks) need C x K >= 176 x 176: over the cases'
// size, left to that test.
std::vector<OpCase> ConvWinogradCases() {
  std::vector<OpCase> c;
  c.push_back(ConvCase("Winograd-sized 3x3 pads 1, 16->24 [2,16,13,11]", {2, 16, 13, 11},
                       {24, 16, 3, 3}, true, 51)
                  .Ints("pads", {1, 1, 1, 1}));
  c.push_back(ConvCase("Winograd-sized 3x3 no pads, no B, 32->32 [2,32,9,9]", {2, 32, 9, 9},
                       {32, 32, 3, 3}, false, 54));
  c.push_back(ConvCase("Winograd-sized 3x3 pads 0 1 2 1, 16->16 [2,16,10,7]", {2, 16, 10, 7},
                       {16, 16, 3, 3}, true, 57)
                  .Ints("pads", {0, 1, 2, 1}));
  c.push_back(ConvCase("Winograd-sized 3x3 pads 2, 24->40 [2,24,6,5]", {2, 24, 6, 5},
                       {40, 24, 3, 3}, true, 60)
                  .Ints("pads", {2, 2, 2, 2}));
  c.push_back(ConvCase("Winograd-sized 3x3 SAME_UPPER, 16->16, 200 tiles [2,16,40,40]",
                       {2, 16, 40, 40}, {16, 16, 3, 3}, true, 63)
                  .Str("auto_pad", "SAME_UPPER"));
  c.push_back(ConvCase("Winograd-sized 3x3 pads 1, 264->16 [2,264,8,8]", {2, 264, 8, 8},
                       {16, 264, 3, 3}, true, 66)
                  .Ints("pads", {1, 1, 1, 1}));
  return c;
}

std::vector<OpCase> ConvCases() {
  std::vector<OpCase> c = ConvShapeCases();
  for (OpCase& w : ConvWinogradCases()) c.push_back(std::move(w));
  return c;
}
KILN_REGISTER_OP_CASES("", "Conv", &ConvCases);

}  // namespace
}  // namespace kiln::ops
