// Image transforms, the data pipeline's third stage: resize, center crop, letterbox / pad,
// normalize, and layout, writing float32 straight into a caller's buffer (a slot of a batch).
//
// Resize is PIL's Image.resize(BILINEAR) reproduced exactly (the resize torchvision applies to PIL
// images): a separable triangle filter whose support is scaled by the downscale factor (so
// shrinking averages every source pixel: antialiasing), coefficients normalised per output pixel
// and quantised to 22-bit fixed point, a horizontal pass rounded to uint8, then a vertical pass
// rounded to uint8. The output bytes equal PIL's. With antialias=false the support is never scaled
// (plain half-pixel bilinear, close to cv2.INTER_LINEAR). Only the output pixels that survive the
// crop are computed, and only the source rows they need are filtered horizontally.
//
// Geometry follows the reference libraries: torchvision's Resize(int) (shorter side, long side
// truncated) and CenterCrop (offsets rounded half-to-even, zero padding when the crop is larger),
// letterbox as YOLO (fit inside, round half-to-even, centered, pad), fixed height as PaddleOCR's
// recognizer (width ceil(h_out * w / h) capped at the canvas width, left-aligned, pad right).
//
// Normalize: out = (pixel * scale - mean[c]) / std[c], evaluated once per channel for all 256 byte
// values (a lookup table, computed in double and rounded to float), so it costs one load per value.
// mean, std and pad are given in output channel order. Padding is a pixel value (0-255 domain) that
// goes through the same normalization. Gray output converts RGB with PIL's ITU-R 601 weights before
// resizing (as convert("L") then resize would); color output from a gray image replicates it.
//
// Thread-safety: a Transformer is used by one thread at a time; it caches coefficient tables and
// scratch rows between calls, so a steady stream of same-sized images does not allocate.
#pragma once

#include <cstdint>
#include <vector>

#include "data/decode.h"
#include "kiln/status.h"

namespace kiln::data {

enum class ResizeMode {
  kNone,         // keep the decoded size
  kShorterSide,  // torchvision Resize(size): shorter side = size, longer = int(size * long / short)
  kExact,        // width x height, aspect not kept
  kLetterbox,    // fit inside width x height keeping aspect, centered, padded
  kFixedHeight,  // height = height, width = min(width, ceil(height * w / h)), left-aligned, padded
};

enum class Layout { kNCHW, kNHWC };  // per image: CHW planes or interleaved HWC
enum class ChannelOrder { kRGB, kBGR };

struct GeometrySpec {
  ResizeMode mode = ResizeMode::kNone;
  int size = 0;    // kShorterSide
  int width = 0;   // kExact, kLetterbox (box), kFixedHeight (canvas / maximum width)
  int height = 0;  // kExact, kLetterbox, kFixedHeight
  // Center crop of the resized image (kNone, kShorterSide, kExact); 0 = no crop.
  int crop_width = 0;
  int crop_height = 0;
};

// Where the resized image lands in the output canvas. All in pixels.
struct Geometry {
  int resize_width = 0;  // the whole resized image (most of it may be cropped away)
  int resize_height = 0;
  int window_x = 0;  // the kept part of the resized image
  int window_y = 0;
  int window_width = 0;
  int window_height = 0;
  int canvas_x = 0;  // where the kept part goes in the output; the rest is padding
  int canvas_y = 0;
  int canvas_width = 0;
  int canvas_height = 0;
};

// Geometry for a source of src_width x src_height. InvalidArgument on non-positive sizes or a crop
// combined with letterbox / fixed height.
StatusOr<Geometry> ComputeGeometry(const GeometrySpec& spec, int src_width, int src_height);
// The canvas size when it does not depend on the source (every mode except kNone, and
// kShorterSide without a crop); {0, 0} otherwise.
void FixedCanvasSize(const GeometrySpec& spec, int* width, int* height);

struct NormalizeSpec {
  int channels = 3;  // output channels: 3 (color) or 1 (gray)
  ChannelOrder order = ChannelOrder::kRGB;
  Layout layout = Layout::kNCHW;
  double scale = 1.0 / 255.0;
  double mean[3] = {0.0, 0.0, 0.0};  // output channel order
  double std[3] = {1.0, 1.0, 1.0};
  double pad[3] = {0.0, 0.0, 0.0};  // pixel value (0-255 domain) of padding, output channel order
};

// One per worker thread. Owns coefficient caches and scratch buffers.
class Transformer {
 public:
  // Resizes, crops, pads and normalizes `src` into `dst`, which must hold
  // canvas_width * canvas_height * spec.channels floats (CHW or HWC per spec.layout).
  Status Run(const Image& src, const Geometry& geometry, bool antialias, const NormalizeSpec& spec,
             float* dst);

  // PIL-exact Image.resize((width, height), BILINEAR) (antialias=true) into `dst`.
  Status Resize(const Image& src, int width, int height, bool antialias, Image* dst);

  // Per-axis filter: for output i, taps [first[i], first[i] + count[i]) with 22-bit weights.
  struct Axis {
    int in_size = -1, out_size = -1, begin = -1, length = -1;
    bool antialias = false;
    int taps = 0;  // weights per output (padded with zeros)
    std::vector<int> first, count;
    std::vector<int32_t> weights;
    std::vector<double> scratch;  // unquantised weights of one output
  };

 private:
  template <typename Sink>
  void ResizeWindow(const Image& src, const Geometry& g, bool antialias, Sink&& sink);
  void BuildLut(const NormalizeSpec& spec);

  Axis horizontal_, vertical_;
  std::vector<uint8_t> rows_;  // horizontally filtered source rows
  std::vector<int32_t> acc_;   // vertical accumulator, one output row
  std::vector<uint8_t> out_row_;
  Image gray_;  // RGB -> gray conversion
  NormalizeSpec lut_spec_;
  bool lut_valid_ = false;
  float lut_[3][256];
  float pad_value_[3];
};

// Builds (or keeps, when the key matches) the PIL bilinear coefficients for outputs
// [begin, begin + length) of an in_size -> out_size resize.
void BuildAxis(int in_size, int out_size, int begin, int length, bool antialias,
               Transformer::Axis* axis);

}  // namespace kiln::data
