// com.microsoft FusedMatMul (opset 1; also its older name TransposeMatMul): Y = alpha * A' B',
// what ONNX Runtime's optimizer writes for Transpose -> MatMul -> Mul/Div by a constant.
//
// A' is A with its last two dims swapped when `transA`; with `transBatchA` (rank >= 3) A's first
// dim moves behind the batch dims: perm [1, ..., r-2, 0, r-1] ([1, ..., r-2, r-1, 0] with
// transA too), so A [M, B1.., K] multiplies as [B1.., M, K]. B' likewise with transB and
// transBatchB. Then numpy matmul rules (broadcast batch dims; 1-D operands are not transposed).
// Semantics checked against ONNX Runtime 1.32 (tests/models/contrib_ops_check.py).
//
// Reference kernel: the operands permuted, the MatMul reference routine (ops/nn/matmul.h, double
// accumulation, rounded to float32), then times alpha in float32. float32 only.
#include <memory>
#include <string>
#include <vector>

#include "ops/common.h"
#include "ops/nn/matmul.h"
#include "ops/op_cases.h"

namespace kiln::ops {
namespace {

using ir::ComputeContext;
using ir::InferContext;
using ir::Node;

// The permutation FusedMatMul applies to an operand of rank r.
std::vector<int64_t> OperandPerm(int64_t r, bool trans, bool trans_batch) {
  std::vector<int64_t> perm;
  if (r < 2) return {0};
  if (trans_batch && r >= 3) {
    for (int64_t d = 1; d <= r - 2; ++d) perm.push_back(d);
    if (trans)
      perm.insert(perm.end(), {r - 1, 0});
    else
      perm.insert(perm.end(), {0, r - 1});
    return perm;
  }
  for (int64_t d = 0; d < r - 2; ++d) perm.push_back(d);
  if (trans)
    perm.insert(perm.end(), {r - 1, r - 2});
  else
    perm.insert(perm.end(), {r - 2, r - 1});
  return perm;
}

Shape Permuted(const Shape& s, const std::vector<int64_t>& perm) {
  if (s.empty()) return s;
  Shape r;
  for (int64_t p : perm) r.push_back(s[p]);
  return r;
}

bool IsIdentity(const std::vector<int64_t>& perm) {
  for (size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != static_cast<int64_t>(i)) return false;
  return true;
}

// t permuted by perm, as a new float32 tensor.
Tensor Transposed(const Tensor& t, const std::vector<int64_t>& perm) {
  const Shape& s = t.shape();
  const Shape out = Permuted(s, perm);
  Tensor r = Tensor::Empty(DataType::kFloat, out);
  const std::vector<int64_t> in_strides = Strides(s);
  const size_t rank = out.size();
  std::vector<int64_t> idx(rank, 0);
  const float* src = t.data<float>();
  float* dst = r.data<float>();
  for (int64_t i = 0, n = t.numel(); i < n; ++i) {
    int64_t at = 0;
    for (size_t d = 0; d < rank; ++d) at += idx[d] * in_strides[perm[d]];
    dst[i] = src[at];
    for (int64_t d = static_cast<int64_t>(rank) - 1; d >= 0; --d) {
      if (++idx[d] < out[d]) break;
      idx[d] = 0;
    }
  }
  return r;
}

class MsFusedMatMulOp final : public ir::Op {
 public:
  static StatusOr<std::unique_ptr<ir::Op>> Create(const Node& node) {
    std::unique_ptr<MsFusedMatMulOp> op(new MsFusedMatMulOp(node));
    op->alpha_ = node.GetFloat("alpha", 1.f);
    const char* names[] = {"transA", "transB", "transBatchA", "transBatchB"};
    bool* flags[] = {&op->trans_a_, &op->trans_b_, &op->batch_a_, &op->batch_b_};
    for (int i = 0; i < 4; ++i) {
      const int64_t v = node.GetInt(names[i], 0);
      if (v != 0 && v != 1)
        return ir::AttrError(node,
                             std::string(names[i]) + " must be 0 or 1; got " + std::to_string(v));
      *flags[i] = v == 1;
    }
    return std::unique_ptr<ir::Op>(std::move(op));
  }

