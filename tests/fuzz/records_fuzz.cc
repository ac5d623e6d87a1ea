// libFuzzer target for the records files `kiln run --images --resume` reads back
// (data/records.cc): JSON Lines and CSV. The first byte picks the format (even: .jsonl, odd: .csv);
// the rest is the file. Invariants (a trap when broken):
// - a path RecordPath takes from a line comes back from the record FormatRecord writes for it;
// - RecordWriter::Open(resume) on the file either fails with an error naming the file, or keeps
//   exactly the complete lines (the partial last one cut off) and no more done paths than lines;
// - a record for a path made of the same bytes, written by a fresh writer and resumed, is done,
//   whatever the bytes (JSONL keeps a path that is not UTF-8 in "path_hex").
// The files live in /dev/shm when it exists (its fsync costs nothing), else the temp folder.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <system_error>

#include "data/records.h"

namespace {

namespace fs = std::filesystem;
using kiln::data::RecordFormat;

std::string TempPath(const char* ext) {
  static const std::string dir = [] {
    std::error_code ec;
    if (fs::is_directory("/dev/shm", ec) && ::access("/dev/shm", W_OK) == 0)
      return std::string("/dev/shm");
    return fs::temp_directory_path(ec).string();
  }();
  return dir + "/kiln_records_fuzz_" + std::to_string(::getpid()) + ext;
}

bool WriteFile(const std::string& path, const std::string& bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return false;
  const bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  return std::fclose(f) == 0 && ok;
}

void CheckLines(const std::string& text, RecordFormat format) {
  for (size_t start = 0; start < text.size();) {
    const size_t end = text.find('\n', start);
    if (end == std::string::npos) break;
    std::string path, again;
    if (kiln::data::RecordPath(text.substr(start, end - start), format, &path)) {
      kiln::data::Record r;
      r.path = path;
      std::string line = kiln::data::FormatRecord(r, format);
      line.pop_back();
      if (!kiln::data::RecordPath(line, format, &again) || again != path) __builtin_trap();
    }
    start = end + 1;
  }
}

void CheckResume(const std::string& text, RecordFormat format, const std::string& path) {
  if (!WriteFile(path, text)) return;
  size_t lines = 0;
  for (char c : text) lines += c == '\n';
  const size_t keep = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
  {
    auto w = kiln::data::RecordWriter::Open(path, /*resume=*/true);
    if (!w.ok()) {
      if (w.status().message().find(path) == std::string::npos) __builtin_trap();
      return;
    }
    if ((*w)->done().size() > lines) __builtin_trap();
  }
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  // A CSV file with no complete line gets the header written.
  if (!ec && (keep > 0 || format == RecordFormat::kJsonl) && size != keep) __builtin_trap();
}

void CheckRoundTrip(const std::string& bytes, RecordFormat format, const std::string& path) {
  kiln::data::Record r;
  r.path = bytes.substr(0, 256);
  if (bytes.size() % 3 == 0) {
    r.error = "InvalidArgument: " + bytes.substr(0, 16);
  } else {
    r.top_k = {2, 0};
    r.scores = {0.75f, 0.125f};
    if (bytes.size() % 3 == 1) r.labels = {"a,\"b\"", "c;d"};
  }
  {
    auto w = kiln::data::RecordWriter::Open(path, /*resume=*/false);
    if (!w.ok()) return;
    (*w)->Add(r);
    if (!(*w)->Flush().ok()) return;
  }
  auto w = kiln::data::RecordWriter::Open(path, /*resume=*/true);
  if (!w.ok() || (*w)->done().count(r.path) != 1) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const RecordFormat format = (data[0] & 1) ? RecordFormat::kCsv : RecordFormat::kJsonl;
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  CheckLines(text, format);
  const std::string path = TempPath(format == RecordFormat::kCsv ? ".csv" : ".jsonl");
  CheckResume(text, format, path);
  CheckRoundTrip(text, format, path);
  std::remove(path.c_str());
  return 0;
}
