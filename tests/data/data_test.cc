// Data pipeline tests: decode, transform and recipes against PIL / torchvision references.
//
// make_images.py (Debian python3-pil, -numpy, -torch, -torchvision; photos from python3-skimage)
// writes images and .npy references into a temp dir once per run; each test compares kiln's output
// with them and prints the measured differences. Tolerances: PNG and JPEG pixels exact (same
// libjpeg-turbo, same IDCT and upsampling as PIL), resize exact vs PIL (stated bound: 1 level),
// torchvision recipe 1e-5 in normalized units (1 pixel level is 0.017 there).
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "core/npy.h"
#include "data/decode.h"
#include "data/recipe.h"
#include "data/transform.h"

namespace kiln::data {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

fs::path g_dir;
json g_cases;

class CorpusEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    g_dir = fs::temp_directory_path() / ("kiln_data_test_" + std::to_string(::getpid()));
    fs::create_directories(g_dir);
    const char* py = std::getenv("KILN_TEST_PYTHON");
    std::string cmd = std::string(py != nullptr ? py : "/usr/bin/python3") + " " +
                      KILN_SOURCE_DIR "/tests/data/make_images.py " + g_dir.string() + " --big > " +
                      (g_dir / "make_images.log").string() + " 2>&1";
    if (std::system(cmd.c_str()) != 0) {
      std::ifstream log(g_dir / "make_images.log");
      std::string text((std::istreambuf_iterator<char>(log)), {});
      FAIL() << "generating the test corpus failed (needs python3-pil, -numpy, -torchvision; "
                "bash scripts/setup.sh installs them): "
             << cmd << "\n"
             << text;
    }
    std::ifstream f(g_dir / "cases.json");
    g_cases = json::parse(f);
  }
  void TearDown() override {
    std::error_code ec;
    if (std::getenv("KILN_KEEP_TEST_DATA") == nullptr) fs::remove_all(g_dir, ec);
  }
};
const auto* const g_env = ::testing::AddGlobalTestEnvironment(new CorpusEnvironment);

// The cases of one kind from cases.json. A loop over an empty list checks nothing, so no cases
// (make_images.py wrote none, or the key changed) is a failure, not a pass.
const json& Cases(const char* kind) {
  const json& c = g_cases[kind];
  if (!c.is_array() || c.empty())
    ADD_FAILURE() << "cases.json has no '" << kind
                  << "' cases: tests/data/make_images.py wrote none";
  return c;
}

std::vector<uint8_t> Bytes(const std::string& name) {
  std::vector<uint8_t> b;
  Status s = ReadFileBytes((g_dir / name).string(), &b);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return b;
}

Tensor Npy(const std::string& name) {
  auto t = ReadNpyFile((g_dir / name).string());
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return t.ok() ? *t : Tensor();
}

// Max |image - expected| where expected is uint8 (h,w) or (h,w,c), or float32 of the same shape.
double ImageDiff(const Image& img, const Tensor& expected, std::string* why) {
  const Shape& s = expected.shape();
  const int c = s.size() == 3 ? static_cast<int>(s[2]) : 1;
  if (s.size() < 2 || img.height != s[0] || img.width != s[1] || img.channels != c) {
    *why = "got " + std::to_string(img.width) + "x" + std::to_string(img.height) + "x" +
           std::to_string(img.channels) + ", expected (h,w,c) " + ShapeToString(s);
    return std::numeric_limits<double>::infinity();
  }
  double diff = 0;
  for (size_t i = 0; i < img.pixels.size(); ++i) {
    double e = expected.dtype() == DataType::kUInt8 ? expected.data<uint8_t>()[i]
                                                    : expected.data<float>()[i];
    diff = std::max(diff, std::abs(img.pixels[i] - e));
  }
  return diff;
}

// A loop over an empty case list would check nothing: asking for a kind make_images.py did not
// write is a failure.
TEST(CasesTest, AnEmptyCaseListFails) {
  EXPECT_NONFATAL_FAILURE(Cases("no_such_kind"), "has no 'no_such_kind' cases");
}

