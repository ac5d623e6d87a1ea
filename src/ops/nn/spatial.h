// Spatial geometry shared by the nn ops (Conv, ConvTranspose, MaxPool, AveragePool): parsing and
// validating kernel_shape / strides / dilations / pads / auto_pad, resolving them against a
// concrete input shape into per-dimension output sizes and begin/end pads, and the index-range
// arithmetic the reference kernels use to skip out-of-bounds taps instead of testing every tap.
//
// Layout: NC[D][H]W. The kernels handle 1 to 3 spatial dims by viewing them as 3-D with leading
// size-1 dims (Geometry3), so one triple loop serves 1-D, 2-D and 3-D.
// Header-only, internal to src/ops/nn/.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "ops/common.h"

namespace kiln::ops::nn {

enum class AutoPad { kNotSet, kSameUpper, kSameLower, kValid };

inline std::string JoinInts(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(v[i]);
  }
  s += ']';
  return s;
}

// Floor / ceil division for a possibly negative numerator and a positive denominator.
inline int64_t FloorDiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
inline int64_t CeilDiv(int64_t a, int64_t b) { return -FloorDiv(-a, b); }

// The attributes every windowed op shares, as written in the node (empty = not given).
struct WindowAttrs {
  AutoPad auto_pad = AutoPad::kNotSet;
  std::vector<int64_t> kernel_shape, strides, dilations, pads;
};

// Parses and checks the attributes that do not depend on the input rank. `allow_dilations` is
// false for ops that do not define them (AveragePool before opset 19, MaxPool before 10).
inline Status ParseWindowAttrs(const ir::Node& node, bool allow_dilations, WindowAttrs* a) {
  std::string ap = node.GetString("auto_pad", "NOTSET");
  if (ap == "NOTSET" || ap.empty())
    a->auto_pad = AutoPad::kNotSet;
  else if (ap == "SAME_UPPER")
    a->auto_pad = AutoPad::kSameUpper;
  else if (ap == "SAME_LOWER")
    a->auto_pad = AutoPad::kSameLower;
  else if (ap == "VALID")
    a->auto_pad = AutoPad::kValid;
  else
    return ir::AttrError(
        node, "auto_pad must be NOTSET, SAME_UPPER, SAME_LOWER or VALID; got '" + ap + "'");
  a->kernel_shape = node.GetInts("kernel_shape");
  a->strides = node.GetInts("strides");
  a->dilations = node.GetInts("dilations");
  a->pads = node.GetInts("pads");
  for (int64_t k : a->kernel_shape)
    if (k < 1)
      return ir::AttrError(node,
                           "kernel_shape entries must be >= 1; got " + JoinInts(a->kernel_shape));
  for (int64_t s : a->strides)
    if (s < 1) return ir::AttrError(node, "strides must be >= 1; got " + JoinInts(a->strides));
  for (int64_t d : a->dilations)
    if (d < 1) return ir::AttrError(node, "dilations must be >= 1; got " + JoinInts(a->dilations));
  if (!allow_dilations && !a->dilations.empty() &&
      std::any_of(a->dilations.begin(), a->dilations.end(), [](int64_t d) { return d != 1; }))
    return ir::AttrError(
        node, "dilations are not defined for this op at this opset; got " + JoinInts(a->dilations));
  for (int64_t p : a->pads)
    if (p < 0) return ir::AttrError(node, "pads must be >= 0; got " + JoinInts(a->pads));
  if (a->pads.size() % 2 != 0)
    return ir::AttrError(
        node, "pads must hold a begin and an end per spatial dim; got " + JoinInts(a->pads));
  return OkStatus();
}

// A resolved window geometry over n spatial dims.
struct Window {
  std::vector<int64_t> in, out, kernel, strides, dilations, pad_begin, pad_end;
};

