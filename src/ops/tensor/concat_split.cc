// Concat and Split along one axis. Both view the tensor as [outer, axis_dim * inner] rows and copy
// whole contiguous row pieces with memcpy, so any fixed-size dtype works.
// Concat-1's axis defaults to 1, Concat-4+ requires it. Negative axes are accepted in every opset
// (specs before 11 do not mention them; ONNX Runtime accepts them too).
// Split sizes: Split-1 from input 1 or the `split` attribute, Split-2..12 from the attribute,
// Split-13+ from the optional input 1; without sizes the axis is split into equal parts (the dim
// must divide by the number of outputs); Split-18's num_outputs gives ceil(dim / num_outputs) per
// part, the last smaller.
#include "ops/tensor/concat_split.h"

#include <cstdint>
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

// Rows and row bytes of `shape` around `axis`: outer = prod(dims before), inner_bytes = prod(dims
// after) * esz.
void OuterInner(const Shape& shape, int64_t axis, size_t esz, int64_t* outer,
                int64_t* inner_bytes) {
  *outer = 1;
  *inner_bytes = static_cast<int64_t>(esz);
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    if (d < axis) *outer *= shape[d];
    if (d > axis) *inner_bytes *= shape[d];
  }
}

class ConcatOp : public Op {
 public:
  const ir::OpAttrs* attributes() const override { return &a_; }
  static StatusOr<std::unique_ptr<Op>> Create(const Node& node) {
    if (node.opset >= 4 && !node.HasAttr("axis"))
      return ir::AttrError(node, "the `axis` attribute is required from opset 4; got none");
    return std::unique_ptr<Op>(new ConcatOp(node, node.GetInt("axis", 1)));
  }
  Status Infer(InferContext& ctx) const override {
    if (ctx.num_inputs() == 0 || !ctx.has_input(0))
      return ctx.Error("Concat needs at least one input");
    KILN_RETURN_IF_ERROR(ExpectFixedSize(ctx, 0));
    const int64_t r = ctx.rank(0);
    if (r == 0) return ctx.Error("inputs must have rank >= 1; got a scalar");
    if (a_.axis < -r || a_.axis >= r)
      return ctx.Error("axis must be in [" + std::to_string(-r) + ", " + std::to_string(r) +
                       "); got " + std::to_string(a_.axis));
    const int64_t axis = a_.axis < 0 ? a_.axis + r : a_.axis;
    Shape out = ctx.shape(0);
    out[axis] = 0;
    for (size_t i = 0; i < ctx.num_inputs(); ++i) {
      if (!ctx.has_input(i)) return ctx.Error("input " + std::to_string(i) + " is omitted");
      if (ctx.dtype(i) != ctx.dtype(0))
        return ctx.Error("all inputs must have the same dtype; got " +
                         std::string(DataTypeName(ctx.dtype(i))) + " at input " +
                         std::to_string(i));
      const Shape& s = ctx.shape(i);
      bool ok = static_cast<int64_t>(s.size()) == r;
      for (int64_t d = 0; ok && d < r; ++d) ok = d == axis || s[d] == out[d];
      if (!ok)
        return ctx.Error("inputs must match in all dims but axis " + std::to_string(axis) +
                         "; got " + ShapeToString(s) + " at input " + std::to_string(i));
      out[axis] += s[axis];
    }
    ctx.SetOutput(0, ctx.dtype(0), out);
    return OkStatus();
  }
  Status Compute(const ComputeContext& ctx) const override {
    Tensor& out = ctx.out(0);
    const size_t esz = DataTypeSize(out.dtype());
    const int64_t axis = a_.axis < 0 ? a_.axis + out.rank() : a_.axis;
    int64_t outer, inner_bytes;
    OuterInner(out.shape(), axis, esz, &outer, &inner_bytes);
    const int64_t out_row = out.shape()[axis] * inner_bytes;
    auto* dst = static_cast<unsigned char*>(out.raw());
    int64_t col = 0;
    for (size_t i = 0; i < ctx.inputs.size(); ++i) {
      const Tensor& in = ctx.in(i);
      const int64_t row = in.shape()[axis] * inner_bytes;
      const auto* src = static_cast<const unsigned char*>(in.raw());
      if (row > 0)
        for (int64_t o = 0; o < outer; ++o)
          std::memcpy(dst + o * out_row + col, src + o * row, row);
      col += row;
    }
    return OkStatus();
  }

