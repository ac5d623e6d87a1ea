// Transpose: output dim i is input dim perm[i] (default: reversed dims). The reference kernel is a
// strided gather over the output (see tensor_util.h), copying elements as opaque words, so any
// fixed-size dtype works.
#include "ops/tensor/transpose.h"

#include <algorithm>

#include "ops/common.h"
#include "ops/op_cases.h"
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

// Kernel cases (ops/op_cases.h): cpu.transpose.onednn takes float32 and 8-bit inputs of rank
// 1..12, cuda.transpose.kernel float32 up to rank 6. NCHW <-> NHWC, other perms, the default
// (reversed) perm, an identity perm, ranks 1, 2, 6 and 7, size-1 dims, 8-bit and int64.
std::vector<OpCase> TransposeCases() {
  struct Spec {
    int opset;
    DataType dtype;
    Shape x;
    std::vector<int64_t> perm;  // empty: the attribute is absent (reversed dims)
  };
  using D = DataType;
  const std::vector<Spec> specs = {
      {13, D::kFloat, {2, 16, 5, 7}, {0, 2, 3, 1}},
      {13, D::kFloat, {2, 3, 4, 5}, {0, 2, 3, 1}},
      {13, D::kFloat, {2, 5, 7, 16}, {0, 3, 1, 2}},
      {13, D::kFloat, {2, 16, 5, 7}, {3, 1, 0, 2}},
      {13, D::kFloat, {1, 3, 130, 129}, {0, 2, 3, 1}},
      {1, D::kFloat, {3, 1, 7}, {}},
      {21, D::kFloat, {5}, {0}},
      {13, D::kFloat, {64, 97}, {1, 0}},
      {13, D::kFloat, {4, 1, 9}, {0, 1, 2}},
      {13, D::kFloat, {2, 1, 3, 1, 4, 5}, {5, 3, 1, 0, 2, 4}},
      {13, D::kFloat, {2, 3, 2, 1, 2, 3, 2}, {}},
      {13, D::kUInt8, {3, 5, 7}, {2, 0, 1}},
      {13, D::kInt8, {17, 1, 33}, {1, 2, 0}},
      {13, D::kInt64, {2, 3, 4}, {1, 0, 2}},
  };
  std::vector<OpCase> cases;
  uint32_t seed = 171;
  for (const Spec& s : specs) {
    OpCase c(std::string("Transpose ") + DataTypeName(s.dtype) + ShapeToString(s.x) + " perm " +
                 (s.perm.empty() ? "reversed" : IntsToString(s.perm)),
             s.opset);
    if (!s.perm.empty()) c.Ints("perm", s.perm);
    if (s.dtype == D::kFloat)
      c.In(CaseTensor(s.x, seed++));
    else
      c.In(CaseInts(s.dtype, s.x, seed++, s.dtype == D::kUInt8 ? 0 : -100, 100));
    cases.push_back(std::move(c));
  }
  return cases;
}
KILN_REGISTER_OP_CASES("", "Transpose", &TransposeCases);

}  // namespace
}  // namespace kiln::ops
