// libFuzzer target for image files as kiln decodes them (`kiln run --images`, `kiln quantize`'s
// image calibration, kiln.ImageDecoder, kiln.ray): libjpeg-turbo and libpng behind
// data/decode.cc, EXIF orientation, and a recipe's resize/crop/normalize (data/transform.cc).
// The first byte picks the recipe and decode options; the rest is the file. A decode either fails
// with a Status or gives an image whose pixels all exist, and a preprocessed image is finite
// floats (finite bytes through finite weights): a NaN or infinity is a finding (trap).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "data/decode.h"
#include "data/recipe.h"

namespace {

using kiln::data::Recipe;

// The recipes users run, with limits a fuzzer can afford (16 megapixels).
std::unique_ptr<kiln::data::Preprocessor> Make(int which) {
  static const char* kPresets[] = {"torchvision-imagenet", "paddleocr", "scale01", "fashion-mnist"};
  auto r = kiln::data::PresetRecipe(kPresets[which & 3], (which & 3) == 2 ? 40 : 0,
                                    (which & 3) == 2 ? 24 : 0);
  if (!r.ok()) __builtin_trap();
  r->jpeg_dct_scaling = (which & 4) != 0;
  r->apply_exif_orientation = (which & 8) != 0;
  r->max_pixels = 1 << 24;
  auto p = kiln::data::Preprocessor::Create(*r);
  if (!p.ok()) __builtin_trap();
  return std::move(p).value();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  static std::unique_ptr<kiln::data::Preprocessor> pre[16];
  const int which = data[0] & 15;
  if (!pre[which]) pre[which] = Make(which);
  const std::span<const uint8_t> file(data + 1, size - 1);

  // The decoder on its own, strict and lenient, with a DCT-scaling request.
  kiln::data::DecodeOptions o;
  o.max_pixels = 1 << 24;
  o.strict = (data[0] & 16) != 0;
  o.min_width = (data[0] & 32) ? 50 : 0;
  o.min_height = (data[0] & 32) ? 30 : 0;
  auto img = kiln::data::DecodeImage(file, o);
  if (img.ok()) {
    const auto& im = *img;
    if (im.width <= 0 || im.height <= 0 || im.channels < 1 || im.channels > 4 ||
        im.pixels.size() != im.stride() * static_cast<size_t>(im.height))
      __builtin_trap();
    volatile unsigned sum = 0;
    for (uint8_t v : im.pixels) sum = sum + v;
  }
  const int orientation = kiln::data::ParseExifOrientation(file);
  if (orientation < 1 || orientation > 8) __builtin_trap();

  // Decode + transform as a decode worker does.
  std::vector<float> out(static_cast<size_t>(pre[which]->OutputElements()));
  if (pre[which]->Run(file, out.data()).ok())
    for (float v : out)
      if (!std::isfinite(v)) __builtin_trap();
  return 0;
}
