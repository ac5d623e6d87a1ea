// The data pipeline's last stage: a job's output records, one per image, in JSON Lines or CSV,
// appended and flushed (fflush + fsync) after every batch so a killed job loses at most the batch
// in flight; and the reading side of --resume.
//
// JSONL, one object per line:
//   {"path": "imgs/a.jpg", "top_k": [3, 1], "scores": [0.91, 0.05], "labels": ["cat", "dog"]}
//   {"path": "imgs/bad.jpg", "error": "InvalidArgument: ... (while reading imgs/bad.jpg)"}
// ("labels" only when labels were given.) A path that is not valid UTF-8 (JSON text must be) is
// written with U+FFFD in place of its stray bytes and also exactly, as hex of its bytes:
//   {"path": "imgs/\uFFFD.jpg", "path_hex": "696d67732fff2e6a7067", "top_k": ...}
// and the reader takes "path_hex" when a record has it. CSV, with a header line:
//   path,status,top_k,scores,labels,error
// where top_k, scores and labels are ';'-separated lists, status is "ok" or "error", and fields are
// quoted per RFC 4180 when they contain a comma, quote or line break; paths are written as their
// bytes, whatever they are.
//
// Resume: the existing file is read; every complete line (ending in '\n') that parses names an
// image that is done, whatever its status (a CSV record whose quoted path holds a line break spans
// lines: it ends at a '\n' after an even number of quotes); an incomplete last line (a job killed
// mid-write) is cut off the file, so that image is done again and no corrupt record remains.
//
// Thread-safety: one writer per file, used by one thread.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "kiln/status.h"

namespace kiln::data {

enum class RecordFormat { kJsonl, kCsv };

struct Record {
  std::string path;
  std::string error;  // non-empty for a failed image
  std::vector<int64_t> top_k;
  std::vector<float> scores;
  std::vector<std::string> labels;  // empty when no labels file
  // Non-classifier models: the .npy files holding this image's raw outputs (JSON Lines only);
  // when set, top_k/scores/labels are not written.
  std::vector<std::string> outputs;
};

// kJsonl for .jsonl / .json / .ndjson, kCsv for .csv; InvalidArgument otherwise.
StatusOr<RecordFormat> RecordFormatFor(const std::string& path);

// One record as a line, '\n' included.
std::string FormatRecord(const Record& r, RecordFormat format);
// The path a line records; false when the line does not parse (or is the CSV header).
bool RecordPath(const std::string& line, RecordFormat format, std::string* path);

// A labels file (`--labels` of `kiln run --images`): one class name per line, in class order. A
// '\r' ending a line is dropped and empty lines at the end are ignored; InvalidArgument naming
// `path` when no line is left. `text` is the whole file.
StatusOr<std::vector<std::string>> ParseLabels(const std::string& text, const std::string& path);
// The file at `path` read whole, then ParseLabels; NotFound when it cannot be read.
StatusOr<std::vector<std::string>> ReadLabels(const std::string& path);

class RecordWriter {
 public:
  // Opens `path` for writing before any work starts: without `resume` the file is created or
  // truncated; with `resume` its complete records are read into done() and a partial last line
  // is cut off. Errors (a missing folder, no permission, a complete line that does not parse) name
  // the file.
  static StatusOr<std::unique_ptr<RecordWriter>> Open(const std::string& path, bool resume);
  ~RecordWriter();
  RecordWriter(const RecordWriter&) = delete;
  RecordWriter& operator=(const RecordWriter&) = delete;

  // Paths already recorded (resume only).
  const std::unordered_set<std::string>& done() const { return done_; }
  // Buffers one record.
  void Add(const Record& r);
  // Writes what Add() buffered, then fflush + fsync. Call once per batch.
  Status Flush();

 private:
  RecordWriter() = default;
  std::string path_;
  RecordFormat format_ = RecordFormat::kJsonl;
  std::FILE* file_ = nullptr;
  std::string pending_;
  std::unordered_set<std::string> done_;
};

}  // namespace kiln::data
