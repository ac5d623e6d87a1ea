// SplitToSequence (11) and ConcatFromSequence (11): between a tensor and a sequence of its parts.
//
// SplitToSequence(input, split?): `axis` (default 0, in [-r, r - 1]) is cut into parts.
//   split absent: parts of 1 along the axis, which keepdims = 0 (default 1) removes;
//   split a scalar s > 0: parts of s, the last one shorter when s does not divide the dim;
//   split 1-D: the part lengths (each >= 0), which must sum to the dim.
//   keepdims applies only when split is absent. Any tensor type, strings included.
// ConcatFromSequence(input_sequence): `axis` (required) and `new_axis` (default 0). The items,
//   of one dtype and rank r, are concatenated along axis (in [-r, r - 1]; their other dims must
//   agree) or, with new_axis = 1, stacked on a new axis (in [-r - 1, r]; their shapes must agree).
//   An empty sequence is an error.
#include <algorithm>
#include <memory>
#include <numeric>

#include "ops/common.h"
#include "ops/op_cases.h"
#include "ops/sequence/sequence_util.h"
#include "ops/tensor/tensor_util.h"

namespace kiln::ops {
namespace {

using ir::ComputeContext;
using ir::InferContext;
using ir::Node;

struct SplitToSequenceAttrs : ir::OpAttrs {
  int64_t axis = 0;
  bool keepdims = true;
};

class SplitToSequenceOp final : public seq::ValueOp {
 public:
  static StatusOr<std::unique_ptr<ir::Op>> Create(const Node& node) {
    std::unique_ptr<SplitToSequenceOp> op(new SplitToSequenceOp(node));
    if (node.inputs.empty() || node.inputs[0] < 0)
      return ir::AttrError(node, "SplitToSequence takes input");
    op->a_.axis = node.GetInt("axis", 0);
    const int64_t k = node.GetInt("keepdims", 1);
    if (k != 0 && k != 1)
      return ir::AttrError(node, "keepdims must be 0 or 1; got " + std::to_string(k));
    op->a_.keepdims = k == 1;
    return std::unique_ptr<ir::Op>(std::move(op));
  }
  Status Infer(InferContext& ctx) const override {
    if (ctx.has_input(0) && !seq::IsTensorType(ctx.dtype(0)))
      return ctx.Error("input must be a tensor; got " + std::string(DataTypeName(ctx.dtype(0))));
    KILN_RETURN_IF_ERROR(seq::ExpectIntInput(ctx, 1, "split"));
    if (ctx.has_input(0)) {
      const int64_t r = ctx.rank(0);
      if (a_.axis < -r || a_.axis >= r)
        return ctx.Error("axis must be in [" + std::to_string(-r) + ", " + std::to_string(r - 1) +
                         "]; got " + std::to_string(a_.axis));
    }
    ctx.SetOutput(0, SequenceOf(ctx.dtype(0)), {});
    return OkStatus();
  }
  Status Compute(const ComputeContext& ctx) const override {
    if (!ctx.has(0)) return RunError("input is required; got none");
    const Tensor& x = ctx.in(0);
    if (!seq::IsTensorType(x.dtype()))
      return RunError("input must be a tensor; got " + seq::Describe(x));
    const int64_t r = x.rank();
    if (a_.axis < -r || a_.axis >= r)
      return RunError("axis must be in [" + std::to_string(-r) + ", " + std::to_string(r - 1) +
                      "] for input " + seq::Describe(x) + "; got " + std::to_string(a_.axis));
    const int64_t axis = a_.axis < 0 ? a_.axis + r : a_.axis;
    const int64_t dim = x.shape()[axis];
    std::vector<int64_t> lengths;
    bool squeeze = false;
    if (!ctx.has(1)) {
      lengths.assign(static_cast<size_t>(dim), 1);
      squeeze = !a_.keepdims;
    } else {
      const Tensor& s = ctx.in(1);
      KILN_ASSIGN_OR_RETURN(std::vector<int64_t> v, RunInts(*this, s, "split"));
      if (s.rank() == 0) {
        if (v[0] <= 0) return RunError("a scalar split must be > 0; got " + std::to_string(v[0]));
        for (int64_t pos = 0; pos < dim; pos += v[0]) lengths.push_back(std::min(v[0], dim - pos));
      } else if (s.rank() == 1) {
        int64_t sum = 0;
        for (int64_t l : v) {
          if (l < 0) return RunError("split lengths must be >= 0; got " + IntsToString(v));
          sum += l;
        }
        if (sum != dim)
          return RunError("split lengths must sum to the axis' dim " + std::to_string(dim) +
                          "; got " + IntsToString(v));
        lengths = std::move(v);
      } else {
        return RunError("split must be a scalar or 1-D; got " + seq::Describe(s));
      }
    }
    const Shape& shape = x.shape();
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= shape[d];
    for (int64_t d = axis + 1; d < r; ++d) inner *= shape[d];
    std::vector<Tensor> items;
    int64_t begin = 0;
    for (int64_t l : lengths) {
      Shape part = shape;
      part[axis] = l;
      Tensor t = Tensor::Empty(x.dtype(), part);
      seq::CopyBlock(x, outer, dim, inner, begin, l, &t, l, 0);
      if (squeeze) {
        part.erase(part.begin() + axis);
        t = t.Reshaped(part);
      }
      items.push_back(std::move(t));
      begin += l;
    }
    if (ctx.outputs[0]) *ctx.outputs[0] = Tensor::Sequence(x.dtype(), std::move(items));
    return OkStatus();
  }
  const ir::OpAttrs* attributes() const override { return &a_; }

