// Shared CLI helpers: Status -> exit code mapping, error printing, --shape parsing, --json output.
#pragma once

#include <cstdio>
#include <string>

#include "kiln/status.h"
#include "kiln/tensor.h"

namespace kiln::cli {

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

}  // namespace kiln::cli
