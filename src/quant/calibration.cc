// See calibration.h.
#include "quant/calibration.h"

#include <algorithm>
#include <cmath>

namespace kiln::quant {

StatusOr<Method> ParseMethod(const std::string& name) {
  if (name == "minmax") return Method::kMinMax;
  if (name == "percentile") return Method::kPercentile;
  if (name == "entropy") return Method::kEntropy;
  if (name == "mse") return Method::kMse;
  if (name == "auto") return Method::kAuto;
  return InvalidArgument("unknown calibration method '" + name +
                         "'; expected minmax, percentile, entropy, mse or auto");
}

const char* MethodName(Method m) {
  switch (m) {
    case Method::kMinMax:
      return "minmax";
    case Method::kPercentile:
      return "percentile";
    case Method::kEntropy:
      return "entropy";
    case Method::kMse:
      return "mse";
    case Method::kAuto:
      return "auto";
  }
  return "?";
}

void TensorStats::UpdateRange(const float* x, int64_t n) {
  float lo = min_, hi = max_;
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    if (!std::isfinite(v)) {
      ++non_finite_;
      continue;
    }
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  min_ = lo, max_ = hi;
  count_ += n;
}

float TensorStats::absmax() const {
  if (count_ == 0) return 0.f;
  return std::max(std::fabs(min_), std::fabs(max_));
}

void TensorStats::BeginHistogram(int bins) {
  hist_.assign(static_cast<size_t>(bins), 0.0);
  bin_width_ = absmax() / static_cast<float>(bins);
}

void TensorStats::UpdateHistogram(const float* x, int64_t n) {
  if (hist_.empty() || bin_width_ <= 0.f) return;
  const int64_t last = static_cast<int64_t>(hist_.size()) - 1;
  const float inv = 1.f / bin_width_;
  for (int64_t i = 0; i < n; ++i) {
    const float a = std::fabs(x[i]);
    if (!std::isfinite(a)) continue;
    hist_[std::min<int64_t>(last, static_cast<int64_t>(a * inv))] += 1.0;
  }
}

namespace {

float Percentile(const std::vector<double>& h, float width, double percentile) {
  double total = 0;
  for (double c : h) total += c;
  const double target = total * percentile / 100.0;
  double run = 0;
  for (size_t i = 0; i < h.size(); ++i) {
    run += h[i];
    if (run >= target) return static_cast<float>(i + 1) * width;
  }
  return static_cast<float>(h.size()) * width;
}

// TensorRT's entropy calibration (KL divergence of the clipped reference distribution P and its
// `levels`-level quantized version Q).
float Entropy(const std::vector<double>& h, float width, int levels) {
  const int bins = static_cast<int>(h.size());
  if (bins <= levels) return static_cast<float>(bins) * width;
  std::vector<double> suffix(bins + 1, 0.0);
  for (int i = bins - 1; i >= 0; --i) suffix[i] = suffix[i + 1] + h[i];
  double best = std::numeric_limits<double>::infinity();
  int best_i = bins;
  std::vector<double> p, q;
  for (int i = levels; i <= bins; ++i) {
    p.assign(h.begin(), h.begin() + i);
    p[i - 1] += suffix[i];
    // Q: the first i bins merged into `levels` groups, each group's count spread evenly over its
    // non-empty bins.
    q.assign(static_cast<size_t>(i), 0.0);
    const double per = static_cast<double>(i) / levels;
    for (int l = 0; l < levels; ++l) {
      const int b0 = static_cast<int>(std::floor(l * per));
      const int b1 = l == levels - 1 ? i : static_cast<int>(std::floor((l + 1) * per));
      double sum = 0;
      int nonzero = 0;
      for (int b = b0; b < b1; ++b) {
        sum += h[b];
        nonzero += h[b] != 0.0;
      }
      if (nonzero == 0) continue;
      for (int b = b0; b < b1; ++b)
        if (h[b] != 0.0) q[b] = sum / nonzero;
    }
    double ps = 0, qs = 0;
    for (int b = 0; b < i; ++b) ps += p[b], qs += q[b];
    if (ps <= 0 || qs <= 0) continue;
    double kl = 0;
    for (int b = 0; b < i; ++b) {
      if (p[b] == 0) continue;
      const double pn = p[b] / ps;
      // A P bin Q leaves empty (the clipped tail lands in an empty bin) gets Q's smallest mass.
      const double qn = q[b] > 0 ? q[b] / qs : 1e-12;
      kl += pn * std::log(pn / qn);
    }
    if (kl < best) best = kl, best_i = i;
  }
  return static_cast<float>(best_i) * width;
}

float Mse(const std::vector<double>& h, float width, int levels) {
  const int bins = static_cast<int>(h.size());
  double best = std::numeric_limits<double>::infinity();
  int best_i = bins;
  for (int i = std::min(levels, bins); i <= bins; ++i) {
    const double t = static_cast<double>(i) * width;
    const double step = t / (levels - 1);
    double err = 0;
    for (int b = 0; b < bins; ++b) {
      if (h[b] == 0) continue;
      const double x = (b + 0.5) * width;
      const double r = x >= t ? t : std::nearbyint(x / step) * step;
      err += h[b] * (x - r) * (x - r);
    }
    if (err < best) best = err, best_i = i;
  }
  return static_cast<float>(best_i) * width;
}

}  // namespace

float Threshold(const TensorStats& stats, Method method, double percentile, int levels) {
  const float absmax = stats.absmax();
  if (method == Method::kMinMax || stats.histogram().empty() || stats.bin_width() <= 0.f)
    return absmax;
  const auto& h = stats.histogram();
  const float w = stats.bin_width();
  float t = absmax;
  switch (method) {
    case Method::kPercentile:
    case Method::kAuto:
      t = Percentile(h, w, percentile);
      break;
    case Method::kEntropy:
      t = Entropy(h, w, levels);
      break;
    case Method::kMse:
      t = Mse(h, w, levels);
      break;
    case Method::kMinMax:
      break;
  }
  return std::min(t, absmax);
}

}  // namespace kiln::quant
