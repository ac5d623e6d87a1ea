// cpu.col2im.loops: Col2Im (PyTorch's fold) with 1 to 8 spatial dims, float32, constant
// image_shape and block_shape (what exporters write). Output planes (N * C) are spread over the
// threads; each plane is zeroed, then every block position's row of columns is added along the
// output rows it covers: for one block position and one row of blocks (fixed block indices in
// every dim but the last) the output columns are an arithmetic sequence (stride 1: contiguous),
// so the innermost loop is an add of two runs that vectorizes, with its ends clipped to the
// image instead of testing each element. The geometry
// is the op's own (ops::ResolveCol2Im). The reference kernel accumulates in double, this one in
// float32 (kiln_kernel_harness_test: the op's cases).
#include <algorithm>
#include <cstdint>
#include <string>

#include "backends/cpu/onednn_common.h"
#include "core/threading.h"
#include "ops/common.h"
#include "ops/nn/col2im.h"

namespace kiln::backends::cpu {
namespace {

using runtime::KernelSupport;
using runtime::TensorInfo;

constexpr int64_t kMaxDims = 8;  // spatial dims

// out[j * stride] += in[j] for j < n.
__attribute__((target_clones("default", "avx2", "arch=x86-64-v4"))) void AddRun(const float* in,
                                                                                int64_t n,
                                                                                int64_t stride,
                                                                                float* out) {
  if (stride == 1) {
    for (int64_t j = 0; j < n; ++j) out[j] += in[j];
  } else {
    for (int64_t j = 0; j < n; ++j) out[j * stride] += in[j];
  }
}

// The first and one past the last block index l with 0 <= l * stride + offset < len.
void Covering(int64_t offset, int64_t stride, int64_t len, int64_t blocks, int64_t* lo,
              int64_t* hi) {
  *lo = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
  *hi = offset >= len ? 0 : std::min(blocks, (len - 1 - offset) / stride + 1);
}

class Col2ImLoops final : public runtime::Kernel {
 public:
  Col2ImLoops(const ir::Node& node, const ir::Op& op)
      : node_(node), a_(runtime::AttrsOf<ops::Col2ImAttrs>(op)) {}

  Status Prepare(runtime::PrepareContext* ctx) override {
    if (ctx->constants[1] == nullptr || ctx->constants[2] == nullptr)
      return InvalidArgument(node_.Describe() + ": image_shape and block_shape must be constant");
    std::string why;
    if (!ops::ResolveCol2Im(a_, ctx->inputs[0].shape, ops::ReadInts(*ctx->constants[1]),
                            ops::ReadInts(*ctx->constants[2]), &g_, &why))
      return InvalidArgument(node_.Describe() + ": " + why);
    // 1-D as 2-D with one row.
    if (g_.image.size() == 1) {
      for (auto* v : {&g_.image, &g_.block, &g_.blocks, &g_.strides, &g_.dilations, &g_.pads})
        v->insert(v->begin(), v == &g_.pads ? 0 : 1);
    }
    planes_ = ctx->inputs[0].shape[0] * (ctx->inputs[0].shape[1] / g_.block_size);
    return OkStatus();
  }

  Status Run(const ir::ComputeContext& ctx) const override {
    const float* src = ctx.in(0).data<float>();
    float* y = ctx.out(0).data<float>();
    const auto nd = static_cast<int64_t>(g_.image.size());  // >= 2 (1-D is padded)
    // Row-major strides of the image and of the block grid.
    int64_t img_stride[kMaxDims], blk_stride[kMaxDims];
    img_stride[nd - 1] = blk_stride[nd - 1] = 1;
    for (int64_t d = nd - 2; d >= 0; --d) {
      img_stride[d] = img_stride[d + 1] * g_.image[d + 1];
      blk_stride[d] = blk_stride[d + 1] * g_.blocks[d + 1];
    }
    ParallelFor(planes_, 1, [&](int64_t begin, int64_t end) {
      for (int64_t p = begin; p < end; ++p) {
        float* out = y + p * g_.image_size;
        std::fill_n(out, g_.image_size, 0.f);
        const float* col = src + p * g_.block_size * g_.num_blocks;
        // Every block position k (row-major over block), its first output index per dim (o) and
        // the block indices that land inside the image ([lo, hi) per dim).
        int64_t k[kMaxDims] = {}, o[kMaxDims], lo[kMaxDims], hi[kMaxDims], l[kMaxDims];
        for (int64_t kidx = 0; kidx < g_.block_size; ++kidx) {
          bool empty = false;
          for (int64_t d = 0; d < nd; ++d) {
            o[d] = k[d] * g_.dilations[d] - g_.pads[d];
            Covering(o[d], g_.strides[d], g_.image[d], g_.blocks[d], &lo[d], &hi[d]);
            empty = empty || hi[d] <= lo[d];
          }
          if (!empty) {
            const float* c = col + kidx * g_.num_blocks;
            const int64_t last = nd - 1, n = hi[last] - lo[last];
            for (int64_t d = 0; d < last; ++d) l[d] = lo[d];
            while (true) {  // over the outer block indices l[0..last)
              int64_t at_col = lo[last], at_out = lo[last] * g_.strides[last] + o[last];
              for (int64_t d = 0; d < last; ++d) {
                at_col += l[d] * blk_stride[d];
                at_out += (l[d] * g_.strides[d] + o[d]) * img_stride[d];
              }
              AddRun(c + at_col, n, g_.strides[last], out + at_out);
              int64_t d = last - 1;
              while (d >= 0 && ++l[d] == hi[d]) l[d] = lo[d], --d;
              if (d < 0) break;
            }
          }
          for (int64_t d = nd - 1; d >= 0 && ++k[d] == g_.block[d]; --d) k[d] = 0;
        }
      }
    });
    return OkStatus();
  }

 private:
  ir::Node node_;
  ops::Col2ImAttrs a_;
  ops::Col2ImGeometry g_;
  int64_t planes_ = 0;
};

KernelSupport SupportsCol2Im(const ir::Node&, const ir::Op& op, const std::vector<TensorInfo>& in) {
  if (!AllFloat(in, {0})) return {false, "needs float32 input"};
  if (in[1].shape.size() != 1 || in[1].shape[0] < 1 || in[1].shape[0] > kMaxDims)
    return {false, "1 to " + std::to_string(kMaxDims) + " spatial dims"};
  if (op.attrs<ops::Col2ImAttrs>() == nullptr) return {false, "no Col2Im attributes"};
  return {true, ""};
}

KILN_REGISTER_KERNEL(runtime::KernelDef{"cpu.col2im.loops",
                                        "Col2Im",
                                        "",
                                        18,
                                        ir::kMaxOpset,
                                        Backend::kCpu,
                                        10,
                                        SupportsCol2Im,
                                        CreateKernel<Col2ImLoops>,
                                        {}});

}  // namespace
}  // namespace kiln::backends::cpu
