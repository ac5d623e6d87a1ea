// ImageDecoder (opset 20): encoded_stream, a 1-D uint8 tensor holding one encoded image, ->
// image, uint8 [H, W, C]. pixel_format "RGB" (default, C = 3), "BGR" (C = 3) or "Grayscale"
// (C = 1).
//
// The op lives in the data layer because it decodes with the pipeline's own decoders
// (data/decode.h: JPEG through libjpeg-turbo, PNG through libpng), which src/ops may not include.
// kiln_data is linked whole into libkiln (src/CMakeLists.txt, KILN_LAYERS), so the static
// registrars below survive linking like those of src/ops.
//
// What ONNX's reference (PIL) produces, bit for bit:
//  - full resolution, no DCT scaling, no EXIF rotation (PIL's Image.open does not transpose);
//  - gray sources become RGB by repeating the gray value, alpha is dropped (PIL's convert("RGB"));
//  - Grayscale from a colour source is PIL's convert("L"): (19595 R + 38470 G + 7471 B + 2^15)
//    >> 16, which is what onnx 1.19.1's stored outputs hold; a gray source is kept as it is.
// Besides JPEG and PNG: binary PNM (P5 gray, P6 RGB, maxval 255) and uncompressed BMP (24-bit,
// and 32-bit whose fourth byte is ignored, as PIL does), read here. TIFF, WebP, GIF and JPEG 2000
// are refused with Unsupported naming the format (sniffed from the magic bytes); other bytes,
// corrupt and truncated files give InvalidArgument naming the format and the cause. Headers that
// claim more than 100 megapixels are refused before any allocation (DecodeOptions::max_pixels).
//
// The output's H and W are known only by decoding, so the op assigns its output itself
// (ShapesFromRun, as NonZero, Unique and NonMaxSuppression).
#include <png.h>
#include <turbojpeg.h>

#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "data/decode.h"
#include "ir/op.h"
#include "ops/op_cases.h"

