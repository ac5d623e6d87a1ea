// For the text-file fuzz targets (labels_fuzz.cc).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace kiln::fuzz {

// True when `s` is valid UTF-8: what the records' JSON writer passes through unchanged.
inline bool IsUtf8(const std::string& s) {
  try {
    (void)nlohmann::json(s).dump();
    return true;
  } catch (const nlohmann::json::exception&) {
    return false;
  }
}

}  // namespace kiln::fuzz