 private:
  ConcatOp(const Node& node, int64_t axis) : Op(node) { a_.axis = axis; }
  AxisAttrs a_;
};
KILN_REGISTER_OP("Concat", 1, ir::kMaxOpset, &ConcatOp::Create);

class SplitOp : public Op {
 public:
  const ir::OpAttrs* attributes() const override { return &a_; }
  explicit SplitOp(const Node& node) : Op(node) {
    a_.axis = node.GetInt("axis", 0);
    a_.split = node.GetInts("split");
    a_.num_outputs = node.opset >= 18 ? node.GetInt("num_outputs", 0) : 0;
  }
  std::vector<int> ShapeInputs() const override {
    return SplitFromInput() ? std::vector<int>{1} : std::vector<int>{};
  }
  Status Infer(InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ExpectFixedSize(ctx, 0));
    const int64_t r = ctx.rank(0);
    if (a_.axis < -r || a_.axis >= r)
      return ctx.Error("axis must be in [" + std::to_string(-r) + ", " + std::to_string(r) +
                       "); got " + std::to_string(a_.axis));
    const int64_t axis = a_.axis < 0 ? a_.axis + r : a_.axis;
    std::vector<int64_t> split = a_.split;
    if (SplitFromInput() && ctx.has_input(1)) {
      KILN_ASSIGN_OR_RETURN(split, KnownInts(ctx, 1, "Split's split"));
    } else if (opset() >= 13) {
      split.clear();
    }
    const int64_t dim = ctx.shape(0)[axis];
    const auto n = static_cast<int64_t>(ctx.num_outputs());
    if (a_.num_outputs !=
        0) {  // Split-18: equal parts of ceil(dim / num_outputs), the last smaller
      if (!split.empty())
        return ctx.Error("takes the split input or the num_outputs attribute, not both");
      if (a_.num_outputs != n)
        return ctx.Error("num_outputs (" + std::to_string(a_.num_outputs) +
                         ") must equal the number of outputs (" + std::to_string(n) + ")");
      const int64_t chunk = (dim + n - 1) / n;
      if (chunk * (n - 1) > dim)
        return ctx.Error("dim " + std::to_string(axis) + " (" + std::to_string(dim) +
                         ") is too small for " + std::to_string(n) + " parts of " +
                         std::to_string(chunk));
      split.assign(n, chunk);
      split.back() = dim - chunk * (n - 1);
    }
    if (split.empty()) {
      if (n == 0 || dim % n != 0)
        return ctx.Error("without split sizes, dim " + std::to_string(axis) + " (" +
                         std::to_string(dim) + ") must divide by the number of outputs; got " +
                         std::to_string(n) + " outputs");
      split.assign(n, dim / n);
    }
    if (static_cast<int64_t>(split.size()) != n)
      return ctx.Error("split must have one size per output (" + std::to_string(n) + "); got " +
                       IntsToString(split));
    int64_t sum = 0;
    for (int64_t s : split) {
      if (s < 0) return ctx.Error("split sizes must be >= 0; got " + IntsToString(split));
      sum += s;
    }
    if (sum != dim)
      return ctx.Error("split sizes must add up to dim " + std::to_string(axis) + " (" +
                       std::to_string(dim) + "); got " + IntsToString(split));
    for (int64_t i = 0; i < n; ++i) {
      Shape s = ctx.shape(0);
      s[axis] = split[i];
      ctx.SetOutput(i, ctx.dtype(0), s);
    }
    return OkStatus();
  }
  Status Compute(const ComputeContext& ctx) const override {
    const Tensor& in = ctx.in(0);
    const size_t esz = DataTypeSize(in.dtype());
    const int64_t axis = a_.axis < 0 ? a_.axis + in.rank() : a_.axis;
    int64_t outer, inner_bytes;
    OuterInner(in.shape(), axis, esz, &outer, &inner_bytes);
    const int64_t in_row = in.shape()[axis] * inner_bytes;
    const auto* src = static_cast<const unsigned char*>(in.raw());
    int64_t col = 0;
    for (Tensor* out : ctx.outputs) {
      if (out == nullptr) return RunError("every Split output must be allocated");
      const int64_t row = out->shape()[axis] * inner_bytes;
      auto* dst = static_cast<unsigned char*>(out->raw());
      if (row > 0)
        for (int64_t o = 0; o < outer; ++o) std::memcpy(dst + o * row, src + o * in_row + col, row);
      col += row;
    }
    return OkStatus();
  }

 private:
  bool SplitFromInput() const { return opset() < 2 || opset() >= 13; }
  SplitAttrs a_;
};
KILN_REGISTER_OP("Split", 1, ir::kMaxOpset, &ir::MakeOp<SplitOp>);

