// Slice: per sliced axis a start, end and step (Slice-1: `starts`/`ends`/`axes` attributes, step 1;
// Slice-10+: inputs starts, ends, optional axes and steps). Indices are resolved exactly as the
// ONNX spec says: negative start/end add the dim, then step > 0 clamps start and end to [0, dim],
// step < 0 clamps start to [0, dim-1] and end to [-1, dim-1]; the length is
// ceil((end - start) / step) or 0. The kernel is a strided gather (offset sum(start*stride),
// strides stride*step, which may be negative), so any fixed-size dtype works. Negative axes are
// accepted in every opset.
#include "ops/tensor/slice.h"

#include <algorithm>
#include <cstdint>
#include <limits>

#include "ops/common.h"
#include "ops/op_cases.h"
#include "ops/tensor/tensor_util.h"

namespace kiln::ops {

std::string MakeSlicePlan(const Shape& in, const std::vector<int64_t>& starts,
                          const std::vector<int64_t>& ends, const std::vector<int64_t>* axes_in,
                          const std::vector<int64_t>* steps_in, SlicePlan* plan) {
  const auto r = static_cast<int64_t>(in.size());
  const size_t k = starts.size();
  if (ends.size() != k)
    return "starts and ends must have the same length; got " + IntsToString(starts) + " and " +
           IntsToString(ends);
  std::vector<int64_t> axes(k);
  if (axes_in) {
    if (axes_in->size() != k)
      return "axes must have one entry per start; got " + IntsToString(*axes_in);
    axes = *axes_in;
  } else {
    if (static_cast<int64_t>(k) > r)
      return "without axes, starts may have at most rank (" + std::to_string(r) +
             ") entries; got " + IntsToString(starts);
    for (size_t i = 0; i < k; ++i) axes[i] = static_cast<int64_t>(i);
  }
  std::vector<int64_t> steps(k, 1);
  if (steps_in) {
    if (steps_in->size() != k)
      return "steps must have one entry per start; got " + IntsToString(*steps_in);
    steps = *steps_in;
  }
  plan->out = in;
  plan->start.assign(r, 0);
  plan->step.assign(r, 1);
  std::vector<bool> seen(r, false);
  for (size_t i = 0; i < k; ++i) {
    int64_t a = axes[i];
    if (a < -r || a >= r)
      return "axes must be in [" + std::to_string(-r) + ", " + std::to_string(r) + "); got " +
             IntsToString(axes);
    if (a < 0) a += r;
    if (seen[a]) return "axes must not repeat; got " + IntsToString(axes);
    seen[a] = true;
    const int64_t step = steps[i], dim = in[a];
    if (step == 0) return "steps must be non-zero; got " + IntsToString(steps);
    int64_t s = starts[i], e = ends[i];
    if (s < 0) s += dim;
    if (e < 0) e += dim;
    int64_t len = 0;
    if (dim == 0) {
      s = 0;  // nothing to take; the clamping ranges below would be empty
    } else if (step > 0) {
      s = std::min(std::max<int64_t>(s, 0), dim);
      e = std::min(std::max<int64_t>(e, 0), dim);
      if (e > s) len = (e - s - 1) / step + 1;
    } else {
      s = std::min(std::max<int64_t>(s, 0), dim - 1);
      e = std::min(std::max<int64_t>(e, -1), dim - 1);
      if (s > e) {
        const uint64_t abs_step = uint64_t{0} - static_cast<uint64_t>(step);
        len = static_cast<int64_t>(static_cast<uint64_t>(s - e - 1) / abs_step + 1);
      }
    }
    plan->out[a] = len;
    plan->start[a] = len > 0 ? s : 0;
    plan->step[a] = len > 1 ? step : 1;  // a huge step taking one element must not overflow
  }
  return "";
}

std::string SlicePlanOf(int opset, const SliceAttrs& a, const Shape& in,
                        const std::vector<const Tensor*>& ints, SlicePlan* plan) {
  if (opset < 10)
    return MakeSlicePlan(in, a.starts, a.ends, a.has_axes ? &a.axes : nullptr, nullptr, plan);
  std::vector<int64_t> v[5];
  for (size_t i = 1; i < 5 && i < ints.size(); ++i) {
    if (ints[i] == nullptr) continue;
    if (ints[i]->dtype() != DataType::kInt64 && ints[i]->dtype() != DataType::kInt32)
      return "input " + std::to_string(i) + " must be int64 or int32; got " +
             DataTypeName(ints[i]->dtype());
    v[i] = ReadInts(*ints[i]);
  }
  auto has = [&](size_t i) { return i < ints.size() && ints[i] != nullptr; };
  if (!has(1) || !has(2)) return "starts and ends are required";
  return MakeSlicePlan(in, v[1], v[2], has(3) ? &v[3] : nullptr, has(4) ? &v[4] : nullptr, plan);
}

void SliceGather(const Shape& in, const SlicePlan& plan, std::vector<int64_t>* strides,
                 int64_t* offset) {
  const std::vector<int64_t> s = Strides(in);
  strides->resize(s.size());
  *offset = 0;
  for (size_t d = 0; d < s.size(); ++d) {
    (*strides)[d] = s[d] * plan.step[d];
    *offset += plan.start[d] * s[d];
  }
}

namespace {

using ir::ComputeContext;
using ir::InferContext;
using ir::Node;
using ir::Op;

class SliceOp : public Op {
 public:
  const ir::OpAttrs* attributes() const override { return &a_; }
  static StatusOr<std::unique_ptr<Op>> Create(const Node& node) {
    if (node.opset < 10 && (!node.HasAttr("starts") || !node.HasAttr("ends")))
      return ir::AttrError(node,
                           "Slice before opset 10 needs `starts` and `ends` attributes; got " +
                               std::string(node.HasAttr("starts") ? "no ends" : "no starts"));
    return std::unique_ptr<Op>(new SliceOp(node));
  }
  std::vector<int> ShapeInputs() const override {
    return opset() >= 10 ? std::vector<int>{1, 2, 3, 4} : std::vector<int>{};
  }
  Status Infer(InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ExpectFixedSize(ctx, 0));
    SlicePlan plan;
    std::string err;
    if (opset() < 10) {
      err = MakeSlicePlan(ctx.shape(0), a_.starts, a_.ends, a_.has_axes ? &a_.axes : nullptr,
                          nullptr, &plan);
    } else {
      std::vector<int64_t> v[5];
      for (size_t i = 1; i < 5; ++i) {
        if (!ctx.has_input(i)) continue;
        static const char* kNames[] = {"", "Slice's starts", "Slice's ends", "Slice's axes",
                                       "Slice's steps"};
        KILN_ASSIGN_OR_RETURN(v[i], KnownInts(ctx, i, kNames[i]));
      }
      if (!ctx.has_input(1) || !ctx.has_input(2)) return ctx.Error("starts and ends are required");
      err = MakeSlicePlan(ctx.shape(0), v[1], v[2], ctx.has_input(3) ? &v[3] : nullptr,
                          ctx.has_input(4) ? &v[4] : nullptr, &plan);
    }
    if (!err.empty()) return ctx.Error(err);
    ctx.SetOutput(0, ctx.dtype(0), plan.out);
    return OkStatus();
  }
  Status Compute(const ComputeContext& ctx) const override {
    const Tensor& in = ctx.in(0);
    std::vector<const Tensor*> ints(5, nullptr);
    for (size_t i = 1; i < 5; ++i)
      if (ctx.has(i)) ints[i] = &ctx.in(i);
    SlicePlan plan;
    const std::string err = SlicePlanOf(opset(), a_, in.shape(), ints, &plan);
    if (!err.empty()) return RunError(err);
    if (plan.out != ctx.out(0).shape())
      return RunError("output was allocated as " + ShapeToString(ctx.out(0).shape()) +
                      " but the slice has shape " + ShapeToString(plan.out));
    std::vector<int64_t> st;
    int64_t offset = 0;
    SliceGather(in.shape(), plan, &st, &offset);
    StridedGather(ctx.out(0).raw(), in.raw(), plan.out, st, offset, DataTypeSize(in.dtype()));
    return OkStatus();
  }

