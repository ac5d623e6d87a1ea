// cpu.cast.parallel / cpu.castlike.parallel: Cast and CastLike with the op's own element
// conversion (ops::CastElements) over ranges spread across the threads. The dynamic int8
// models' int32 -> float32 Casts after every MatMulInteger and the float16 lowering's Casts at
// the model's edges were single-threaded loops.
#include <cstdint>

#include "backends/cpu/onednn_common.h"
#include "core/threading.h"
#include "ops/tensor/cast.h"

namespace kiln::backends::cpu {
namespace {

using runtime::KernelSupport;
using runtime::TensorInfo;

// Elements per range: below this a Cast runs on the calling thread.
constexpr int64_t kGrain = 1 << 14;

class CastParallel final : public runtime::Kernel {
 public:
  CastParallel(const ir::Node&, const ir::Op& op)
      : rules_(runtime::AttrsOf<ops::CastAttrs>(op).rules) {}

  Status Prepare(runtime::PrepareContext* ctx) override {
    from_ = ctx->inputs[0].dtype;
    to_ = ctx->outputs[0].dtype;
    from_size_ = DataTypeSize(from_);
    to_size_ = DataTypeSize(to_);
    if (!ops::CastElements(from_, to_, nullptr, nullptr, 0))  // castable: checked once here
      return InvalidArgument(std::string("cannot cast ") + DataTypeName(from_) + " to " +
                             DataTypeName(to_));
    return OkStatus();
  }

  Status Run(const ir::ComputeContext& ctx) const override {
    const char* src = static_cast<const char*>(ctx.in(0).raw());
    char* dst = static_cast<char*>(ctx.out(0).raw());
    ParallelFor(ctx.in(0).numel(), kGrain, [&](int64_t begin, int64_t end) {
      ops::CastElements(from_, to_, src + begin * from_size_, dst + begin * to_size_, end - begin,
                        rules_);
    });
    return OkStatus();
  }

 private:
  DataType from_ = DataType::kUndefined, to_ = DataType::kUndefined;
  int64_t from_size_ = 0, to_size_ = 0;
  ops::CastRules rules_;
};

KernelSupport SupportsCast(const ir::Node&, const ir::Op& op, const std::vector<TensorInfo>& in) {
  const DataType to = runtime::AttrsOf<ops::CastAttrs>(op).to;  // kUndefined for CastLike
  if (in[0].dtype == DataType::kString || to == DataType::kString ||
      (in.size() > 1 && in[1].dtype == DataType::kString))
    return {false, "strings"};
  for (int64_t d : in[0].shape)
    if (d < 0) return {false, "unknown dims"};
  return {true, ""};
}

#define KILN_CAST_KERNEL(NAME, OP, SINCE)                             \
  KILN_REGISTER_KERNEL(runtime::KernelDef{NAME,                       \
                                          OP,                         \
                                          "",                         \
                                          SINCE,                      \
                                          ir::kMaxOpset,              \
                                          Backend::kCpu,              \
                                          10,                         \
                                          SupportsCast,               \
                                          CreateKernel<CastParallel>, \
                                          {}})
KILN_CAST_KERNEL("cpu.cast.parallel", "Cast", 1);
KILN_CAST_KERNEL("cpu.castlike.parallel", "CastLike", 15);

}  // namespace
}  // namespace kiln::backends::cpu
