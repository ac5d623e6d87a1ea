// EyeLike (opset 9, 22): a 2-D tensor of input's shape holding 1 on the diagonal shifted by k
// (out[i][i + k] = 1; k > 0 above the main diagonal) and 0 elsewhere, in the dtype attribute's
// type or else input's. Input values are not read. float16 dtype becomes float32 (lowered before
// the op is created); other dtypes kiln tensors cannot hold (double, uint16, ...) are Unsupported.
#include <cstring>

#include "ops/common.h"
#include "ops/op_cases.h"
#include "ops/tensor/tensor_util.h"

namespace kiln::ops {
namespace {

struct EyeLikeAttrs : ir::OpAttrs {
  DataType dtype = DataType::kUndefined;  // kUndefined: input's dtype
  int64_t k = 0;
};

class EyeLikeOp final : public ir::Op {
 public:
  static StatusOr<std::unique_ptr<ir::Op>> Create(const ir::Node& node) {
    auto op = std::make_unique<EyeLikeOp>(node);
    op->a_.k = node.GetInt("k", 0);
    if (node.HasAttr("dtype")) {
      const int64_t code = node.GetInt("dtype", 0);
      const auto dtype = static_cast<DataType>(code);
      if (code <= 0 || code == static_cast<int64_t>(DataType::kString) || DataTypeSize(dtype) == 0)
        return ir::AttrError(
            node, "dtype must be a numeric or bool tensor type; got " + std::to_string(code));
      if (!IsSupportedDataType(dtype))
        return Unsupported("failed to load " + node.Describe() + ": dtype must be one kiln " +
                           "tensors hold; got " + DataTypeName(dtype));
      op->a_.dtype = dtype;
    }
    return std::unique_ptr<ir::Op>(std::move(op));
  }
  explicit EyeLikeOp(const ir::Node& node) : Op(node) {}

  Status Infer(ir::InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ExpectFixedSize(ctx, 0));
    if (ctx.rank(0) != 2)
      return ctx.Error("input must have rank 2; got rank " + std::to_string(ctx.rank(0)));
    const DataType out = a_.dtype != DataType::kUndefined ? a_.dtype : ctx.dtype(0);
    if (!IsSupportedDataType(out))
      return ctx.Error(std::string("output dtype must be one kiln tensors hold; got ") +
                       DataTypeName(out));
    ctx.SetOutput(0, out, ctx.shape(0));
    return OkStatus();
  }

  Status Compute(const ir::ComputeContext& ctx) const override {
    Tensor& y = ctx.out(0);
    const int64_t rows = y.shape()[0], cols = y.shape()[1];
    const size_t esz = DataTypeSize(y.dtype());
    auto* dst = static_cast<unsigned char*>(y.raw());
    if (y.numel() > 0) std::memset(dst, 0, y.numel() * esz);
    unsigned char one[8] = {};
    if (!StoreAsDtype(y.dtype(), 1.0, one))
      return RunError(std::string("output dtype must be numeric or bool; got ") +
                      DataTypeName(y.dtype()));
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t j = i + a_.k;
      if (j >= 0 && j < cols) std::memcpy(dst + (i * cols + j) * esz, one, esz);
    }
    return OkStatus();
  }

  const ir::OpAttrs* attributes() const override { return &a_; }

 private:
  EyeLikeAttrs a_;
};
KILN_REGISTER_OP("EyeLike", 9, ir::kMaxOpset, &EyeLikeOp::Create);

// Reference cases: k on, above, below and past the diagonal; dtype attribute; uint8 input.
std::vector<OpCase> EyeLikeCases() {
  std::vector<OpCase> cases;
  for (int64_t k : {0, 2, -1, 9})
    cases.push_back(
        OpCase("float32[4,5] k " + std::to_string(k), 22).Int("k", k).In(CaseTensor({4, 5}, 61)));
  cases.push_back(OpCase("uint8[3,3] as int64", 9)
                      .Int("dtype", static_cast<int64_t>(DataType::kInt64))
                      .In(CaseInts(DataType::kUInt8, {3, 3}, 62, 0, 255)));
  cases.push_back(
      OpCase("int32[2,6] k 3", 9).Int("k", 3).In(CaseInts(DataType::kInt32, {2, 6}, 63, 0, 9)));
  return cases;
}
KILN_REGISTER_OP_CASES("", "EyeLike", &EyeLikeCases);

}  // namespace
}  // namespace kiln::ops
