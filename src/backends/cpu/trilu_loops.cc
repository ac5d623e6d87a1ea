// cpu.trilu.rows: Trilu (ops/tensor/trilu.h) with the matrices' rows spread over the threads;
// each row is one copy of the span it keeps (ops::TriluKeptColumns) and zeros around it, as bytes,
// so every fixed-size dtype runs. k is read at run time (a constant or a computed input alike).
#include <cstring>

#include "backends/cpu/onednn_common.h"
#include "core/threading.h"
#include "ops/tensor/trilu.h"

namespace kiln::backends::cpu {
namespace {

using runtime::KernelSupport;
using runtime::TensorInfo;

class TriluRows final : public runtime::Kernel {
 public:
  TriluRows(const ir::Node&, const ir::Op& op) : a_(runtime::AttrsOf<ops::TriluAttrs>(op)) {}

  Status Run(const ir::ComputeContext& ctx) const override {
    const Shape& s = ctx.in(0).shape();
    const int64_t rows = s[s.size() - 2], cols = s.back();
    const int64_t k = ctx.has(1) ? ctx.in(1).data<int64_t>()[0] : 0;
    const size_t size = DataTypeSize(ctx.in(0).dtype());
    const auto* src = static_cast<const unsigned char*>(ctx.in(0).raw());
    auto* dst = static_cast<unsigned char*>(ctx.out(0).raw());
    const int64_t all_rows = cols == 0 ? 0 : ctx.in(0).numel() / cols;
    const bool upper = a_.upper;
    ParallelFor(all_rows, 64, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const ops::TriluSpan span = ops::TriluKeptColumns(r % rows, rows, cols, k, upper);
        const size_t row = static_cast<size_t>(r * cols) * size;
        const size_t b = static_cast<size_t>(span.begin) * size;
        const size_t e = static_cast<size_t>(span.end) * size, n = static_cast<size_t>(cols) * size;
        std::memset(dst + row, 0, b);
        std::memcpy(dst + row + b, src + row + b, e - b);
        std::memset(dst + row + e, 0, n - e);
      }
    });
    return OkStatus();
  }

 private:
  ops::TriluAttrs a_;
};

KernelSupport SupportsTrilu(const ir::Node&, const ir::Op& op, const std::vector<TensorInfo>& in) {
  if (op.attrs<ops::TriluAttrs>() == nullptr) return {false, "no Trilu attributes"};
  if (in[0].layout) return {false, "input in a blocked layout"};
  return {true, ""};
}

KILN_REGISTER_KERNEL(runtime::KernelDef{"cpu.trilu.rows",
                                        "Trilu",
                                        "",
                                        14,
                                        ir::kMaxOpset,
                                        Backend::kCpu,
                                        10,
                                        SupportsTrilu,
                                        CreateKernel<TriluRows>,
                                        {}});

}  // namespace
}  // namespace kiln::backends::cpu
