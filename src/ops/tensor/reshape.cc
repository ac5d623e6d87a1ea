// Ops that only relabel the shape of a row-major buffer: Flatten, Reshape, Squeeze, Unsqueeze,
// Identity, Dropout (inference). Their kernels are one byte copy (skipped when the runtime makes
// the output alias the input). Any fixed-size dtype works.
// Negative axes are accepted in every opset (specs before 11 say non-negative; ONNX Runtime
// accepts them too, and they have one meaning).
// Dropout-12+ with training_mode=true draws a random mask (DropoutOp below); Dropout-1/6's
// is_test attribute is ignored (treated as inference).
#include <algorithm>
#include <cstring>
#include <tuple>
#include <utility>

#include "ops/common.h"
#include "ops/op_cases.h"
#include "ops/tensor/random_source.h"
#include "ops/tensor/tensor_util.h"

namespace kiln::ops {
namespace {

using ir::ComputeContext;
using ir::InferContext;
using ir::Node;
using ir::Op;

Status CopyInput0(const ComputeContext& ctx) {
  const Tensor& in = ctx.in(0);
  Tensor& out = ctx.out(0);
  if (out.raw() != in.raw() && in.bytes() > 0) std::memcpy(out.raw(), in.raw(), in.bytes());
  return OkStatus();
}

// Flatten: [d0..d(axis-1)] x [d(axis)..]; axis in [-r, r].
class FlattenOp : public Op {
 public:
  explicit FlattenOp(const Node& node) : Op(node), axis_(node.GetInt("axis", 1)) {}
  Status Infer(InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ExpectFixedSize(ctx, 0));
    const int64_t r = ctx.rank(0);
    int64_t axis = axis_;
    if (axis < -r || axis > r)
      return ctx.Error("axis must be in [" + std::to_string(-r) + ", " + std::to_string(r) +
                       "]; got " + std::to_string(axis_));
    if (axis < 0) axis += r;
    int64_t a = 1, b = 1;
    for (int64_t d = 0; d < r; ++d) (d < axis ? a : b) *= ctx.shape(0)[d];
    ctx.SetOutput(0, ctx.dtype(0), {a, b});
    return OkStatus();
  }
  Status Compute(const ComputeContext& ctx) const override { return CopyInput0(ctx); }
  int InPlaceInput() const override { return 0; }

 private:
  int64_t axis_;
};
KILN_REGISTER_OP("Flatten", 1, ir::kMaxOpset, &ir::MakeOp<FlattenOp>);

// Reshape: Reshape-1..4 read the `shape` attribute, Reshape-5+ the `shape` input. A 0 copies the
// input dim (unless allowzero=1, Reshape-14+), one -1 is inferred from the element count.
class ReshapeOp : public Op {
 public:
  static StatusOr<std::unique_ptr<Op>> Create(const Node& node) {
    const int64_t allowzero = node.GetInt("allowzero", 0);
    if (allowzero != 0 && allowzero != 1)
      return ir::AttrError(node, "allowzero must be 0 or 1; got " + std::to_string(allowzero));
    if (node.opset < 5 && !node.HasAttr("shape"))
      return ir::AttrError(node, "Reshape before opset 5 needs the `shape` attribute; got none");
    return std::unique_ptr<Op>(new ReshapeOp(node, allowzero == 1));
  }
  std::vector<int> ShapeInputs() const override {
    return opset() >= 5 ? std::vector<int>{1} : std::vector<int>{};
  }
  Status Infer(InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ExpectFixedSize(ctx, 0));
    std::vector<int64_t> req = attr_shape_;
    if (opset() >= 5) {
      KILN_ASSIGN_OR_RETURN(req, KnownInts(ctx, 1, "Reshape's shape"));
      if (ctx.rank(1) != 1)
        return ctx.Error("shape must be 1-D; got rank " + std::to_string(ctx.rank(1)));
    }
    const Shape& in = ctx.shape(0);
    Shape out(req.size());
    int64_t infer_at = -1, known = 1;
    bool has_zero = false;
    for (size_t i = 0; i < req.size(); ++i) {
      int64_t d = req[i];
      if (d == -1) {
        if (infer_at >= 0)
          return ctx.Error("shape may contain at most one -1; got " + IntsToString(req));
        infer_at = static_cast<int64_t>(i);
        continue;
      }
      if (d < -1) return ctx.Error("shape dims must be >= -1; got " + IntsToString(req));
      if (d == 0) {
        has_zero = true;
        if (!allowzero_) {
          if (i >= in.size())
            return ctx.Error("a 0 in shape copies the input dim, but the input has rank " +
                             std::to_string(in.size()) + "; got " + IntsToString(req));
          d = in[i];
        }
      }
      out[i] = d;
      known *= d;
    }
    if (allowzero_ && has_zero && infer_at >= 0)
      return ctx.Error("with allowzero=1 shape cannot contain both 0 and -1; got " +
                       IntsToString(req));
    const int64_t n = NumElements(in);
    if (infer_at >= 0) {
      if (known == 0 || n % known != 0)
        return ctx.Error("cannot infer the -1 dim: " + std::to_string(n) +
                         " elements do not divide by " + std::to_string(known) + "; got shape " +
                         IntsToString(req));
      out[infer_at] = n / known;
    } else if (known != n) {
      return ctx.Error("shape must keep the element count " + std::to_string(n) + "; got " +
                       IntsToString(req) + " (" + std::to_string(known) + " elements)");
    }
    ctx.SetOutput(0, ctx.dtype(0), out);
    return OkStatus();
  }
  Status Compute(const ComputeContext& ctx) const override { return CopyInput0(ctx); }
  int InPlaceInput() const override { return 0; }

