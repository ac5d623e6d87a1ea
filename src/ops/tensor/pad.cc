// Pad: pads = [x1_begin, x2_begin, ..., x1_end, x2_end, ...] (Pad-1 `paddings` / Pad-2 `pads`
// attributes with the `value` attribute; Pad-11+ the `pads` input and the optional scalar
// `constant_value` input; Pad-18+ the optional `axes` input, the pads then naming those axes only).
// Modes constant, reflect (mirror without repeating the edge), edge, and wrap (Pad-19+).
// Negative pads crop. Semantics follow the ONNX reference (numpy.pad on the positive pads, then
// cropping): every output coordinate maps to an input coordinate c = o - begin, and a c outside
// [0, dim) is resolved against the whole input (constant value, mirrored, or clamped).
// Kernel: a per-axis table out index -> input index (or -1 for the constant), then an odometer
// over output rows with memcpy-sized element copies. Any fixed-size dtype works.
// Limits: reflect/edge/wrap need a non-empty axis wherever padding is added.
#include "ops/tensor/pad.h"

#include <cstring>

#include "ops/common.h"
#include "ops/op_cases.h"
#include "ops/tensor/tensor_util.h"

namespace kiln::ops {
namespace {

// Float16 data reaches Pad only from the float16 rewrite (runtime/half_values.h), which keeps
// constant_value float32 (a non-data input); the value is checked as float32 then.
DataType FloatOf(DataType d) { return d == DataType::kFloat16 ? DataType::kFloat : d; }

using ir::ComputeContext;
using ir::InferContext;
using ir::Node;
using ir::Op;

std::string CheckPads(const Shape& in, const std::vector<int64_t>& pads, PadMode mode, Shape* out) {
  const size_t r = in.size();
  if (pads.size() != 2 * r)
    return "pads must have 2 * rank (" + std::to_string(2 * r) + ") entries; got " +
           IntsToString(pads);
  out->resize(r);
  for (size_t d = 0; d < r; ++d) {
    const int64_t o = in[d] + pads[d] + pads[d + r];
    if (o < 0)
      return "pads crop more than dim " + std::to_string(d) + " (" + std::to_string(in[d]) +
             ") holds; got " + IntsToString(pads);
    if (mode != PadMode::kConstant && in[d] == 0 && o > 0)
      return "reflect, edge and wrap padding need a non-empty dim " + std::to_string(d) + "; got " +
             IntsToString(pads);
    (*out)[d] = o;
  }
  return "";
}

// Pad-18's axes: `pads` holds begins then ends for `axes` only; expanded to every axis of a rank-r
// input (the others unpadded). Axes may be negative, not repeated.
std::string PadsForAxes(int64_t r, const std::vector<int64_t>& axes, std::vector<int64_t>* pads) {
  const auto k = static_cast<int64_t>(axes.size());
  if (static_cast<int64_t>(pads->size()) != 2 * k)
    return "pads must have 2 * len(axes) (" + std::to_string(2 * k) + ") entries; got " +
           IntsToString(*pads);
  std::vector<int64_t> full(2 * r, 0);
  std::vector<bool> seen(r, false);
  for (int64_t i = 0; i < k; ++i) {
    const int64_t a = axes[i] < 0 ? axes[i] + r : axes[i];
    if (a < 0 || a >= r || seen[a])
      return "axes must be distinct and in [" + std::to_string(-r) + ", " + std::to_string(r) +
             "); got " + IntsToString(axes);
    seen[a] = true;
    full[a] = (*pads)[i];
    full[a + r] = (*pads)[i + k];
  }
  *pads = std::move(full);
  return "";
}

int64_t SourceIndex(int64_t c, int64_t n, PadMode mode) {
  if (c >= 0 && c < n) return c;
  switch (mode) {
    case PadMode::kConstant:
      return -1;
    case PadMode::kEdge:
      return c < 0 ? 0 : n - 1;
    case PadMode::kWrap: {
      const int64_t m = c % n;
      return m < 0 ? m + n : m;
    }
    case PadMode::kReflect: {
      if (n == 1) return 0;
      const int64_t period = 2 * (n - 1);
      int64_t m = c % period;
      if (m < 0) m += period;
      return m < n ? m : period - m;
    }
  }
  return -1;
}

class PadOp : public Op {
 public:
  const ir::OpAttrs* attributes() const override { return &a_; }
  static StatusOr<std::unique_ptr<Op>> Create(const Node& node) {
    const std::string m = node.GetString("mode", "constant");
    PadMode mode;
    if (m == "constant")
      mode = PadMode::kConstant;
    else if (m == "reflect")
      mode = PadMode::kReflect;
    else if (m == "edge")
      mode = PadMode::kEdge;
    else if (m == "wrap" && node.opset >= 19)
      mode = PadMode::kWrap;
    else
      return ir::AttrError(node, std::string("mode must be constant, reflect, edge") +
                                     (node.opset >= 19 ? " or wrap" : " (wrap from opset 19)") +
                                     "; got '" + m + "'");
    const char* pads_name = node.opset < 2 ? "paddings" : "pads";
    if (node.opset < 11 && !node.HasAttr(pads_name))
      return ir::AttrError(node, std::string("Pad before opset 11 needs the `") + pads_name +
                                     "` attribute; got none");
    return std::unique_ptr<Op>(
        new PadOp(node, mode, node.GetInts(pads_name), node.GetFloat("value", 0.f)));
  }
  std::vector<int> ShapeInputs() const override {
    if (opset() >= 18) return {1, 3};
    return opset() >= 11 ? std::vector<int>{1} : std::vector<int>{};
  }
  Status Infer(InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ExpectFixedSize(ctx, 0));
    std::vector<int64_t> pads = a_.pads;
    if (opset() >= 11) {
      KILN_ASSIGN_OR_RETURN(pads, KnownInts(ctx, 1, "Pad's pads"));
      if (opset() >= 18 && ctx.has_input(3)) {
        KILN_ASSIGN_OR_RETURN(auto axes, KnownInts(ctx, 3, "Pad's axes"));
        const std::string err = PadsForAxes(ctx.rank(0), axes, &pads);
        if (!err.empty()) return ctx.Error(err);
      }
      if (ctx.has_input(2)) {
        if (ctx.dtype(2) != ctx.dtype(0) && ctx.dtype(2) != FloatOf(ctx.dtype(0)))
          return ctx.Error(std::string("constant_value must have the data's dtype; got ") +
                           DataTypeName(ctx.dtype(2)));
        if (NumElements(ctx.shape(2)) != 1)
          return ctx.Error("constant_value must hold one element; got shape " +
                           ShapeToString(ctx.shape(2)));
      }
    }
    Shape out;
    const std::string err = CheckPads(ctx.shape(0), pads, a_.mode, &out);
    if (!err.empty()) return ctx.Error(err);
    if (opset() < 11 && a_.mode == PadMode::kConstant) {
      unsigned char probe[16];
      if (!StoreAsDtype(FloatOf(ctx.dtype(0)), a_.value, probe))
        return Unsupported("failed to infer shapes of " + describe() +
                           ": the value attribute cannot be stored as " +
                           DataTypeName(ctx.dtype(0)));
    }
    ctx.SetOutput(0, ctx.dtype(0), out);
    return OkStatus();
  }
  Status Compute(const ComputeContext& ctx) const override {
    const Tensor& in = ctx.in(0);
    Tensor& out = ctx.out(0);
    const size_t esz = DataTypeSize(in.dtype());
    std::vector<int64_t> pads = a_.pads;
    if (opset() >= 11) {
      KILN_ASSIGN_OR_RETURN(pads, RunInts(*this, ctx.in(1), "pads"));
      if (opset() >= 18 && ctx.has(3)) {
        KILN_ASSIGN_OR_RETURN(auto axes, RunInts(*this, ctx.in(3), "axes"));
        const std::string err = PadsForAxes(in.rank(), axes, &pads);
        if (!err.empty()) return RunError(err);
      }
    }
    Shape out_shape;
    const std::string err = CheckPads(in.shape(), pads, a_.mode, &out_shape);
    if (!err.empty()) return RunError(err);
    if (out_shape != out.shape())
      return RunError("output was allocated as " + ShapeToString(out.shape()) +
                      " but padding gives " + ShapeToString(out_shape));
    unsigned char fill[16] = {};
    if (opset() >= 11) {
      if (ctx.has(2) && ctx.in(2).numel() > 0) std::memcpy(fill, ctx.in(2).raw(), esz);
    } else if (!StoreAsDtype(in.dtype(), a_.value, fill)) {
      return RunError(std::string("the value attribute cannot be stored as ") +
                      DataTypeName(in.dtype()));
    }
    const int64_t n = out.numel();
    if (n == 0) return OkStatus();
    const size_t r = in.shape().size();
    auto* dst = static_cast<unsigned char*>(out.raw());
    const auto* src = static_cast<const unsigned char*>(in.raw());
    if (r == 0) {
      std::memcpy(dst, src, esz);
      return OkStatus();
    }
    // Per-axis map from output index to input index (-1: constant).
    std::vector<std::vector<int64_t>> map(r);
    for (size_t d = 0; d < r; ++d) {
      map[d].resize(out_shape[d]);
      for (int64_t o = 0; o < out_shape[d]; ++o)
        map[d][o] = SourceIndex(o - pads[d], in.shape()[d], a_.mode);
    }
    const auto strides = Strides(in.shape());
    const int64_t inner = out_shape[r - 1];
    const int64_t rows = n / inner;
    const auto& last = map[r - 1];
    std::vector<int64_t> idx(r, 0);
    for (int64_t row = 0; row < rows; ++row) {
      int64_t base = 0;
      bool constant_row = false;
      for (size_t d = 0; d + 1 < r; ++d) {
        const int64_t s = map[d][idx[d]];
        if (s < 0) constant_row = true;
        base += s * strides[d];
      }
      unsigned char* drow = dst + row * inner * static_cast<int64_t>(esz);
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t s = last[i];
        const void* from = constant_row || s < 0 ? static_cast<const void*>(fill)
                                                 : src + (base + s) * static_cast<int64_t>(esz);
        std::memcpy(drow + i * static_cast<int64_t>(esz), from, esz);
      }
      for (int64_t d = static_cast<int64_t>(r) - 2; d >= 0; --d) {
        if (++idx[d] < out_shape[d]) break;
        idx[d] = 0;
      }
    }
    return OkStatus();
  }

