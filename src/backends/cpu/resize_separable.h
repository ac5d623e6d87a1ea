// Resize/Upsample on float32 as two separable passes over the last two dims, with the op's own
// taps (ops::ResizePlanOf: every coordinate mode, rounding, cubic, antialias, exclude_outside,
// tf_crop_and_resize's extrapolation): along W each row is resampled by a vector gather per tap
// and 8 outputs (GatherTaps); along H each output row is a weighted sum of input rows
// (vectorized along the row). The pass order is the cheaper one by a count of tap reads with a
// gathered read weighing 4 contiguous ones: W first when upscaling (fewer rows to gather
// along), H first when a wide antialias filter shrinks H. Dims before the last two must keep their
// size and values (N, C). Used by cpu.resize.onednn where oneDNN's resampling does not compute what
// ONNX defines for the given values, and by cpu.resize.separable for what oneDNN cannot do at all.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/op.h"
#include "runtime/kernel.h"

namespace kiln::backends::cpu {

class SeparableResize {
 public:
  // Plans from the op and the constants of `ctx`; false (with the reason) when the plan does not
  // fit: a dim before the last two resized, or a row of 2^31 elements or more.
  bool Prepare(const ir::Op& op, const runtime::PrepareContext& ctx, std::string* why);
  // The first pass's rows (none when the second pass copies).
  size_t ScratchBytes() const;
  void Run(const float* x, float* y, void* scratch) const;

 private:
  int64_t planes_ = 0, h_in_ = 1, w_in_ = 1, h_out_ = 1, w_out_ = 1;
  int tw_ = 1, th_ = 1;         // taps per output along W and H
  std::vector<int32_t> w_off_;  // [tw * w_out]: tap t of output j at t * w_out + j
  std::vector<float> w_wt_;     // same layout; unused taps weigh 0
  std::vector<int64_t> h_row_;  // [h_out * th]: input row of tap t of output row i
  std::vector<float> h_wt_;     // [h_out * th]
  std::vector<char> w_out_of_roi_, h_out_of_roi_;  // tf_crop_and_resize: extrapolated
  bool h_identity_ = false, w_identity_ = false, h_first_ = false, extrapolates_ = false;
  float extrapolation_ = 0.f;
};

}  // namespace kiln::backends::cpu