 private:
  ReshapeOp(const Node& node, bool allowzero)
      : Op(node), allowzero_(allowzero), attr_shape_(node.GetInts("shape")) {}
  bool allowzero_;
  std::vector<int64_t> attr_shape_;
};
KILN_REGISTER_OP("Reshape", 1, ir::kMaxOpset, &ReshapeOp::Create);

// Squeeze: axes from the attribute (Squeeze-1..12) or the optional input 1 (Squeeze-13+); with
// no axes every size-1 dim is removed.
class SqueezeOp : public Op {
 public:
  explicit SqueezeOp(const Node& node)
      : Op(node), has_attr_axes_(node.HasAttr("axes")), attr_axes_(node.GetInts("axes")) {}
  std::vector<int> ShapeInputs() const override {
    return opset() >= 13 ? std::vector<int>{1} : std::vector<int>{};
  }
  Status Infer(InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ExpectFixedSize(ctx, 0));
    const Shape& in = ctx.shape(0);
    const int64_t r = ctx.rank(0);
    std::vector<int64_t> axes = attr_axes_;
    bool have_axes = opset() < 13 && has_attr_axes_;
    if (opset() >= 13 && ctx.has_input(1)) {
      KILN_ASSIGN_OR_RETURN(axes, KnownInts(ctx, 1, "Squeeze's axes"));
      have_axes = true;
    }
    std::vector<bool> drop(r, false);
    if (!have_axes) {
      for (int64_t d = 0; d < r; ++d) drop[d] = in[d] == 1;
    } else {
      for (int64_t a : axes) {
        if (a < -r || a >= r)
          return ctx.Error("axes must be in [" + std::to_string(-r) + ", " + std::to_string(r) +
                           "); got " + IntsToString(axes));
        if (a < 0) a += r;
        if (drop[a]) return ctx.Error("axes must not repeat; got " + IntsToString(axes));
        if (in[a] != 1)
          return ctx.Error("squeezed dims must have size 1; got size " + std::to_string(in[a]) +
                           " at axis " + std::to_string(a));
        drop[a] = true;
      }
    }
    Shape out;
    for (int64_t d = 0; d < r; ++d)
      if (!drop[d]) out.push_back(in[d]);
    ctx.SetOutput(0, ctx.dtype(0), out);
    return OkStatus();
  }
  Status Compute(const ComputeContext& ctx) const override { return CopyInput0(ctx); }
  int InPlaceInput() const override { return 0; }

 private:
  bool has_attr_axes_;
  std::vector<int64_t> attr_axes_;
};
KILN_REGISTER_OP("Squeeze", 1, ir::kMaxOpset, &ir::MakeOp<SqueezeOp>);

