// JPEG decoding with libjpeg-turbo's TurboJPEG API (v2 functions; Debian 12 ships 2.1.5).
//
// Algorithm: read the header (dims, subsampling, colour space) and reject oversized images before
// allocating; read the EXIF orientation from the APP1 segment; pick a DCT scaling factor; decode
// into the output image directly (gray -> 1 channel, YCbCr/RGB -> 3) or, when the image must be
// converted (CMYK/YCCK) or rotated, into a scratch buffer first.
//
// Scaling: among the factors 1/2, 1/4 and 1/8, the one giving the fewest pixels while
// TJSCALED(width) >= min_width and TJSCALED(height) >= min_height (in display orientation); full
// size when none qualifies. The IDCT then produces the reduced image directly; the result differs
// slightly from a full decode followed by a resize. TurboJPEG offers every n/8, but measured here
// (libjpeg-turbo 2.1.5, x86-64) 7/8, 3/4 and 5/8 decode 10-80% SLOWER than full size (their
// scaled IDCTs and upsampling have no SIMD) and 3/8 is no faster than 1/2, so only the powers of
// two are used: the same choice as PIL's draft(). Huffman decoding is not reduced by scaling, so
// the gain is at most about 2x for 1/8 (4032x3024: 36 -> 20 ms).
//
// Accuracy: TurboJPEG's defaults (accurate integer IDCT, fancy upsampling) are the defaults PIL
// uses through the same libjpeg-turbo, so full-size pixels equal PIL's. CMYK uses PIL's conversion
// of Adobe (inverted) CMYK: R = k - k*(255-c)/255 rounded as PIL's MULDIV255.
//
// Errors: TurboJPEG reports through return codes and tjGetErrorStr2/tjGetErrorCode (its internal
// setjmp never crosses our frames). Fatal errors fail; warnings (libjpeg recovered) fail when they
// mean truncation or when DecodeOptions::strict is set, and are recorded in DecodeInfo otherwise.
// TJFLAG_LIMITSCANS rejects progressive files with an abusive number of scans. After a failure the
// TurboJPEG handle is replaced: libjpeg-turbo 2.1 leaves it unusable after a header error.
#include <turbojpeg.h>

#include <cstring>
#include <string>

#include "data/decode.h"

