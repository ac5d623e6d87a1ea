// Plan cache: the choices planning makes by measurement (today: --tune's kernel variants, e.g. a
// 1x1 convolution run as a matmul), stored on disk so a later process planning the same model,
// input shapes and options on the same CPU/device with the same kiln reuses them instead of
// timing again. (Caching the optimized graph itself was measured slower than re-parsing and
// re-optimizing; see the README.)
//
// One file per key, `<dir>/<16 hex digits>.kplan`: the line "kiln plan cache 1", the key text, a
// line "--", then one "<node name>\t<variant>" line per prepared node. The key holds the model's
// content hash and size, the input shapes, the options that change planning, the backend and its
// device, the CPU model, and the kiln build (its GNU build-id) and oneDNN version. A file whose key
// differs is never used (it is replaced), and an unreadable or malformed file is ignored with a
// warning in the status. Writes go to a temporary file renamed into place.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/options.h"
#include "kiln/tensor.h"

namespace kiln::runtime {

// 64-bit content hash (word-at-a-time multiply-xorshift; not cryptographic), 16 hex digits.
std::string ContentHash(std::string_view bytes);

// The GNU build-id of the running executable, or "" when it has none.
std::string BuildId();

// Node name -> the variant its kernel chose ("" for the default).
using PlanChoices = std::map<std::string, std::string>;

std::string PlanCacheKey(const std::string& model_hash, const std::vector<Shape>& input_shapes,
                         const SessionOptions& options, const std::string& device,
                         const std::string& library_versions);

struct PlanCacheLookupResult {
  bool hit = false;
  PlanChoices choices;
  std::string status;  // "hit", "miss", "stale (key differs)", "corrupt (...): ignored"
};
PlanCacheLookupResult PlanCacheLookup(const std::string& dir, const std::string& key);
Status PlanCacheStore(const std::string& dir, const std::string& key, const PlanChoices& choices);

}  // namespace kiln::runtime
