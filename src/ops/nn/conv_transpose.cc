// ConvTranspose (opsets 1, 11): N-D transposed (fractionally strided) convolution, the reference
// kernel.
//
// Layout: X [N, C, D1..Dn], W [C, M/group, k1..kn], optional B [M], Y [N, M, O1..On], row-major;
// float32 only.
//
// Output size and pads, per spatial dim i, with eff = (k - 1) * dilation + 1:
//   output_shape given: O = output_shape[i]; total = max(0, s*(I-1) + output_padding + eff - O)
//   auto_pad SAME_*:     O = I * s;           total as above
//   otherwise:           O = s*(I-1) + output_padding + eff - pad_begin - pad_end
// and `total` splits as SAME_UPPER: begin = total/2, end = total - begin; others: begin =
// total - total/2 (as ONNX and ONNX Runtime define). Output positions no input reaches (an
// output_shape larger than the natural size) hold the bias.
//
// Algorithm: scatter. For each (n, m) a double accumulator plane starts at the bias; each input
// element of m's group times each kernel tap adds to output i*s - pad_begin + k*d, over the input
// ranges whose target lands in the output (computed per tap, no bounds tests inside).
//
// Limits: 1 to 3 spatial dims (more is Unsupported).
#include "ops/nn/conv_transpose.h"

#include <algorithm>
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
using nn::Geometry3;
using nn::JoinInts;
using nn::Window;

class ConvTransposeOp : public Op {
 public:
  const ir::OpAttrs* attributes() const override { return &a_; }
  static StatusOr<std::unique_ptr<Op>> Create(const Node& node) {
    std::unique_ptr<ConvTransposeOp> op(new ConvTransposeOp(node));
    KILN_RETURN_IF_ERROR(nn::ParseWindowAttrs(node, /*allow_dilations=*/true, &op->a_.window));
    op->a_.group = node.GetInt("group", 1);
    if (op->a_.group < 1)
      return ir::AttrError(node, "group must be >= 1; got " + std::to_string(op->a_.group));
    op->a_.output_padding = node.GetInts("output_padding");
    op->a_.output_shape = node.GetInts("output_shape");
    for (int64_t p : op->a_.output_padding)
      if (p < 0)
        return ir::AttrError(node,
                             "output_padding must be >= 0; got " + JoinInts(op->a_.output_padding));
    for (int64_t o : op->a_.output_shape)
      if (o < 0)
        return ir::AttrError(node,
                             "output_shape must be >= 0; got " + JoinInts(op->a_.output_shape));
    return std::unique_ptr<Op>(std::move(op));
  }

