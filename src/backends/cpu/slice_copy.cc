// cpu.slice.copy: Slice (any opset, any fixed-size dtype, plain input) as threaded copies of
// contiguous runs. The slice is resolved as the reference does (ops::MakeSlicePlan); trailing
// dims taken whole and the innermost dim sliced with step 1 form one contiguous run of the
// input per output row, copied with memcpy, the rows split over the threads. Attention's Q/K/V
// split of a [N, 197, 2304] projection into three [N, 197, 768] slices is 3 x N x 197 runs of
// 3 KB. The plan is made once in Prepare from the constant starts/ends/axes/steps (what
// exporters write; a Slice whose indices are computed has its output shape decided at run time
// and runs on the reference kernel, so the plan made in Run is only a fallback). Runs shorter
// than kMinRunBytes, or an innermost step other than 1, use the reference's strided gather.
#include <cstring>

#include "backends/cpu/onednn_common.h"
#include "core/threading.h"
#include "ops/tensor/slice.h"
#include "ops/tensor/tensor_util.h"

namespace kiln::backends::cpu {
namespace {

using runtime::KernelSupport;
using runtime::TensorInfo;

constexpr int64_t kMinRunBytes = 64;

// The copy geometry of one slice: `rows` runs of `run` bytes; row i's source is at
// offset + sum_k idx_k * stride_k (bytes), idx = i in the mixed radix of `dims`.
struct Copy {
  ops::SlicePlan plan;
  std::vector<int64_t> dims, strides;  // the outer dims (of the output) and their source strides
  int64_t rows = 0, run = 0, offset = 0;
  bool gather = false;                  // strided gather instead (short runs, innermost step != 1)
  std::vector<int64_t> gather_strides;  // the gather's source strides and offset (elements)
  int64_t gather_offset = 0;
};

Copy MakeCopy(const Shape& in, ops::SlicePlan plan, size_t esz) {
  Copy c;
  ops::SliceGather(in, plan, &c.gather_strides, &c.gather_offset);
  const auto e = static_cast<int64_t>(esz);
  const auto r = static_cast<int64_t>(in.size());
  c.offset = c.gather_offset * e;
  int64_t d = r - 1;
  c.run = e;
  while (d >= 0 && plan.step[d] == 1 && plan.start[d] == 0 && plan.out[d] == in[d])
    c.run *= in[d--];
  if (d >= 0 && plan.step[d] == 1) c.run *= plan.out[d--];
  c.rows = 1;
  for (int64_t k = 0; k <= d; ++k) {
    c.dims.push_back(plan.out[k]);
    c.strides.push_back(c.gather_strides[k] * e);
    c.rows *= plan.out[k];
  }
  c.gather = c.run < kMinRunBytes || (r > 0 && plan.step[r - 1] != 1);
  c.plan = std::move(plan);
  return c;
}

class SliceCopy final : public runtime::Kernel {
 public:
  SliceCopy(const ir::Node&, const ir::Op& op)
      : op_(op), a_(runtime::AttrsOf<ops::SliceAttrs>(op)) {}

  Status Prepare(runtime::PrepareContext* ctx) override {
    ready_ = false;
    std::vector<const Tensor*> ints(5, nullptr);
    for (size_t i = 1; i < 5 && i < ctx->inputs.size(); ++i) {
      if (ctx->inputs[i].dtype == DataType::kUndefined) continue;
      if (i >= ctx->constants.size() || ctx->constants[i] == nullptr) return OkStatus();
      ints[i] = ctx->constants[i];
    }
    ops::SlicePlan plan;
    if (!ops::SlicePlanOf(op_.opset(), a_, ctx->inputs[0].shape, ints, &plan).empty())
      return OkStatus();  // Run says why
    copy_ = MakeCopy(ctx->inputs[0].shape, std::move(plan), DataTypeSize(ctx->inputs[0].dtype));
    ready_ = true;
    return OkStatus();
  }

  Status Run(const ir::ComputeContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    if (ready_) return Execute(copy_, x, &ctx.out(0));
    std::vector<const Tensor*> ints(5, nullptr);
    for (size_t i = 1; i < 5; ++i)
      if (ctx.has(i)) ints[i] = &ctx.in(i);
    ops::SlicePlan plan;
    const std::string err = ops::SlicePlanOf(op_.opset(), a_, x.shape(), ints, &plan);
    if (!err.empty()) return op_.RunError(err);
    return Execute(MakeCopy(x.shape(), std::move(plan), DataTypeSize(x.dtype())), x, &ctx.out(0));
  }

 private:
  Status Execute(const Copy& c, const Tensor& x, Tensor* y) const {
    if (c.plan.out != y->shape())
      return op_.RunError("output was allocated as " + ShapeToString(y->shape()) +
                          " but the slice has shape " + ShapeToString(c.plan.out));
    if (NumElements(c.plan.out) == 0) return OkStatus();
    if (c.gather) {
      ops::StridedGather(y->raw(), x.raw(), c.plan.out, c.gather_strides, c.gather_offset,
                         DataTypeSize(x.dtype()));
      return OkStatus();
    }
    const auto* src = static_cast<const char*>(x.raw()) + c.offset;
    auto* dst = static_cast<char*>(y->raw());
    const int64_t grain = std::max<int64_t>(1, (64 << 10) / c.run);  // about 64 KB per task
    ParallelFor(c.rows, grain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        int64_t at = 0, rest = i;
        for (int64_t k = static_cast<int64_t>(c.dims.size()) - 1; k >= 0; --k) {
          at += (rest % c.dims[k]) * c.strides[k];
          rest /= c.dims[k];
        }
        std::memcpy(dst + i * c.run, src + at, static_cast<size_t>(c.run));
      }
    });
    return OkStatus();
  }

  const ir::Op& op_;
  const ops::SliceAttrs& a_;
  Copy copy_;
  bool ready_ = false;
};

KernelSupport SupportsSlice(const ir::Node&, const ir::Op& op, const std::vector<TensorInfo>& in) {
  if (op.attrs<ops::SliceAttrs>() == nullptr) return {false, "no Slice attributes"};
  if (in.empty() || DataTypeSize(in[0].dtype) == 0) return {false, "needs a fixed-size dtype"};
  return {true, ""};
}

KILN_REGISTER_KERNEL(runtime::KernelDef{"cpu.slice.copy",
                                        "Slice",
                                        "",
                                        1,
                                        ir::kMaxOpset,
                                        Backend::kCpu,
                                        10,
                                        SupportsSlice,
                                        CreateKernel<SliceCopy>,
                                        {}});

}  // namespace
}  // namespace kiln::backends::cpu