 private:
  PadOp(const Node& node, PadMode mode, std::vector<int64_t> pads, float value) : Op(node) {
    a_.mode = mode;
    a_.pads = std::move(pads);
    a_.value = value;
  }
  PadAttrs a_;
};
KILN_REGISTER_OP("Pad", 1, ir::kMaxOpset, &PadOp::Create);

// Kernel cases (ops/op_cases.h). cuda.pad.kernel takes mode constant on float32 up to rank 6
// (Pad-2's attributes, or Pad-11+'s constant pads and float32 constant_value, no axes input);
// the other modes, Pad-18's axes, other dtypes run on the reference only. Negative pads crop.
struct PadSpec {
  std::string what;
  int opset;
  std::string mode;  // "": the attribute is absent (constant)
  Shape x;
  std::vector<int64_t> pads, axes;  // axes: Pad-18's input
  bool value = false;               // a constant_value input / value attribute of 0.75
};

OpCase PadCase(const PadSpec& s, uint32_t seed) {
  OpCase c("Pad " + s.what + ": " + ShapeToString(s.x) + " pads " + IntsToString(s.pads) +
               (s.mode.empty() ? "" : " " + s.mode),
           s.opset);
  c.In(CaseTensor(s.x, seed));
  if (!s.mode.empty()) c.Str("mode", s.mode);
  if (s.opset < 11) {
    c.Ints(s.opset < 2 ? "paddings" : "pads", s.pads);
    if (s.value) c.Float("value", 0.75f);
    return c;
  }
  c.Const(CaseInt64s(s.pads));
  if (s.value)
    c.Const(CaseFloats({0.75f}, {}));
  else if (!s.axes.empty())
    c.Omitted();
  if (!s.axes.empty()) c.Const(CaseInt64s(s.axes));
  return c;
}

