// Helpers shared by the quantization pipeline's files (src/quant/samples.cc, pipeline.cc,
// accuracy_control.cc).
#pragma once

#include <string>
#include <vector>

#include "kiln/quantize.h"
#include "kiln/status.h"
#include "kiln/tensor.h"

namespace kiln::quant {

// Rows [begin, end) of `t` along dim 0, copied.
Tensor Rows(const Tensor& t, int64_t begin, int64_t end);

// A directory or a .txt/.lst list file: calibration images.
bool IsImageSource(const std::string& path);

// "a, b, c".
std::string Joined(const std::vector<std::string>& v);

// The job's calibration data checked without the model: files or tensors (one of them); tensors
// that are arrays of numbers, not scalars, each name once, the same number of samples (at least
// one) in each.
Status CheckCalibrationData(const QuantizeJob& job);

}  // namespace kiln::quant
