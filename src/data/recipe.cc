// Recipes: presets, JSON parsing and validation, and the per-worker Preprocessor (see recipe.h).
//
// JSON is parsed with nlohmann_json without exceptions (parse(..., allow_exceptions=false)); every
// value is type-checked before it is read, so malformed input yields a Status naming the field.
// DCT scaling minimums: shorter side S -> both dims >= S (equivalent); exact / letterbox W x H ->
// width >= W and height >= H (conservative for letterbox); fixed height H -> height >= H (the width
// then follows, since the scaled width is at least ceil(H * w / h)).
#include "data/recipe.h"

#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>

namespace kiln::data {
namespace {

using nlohmann::json;

const char* ModeName(ResizeMode m) {
  switch (m) {
    case ResizeMode::kNone:
      return "none";
    case ResizeMode::kShorterSide:
      return "shorter";
    case ResizeMode::kExact:
      return "exact";
    case ResizeMode::kLetterbox:
      return "letterbox";
    case ResizeMode::kFixedHeight:
      return "height";
  }
  return "none";
}

std::string Dump(const json& v) { return v.dump(); }

// Reads JSON fields into a Recipe, remembering the first error.
class Reader {
 public:
  explicit Reader(std::string origin) : origin_(std::move(origin)) {}

  Status Fail(const std::string& field, const std::string& rule, const json& got) {
    return InvalidArgument("recipe '" + origin_ + "': field '" + field + "' " + rule + "; got " +
                           Dump(got));
  }

  Status Int(const json& obj, const std::string& key, const std::string& field, int* out) {
    const json& v = obj.at(key);
    if (!v.is_number_integer() || v.get<int64_t>() <= 0 || v.get<int64_t>() > (1 << 24))
      return Fail(field, "must be an integer from 1 to 16777216", v);
    *out = v.get<int>();
    return OkStatus();
  }

  Status Number(const json& v, const std::string& field, double* out) {
    if (!v.is_number() || !std::isfinite(v.get<double>()))
      return Fail(field, "must be a finite number", v);
    *out = v.get<double>();
    return OkStatus();
  }

  Status Bool(const json& v, const std::string& field, bool* out) {
    if (!v.is_boolean()) return Fail(field, "must be true or false", v);
    *out = v.get<bool>();
    return OkStatus();
  }

  // A number (all channels) or an array of 3.
  Status Triple(const json& v, const std::string& field, double out[3]) {
    if (v.is_number()) {
      double x = 0;
      KILN_RETURN_IF_ERROR(Number(v, field, &x));
      out[0] = out[1] = out[2] = x;
      return OkStatus();
    }
    if (!v.is_array() || (v.size() != 3 && v.size() != 1))
      return Fail(field, "must be a number or an array of 1 or 3 numbers", v);
    for (size_t i = 0; i < 3; ++i)
      KILN_RETURN_IF_ERROR(
          Number(v[v.size() == 1 ? 0 : i], field + "[" + std::to_string(i) + "]", &out[i]));
    return OkStatus();
  }

  Status Keys(const json& obj, const std::string& field, std::initializer_list<const char*> keys) {
    for (auto it = obj.begin(); it != obj.end(); ++it) {
      bool known = false;
      for (const char* k : keys) known = known || it.key() == k;
      if (!known) {
        std::string list;
        for (const char* k : keys) list += std::string(list.empty() ? "" : ", ") + k;
        return InvalidArgument("recipe '" + origin_ + "': unknown field '" + field + it.key() +
                               "' (known: " + list + ")");
      }
    }
    return OkStatus();
  }