TEST(DecodeTest, PixelsMatchPil) {
  ImageDecoder decoder;  // one decoder for every file: buffers are reused
  Image img;
  for (const auto& c : Cases("decode")) {
    const std::string file = c["file"];
    Status s = decoder.Decode(Bytes(file), {}, &img);
    ASSERT_TRUE(s.ok()) << file << ": " << s.ToString();
    std::string why;
    double diff = ImageDiff(img, Npy(c["expected"]), &why);
    std::printf("  %-22s %4dx%-4d c=%d max|diff|=%g %s\n", file.c_str(), img.width, img.height,
                img.channels, diff, std::string(c["note"]).c_str());
    EXPECT_LE(diff, c["tolerance"].get<double>()) << file << " " << why;
  }
}

TEST(DecodeTest, ExifOrientationMatchesPilExifTranspose) {
  ImageDecoder decoder;
  Image img;
  DecodeInfo info;
  for (const auto& c : Cases("exif")) {
    const std::string file = c["file"];
    Status s = decoder.Decode(Bytes(file), {}, &img, &info);
    ASSERT_TRUE(s.ok()) << file << ": " << s.ToString();
    EXPECT_EQ(info.orientation, c["orientation"].get<int>()) << file;
    std::string why;
    EXPECT_EQ(ImageDiff(img, Npy(c["expected"]), &why), 0) << file << " " << why;
  }
  // Turned off, the stored orientation comes back (what torchvision's loader sees).
  DecodeOptions off;
  off.apply_exif_orientation = false;
  ASSERT_TRUE(decoder.Decode(Bytes("exif6.jpg"), off, &img, &info).ok());
  EXPECT_EQ(info.orientation, 1);
  EXPECT_EQ(img.width, 48);
  EXPECT_EQ(img.height, 32);
}

TEST(DecodeTest, DctScalingMatchesPilDraft) {
  ImageDecoder decoder;
  Image img;
  DecodeInfo info;
  for (const auto& c : Cases("scaled")) {
    DecodeOptions o;
    o.min_width = c["min_width"];
    o.min_height = c["min_height"];
    const std::string file = c["file"];
    ASSERT_TRUE(decoder.Decode(Bytes(file), o, &img, &info).ok()) << file;
    std::string why;
    double diff = ImageDiff(img, Npy(c["expected"]), &why);
    std::printf("  %s min %dx%d -> scale %d/%d %dx%d max|diff|=%g\n", file.c_str(), o.min_width,
                o.min_height, info.scale_num, info.scale_denom, img.width, img.height, diff);
    EXPECT_EQ(diff, 0) << file << " " << why;
    EXPECT_GE(img.width, o.min_width);
    EXPECT_GE(img.height, o.min_height);
  }
}

TEST(DecodeTest, BadInputGivesClearErrors) {
  ImageDecoder decoder;
  Image img;
  for (const auto& c : Cases("bad")) {
    const std::string file = c["file"];
    Status s = decoder.Decode(Bytes(file), {}, &img);
    ASSERT_FALSE(s.ok()) << file << " decoded without error";
    std::printf("  %-24s %s\n", file.c_str(), s.ToString().c_str());
    EXPECT_EQ(StatusCodeName(s.code()), c["code"].get<std::string>()) << s.ToString();
    EXPECT_NE(s.message().find(c["message"].get<std::string>()), std::string::npos)
        << file << ": " << s.ToString();
  }
  // The same decoder still decodes good files after all those errors (libjpeg-turbo 2.1 leaves
  // its handle mid-header after a header error; the decoder replaces it).
  ASSERT_TRUE(decoder.Decode(Bytes("ycc_s2.jpg"), {}, &img).ok());
  std::string why;
  EXPECT_EQ(ImageDiff(img, Npy("ycc_s2.jpg.npy"), &why), 0) << why;
  // The bomb is rejected before allocation: the output buffer never grew.
  Image fresh;
  ASSERT_FALSE(decoder.Decode(Bytes("bomb.png"), {}, &fresh).ok());
  EXPECT_EQ(fresh.pixels.capacity(), 0u);
  // A missing file names the path.
  auto pre = Preprocessor::Create(*PresetRecipe("torchvision-imagenet"));
  ASSERT_TRUE(pre.ok());
  std::vector<float> out((*pre)->OutputElements());
  Status s = (*pre)->RunFile((g_dir / "missing.jpg").string(), out.data());
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.ToString().find("missing.jpg"), std::string::npos) << s.ToString();
  EXPECT_EQ((*pre)->stats().images_failed, 1);
  EXPECT_EQ((*pre)->stats().images_ok, 0);
}

