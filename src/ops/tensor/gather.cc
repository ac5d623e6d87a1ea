// Gather: out = data indexed along `axis` by int32/int64 `indices` (negative indices count from
// the end); out shape = data[:axis] + indices.shape + data[axis+1:]. The kernel copies one
// contiguous block of prod(data[axis+1:]) elements per (outer row, index) with memcpy, so any
// fixed-size dtype works. An index outside [-dim, dim) is an InvalidArgument error at run time
// (at inference when the indices are known).
#include <cstring>

#include "ops/axis_attrs.h"
#include "ops/common.h"
#include "ops/op_cases.h"
#include "ops/tensor/tensor_util.h"

namespace kiln::ops {
namespace {

using ir::ComputeContext;
using ir::InferContext;
using ir::Node;
using ir::Op;

class GatherOp : public Op {
 public:
  const ir::OpAttrs* attributes() const override { return &a_; }
  explicit GatherOp(const Node& node) : Op(node) { a_.axis = node.GetInt("axis", 0); }
  Status Infer(InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ExpectFixedSize(ctx, 0));
    if (!ctx.has_input(1)) return ctx.Error("indices (input 1) are required; got none");
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(1, {DataType::kInt64, DataType::kInt32}));
    const int64_t r = ctx.rank(0);
    if (r == 0) return ctx.Error("data must have rank >= 1; got a scalar");
    if (a_.axis < -r || a_.axis >= r)
      return ctx.Error("axis must be in [" + std::to_string(-r) + ", " + std::to_string(r) +
                       "); got " + std::to_string(a_.axis));
    const int64_t axis = a_.axis < 0 ? a_.axis + r : a_.axis;
    const Shape& data = ctx.shape(0);
    Shape out(data.begin(), data.begin() + axis);
    out.insert(out.end(), ctx.shape(1).begin(), ctx.shape(1).end());
    out.insert(out.end(), data.begin() + axis + 1, data.end());
    if (ctx.value(1) != nullptr) {
      const int64_t dim = data[axis];
      for (int64_t i : ReadInts(*ctx.value(1)))
        if (i < -dim || i >= dim)
          return ctx.Error("indices must be in [" + std::to_string(-dim) + ", " +
                           std::to_string(dim) + ") for axis " + std::to_string(axis) + "; got " +
                           std::to_string(i));
    }
    ctx.SetOutput(0, ctx.dtype(0), out);
    return OkStatus();
  }
  Status Compute(const ComputeContext& ctx) const override {
    const Tensor& data = ctx.in(0);
    const Tensor& indices = ctx.in(1);
    const int64_t axis = a_.axis < 0 ? a_.axis + data.rank() : a_.axis;
    const Shape& s = data.shape();
    const size_t esz = DataTypeSize(data.dtype());
    int64_t outer = 1, block = static_cast<int64_t>(esz);
    for (int64_t d = 0; d < data.rank(); ++d) {
      if (d < axis) outer *= s[d];
      if (d > axis) block *= s[d];
    }
    const int64_t dim = s[axis];
    const int64_t n = indices.numel();
    std::vector<int64_t> idx;
    KILN_ASSIGN_OR_RETURN(idx, RunInts(*this, indices, "indices"));
    for (int64_t& i : idx) {
      if (i < -dim || i >= dim)
        return RunError("indices must be in [" + std::to_string(-dim) + ", " + std::to_string(dim) +
                        ") for axis " + std::to_string(axis) + "; got " + std::to_string(i));
      if (i < 0) i += dim;
    }
    if (block == 0) return OkStatus();
    const auto* src = static_cast<const unsigned char*>(data.raw());
    auto* dst = static_cast<unsigned char*>(ctx.out(0).raw());
    for (int64_t o = 0; o < outer; ++o) {
      const unsigned char* row = src + o * dim * block;
      for (int64_t j = 0; j < n; ++j) {
        std::memcpy(dst, row + idx[j] * block, block);
        dst += block;
      }
    }
    return OkStatus();
  }

 private:
  AxisAttrs a_;
};
KILN_REGISTER_OP("Gather", 1, ir::kMaxOpset, &ir::MakeOp<GatherOp>);

// Kernel cases (ops/op_cases.h). cuda.gather.kernel takes float32 or int64 data with int64
// indices, constant (range-checked once) or not; int32 indices and other dtypes run on the
// reference only. Negative and repeated indices, scalar and empty indices, first, middle and last
// axes.
std::vector<OpCase> GatherCases() {
  struct Spec {
    std::string what;
    int opset;
    DataType dtype;
    Shape x;
    int64_t axis;
    std::vector<int64_t> idx;
    Shape idx_shape;
    bool constant;
  };
  using D = DataType;
  const std::vector<Spec> specs = {
      {"negative", 13, D::kFloat, {2, 5, 3}, 1, {4, -1, 0, -5}, {2, 2}, true},
      {"negative, computed", 13, D::kFloat, {2, 5, 3}, 1, {4, -1, 0, -5}, {2, 2}, false},
      {"int64 data", 13, D::kInt64, {7, 3}, 0, {6, -7, 0, 3}, {4}, false},
      {"int64 data, constant", 11, D::kInt64, {2, 9, 1}, 1, {8, 0, -2}, {3, 1}, true},
      {"scalar index, last axis", 13, D::kFloat, {3, 1, 7}, -1, {-2}, {}, true},
      {"rank 1, repeated", 1, D::kFloat, {9}, 0, {2, 2, 1, -9}, {4}, false},
      {"larger", 13, D::kFloat, {2, 16, 9, 11}, 1, {15, 0, -1, 7, 7}, {5}, true},
      {"embedding rows", 13, D::kFloat, {50, 33}, 0, {3, 49, 0, 17, -50, 3}, {2, 3}, false},
      {"empty indices", 13, D::kFloat, {3, 4}, 1, {}, {0}, true},
      {"uint8 data", 13, D::kUInt8, {4, 6}, 1, {5, -6, 2}, {3}, true},
  };
  std::vector<OpCase> cases;
  uint32_t seed = 261;
  for (const Spec& s : specs) {
    OpCase c("Gather " + s.what + ": " + DataTypeName(s.dtype) + ShapeToString(s.x) + " axis " +
                 std::to_string(s.axis) + " indices " + IntsToString(s.idx),
             s.opset);
    c.Int("axis", s.axis);
    c.In(s.dtype == D::kFloat ? CaseTensor(s.x, seed++) : CaseInts(s.dtype, s.x, seed++, 0, 200));
    Tensor idx = Tensor::FromVector<int64_t>(s.idx, s.idx_shape);
    if (s.constant)
      c.Const(idx);
    else
      c.In(idx);
    cases.push_back(std::move(c));
  }
  cases.push_back(OpCase("Gather int32 indices: float32[4,6] axis 1 indices [5,-6,0]", 13)
                      .Int("axis", 1)
                      .In(CaseTensor({4, 6}, seed++))
                      .Const(Tensor::FromVector<int32_t>({5, -6, 0}, {3})));
  return cases;
}
KILN_REGISTER_OP_CASES("", "Gather", &GatherCases);

}  // namespace
}  // namespace kiln::ops