 private:
  explicit SliceOp(const Node& node) : Op(node) {
    a_.starts = node.GetInts("starts");
    a_.ends = node.GetInts("ends");
    a_.has_axes = node.HasAttr("axes");
    a_.axes = node.GetInts("axes");
  }
  SliceAttrs a_;
};
KILN_REGISTER_OP("Slice", 1, ir::kMaxOpset, &SliceOp::Create);

// Kernel cases (ops/op_cases.h). cpu.slice.copy takes any fixed-size dtype: contiguous runs of 64
// bytes or more are memcpy'd, shorter runs and an innermost step other than 1 are a strided
// gather; cuda.slice.kernel takes float32 up to rank 6 with constant starts/ends/axes/steps.
struct SliceSpec {
  std::string what;
  Shape x;
  std::vector<int64_t> starts, ends, axes, steps;  // axes/steps empty: omitted
  int opset = 13;
  DataType dtype = DataType::kFloat;
};

OpCase SliceCase(const SliceSpec& s, uint32_t seed) {
  OpCase c("Slice " + s.what + ": " + DataTypeName(s.dtype) + ShapeToString(s.x) + " starts " +
               IntsToString(s.starts) + " ends " + IntsToString(s.ends) +
               (s.axes.empty() ? "" : " axes " + IntsToString(s.axes)) +
               (s.steps.empty() ? "" : " steps " + IntsToString(s.steps)),
           s.opset);
  if (s.dtype == DataType::kFloat)
    c.In(CaseTensor(s.x, seed));
  else
    c.In(CaseInts(s.dtype, s.x, seed, 0, 100));
  if (s.opset < 10) {  // Slice-1: attributes
    c.Ints("starts", s.starts).Ints("ends", s.ends);
    if (!s.axes.empty()) c.Ints("axes", s.axes);
    return c;
  }
  c.Const(CaseInt64s(s.starts)).Const(CaseInt64s(s.ends));
  if (!s.axes.empty())
    c.Const(CaseInt64s(s.axes));
  else if (!s.steps.empty())
    c.Omitted();
  if (!s.steps.empty()) c.Const(CaseInt64s(s.steps));
  return c;
}

std::vector<OpCase> SliceCases() {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  using D = DataType;
  const std::vector<SliceSpec> specs = {
      {"a third of the last axis", {2, 7, 96}, {32}, {64}, {-1}, {}},
      {"attention's K of Q/K/V", {2, 97, 288}, {96}, {192}, {2}, {}},
      {"a middle axis", {2, 7, 96}, {2}, {5}, {1}, {}},
      {"clamped and negative", {3, 9, 40}, {1, -7, 8}, {3, 100, 40}, {0, 1, 2}, {}},
      {"short runs (gather)", {5, 4, 3}, {1}, {4}, {0}, {}},
      {"a step on a middle axis", {4, 10, 33}, {0, 1}, {4, 10}, {0, 1}, {1, 3}},
      {"negative steps", {4, 10, 33}, {30, 8}, {0, 1}, {2, 1}, {-2, -3}},
      {"step -2 and 2", {2, 3, 9, 8}, {7, 1}, {0, 8}, {2, 3}, {-2, 2}},
      {"reversed axis", {3, 1, 7}, {-1}, {-kMax}, {-1}, {-1}},
      {"to the end", {3, 1, 7}, {1, 0}, {kMax, kMax}, {0, 2}, {}},
      {"no axes", {3, 1, 7, 5}, {0, 0, 1}, {3, 1, 6}, {}, {}, 10},
      {"no axes, steps", {6, 5, 4}, {5, 0}, {-kMax, 5}, {}, {-2, 2}},
      {"empty result", {3, 4, 5}, {2}, {2}, {1}, {}},
      {"rank 6", {2, 1, 3, 4, 1, 5}, {1, 1, -1}, {3, 4, 0}, {2, 3, 5}, {1, 2, -2}},
      {"Slice-1", {5, 6, 70}, {1, 5}, {4, 70}, {0, 2}, {}, 1},
      {"Slice-1 no axes", {5, 6, 70}, {1, 2}, {4, 5}, {}, {}, 9},
      {"int64", {4, 10, 33}, {1, 30}, {4, 2}, {0, -1}, {2, -4}, 13, D::kInt64},
      {"uint8", {2, 7, 96}, {3}, {90}, {2}, {}, 13, D::kUInt8},
  };
  std::vector<OpCase> cases;
  uint32_t seed = 201;
  for (const SliceSpec& s : specs) cases.push_back(SliceCase(s, seed++));
  // starts/ends as int32 (what some exporters write).
  cases.push_back(OpCase("Slice int32 starts/ends: float32[6,5,4] axes [1]", 13)
                      .In(CaseTensor({6, 5, 4}, seed++))
                      .Const(Tensor::FromVector<int32_t>({1}, {1}))
                      .Const(Tensor::FromVector<int32_t>({-1}, {1}))
                      .Const(Tensor::FromVector<int32_t>({1}, {1})));
  return cases;
}
KILN_REGISTER_OP_CASES("", "Slice", &SliceCases);

}  // namespace
}  // namespace kiln::ops
