// Two feature ops of the ai.onnx.ml domain (opset 1), reference kernels:
//   Binarizer: Y = X > threshold ? 1 : 0, in X's type (float32, float64, int32, int64).
//   ArrayFeatureExtractor: Y = X[..., indices] along the last axis, indices an int64 tensor of any
//   shape (flattened); Y's shape is X's with the last dim replaced by the number of indices, and
//   [1, count] for a 1-D X (what ONNX Runtime and ONNX's reference do). An index outside [0, last
//   dim) is an error at run time naming it.
#include <cstring>

#include "ops/common.h"
#include "ops/op_cases.h"
#include "ops/typed_dispatch.h"

namespace kiln::ops {
namespace {

constexpr const char* kMl = "ai.onnx.ml";

struct BinarizerAttrs : ir::OpAttrs {
  float threshold = 0;
};

class BinarizerOp final : public ir::Op {
 public:
  static StatusOr<std::unique_ptr<ir::Op>> Create(const ir::Node& node) {
    auto op = std::make_unique<BinarizerOp>(node);
    op->a_.threshold = node.GetFloat("threshold", 0.f);
    return std::unique_ptr<ir::Op>(std::move(op));
  }
  explicit BinarizerOp(const ir::Node& node) : Op(node) {}

  Status Infer(ir::InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(
        0, {DataType::kFloat, DataType::kDouble, DataType::kInt32, DataType::kInt64}));
    ctx.SetOutput(0, ctx.dtype(0), ctx.shape(0));
    return OkStatus();
  }

  Status Compute(const ir::ComputeContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    return DispatchAmong<float, double, int32_t, int64_t>(x.dtype(), describe(), [&](auto tag) {
      using T = decltype(tag);
      const T* xp = x.data<T>();
      T* yp = ctx.out(0).data<T>();
      for (int64_t i = 0; i < x.numel(); ++i)
        yp[i] = static_cast<double>(xp[i]) > static_cast<double>(a_.threshold) ? T(1) : T(0);
      return OkStatus();
    });
  }
  const ir::OpAttrs* attributes() const override { return &a_; }

 private:
  BinarizerAttrs a_;
};

class ArrayFeatureExtractorOp final : public ir::Op {
 public:
  explicit ArrayFeatureExtractorOp(const ir::Node& node) : Op(node) {}

  Status Infer(ir::InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(1, {DataType::kInt64}));
    if (DataTypeSize(ctx.dtype(0)) == 0)
      return ctx.Error(std::string("X must be a numeric tensor; got ") +
                       DataTypeName(ctx.dtype(0)));
    if (ctx.rank(0) < 1) return ctx.Error("X must have rank 1 or more; got a scalar");
    const int64_t count = NumElements(ctx.shape(1));
    Shape out = ctx.rank(0) == 1 ? Shape{1, count} : ctx.shape(0);
    out.back() = count;
    ctx.SetOutput(0, ctx.dtype(0), out);
    return OkStatus();
  }

  Status Compute(const ir::ComputeContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    const Tensor& idx = ctx.in(1);
    const int64_t last = x.shape().back(), count = idx.numel();
    const int64_t rows = last == 0 ? 0 : x.numel() / last;
    const size_t es = DataTypeSize(x.dtype());
    const int64_t* ip = idx.data<int64_t>();
    for (int64_t j = 0; j < count; ++j)
      if (ip[j] < 0 || ip[j] >= last)
        return RunError("indices must be in [0, " + std::to_string(last) + "); got " +
                        std::to_string(ip[j]) + " at " + std::to_string(j));
    const auto* src = static_cast<const unsigned char*>(x.raw());
    auto* dst = static_cast<unsigned char*>(ctx.out(0).raw());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < count; ++j)
        std::memcpy(dst + (r * count + j) * es, src + (r * last + ip[j]) * es, es);
    return OkStatus();
  }
};

KILN_REGISTER_OP_DOMAIN(kMl, "Binarizer", 1, 1, &BinarizerOp::Create);
KILN_REGISTER_OP_DOMAIN(kMl, "ArrayFeatureExtractor", 1, 1, &ir::MakeOp<ArrayFeatureExtractorOp>);

std::vector<OpCase> BinarizerCases() {
  return {OpCase("float32 [3,1,5] threshold 0.25", 1)
              .In(CaseTensor({3, 1, 5}, 1))
              .Float("threshold", 0.25f),
          OpCase("int64 [7] threshold default", 1).In(CaseInts(DataType::kInt64, {7}, 2, -3, 3))};
}
std::vector<OpCase> ArrayFeatureExtractorCases() {
  return {OpCase("float32 [2,3,5] three indices", 1)
              .In(CaseTensor({2, 3, 5}, 3))
              .In(Tensor::FromVector<int64_t>({4, 0, 4}, {3})),
          OpCase("int32 [7] 1-D, indices [1,2]", 1)
              .In(CaseInts(DataType::kInt32, {7}, 4, -9, 9))
              .In(Tensor::FromVector<int64_t>({6, 1}, {1, 2}))};
}
KILN_REGISTER_OP_CASES(kMl, "Binarizer", &BinarizerCases);
KILN_REGISTER_OP_CASES(kMl, "ArrayFeatureExtractor", &ArrayFeatureExtractorCases);

}  // namespace
}  // namespace kiln::ops
