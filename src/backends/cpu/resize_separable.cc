#include "backends/cpu/resize_separable.h"

#include <algorithm>
#include <limits>

#include "backends/cpu/onednn_common.h"
#include "core/threading.h"
#include "ops/resize/resize.h"

namespace kiln::backends::cpu {
namespace {

// Whether a dim's taps copy it unchanged (output o reads input o with weight 1).
bool Identity(const ops::ResizeDimTaps& t, int64_t in, int64_t out) {
  if (in != out) return false;
  for (int64_t o = 0; o < out; ++o)
    if (t.count[o] != 1 || t.index[o * t.stride] != o || t.weight[o * t.stride] != 1.0)
      return false;
  return true;
}

constexpr int kMaxTaps = 256;  // antialias at a scale of 1/128 with cubic: 2 * 2 * 128 taps

}  // namespace

bool SeparableResize::Prepare(const ir::Op& op, const runtime::PrepareContext& ctx,
                              std::string* why) {
  const Shape& in = ctx.inputs[0].shape;
  ops::ResizePlan plan;
  if (!ops::ResizePlanOf(op, in, ctx.constants, &plan, why)) return false;
  const auto rank = static_cast<int64_t>(in.size());
  if (rank < 1) {
    *why = "a scalar input";
    return false;
  }
  const int64_t hd = rank - 2, wd = rank - 1;  // hd < 0: no H dim
  planes_ = 1;
  for (int64_t d = 0; d < hd; ++d) {
    if (!Identity(plan.taps[d], in[d], plan.out[d])) {
      *why = "dim " + std::to_string(d) + " is resized (only the last two may be)";
      return false;
    }
    planes_ *= in[d];
  }
  h_in_ = hd >= 0 ? in[hd] : 1;
  h_out_ = hd >= 0 ? plan.out[hd] : 1;
  w_in_ = in[wd];
  w_out_ = plan.out[wd];
  if (w_in_ > std::numeric_limits<int32_t>::max()) {
    *why = "rows of 2^31 elements or more";
    return false;
  }
  const ops::ResizeDimTaps& tw = plan.taps[wd];
  tw_ = static_cast<int>(tw.stride);
  th_ = hd >= 0 ? static_cast<int>(plan.taps[hd].stride) : 1;
  if (tw_ > kMaxTaps || th_ > kMaxTaps) {
    *why = "more than " + std::to_string(kMaxTaps) + " taps per output";
    return false;
  }
  extrapolation_ = static_cast<float>(plan.extrapolation_value);
  extrapolates_ = false;
  w_off_.assign(static_cast<size_t>(tw_ * w_out_), 0);
  w_wt_.assign(static_cast<size_t>(tw_ * w_out_), 0.f);
  w_out_of_roi_.assign(static_cast<size_t>(w_out_), 0);
  for (int64_t j = 0; j < w_out_; ++j) {
    w_out_of_roi_[j] = tw.count[j] == 0;
    extrapolates_ = extrapolates_ || tw.count[j] == 0;
    for (int t = 0; t < tw.count[j]; ++t) {
      w_off_[t * w_out_ + j] = static_cast<int32_t>(tw.index[j * tw.stride + t]);
      w_wt_[t * w_out_ + j] = static_cast<float>(tw.weight[j * tw.stride + t]);
    }
  }
  h_identity_ = hd < 0 || Identity(plan.taps[hd], h_in_, h_out_);
  w_identity_ = Identity(tw, w_in_, w_out_);
  h_row_.assign(static_cast<size_t>(th_ * h_out_), 0);
  h_wt_.assign(static_cast<size_t>(th_ * h_out_), 0.f);
  h_out_of_roi_.assign(static_cast<size_t>(h_out_), 0);
  if (hd >= 0) {
    const ops::ResizeDimTaps& th = plan.taps[hd];
    for (int64_t i = 0; i < h_out_; ++i) {
      h_out_of_roi_[i] = th.count[i] == 0;
      extrapolates_ = extrapolates_ || th.count[i] == 0;
      for (int t = 0; t < th.count[i]; ++t) {
        h_row_[i * th_ + t] = th.index[i * th.stride + t];
        h_wt_[i * th_ + t] = static_cast<float>(th.weight[i * th.stride + t]);
      }
    }
  }
  // Tap reads per plane of each order (a gathered read along W counted as 4).
  const double w_first = 4.0 * static_cast<double>(h_in_ * w_out_ * tw_) +
                         (h_identity_ ? 0.0 : static_cast<double>(h_out_ * w_out_ * th_));
  const double h_first = (h_identity_ ? 0.0 : static_cast<double>(h_out_ * w_in_ * th_)) +
                         (w_identity_ ? 0.0 : 4.0 * static_cast<double>(h_out_ * w_out_ * tw_));
  h_first_ = h_first < w_first;
  return true;
}

size_t SeparableResize::ScratchBytes() const {
  if (h_identity_ || w_identity_) return 0;
  const int64_t width = h_first_ ? w_in_ : w_out_, rows = h_first_ ? h_out_ : h_in_;
  return Align64(static_cast<size_t>(planes_ * rows * width) * sizeof(float));
}

void SeparableResize::Run(const float* x, float* y, void* scratch) const {
  // W: `rows` rows of w_in_ from src to rows of w_out_ in dst.
  auto w_pass = [&](const float* src, int64_t rows, float* dst) {
    ParallelFor(rows, 8, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r)
        GatherTaps(src + r * w_in_, w_off_.data(), w_wt_.data(), tw_, w_out_, w_out_,
                   dst + r * w_out_);
    });
  };
  // H: every output row of every plane as the weighted sum of its taps' rows of `width`.
  auto h_pass = [&](const float* src, int64_t width, float* dst) {
    ParallelFor(planes_ * h_out_, 4, [&](int64_t begin, int64_t end) {
      const float* taps[kMaxTaps];
      for (int64_t item = begin; item < end; ++item) {
        const int64_t p = item / h_out_, i = item % h_out_;
        for (int t = 0; t < th_; ++t) taps[t] = src + (p * h_in_ + h_row_[i * th_ + t]) * width;
        BlendRows(taps, h_wt_.data() + i * th_, th_, width, dst + item * width);
      }
    });
  };
  float* tmp = static_cast<float*>(scratch);
  if (h_identity_) {
    w_pass(x, planes_ * h_in_, y);
  } else if (w_identity_) {
    h_pass(x, w_in_, y);
  } else if (h_first_) {
    h_pass(x, w_in_, tmp);
    w_pass(tmp, planes_ * h_out_, y);
  } else {
    w_pass(x, planes_ * h_in_, tmp);
    h_pass(tmp, w_out_, y);
  }
  if (!extrapolates_) return;
  ParallelFor(planes_ * h_out_, 16, [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      float* row = y + item * w_out_;
      if (h_out_of_roi_[item % h_out_]) {
        std::fill_n(row, w_out_, extrapolation_);
        continue;
      }
      for (int64_t j = 0; j < w_out_; ++j)
        if (w_out_of_roi_[j]) row[j] = extrapolation_;
    }
  });
}

}  // namespace kiln::backends::cpu
