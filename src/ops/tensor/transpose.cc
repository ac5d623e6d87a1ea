// Transpose: output dim i is input dim perm[i] (default: reversed dims). The reference kernel is a
// strided gather over the output (see tensor_util.h), copying elements as opaque words, so any
// fixed-size dtype works.
#include <algorithm>

#include "ops/attrs.h"
#include "ops/common.h"
#include "ops/tensor/tensor_util.h"

namespace kiln::ops {
namespace {

using ir::ComputeContext;
using ir::InferContext;
using ir::Node;
using ir::Op;

class TransposeOp : public Op {
 public:
  const ir::OpAttrs* attributes() const override { return &a_; }
  static StatusOr<std::unique_ptr<Op>> Create(const Node& node) {
    std::vector<int64_t> perm = node.GetInts("perm");
    std::vector<bool> seen(perm.size(), false);
    for (int64_t p : perm) {
      if (p < 0 || p >= static_cast<int64_t>(perm.size()) || seen[p])
        return ir::AttrError(node,
                             "perm must be a permutation of 0..n-1; got " + IntsToString(perm));
      seen[p] = true;
    }
    return std::unique_ptr<Op>(new TransposeOp(node, node.HasAttr("perm"), std::move(perm)));
  }
  Status Infer(InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ExpectFixedSize(ctx, 0));
    const auto perm = Perm(ctx.rank(0));
    if (static_cast<int64_t>(perm.size()) != ctx.rank(0))
      return ctx.Error("perm must have one entry per input dim (" + std::to_string(ctx.rank(0)) +
                       "); got " + IntsToString(perm));
    Shape out(perm.size());
    for (size_t i = 0; i < perm.size(); ++i) out[i] = ctx.shape(0)[perm[i]];
    ctx.SetOutput(0, ctx.dtype(0), out);
    return OkStatus();
  }
  Status Compute(const ComputeContext& ctx) const override {
    const Tensor& in = ctx.in(0);
    TransposeBytes(ctx.out(0).raw(), in.raw(), in.shape(), Perm(in.rank()),
                   DataTypeSize(in.dtype()));
    return OkStatus();
  }

 private:
  TransposeOp(const Node& node, bool has_perm, std::vector<int64_t> perm) : Op(node) {
    a_.has_perm = has_perm;
    a_.perm = std::move(perm);
  }
  std::vector<int64_t> Perm(int64_t rank) const {
    if (a_.has_perm) return a_.perm;
    std::vector<int64_t> p(rank);
    for (int64_t i = 0; i < rank; ++i) p[i] = rank - 1 - i;
    return p;
  }
  TransposeAttrs a_;
};
KILN_REGISTER_OP("Transpose", 1, ir::kMaxOpset, &TransposeOp::Create);

}  // namespace
}  // namespace kiln::ops