TEST(DecodeTest, RecoverableJpegCorruptionIsAWarningUnlessStrict) {
  std::vector<uint8_t> b = Bytes("ycc_s2.jpg");
  ASSERT_GE(b.size(), 4u);
  std::vector<uint8_t> junk(300, 0x11);
  b.insert(b.end() - 2, junk.begin(), junk.end());  // extraneous bytes before EOI
  ImageDecoder decoder;
  Image img;
  DecodeInfo info;
  ASSERT_TRUE(decoder.Decode(b, {}, &img, &info).ok());
  EXPECT_NE(info.warning.find("extraneous"), std::string::npos) << info.warning;
  std::string why;
  EXPECT_EQ(ImageDiff(img, Npy("ycc_s2.jpg.npy"), &why), 0) << why;
  DecodeOptions strict;
  strict.strict = true;
  Status s = decoder.Decode(b, strict, &img);
  EXPECT_FALSE(s.ok());
  std::printf("  strict: %s\n", s.ToString().c_str());
}

// Random byte flips, truncations and overwritten runs: every decode returns a Status (run under
// ASan/UBSan to check memory safety of the libjpeg/libpng error paths).
TEST(DecodeTest, MutatedFilesNeverCrash) {
  std::mt19937 rng(7);
  ImageDecoder decoder;
  Image img;
  int decoded = 0, failed = 0;
  for (const char* file : {"ycc_s2.jpg", "progressive.jpg", "cmyk.jpg", "gray.jpg", "exif6.jpg",
                           "rgb_interlaced.png", "palette.png", "rgb16.png", "exif6.png"}) {
    const std::vector<uint8_t> orig = Bytes(file);
    for (int i = 0; i < 300; ++i) {
      std::vector<uint8_t> b = orig;
      auto pos = [&] { return std::uniform_int_distribution<size_t>(0, b.size() - 1)(rng); };
      if (i % 3 == 0) {
        for (int k = 1 + i % 8; k > 0; --k) b[pos()] ^= static_cast<uint8_t>(1 + rng() % 255);
      } else if (i % 3 == 1) {
        b.resize(pos());
      } else {
        for (size_t p = pos(), n = 1 + rng() % 64; n > 0 && p < b.size(); --n, ++p)
          b[p] = static_cast<uint8_t>(rng());
      }
      DecodeOptions o;
      o.strict = i % 2 == 0;
      o.min_width = i % 5 == 0 ? 20 : 0;
      Status s = decoder.Decode(b, o, &img);
      if (s.ok()) {
        ++decoded;
        EXPECT_EQ(img.pixels.size(), img.stride() * img.height);
      } else {
        ++failed;
        EXPECT_FALSE(s.message().empty());
      }
    }
  }
  std::printf("  %d mutated files decoded, %d rejected\n", decoded, failed);
}

TEST(TransformTest, ResizeMatchesPil) {
  Transformer tf;
  ImageDecoder decoder;
  Image src, out;
  double worst_aa = 0, worst_plain = 0;
  for (const auto& c : Cases("resize")) {
    const std::string file = c["file"];
    ASSERT_TRUE(decoder.Decode(Bytes(file), {}, &src).ok());
    const bool aa = c["antialias"];
    ASSERT_TRUE(tf.Resize(src, c["width"], c["height"], aa, &out).ok());
    std::string why;
    double diff = ImageDiff(out, Npy(c["expected"]), &why);
    std::printf("  %s %dx%d -> %dx%d antialias=%d max|diff|=%g\n", file.c_str(), src.width,
                src.height, out.width, out.height, aa, diff);
    (aa ? worst_aa : worst_plain) = std::max(aa ? worst_aa : worst_plain, diff);
    // Antialiased: PIL bit for bit. Plain bilinear vs torch's float result: rounding only.
    EXPECT_LE(diff, aa ? 0.0 : 1.0) << file << " " << why;
  }
  std::printf("  worst: vs PIL %g, vs torch bilinear (no antialias) %g\n", worst_aa, worst_plain);
}

