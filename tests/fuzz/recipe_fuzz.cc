// libFuzzer target for recipe files (`--recipe FILE.json` of kiln run/quantize, kiln.ImageDecoder's
// recipe, kiln.ray) and labels-style text: data/recipe.cc's JSON parser and validation, the JSON
// form's round trip, and the geometry and normalization a valid recipe asks for, run on a small
// fixed image. Invariants (a trap when broken): a recipe that validates prints as JSON that parses
// back to a recipe printing the same; its transform writes finite floats.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "data/decode.h"
#include "data/recipe.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto r = kiln::data::ParseRecipeJson(text, "fuzz.json");
  if (!r.ok() || !kiln::data::ValidateRecipe(*r).ok()) return 0;
  const std::string printed = kiln::data::RecipeToJson(*r);
  auto again = kiln::data::ParseRecipeJson(printed, "printed.json");
  if (!again.ok()) __builtin_trap();
  again->name = r->name;
  if (kiln::data::RecipeToJson(*again) != printed) __builtin_trap();

  auto pre = kiln::data::Preprocessor::Create(*r);
  if (!pre.ok()) return 0;
  // The output a batch slot holds; recipes asking for more than 64 MiB per image are legal but
  // beyond what this target runs.
  const int64_t elements = (*pre)->OutputElements();
  if (elements <= 0 || elements > (16 << 20)) return 0;
  kiln::data::Image img;
  const int channels = (size % 2) ? 3 : 1;
  img.Reset(7 + static_cast<int>(size % 13), 5 + static_cast<int>(size % 11), channels);
  for (size_t i = 0; i < img.pixels.size(); ++i) img.pixels[i] = static_cast<uint8_t>(i * 37);
  std::vector<float> out(static_cast<size_t>(elements));
  if ((*pre)->RunDecoded(img, out.data()).ok())
    for (float v : out)
      if (!std::isfinite(v)) __builtin_trap();
  return 0;
}
