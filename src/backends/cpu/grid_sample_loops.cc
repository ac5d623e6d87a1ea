// cpu.gridsample.loops: GridSample on 4-D and 5-D float32 tensors, every mode and padding, as
// float32 loops on the thread pool. The coordinate rules are the op's own (ops::GridTaps, shared
// with the reference kernel); what differs is the work's order: the grid's positions are taken in
// blocks (up to kTapEntries / taps positions), each position's taps (index into the input plane,
// weight) are computed once for the block, and then every channel's plane is read through them,
// so a block's writes are contiguous and the tap arithmetic is not repeated per channel. Blocks of
// all samples are spread over the threads. From 16 channels with 4 taps or more, and whenever X
// arrives in another kernel's layout, the channels-last variant runs instead: X reordered to
// channels-last once, each position's taps blending contiguous runs of channels into a tile that
// is written out transposed (RunChannelsLast). The reference kernel computes in double; the
// results agree to float32's rounding (kiln_kernel_harness_test and
// tests/kernels/onednn_selection_test.cc, GridSampleLoops).
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <limits>

#include "backends/cpu/onednn_common.h"
#include "core/threading.h"
#include "ops/resize/grid_sample.h"

namespace kiln::backends::cpu {
namespace {

using runtime::KernelSupport;
using runtime::TensorInfo;

constexpr int kMaxDims = 3;
constexpr int kMaxTaps = 64;  // cubic in 3-D: 4 x 4 x 4
// The taps of one block (offset and weight, 8 bytes each): 64 KB on the thread's stack. A block
// holds kTapEntries / taps positions (2048 bilinear, 512 bicubic): long enough that a channel's
// rows are read from memory about once over the blocks, short enough to stay in L2 while every
// channel reads through them.
constexpr int64_t kTapEntries = 8192;

// From this many channels, and with 4 taps or more, X is read channels-last (a oneDNN reorder
// into scratch per run): each tap of a position then reads its channels as one contiguous run
// instead of one gather per channel. On [1,64,128,128] (AMD EPYC, AVX2, 2 threads) bilinear went
// from 1.84 to 1.56 ms and bicubic from 1.95 to 1.1 ms; of the 1.56 ms, 0.55 are the reorder.
constexpr int64_t kChannelsLastMin = 16;
// Positions per tile of the channels-last variant: the tile [kTile, C] is written out transposed,
// kTile consecutive floats per channel row.
constexpr int64_t kTile = 8;
// Channels per tile pass (a tile of 8 x 256 floats: 8 KB on the stack).
constexpr int64_t kChannelChunk = 256;

class GridSampleLoops final : public runtime::Kernel {
 public:
  explicit GridSampleLoops(const ir::Node& node) : node_(node) {
    auto a = ops::GridSampleAttrsOf(node);
    reads_layouts_ = a.ok() && a->mode != ops::GridMode::kNearest;
  }

  Status Prepare(runtime::PrepareContext* ctx) override {
    auto a = ops::GridSampleAttrsOf(node_);
    if (!a.ok()) return a.status();
    attrs_ = *a;
    const Shape& x = ctx->inputs[0].shape;
    const Shape& g = ctx->inputs[1].shape;
    r_ = static_cast<int>(x.size()) - 2;
    n_ = x[0];
    c_ = x[1];
    plane_ = 1;
    positions_ = 1;
    for (int d = 0; d < r_; ++d) {
      len_[d] = x[2 + d];
      plane_ *= x[2 + d];
      positions_ *= g[1 + d];
    }
    for (int d = r_ - 1, stride = 1; d >= 0; --d) {
      stride_[d] = stride;
      stride *= static_cast<int>(len_[d]);
    }
    per_dim_ = attrs_.mode == ops::GridMode::kNearest  ? 1
               : attrs_.mode == ops::GridMode::kLinear ? 2
                                                       : 4;
    taps_ = 1;
    for (int d = 0; d < r_; ++d) taps_ *= per_dim_;
    // Enough blocks for every thread to get several, each at most kTapEntries / taps_ long.
    const int64_t threads = std::max(1, omp_get_max_threads());
    block_ = std::min<int64_t>(kTapEntries / taps_,
                               std::max<int64_t>(64, n_ * positions_ / (4 * threads)));
    // Nearest (one tap) ran 1.8x slower channels-last (the copy of X costs more than it saves).
    channels_last_ = (c_ >= kChannelsLastMin && taps_ >= 4) || ctx->inputs[0].layout != nullptr;
    if (!channels_last_) return OkStatus();
    // X as it arrives: plain, or the layout of the kernel that wrote it (a convolution's
    // blocked one), reordered once to channels-last; already channels-last, read as it is.
    x_plain_ = InputDesc(ctx->inputs[0]);
    x_last_ = ChannelsLastDesc(x, dnnl::memory::data_type::f32);
    if (x_plain_ == x_last_) return OkStatus();
    return Guard(node_, [&] { x_reorder_ = MakeReorder(x_plain_, x_last_); });
  }

