// Shared CLI helpers: Status -> exit code mapping, error printing, tensor file reading.
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
// Reads a .npy or .pb (ONNX TensorProto) file, chosen by extension.
StatusOr<Tensor> ReadTensorFile(const std::string& path);
// "AxBxC" -> {A, B, C} for `--shape NAME=AxBxC`; every dim a positive integer. `name` is used in
// the error message.
StatusOr<Shape> ParseDims(const std::string& name, const std::string& text);
// "2.6.3", or "not linked" when the CLI was built without oneDNN.
std::string OneDnnVersion();
// Output file name: every character outside [A-Za-z0-9._-] replaced by '_'.
std::string SanitizeFileName(const std::string& name);

// Writes `text` (a command's --json report) to stdout when `path` is "-", else to the file,
// then says "json: PATH" on `out`; InvalidArgument when the file cannot be written.
Status WriteJsonReport(const std::string& path, const std::string& text, FILE* out);

}  // namespace kiln::cli
