// Job records: JSONL / CSV formatting, the appending writer and --resume (see records.h).
#include "data/records.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace kiln::data {
namespace {

constexpr char kCsvHeader[] = "path,status,top_k,scores,labels,error";

std::string CsvField(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string ScoreText(float v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", static_cast<double>(v));
  return buf;
}

std::string Errno() { return std::strerror(errno); }

// True when the JSON writer passes `s` through unchanged (valid UTF-8); false when it would
// replace bytes (nlohmann's strict check, so the two agree by construction).
bool JsonKeeps(const std::string& s) {
  try {
    (void)nlohmann::json(s).dump();
    return true;
  } catch (const nlohmann::json::type_error&) {
    return false;
  }
}

constexpr char kHexDigits[] = "0123456789abcdef";

std::string Hex(const std::string& bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out += kHexDigits[c >> 4];
    out += kHexDigits[c & 15];
  }
  return out;
}

// The bytes of lower- or upper-case hex text; false when it is not hex of whole bytes.
bool Unhex(const std::string& hex, std::string* bytes) {
  auto digit = [](char c) {
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
  };
  if (hex.size() % 2 != 0) return false;
  bytes->clear();
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int hi = digit(hex[i]), lo = digit(hex[i + 1]);
    if (hi < 0 || lo < 0) return false;
    *bytes += static_cast<char>(hi * 16 + lo);
  }
  return true;
}

}  // namespace

StatusOr<RecordFormat> RecordFormatFor(const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (ext == ".jsonl" || ext == ".json" || ext == ".ndjson") return RecordFormat::kJsonl;
  if (ext == ".csv") return RecordFormat::kCsv;
  return InvalidArgument("--out '" + path + "': expected a .jsonl or .csv file");
}

std::string FormatRecord(const Record& r, RecordFormat format) {
  if (format == RecordFormat::kJsonl) {
    nlohmann::ordered_json j;
    j["path"] = r.path;
    // JSON text is Unicode: a path that is not UTF-8 (a Linux file name is any bytes) is written
    // with U+FFFD for its stray bytes, for reading, and exactly, as hex, for --resume.
    if (!JsonKeeps(r.path)) j["path_hex"] = Hex(r.path);
    if (!r.error.empty()) {
      j["error"] = r.error;
    } else if (!r.outputs.empty()) {
      j["outputs"] = r.outputs;
    } else {
      j["top_k"] = r.top_k;
      auto scores = nlohmann::ordered_json::array();
      for (float s : r.scores) scores.push_back(std::stod(ScoreText(s)));
      j["scores"] = scores;
      if (!r.labels.empty()) j["labels"] = r.labels;
    }
    return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
  }
  std::string top, scores, labels;
  for (size_t i = 0; i < r.top_k.size(); ++i) {
    if (i > 0) {
      top += ';';
      scores += ';';
      if (i < r.labels.size()) labels += ';';
    }
    top += std::to_string(r.top_k[i]);
    scores += ScoreText(r.scores[i]);
    if (i < r.labels.size()) labels += r.labels[i];
  }
  return CsvField(r.path) + "," + (r.error.empty() ? "ok" : "error") + "," + top + "," + scores +
         "," + CsvField(labels) + "," + CsvField(r.error) + "\n";
}

bool RecordPath(const std::string& line, RecordFormat format, std::string* path) {
  if (format == RecordFormat::kJsonl) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("path") || !j["path"].is_string())
      return false;
    if (j.contains("path_hex"))
      return j["path_hex"].is_string() && Unhex(j["path_hex"].get<std::string>(), path);
    *path = j["path"].get<std::string>();
    return true;
  }
  if (line == kCsvHeader) return false;
  // The first field, quoted or not; the rest of the line must hold the other five fields.
  std::string field;
  size_t i = 0;
  if (!line.empty() && line[0] == '"') {
    for (i = 1; i < line.size(); ++i) {
      if (line[i] == '"') {
        if (i + 1 < line.size() && line[i + 1] == '"') {
          field += '"';
          ++i;
        } else {
          break;
        }
      } else {
        field += line[i];
      }
    }
    if (i >= line.size()) return false;
    ++i;
  } else {
    i = line.find(',');
    if (i == std::string::npos) return false;
    field = line.substr(0, i);
  }
  if (i >= line.size() || line[i] != ',') return false;
  const std::string rest = line.substr(i + 1);
  if (rest.rfind("ok,", 0) != 0 && rest.rfind("error,", 0) != 0) return false;
  *path = field;
  return true;
}

