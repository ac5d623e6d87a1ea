// cpu.affinegrid.loops: AffineGrid (2-D and 3-D, float32 theta, constant size) with its rows of
// output positions spread over the threads. Each output component is the reference kernel's sum
// in the same order and in double (theta times the homogeneous base point, ops::AffineGridBase),
// so the results are the reference's; what differs is the loop: no per-position index carry, and
// the last dim's base coordinates read from a table.
#include <cstdint>
#include <vector>

#include "backends/cpu/onednn_common.h"
#include "core/threading.h"
#include "ops/resize/grid_sample.h"

namespace kiln::backends::cpu {
namespace {

using runtime::KernelSupport;
using runtime::TensorInfo;

class AffineGridLoops final : public runtime::Kernel {
 public:
  AffineGridLoops(const ir::Node& node, const ir::Op& op)
      : a_(runtime::AttrsOf<ops::AffineGridAttrs>(op)) {}

  Status Prepare(runtime::PrepareContext* ctx) override {
    const Shape& out = ctx->outputs[0].shape;  // [N, (D,) H, W, r]
    r_ = static_cast<int64_t>(out.size()) - 2;
    n_ = out[0];
    rows_ = 1;
    for (int64_t d = 0; d < r_; ++d) {
      len_[d] = out[1 + d];
      if (d + 1 < r_) rows_ *= len_[d];
      base_[d].clear();
      for (int64_t i = 0; i < len_[d]; ++i)
        base_[d].push_back(ops::AffineGridBase(i, len_[d], a_.align_corners));
    }
    return OkStatus();
  }

  Status Run(const ir::ComputeContext& ctx) const override {
    const float* theta = ctx.in(0).data<float>();
    float* y = ctx.out(0).data<float>();
    const int64_t r = r_, w = len_[r_ - 1];
    ParallelFor(n_ * rows_, 16, [&](int64_t begin, int64_t end) {
      for (int64_t item = begin; item < end; ++item) {
        const int64_t b = item / rows_, row = item % rows_;
        const float* t = theta + b * r * (r + 1);
        // The homogeneous point (x, y[, z], 1): x along the last dim, the others fixed per row.
        double pt[4] = {0.0, 0.0, 0.0, 0.0};
        pt[1] = base_[r - 2][r == 3 ? row % len_[1] : row];
        if (r == 3) pt[2] = base_[0][row / len_[1]];
        pt[r] = 1.0;
        float* out = y + item * w * r;
        for (int64_t i = 0; i < w; ++i) {
          pt[0] = base_[r - 1][i];
          for (int64_t k = 0; k < r; ++k) {
            double acc = 0.0;
            for (int64_t j = 0; j <= r; ++j) acc += static_cast<double>(t[k * (r + 1) + j]) * pt[j];
            out[i * r + k] = static_cast<float>(acc);
          }
        }
      }
    });
    return OkStatus();
  }

 private:
  ops::AffineGridAttrs a_;
  int64_t r_ = 2, n_ = 0, rows_ = 0;
  int64_t len_[3] = {1, 1, 1};
  std::vector<double> base_[3];
};

KernelSupport SupportsAffineGrid(const ir::Node&, const ir::Op& op,
                                 const std::vector<TensorInfo>& in) {
  if (!AllFloat(in, {0})) return {false, "needs float32 theta"};
  if (op.attrs<ops::AffineGridAttrs>() == nullptr) return {false, "no AffineGrid attributes"};
  return {true, ""};
}

KILN_REGISTER_KERNEL(runtime::KernelDef{"cpu.affinegrid.loops",
                                        "AffineGrid",
                                        "",
                                        20,
                                        ir::kMaxOpset,
                                        Backend::kCpu,
                                        10,
                                        SupportsAffineGrid,
                                        CreateKernel<AffineGridLoops>,
                                        {}});

}  // namespace
}  // namespace kiln::backends::cpu
