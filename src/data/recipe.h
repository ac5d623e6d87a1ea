// Preprocessing recipes: what a model expects its input images to look like, as one small struct,
// with presets for the usual conventions and a JSON form; and Preprocessor, which runs decode +
// transform for one file into a caller's float buffer (the unit of work of a decode worker).
//
// Presets:
//  - "torchvision-imagenet": torchvision's ImageNet evaluation transform, Resize(256) (shorter
//  side,
//    PIL bilinear with antialiasing) + CenterCrop(224) + ToTensor (/255) + Normalize(mean
//    [0.485,0.456,0.406], std [0.229,0.224,0.225]), RGB, NCHW, output 3x224x224. A width/height
//    argument changes the crop (and scales the resize by 256/224, as timm's crop_pct=0.875 does).
//  - "paddleocr": PP-OCR text recognition (rec_image_shape 3,48,320): resize to height 48 keeping
//    aspect, width min(320, ceil(48*w/h)), x/255 then (x-0.5)/0.5, BGR (PaddleOCR reads with
//    cv2.imread), NCHW, padded on the right with 0 after normalization (pixel value 127.5), as
//    PaddleOCR's resize_norm_img does. PaddleOCR resizes with cv2.INTER_LINEAR, which does not
//    antialias, so antialias is off here. A width/height argument changes 320/48.
//  - "scale01": resize to the model's width x height (aspect not kept, antialiased), /255, no mean
//    or std, RGB, NCHW. Needs width and height.
//  - "fashion-mnist": the demo CNN's input (demo/): gray (PIL's convert("L") weights), resize to
//    28x28 (aspect not kept, antialiased), (x/255 - 0.2860) / 0.3530, NCHW, output 1x28x28. A
//    width/height argument changes 28x28.
//
// JSON (every key optional; "preset" is applied first and the other keys override it; unknown keys
// are errors, so typos do not pass silently):
//   {"preset": "torchvision-imagenet", "preset_width": 224, "preset_height": 224,
//    "resize": {"mode": "shorter", "size": 256}     mode: none|shorter|exact|letterbox|height;
//              exact/letterbox take width+height, height takes height+width (max width)
//    "crop": {"width": 224, "height": 224}          or a number for a square; center crop
//    "antialias": true, "scale": 0.00392156862745098, "mean": [..3], "std": [..3],
//    "color": "rgb" | "bgr" | "gray",  "layout": "NCHW" | "NHWC",
//    "pad": 0 or [r,g,b] (pixel value before normalization, output channel order),
//    "exif_orientation": true, "jpeg_dct_scaling": false, "max_pixels": 100000000}
// Errors name the file, the field and the value: recipe 'm.json': field 'std[1]' must be non-zero;
// got 0.
//
// Thread-safety: Recipe is a value. A Preprocessor is used by one thread at a time (one per decode
// worker); construct one per thread from the same Recipe.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "data/decode.h"
#include "data/transform.h"
#include "kiln/status.h"
#include "kiln/tensor.h"

namespace kiln::data {

struct Recipe {
  std::string name;  // preset name or file, for messages
  GeometrySpec geometry;
  bool antialias = true;
  NormalizeSpec normalize;
  bool apply_exif_orientation = true;
  // JPEG DCT-domain downscaling to the smallest n/8 size still >= what the resize needs (fast for
  // large photos; pixels then differ slightly from a full decode + resize).
  bool jpeg_dct_scaling = false;
  int64_t max_pixels = DecodeOptions().max_pixels;
};

// Preset names, in the order documented above.
std::vector<std::string> RecipePresetNames();
// A preset; width/height override its size where documented (0 = the preset's default).
StatusOr<Recipe> PresetRecipe(const std::string& name, int width = 0, int height = 0);
// Parses the JSON form; `origin` (a file name) prefixes messages.
StatusOr<Recipe> ParseRecipeJson(const std::string& text, const std::string& origin = "<json>");
StatusOr<Recipe> LoadRecipeFile(const std::string& path);
// The recipe for a model input of `dims` ([N,C,H,W], -1 for a symbolic dim) from `spec`: a .json
// file, a preset sized to the input's fixed height and width (or its default size), or for ""
// torchvision-imagenet when the input is a fixed-size RGB image (InvalidArgument otherwise).
StatusOr<Recipe> RecipeForInput(const std::string& spec, const std::vector<int64_t>& dims);
// Checks every field, and that the output size is fixed (batchable).
Status ValidateRecipe(const Recipe& recipe);
// The JSON form of a recipe (round-trips through ParseRecipeJson).
std::string RecipeToJson(const Recipe& recipe);
// Decode options implied by a recipe (DCT-scaling minimum dims, EXIF, pixel limit).
DecodeOptions DecodeOptionsFor(const Recipe& recipe);

// Where a Preprocessor's time went (wall seconds, summed over calls), for a job's summary.
struct PreprocessStats {
  int64_t images_ok = 0;
  int64_t images_failed = 0;
  double read_s = 0;       // RunFile: reading files
  double decode_s = 0;     // decoding (failed decodes included)
  double transform_s = 0;  // resize, crop, normalize
};

// Decode + transform of one encoded image into a float buffer. Not thread-safe; one per worker.
class Preprocessor {
 public:
  // Validates the recipe.
  static StatusOr<std::unique_ptr<Preprocessor>> Create(const Recipe& recipe);

  const Recipe& recipe() const { return recipe_; }
  // Per-image output shape: {C, H, W} (NCHW) or {H, W, C} (NHWC); a batch prepends N.
  Shape OutputShape() const;
  int64_t OutputElements() const;

  // Decodes `bytes` and writes OutputElements() floats to dst. The buffer is written only when the
  // result is OK (apart from partial writes on a transform error, which cannot happen for a valid
  // recipe and decoded image).
  Status Run(std::span<const uint8_t> bytes, float* dst, DecodeInfo* info = nullptr);
  // Reads the file (into a reused buffer) and runs; messages gain "while reading <path>".
  Status RunFile(const std::string& path, float* dst, DecodeInfo* info = nullptr);
  // Transform only, for an image decoded elsewhere.
  Status RunDecoded(const Image& image, float* dst);

  const PreprocessStats& stats() const { return stats_; }
  void ResetStats() { stats_ = PreprocessStats(); }

 private:
  explicit Preprocessor(const Recipe& recipe);

  Recipe recipe_;
  DecodeOptions decode_options_;
  int out_width_ = 0, out_height_ = 0;
  ImageDecoder decoder_;
  Transformer transformer_;
  Image image_;
  std::vector<uint8_t> file_;
  PreprocessStats stats_;
};

}  // namespace kiln::data