 private:
  using ValueOp::ValueOp;
  SplitToSequenceAttrs a_;
};

struct ConcatFromSequenceAttrs : ir::OpAttrs {
  int64_t axis = 0;
  bool new_axis = false;
};

class ConcatFromSequenceOp final : public seq::ValueOp {
 public:
  static StatusOr<std::unique_ptr<ir::Op>> Create(const Node& node) {
    std::unique_ptr<ConcatFromSequenceOp> op(new ConcatFromSequenceOp(node));
    if (node.inputs.empty() || node.inputs[0] < 0)
      return ir::AttrError(node, "ConcatFromSequence takes input_sequence");
    if (!node.HasAttr("axis")) return ir::AttrError(node, "axis is required; got none");
    op->a_.axis = node.GetInt("axis", 0);
    const int64_t n = node.GetInt("new_axis", 0);
    if (n != 0 && n != 1)
      return ir::AttrError(node, "new_axis must be 0 or 1; got " + std::to_string(n));
    op->a_.new_axis = n == 1;
    return std::unique_ptr<ir::Op>(std::move(op));
  }
  Status Infer(InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(seq::ExpectSequenceInput(ctx, 0, "input_sequence"));
    ctx.SetOutput(0, ContainedType(ctx.dtype(0)), {});
    return ctx.Error("its output shape depends on the sequence's items, known only by running it");
  }
  Status Compute(const ComputeContext& ctx) const override {
    KILN_ASSIGN_OR_RETURN(const Tensor* s, seq::SequenceInput(*this, ctx, 0, "input_sequence"));
    const std::vector<Tensor>& items = s->items();
    if (items.empty()) return RunError("input_sequence must hold at least one tensor; got none");
    const Tensor& first = items[0];
    const int64_t r = first.rank();
    const int64_t out_rank = r + (a_.new_axis ? 1 : 0);
    if (out_rank == 0) return RunError("cannot concatenate scalars without new_axis 1");
    if (a_.axis < -out_rank || a_.axis >= out_rank)
      return RunError("axis must be in [" + std::to_string(-out_rank) + ", " +
                      std::to_string(out_rank - 1) + "] for items of rank " + std::to_string(r) +
                      (a_.new_axis ? " with new_axis 1" : "") + "; got " + std::to_string(a_.axis));
    const int64_t axis = a_.axis < 0 ? a_.axis + out_rank : a_.axis;
    // Each item viewed with rank out_rank (a 1 inserted at the axis with new_axis).
    auto view = [&](const Tensor& t) {
      Shape v = t.shape();
      if (a_.new_axis) v.insert(v.begin() + axis, 1);
      return v;
    };
    const Shape base = view(first);
    Shape out_shape = base;
    out_shape[axis] = 0;
    for (size_t k = 0; k < items.size(); ++k) {
      const Tensor& t = items[k];
      const Shape v = view(t);
      bool ok = t.dtype() == first.dtype() && v.size() == base.size();
      for (size_t d = 0; ok && d < v.size(); ++d)
        if (static_cast<int64_t>(d) != axis && v[d] != base[d]) ok = false;
      if (!ok)
        return RunError(std::string(a_.new_axis ? "items must have one shape"
                                                : "items must agree in all dims but axis " +
                                                      std::to_string(axis)) +
                        "; item 0 is " + seq::Describe(first) + ", item " + std::to_string(k) +
                        " " + seq::Describe(t));
      out_shape[axis] += v[axis];
    }
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= out_shape[d];
    for (int64_t d = axis + 1; d < out_rank; ++d) inner *= out_shape[d];
    Tensor out = Tensor::Empty(first.dtype(), out_shape);
    int64_t at = 0;
    for (const Tensor& t : items) {
      const int64_t len = view(t)[axis];
      seq::CopyBlock(t, outer, len, inner, 0, len, &out, out_shape[axis], at);
      at += len;
    }
    if (ctx.outputs[0]) *ctx.outputs[0] = std::move(out);
    return OkStatus();
  }
  const ir::OpAttrs* attributes() const override { return &a_; }