  // The channels-last variant's copy of X.
  size_t ScratchBytes() const override {
    return channels_last_ && x_reorder_ ? Align64(x_last_.get_size()) : 0;
  }

  // X in any layout except for nearest (which the planner then converts to plain): the
  // channels-last variant reorders it, and is taken for any X that arrives in a layout.
  bool AcceptsLayout(size_t input) const override { return input == 0 && reads_layouts_; }

  std::string variant() const override {
    const std::string order = channels_last_ ? ", channels-last" : "";
    switch (taps_) {
      case 1:
        return "nearest" + order;
      case 4:
        return "bilinear" + order;
      default:
        return std::to_string(taps_) + " taps" + order;
    }
  }

  Status Run(const ir::ComputeContext& ctx) const override {
    if (channels_last_) return RunChannelsLast(ctx);
    const float* x = ctx.in(0).data<float>();
    const float* grid = ctx.in(1).data<float>();
    float* y = ctx.out(0).data<float>();
    const int64_t block = block_, blocks = (positions_ + block - 1) / block;
    ParallelFor(n_ * blocks, 1, [&](int64_t begin, int64_t end) {
      int32_t off[kTapEntries];
      float wt[kTapEntries];
      for (int64_t item = begin; item < end; ++item) {
        const int64_t b = item / blocks, p0 = (item % blocks) * block;
        const int64_t count = std::min(block, positions_ - p0);
        for (int64_t p = 0; p < count; ++p)
          Taps(grid + (b * positions_ + p0 + p) * r_, block, off + p, wt + p);
        for (int64_t c = 0; c < c_; ++c)
          GatherTaps(x + (b * c_ + c) * plane_, off, wt, taps_, block, count,
                     y + (b * c_ + c) * positions_ + p0);
      }
    });
    return OkStatus();
  }

 private:
  // Tiles of kTile positions spread over the threads; each position's taps blend its channels
  // from the channels-last copy of X into a [kTile, C] tile, written out transposed.
  Status RunChannelsLast(const ir::ComputeContext& ctx) const {
    const void* xs = ctx.in(0).raw();
    Status st = Guard(node_, [&] {
      xs = InputAs(x_reorder_, x_plain_, x_last_, xs, ctx.scratch);
      ThreadStream().wait();
    });
    if (!st.ok()) return st;
    const float* x = static_cast<const float*>(xs);
    const float* grid = ctx.in(1).data<float>();
    float* y = ctx.out(0).data<float>();
    const int64_t tiles = (positions_ + kTile - 1) / kTile;
    const int64_t chunk = std::min<int64_t>(c_, kChannelChunk);
    ParallelFor(n_ * tiles, 4, [&](int64_t begin, int64_t end) {
      int32_t off[kMaxTaps * kTile];
      float wt[kMaxTaps * kTile];
      float tile[kTile * kChannelChunk];
      const float* pixels[kMaxTaps];
      float weights[kMaxTaps];
      for (int64_t item = begin; item < end; ++item) {
        const int64_t b = item / tiles, p0 = (item % tiles) * kTile;
        const int64_t count = std::min(kTile, positions_ - p0);
        for (int64_t p = 0; p < count; ++p)
          Taps(grid + (b * positions_ + p0 + p) * r_, kTile, off + p, wt + p);
        const float* image = x + b * plane_ * c_;
        for (int64_t c0 = 0; c0 < c_; c0 += chunk) {
          const int64_t nc = std::min(chunk, c_ - c0);
          for (int64_t p = 0; p < count; ++p) {
            for (int t = 0; t < taps_; ++t) {
              pixels[t] = image + static_cast<int64_t>(off[t * kTile + p]) * c_ + c0;
              weights[t] = wt[t * kTile + p];
            }
            BlendRows(pixels, weights, taps_, nc, tile + p * nc);
          }
          float* dst = y + (b * c_ + c0) * positions_ + p0;
          for (int64_t c = 0; c < nc; ++c)
            for (int64_t p = 0; p < count; ++p) dst[c * positions_ + p] = tile[p * nc + c];
        }
      }
    });
    return OkStatus();
  }

