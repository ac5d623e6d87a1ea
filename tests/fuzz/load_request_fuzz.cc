// libFuzzer target for the body of Triton's repository load/unload request (`POST
// v2/repository/models/{m}/load`, src/serving/kserve.cc's CheckLoadRequestBody): the bytes are the
// body. Invariants (a trap when broken): the body is accepted exactly when it is empty, or a JSON
// object whose "parameters", if present, is an object without a "config" or "file:..." key; a
// refusal is InvalidArgument, or Unsupported naming the refused key; the error document the HTTP
// front end answers with parses as JSON and carries the message.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "serving/kserve.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  const kiln::Status s = kiln::serving::CheckLoadRequestBody(body);
  // The oracle: the rule written out again on nlohmann's own parse.
  bool want_ok = body.empty();
  std::string refused_key;
  if (!body.empty()) {
    const nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
    if (!j.is_discarded() && j.is_object()) {
      auto p = j.find("parameters");
      want_ok = p == j.end() || p->is_object();
      if (p != j.end() && p->is_object())
        for (const auto& [key, value] : p->items())
          if (refused_key.empty() && (key == "config" || key.rfind("file:", 0) == 0)) {
            refused_key = key;
            want_ok = false;
          }
    }
  }
  if (s.ok() != want_ok) __builtin_trap();
  if (s.ok()) return 0;
  if (s.message().empty()) __builtin_trap();
  if (!refused_key.empty()) {
    if (s.code() != kiln::StatusCode::kUnsupported) __builtin_trap();
    if (s.message().find("'" + refused_key + "'") == std::string::npos) __builtin_trap();
  } else if (s.code() != kiln::StatusCode::kInvalidArgument) {
    __builtin_trap();
  }
  const nlohmann::json doc =
      nlohmann::json::parse(kiln::serving::ErrorJson(s.message()), nullptr, false);
  if (doc.is_discarded() || doc.value("error", std::string()) != s.message()) __builtin_trap();
  return 0;
}