StatusOr<Recipe> TestRecipe(const std::string& name) {
  if (name == "gray64x48")
    return ParseRecipeJson(R"({"resize": {"mode": "exact", "width": 64, "height": 48},
                               "color": "gray"})",
                           name);
  if (name == "letterbox128")
    return ParseRecipeJson(R"({"resize": {"mode": "letterbox", "width": 128, "height": 128},
                               "pad": 114})",
                           name);
  if (name == "paddleocr-aa")
    return ParseRecipeJson(R"({"preset": "paddleocr",
                                                        "antialias": true})",
                           name);
  return PresetRecipe(name);
}

// Runs a preprocessor on a file into a guarded buffer: NaN-filled, with sentinels after it.
double RunAndCompare(Preprocessor* pre, const std::string& file, const Tensor& expected,
                     double* mean_diff) {
  const int64_t n = pre->OutputElements();
  EXPECT_EQ(NumElements(pre->OutputShape()), n);
  EXPECT_EQ(expected.numel(), n) << file << " expected " << ShapeToString(expected.shape());
  std::vector<float> out(n + 16, std::numeric_limits<float>::quiet_NaN());
  for (int i = 0; i < 16; ++i) out[n + i] = 12345.f;
  Status s = pre->RunFile((g_dir / file).string(), out.data());
  EXPECT_TRUE(s.ok()) << s.ToString();
  for (int i = 0; i < 16; ++i) EXPECT_EQ(out[n + i], 12345.f) << "overrun at " << file;
  double diff = 0, sum = 0;
  for (int64_t i = 0; i < std::min(n, expected.numel()); ++i) {
    double d = std::abs(out[i] - expected.data<float>()[i]);
    if (std::isnan(d)) d = std::numeric_limits<double>::infinity();
    diff = std::max(diff, d);
    sum += d;
  }
  if (mean_diff != nullptr) *mean_diff = sum / n;
  return diff;
}

TEST(RecipeTest, MatchesTorchvisionAndPilReferences) {
  for (const auto& c : Cases("recipe")) {
    const std::string file = c["file"], name = c["recipe"];
    auto recipe = TestRecipe(name);
    ASSERT_TRUE(recipe.ok()) << recipe.status().ToString();
    auto pre = Preprocessor::Create(*recipe);
    ASSERT_TRUE(pre.ok()) << pre.status().ToString();
    double mean = 0;
    double diff = RunAndCompare(pre->get(), file, Npy(c["expected"]), &mean);
    std::printf("  %-26s %-20s max|diff|=%.3g mean=%.3g\n", file.c_str(), name.c_str(), diff, mean);
    EXPECT_LE(diff, c["tolerance"].get<double>()) << file << " " << name;
  }
}

