// Resize / crop / pad / normalize into float32 (see transform.h for the algorithm and references).
//
// Resize internals, per PIL's Resample.c (ImagingResample with the bilinear filter, 8 bits per
// channel): for output index i, center = (i + 0.5) * in/out, support = 1 * max(in/out, 1) (1 when
// antialias is off), taps from (int)(center - support + 0.5) to (int)(center + support + 0.5)
// clipped to the image, weight = triangle((tap - center + 0.5) / filterscale), normalised to sum 1,
// then rounded to integers with 22 fractional bits (rounding half away from zero). Each pass sums
// byte * weight from 2^21 (half) and keeps bits 22..29, clamped to 0..255. Same-size axes are
// skipped, as PIL skips them (the weights would be the identity anyway).
//
// Limits: sizes up to 2^24 per side (PIL's float box is exact there); accumulators are int32, safe
// since bilinear weights are non-negative and sum to 2^22.
#include "data/transform.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

namespace kiln::data {
namespace {

constexpr int kPrecisionBits = 32 - 8 - 2;
constexpr int kMaxSide = 1 << 24;  // PIL's float resize box is exact up to here

inline uint8_t Clip8(int32_t v) {
  if (v >= (1 << kPrecisionBits << 8)) return 255;
  if (v <= 0) return 0;
  return static_cast<uint8_t>(v >> kPrecisionBits);
}

inline double Triangle(double x) {
  if (x < 0.0) x = -x;
  return x < 1.0 ? 1.0 - x : 0.0;
}

Status Bad(const std::string& msg) { return InvalidArgument("failed to transform image: " + msg); }

// torchvision CenterCrop along one axis of length `resized`; crop `c`.
void CropAxis(int resized, int c, int* window_off, int* window_len, int* canvas_off) {
  if (c > resized) {
    *canvas_off = (c - resized) / 2;
    *window_off = 0;
    *window_len = resized;
  } else {
    *canvas_off = 0;
    *window_off = static_cast<int>(std::nearbyint((resized - c) / 2.0));  // half to even
    *window_len = c;
  }
}

// PIL's convert("L"): L = (R*19595 + G*38470 + B*7471 + 0x8000) >> 16.
void RgbToGray(const Image& src, Image* dst) {
  dst->Reset(src.width, src.height, 1);
  const uint8_t* s = src.pixels.data();
  uint8_t* d = dst->pixels.data();
  const size_t n = static_cast<size_t>(src.width) * src.height;
  for (size_t i = 0; i < n; ++i, s += 3)
    d[i] = static_cast<uint8_t>((s[0] * 19595 + s[1] * 38470 + s[2] * 7471 + 0x8000) >> 16);
}

template <int C>
void HorizontalRow(const uint8_t* in, const Transformer::Axis& a, uint8_t* out) {
  const int taps = a.taps;
  for (int i = 0; i < a.length; ++i) {
    const int32_t* k = &a.weights[static_cast<size_t>(i) * taps];
    const uint8_t* p = in + static_cast<size_t>(a.first[i]) * C;
    const int n = a.count[i];
    int32_t s[C];
    for (int c = 0; c < C; ++c) s[c] = 1 << (kPrecisionBits - 1);
    for (int t = 0; t < n; ++t)
      for (int c = 0; c < C; ++c) s[c] += p[t * C + c] * k[t];
    for (int c = 0; c < C; ++c) out[i * C + c] = Clip8(s[c]);
  }
}

}  // namespace

StatusOr<Geometry> ComputeGeometry(const GeometrySpec& s, int w, int h) {
  if (w <= 0 || h <= 0)
    return Bad("source image has no pixels: " + std::to_string(w) + "x" + std::to_string(h));
  Geometry g;
  switch (s.mode) {
    case ResizeMode::kNone:
      g.resize_width = w, g.resize_height = h;
      break;
    case ResizeMode::kShorterSide: {
      if (s.size <= 0 || s.size > kMaxSide)
        return Bad("resize size must be in 1.." + std::to_string(kMaxSide) + "; got " +
                   std::to_string(s.size));
      const int64_t shorter = std::min(w, h), longer = std::max(w, h);
      const double new_long_d = static_cast<double>(int64_t{s.size} * longer) / shorter;
      if (new_long_d > kMaxSide)
        return Bad("resizing " + std::to_string(w) + "x" + std::to_string(h) + " to shorter side " +
                   std::to_string(s.size) + " would make the longer side " +
                   std::to_string(static_cast<int64_t>(new_long_d)) + ", over the limit of " +
                   std::to_string(kMaxSide));
      const int new_long = static_cast<int>(new_long_d);
      g.resize_width = w <= h ? s.size : new_long;
      g.resize_height = w <= h ? new_long : s.size;
      break;
    }
    case ResizeMode::kExact:
    case ResizeMode::kLetterbox:
    case ResizeMode::kFixedHeight:
      if (s.width <= 0 || s.height <= 0 || s.width > kMaxSide || s.height > kMaxSide)
        return Bad("resize width and height must be in 1.." + std::to_string(kMaxSide) + "; got " +
                   std::to_string(s.width) + "x" + std::to_string(s.height));
      break;
  }
  const bool has_crop = s.crop_width > 0 || s.crop_height > 0;
  if (has_crop && (s.crop_width <= 0 || s.crop_height <= 0))
    return Bad("crop needs both width and height; got " + std::to_string(s.crop_width) + "x" +
               std::to_string(s.crop_height));
  if (s.mode == ResizeMode::kLetterbox || s.mode == ResizeMode::kFixedHeight) {
    if (has_crop) return Bad("a center crop cannot follow letterbox or fixed-height resizing");
    if (s.mode == ResizeMode::kLetterbox) {
      const double r =
          std::min(static_cast<double>(s.width) / w, static_cast<double>(s.height) / h);
      g.resize_width = std::clamp(static_cast<int>(std::nearbyint(w * r)), 1, s.width);
      g.resize_height = std::clamp(static_cast<int>(std::nearbyint(h * r)), 1, s.height);
      g.canvas_x = (s.width - g.resize_width) / 2;
      g.canvas_y = (s.height - g.resize_height) / 2;
    } else {
      const double want = std::ceil(s.height * (static_cast<double>(w) / h));
      g.resize_width = static_cast<int>(std::clamp(want, 1.0, static_cast<double>(s.width)));
      g.resize_height = s.height;
    }
    g.window_width = g.resize_width, g.window_height = g.resize_height;
    g.canvas_width = s.width, g.canvas_height = s.height;
    return g;
  }
  if (s.mode == ResizeMode::kExact) g.resize_width = s.width, g.resize_height = s.height;
  if (has_crop) {
    CropAxis(g.resize_width, s.crop_width, &g.window_x, &g.window_width, &g.canvas_x);
    CropAxis(g.resize_height, s.crop_height, &g.window_y, &g.window_height, &g.canvas_y);
    g.canvas_width = s.crop_width, g.canvas_height = s.crop_height;
  } else {
    g.window_width = g.canvas_width = g.resize_width;
    g.window_height = g.canvas_height = g.resize_height;
  }
  return g;
}

void FixedCanvasSize(const GeometrySpec& s, int* width, int* height) {
  *width = *height = 0;
  if (s.crop_width > 0 && s.crop_height > 0 &&
      (s.mode == ResizeMode::kNone || s.mode == ResizeMode::kShorterSide ||
       s.mode == ResizeMode::kExact)) {
    *width = s.crop_width, *height = s.crop_height;
  } else if (s.mode == ResizeMode::kExact || s.mode == ResizeMode::kLetterbox ||
             s.mode == ResizeMode::kFixedHeight) {
    *width = s.width, *height = s.height;
  }
}

void BuildAxis(int in_size, int out_size, int begin, int length, bool antialias,
               Transformer::Axis* a) {
  if (a->in_size == in_size && a->out_size == out_size && a->begin == begin &&
      a->length == length && a->antialias == antialias)
    return;
  a->in_size = in_size, a->out_size = out_size, a->begin = begin, a->length = length;
  a->antialias = antialias;
  a->first.resize(length);
  a->count.resize(length);
  if (in_size == out_size) {
    a->taps = 1;
    a->weights.assign(length, 1 << kPrecisionBits);
    for (int i = 0; i < length; ++i) a->first[i] = begin + i, a->count[i] = 1;
    return;
  }
  const double scale = static_cast<double>(in_size) / out_size;
  const double filterscale = antialias ? std::max(scale, 1.0) : 1.0;
  const double support = 1.0 * filterscale;
  const int taps = static_cast<int>(std::ceil(support)) * 2 + 1;
  a->taps = taps;
  a->weights.assign(static_cast<size_t>(length) * taps, 0);
  std::vector<double>& k = a->scratch;
  k.resize(taps);
  for (int i = 0; i < length; ++i) {
    const int xx = begin + i;
    const double center = (xx + 0.5) * scale;
    const double ss = 1.0 / filterscale;
    int xmin = static_cast<int>(center - support + 0.5);
    if (xmin < 0) xmin = 0;
    int xmax = static_cast<int>(center + support + 0.5);
    if (xmax > in_size) xmax = in_size;
    xmax -= xmin;
    double ww = 0.0;
    for (int x = 0; x < xmax; ++x) {
      k[x] = Triangle((x + xmin - center + 0.5) * ss);
      ww += k[x];
    }
    int32_t* kk = &a->weights[static_cast<size_t>(i) * taps];
    for (int x = 0; x < xmax; ++x) {
      const double v = (ww != 0.0 ? k[x] / ww : k[x]) * (1 << kPrecisionBits);
      kk[x] = static_cast<int32_t>(v < 0 ? -0.5 + v : 0.5 + v);
    }
    a->first[i] = xmin;
    a->count[i] = xmax;
  }
}

// Computes the window of the resized image row by row and hands each finished uint8 row (window
// width * channels bytes) to sink(row_index, row).
template <typename Sink>
void Transformer::ResizeWindow(const Image& src, const Geometry& g, bool antialias, Sink&& sink) {
  const int C = src.channels;
  BuildAxis(src.width, g.resize_width, g.window_x, g.window_width, antialias, &horizontal_);
  BuildAxis(src.height, g.resize_height, g.window_y, g.window_height, antialias, &vertical_);
  const size_t row_len = static_cast<size_t>(g.window_width) * C;
  const int y0 = vertical_.first.front();
  const int y1 = vertical_.first.back() + vertical_.count.back();

  // Horizontally filtered rows y0..y1-1, or views into the source when width is unchanged.
  const uint8_t* rows;
  size_t rows_stride;
  if (src.width == g.resize_width) {
    rows = src.pixels.data() + static_cast<size_t>(y0) * src.stride() +
           static_cast<size_t>(g.window_x) * C;
    rows_stride = src.stride();
  } else {
    rows_.resize(static_cast<size_t>(y1 - y0) * row_len);
    for (int y = y0; y < y1; ++y) {
      const uint8_t* in = src.pixels.data() + static_cast<size_t>(y) * src.stride();
      uint8_t* out = rows_.data() + static_cast<size_t>(y - y0) * row_len;
      if (C == 1) {
        HorizontalRow<1>(in, horizontal_, out);
      } else {
        HorizontalRow<3>(in, horizontal_, out);
      }
    }
    rows = rows_.data();
    rows_stride = row_len;
  }

  if (src.height == g.resize_height) {
    for (int j = 0; j < g.window_height; ++j)
      sink(j, rows + static_cast<size_t>(vertical_.first[j] - y0) * rows_stride);
    return;
  }
  acc_.resize(row_len);
  out_row_.resize(row_len);
  const int taps = vertical_.taps;
  for (int j = 0; j < g.window_height; ++j) {
    int32_t* acc = acc_.data();
    std::fill(acc, acc + row_len, 1 << (kPrecisionBits - 1));
    const int32_t* k = &vertical_.weights[static_cast<size_t>(j) * taps];
    const int first = vertical_.first[j] - y0;
    for (int t = 0; t < vertical_.count[j]; ++t) {
      const uint8_t* row = rows + static_cast<size_t>(first + t) * rows_stride;
      const int32_t w = k[t];
      for (size_t e = 0; e < row_len; ++e) acc[e] += row[e] * w;
    }
    for (size_t e = 0; e < row_len; ++e) out_row_[e] = Clip8(acc[e]);
    sink(j, out_row_.data());
  }
}

Status Transformer::Resize(const Image& src, int width, int height, bool antialias, Image* dst) {
  if (src.width <= 0 || src.height <= 0 || (src.channels != 1 && src.channels != 3))
    return Bad("resize needs a non-empty 1- or 3-channel image");
  if (width <= 0 || height <= 0)
    return Bad("resize target must be positive; got " + std::to_string(width) + "x" +
               std::to_string(height));
  Geometry g;
  g.resize_width = g.window_width = g.canvas_width = width;
  g.resize_height = g.window_height = g.canvas_height = height;
  dst->Reset(width, height, src.channels);
  const size_t stride = dst->stride();
  ResizeWindow(src, g, antialias, [&](int j, const uint8_t* row) {
    std::memcpy(dst->pixels.data() + static_cast<size_t>(j) * stride, row, stride);
  });
  return OkStatus();
}

static bool SameNormalization(const NormalizeSpec& a, const NormalizeSpec& b) {
  if (a.channels != b.channels || a.scale != b.scale) return false;
  for (int c = 0; c < 3; ++c)
    if (a.mean[c] != b.mean[c] || a.std[c] != b.std[c] || a.pad[c] != b.pad[c]) return false;
  return true;  // order and layout do not enter the table
}

void Transformer::BuildLut(const NormalizeSpec& spec) {
  if (lut_valid_ && SameNormalization(lut_spec_, spec)) return;
  for (int c = 0; c < spec.channels; ++c) {
    for (int v = 0; v < 256; ++v)
      lut_[c][v] = static_cast<float>((v * spec.scale - spec.mean[c]) / spec.std[c]);
    pad_value_[c] = static_cast<float>((spec.pad[c] * spec.scale - spec.mean[c]) / spec.std[c]);
  }
  lut_spec_ = spec;
  lut_valid_ = true;
}

Status Transformer::Run(const Image& src, const Geometry& g, bool antialias,
                        const NormalizeSpec& spec, float* dst) {
  if (src.width <= 0 || src.height <= 0 || (src.channels != 1 && src.channels != 3))
    return Bad("source must be a non-empty 1- or 3-channel image; got " +
               std::to_string(src.width) + "x" + std::to_string(src.height) + "x" +
               std::to_string(src.channels));
  if (spec.channels != 1 && spec.channels != 3)
    return Bad("output channels must be 1 or 3; got " + std::to_string(spec.channels));
  for (int c = 0; c < spec.channels; ++c)
    if (spec.std[c] == 0.0) return Bad("std is zero for channel " + std::to_string(c));
  if (g.window_width <= 0 || g.window_height <= 0 || g.canvas_x < 0 || g.canvas_y < 0 ||
      g.canvas_x + g.window_width > g.canvas_width ||
      g.canvas_y + g.window_height > g.canvas_height || g.window_x < 0 || g.window_y < 0 ||
      g.window_x + g.window_width > g.resize_width ||
      g.window_y + g.window_height > g.resize_height)
    return Bad("inconsistent geometry (use ComputeGeometry)");
  BuildLut(spec);

  const Image* in = &src;
  if (spec.channels == 1 && src.channels == 3) {
    RgbToGray(src, &gray_);
    in = &gray_;
  }
  const int OC = spec.channels, C = in->channels;
  int map[3] = {0, 0, 0};  // output channel -> source channel
  if (C == 3)
    for (int oc = 0; oc < 3; ++oc) map[oc] = spec.order == ChannelOrder::kBGR ? 2 - oc : oc;
  const size_t W = g.canvas_width, H = g.canvas_height, plane = W * H;
  const bool nchw = spec.layout == Layout::kNCHW;

  // Padding: every canvas pixel outside the window.
  auto fill = [&](size_t y, size_t x0, size_t x1) {
    if (x0 >= x1) return;
    for (int oc = 0; oc < OC; ++oc) {
      if (nchw) {
        std::fill(dst + oc * plane + y * W + x0, dst + oc * plane + y * W + x1, pad_value_[oc]);
      } else {
        for (size_t x = x0; x < x1; ++x) dst[(y * W + x) * OC + oc] = pad_value_[oc];
      }
    }
  };
  const size_t cx = g.canvas_x, cy = g.canvas_y, ww = g.window_width, wh = g.window_height;
  for (size_t y = 0; y < H; ++y) {
    if (y < cy || y >= cy + wh) {
      fill(y, 0, W);
    } else {
      fill(y, 0, cx);
      fill(y, cx + ww, W);
    }
  }

  ResizeWindow(*in, g, antialias, [&](int j, const uint8_t* row) {
    const size_t y = cy + j;
    if (nchw) {
      for (int oc = 0; oc < OC; ++oc) {
        const float* lut = lut_[oc];
        float* d = dst + oc * plane + y * W + cx;
        const uint8_t* r = row + map[oc];
        for (size_t x = 0; x < ww; ++x) d[x] = lut[r[x * C]];
      }
    } else {
      float* d = dst + (y * W + cx) * OC;
      for (size_t x = 0; x < ww; ++x)
        for (int oc = 0; oc < OC; ++oc) d[x * OC + oc] = lut_[oc][row[x * C + map[oc]]];
    }
  });
  return OkStatus();
}

}  // namespace kiln::data