StatusOr<std::vector<std::string>> ParseLabels(const std::string& text, const std::string& path) {
  std::vector<std::string> labels;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    labels.push_back(std::move(line));
    start = end + 1;
  }
  while (!labels.empty() && labels.back().empty()) labels.pop_back();
  if (labels.empty()) return InvalidArgument("labels file '" + path + "' is empty");
  return labels;
}

StatusOr<std::vector<std::string>> ReadLabels(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot read labels file '" + path + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return NotFound("cannot read labels file '" + path + "': " + Errno());
  return ParseLabels(ss.str(), path);
}

StatusOr<std::unique_ptr<RecordWriter>> RecordWriter::Open(const std::string& path, bool resume) {
  KILN_ASSIGN_OR_RETURN(RecordFormat format, RecordFormatFor(path));
  std::unique_ptr<RecordWriter> w(new RecordWriter());
  w->path_ = path;
  w->format_ = format;
  bool need_header = format == RecordFormat::kCsv;
  std::error_code ec;
  if (resume && std::filesystem::exists(path, ec)) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return InvalidArgument("--resume: cannot read output '" + path + "': " + Errno());
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string text = ss.str();
    const size_t keep = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
    size_t start = 0, next_line = 1, line_no = 0;
    while (start < keep) {
      size_t end = text.find('\n', start);
      line_no = next_line++;
      if (format == RecordFormat::kCsv) {
        // A quoted field may hold line breaks (FormatRecord quotes a path holding one): a record
        // ends at the first '\n' after an even number of quotes.
        auto quotes_in = [&text](size_t from, size_t to) {
          return static_cast<size_t>(std::count(text.data() + from, text.data() + to, '"'));
        };
        size_t quotes = quotes_in(start, end);
        while (quotes % 2 == 1 && end + 1 < keep) {
          const size_t next = text.find('\n', end + 1);
          quotes += quotes_in(end + 1, next);
          end = next;
          ++next_line;
        }
        if (quotes % 2 == 1)
          return InvalidArgument("--resume: line " + std::to_string(line_no) + " of '" + path +
                                 "' opens a quoted field that no complete line closes; not "
                                 "appending to it");
      }
      std::string line = text.substr(start, end - start);
      start = end + 1;
      if (format == RecordFormat::kCsv && line_no == 1 && line == kCsvHeader) {
        need_header = false;
        continue;
      }
      std::string p;
      if (!RecordPath(line, format, &p))
        return InvalidArgument("--resume: line " + std::to_string(line_no) + " of '" + path +
                               "' is not a kiln record; not appending to it");
      w->done_.insert(std::move(p));
    }
    if (format == RecordFormat::kCsv && keep > 0 && need_header)
      return InvalidArgument("--resume: '" + path + "' does not start with kiln's CSV header");
    if (keep < text.size() && ::truncate(path.c_str(), static_cast<off_t>(keep)) != 0)
      return InvalidArgument("--resume: cannot cut the partial last line off '" + path +
                             "': " + Errno());
    w->file_ = std::fopen(path.c_str(), "ab");
  } else {
    w->file_ = std::fopen(path.c_str(), "wb");
  }
  if (w->file_ == nullptr) return InvalidArgument("cannot write output '" + path + "': " + Errno());
  if (need_header) {
    w->pending_ = std::string(kCsvHeader) + "\n";
    KILN_RETURN_IF_ERROR(w->Flush());
  }
  return w;
}

RecordWriter::~RecordWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

void RecordWriter::Add(const Record& r) { pending_ += FormatRecord(r, format_); }

Status RecordWriter::Flush() {
  if (!pending_.empty() &&
      std::fwrite(pending_.data(), 1, pending_.size(), file_) != pending_.size())
    return InvalidArgument("cannot write output '" + path_ + "': " + Errno());
  pending_.clear();
  if (std::fflush(file_) != 0 || ::fsync(fileno(file_)) != 0)
    return InvalidArgument("cannot flush output '" + path_ + "': " + Errno());
  return OkStatus();
}

}  // namespace kiln::data