  Status Resize(const json& v, Recipe* r) {
    GeometrySpec& g = r->geometry;
    if (v.is_string() && v.get<std::string>() == "none") {
      g.mode = ResizeMode::kNone;
      return OkStatus();
    }
    if (!v.is_object())
      return Fail("resize", "must be an object like {\"mode\": ...} or \"none\"", v);
    KILN_RETURN_IF_ERROR(Keys(v, "resize.", {"mode", "size", "width", "height"}));
    if (!v.contains("mode") || !v["mode"].is_string())
      return Fail("resize.mode", "must be one of none, shorter, exact, letterbox, height",
                  v.value("mode", json()));
    const std::string mode = v["mode"].get<std::string>();
    auto need = [&](const char* key, int* out) -> Status {
      if (!v.contains(key))
        return InvalidArgument("recipe '" + origin_ + "': field 'resize." + key +
                               "' is required for resize mode '" + mode + "'");
      return Int(v, key, std::string("resize.") + key, out);
    };
    if (mode == "none") {
      g.mode = ResizeMode::kNone;
    } else if (mode == "shorter") {
      g.mode = ResizeMode::kShorterSide;
      KILN_RETURN_IF_ERROR(need("size", &g.size));
    } else if (mode == "exact" || mode == "letterbox" || mode == "height") {
      g.mode = mode == "exact"       ? ResizeMode::kExact
               : mode == "letterbox" ? ResizeMode::kLetterbox
                                     : ResizeMode::kFixedHeight;
      KILN_RETURN_IF_ERROR(need("width", &g.width));
      KILN_RETURN_IF_ERROR(need("height", &g.height));
    } else {
      return Fail("resize.mode", "must be one of none, shorter, exact, letterbox, height",
                  v["mode"]);
    }
    return OkStatus();
  }

  Status Crop(const json& v, Recipe* r) {
    GeometrySpec& g = r->geometry;
    if (v.is_null()) {
      g.crop_width = g.crop_height = 0;
      return OkStatus();
    }
    if (v.is_number_integer()) {
      json holder = {{"size", v}};
      KILN_RETURN_IF_ERROR(Int(holder, "size", "crop", &g.crop_width));
      g.crop_height = g.crop_width;
      return OkStatus();
    }
    if (!v.is_object()) return Fail("crop", "must be a number, {\"width\", \"height\"} or null", v);
    KILN_RETURN_IF_ERROR(Keys(v, "crop.", {"width", "height"}));
    if (!v.contains("width") || !v.contains("height"))
      return Fail("crop", "needs both width and height", v);
    KILN_RETURN_IF_ERROR(Int(v, "width", "crop.width", &g.crop_width));
    return Int(v, "height", "crop.height", &g.crop_height);
  }