// Kernel cases (ops/op_cases.h): seeded values of `dtype` (float32 in [-1, 1), integers in
// [-100, 100] or [0, 255], bool 0/1).
Tensor LayoutCaseTensor(DataType dtype, const Shape& shape, uint32_t seed) {
  if (dtype == DataType::kFloat) return CaseTensor(shape, seed);
  if (dtype == DataType::kUInt8) return CaseInts(dtype, shape, seed, 0, 255);
  if (dtype == DataType::kBool) return CaseInts(dtype, shape, seed, 0, 1);
  return CaseInts(dtype, shape, seed, -100, 100);
}

// Concat: cpu.concat.onednn takes 2-4 float32 (or 8-bit) inputs above 64 KiB, cpu.concat.copy
// any inputs of one dtype, cuda.concat.kernel float32 from opset 4. Inputs of 2 to 5, along
// first, middle, last and negative axes, a size-1 part, rank 1, integer and bool dtypes, and
// Concat-1's default axis (1).
std::vector<OpCase> ConcatCases() {
  struct Spec {
    std::string what;
    int opset;
    int64_t axis;  // INT64_MIN: no attribute
    DataType dtype;
    std::vector<Shape> in;
  };
  using D = DataType;
  const std::vector<Spec> specs = {
      {"2 large", 13, 1, D::kFloat, {{2, 16, 23, 25}, {2, 7, 23, 25}}},
      {"3 large, last axis", 13, -1, D::kFloat, {{12, 40, 50}, {12, 40, 17}, {12, 40, 50}}},
      {"3 large, first axis", 11, 0, D::kFloat, {{5, 33, 101}, {1, 33, 101}, {3, 33, 101}}},
      {"4 large",
       13,
       2,
       D::kFloat,
       {{1, 3, 40, 129}, {1, 3, 1, 129}, {1, 3, 17, 129}, {1, 3, 40, 129}}},
      {"4 small", 13, 0, D::kFloat, {{3, 1, 7}, {1, 1, 7}, {2, 1, 7}, {5, 1, 7}}},
      {"5",
       13,
       1,
       D::kFloat,
       {{1, 8, 5, 5}, {1, 8, 5, 5}, {1, 1, 5, 5}, {1, 8, 5, 5}, {1, 3, 5, 5}}},
      {"5 large",
       13,
       2,
       D::kFloat,
       {{2, 9, 70, 11}, {2, 9, 1, 11}, {2, 9, 31, 11}, {2, 9, 5, 11}, {2, 9, 30, 11}}},
      {"rank 1", 13, 0, D::kFloat, {{7}, {2}}},
      {"last axis", 13, 3, D::kFloat, {{2, 4, 5, 3}, {2, 4, 5, 2}}},
      {"negative axis", 11, -2, D::kFloat, {{3, 1, 7}, {3, 2, 7}}},
      {"default axis (Concat-1)", 1, INT64_MIN, D::kFloat, {{2, 3, 4}, {2, 5, 4}}},
      {"opset 4", 4, 1, D::kFloat, {{2, 3, 4}, {2, 1, 4}, {2, 2, 4}}},
      {"uint8 large", 13, 1, D::kUInt8, {{2, 40, 23, 25}, {2, 24, 23, 25}}},
      {"int8", 13, -1, D::kInt8, {{3, 5, 1}, {3, 5, 7}, {3, 5, 2}}},
      {"int64", 13, 1, D::kInt64, {{2, 3, 4}, {2, 1, 4}}},
      {"bool", 13, 0, D::kBool, {{1, 9}, {3, 9}}},
  };
  std::vector<OpCase> cases;
  uint32_t seed = 101;
  for (const Spec& s : specs) {
    std::string name = "Concat " + s.what + ":";
    for (const Shape& x : s.in) name += " " + ShapeToString(x);
    OpCase c(name + (s.axis == INT64_MIN ? "" : " axis " + std::to_string(s.axis)), s.opset);
    if (s.axis != INT64_MIN) c.Int("axis", s.axis);
    for (const Shape& x : s.in) c.In(LayoutCaseTensor(s.dtype, x, seed++));
    cases.push_back(std::move(c));
  }
  return cases;
}
KILN_REGISTER_OP_CASES("", "Concat", &ConcatCases);

