// Shared CLI helpers: Status -> exit code mapping, error printing, --shape parsing, --json output.
#pragma once

#include <cstdio>
#include <optional>
#include <string>
#include <thread>

#include "kiln/options.h"
#include "kiln/status.h"
#include "kiln/tensor.h"

namespace kiln::cli {

// The value of a --precision option whose check (CLI::IsMember) admits only precision names.
inline Precision PrecisionArg(const std::string& name) {
  StatusOr<Precision> p = ParsePrecision(name);
  return p.ok() ? *p : Precision::kFp32;
}
// The value of a --device option whose check (CLI::IsMember) admits only backend names.
inline Backend BackendArg(const std::string& name) {
  StatusOr<Backend> b = ParseBackend(name);
  return b.ok() ? *b : Backend::kCpu;
}

// Exit codes (documented in README "Exit codes"): 0 success; 1 usage error; otherwise
// 10 + StatusCode (InvalidArgument 11, InvalidModel 12, Unsupported 13, NotFound 14, ...).
int ExitCodeFor(const Status& s);
// Prints "kiln: error: ..." to stderr and returns the exit code.
int Fail(const Status& s);
// "AxBxC" -> {A, B, C} for `--shape NAME=AxBxC`; every dim a positive integer. `name` is used in
// the error message.
StatusOr<Shape> ParseDims(const std::string& name, const std::string& text);

// Writes `text` (a command's --json report) to stdout when `path` is "-", else to the file,
// then says "json: PATH" on `out`; InvalidArgument when the file cannot be written.
Status WriteJsonReport(const std::string& path, const std::string& text, FILE* out);

// Runs `f` on a thread of its own and returns its result. For loading and preparing sessions
// that other threads will run: OpenMP (libgomp) keeps a pool of worker threads per thread that
// ever opened a parallel region, for as long as that thread lives, and once it manages more
// threads than there are CPUs it spins only briefly at every barrier, which made every run on
// another thread 0.3-0.5 ms slower (MobileNetV2, 2 cores). A thread that ends takes its pool
// with it.
template <typename F>
auto OnOwnThread(F f) -> decltype(f()) {
  std::optional<decltype(f())> result;
  std::thread([&] { result.emplace(f()); }).join();
  return std::move(*result);
}

}  // namespace kiln::cli
