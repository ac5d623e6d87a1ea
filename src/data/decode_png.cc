// PNG decoding with libpng 1.6, reading from memory.
//
// Algorithm: png_read_info, check the IHDR dims against max_pixels, then set up transforms so every
// PNG comes out as 8-bit gray or 8-bit RGB: palette -> RGB, gray 1/2/4-bit -> 8-bit (scaled to
// 0-255, as PIL does), 16-bit -> high byte (png_set_strip_16; PIL's "RGB;16B" unpacking also keeps
// the high byte), alpha stripped (PIL's convert("RGB") drops it; nothing is composited), Adam7
// interlacing handled by libpng's multi-pass row reading. gAMA/iCCP/sRGB are ignored, as PIL does.
// The EXIF orientation comes from an eXIf chunk placed before the image data.
//
// Error handling: libpng reports errors by calling our error callback, which records the message in
// a plain C struct and png_longjmp()s back to a setjmp in one of three small functions
// (ReadInfo, Configure, ReadRows). Those functions, and the callbacks, hold only plain C data, so
// the longjmp never skips a C++ destructor; the png structs are freed by an RAII guard in the
// calling frame, which the longjmp never crosses. Warnings are ignored.
#include <png.h>

#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <string>

#include "data/decode.h"

namespace kiln::data {
namespace {

// Plain C state shared with the libpng callbacks.
struct PngSource {
  const uint8_t* data;
  size_t size;
  size_t pos;
  int truncated;
  char error[256];
};

struct PngHeader {
  png_uint_32 width;
  png_uint_32 height;
  int bit_depth;
  int color_type;
  int interlace;
  int file_channels;
  int out_channels;
  size_t rowbytes;
  int passes;
  png_bytep exif;
  png_uint_32 exif_length;
};

void OnPngError(png_structp png, png_const_charp msg) {
  PngSource* src = static_cast<PngSource*>(png_get_error_ptr(png));
  std::snprintf(src->error, sizeof(src->error), "%s", msg != nullptr ? msg : "unknown error");
  png_longjmp(png, 1);
}

void OnPngWarning(png_structp, png_const_charp) {}

void OnPngRead(png_structp png, png_bytep out, size_t n) {
  PngSource* src = static_cast<PngSource*>(png_get_io_ptr(png));
  if (n > src->size - src->pos) {
    src->truncated = 1;
    png_error(png, "unexpected end of data");
  }
  std::memcpy(out, src->data + src->pos, n);
  src->pos += n;
}

// Each returns 0 on success, 1 after a libpng error (message in the PngSource).
int ReadInfo(png_structp png, png_infop info, PngHeader* h) {
  if (setjmp(png_jmpbuf(png))) return 1;
  png_read_info(png, info);
  h->width = png_get_image_width(png, info);
  h->height = png_get_image_height(png, info);
  h->bit_depth = png_get_bit_depth(png, info);
  h->color_type = png_get_color_type(png, info);
  h->interlace = png_get_interlace_type(png, info);
  h->file_channels = png_get_channels(png, info);
  h->exif = nullptr;
  h->exif_length = 0;
#ifdef PNG_eXIf_SUPPORTED
  if (png_get_eXIf_1(png, info, &h->exif_length, &h->exif) == 0) {
    h->exif = nullptr;
    h->exif_length = 0;
  }
#endif
  return 0;
}

int Configure(png_structp png, png_infop info, PngHeader* h) {
  if (setjmp(png_jmpbuf(png))) return 1;
  if (h->bit_depth == 16) png_set_strip_16(png);
  if (h->color_type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (h->color_type == PNG_COLOR_TYPE_GRAY && h->bit_depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  png_set_strip_alpha(png);
  h->passes = png_set_interlace_handling(png);
  png_read_update_info(png, info);
  h->out_channels = png_get_channels(png, info);
  h->rowbytes = png_get_rowbytes(png, info);
  return 0;
}

int ReadRows(png_structp png, const PngHeader* h, uint8_t* pixels, size_t stride) {
  if (setjmp(png_jmpbuf(png))) return 1;
  for (int pass = 0; pass < h->passes; ++pass) {
    for (png_uint_32 y = 0; y < h->height; ++y) png_read_row(png, pixels + y * stride, nullptr);
  }
  return 0;
}

class PngGuard {
 public:
  PngGuard(png_structp png, png_infop info) : png_(png), info_(info) {}
  ~PngGuard() { png_destroy_read_struct(&png_, info_ != nullptr ? &info_ : nullptr, nullptr); }
  PngGuard(const PngGuard&) = delete;
  PngGuard& operator=(const PngGuard&) = delete;

 private:
  png_structp png_;
  png_infop info_;
};

Status PngError(const PngSource& src) {
  if (src.truncated) return InvalidArgument("failed to decode PNG: truncated file");
  return InvalidArgument(std::string("failed to decode PNG: ") + src.error);
}

}  // namespace

Status ImageDecoder::DecodePng(std::span<const uint8_t> bytes, const DecodeOptions& options,
                               Image* out, DecodeInfo* info) {
  PngSource src = {bytes.data(), bytes.size(), 0, 0, {0}};
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, OnPngError, OnPngWarning);
  if (png == nullptr) return Internal("failed to create a libpng read struct");
  png_infop pinfo = png_create_info_struct(png);
  PngGuard guard(png, pinfo);
  if (pinfo == nullptr) return Internal("failed to create a libpng info struct");
  png_set_read_fn(png, &src, OnPngRead);

  PngHeader h = {};
  if (ReadInfo(png, pinfo, &h) != 0) return PngError(src);
  info->source_width = static_cast<int>(h.width);
  info->source_height = static_cast<int>(h.height);
  info->source_channels = h.file_channels;
  const int64_t pixels = static_cast<int64_t>(h.width) * h.height;
  if (pixels > options.max_pixels)
    return InvalidArgument("failed to decode PNG: image is " + std::to_string(h.width) + "x" +
                           std::to_string(h.height) + " = " + std::to_string(pixels) +
                           " pixels, over the limit of " + std::to_string(options.max_pixels) +
                           " (DecodeOptions::max_pixels; a decompression-bomb guard)");
  if (Configure(png, pinfo, &h) != 0) return PngError(src);
  if ((h.out_channels != 1 && h.out_channels != 3) ||
      h.rowbytes != static_cast<size_t>(h.width) * h.out_channels)
    return Internal("failed to decode PNG: libpng produced " + std::to_string(h.out_channels) +
                    " channels, " + std::to_string(h.rowbytes) + " bytes per row for color type " +
                    std::to_string(h.color_type) + " depth " + std::to_string(h.bit_depth));

  int orientation = 1;
  if (options.apply_exif_orientation && h.exif != nullptr)
    orientation = ParseExifOrientation({h.exif, h.exif_length});
  info->orientation = orientation;
  Image* target = orientation == 1 ? out : &scratch_;
  target->Reset(static_cast<int>(h.width), static_cast<int>(h.height), h.out_channels);
  if (ReadRows(png, &h, target->pixels.data(), target->stride()) != 0) return PngError(src);
  if (orientation != 1) ApplyOrientation(scratch_, orientation, out);
  return OkStatus();
}

}  // namespace kiln::data