  Status Infer(InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(0, {DataType::kFloat}));
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(1, {DataType::kFloat}));
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(2, {DataType::kFloat}));
    if (!ctx.has_input(0) || !ctx.has_input(1))
      return ctx.Error("ConvTranspose needs inputs X and W");
    const Shape& x = ctx.shape(0);
    const Shape& w = ctx.shape(1);
    if (x.size() < 3)
      return ctx.Error("X must be [N, C, spatial...] with at least one spatial dim; got rank " +
                       std::to_string(x.size()));
    if (x.size() > 5)
      return Unsupported("failed to infer shapes of " + describe() +
                         ": kiln's ConvTranspose handles 1 to 3 spatial dims; got " +
                         std::to_string(x.size() - 2));
    if (w.size() != x.size())
      return ctx.Error("W must have the rank of X (" + std::to_string(x.size()) + "); got rank " +
                       std::to_string(w.size()));
    if (w[0] != x[1])
      return ctx.Error("W's dim 0 must equal X's channels; got W[0]=" + std::to_string(w[0]) +
                       ", X channels=" + std::to_string(x[1]));
    if (x[1] % a_.group != 0)
      return ctx.Error("X's channels must be divisible by group; got " + std::to_string(x[1]) +
                       " and group " + std::to_string(a_.group));
    const int64_t m_out = w[1] * a_.group;
    if (ctx.has_input(2) && (ctx.rank(2) != 1 || ctx.shape(2)[0] != m_out))
      return ctx.Error("B must be 1-D with the output channels (W[1]*group = " +
                       std::to_string(m_out) + "); got " + ShapeToString(ctx.shape(2)));
    Window win;
    std::string err = Resolve(x, w, &win);
    if (!err.empty()) return ctx.Error(err);
    Shape y = {x[0], m_out};
    y.insert(y.end(), win.out.begin(), win.out.end());
    ctx.SetOutput(0, DataType::kFloat, y);
    return OkStatus();
  }

  Status Compute(const ComputeContext& ctx) const override {
    const Tensor& xt = ctx.in(0);
    const Tensor& wt = ctx.in(1);
    Window win;
    std::string err = Resolve(xt.shape(), wt.shape(), &win);
    if (!err.empty()) return RunError(err);
    const Geometry3 g = nn::ToGeometry3(win);
    const int64_t n_batch = xt.shape()[0], c_in = xt.shape()[1];
    const int64_t mg = wt.shape()[1], m_out = mg * a_.group, cg = c_in / a_.group;
    const int64_t in_plane = g.in_size(), out_plane = g.out_size(), k_size = g.k_size();
    const float* x = xt.data<float>();
    const float* w = wt.data<float>();
    const float* bias = ctx.has(2) ? ctx.in(2).data<float>() : nullptr;
    float* y = ctx.out(0).data<float>();
    std::vector<double> acc(static_cast<size_t>(out_plane));

    for (int64_t n = 0; n < n_batch; ++n) {
      for (int64_t m = 0; m < m_out; ++m) {
        const int64_t grp = m / mg, mm = m % mg;
        std::fill(acc.begin(), acc.end(), bias ? static_cast<double>(bias[m]) : 0.0);
        for (int64_t c = grp * cg; c < (grp + 1) * cg; ++c) {
          const float* xp = x + (n * c_in + c) * in_plane;
          const float* wk = w + (c * mg + mm) * k_size;
          for (int64_t kd = 0; kd < g.k[0]; ++kd) {
            const int64_t td = kd * g.d[0];
            int64_t id0, id1;  // input positions whose target lands in the output
            nn::ValidOutputRange(g.in[0], g.out[0], g.s[0], g.pb[0], td, &id0, &id1);
            for (int64_t kh = 0; kh < g.k[1]; ++kh) {
              const int64_t th = kh * g.d[1];
              int64_t ih0, ih1;
              nn::ValidOutputRange(g.in[1], g.out[1], g.s[1], g.pb[1], th, &ih0, &ih1);
              for (int64_t kw = 0; kw < g.k[2]; ++kw) {
                const int64_t tw = kw * g.d[2];
                int64_t iw0, iw1;
                nn::ValidOutputRange(g.in[2], g.out[2], g.s[2], g.pb[2], tw, &iw0, &iw1);
                const double wv = wk[(kd * g.k[1] + kh) * g.k[2] + kw];
                for (int64_t id = id0; id < id1; ++id) {
                  const int64_t od = id * g.s[0] - g.pb[0] + td;
                  for (int64_t ih = ih0; ih < ih1; ++ih) {
                    const int64_t oh = ih * g.s[1] - g.pb[1] + th;
                    const float* xr = xp + (id * g.in[1] + ih) * g.in[2];
                    const int64_t ob = (od * g.out[1] + oh) * g.out[2] - g.pb[2] + tw;
                    for (int64_t iw = iw0; iw < iw1; ++iw) acc[ob + iw * g.s[2]] += wv * xr[iw];
                  }
                }
              }
            }
          }
        }
        float* yp = y + (n * m_out + m) * out_plane;
        for (int64_t i = 0; i < out_plane; ++i) yp[i] = static_cast<float>(acc[i]);
      }
    }
    return OkStatus();
  }

 private:
  explicit ConvTransposeOp(const Node& node) : Op(node) {}

  // Resolves sizes and pads for concrete X and W shapes; returns the violated rule or "".
  std::string Resolve(const Shape& x, const Shape& w, Window* win) const {
    return nn::ResolveTransposeWindow(a_.window, a_.output_padding, a_.output_shape, x, w, win);
  }

  ConvTransposeAttrs a_;
};

KILN_REGISTER_OP("ConvTranspose", 1, ir::kMaxOpset, &ConvTransposeOp::Create);

// Kernel cases (ops/op_cases.h), X an input, W and B constants (oneDNN prepacks W): the shapes of
// the former hand-written kernel tests (ConvTransposeVariants) and the former selftest cases:
// strides, pads, dilations, groups, output_padding within the end pad, SAME_UPPER / SAME_LOWER,
// output_shape, 1-D and 3-D, 8+ output channels (oneDNN's blocked outputs, a padded last block);
// and the ones oneDNN declines (output_padding beyond the end pad, an output_shape beyond the
// natural size) and cuDNN declines (asymmetric pads, auto_pad, output_shape), for the reference.
struct ConvTransposeShape {
  Shape x, w;
  std::vector<int64_t> strides, pads, dilations, output_padding, output_shape;
  int64_t group;
  bool bias;
  const char* auto_pad;
};

