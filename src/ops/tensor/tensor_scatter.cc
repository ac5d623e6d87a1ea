// TensorScatter (opset 24): the KV-cache update of attention decoders. present = past, then for
// each prefix index p of the dims before `axis` (batch b = p[0]) and each position s of update's
// sequence axis, present[p, w_b + s, ...] = update[p, s, ...], w_b = write_indices[b] (0 without
// the input); mode "circular" wraps w_b + s modulo the cache's length, mode "linear" (default)
// requires it to fit (an error at run time naming the batch and index otherwise). Any element
// type: elements are copied as bytes. Reference kernel.
#include <cstring>

#include "ops/common.h"
#include "ops/op_cases.h"

namespace kiln::ops {
namespace {

struct TensorScatterAttrs : ir::OpAttrs {
  int64_t axis = -2;
  bool circular = false;
};

class TensorScatterOp final : public ir::Op {
 public:
  static StatusOr<std::unique_ptr<ir::Op>> Create(const ir::Node& node) {
    auto op = std::make_unique<TensorScatterOp>(node);
    op->a_.axis = node.GetInt("axis", -2);
    const std::string mode = node.GetString("mode", "linear");
    if (mode != "linear" && mode != "circular")
      return ir::AttrError(node, "mode must be 'linear' or 'circular'; got '" + mode + "'");
    op->a_.circular = mode == "circular";
    return std::unique_ptr<ir::Op>(std::move(op));
  }
  explicit TensorScatterOp(const ir::Node& node) : Op(node) {}

  Status Infer(ir::InferContext& ctx) const override {
    if (DataTypeSize(ctx.dtype(0)) == 0 || ctx.dtype(1) != ctx.dtype(0))
      return ctx.Error(std::string("past_cache and update must have one storable type; got ") +
                       DataTypeName(ctx.dtype(0)) + " and " + DataTypeName(ctx.dtype(1)));
    const Shape& past = ctx.shape(0);
    const Shape& upd = ctx.shape(1);
    const int64_t rank = static_cast<int64_t>(past.size());
    if (rank < 2)
      return ctx.Error("past_cache must have rank 2 or more; got " + ShapeToString(past));
    KILN_ASSIGN_OR_RETURN(const int64_t axis, NormalizeAxis(a_.axis, rank));
    if (axis == 0) return ctx.Error("axis must not be the batch axis 0");
    bool ok = upd.size() == past.size() && upd[axis] <= past[axis];
    for (int64_t d = 0; ok && d < rank; ++d) ok = d == axis || upd[d] == past[d];
    if (!ok)
      return ctx.Error("update must have past_cache's shape " + ShapeToString(past) +
                       " but a sequence dim (axis " + std::to_string(axis) + ") no longer; got " +
                       ShapeToString(upd));
    if (ctx.has_input(2)) {
      KILN_RETURN_IF_ERROR(ctx.ExpectDtype(2, {DataType::kInt64}));
      if (ctx.shape(2) != Shape{past[0]})
        return ctx.Error("write_indices must be [batch] = [" + std::to_string(past[0]) + "]; got " +
                         ShapeToString(ctx.shape(2)));
    }
    ctx.SetOutput(0, ctx.dtype(0), past);
    return OkStatus();
  }

  Status Compute(const ir::ComputeContext& ctx) const override {
    const Tensor& past = ctx.in(0);
    const Tensor& upd = ctx.in(1);
    Tensor& out = ctx.out(0);
    const int64_t rank = past.rank();
    const int64_t axis = a_.axis < 0 ? a_.axis + rank : a_.axis;
    const size_t es = DataTypeSize(past.dtype());
    if (out.raw() != past.raw() && past.bytes() > 0)
      std::memcpy(out.raw(), past.raw(), past.bytes());
    int64_t inner = 1, outer = 1;  // elements after the axis; prefixes before it
    for (int64_t d = axis + 1; d < rank; ++d) inner *= past.shape()[d];
    for (int64_t d = 0; d < axis; ++d) outer *= past.shape()[d];
    const int64_t per_batch = outer / std::max<int64_t>(1, past.shape()[0]);
    const int64_t len = past.shape()[axis], seq = upd.shape()[axis];
    const auto* src = static_cast<const unsigned char*>(upd.raw());
    auto* dst = static_cast<unsigned char*>(out.raw());
    for (int64_t p = 0; p < outer; ++p) {
      const int64_t b = p / std::max<int64_t>(1, per_batch);
      const int64_t w = ctx.has(2) ? ctx.in(2).data<int64_t>()[b] : 0;
      for (int64_t s = 0; s < seq; ++s) {
        int64_t at = w + s;
        if (a_.circular) at = ((at % len) + len) % len;
        if (at < 0 || at >= len)
          return RunError("write index " + std::to_string(w) + " + " + std::to_string(s) +
                          " of batch " + std::to_string(b) + " is outside the cache's " +
                          std::to_string(len) + " positions (mode linear)");
        std::memcpy(dst + ((p * len + at) * inner) * es, src + ((p * seq + s) * inner) * es,
                    static_cast<size_t>(inner) * es);
      }
    }
    return OkStatus();
  }
  int InPlaceInput() const override { return 0; }
  const ir::OpAttrs* attributes() const override { return &a_; }

 private:
  TensorScatterAttrs a_;
};
KILN_REGISTER_OP("TensorScatter", 24, ir::kMaxOpset, &TensorScatterOp::Create);

// Cases: prefill (no write_indices), decode at per-batch indices, circular wrap, another axis.
std::vector<OpCase> TensorScatterCases() {
  return {OpCase("prefill [2,3,7,5] <- [2,3,2,5]", 24)
              .In(CaseTensor({2, 3, 7, 5}, 1))
              .In(CaseTensor({2, 3, 2, 5}, 2)),
          OpCase("decode [2,3,7,5] <- [2,3,1,5] at [6,0]", 24)
              .In(CaseTensor({2, 3, 7, 5}, 3))
              .In(CaseTensor({2, 3, 1, 5}, 4))
              .In(Tensor::FromVector<int64_t>({6, 0}, {2})),
          OpCase("circular [3,5,4] <- [3,3,4] at [4,2,0] axis 1", 24)
              .Str("mode", "circular")
              .Int("axis", 1)
              .In(CaseTensor({3, 5, 4}, 5))
              .In(CaseTensor({3, 3, 4}, 6))
              .In(Tensor::FromVector<int64_t>({4, 2, 0}, {3}))};
}
KILN_REGISTER_OP_CASES("", "TensorScatter", &TensorScatterCases);

}  // namespace
}  // namespace kiln::ops