// Split: cpu.split.onednn takes float32 or 8-bit inputs above 64 KiB (the reference's copies
// below), cuda.split.kernel float32. Sizes from the constant input (Split-13, Split-1), the
// attribute (Split-2..12), equal parts, Split-18's num_outputs (last part smaller), 1 to 4
// outputs, first, middle, last and negative axes, a zero-sized part.
std::vector<OpCase> SplitCases() {
  struct Spec {
    std::string what;
    int opset;
    int64_t axis;
    DataType dtype;
    Shape x;
    int outputs;
    std::vector<int64_t> sizes;  // the input (Split-1, -13+) or the attribute (-2..12)
    int64_t num_outputs = 0;     // Split-18
  };
  using D = DataType;
  const std::vector<Spec> specs = {
      {"sizes input", 13, 1, D::kFloat, {2, 7, 3, 4}, 2, {2, 5}},
      {"sizes input, large", 13, 1, D::kFloat, {2, 16, 23, 25}, 3, {3, 5, 8}},
      {"attribute, large", 11, 2, D::kFloat, {80, 60, 6}, 2, {1, 5}},
      {"equal, large", 11, 0, D::kFloat, {80, 60, 6}, 2, {}},
      {"equal, large, last axis", 11, -1, D::kFloat, {80, 60, 6}, 2, {}},
      {"equal, 4 outputs", 13, 2, D::kFloat, {3, 5, 8, 1}, 4, {}},
      {"num_outputs, large", 18, 1, D::kFloat, {2, 7, 41, 31}, 3, {}, 3},
      {"num_outputs", 18, -1, D::kFloat, {3, 1, 7}, 2, {}, 2},
      {"one output", 13, 0, D::kFloat, {3, 1, 7}, 1, {}},
      {"zero-sized part, large", 13, 1, D::kFloat, {2, 16, 23, 25}, 3, {0, 9, 7}},
      {"Split-1 sizes input", 1, 0, D::kFloat, {5, 3}, 2, {4, 1}},
      {"Split-2 attribute", 2, 1, D::kFloat, {2, 9, 5}, 3, {2, 3, 4}},
      {"uint8, large", 13, 1, D::kUInt8, {4, 130, 129}, 2, {}},
      {"int8, large", 13, 2, D::kInt8, {4, 130, 129}, 2, {100, 29}},
      {"int64", 13, 1, D::kInt64, {2, 6, 3}, 3, {1, 0, 5}},
  };
  std::vector<OpCase> cases;
  uint32_t seed = 131;
  for (const Spec& s : specs) {
    OpCase c("Split " + s.what + ": " + ShapeToString(s.x) + " axis " + std::to_string(s.axis) +
                 (s.sizes.empty() ? "" : " sizes " + IntsToString(s.sizes)),
             s.opset);
    c.Int("axis", s.axis).Outputs(s.outputs).In(LayoutCaseTensor(s.dtype, s.x, seed++));
    const bool sizes_input = s.opset < 2 || s.opset >= 13;
    if (!s.sizes.empty() && sizes_input) c.Const(CaseInt64s(s.sizes));
    if (!s.sizes.empty() && !sizes_input) c.Ints("split", s.sizes);
    if (s.num_outputs != 0) c.Int("num_outputs", s.num_outputs);
    cases.push_back(std::move(c));
  }
  return cases;
}
KILN_REGISTER_OP_CASES("", "Split", &SplitCases);

}  // namespace
}  // namespace kiln::ops