// Checks the attribute lengths against `n` spatial dims and fills defaults. `kernel` is the
// kernel from the weights (Conv), or empty to require kernel_shape (pools). Returns a rule
// violation as text (empty when fine) so callers can phrase it as an infer error.
inline std::string ResolveWindowAttrs(const WindowAttrs& a, size_t n,
                                      const std::vector<int64_t>& kernel, Window* w) {
  if (!a.kernel_shape.empty()) {
    if (a.kernel_shape.size() != n)
      return "kernel_shape must have one entry per spatial dim (" + std::to_string(n) + "); got " +
             JoinInts(a.kernel_shape);
    if (!kernel.empty() && kernel != a.kernel_shape)
      return "kernel_shape must match the weight's spatial dims " + JoinInts(kernel) + "; got " +
             JoinInts(a.kernel_shape);
    w->kernel = a.kernel_shape;
  } else if (!kernel.empty()) {
    w->kernel = kernel;
  } else {
    return "kernel_shape is required; got none";
  }
  if (!a.strides.empty() && a.strides.size() != n)
    return "strides must have one entry per spatial dim (" + std::to_string(n) + "); got " +
           JoinInts(a.strides);
  if (!a.dilations.empty() && a.dilations.size() != n)
    return "dilations must have one entry per spatial dim (" + std::to_string(n) + "); got " +
           JoinInts(a.dilations);
  if (!a.pads.empty() && a.pads.size() != 2 * n)
    return "pads must have 2 entries per spatial dim (" + std::to_string(2 * n) + "); got " +
           JoinInts(a.pads);
  w->strides = a.strides.empty() ? std::vector<int64_t>(n, 1) : a.strides;
  w->dilations = a.dilations.empty() ? std::vector<int64_t>(n, 1) : a.dilations;
  w->pad_begin.assign(n, 0);
  w->pad_end.assign(n, 0);
  if (a.auto_pad == AutoPad::kNotSet && !a.pads.empty()) {
    for (size_t i = 0; i < n; ++i) {
      w->pad_begin[i] = a.pads[i];
      w->pad_end[i] = a.pads[n + i];
    }
  }
  return "";
}

// Output sizes of a forward window op (Conv, pools) over input spatial dims `in`. With
// ceil_mode the last window must start inside the input or its begin padding (as PyTorch and
// later ONNX opsets define). Returns a rule violation as text, empty when fine.
inline std::string ForwardWindow(const WindowAttrs& a, const std::vector<int64_t>& in,
                                 const std::vector<int64_t>& kernel, bool ceil_mode, Window* w) {
  std::string err = ResolveWindowAttrs(a, in.size(), kernel, w);
  if (!err.empty()) return err;
  const size_t n = in.size();
  w->in = in;
  w->out.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    const int64_t s = w->strides[i];
    const int64_t eff = (w->kernel[i] - 1) * w->dilations[i] + 1;
    if (a.auto_pad == AutoPad::kSameUpper || a.auto_pad == AutoPad::kSameLower) {
      w->out[i] = CeilDiv(in[i], s);
      const int64_t total = std::max<int64_t>(0, (w->out[i] - 1) * s + eff - in[i]);
      const int64_t small = total / 2, big = total - small;
      w->pad_begin[i] = a.auto_pad == AutoPad::kSameUpper ? small : big;
      w->pad_end[i] = a.auto_pad == AutoPad::kSameUpper ? big : small;
      continue;
    }
    const int64_t span = in[i] + w->pad_begin[i] + w->pad_end[i] - eff;
    if (span < 0)
      return "the dilated kernel (extent " + std::to_string(eff) +
             ") must fit in the padded input along spatial dim " + std::to_string(i) +
             "; got input " + std::to_string(in[i]) + " with pads " +
             std::to_string(w->pad_begin[i]) + "+" + std::to_string(w->pad_end[i]);
    int64_t o = (ceil_mode ? CeilDiv(span, s) : span / s) + 1;
    if (ceil_mode && (o - 1) * s >= in[i] + w->pad_begin[i]) --o;
    w->out[i] = o;
  }
  return "";
}

// The geometry viewed as exactly 3 spatial dims (leading dims of size 1, no pad).
struct Geometry3 {
  int64_t in[3], out[3], k[3], s[3], d[3], pb[3], pe[3];
  int64_t in_size() const { return in[0] * in[1] * in[2]; }
  int64_t out_size() const { return out[0] * out[1] * out[2]; }
  int64_t k_size() const { return k[0] * k[1] * k[2]; }
};

