// Calibration statistics of one tensor and the clipping thresholds computed from them.
//
// Streaming, in two passes over the calibration data: the first keeps min and max; the second
// (methods other than minmax) a histogram of |x| with a fixed range [0, max |x| of pass 1] and
// `bins` bins. Memory is tensors x bins, independent of the number of samples.
//
// Thresholds T (the range quantized is [-T, T] for int8, [0, T] for uint8):
//   minmax      T = max |x|
//   percentile  the |x| below which `percentile` % of the values fall (bin upper edge)
//   entropy     TensorRT's KL-divergence search: for each candidate bin count i >= levels,
//               clip the histogram at i (the tail summed into the last bin), merge it into
//               `levels` levels and expand back; T = the upper edge of the i with the smallest
//               KL(P || Q)
//   mse         the T (bin edges, from levels on) minimising the expected squared error of
//               rounding to `levels` steps and clipping, with values at their bin centres
//   auto        per tensor, one of the four above: the one whose quantized model's outputs are
//               closest to float's (src/quant/quantizer.cc searches; Threshold() gives the
//               percentile one, the search's starting point)
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "kiln/status.h"

namespace kiln::quant {

enum class Method { kMinMax, kPercentile, kEntropy, kMse, kAuto };

StatusOr<Method> ParseMethod(const std::string& name);
const char* MethodName(Method m);

class TensorStats {
 public:
  void UpdateRange(const float* x, int64_t n);
  // Starts pass 2: a histogram of `bins` bins over [0, absmax()].
  void BeginHistogram(int bins);
  void UpdateHistogram(const float* x, int64_t n);

  float min() const { return min_; }
  float max() const { return max_; }
  float absmax() const;
  bool has_range() const { return count_ > 0; }
  int64_t count() const { return count_; }
  const std::vector<double>& histogram() const { return hist_; }
  float bin_width() const { return bin_width_; }
  // Non-finite values seen (they are left out of the statistics).
  int64_t non_finite() const { return non_finite_; }

 private:
  float min_ = std::numeric_limits<float>::infinity();
  float max_ = -std::numeric_limits<float>::infinity();
  int64_t count_ = 0, non_finite_ = 0;
  std::vector<double> hist_;
  float bin_width_ = 0.f;
};

// The clipping threshold T > 0 for `stats` (see the top of this file); `levels` is 128 for int8,
// 256 for uint8. Falls back to max |x| when there is no histogram. 0 when the tensor was all zero.
float Threshold(const TensorStats& stats, Method method, double percentile, int levels);

}  // namespace kiln::quant