  // One position's taps_ (offset into the plane, weight) pairs, tap t at off[t * block] (the
  // block's positions side by side per tap, so the gather below vectorizes); taps outside the
  // input under zero padding get weight 0 and offset 0, so every position has the same count.
  void Taps(const float* coords, int64_t block, int32_t* off, float* wt) const {
    int64_t idx[kMaxDims][ops::kMaxGridTaps] = {};
    double w[kMaxDims][ops::kMaxGridTaps] = {};
    for (int d = 0; d < r_; ++d) {
      // grid's components are in reverse dim order (x first).
      // Taps dropped under zero padding (after the kept ones) weigh 0.
      const int64_t kept = ops::GridTaps(attrs_, coords[r_ - 1 - d], len_[d], idx[d], w[d]);
      for (int64_t k = kept; k < per_dim_; ++k) {
        idx[d][k] = 0;
        w[d][k] = 0.0;
      }
    }
    int ci[kMaxDims] = {0, 0, 0};
    for (int t = 0; t < taps_; ++t) {
      double weight = 1.0;
      int64_t o = 0;
      for (int d = 0; d < r_; ++d) {
        weight *= w[d][ci[d]];
        o += idx[d][ci[d]] * stride_[d];
      }
      off[t * block] = static_cast<int32_t>(o);
      wt[t * block] = static_cast<float>(weight);
      for (int d = r_ - 1; d >= 0; --d) {
        if (++ci[d] < per_dim_) break;
        ci[d] = 0;
      }
    }
  }

  ir::Node node_;
  ops::GridSampleAttrs attrs_;
  bool channels_last_ = false;
  bool reads_layouts_ = false;  // not nearest: X may arrive in any layout
  dnnl::memory::desc x_plain_, x_last_;
  dnnl::reorder x_reorder_;
  int r_ = 2, taps_ = 4;
  int per_dim_ = 2;     // taps per dim: 1 nearest, 2 linear, 4 cubic
  int64_t block_ = 64;  // positions per block
  int64_t n_ = 0, c_ = 0, plane_ = 1, positions_ = 1;
  int64_t len_[kMaxDims] = {1, 1, 1};
  int64_t stride_[kMaxDims] = {1, 1, 1};
};

KernelSupport SupportsGridSample(const ir::Node& node, const ir::Op&,
                                 const std::vector<TensorInfo>& in) {
  if (!AllFloat(in, {0, 1})) return {false, "needs float32 X and grid"};
  const size_t rank = in[0].shape.size();
  if (rank != 4 && rank != 5) return {false, "X must be 4-D or 5-D (2 or 3 spatial dims)"};
  if (!ops::GridSampleAttrsOf(node).ok()) return {false, "bad attributes (the op refuses them)"};
  int64_t plane = 1;
  for (size_t d = 2; d < rank; ++d) plane *= in[0].shape[d];
  if (plane > std::numeric_limits<int32_t>::max())
    return {false, "an input plane of 2^31 elements or more"};
  return {true, ""};
}

KILN_REGISTER_KERNEL(runtime::KernelDef{"cpu.gridsample.loops",
                                        "GridSample",
                                        "",
                                        16,
                                        ir::kMaxOpset,
                                        Backend::kCpu,
                                        10,
                                        SupportsGridSample,
                                        CreateKernel<GridSampleLoops>,
                                        {}});

}  // namespace
}  // namespace kiln::backends::cpu