 private:
  std::string origin_;
};

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

std::vector<std::string> RecipePresetNames() {
  return {"torchvision-imagenet", "paddleocr", "scale01", "fashion-mnist"};
}

StatusOr<Recipe> PresetRecipe(const std::string& name, int width, int height) {
  Recipe r;
  r.name = name;
  if (width < 0 || height < 0 || (width > 0) != (height > 0))
    return InvalidArgument("preset '" + name + "' needs both width and height or neither; got " +
                           std::to_string(width) + "x" + std::to_string(height));
  if (name == "torchvision-imagenet") {
    const int w = width > 0 ? width : 224, h = height > 0 ? height : 224;
    r.geometry.mode = ResizeMode::kShorterSide;
    r.geometry.size = std::max(w, h) * 8 / 7;  // 256 for 224: crop_pct 0.875
    r.geometry.crop_width = w;
    r.geometry.crop_height = h;
    const double mean[3] = {0.485, 0.456, 0.406}, std[3] = {0.229, 0.224, 0.225};
    for (int c = 0; c < 3; ++c) r.normalize.mean[c] = mean[c], r.normalize.std[c] = std[c];
  } else if (name == "paddleocr") {
    r.geometry.mode = ResizeMode::kFixedHeight;
    r.geometry.width = width > 0 ? width : 320;
    r.geometry.height = height > 0 ? height : 48;
    r.antialias = false;
    r.normalize.order = ChannelOrder::kBGR;
    for (int c = 0; c < 3; ++c)
      r.normalize.mean[c] = 0.5, r.normalize.std[c] = 0.5, r.normalize.pad[c] = 127.5;
  } else if (name == "scale01") {
    if (width <= 0)
      return InvalidArgument("preset 'scale01' needs the model's input width and height");
    r.geometry.mode = ResizeMode::kExact;
    r.geometry.width = width;
    r.geometry.height = height;
  } else if (name == "fashion-mnist") {
    r.geometry.mode = ResizeMode::kExact;
    r.geometry.width = width > 0 ? width : 28;
    r.geometry.height = height > 0 ? height : 28;
    r.normalize.channels = 1;
    r.normalize.mean[0] = 0.2860;
    r.normalize.std[0] = 0.3530;
  } else {
    std::string names;
    for (const auto& n : RecipePresetNames()) names += (names.empty() ? "" : ", ") + n;
    return InvalidArgument("unknown recipe preset '" + name + "' (known: " + names + ")");
  }
  return r;
}

Status ValidateRecipe(const Recipe& r) {
  const std::string where = "recipe '" + r.name + "': ";
  const NormalizeSpec& n = r.normalize;
  if (n.channels != 1 && n.channels != 3)
    return InvalidArgument(where + "output channels must be 1 or 3; got " +
                           std::to_string(n.channels));
  if (!std::isfinite(n.scale) || n.scale == 0.0)
    return InvalidArgument(where + "field 'scale' must be finite and non-zero; got " +
                           std::to_string(n.scale));
  for (int c = 0; c < n.channels; ++c) {
    std::string i = "[";  // built in steps: GCC 12 -Wrestrict false positive
    i += std::to_string(c);
    i += "]";
    if (!std::isfinite(n.std[c]) || n.std[c] == 0.0)
      return InvalidArgument(where + "field 'std" + i + "' must be non-zero; got " +
                             Dump(json(n.std[c])));
    if (!std::isfinite(n.mean[c]))
      return InvalidArgument(where + "field 'mean" + i + "' must be finite");
    if (!std::isfinite(n.pad[c]) || n.pad[c] < 0 || n.pad[c] > 255)
      return InvalidArgument(where + "field 'pad" + i + "' must be a pixel value in 0..255; got " +
                             Dump(json(n.pad[c])));
    // The outputs are float32: (pixel * scale - mean) / std for pixels 0..255 must fit in one.
    // (Found by kiln_recipe_fuzz: a scale of 5e39 validated and filled the input with inf.)
    for (double pixel : {0.0, 255.0}) {
      const double v = (pixel * n.scale - n.mean[c]) / n.std[c];
      if (!std::isfinite(v) || std::fabs(v) > 3.0e38)
        return InvalidArgument(where + "fields 'scale', 'mean" + i + "' and 'std" + i +
                               "' map pixel value " + std::to_string(static_cast<int>(pixel)) +
                               " to " + Dump(json(v)) + ", beyond float32's range");
    }
  }
  if (r.max_pixels <= 0)
    return InvalidArgument(where + "field 'max_pixels' must be positive; got " +
                           std::to_string(r.max_pixels));
  // Geometry rules (sizes, crop combinations) via a probe image.
  auto probe = ComputeGeometry(r.geometry, 640, 480);
  if (!probe.ok()) return InvalidArgument(where + probe.status().message());
  int w, h;
  FixedCanvasSize(r.geometry, &w, &h);
  if (w <= 0 || h <= 0)
    return InvalidArgument(where + "the output size would depend on each image (resize '" +
                           ModeName(r.geometry.mode) +
                           "' without a crop); add a crop or use exact/letterbox/height so "
                           "images can be batched");
  return OkStatus();
}

StatusOr<Recipe> ParseRecipeJson(const std::string& text, const std::string& origin) {
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return InvalidArgument("recipe '" + origin + "': not valid JSON");
  if (!doc.is_object()) return InvalidArgument("recipe '" + origin + "': must be a JSON object");
  Reader rd(origin);
  try {
    KILN_RETURN_IF_ERROR(rd.Keys(
        doc, "",
        {"preset", "preset_width", "preset_height", "resize", "crop", "antialias", "scale", "mean",
         "std", "color", "layout", "pad", "exif_orientation", "jpeg_dct_scaling", "max_pixels"}));
    Recipe r;
    if (doc.contains("preset")) {
      if (!doc["preset"].is_string())
        return rd.Fail("preset", "must be a preset name", doc["preset"]);
      int pw = 0, ph = 0;
      if (doc.contains("preset_width"))
        KILN_RETURN_IF_ERROR(rd.Int(doc, "preset_width", "preset_width", &pw));
      if (doc.contains("preset_height"))
        KILN_RETURN_IF_ERROR(rd.Int(doc, "preset_height", "preset_height", &ph));
      auto preset = PresetRecipe(doc["preset"].get<std::string>(), pw, ph);
      if (!preset.ok())
        return InvalidArgument("recipe '" + origin + "': " + preset.status().message());
      r = std::move(preset).value();
    }
    r.name = origin;
    NormalizeSpec& n = r.normalize;
    if (doc.contains("resize")) KILN_RETURN_IF_ERROR(rd.Resize(doc["resize"], &r));
    if (doc.contains("crop")) KILN_RETURN_IF_ERROR(rd.Crop(doc["crop"], &r));
    if (doc.contains("antialias"))
      KILN_RETURN_IF_ERROR(rd.Bool(doc["antialias"], "antialias", &r.antialias));
    if (doc.contains("scale")) KILN_RETURN_IF_ERROR(rd.Number(doc["scale"], "scale", &n.scale));
    if (doc.contains("mean")) KILN_RETURN_IF_ERROR(rd.Triple(doc["mean"], "mean", n.mean));
    if (doc.contains("std")) KILN_RETURN_IF_ERROR(rd.Triple(doc["std"], "std", n.std));
    if (doc.contains("pad")) KILN_RETURN_IF_ERROR(rd.Triple(doc["pad"], "pad", n.pad));
    if (doc.contains("color")) {
      const json& v = doc["color"];
      const std::string s = v.is_string() ? v.get<std::string>() : "";
      if (s == "rgb" || s == "RGB") {
        n.channels = 3, n.order = ChannelOrder::kRGB;
      } else if (s == "bgr" || s == "BGR") {
        n.channels = 3, n.order = ChannelOrder::kBGR;
      } else if (s == "gray" || s == "GRAY") {
        n.channels = 1, n.order = ChannelOrder::kRGB;
      } else {
        return rd.Fail("color", "must be \"rgb\", \"bgr\" or \"gray\"", v);
      }
    }
    if (doc.contains("layout")) {
      const json& v = doc["layout"];
      const std::string s = v.is_string() ? v.get<std::string>() : "";
      if (s == "NCHW" || s == "nchw") {
        n.layout = Layout::kNCHW;
      } else if (s == "NHWC" || s == "nhwc") {
        n.layout = Layout::kNHWC;
      } else {
        return rd.Fail("layout", "must be \"NCHW\" or \"NHWC\"", v);
      }
    }
    if (doc.contains("exif_orientation"))
      KILN_RETURN_IF_ERROR(
          rd.Bool(doc["exif_orientation"], "exif_orientation", &r.apply_exif_orientation));
    if (doc.contains("jpeg_dct_scaling"))
      KILN_RETURN_IF_ERROR(
          rd.Bool(doc["jpeg_dct_scaling"], "jpeg_dct_scaling", &r.jpeg_dct_scaling));
    if (doc.contains("max_pixels")) {
      const json& v = doc["max_pixels"];
      if (!v.is_number_integer() || v.get<int64_t>() <= 0)
        return rd.Fail("max_pixels", "must be a positive integer", v);
      r.max_pixels = v.get<int64_t>();
    }
    KILN_RETURN_IF_ERROR(ValidateRecipe(r));
    return r;
  } catch (const std::exception& e) {  // nlohmann type errors we did not foresee
    return InvalidArgument("recipe '" + origin + "': " + e.what());
  }
}

StatusOr<Recipe> LoadRecipeFile(const std::string& path) {
  std::vector<uint8_t> bytes;
  KILN_RETURN_IF_ERROR(ReadFileBytes(path, &bytes));
  return ParseRecipeJson(std::string(bytes.begin(), bytes.end()), path);
}

std::string RecipeToJson(const Recipe& r) {
  const GeometrySpec& g = r.geometry;
  const NormalizeSpec& n = r.normalize;
  json j;
  json resize = {{"mode", ModeName(g.mode)}};
  if (g.mode == ResizeMode::kShorterSide) resize["size"] = g.size;
  if (g.mode == ResizeMode::kExact || g.mode == ResizeMode::kLetterbox ||
      g.mode == ResizeMode::kFixedHeight)
    resize["width"] = g.width, resize["height"] = g.height;
  j["resize"] = resize;
  j["crop"] = g.crop_width > 0 ? json{{"width", g.crop_width}, {"height", g.crop_height}} : json();
  j["antialias"] = r.antialias;
  j["scale"] = n.scale;
  j["mean"] = {n.mean[0], n.mean[1], n.mean[2]};
  j["std"] = {n.std[0], n.std[1], n.std[2]};
  j["pad"] = {n.pad[0], n.pad[1], n.pad[2]};
  j["color"] = n.channels == 1 ? "gray" : n.order == ChannelOrder::kBGR ? "bgr" : "rgb";
  j["layout"] = n.layout == Layout::kNCHW ? "NCHW" : "NHWC";
  j["exif_orientation"] = r.apply_exif_orientation;
  j["jpeg_dct_scaling"] = r.jpeg_dct_scaling;
  j["max_pixels"] = r.max_pixels;
  return j.dump(2);
}

DecodeOptions DecodeOptionsFor(const Recipe& r) {
  DecodeOptions o;
  o.max_pixels = r.max_pixels;
  o.apply_exif_orientation = r.apply_exif_orientation;
  if (!r.jpeg_dct_scaling) return o;
  const GeometrySpec& g = r.geometry;
  switch (g.mode) {
    case ResizeMode::kNone:
      break;
    case ResizeMode::kShorterSide:
      o.min_width = o.min_height = g.size;
      break;
    case ResizeMode::kExact:
    case ResizeMode::kLetterbox:
      o.min_width = g.width, o.min_height = g.height;
      break;
    case ResizeMode::kFixedHeight:
      o.min_height = g.height;
      break;
  }
  return o;
}

Preprocessor::Preprocessor(const Recipe& recipe)
    : recipe_(recipe), decode_options_(DecodeOptionsFor(recipe)) {
  FixedCanvasSize(recipe.geometry, &out_width_, &out_height_);
}

StatusOr<std::unique_ptr<Preprocessor>> Preprocessor::Create(const Recipe& recipe) {
  KILN_RETURN_IF_ERROR(ValidateRecipe(recipe));
  return std::unique_ptr<Preprocessor>(new Preprocessor(recipe));
}

Shape Preprocessor::OutputShape() const {
  const int64_t c = recipe_.normalize.channels;
  if (recipe_.normalize.layout == Layout::kNCHW) return {c, out_height_, out_width_};
  return {out_height_, out_width_, c};
}

int64_t Preprocessor::OutputElements() const {
  return int64_t{recipe_.normalize.channels} * out_height_ * out_width_;
}

Status Preprocessor::RunDecoded(const Image& image, float* dst) {
  const auto t0 = std::chrono::steady_clock::now();
  KILN_ASSIGN_OR_RETURN(Geometry g, ComputeGeometry(recipe_.geometry, image.width, image.height));
  Status s = transformer_.Run(image, g, recipe_.antialias, recipe_.normalize, dst);
  stats_.transform_s += SecondsSince(t0);
  return s;
}

Status Preprocessor::Run(std::span<const uint8_t> bytes, float* dst, DecodeInfo* info) {
  const auto t0 = std::chrono::steady_clock::now();
  Status s = decoder_.Decode(bytes, decode_options_, &image_, info);
  stats_.decode_s += SecondsSince(t0);
  if (s.ok()) s = RunDecoded(image_, dst);
  ++(s.ok() ? stats_.images_ok : stats_.images_failed);
  return s;
}

Status Preprocessor::RunFile(const std::string& path, float* dst, DecodeInfo* info) {
  const auto t0 = std::chrono::steady_clock::now();
  Status s = ReadFileBytes(path, &file_);
  stats_.read_s += SecondsSince(t0);
  if (s.ok()) {
    s = Run(file_, dst, info);
  } else {
    ++stats_.images_failed;
  }
  if (!s.ok()) s.AddContext("while reading " + path);
  return s;
}

StatusOr<Recipe> RecipeForInput(const std::string& spec, const std::vector<int64_t>& dims) {
  const int64_t h = dims.size() == 4 ? dims[2] : -1;
  const int64_t w = dims.size() == 4 ? dims[3] : -1;
  if (spec.empty()) {
    if (dims.size() == 4 && dims[1] == 3 && h > 0 && w > 0)
      return PresetRecipe("torchvision-imagenet", static_cast<int>(w), static_cast<int>(h));
    std::string shape = "[";
    for (size_t i = 0; i < dims.size(); ++i)
      shape += (i ? "," : "") + (dims[i] < 0 ? std::string("?") : std::to_string(dims[i]));
    return InvalidArgument("an input of shape " + shape +
                           "] is not a fixed-size RGB image; give --recipe PRESET or FILE.json");
  }
  if (spec.size() > 5 && spec.compare(spec.size() - 5, 5, ".json") == 0)
    return LoadRecipeFile(spec);
  if (h > 0 && w > 0) {
    auto r = PresetRecipe(spec, static_cast<int>(w), static_cast<int>(h));
    if (r.ok()) return r;
  }
  return PresetRecipe(spec);
}

}  // namespace kiln::data