// Unsqueeze: axes (required) from the attribute (Unsqueeze-1..12) or input 1 (Unsqueeze-13+),
// indexing the output, whose rank is rank(input) + len(axes).
class UnsqueezeOp : public Op {
 public:
  static StatusOr<std::unique_ptr<Op>> Create(const Node& node) {
    if (node.opset < 13 && !node.HasAttr("axes"))
      return ir::AttrError(node, "Unsqueeze before opset 13 needs the `axes` attribute; got none");
    return std::unique_ptr<Op>(new UnsqueezeOp(node));
  }
  std::vector<int> ShapeInputs() const override {
    return opset() >= 13 ? std::vector<int>{1} : std::vector<int>{};
  }
  Status Infer(InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ExpectFixedSize(ctx, 0));
    std::vector<int64_t> axes = attr_axes_;
    if (opset() >= 13) {
      KILN_ASSIGN_OR_RETURN(axes, KnownInts(ctx, 1, "Unsqueeze's axes"));
    }
    const Shape& in = ctx.shape(0);
    const int64_t r = ctx.rank(0) + static_cast<int64_t>(axes.size());
    std::vector<bool> inserted(r, false);
    for (int64_t a : axes) {
      if (a < -r || a >= r)
        return ctx.Error("axes must be in [" + std::to_string(-r) + ", " + std::to_string(r) +
                         ") for output rank " + std::to_string(r) + "; got " + IntsToString(axes));
      if (a < 0) a += r;
      if (inserted[a]) return ctx.Error("axes must not repeat; got " + IntsToString(axes));
      inserted[a] = true;
    }
    Shape out(r);
    size_t j = 0;
    for (int64_t d = 0; d < r; ++d) out[d] = inserted[d] ? 1 : in[j++];
    ctx.SetOutput(0, ctx.dtype(0), out);
    return OkStatus();
  }
  Status Compute(const ComputeContext& ctx) const override { return CopyInput0(ctx); }
  int InPlaceInput() const override { return 0; }

 private:
  explicit UnsqueezeOp(const Node& node) : Op(node), attr_axes_(node.GetInts("axes")) {}
  std::vector<int64_t> attr_axes_;
};
KILN_REGISTER_OP("Unsqueeze", 1, ir::kMaxOpset, &UnsqueezeOp::Create);

class IdentityOp : public Op {
 public:
  explicit IdentityOp(const Node& node) : Op(node) {}
  // Strings, sequences and optionals pass through as the same (immutable) value.
  bool TakesNonPlainValues() const override { return true; }
  Status Infer(InferContext& ctx) const override {
    if (IsPlainDataType(ctx.dtype(0))) KILN_RETURN_IF_ERROR(ExpectFixedSize(ctx, 0));
    ctx.SetOutput(0, ctx.dtype(0), ctx.shape(0));
    if (ctx.value(0) != nullptr) ctx.SetOutputValue(0, *ctx.value(0));
    return OkStatus();
  }
  Status Compute(const ComputeContext& ctx) const override {
    if (!IsPlainDataType(ctx.in(0).dtype())) {
      ctx.out(0) = ctx.in(0);
      return OkStatus();
    }
    return CopyInput0(ctx);
  }
  int InPlaceInput() const override { return 0; }
};
KILN_REGISTER_OP("Identity", 1, ir::kMaxOpset, &ir::MakeOp<IdentityOp>);