inline Geometry3 ToGeometry3(const Window& w) {
  Geometry3 g;
  const size_t n = w.in.size(), off = 3 - n;
  for (size_t i = 0; i < 3; ++i) {
    const bool real = i >= off;
    const size_t j = i - off;
    g.in[i] = real ? w.in[j] : 1;
    g.out[i] = real ? w.out[j] : 1;
    g.k[i] = real ? w.kernel[j] : 1;
    g.s[i] = real ? w.strides[j] : 1;
    g.d[i] = real ? w.dilations[j] : 1;
    g.pb[i] = real ? w.pad_begin[j] : 0;
    g.pe[i] = real ? w.pad_end[j] : 0;
  }
  return g;
}

// For a forward window op: the output positions o in [lo, hi) whose tap at offset `tap`
// (= kernel index * dilation) reads an in-bounds input position o*stride - pad + tap.
inline void ValidOutputRange(int64_t out, int64_t in, int64_t stride, int64_t pad, int64_t tap,
                             int64_t* lo, int64_t* hi) {
  *lo = std::max<int64_t>(0, CeilDiv(pad - tap, stride));
  *hi = std::min<int64_t>(out, FloorDiv(in - 1 + pad - tap, stride) + 1);
  if (*hi < *lo) *hi = *lo;
}

// ConvTranspose's output sizes and begin/end pads for concrete X [N,C,D...] and W [C,M/g,k...]
// (the rules are in conv_transpose.cc's header); returns the violated rule or "". Shared by the
// reference op and the oneDNN kernel.
inline std::string ResolveTransposeWindow(const WindowAttrs& attrs,
                                          const std::vector<int64_t>& output_padding,
                                          const std::vector<int64_t>& output_shape, const Shape& x,
                                          const Shape& w, Window* win) {
  const size_t n = x.size() - 2;
  std::vector<int64_t> kernel(w.begin() + 2, w.end());
  std::string err = ResolveWindowAttrs(attrs, n, kernel, win);
  if (!err.empty()) return err;
  if (!output_padding.empty() && output_padding.size() != n)
    return "output_padding must have one entry per spatial dim (" + std::to_string(n) + "); got " +
           JoinInts(output_padding);
  // output_shape may list the spatial dims only or the full output shape.
  std::vector<int64_t> oshape = output_shape;
  if (oshape.size() == n + 2) oshape.erase(oshape.begin(), oshape.begin() + 2);
  if (!oshape.empty() && oshape.size() != n)
    return "output_shape must have one entry per spatial dim (" + std::to_string(n) + "); got " +
           JoinInts(output_shape);
  win->in.assign(x.begin() + 2, x.end());
  win->out.assign(n, 0);
  const bool same = attrs.auto_pad == AutoPad::kSameUpper || attrs.auto_pad == AutoPad::kSameLower;
  for (size_t i = 0; i < n; ++i) {
    const int64_t s = win->strides[i];
    const int64_t op = output_padding.empty() ? 0 : output_padding[i];
    if (op >= s && op >= win->dilations[i])
      return "output_padding must be smaller than the stride or the dilation along spatial dim " +
             std::to_string(i) + "; got " + JoinInts(output_padding);
    const int64_t full = s * (win->in[i] - 1) + op + (win->kernel[i] - 1) * win->dilations[i] + 1;
    if (!oshape.empty() || same) {
      win->out[i] = !oshape.empty() ? oshape[i] : win->in[i] * s;
      const int64_t total = std::max<int64_t>(0, full - win->out[i]);
      const bool upper = attrs.auto_pad == AutoPad::kSameUpper;
      win->pad_begin[i] = upper ? total / 2 : total - total / 2;
      win->pad_end[i] = total - win->pad_begin[i];
    } else {
      win->out[i] = full - win->pad_begin[i] - win->pad_end[i];
    }
    if (win->out[i] < 0)
      return "pads must not exceed the full output size " + std::to_string(full) +
             " along spatial dim " + std::to_string(i) + "; got pads " + JoinInts(attrs.pads);
  }
  return "";
}

}  // namespace kiln::ops::nn