double BestMs(int reps, const std::function<void()>& f) {
  double best = 1e9;
  for (int i = 0; i < reps; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(
        best,
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

// Camera-size JPEGs (4032x3024): DCT scaling's error against torchvision, and timings (printed,
// not asserted: the machine is shared).
TEST(RecipeTest, DctScalingOnCameraSizePhotos) {
  for (const std::string file : {"photo_coffee_4032.jpg", "photo_mosaic_4032.jpg"}) {
    if (!fs::exists(g_dir / file)) {
      // Under CI (KILN_REQUIRE_ALL=1 or CI=true) every check must run: scripts/setup.sh installs
      // it.
      const char* all = std::getenv("KILN_REQUIRE_ALL");
      const char* ci = std::getenv("CI");
      if ((all != nullptr && std::string(all) == "1") ||
          (ci != nullptr && std::string(ci) == "true"))
        FAIL() << file << " missing: python3-skimage not installed (scripts/setup.sh installs it)";
      GTEST_SKIP() << "python3-skimage not installed";
    }
    Tensor expected;
    for (const auto& c : Cases("recipe"))
      if (c["file"] == file) expected = Npy(c["expected"]);
    Recipe exact = *PresetRecipe("torchvision-imagenet"), fast = exact;
    fast.jpeg_dct_scaling = true;
    auto pre_exact = Preprocessor::Create(exact);
    auto pre_fast = Preprocessor::Create(fast);
    ASSERT_TRUE(pre_exact.ok() && pre_fast.ok());
    double mean = 0;
    double diff = RunAndCompare(pre_fast->get(), file, expected, &mean);
    // In pixel levels: normalized diff * std * 255 (std is 0.224 to 0.229).
    std::printf(
        "  %s DCT-scaled vs torchvision: max|diff|=%.3g (%.1f levels) mean=%.3g "
        "(%.2f levels)\n",
        file.c_str(), diff, diff * 0.229 * 255, mean, mean * 0.229 * 255);
    EXPECT_LE(mean * 0.229 * 255, 2.0);

    std::vector<uint8_t> bytes = Bytes(file);
    ImageDecoder decoder;
    Image img;
    DecodeInfo info;
    std::vector<float> out(3 * 224 * 224);
    for (int scaled = 0; scaled < 2; ++scaled) {
      DecodeOptions o;
      if (scaled) o.min_width = o.min_height = 256;
      double decode_ms =
          BestMs(5, [&] { ASSERT_TRUE(decoder.Decode(bytes, o, &img, &info).ok()); });
      Preprocessor* pre = scaled ? pre_fast->get() : pre_exact->get();
      double total_ms = BestMs(5, [&] { ASSERT_TRUE(pre->Run(bytes, out.data()).ok()); });
      std::printf(
          "  %s (%zu KB) %s: decode %.1f ms -> %dx%d (scale %d/%d); decode + "
          "torchvision-imagenet %.1f ms\n",
          file.c_str(), bytes.size() / 1024, scaled ? "DCT-scaled for 256" : "full size", decode_ms,
          img.width, img.height, info.scale_num, info.scale_denom, total_ms);
    }
  }
}

TEST(RecipeTest, LayoutAndChannelOrderArePermutations) {
  Recipe base = *PresetRecipe("torchvision-imagenet");
  Recipe nhwc = base, bgr = base;
  nhwc.normalize.layout = Layout::kNHWC;
  bgr.normalize.order = ChannelOrder::kBGR;
  std::swap(bgr.normalize.mean[0], bgr.normalize.mean[2]);
  std::swap(bgr.normalize.std[0], bgr.normalize.std[2]);
  std::vector<float> a(3 * 224 * 224), b(a.size()), c(a.size());
  ASSERT_TRUE(
      (*Preprocessor::Create(base))->RunFile((g_dir / "tv_500x375.jpg").string(), a.data()).ok());
  ASSERT_TRUE(
      (*Preprocessor::Create(nhwc))->RunFile((g_dir / "tv_500x375.jpg").string(), b.data()).ok());
  ASSERT_TRUE(
      (*Preprocessor::Create(bgr))->RunFile((g_dir / "tv_500x375.jpg").string(), c.data()).ok());
  const size_t plane = 224 * 224;
  for (size_t ch = 0; ch < 3; ++ch)
    for (size_t i = 0; i < plane; ++i) {
      ASSERT_EQ(a[ch * plane + i], b[i * 3 + ch]);
      ASSERT_EQ(a[ch * plane + i], c[(2 - ch) * plane + i]);
    }
}

TEST(RecipeTest, PresetsValidateAndRoundTripThroughJson) {
  for (const auto& name : RecipePresetNames()) {
    auto r = PresetRecipe(name, name == "scale01" ? 96 : 0, name == "scale01" ? 64 : 0);
    ASSERT_TRUE(r.ok()) << name << ": " << r.status().ToString();
    ASSERT_TRUE(ValidateRecipe(*r).ok()) << name;
    auto back = ParseRecipeJson(RecipeToJson(*r), name);
    ASSERT_TRUE(back.ok()) << name << ": " << back.status().ToString();
    EXPECT_EQ(RecipeToJson(*back), RecipeToJson(*r)) << name;
  }
  auto p = Preprocessor::Create(*PresetRecipe("paddleocr"));
  ASSERT_TRUE(p.ok());
  EXPECT_EQ((*p)->OutputShape(), (Shape{3, 48, 320}));
  EXPECT_FALSE(PresetRecipe("scale01").ok());
  EXPECT_FALSE(PresetRecipe("imagenet").ok());
}

TEST(RecipeTest, JsonErrorsNameTheFieldAndValue) {
  struct Case {
    const char* json;
    const char* message;
  } cases[] = {
      {"{", "not valid JSON"},
      {"[1]", "must be a JSON object"},
      {R"({"preset": "torchvision-imagenet", "std": [0.2, 0, 0.2]})",
       "'std[1]' must be non-zero; got 0"},
      {R"({"preset": "torchvision-imagenet", "mean": [0.2, 0.3]})", "field 'mean'"},
      {R"({"preset": "torchvision-imagenet", "layout": "CHW"})",
       "field 'layout' must be \"NCHW\" or \"NHWC\"; got \"CHW\""},
      {R"({"preset": "torchvision-imagenet", "colour": "rgb"})", "unknown field 'colour'"},
      {R"({"preset": "torchvision-imagenet", "resize": {"mode": "exact", "width": 3}})",
       "'resize.height' is required"},
      {R"({"preset": "torchvision-imagenet", "resize": {"mode": "stretch"}})",
       "field 'resize.mode'"},
      {R"({"preset": "torchvision-imagenet", "crop": {"width": -4, "height": 2}})",
       "field 'crop.width' must be an integer"},
      {R"({"preset": "torchvision-imagenet", "crop": null})",
       "output size would depend on each image"},
      {R"({"preset": "paddleocr", "crop": 32})", "crop cannot follow letterbox"},
      {R"({"preset": "torchvision-imagenet", "pad": 300})", "'pad[0]' must be a pixel value"},
      {R"({"preset": "scale01"})", "needs the model's input width and height"},
      {R"({"preset": "torchvision-imagenet", "antialias": "yes"})",
       "field 'antialias' must be true or false; got \"yes\""},
      {R"({"resize": {"mode": "shorter", "size": 256}})", "output size would depend"},
      // Found by kiln_recipe_fuzz: float32 outputs of inf.
      {R"({"preset": "torchvision-imagenet", "scale": 5.0e39})", "map pixel value 255 to 5.5"},
      {R"({"preset": "torchvision-imagenet", "std": [1e-300, 1, 1]})", "beyond float32's range"},
  };
  for (const auto& c : cases) {
    auto r = ParseRecipeJson(c.json, "m.json");
    ASSERT_FALSE(r.ok()) << c.json;
    EXPECT_NE(r.status().message().find(c.message), std::string::npos)
        << c.json << " -> " << r.status().ToString();
    EXPECT_NE(r.status().message().find("m.json"), std::string::npos) << r.status().ToString();
  }
  std::string path = (g_dir / "recipe.json").string();
  std::ofstream(path) << R"({"preset": "torchvision-imagenet", "layout": "NHWC"})";
  auto r = LoadRecipeFile(path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->normalize.layout, Layout::kNHWC);
  EXPECT_EQ(LoadRecipeFile((g_dir / "nope.json").string()).status().code(), StatusCode::kNotFound);
}

TEST(TransformTest, GeometryFollowsTheReferenceLibraries) {
  // torchvision Resize(256) on 500x375: short side 256, long int(256*500/375) = 341.
  GeometrySpec s{ResizeMode::kShorterSide, 256, 0, 0, 224, 224};
  Geometry g = *ComputeGeometry(s, 500, 375);
  EXPECT_EQ(g.resize_width, 341);
  EXPECT_EQ(g.resize_height, 256);
  EXPECT_EQ(g.window_x, 58);  // round(117 / 2) = round(58.5) = 58, half to even
  EXPECT_EQ(g.window_y, 16);
  // A crop larger than the image pads (torchvision CenterCrop pads with 0 first).
  GeometrySpec small{ResizeMode::kNone, 0, 0, 0, 8, 8};
  g = *ComputeGeometry(small, 5, 10);
  EXPECT_EQ(g.canvas_x, 1);  // (8 - 5) // 2
  EXPECT_EQ(g.window_width, 5);
  EXPECT_EQ(g.window_y, 1);
  // PaddleOCR: width min(320, ceil(48 * 300 / 50)) = 288.
  GeometrySpec ocr{ResizeMode::kFixedHeight, 0, 320, 48, 0, 0};
  g = *ComputeGeometry(ocr, 300, 50);
  EXPECT_EQ(g.resize_width, 288);
  g = *ComputeGeometry(ocr, 3000, 50);
  EXPECT_EQ(g.resize_width, 320);
  EXPECT_FALSE(ComputeGeometry(ocr, 0, 50).ok());
}

}  // namespace
}  // namespace kiln::data