std::vector<OpCase> PadCases() {
  const std::vector<PadSpec> specs = {
      {"constant, value, crops", 13, "constant", {2, 3, 4, 4}, {0, 0, 1, 2, 0, 0, 1, -1}, {}, true},
      {"constant, no value", 11, "", {3, 1, 7}, {1, 0, 2, 0, 2, 1}, {}, false},
      {"constant, large", 19, "constant", {2, 16, 9, 11}, {0, 1, 1, 3, 0, 0, 2, 1}, {}, true},
      {"constant, crop only", 13, "constant", {2, 5, 9}, {0, -1, -2, -1, -3, 0}, {}, true},
      {"constant, rank 1", 13, "constant", {7}, {3, 2}, {}, true},
      {"constant, rank 6", 13, "", {2, 1, 3, 1, 2, 3}, {0, 1, 0, 2, 1, 0, 1, 0, 1, 0, 0, 2}, {}},
      {"reflect", 13, "reflect", {1, 3, 5, 6}, {0, 0, 2, 1, 0, 0, 1, 3}, {}, false},
      {"reflect, crops", 18, "reflect", {2, 3, 5, 4}, {0, 1, 4, -1, 0, -1, 3, 3}, {}, false},
      {"edge", 13, "edge", {2, 1, 5, 3}, {0, 2, 1, 0, 0, 1, 3, 2}, {}, false},
      {"wrap", 19, "wrap", {2, 3, 4}, {0, 1, 2, 0, 2, 5}, {}, false},
      {"axes input", 18, "constant", {2, 3, 5, 4}, {1, 2, 3, 0}, {2, -1}, true},
      {"axes input, edge", 18, "edge", {2, 3, 5, 4}, {2, 1}, {1}, false},
      {"Pad-2", 2, "constant", {2, 3, 4}, {0, 1, 2, 1, 0, -1}, {}, true},
      {"Pad-2 reflect", 2, "reflect", {2, 3, 4}, {0, 2, 3, 0, 1, 1}, {}, false},
      {"Pad-1", 1, "", {3, 1, 7}, {1, 1, 0, 0, 2, 3}, {}, true},
  };
  std::vector<OpCase> cases;
  uint32_t seed = 231;
  for (const PadSpec& s : specs) cases.push_back(PadCase(s, seed++));
  cases.push_back(OpCase("Pad int64, constant_value 7: [2,3,4] pads [1,0,2,1,2,0]", 13)
                      .In(CaseInts(DataType::kInt64, {2, 3, 4}, seed++, -100, 100))
                      .Const(CaseInt64s({1, 0, 2, 1, 2, 0}))
                      .Const(Tensor::FromVector<int64_t>({7}, {})));
  return cases;
}
KILN_REGISTER_OP_CASES("", "Pad", &PadCases);

}  // namespace
}  // namespace kiln::ops