namespace kiln::data {
namespace {

std::string DimsString(int64_t w, int64_t h) {
  return std::to_string(w) + "x" + std::to_string(h) + " = " + std::to_string(w * h) + " pixels";
}

// Picks the scaling factor per the header comment; {1, 1} when no factor < 1 qualifies.
tjscalingfactor ChooseScale(int width, int height, int min_width, int min_height) {
  tjscalingfactor best = {1, 1};
  if (min_width <= 0 && min_height <= 0) return best;
  int n = 0;
  const tjscalingfactor* factors = tjGetScalingFactors(&n);
  if (factors == nullptr) return best;
  int64_t best_pixels = static_cast<int64_t>(width) * height;
  for (int i = 0; i < n; ++i) {
    const tjscalingfactor f = factors[i];
    if (f.num != 1 || (f.denom != 2 && f.denom != 4 && f.denom != 8)) continue;
    const int sw = TJSCALED(width, f), sh = TJSCALED(height, f);
    if (sw < min_width || sh < min_height) continue;
    const int64_t pixels = static_cast<int64_t>(sw) * sh;
    if (pixels < best_pixels) {
      best_pixels = pixels;
      best = f;
    }
  }
  return best;
}

inline uint8_t MulDiv255(int a, int b) {
  int tmp = a * b + 128;
  return static_cast<uint8_t>(((tmp >> 8) + tmp) >> 8);
}

// Inverted (Adobe) CMYK -> RGB, PIL's "CMYK;I" unpack followed by its cmyk2rgb.
void CmykToRgb(const uint8_t* src, size_t pixels, uint8_t* dst) {
  for (size_t i = 0; i < pixels; ++i, src += 4, dst += 3) {
    const int nk = src[3];  // PIL: nk = 255 - (255 - k_stored)
    for (int c = 0; c < 3; ++c) {
      const int v = nk - MulDiv255(255 - src[c], nk);
      dst[c] = static_cast<uint8_t>(v < 0 ? 0 : v);
    }
  }
}

bool IsTruncationWarning(const char* msg) {
  return msg != nullptr && std::strstr(msg, "Premature end of JPEG file") != nullptr;
}

// True when an end-of-image marker (FF D9) ends the file, allowing a little trailing padding.
bool HasEndMarker(std::span<const uint8_t> b) {
  const size_t n = b.size(), stop = n > 64 ? n - 64 : 0;
  for (size_t i = n; i >= stop + 2; --i)
    if (b[i - 2] == 0xFF && b[i - 1] == 0xD9) return true;
  return false;
}

}  // namespace

ImageDecoder::~ImageDecoder() { ResetHandle(); }

// libjpeg-turbo 2.1's tjDecompressHeader3 returns after an error without aborting the
// decompressor, which stays mid-header: every later call on the handle then fails with the same
// error. A fresh handle after any failure avoids that (creating one takes microseconds).
void ImageDecoder::ResetHandle() {
  if (tj_ != nullptr) tjDestroy(static_cast<tjhandle>(tj_));
  tj_ = nullptr;
}

Status ImageDecoder::DecodeJpeg(std::span<const uint8_t> bytes, const DecodeOptions& options,
                                Image* out, DecodeInfo* info) {
  if (tj_ == nullptr) {
    tj_ = tjInitDecompress();
    if (tj_ == nullptr)
      return Internal(std::string("failed to create a TurboJPEG decompressor: ") +
                      tjGetErrorStr2(nullptr));
  }
  tjhandle tj = static_cast<tjhandle>(tj_);
  const unsigned char* data = bytes.data();
  const unsigned long size = static_cast<unsigned long>(bytes.size());

  int width = 0, height = 0, subsamp = 0, colorspace = 0;
  if (tjDecompressHeader3(tj, data, size, &width, &height, &subsamp, &colorspace) != 0) {
    const std::string msg = tjGetErrorStr2(tj);
    ResetHandle();
    if (IsTruncationWarning(msg.c_str()))
      return InvalidArgument("failed to decode JPEG: truncated file (" + msg + ")");
    // A header cut short makes libjpeg read its fake end-of-image marker as table data, which it
    // reports as a bogus table; a missing end-of-image marker tells the two causes apart.
    if (!HasEndMarker(bytes))
      return InvalidArgument("failed to decode JPEG: bad header (" + msg +
                             "); the file looks truncated (no end-of-image marker)");
    return InvalidArgument("failed to decode JPEG: bad header: " + msg);
  }
  info->source_width = width;
  info->source_height = height;
  if (width <= 0 || height <= 0)
    return InvalidArgument("failed to decode JPEG: header has zero dims " + std::to_string(width) +
                           "x" + std::to_string(height) +
                           (HasEndMarker(bytes) ? "" : " (the file looks truncated)"));
  if (static_cast<int64_t>(width) * height > options.max_pixels)
    return InvalidArgument("failed to decode JPEG: image is " + DimsString(width, height) +
                           ", over the limit of " + std::to_string(options.max_pixels) +
                           " (DecodeOptions::max_pixels; a decompression-bomb guard)");

  int pixel_format, channels;
  if (colorspace == TJCS_GRAY) {
    pixel_format = TJPF_GRAY;
    channels = 1;
  } else if (colorspace == TJCS_CMYK || colorspace == TJCS_YCCK) {
    pixel_format = TJPF_CMYK;
    channels = 4;
  } else {
    pixel_format = TJPF_RGB;
    channels = 3;
  }
  info->source_channels = channels;
  const int orientation = options.apply_exif_orientation ? JpegExifOrientation(bytes) : 1;
  info->orientation = orientation;

  // Minimum dims are given in display orientation; orientations 5-8 swap the stored axes.
  const bool transposed = orientation >= 5;
  const tjscalingfactor scale =
      ChooseScale(width, height, transposed ? options.min_height : options.min_width,
                  transposed ? options.min_width : options.min_height);
  info->scale_num = scale.num;
  info->scale_denom = scale.denom;
  const int sw = TJSCALED(width, scale), sh = TJSCALED(height, scale);

  // Decode straight into the output when no conversion or rotation follows.
  const bool direct = channels != 4 && orientation == 1;
  uint8_t* dst;
  if (direct) {
    out->Reset(sw, sh, channels);
    dst = out->pixels.data();
  } else if (channels == 4) {
    cmyk_.resize(static_cast<size_t>(sw) * sh * 4);
    dst = cmyk_.data();
  } else {
    scratch_.Reset(sw, sh, channels);
    dst = scratch_.pixels.data();
  }

  int flags = TJFLAG_LIMITSCANS;
  if (options.strict) flags |= TJFLAG_STOPONWARNING;
  if (tjDecompress2(tj, data, size, dst, sw, 0, sh, pixel_format, flags) != 0) {
    const std::string text = tjGetErrorStr2(tj);
    const char* msg = text.c_str();
    const bool fatal = tjGetErrorCode(tj) == TJERR_FATAL;
    if (fatal || options.strict) ResetHandle();
    // The last warning of a cut-off file may be "premature end of data segment" rather than
    // "Premature end of JPEG file"; a missing end-of-image marker settles it.
    if (IsTruncationWarning(msg) || (!fatal && !HasEndMarker(bytes)))
      return InvalidArgument(std::string("failed to decode JPEG: truncated file (") + msg + ")");
    if (fatal && std::strstr(msg, "nsupported") != nullptr)  // 12-bit, lossless, ...
      return Unsupported(std::string("failed to decode JPEG: ") + msg);
    if (fatal || options.strict)
      return InvalidArgument(std::string("failed to decode JPEG: ") + msg);
    info->warning = msg;  // recovered corrupt data; the image is complete (PIL accepts it too)
  }

  if (channels == 4) {
    Image* rgb = orientation == 1 ? out : &scratch_;
    rgb->Reset(sw, sh, 3);
    CmykToRgb(cmyk_.data(), static_cast<size_t>(sw) * sh, rgb->pixels.data());
  }
  if (orientation != 1) ApplyOrientation(scratch_, orientation, out);
  return OkStatus();
}

}  // namespace kiln::data