  Status Infer(InferContext& ctx) const override {
    if (ctx.num_inputs() < 2 || !ctx.has_input(0) || !ctx.has_input(1))
      return ctx.Error("FusedMatMul needs inputs A and B");
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(0, {DataType::kFloat}));
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(1, {DataType::kFloat}));
    const Shape a = Permuted(ctx.shape(0), PermA(ctx.rank(0)));
    const Shape b = Permuted(ctx.shape(1), PermB(ctx.rank(1)));
    auto d = nn::ComputeMatMulDims(a, b);
    if (!d.ok())
      return ctx.Error(d.status().message() + " (after transA/transB/transBatchA/transBatchB)");
    ctx.SetOutput(0, DataType::kFloat, d->out);
    return OkStatus();
  }

  Status Compute(const ComputeContext& ctx) const override {
    const std::vector<int64_t> pa = PermA(ctx.in(0).rank()), pb = PermB(ctx.in(1).rank());
    Tensor ta, tb;
    const Tensor* a = &ctx.in(0);
    const Tensor* b = &ctx.in(1);
    if (!IsIdentity(pa)) ta = Transposed(*a, pa), a = &ta;
    if (!IsIdentity(pb)) tb = Transposed(*b, pb), b = &tb;
    auto d = nn::ComputeMatMulDims(a->shape(), b->shape());
    if (!d.ok()) return RunError(d.status().message());
    Tensor& y = ctx.out(0);
    nn::MatMulFloat(a->data<float>(), b->data<float>(), y.data<float>(), *d);
    if (alpha_ != 1.f) {
      float* yp = y.data<float>();
      for (int64_t i = 0, n = y.numel(); i < n; ++i) yp[i] *= alpha_;
    }
    return OkStatus();
  }

 private:
  explicit MsFusedMatMulOp(const Node& node) : Op(node) {}
  std::vector<int64_t> PermA(int64_t r) const { return OperandPerm(r, trans_a_, batch_a_); }
  std::vector<int64_t> PermB(int64_t r) const { return OperandPerm(r, trans_b_, batch_b_); }
  float alpha_ = 1.f;
  bool trans_a_ = false, trans_b_ = false, batch_a_ = false, batch_b_ = false;
};

StatusOr<std::unique_ptr<ir::Op>> CreateMsFusedMatMul(const Node& node) {
  return MsFusedMatMulOp::Create(node);
}

KILN_REGISTER_OP_DOMAIN("com.microsoft", "FusedMatMul", 1, 1, &CreateMsFusedMatMul);
KILN_REGISTER_OP_DOMAIN("com.microsoft", "TransposeMatMul", 1, 1, &CreateMsFusedMatMul);

// Kernel cases: each transpose flag alone and together, alpha, batch broadcast, 2-D and 1-D
// operands, the transBatch forms on 3-D and 4-D operands.
std::vector<OpCase> MsFusedMatMulCases() {
  auto mm = [](const std::string& name, const Shape& a, const Shape& b, uint32_t seed) {
    return OpCase(name, 1).In(CaseTensor(a, seed)).In(CaseTensor(b, seed + 1));
  };
  return {mm("[2,3,4,5] x [2,3,5,6]", {2, 3, 4, 5}, {2, 3, 5, 6}, 400),
          mm("transA [3,5,4] x [5,7], alpha 0.125", {3, 5, 4}, {5, 7}, 402)
              .Int("transA", 1)
              .Float("alpha", 0.125f),
          mm("transB [4,5] x [1,6,5]", {4, 5}, {1, 6, 5}, 404).Int("transB", 1),
          mm("transA transB [2,5,3] x [2,1,5]", {2, 5, 3}, {2, 1, 5}, 406)
              .Int("transA", 1)
              .Int("transB", 1),
          mm("transBatchA [4,2,3,5] x [2,3,5,6]", {4, 2, 3, 5}, {2, 3, 5, 6}, 408)
              .Int("transBatchA", 1),
          mm("transBatchA transA [5,2,3,4] x [2,3,5,6]", {5, 2, 3, 4}, {2, 3, 5, 6}, 410)
              .Int("transBatchA", 1)
              .Int("transA", 1),
          mm("transBatchB [3,4,5] x [5,3,6]", {3, 4, 5}, {5, 3, 6}, 412).Int("transBatchB", 1),
          mm("transBatchB transB [3,4,5] x [6,3,5], alpha -2", {3, 4, 5}, {6, 3, 5}, 414)
              .Int("transBatchB", 1)
              .Int("transB", 1)
              .Float("alpha", -2.f),
          mm("1-D [5] x [5,3]", {5}, {5, 3}, 416)};
}
KILN_REGISTER_OP_CASES("com.microsoft", "FusedMatMul", &MsFusedMatMulCases);

}  // namespace
}  // namespace kiln::ops
