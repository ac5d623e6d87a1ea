// Image decoding, the data pipeline's second stage: a file's bytes -> an 8-bit gray or RGB image.
//
// Format is detected from magic bytes, never from the file name. JPEG goes through libjpeg-turbo's
// TurboJPEG API (accurate integer IDCT and fancy upsampling, the settings PIL uses, so pixels equal
// PIL's), with optional DCT-domain downscaling (1/2, 1/4, 1/8) when the caller needs far fewer
// pixels than the photo has. PNG goes through libpng. Both honour the EXIF orientation tag (JPEG
// APP1 "Exif", PNG eXIf) when asked, rotating/flipping exactly as PIL's ImageOps.exif_transpose
// does.
//
// Channel rules (these match PIL's Image.convert("RGB"), which torchvision's loader calls):
//  - gray JPEG and gray / gray+alpha PNG decode to 1 channel; everything else to 3 (RGB);
//  - alpha (RGBA, gray+alpha, palette tRNS) is dropped, not composited: convert("RGB") drops it;
//  - CMYK/YCCK JPEG is converted to RGB with PIL's formula (Adobe inverted CMYK, as PIL assumes);
//  - 16-bit PNG keeps the high byte of each sample (PIL does the same for RGB/RGBA; for 16-bit gray
//    PIL clips to 255 instead, which is a PIL quirk we do not copy);
//  - PNG gamma, ICC profiles and JPEG ICC profiles are ignored (PIL ignores them too).
//
// Limits and errors: a file whose header claims more than `max_pixels` pixels is rejected before
// any pixel buffer is allocated (decompression-bomb guard). Empty, truncated, corrupt and non-image
// files give InvalidArgument; recognised but unsupported formats (GIF, BMP, WebP, TIFF, 12-bit or
// lossless JPEG) give Unsupported. Every message names the format and the cause. libpng's longjmp
// error path is confined to functions that hold only plain C data, and TurboJPEG returns error
// codes, so no C++ object is ever skipped by a longjmp and nothing aborts.
//
// Thread-safety: an ImageDecoder is used by one thread at a time (one per worker); it keeps its
// TurboJPEG handle and scratch buffers between calls so the steady state does not allocate, apart
// from the output image growing to the largest size seen.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kiln/status.h"

namespace kiln::data {

enum class ImageFormat { kUnknown, kJpeg, kPng, kGif, kBmp, kWebp, kTiff };
// Detects the format from the first bytes (magic numbers).
ImageFormat DetectImageFormat(std::span<const uint8_t> bytes);
const char* ImageFormatName(ImageFormat format);

// An 8-bit interleaved image with packed rows (stride = width * channels). channels is 1 (gray)
// or 3 (RGB). The pixel vector keeps its capacity when an Image is reused.
struct Image {
  int width = 0;
  int height = 0;
  int channels = 0;
  std::vector<uint8_t> pixels;

  size_t stride() const { return static_cast<size_t>(width) * channels; }
  // Sets the dims and resizes `pixels` (no reallocation when capacity suffices).
  void Reset(int w, int h, int c);
};

struct DecodeOptions {
  // Decompression-bomb guard: files whose header dims (before any scaling) multiply to more than
  // this are rejected before allocation. 100 megapixels (a 4032x3024 photo is 12.2).
  int64_t max_pixels = 100'000'000;
  // JPEG DCT-domain downscaling: the smallest of the scales 1/2, 1/4, 1/8 whose output keeps
  // width >= min_width and height >= min_height (in display orientation, i.e. after EXIF rotation);
  // full size when none does. 0 and 0 decode at full size; PNG always decodes at full size.
  int min_width = 0;
  int min_height = 0;
  // Apply the EXIF orientation tag (1-8). torchvision's default loader does NOT, so a recipe that
  // must match it bit for bit on rotated photos turns this off.
  bool apply_exif_orientation = true;
  // JPEG: libjpeg recovers from some corrupt data with a warning ("Corrupt JPEG data: N extraneous
  // bytes"); PIL accepts those images and so do we unless `strict`. A truncated JPEG ("Premature
  // end of JPEG file") is always an error.
  bool strict = false;
};

// What a decode did, for logs and tests.
struct DecodeInfo {
  ImageFormat format = ImageFormat::kUnknown;
  int source_width = 0;  // header dims, stored orientation
  int source_height = 0;
  int source_channels = 0;  // components in the file (JPEG 1/3/4; PNG 1-4 incl. alpha)
  int orientation = 1;      // EXIF orientation applied (1 = none)
  int scale_num = 1;        // JPEG DCT scaling factor applied
  int scale_denom = 1;
  std::string warning;  // a libjpeg warning that was tolerated, if any
};

class ImageDecoder {
 public:
  ImageDecoder() = default;
  ~ImageDecoder();
  ImageDecoder(const ImageDecoder&) = delete;
  ImageDecoder& operator=(const ImageDecoder&) = delete;

  // Decodes `bytes` into `out` (reusing its buffer). On error `out` is left in an unspecified but
  // valid state and the Status says why.
  Status Decode(std::span<const uint8_t> bytes, const DecodeOptions& options, Image* out,
                DecodeInfo* info = nullptr);

 private:
  Status DecodeJpeg(std::span<const uint8_t> bytes, const DecodeOptions& options, Image* out,
                    DecodeInfo* info);
  Status DecodePng(std::span<const uint8_t> bytes, const DecodeOptions& options, Image* out,
                   DecodeInfo* info);
  void ResetHandle();

  void* tj_ = nullptr;  // tjhandle, created on first JPEG
  Image scratch_;       // pre-orientation pixels
  std::vector<uint8_t> cmyk_;
};

// One-shot convenience (creates a decoder per call).
StatusOr<Image> DecodeImage(std::span<const uint8_t> bytes, const DecodeOptions& options = {});

// Reads a whole file into `out` (reusing its capacity). NotFound / InvalidArgument on failure.
Status ReadFileBytes(const std::string& path, std::vector<uint8_t>* out);

// The orientation (1-8) in a TIFF-structured EXIF block (with or without the "Exif\0\0" prefix);
// 1 when absent or malformed.
int ParseExifOrientation(std::span<const uint8_t> exif);
// The orientation in a JPEG's first APP1 Exif segment (segments before the first scan only).
int JpegExifOrientation(std::span<const uint8_t> jpeg);

// Rotates/flips `src` into `dst` per EXIF orientation 1-8 (dims swap for 5-8), the same mapping as
// PIL's ImageOps.exif_transpose.
void ApplyOrientation(const Image& src, int orientation, Image* dst);

}  // namespace kiln::data