namespace kiln::data {
namespace {

enum class PixelFormat { kRgb, kBgr, kGray };

struct ImageDecoderAttrs : ir::OpAttrs {
  PixelFormat pixel_format = PixelFormat::kRgb;
};

constexpr int64_t kMaxPixels = DecodeOptions{}.max_pixels;

// Formats DetectImageFormat does not know: PNM (P1-P7) and JPEG 2000 (JP2 box or raw codestream).
bool IsPnm(std::span<const uint8_t> b) {
  return b.size() >= 2 && b[0] == 'P' && b[1] >= '1' && b[1] <= '7';
}
bool IsSpace(uint8_t c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f';
}
bool IsJpeg2000(std::span<const uint8_t> b) {
  static const uint8_t kJp2[12] = {0, 0, 0, 0x0C, 'j', 'P', ' ', ' ', 0x0D, 0x0A, 0x87, 0x0A};
  static const uint8_t kJ2k[4] = {0xFF, 0x4F, 0xFF, 0x51};
  return (b.size() >= 12 && std::memcmp(b.data(), kJp2, 12) == 0) ||
         (b.size() >= 4 && std::memcmp(b.data(), kJ2k, 4) == 0);
}

Status CheckDims(const char* format, int64_t w, int64_t h) {
  if (w <= 0 || h <= 0)
    return InvalidArgument(std::string(format) + " header gives a " + std::to_string(w) + "x" +
                           std::to_string(h) + " image; width and height must be positive");
  if (w > kMaxPixels || h > kMaxPixels || w * h > kMaxPixels)
    return InvalidArgument(std::string(format) + " image of " + std::to_string(w) + "x" +
                           std::to_string(h) + " pixels exceeds the limit of " +
                           std::to_string(kMaxPixels) + " pixels");
  return OkStatus();
}

// Binary PNM: "P5"/"P6", whitespace-separated decimal width, height and maxval (comments from '#'
// to the end of a line between them), one whitespace byte, then the raster, rows top to bottom.
Status ReadPnm(std::span<const uint8_t> b, Image* out) {
  if (b[1] != '5' && b[1] != '6')
    return Unsupported("PNM P" + std::string(1, static_cast<char>(b[1])) +
                       " images are not supported (binary P5 and P6 are)");
  size_t pos = 2;
  int64_t fields[3];
  for (int64_t& field : fields) {
    for (;;) {  // whitespace and comments
      if (pos < b.size() && IsSpace(b[pos])) {
        ++pos;
      } else if (pos < b.size() && b[pos] == '#') {
        while (pos < b.size() && b[pos] != '\n' && b[pos] != '\r') ++pos;
      } else {
        break;
      }
    }
    if (pos >= b.size() || b[pos] < '0' || b[pos] > '9')
      return InvalidArgument("PNM header is truncated or malformed at byte " + std::to_string(pos) +
                             " (expected width, height and maxval)");
    field = 0;
    while (pos < b.size() && b[pos] >= '0' && b[pos] <= '9') {
      field = field * 10 + (b[pos++] - '0');
      if (field > (int64_t{1} << 40))
        return InvalidArgument("PNM header holds a number too large at byte " +
                               std::to_string(pos));
    }
  }
  if (pos >= b.size() || !IsSpace(b[pos]))
    return InvalidArgument("PNM header must end with one whitespace byte after maxval");
  ++pos;
  const int64_t w = fields[0], h = fields[1], maxval = fields[2];
  KILN_RETURN_IF_ERROR(CheckDims("PNM", w, h));
  if (maxval != 255)
    return Unsupported("PNM images with maxval " + std::to_string(maxval) +
                       " are not supported (maxval 255 is)");
  const int c = b[1] == '5' ? 1 : 3;
  const size_t need = static_cast<size_t>(w * h * c);
  if (b.size() - pos < need)
    return InvalidArgument("PNM raster is truncated: " + std::to_string(need) +
                           " bytes expected after the header; got " +
                           std::to_string(b.size() - pos));
  out->Reset(static_cast<int>(w), static_cast<int>(h), c);
  std::memcpy(out->pixels.data(), b.data() + pos, need);
  return OkStatus();
}

uint32_t Le(std::span<const uint8_t> b, size_t at, int bytes) {
  uint32_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | b[at + i];
  return v;
}

// Uncompressed BMP: a BITMAPINFOHEADER or later (40+ byte DIB header), BI_RGB, 24 or 32 bits per
// pixel, rows bottom-up (height > 0) or top-down (height < 0), each padded to 4 bytes, BGR(X).
Status ReadBmp(std::span<const uint8_t> b, Image* out) {
  if (b.size() < 54) return InvalidArgument("BMP headers are truncated");
  const uint32_t offset = Le(b, 10, 4), dib = Le(b, 14, 4);
  if (dib < 40)
    return Unsupported("BMP with a " + std::to_string(dib) +
                       "-byte (OS/2) header is not supported (40 or more is)");
  const int64_t w = static_cast<int32_t>(Le(b, 18, 4));
  const int64_t signed_h = static_cast<int32_t>(Le(b, 22, 4));
  const uint32_t bpp = Le(b, 28, 2), compression = Le(b, 30, 4);
  if (compression != 0 || (bpp != 24 && bpp != 32))
    return Unsupported("BMP with " + std::to_string(bpp) + " bits per pixel and compression " +
                       std::to_string(compression) +
                       " is not supported (uncompressed 24 and 32 bits are)");
  const int64_t h = signed_h < 0 ? -signed_h : signed_h;
  KILN_RETURN_IF_ERROR(CheckDims("BMP", w, h));
  const size_t px = bpp / 8, stride = (static_cast<size_t>(w) * px + 3) / 4 * 4;
  if (offset < 14 + dib || offset > b.size() ||
      (b.size() - offset) / stride < static_cast<size_t>(h))
    return InvalidArgument("BMP pixel data is truncated: " + std::to_string(stride * h) +
                           " bytes expected at offset " + std::to_string(offset) + " of a " +
                           std::to_string(b.size()) + "-byte file");
  out->Reset(static_cast<int>(w), static_cast<int>(h), 3);
  for (int64_t y = 0; y < h; ++y) {
    const uint8_t* row = b.data() + offset + stride * (signed_h < 0 ? y : h - 1 - y);
    uint8_t* dst = out->pixels.data() + out->stride() * y;
    for (int64_t x = 0; x < w; ++x, row += px, dst += 3) {
      dst[0] = row[2];
      dst[1] = row[1];
      dst[2] = row[0];
    }
  }
  return OkStatus();
}

Status Decode(std::span<const uint8_t> bytes, Image* out) {
  if (bytes.empty()) return InvalidArgument("the encoded stream is empty");
  if (IsJpeg2000(bytes)) return Unsupported("JPEG 2000 images are not supported");
  if (IsPnm(bytes)) return ReadPnm(bytes, out);
  const ImageFormat format = DetectImageFormat(bytes);
  switch (format) {
    case ImageFormat::kJpeg:
    case ImageFormat::kPng: {
      DecodeOptions options;
      options.apply_exif_orientation = false;  // PIL's Image.open keeps the stored orientation
      ImageDecoder decoder;
      return decoder.Decode(bytes, options, out);
    }
    case ImageFormat::kBmp:
      return ReadBmp(bytes, out);
    case ImageFormat::kUnknown:
      return InvalidArgument(
          "the encoded stream is not an image kiln reads (JPEG, PNG, PNM, BMP): unrecognised "
          "leading bytes");
    default:
      return Unsupported(std::string(ImageFormatName(format)) +
                         " images are not supported (JPEG, PNG, PNM P5/P6 and BMP are)");
  }
}

class ImageDecoderOp final : public ir::Op {
 public:
  static StatusOr<std::unique_ptr<ir::Op>> Create(const ir::Node& node) {
    const std::string f = node.GetString("pixel_format", "RGB");
    std::unique_ptr<ImageDecoderOp> op(new ImageDecoderOp(node));
    if (f == "RGB") {
      op->a_.pixel_format = PixelFormat::kRgb;
    } else if (f == "BGR") {
      op->a_.pixel_format = PixelFormat::kBgr;
    } else if (f == "Grayscale") {
      op->a_.pixel_format = PixelFormat::kGray;
    } else {
      return ir::AttrError(node, "pixel_format must be RGB, BGR or Grayscale; got '" + f + "'");
    }
    return std::unique_ptr<ir::Op>(std::move(op));
  }