std::vector<OpCase> ConvTransposeCases() {
  const ConvTransposeShape shapes[] = {
      {{1, 4, 5, 5}, {4, 3, 3, 3}, {1, 1}, {}, {}, {}, {}, 1, false, ""},
      {{2, 4, 5, 6}, {4, 6, 3, 3}, {2, 2}, {1, 1, 1, 1}, {}, {}, {}, 1, true, ""},
      {{1, 6, 4, 4}, {6, 2, 4, 4}, {2, 2}, {1, 1, 1, 1}, {}, {}, {}, 3, true, ""},
      {{1, 4, 5, 5}, {4, 3, 3, 3}, {2, 2}, {1, 1, 1, 1}, {}, {1, 1}, {}, 1, false, ""},
      {{1, 4, 5, 5}, {4, 3, 3, 3}, {2, 2}, {0, 0, 0, 0}, {}, {1, 1}, {}, 1, true, ""},
      {{1, 2, 6, 5}, {2, 3, 3, 2}, {1, 2}, {}, {2, 1}, {}, {}, 1, true, ""},
      {{1, 4, 5, 5}, {4, 2, 3, 3}, {2, 2}, {}, {}, {}, {}, 1, false, "SAME_UPPER"},
      {{1, 4, 5, 5}, {4, 2, 3, 3}, {2, 2}, {}, {}, {}, {}, 1, false, "SAME_LOWER"},
      {{1, 4, 5, 5}, {4, 2, 3, 3}, {2, 2}, {}, {}, {}, {10, 10}, 1, true, ""},
      {{1, 4, 5, 5}, {4, 2, 3, 3}, {2, 2}, {}, {}, {}, {13, 12}, 1, true, ""},
      {{1, 3, 4, 5}, {3, 2, 3, 3}, {2, 1}, {0, 1, 1, 0}, {}, {}, {}, 1, true, ""},
      {{2, 3, 9}, {3, 4, 5}, {3}, {1, 2}, {}, {}, {}, 1, true, ""},
      {{1, 2, 3, 4, 3}, {2, 2, 2, 3, 2}, {2, 1, 2}, {}, {}, {}, {}, 1, true, ""},
      {{1, 16, 6, 5}, {16, 12, 2, 2}, {2, 2}, {}, {}, {}, {}, 1, true, ""},
      {{2, 16, 5, 5}, {16, 5, 3, 3}, {2, 2}, {1, 1, 1, 1}, {}, {}, {}, 2, true, ""},
      {{2, 8, 7, 7}, {8, 6, 4, 4}, {2, 2}, {1, 1, 1, 1}, {}, {}, {}, 1, true, ""},
      {{2, 8, 5, 5}, {8, 2, 3, 3}, {2, 2}, {1, 1, 1, 1}, {}, {1, 1}, {}, 2, true, ""},
  };
  std::vector<OpCase> cases;
  uint32_t seed = 80;
  for (const ConvTransposeShape& s : shapes) {
    std::string name = "x" + ShapeToString(s.x) + " w" + ShapeToString(s.w) + " strides " +
                       ShapeToString(s.strides);
    OpCase c(name, 11);
    c.In(CaseTensor(s.x, seed)).Const(CaseTensor(s.w, seed + 1));
    if (s.bias) c.Const(CaseTensor({s.w[1] * s.group}, seed + 2));
    seed += 3;
    c.Ints("strides", s.strides);
    if (!s.pads.empty()) c.Ints("pads", s.pads);
    if (!s.dilations.empty()) c.Ints("dilations", s.dilations);
    if (!s.output_padding.empty()) c.Ints("output_padding", s.output_padding);
    if (!s.output_shape.empty()) c.Ints("output_shape", s.output_shape);
    if (s.group != 1) c.Int("group", s.group);
    if (*s.auto_pad) c.Str("auto_pad", s.auto_pad);
    c.name +=
        (s.pads.empty() ? "" : " pads " + ShapeToString(s.pads)) +
        (s.dilations.empty() ? "" : " dilations " + ShapeToString(s.dilations)) +
        (s.output_padding.empty() ? "" : " output_padding " + ShapeToString(s.output_padding)) +
        (s.output_shape.empty() ? "" : " output_shape " + ShapeToString(s.output_shape)) +
        (s.group != 1 ? " group " + std::to_string(s.group) : "") +
        (*s.auto_pad ? std::string(" ") + s.auto_pad : "") + (s.bias ? " B" : "");
    cases.push_back(std::move(c));
  }
  return cases;
}
KILN_REGISTER_OP_CASES("", "ConvTranspose", &ConvTransposeCases);

}  // namespace
}  // namespace kiln::ops
