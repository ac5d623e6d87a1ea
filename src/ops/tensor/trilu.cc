// Trilu (trilu.h): validation, inference, the reference kernel and the kernel cases.
#include "ops/tensor/trilu.h"

#include <cstring>

#include "ops/common.h"
#include "ops/op_cases.h"

namespace kiln::ops {
namespace {

class TriluOp final : public ir::Op {
 public:
  static StatusOr<std::unique_ptr<ir::Op>> Create(const ir::Node& node) {
    const int64_t upper = node.GetInt("upper", 1);
    if (upper != 0 && upper != 1)
      return ir::AttrError(node, "upper must be 0 or 1; got " + std::to_string(upper));
    auto op = std::make_unique<TriluOp>(node);
    op->a_.upper = upper == 1;
    return std::unique_ptr<ir::Op>(std::move(op));
  }
  explicit TriluOp(const ir::Node& node) : Op(node) {}

  Status Infer(ir::InferContext& ctx) const override {
    if (ctx.rank(0) < 2)
      return ctx.Error("input must have rank >= 2; got rank " + std::to_string(ctx.rank(0)));
    if (DataTypeSize(ctx.dtype(0)) == 0) return ctx.Error("input 0 must have a fixed-size dtype");
    if (ctx.has_input(1)) {
      KILN_RETURN_IF_ERROR(ctx.ExpectDtype(1, {DataType::kInt64}));
      if (NumElements(ctx.shape(1)) != 1) return ctx.Error("k must be a scalar");
    }
    ctx.SetOutput(0, ctx.dtype(0), ctx.shape(0));
    return OkStatus();
  }

  Status Compute(const ir::ComputeContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    const Shape& s = x.shape();
    const int64_t rows = s[s.size() - 2], cols = s.back();
    const int64_t matrices = rows * cols == 0 ? 0 : x.numel() / (rows * cols);
    const int64_t k = ctx.has(1) ? ctx.in(1).data<int64_t>()[0] : 0;
    const size_t size = DataTypeSize(x.dtype());
    const auto* src = static_cast<const unsigned char*>(x.raw());
    auto* dst = static_cast<unsigned char*>(ctx.out(0).raw());
    for (int64_t m = 0; m < matrices; ++m)
      for (int64_t r = 0; r < rows; ++r) {
        const TriluSpan span = TriluKeptColumns(r, rows, cols, k, a_.upper);
        for (int64_t c = 0; c < cols; ++c) {
          const size_t at = static_cast<size_t>((m * rows + r) * cols + c) * size;
          if (c >= span.begin && c < span.end)
            std::memcpy(dst + at, src + at, size);
          else
            std::memset(dst + at, 0, size);
        }
      }
    return OkStatus();
  }

  const ir::OpAttrs* attributes() const override { return &a_; }

 private:
  TriluAttrs a_;
};
KILN_REGISTER_OP("Trilu", 14, ir::kMaxOpset, &TriluOp::Create);

// Kernel cases: both triangles; k absent, positive, negative and beyond the matrix; a batch of
// odd-sized matrices, a single row, and int64 and uint8 data (the kernels copy bytes).
std::vector<OpCase> TriluCases() {
  std::vector<OpCase> cases;
  uint32_t seed = 1;
  for (int upper : {1, 0}) {
    const std::string tri = upper ? "upper" : "lower";
    cases.push_back(
        OpCase(tri + " [2,3,5,7]", 14).In(CaseTensor({2, 3, 5, 7}, seed++)).Int("upper", upper));
    for (int64_t k : {2, -3, 9, -20})
      cases.push_back(OpCase(tri + " [3,7,4] k " + std::to_string(k), 14)
                          .In(CaseTensor({3, 7, 4}, seed++))
                          .Const(Tensor::FromVector<int64_t>({k}, {}))
                          .Int("upper", upper));
    cases.push_back(OpCase(tri + " [1,9] k -1 as an input", 14)
                        .In(CaseTensor({1, 9}, seed++))
                        .In(Tensor::FromVector<int64_t>({-1}, {}))
                        .Int("upper", upper));
    cases.push_back(OpCase(tri + " int64 [4,6]", 14)
                        .In(CaseInts(DataType::kInt64, {4, 6}, seed++, -1000, 1000))
                        .Int("upper", upper));
    cases.push_back(OpCase(tri + " uint8 [2,5,5] k 1", 14)
                        .In(CaseInts(DataType::kUInt8, {2, 5, 5}, seed++, 0, 255))
                        .Const(Tensor::FromVector<int64_t>({1}, {}))
                        .Int("upper", upper));
  }
  return cases;
}
KILN_REGISTER_OP_CASES("", "Trilu", &TriluCases);

}  // namespace
}  // namespace kiln::ops