 private:
  using ValueOp::ValueOp;
  ConcatFromSequenceAttrs a_;
};

KILN_REGISTER_OP("SplitToSequence", 11, ir::kMaxOpset, &SplitToSequenceOp::Create);
KILN_REGISTER_OP("ConcatFromSequence", 11, ir::kMaxOpset, &ConcatFromSequenceOp::Create);

// ---- Cases ----

std::vector<OpCase> SplitToSequenceCases() {
  std::vector<OpCase> cases;
  cases.push_back(OpCase("no split, axis 0", 11).In(CaseTensor({3, 4}, 901)));
  cases.push_back(OpCase("no split, axis 1, keepdims 0", 11)
                      .In(CaseTensor({3, 4}, 902))
                      .Int("axis", 1)
                      .Int("keepdims", 0));
  cases.push_back(OpCase("scalar split 2 of 5 (uneven last), axis -1", 11)
                      .In(CaseTensor({2, 5}, 903))
                      .In(Tensor::FromVector<int64_t>({2}, Shape{}))
                      .Int("axis", -1));
  cases.push_back(OpCase("1-D split [1, 0, 3], keepdims 0 ignored", 11)
                      .In(CaseTensor({4, 2, 3}, 904))
                      .In(CaseInt64s({1, 0, 3}))
                      .Int("keepdims", 0));
  cases.push_back(OpCase("int32 1-D split of int64 data, axis 1", 11)
                      .In(CaseInts(DataType::kInt64, {2, 3, 2}, 905, -9, 9))
                      .In(Tensor::FromVector<int32_t>({2, 1}, {2}))
                      .Int("axis", 1));
  Tensor s = Tensor::Strings({3});
  s.data<std::string>()[0] = "a";
  s.data<std::string>()[1] = "bb";
  s.data<std::string>()[2] = "";
  cases.push_back(OpCase("strings, no split", 11).In(s));
  return cases;
}
KILN_REGISTER_OP_CASES("", "SplitToSequence", &SplitToSequenceCases);

std::vector<OpCase> ConcatFromSequenceCases() {
  std::vector<OpCase> cases;
  cases.push_back(OpCase("axis 1, different lengths", 11)
                      .In(Tensor::Sequence(DataType::kFloat,
                                           {CaseTensor({2, 1, 3}, 911), CaseTensor({2, 4, 3}, 912),
                                            CaseTensor({2, 2, 3}, 913)}))
                      .Int("axis", 1));
  cases.push_back(OpCase("axis -3, one item", 11)
                      .In(Tensor::Sequence(DataType::kFloat, {CaseTensor({2, 1, 3}, 914)}))
                      .Int("axis", -3));
  for (int64_t axis : {0, 2, -1}) {
    cases.push_back(OpCase("new_axis 1, axis " + std::to_string(axis), 11)
                        .In(Tensor::Sequence(DataType::kFloat,
                                             {CaseTensor({2, 3}, 915), CaseTensor({2, 3}, 916)}))
                        .Int("axis", axis)
                        .Int("new_axis", 1));
  }
  cases.push_back(
      OpCase("int64 scalars, new_axis 1", 11)
          .In(Tensor::Sequence(DataType::kInt64, {Tensor::FromVector<int64_t>({4}, Shape{}),
                                                  Tensor::FromVector<int64_t>({-2}, Shape{})}))
          .Int("axis", 0)
          .Int("new_axis", 1));
  return cases;
}
KILN_REGISTER_OP_CASES("", "ConcatFromSequence", &ConcatFromSequenceCases);

}  // namespace
}  // namespace kiln::ops