// Dropout. In inference (opset < 12, or training_mode false or absent): output = input, the
// optional mask (bool from opset 10, the input's type before) all true. In training mode
// (training_mode true, opset 12+): each element is kept when a uniform draw u in [0, 1) is
// >= ratio (default 0.5), and scaled by 1 / (1 - ratio); the mask says which were kept. The draws
// come from the random ops' generator (random_source.h): with `seed` the same on every run (and
// the op may be folded), without it new on every run (Deterministic() false). ratio must be in
// [0, 1); float32 and float64 data.
class DropoutOp : public Op {
 public:
  explicit DropoutOp(const Node& node)
      : Op(node), source_(node), may_train_(node.opset >= 12 && node.HasInput(2)) {}
  bool Deterministic() const override { return !may_train_ || source_.seeded(); }
  Status Infer(InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ExpectFixedSize(ctx, 0));
    for (size_t i = 1; i < 3; ++i)
      if (ctx.has_input(i) && NumElements(ctx.shape(i)) != 1)
        return ctx.Error(std::string(i == 1 ? "ratio" : "training_mode") +
                         " must hold one element; got shape " + ShapeToString(ctx.shape(i)));
    if (opset() >= 12 && ctx.has_input(2) && ctx.dtype(2) != DataType::kBool)
      return ctx.Error(std::string("training_mode must be bool; got ") +
                       DataTypeName(ctx.dtype(2)));
    ctx.SetOutput(0, ctx.dtype(0), ctx.shape(0));
    if (ctx.num_outputs() > 1)
      ctx.SetOutput(1, opset() >= 10 ? DataType::kBool : ctx.dtype(0), ctx.shape(0));
    return OkStatus();
  }
  Status Compute(const ComputeContext& ctx) const override {
    if (opset() >= 12 && ctx.has(2) && ctx.in(2).data<bool>()[0]) return Train(ctx);
    KILN_RETURN_IF_ERROR(CopyInput0(ctx));
    if (ctx.outputs.size() > 1 && ctx.outputs[1] != nullptr) {
      Tensor& mask = ctx.out(1);
      unsigned char one[8] = {};
      if (!StoreAsDtype(mask.dtype(), 1.0, one))
        return RunError(std::string("mask dtype must be numeric or bool; got ") +
                        DataTypeName(mask.dtype()));
      FillBytes(mask.raw(), mask.numel(), one, DataTypeSize(mask.dtype()));
    }
    return OkStatus();
  }

 private:
  Status Train(const ComputeContext& ctx) const {
    const double ratio = ctx.has(1) ? ReadScalarAsDouble(ctx.in(1), 0) : 0.5;
    if (!(ratio >= 0.0 && ratio < 1.0))
      return RunError("training_mode=true needs ratio in [0, 1); got " + std::to_string(ratio));
    const DataType dt = ctx.in(0).dtype();
    if (dt != DataType::kFloat && dt != DataType::kDouble)
      return RunError(std::string("training-mode Dropout takes float32 or float64 data; got ") +
                      DataTypeName(dt));
    std::mt19937_64 eng = source_.Engine();
    const double scale = 1.0 / (1.0 - ratio);
    bool* mask =
        ctx.outputs.size() > 1 && ctx.outputs[1] != nullptr ? ctx.out(1).data<bool>() : nullptr;
    const int64_t n = ctx.in(0).numel();
    for (int64_t i = 0; i < n; ++i) {
      const bool keep = Uniform01(eng) >= ratio;
      if (mask) mask[i] = keep;
      if (dt == DataType::kFloat)
        ctx.out(0).data<float>()[i] =
            keep ? static_cast<float>(ctx.in(0).data<float>()[i] * scale) : 0.f;
      else
        ctx.out(0).data<double>()[i] = keep ? ctx.in(0).data<double>()[i] * scale : 0.0;
    }
    return OkStatus();
  }
  RandomSource source_;
  bool may_train_;
};
KILN_REGISTER_OP("Dropout", 1, ir::kMaxOpset, &ir::MakeOp<DropoutOp>);

// Kernel cases (ops/op_cases.h). The CUDA kernels of these ops (cuda.<op>.copy) take any case
// but Dropout with its mask output; every case runs on the reference. Shape inputs constant
// (one Reshape computed), float32 and other dtypes, size-1 dims.
Tensor ReshapeCaseTensor(DataType dtype, const Shape& shape, uint32_t seed) {
  if (dtype == DataType::kFloat) return CaseTensor(shape, seed);
  return CaseInts(dtype, shape, seed, 0, dtype == DataType::kBool ? 1 : 100);
}