  // The output is uint8 [H, W, C] with H and W known only by decoding: the run assigns it, and
  // Infer is not asked for shapes (ir::Op::ShapesFromRun); it checks the input all the same.
  bool ShapesFromRun() const override { return true; }
  Status Infer(ir::InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(0, {DataType::kUInt8}));
    if (ctx.rank(0) != 1)
      return ctx.Error("encoded_stream must be 1-D; got rank " + std::to_string(ctx.rank(0)));
    return ctx.Error(
        "its output height and width depend on the encoded bytes, known only by "
        "decoding them");
  }

  Status Compute(const ir::ComputeContext& ctx) const override {
    if (!ctx.has(0)) return RunError("encoded_stream is required");
    const Tensor& in = ctx.in(0);
    if (in.dtype() != DataType::kUInt8 || in.rank() != 1)
      return RunError("encoded_stream must be a 1-D uint8 tensor; got " +
                      std::string(DataTypeName(in.dtype())) + " " + ShapeToString(in.shape()));
    Image image;
    const Status s = Decode({in.data<uint8_t>(), static_cast<size_t>(in.numel())}, &image);
    if (!s.ok()) return Status(s.code(), "failed to run " + describe() + ": " + s.message());
    const bool gray = a_.pixel_format == PixelFormat::kGray;
    const int64_t c = gray ? 1 : 3, n = static_cast<int64_t>(image.width) * image.height;
    Tensor y = Tensor::Empty(DataType::kUInt8, {image.height, image.width, c});
    uint8_t* dst = y.data<uint8_t>();
    const uint8_t* src = image.pixels.data();
    for (int64_t i = 0; i < n; ++i) {
      if (image.channels == 1) {
        for (int64_t k = 0; k < c; ++k) dst[i * c + k] = src[i];
      } else if (gray) {  // PIL's convert("L")
        const uint32_t r = src[3 * i], g = src[3 * i + 1], b = src[3 * i + 2];
        dst[i] = static_cast<uint8_t>((r * 19595 + g * 38470 + b * 7471 + 0x8000) >> 16);
      } else {
        const bool bgr = a_.pixel_format == PixelFormat::kBgr;
        dst[3 * i] = src[3 * i + (bgr ? 2 : 0)];
        dst[3 * i + 1] = src[3 * i + 1];
        dst[3 * i + 2] = src[3 * i + (bgr ? 0 : 2)];
      }
    }
    if (!ctx.outputs.empty() && ctx.outputs[0] != nullptr) *ctx.outputs[0] = std::move(y);
    return OkStatus();
  }

  const ir::OpAttrs* attributes() const override { return &a_; }

