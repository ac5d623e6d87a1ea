// Image decoding: format detection by magic bytes, the EXIF orientation parser, orientation
// transforms and file reading. The JPEG and PNG decoders live in decode_jpeg.cc and decode_png.cc.
//
// EXIF: a TIFF header (II/MM, 42) and IFD0 are walked with every offset bounds-checked; only tag
// 0x0112 (Orientation, SHORT) is read, values outside 1-8 count as 1. Orientation transforms map
// each destination pixel to its source pixel (PIL's exif_transpose methods: 2 FLIP_LEFT_RIGHT,
// 3 ROTATE_180, 4 FLIP_TOP_BOTTOM, 5 TRANSPOSE, 6 ROTATE_270, 7 TRANSVERSE, 8 ROTATE_90).
#include "data/decode.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

namespace kiln::data {

void Image::Reset(int w, int h, int c) {
  width = w;
  height = h;
  channels = c;
  pixels.resize(static_cast<size_t>(w) * h * c);
}

ImageFormat DetectImageFormat(std::span<const uint8_t> b) {
  auto starts = [&](const char* magic, size_t n) {
    return b.size() >= n && std::memcmp(b.data(), magic, n) == 0;
  };
  if (starts("\xFF\xD8\xFF", 3)) return ImageFormat::kJpeg;
  if (starts("\x89PNG\r\n\x1A\n", 8)) return ImageFormat::kPng;
  if (starts("GIF87a", 6) || starts("GIF89a", 6)) return ImageFormat::kGif;
  if (starts("BM", 2) && b.size() >= 26) return ImageFormat::kBmp;
  if (starts("RIFF", 4) && b.size() >= 12 && std::memcmp(b.data() + 8, "WEBP", 4) == 0)
    return ImageFormat::kWebp;
  if (starts("II*\0", 4) || starts("MM\0*", 4)) return ImageFormat::kTiff;
  return ImageFormat::kUnknown;
}

const char* ImageFormatName(ImageFormat format) {
  switch (format) {
    case ImageFormat::kJpeg:
      return "JPEG";
    case ImageFormat::kPng:
      return "PNG";
    case ImageFormat::kGif:
      return "GIF";
    case ImageFormat::kBmp:
      return "BMP";
    case ImageFormat::kWebp:
      return "WebP";
    case ImageFormat::kTiff:
      return "TIFF";
    case ImageFormat::kUnknown:
      break;
  }
  return "unknown";
}

int ParseExifOrientation(std::span<const uint8_t> exif) {
  const uint8_t* p = exif.data();
  size_t n = exif.size();
  if (n >= 6 && std::memcmp(p, "Exif\0\0", 6) == 0) {
    p += 6;
    n -= 6;
  }
  if (n < 8) return 1;
  bool le;
  if (p[0] == 'I' && p[1] == 'I') {
    le = true;
  } else if (p[0] == 'M' && p[1] == 'M') {
    le = false;
  } else {
    return 1;
  }
  auto u16 = [&](size_t off) -> uint32_t {
    return le ? p[off] | (p[off + 1] << 8) : (p[off] << 8) | p[off + 1];
  };
  auto u32 = [&](size_t off) -> uint32_t {
    return le ? p[off] | (p[off + 1] << 8) | (p[off + 2] << 16) | (uint32_t{p[off + 3]} << 24)
              : (uint32_t{p[off]} << 24) | (p[off + 1] << 16) | (p[off + 2] << 8) | p[off + 3];
  };
  if (u16(2) != 42) return 1;
  size_t ifd = u32(4);
  if (ifd > n || n - ifd < 2) return 1;
  size_t count = u16(ifd);
  for (size_t i = 0; i < count; ++i) {
    size_t e = ifd + 2 + i * 12;
    if (e > n || n - e < 12) return 1;
    if (u16(e) != 0x0112) continue;
    uint32_t type = u16(e + 2);
    uint32_t v = type == 3 ? u16(e + 8) : type == 4 ? u32(e + 8) : 0;
    return v >= 1 && v <= 8 ? static_cast<int>(v) : 1;
  }
  return 1;
}

int JpegExifOrientation(std::span<const uint8_t> jpeg) {
  const uint8_t* p = jpeg.data();
  size_t n = jpeg.size();
  size_t pos = 2;  // after SOI
  while (pos + 4 <= n) {
    if (p[pos] != 0xFF) return 1;
    uint8_t marker = p[pos + 1];
    if (marker == 0xFF) {  // fill byte
      ++pos;
      continue;
    }
    if (marker == 0xDA || marker == 0xD9) return 1;  // start of scan / end of image
    if (marker == 0x01 || (marker >= 0xD0 && marker <= 0xD7)) {
      pos += 2;
      continue;
    }
    size_t len = (p[pos + 2] << 8) | p[pos + 3];
    if (len < 2 || pos + 2 + len > n) return 1;
    const uint8_t* seg = p + pos + 4;
    size_t seg_len = len - 2;
    if (marker == 0xE1 && seg_len >= 6 && std::memcmp(seg, "Exif\0\0", 6) == 0)
      return ParseExifOrientation({seg, seg_len});
    pos += 2 + len;
  }
  return 1;
}

namespace {

// dst(x, y) = src(sx, sy) with sx = ax + bx*x + cx*y, sy = ay + by*x + cy*y.
template <int C>
void Remap(const Image& src, Image* dst, int ax, int bx, int cx, int ay, int by, int cy) {
  const uint8_t* s = src.pixels.data();
  uint8_t* d = dst->pixels.data();
  const size_t ss = src.stride();
  for (int y = 0; y < dst->height; ++y) {
    int sx = ax + cx * y, sy = ay + cy * y;
    uint8_t* drow = d + static_cast<size_t>(y) * dst->stride();
    // Row-major source stepping: pointer delta per destination pixel.
    const ptrdiff_t step = static_cast<ptrdiff_t>(by) * static_cast<ptrdiff_t>(ss) + bx * C;
    const uint8_t* sp = s + static_cast<size_t>(sy) * ss + static_cast<size_t>(sx) * C;
    for (int x = 0; x < dst->width; ++x, sp += step) {
      for (int c = 0; c < C; ++c) drow[x * C + c] = sp[c];
    }
  }
}

}  // namespace

void ApplyOrientation(const Image& src, int orientation, Image* dst) {
  const int w = src.width, h = src.height;
  const bool transpose = orientation >= 5 && orientation <= 8;
  dst->Reset(transpose ? h : w, transpose ? w : h, src.channels);
  // (ax, bx, cx, ay, by, cy) for sx = ax + bx*x + cx*y, sy = ay + by*x + cy*y.
  int m[6];
  switch (orientation) {
    case 2:
      m[0] = w - 1, m[1] = -1, m[2] = 0, m[3] = 0, m[4] = 0, m[5] = 1;
      break;
    case 3:
      m[0] = w - 1, m[1] = -1, m[2] = 0, m[3] = h - 1, m[4] = 0, m[5] = -1;
      break;
    case 4:
      m[0] = 0, m[1] = 1, m[2] = 0, m[3] = h - 1, m[4] = 0, m[5] = -1;
      break;
    case 5:
      m[0] = 0, m[1] = 0, m[2] = 1, m[3] = 0, m[4] = 1, m[5] = 0;
      break;
    case 6:
      m[0] = 0, m[1] = 0, m[2] = 1, m[3] = h - 1, m[4] = -1, m[5] = 0;
      break;
    case 7:
      m[0] = w - 1, m[1] = 0, m[2] = -1, m[3] = h - 1, m[4] = -1, m[5] = 0;
      break;
    case 8:
      m[0] = w - 1, m[1] = 0, m[2] = -1, m[3] = 0, m[4] = 1, m[5] = 0;
      break;
    default:
      m[0] = 0, m[1] = 1, m[2] = 0, m[3] = 0, m[4] = 0, m[5] = 1;
      break;
  }
  if (dst->pixels.empty()) return;
  if (src.channels == 1) {
    Remap<1>(src, dst, m[0], m[1], m[2], m[3], m[4], m[5]);
  } else {
    Remap<3>(src, dst, m[0], m[1], m[2], m[3], m[4], m[5]);
  }
}

Status ImageDecoder::Decode(std::span<const uint8_t> bytes, const DecodeOptions& options,
                            Image* out, DecodeInfo* info) {
  DecodeInfo local;
  if (info == nullptr) info = &local;
  *info = DecodeInfo();
  if (bytes.empty()) return InvalidArgument("failed to decode image: the file is empty");
  ImageFormat format = DetectImageFormat(bytes);
  info->format = format;
  switch (format) {
    case ImageFormat::kJpeg:
      return DecodeJpeg(bytes, options, out, info);
    case ImageFormat::kPng:
      return DecodePng(bytes, options, out, info);
    case ImageFormat::kUnknown:
      return InvalidArgument(
          "failed to decode image: not a JPEG or PNG file (unrecognised leading bytes)");
    default:
      return Unsupported(std::string("failed to decode image: ") + ImageFormatName(format) +
                         " files are not supported (JPEG and PNG are)");
  }
}

StatusOr<Image> DecodeImage(std::span<const uint8_t> bytes, const DecodeOptions& options) {
  ImageDecoder decoder;
  Image image;
  KILN_RETURN_IF_ERROR(decoder.Decode(bytes, options, &image));
  return image;
}

Status ReadFileBytes(const std::string& path, std::vector<uint8_t>* out) {
  struct Closer {
    void operator()(FILE* f) const { std::fclose(f); }
  };
  std::unique_ptr<FILE, Closer> f(std::fopen(path.c_str(), "rb"));
  if (!f) {
    int err = errno;
    std::string msg = "failed to open '" + path + "': " + std::strerror(err);
    return err == ENOENT ? NotFound(msg) : InvalidArgument(msg);
  }
  // Read straight into the caller's buffer, growing it if the file grew since ftell.
  long size = std::fseek(f.get(), 0, SEEK_END) == 0 ? std::ftell(f.get()) : -1;
  std::rewind(f.get());
  // One byte more than the size, so an unchanged file is read in one call with no regrowth.
  size_t want = size > 0 ? static_cast<size_t>(size) + 1 : size_t{1} << 16;
  size_t got = 0;
  for (;;) {
    out->resize(got + want);
    size_t n = std::fread(out->data() + got, 1, want, f.get());
    got += n;
    if (n < want) break;
    want = std::max<size_t>(want, size_t{1} << 16);
  }
  out->resize(got);
  if (std::ferror(f.get())) return InvalidArgument("failed to read '" + path + "'");
  return OkStatus();
}

}  // namespace kiln::data