std::vector<OpCase> ReshapeCases() {
  struct Spec {
    std::string what;
    int opset;
    DataType dtype;
    Shape x;
    std::vector<int64_t> shape;
    bool constant = true;
    int64_t allowzero = -1;  // -1: no attribute
  };
  using D = DataType;
  const std::vector<Spec> specs = {
      {"-1", 13, D::kFloat, {2, 4, 5, 2}, {2, -1}},
      {"flatten", 13, D::kFloat, {2, 4, 5, 5}, {2, 100}},
      {"0 copies a dim", 14, D::kFloat, {3, 1, 7}, {0, 7, -1}},
      {"allowzero", 14, D::kFloat, {3, 1, 7}, {21, 1}, true, 1},
      {"computed shape", 13, D::kFloat, {2, 16, 9, 11}, {32, -1, 11}, false},
      {"to a scalar", 13, D::kFloat, {1, 1}, {}},
      {"Reshape-5", 5, D::kFloat, {5, 1, 3}, {3, 5}},
      {"int64", 13, D::kInt64, {2, 3, 4}, {4, -1}},
      {"bool", 21, D::kBool, {2, 3, 4}, {1, 24, 1}},
  };
  std::vector<OpCase> cases;
  uint32_t seed = 281;
  for (const Spec& s : specs) {
    OpCase c("Reshape " + s.what + ": " + DataTypeName(s.dtype) + ShapeToString(s.x) + " to " +
                 IntsToString(s.shape),
             s.opset);
    c.In(ReshapeCaseTensor(s.dtype, s.x, seed++));
    if (s.constant)
      c.Const(CaseInt64s(s.shape));
    else
      c.In(CaseInt64s(s.shape));
    if (s.allowzero >= 0) c.Int("allowzero", s.allowzero);
    cases.push_back(std::move(c));
  }
  cases.push_back(OpCase("Reshape-1 shape attribute: float32[7,3] to [3,7]", 1)
                      .In(CaseTensor({7, 3}, seed++))
                      .Ints("shape", {3, 7}));
  return cases;
}
KILN_REGISTER_OP_CASES("", "Reshape", &ReshapeCases);

std::vector<OpCase> FlattenCases() {
  std::vector<OpCase> cases;
  uint32_t seed = 301;
  for (const auto& [opset, axis] : std::vector<std::pair<int, int64_t>>{
           {13, 1}, {11, 0}, {13, 3}, {11, -1}, {21, -3}, {9, 2}, {13, 4}})
    cases.push_back(OpCase("Flatten float32[2,3,1,4] axis " + std::to_string(axis), opset)
                        .In(CaseTensor({2, 3, 1, 4}, seed++))
                        .Int("axis", axis));
  cases.push_back(OpCase("Flatten-1 default axis float32[2,16,9,11]", 1)
                      .In(CaseTensor({2, 16, 9, 11}, seed++)));
  cases.push_back(OpCase("Flatten int64[3,1,7] axis 2", 13)
                      .In(ReshapeCaseTensor(DataType::kInt64, {3, 1, 7}, seed++))
                      .Int("axis", 2));
  return cases;
}
KILN_REGISTER_OP_CASES("", "Flatten", &FlattenCases);

// Squeeze and Unsqueeze: axes as the constant input (opset 13+) or the attribute (before).
OpCase AxesCase(const std::string& op, int opset, DataType dtype, const Shape& x,
                const std::vector<int64_t>& axes, bool has_axes, uint32_t seed) {
  OpCase c(op + "-" + std::to_string(opset) + " " + DataTypeName(dtype) + ShapeToString(x) +
               (has_axes ? " axes " + IntsToString(axes) : " no axes"),
           opset);
  c.In(ReshapeCaseTensor(dtype, x, seed));
  if (has_axes && opset >= 13) c.Const(CaseInt64s(axes));
  if (has_axes && opset < 13) c.Ints("axes", axes);
  return c;
}

std::vector<OpCase> SqueezeCases() {
  using D = DataType;
  return {AxesCase("Squeeze", 13, D::kFloat, {2, 1, 12}, {1}, true, 321),
          AxesCase("Squeeze", 13, D::kFloat, {1, 3, 1, 7, 1}, {}, false, 322),
          AxesCase("Squeeze", 21, D::kFloat, {1, 3, 1, 7, 1}, {-1, 0}, true, 323),
          AxesCase("Squeeze", 11, D::kFloat, {1, 3, 1, 7, 1}, {-1, 0}, true, 324),
          AxesCase("Squeeze", 1, D::kFloat, {1, 16, 9, 11}, {0}, true, 325),
          AxesCase("Squeeze", 13, D::kInt64, {3, 1}, {1}, true, 326)};
}
KILN_REGISTER_OP_CASES("", "Squeeze", &SqueezeCases);