 private:
  explicit ImageDecoderOp(const ir::Node& node) : Op(node) {}
  ImageDecoderAttrs a_;
};
KILN_REGISTER_OP("ImageDecoder", 20, ir::kMaxOpset, &ImageDecoderOp::Create);

// Case inputs: small images encoded here. Pixel values follow a fixed pattern.
std::vector<uint8_t> Pattern(int w, int h, int c, int salt) {
  std::vector<uint8_t> p(static_cast<size_t>(w) * h * c);
  for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<uint8_t>((i * 37 + salt * 101) % 251);
  return p;
}

Tensor Bytes(const std::vector<uint8_t>& b) {
  return Tensor::FromVector<uint8_t>(b, {static_cast<int64_t>(b.size())});
}

std::vector<uint8_t> EncodePnm(int w, int h, int c) {
  const std::string header = std::string(c == 1 ? "P5" : "P6") + "\n# kiln\n" + std::to_string(w) +
                             " " + std::to_string(h) + "\n255\n";
  std::vector<uint8_t> b(header.begin(), header.end());
  const std::vector<uint8_t> p = Pattern(w, h, c, c);
  b.insert(b.end(), p.begin(), p.end());
  return b;
}

std::vector<uint8_t> EncodeBmp(int w, int h, int bpp, bool top_down) {
  const size_t px = bpp / 8, stride = (w * px + 3) / 4 * 4, size = 54 + stride * h;
  std::vector<uint8_t> b(size, 0);
  auto put = [&](size_t at, uint32_t v, int n) {
    for (int i = 0; i < n; ++i) b[at + i] = static_cast<uint8_t>(v >> (8 * i));
  };
  b[0] = 'B';
  b[1] = 'M';
  put(2, static_cast<uint32_t>(size), 4);
  put(10, 54, 4);
  put(14, 40, 4);
  put(18, static_cast<uint32_t>(w), 4);
  put(22, static_cast<uint32_t>(top_down ? -h : h), 4);
  put(26, 1, 2);
  put(28, static_cast<uint32_t>(bpp), 2);
  const std::vector<uint8_t> p = Pattern(w, h, static_cast<int>(px), bpp);
  for (int y = 0; y < h; ++y)
    std::memcpy(b.data() + 54 + stride * y, p.data() + px * w * y, px * w);
  return b;
}

// libpng's simplified writer (no longjmp to guard); empty on failure.
std::vector<uint8_t> EncodePng(int w, int h, int c) {
  png_image image;
  std::memset(&image, 0, sizeof(image));
  image.version = PNG_IMAGE_VERSION;
  image.width = static_cast<png_uint_32>(w);
  image.height = static_cast<png_uint_32>(h);
  image.format = c == 1 ? PNG_FORMAT_GRAY : (c == 4 ? PNG_FORMAT_RGBA : PNG_FORMAT_RGB);
  const std::vector<uint8_t> p = Pattern(w, h, c, 7);
  png_alloc_size_t size = 0;
  if (!png_image_write_to_memory(&image, nullptr, &size, 0, p.data(), 0, nullptr)) return {};
  std::vector<uint8_t> b(size);
  if (!png_image_write_to_memory(&image, b.data(), &size, 0, p.data(), 0, nullptr)) return {};
  b.resize(size);
  return b;
}

std::vector<uint8_t> EncodeJpeg(int w, int h, int c) {
  tjhandle tj = tjInitCompress();
  if (tj == nullptr) return {};
  const std::vector<uint8_t> p = Pattern(w, h, c, 3);
  unsigned char* jpeg = nullptr;
  unsigned long size = 0;
  std::vector<uint8_t> b;
  if (tjCompress2(tj, p.data(), w, 0, h, c == 1 ? TJPF_GRAY : TJPF_RGB, &jpeg, &size,
                  c == 1 ? TJSAMP_GRAY : TJSAMP_420, 90, 0) == 0)
    b.assign(jpeg, jpeg + size);
  tjFree(jpeg);
  tjDestroy(tj);
  return b;
}

std::vector<ops::OpCase> ImageDecoderCases() {
  std::vector<ops::OpCase> cases;
  struct Source {
    std::string name;
    std::vector<uint8_t> bytes;
  };
  const Source sources[] = {
      {"JPEG RGB 9x7", EncodeJpeg(9, 7, 3)},
      {"JPEG gray 5x1", EncodeJpeg(5, 1, 1)},
      {"PNG RGB 7x5", EncodePng(7, 5, 3)},
      {"PNG gray 1x3", EncodePng(1, 3, 1)},
      {"PNG RGBA 3x2", EncodePng(3, 2, 4)},
      {"PNM P6 5x3", EncodePnm(5, 3, 3)},
      {"PNM P5 1x1", EncodePnm(1, 1, 1)},
      {"BMP 24-bit 3x2", EncodeBmp(3, 2, 24, false)},
      {"BMP 32-bit top-down 1x4", EncodeBmp(1, 4, 32, true)},
  };
  for (const Source& s : sources) {
    if (s.bytes.empty()) continue;  // the encoder failed: nothing to decode
    for (const char* format : {"RGB", "BGR", "Grayscale"})
      cases.push_back(
          ops::OpCase(s.name + " " + format, 20).In(Bytes(s.bytes)).Str("pixel_format", format));
  }
  cases.push_back(ops::OpCase("PNG RGB 7x5 default format", 20).In(Bytes(EncodePng(7, 5, 3))));
  return cases;
}
KILN_REGISTER_OP_CASES("", "ImageDecoder", &ImageDecoderCases);

}  // namespace
}  // namespace kiln::data
