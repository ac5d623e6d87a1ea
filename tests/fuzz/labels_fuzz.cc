// libFuzzer target for the labels file of image jobs (`kiln run --images --labels FILE`,
// data/records.cc's ParseLabels and ReadLabels): the bytes are the file. Invariants (a trap when
// broken): the labels are the file's lines as std::getline gives them, less one '\r' ending each
// and the empty lines at the end, and at least one; ReadLabels on the same bytes in a file gives
// the same; a record naming the first and last labels prints as a line RecordPath reads the path
// back from (JSON Lines and CSV), and its JSON holds each label that is valid UTF-8 unchanged.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#include "data/records.h"
#include "fuzz_text.h"

namespace {

namespace fs = std::filesystem;
using kiln::data::RecordFormat;

std::string TempPath() {
  static const std::string dir = [] {
    std::error_code ec;
    if (fs::is_directory("/dev/shm", ec) && ::access("/dev/shm", W_OK) == 0)
      return std::string("/dev/shm");
    return fs::temp_directory_path(ec).string();
  }();
  return dir + "/kiln_labels_fuzz_" + std::to_string(::getpid()) + ".txt";
}

// The labels reader as it was before ParseLabels: std::getline over the file.
std::vector<std::string> GetlineLabels(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> labels;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    labels.push_back(line);
  }
  while (!labels.empty() && labels.back().empty()) labels.pop_back();
  return labels;
}

void CheckRecord(const std::vector<std::string>& labels) {
  kiln::data::Record r;
  r.path = "imgs/a.jpg";
  r.top_k = {0, static_cast<int64_t>(labels.size()) - 1};
  r.scores = {0.5f, 0.25f};
  r.labels = {labels.front(), labels.back()};
  for (RecordFormat format : {RecordFormat::kJsonl, RecordFormat::kCsv}) {
    std::string line = kiln::data::FormatRecord(r, format);
    if (line.empty() || line.back() != '\n') __builtin_trap();
    line.pop_back();
    if (format == RecordFormat::kJsonl && line.find('\n') != std::string::npos) __builtin_trap();
    std::string path;
    if (!kiln::data::RecordPath(line, format, &path) || path != r.path) __builtin_trap();
    if (format != RecordFormat::kJsonl) continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j["labels"].is_array() || j["labels"].size() != 2) __builtin_trap();
    for (size_t k = 0; k < 2; ++k)
      if (kiln::fuzz::IsUtf8(r.labels[k]) && j["labels"][k] != r.labels[k]) __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto labels = kiln::data::ParseLabels(text, "fuzz.txt");
  const std::vector<std::string> expected = GetlineLabels(text);
  if (labels.ok() != !expected.empty()) __builtin_trap();
  if (!labels.ok()) {
    if (labels.status().message().find("fuzz.txt") == std::string::npos) __builtin_trap();
  } else {
    if (*labels != expected || labels->back().empty()) __builtin_trap();
    CheckRecord(*labels);
  }
  // The file entry point, on the same bytes.
  const std::string path = TempPath();
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return 0;
  const bool written = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) == 0 && written) {
    auto from_file = kiln::data::ReadLabels(path);
    if (from_file.ok() != labels.ok() || (from_file.ok() && *from_file != *labels))
      __builtin_trap();
  }
  std::remove(path.c_str());
  return 0;
}
