// 2-D pooling arithmetic shared by pool.cu and its CPU tests. Layout: X [N, C, H, W] and
// Y [N, C, OH, OW] dense row-major; the caller resolves output sizes (ceil_mode included) and
// begin/end pads as ops/nn/spatial.h does. One output element per call, window bounds computed in
// closed form (no per-tap bounds test):
//   MaxPool: taps k with position oh*s - pad_begin + k*d inside [0, H); padding never wins; ties
//     keep the first tap in row-major window order; a window with no input tap gives -FLT_MAX
//     (the reference's "lowest").
//   AveragePool: float sum over the window clipped to the input; divisor = input taps, or with
//     count_include_pad the window clipped to the padded input (not a ceil_mode overhang past the
//     end pad); an empty divisor gives 0. No dilation (AveragePool has none before opset 19).
// Global pools reduce each (n, c) plane with reduce_math.h. The reference sums in double.
#pragma once

#include "backends/cuda/kernels/hd.h"
#include "backends/cuda/kernels/reduce_math.h"

namespace kiln::cuda_math {

struct Pool2dParams {
  int64_t in_h, in_w, out_h, out_w;
  int64_t kernel_h, kernel_w, stride_h, stride_w, dilation_h, dilation_w;
  int64_t pad_top, pad_left, pad_bottom, pad_right;
  bool count_include_pad;
};

KILN_HD int64_t FloorDivPos(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
KILN_HD int64_t Max64(int64_t a, int64_t b) { return a > b ? a : b; }
KILN_HD int64_t Min64(int64_t a, int64_t b) { return a < b ? a : b; }

// Taps k in [*lo, *hi) of one dim whose position start + k*dilation lies in [0, in).
KILN_HD void TapRange(int64_t start, int64_t kernel, int64_t dilation, int64_t in, int64_t* lo,
                      int64_t* hi) {
  *lo = Max64(0, -FloorDivPos(start, dilation));
  *hi = Min64(kernel, FloorDivPos(in - 1 - start, dilation) + 1);
  if (*hi < *lo) *hi = *lo;
}

// Output (oh, ow) of one plane `x` [in_h, in_w].
template <typename T>
KILN_HD float MaxPoolAt(const T* x, const Pool2dParams& p, int64_t oh, int64_t ow) {
  const int64_t sh = oh * p.stride_h - p.pad_top, sw = ow * p.stride_w - p.pad_left;
  int64_t kh0, kh1, kw0, kw1;
  TapRange(sh, p.kernel_h, p.dilation_h, p.in_h, &kh0, &kh1);
  TapRange(sw, p.kernel_w, p.dilation_w, p.in_w, &kw0, &kw1);
  float best = -3.402823466e+38f;
  bool first = true;
  for (int64_t kh = kh0; kh < kh1; ++kh) {
    const T* row = x + (sh + kh * p.dilation_h) * p.in_w;
    for (int64_t kw = kw0; kw < kw1; ++kw) {
      const float v = ToFloat(row[sw + kw * p.dilation_w]);
      if (first || v > best) best = v;
      first = false;
    }
  }
  return best;
}

// One dim of an average window at output o: input range [*lo, *hi), and its extent within the
// padded input (the count_include_pad divisor).
KILN_HD void AvgSpan(int64_t o, int64_t stride, int64_t kernel, int64_t pad_begin, int64_t pad_end,
                     int64_t in, int64_t* lo, int64_t* hi, int64_t* padded) {
  const int64_t start = o * stride - pad_begin;
  const int64_t end = Min64(start + kernel, in + pad_end);
  *padded = end - start;
  *lo = Max64(start, 0);
  *hi = Max64(*lo, Min64(end, in));
}

template <typename T>
KILN_HD float AvgPoolAt(const T* x, const Pool2dParams& p, int64_t oh, int64_t ow) {
  int64_t h0, h1, hn, w0, w1, wn;
  AvgSpan(oh, p.stride_h, p.kernel_h, p.pad_top, p.pad_bottom, p.in_h, &h0, &h1, &hn);
  AvgSpan(ow, p.stride_w, p.kernel_w, p.pad_left, p.pad_right, p.in_w, &w0, &w1, &wn);
  float sum = 0.f;
  for (int64_t ih = h0; ih < h1; ++ih)
    for (int64_t iw = w0; iw < w1; ++iw) sum += ToFloat(x[ih * p.in_w + iw]);
  const int64_t count = p.count_include_pad ? hn * wn : (h1 - h0) * (w1 - w0);
  return count > 0 ? sum / static_cast<float>(count) : 0.f;
}

// A global pool's output from its plane's reduction `v` (sum or max): the mean or the maximum,
// 0 for an empty plane as in the reference.
KILN_HD float GlobalPoolResult(float v, int64_t plane_size, bool max) {
  if (plane_size == 0) return 0.f;
  return max ? v : v / static_cast<float>(plane_size);
}

}  // namespace kiln::cuda_math