std::vector<OpCase> UnsqueezeCases() {
  using D = DataType;
  return {AxesCase("Unsqueeze", 13, D::kFloat, {3, 7}, {0, -1}, true, 341),
          AxesCase("Unsqueeze", 13, D::kFloat, {2, 12}, {1}, true, 342),
          AxesCase("Unsqueeze", 21, D::kFloat, {2, 16, 9, 11}, {4, 1}, true, 343),
          AxesCase("Unsqueeze", 11, D::kFloat, {3, 1, 7}, {2, 0}, true, 344),
          AxesCase("Unsqueeze", 1, D::kFloat, {3, 1, 7}, {0}, true, 345),
          AxesCase("Unsqueeze", 13, D::kFloat, {}, {0}, true, 346),
          AxesCase("Unsqueeze", 13, D::kInt64, {5}, {1}, true, 347)};
}
KILN_REGISTER_OP_CASES("", "Unsqueeze", &UnsqueezeCases);

std::vector<OpCase> IdentityCases() {
  using D = DataType;
  std::vector<OpCase> cases;
  uint32_t seed = 361;
  for (const auto& [opset, dtype, shape] :
       std::vector<std::tuple<int, D, Shape>>{{13, D::kFloat, {3, 1, 7}},
                                              {1, D::kFloat, {2, 16, 9, 11}},
                                              {21, D::kFloat, {}},
                                              {13, D::kInt64, {4, 5}},
                                              {16, D::kBool, {1, 9}}})
    cases.push_back(OpCase("Identity-" + std::to_string(opset) + " " + DataTypeName(dtype) +
                               ShapeToString(shape),
                           opset)
                        .In(ReshapeCaseTensor(dtype, shape, seed++)));
  return cases;
}
KILN_REGISTER_OP_CASES("", "Identity", &IdentityCases);

// Dropout (inference): the output alone (what cuda.dropout.copy takes) and with the mask.
std::vector<OpCase> DropoutCases() {
  Tensor no = CaseInts(DataType::kBool, {}, 1, 0, 0), yes = CaseInts(DataType::kBool, {}, 1, 1, 1);
  std::vector<OpCase> cases;
  cases.push_back(OpCase("Dropout-13 [3,1,7]", 13).In(CaseTensor({3, 1, 7}, 381)));
  cases.push_back(OpCase("Dropout-12 ratio 0.3, training_mode false [2,16,9,11]", 12)
                      .In(CaseTensor({2, 16, 9, 11}, 382))
                      .Const(CaseFloats({0.3f}, {}))
                      .Const(no));
  cases.push_back(OpCase("Dropout-13 training_mode true, ratio 0 [2,5,3]", 13)
                      .In(CaseTensor({2, 5, 3}, 383))
                      .Const(CaseFloats({0.f}, {}))
                      .Const(yes));
  cases.push_back(OpCase("Dropout-13 training, ratio 0.4, seed 7, mask [3,7,5]", 13)
                      .In(CaseTensor({3, 7, 5}, 385))
                      .Const(CaseFloats({0.4f}, {}))
                      .Const(yes)
                      .Float("seed", 7.f)
                      .Outputs(2));
  cases.push_back(OpCase("Dropout-7 ratio attribute [5,1,3]", 7)
                      .In(CaseTensor({5, 1, 3}, 384))
                      .Float("ratio", 0.2f));
  cases.push_back(
      OpCase("Dropout-13 with mask [3,1,7]", 13).In(CaseTensor({3, 1, 7}, 385)).Outputs(2));
  cases.push_back(OpCase("Dropout-6 with mask (input's dtype) [4,3]", 6)
                      .In(CaseTensor({4, 3}, 386))
                      .Outputs(2));
  return cases;
}
KILN_REGISTER_OP_CASES("", "Dropout", &DropoutCases);

}  // namespace
}  // namespace kiln::ops
