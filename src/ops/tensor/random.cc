// The random ops: RandomUniform, RandomNormal (opset 1, 22: a `shape` attribute),
// RandomUniformLike, RandomNormalLike (opset 1, 22: the input's shape, and its dtype unless `dtype`
// is set), Bernoulli (opset 15, 22: 1 with probability p per element of the input, in `dtype` or
// the input's type) and Multinomial (opset 7, 22: input [batch, class_size] unnormalized
// log-probabilities, output [batch, sample_size] class indices, int32 or int64).
//
// Generator and seeds. Each Compute makes its own std::mt19937_64 (its sequence is fixed by the
// C++ standard) and maps its 64-bit words to values with kiln's own arithmetic, not the standard's
// distributions (whose outputs are implementation-defined): uniform u = (word >> 11) * 2^-53 in
// [0, 1) (53 random bits); low + (high - low) * u in double, rounded to the output type and kept
// below `high`; normal values by Box-Muller on pairs of uniforms (both of the pair used, in order:
// z0 = r cos(2 pi u2), z1 = r sin(2 pi u2), r = sqrt(-2 ln(1 - u1))); Bernoulli: 1 when u < p;
// Multinomial: the class whose cumulative weight exp(x - max) first exceeds u * total. Values
// are drawn in row-major order of the output.
// - With `seed`: the engine's seed is SplitMix64 of the float's bit pattern, so the output is a
//   function of (seed, attributes, input): the same on every run, in every session, on every
//   machine (Box-Muller's log/sqrt/cos/sin come from the C library; glibc's are within an ulp in
//   double, so float32 normal values match bit for bit in practice and double ones may differ in
//   the last bit on another libm). Such a node is an ordinary deterministic op and may be folded.
// - Without `seed`: each op draws a 64-bit base from std::random_device once, when it is created
//   (falling back to the clock and the op's address if the device fails), and each Compute mixes
//   a per-op atomic run counter into it, so every run draws new values. Deterministic() is false,
//   so constant folding and the planner never freeze the node into a constant.
// Thread-safety: Compute is const and keeps its engine on the stack; the only shared state is the
// atomic counter, so concurrent runs of one op are safe and never share a sequence.
// Types: float16 and bfloat16 dtypes (attribute or input) compute as float32, as kiln lowers those
// types to float32 at load (passes/lower_float16.h) and casts graph outputs back.
// Not compared with ONNX's node tests: their expected values come from numpy's generator.
#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <numbers>
#include <optional>
#include <random>
#include <vector>

#include "ops/common.h"
#include "ops/op_cases.h"
#include "ops/tensor/random_source.h"
#include "ops/tensor/tensor_util.h"

namespace kiln::ops {
namespace {

// Standard normal values by Box-Muller, both values of each pair used in turn.
class NormalStream {
 public:
  explicit NormalStream(std::mt19937_64& eng) : eng_(eng) {}
  double Next() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double u1 = 1.0 - Uniform01(eng_);  // (0, 1]: log stays finite
    const double u2 = Uniform01(eng_);
    const double r = std::sqrt(-2.0 * std::log(u1));
    const double t = 2.0 * std::numbers::pi * u2;
    spare_ = r * std::sin(t);
    has_spare_ = true;
    return r * std::cos(t);
  }

 private:
  std::mt19937_64& eng_;
  double spare_ = 0.0;
  bool has_spare_ = false;
};

// The real-valued output types; float16 and bfloat16 compute as float32 (file comment).
StatusOr<DataType> RealDtype(const ir::Node& node, int64_t code) {
  switch (static_cast<DataType>(code)) {
    case DataType::kFloat:
    case DataType::kFloat16:
    case DataType::kBFloat16:
      return DataType::kFloat;
    case DataType::kDouble:
      return DataType::kDouble;
    default:
      return ir::AttrError(
          node, "dtype must be float16, bfloat16, float or double; got " + std::to_string(code));
  }
}

DataType ComputedDtype(DataType t) {
  return t == DataType::kFloat16 || t == DataType::kBFloat16 ? DataType::kFloat : t;
}

// Input 0's dtype as computed (float or double); an error names `what` when it is absent or not
// a real type.
StatusOr<DataType> RealInput(const ir::InferContext& ctx, const std::string& what) {
  if (!ctx.has_input(0)) return ctx.Error(what + " (input 0) is required; got none");
  const DataType in = ComputedDtype(ctx.dtype(0));
  if (in != DataType::kFloat && in != DataType::kDouble)
    return ctx.Error(what + " must be a float or double tensor; got " + DataTypeName(ctx.dtype(0)));
  return in;
}

// Base of the random ops: the seed, and folding only when seeded.
class RandomOpBase : public ir::Op {
 public:
  explicit RandomOpBase(const ir::Node& node) : Op(node), source_(node) {}
  bool Deterministic() const override { return source_.seeded(); }

 protected:
  RandomSource source_;
};

// ---- RandomUniform, RandomNormal and their Like forms ----

struct RandomAttrs : ir::OpAttrs {
  bool normal = false;                    // else uniform
  bool like = false;                      // shape (and default dtype) from input 0
  double a = 0.0, b = 1.0;                // low, high (uniform) or mean, scale (normal)
  DataType dtype = DataType::kUndefined;  // kUndefined: the input's (Like ops)
  Shape shape;                            // RandomUniform, RandomNormal
};

class RandomOp final : public RandomOpBase {
 public:
  template <bool kNormal, bool kLike>
  static StatusOr<std::unique_ptr<ir::Op>> Create(const ir::Node& node) {
    auto op = std::make_unique<RandomOp>(node);
    RandomAttrs& a = op->a_;
    a.normal = kNormal;
    a.like = kLike;
    a.a = node.GetFloat(kNormal ? "mean" : "low", 0.f);
    a.b = node.GetFloat(kNormal ? "scale" : "high", 1.f);
    const char* an = kNormal ? "mean" : "low";
    const char* bn = kNormal ? "scale" : "high";
    if (!std::isfinite(a.a) || !std::isfinite(a.b))
      return ir::AttrError(node, std::string(an) + " and " + bn + " must be finite; got " +
                                     std::to_string(a.a) + " and " + std::to_string(a.b));
    if (!kNormal && a.a > a.b)
      return ir::AttrError(node, "low must be <= high; got low " + std::to_string(a.a) + ", high " +
                                     std::to_string(a.b));
    if (kNormal && a.b < 0)
      return ir::AttrError(node, "scale must be >= 0; got " + std::to_string(a.b));
    if (node.HasAttr("dtype") || !kLike) {
      KILN_ASSIGN_OR_RETURN(a.dtype, RealDtype(node, node.GetInt("dtype", 1)));
    }
    if (!kLike) {
      if (!node.HasAttr("shape"))
        return ir::AttrError(node, "the shape attribute is required; got none");
      a.shape = node.GetInts("shape");
      for (int64_t d : a.shape)
        if (d < 0)
          return ir::AttrError(node, "shape dims must be >= 0; got " + IntsToString(a.shape));
    }
    return std::unique_ptr<ir::Op>(std::move(op));
  }
  explicit RandomOp(const ir::Node& node) : RandomOpBase(node) {}

  Status Infer(ir::InferContext& ctx) const override {
    if (!a_.like) {
      ctx.SetOutput(0, a_.dtype, a_.shape);
      return OkStatus();
    }
    if (!ctx.has_input(0)) return ctx.Error("input 0 is required; got none");
    DataType out = a_.dtype;
    if (out == DataType::kUndefined) {
      out = ComputedDtype(ctx.dtype(0));
      if (out != DataType::kFloat && out != DataType::kDouble)
        return ctx.Error(std::string("without a dtype attribute the input must be a float ") +
                         "tensor (its type is the output's); got " + DataTypeName(ctx.dtype(0)));
    }
    ctx.SetOutput(0, out, ctx.shape(0));
    return OkStatus();
  }

  Status Compute(const ir::ComputeContext& ctx) const override {
    Tensor& y = ctx.out(0);
    std::mt19937_64 eng = source_.Engine();
    if (y.dtype() == DataType::kDouble) return Fill<double>(eng, y.data<double>(), y.numel());
    if (y.dtype() == DataType::kFloat) return Fill<float>(eng, y.data<float>(), y.numel());
    return RunError(std::string("output dtype must be float or double; got ") +
                    DataTypeName(y.dtype()));
  }

  const ir::OpAttrs* attributes() const override { return &a_; }

 private:
  template <typename T>
  Status Fill(std::mt19937_64& eng, T* dst, int64_t n) const {
    if (a_.normal) {
      NormalStream normal(eng);
      for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<T>(a_.a + a_.b * normal.Next());
      return OkStatus();
    }
    const T high = static_cast<T>(a_.b);
    const T below_high = std::nextafter(high, -std::numeric_limits<T>::infinity());
    for (int64_t i = 0; i < n; ++i) {
      T v = static_cast<T>(a_.a + (a_.b - a_.a) * Uniform01(eng));
      if (v >= high && a_.a < a_.b) v = below_high;  // rounding up to high: keep [low, high)
      dst[i] = v;
    }
    return OkStatus();
  }

  RandomAttrs a_;
};
KILN_REGISTER_OP("RandomUniform", 1, ir::kMaxOpset, (&RandomOp::Create<false, false>));
KILN_REGISTER_OP("RandomNormal", 1, ir::kMaxOpset, (&RandomOp::Create<true, false>));
KILN_REGISTER_OP("RandomUniformLike", 1, ir::kMaxOpset, (&RandomOp::Create<false, true>));
KILN_REGISTER_OP("RandomNormalLike", 1, ir::kMaxOpset, (&RandomOp::Create<true, true>));

// ---- Bernoulli ----

struct BernoulliAttrs : ir::OpAttrs {
  DataType dtype = DataType::kUndefined;  // kUndefined: the input's
};

class BernoulliOp final : public RandomOpBase {
 public:
  static StatusOr<std::unique_ptr<ir::Op>> Create(const ir::Node& node) {
    auto op = std::make_unique<BernoulliOp>(node);
    if (node.HasAttr("dtype")) {
      const int64_t code = node.GetInt("dtype", 0);
      const DataType dtype = ComputedDtype(static_cast<DataType>(code));
      if (code <= 0 || !IsSupportedDataType(dtype))
        return ir::AttrError(
            node, "dtype must be a numeric or bool tensor type; got " + std::to_string(code));
      op->a_.dtype = dtype;
    }
    return std::unique_ptr<ir::Op>(std::move(op));
  }
  explicit BernoulliOp(const ir::Node& node) : RandomOpBase(node) {}

  Status Infer(ir::InferContext& ctx) const override {
    KILN_ASSIGN_OR_RETURN(const DataType in, RealInput(ctx, "probabilities"));
    ctx.SetOutput(0, a_.dtype == DataType::kUndefined ? in : a_.dtype, ctx.shape(0));
    return OkStatus();
  }

  Status Compute(const ir::ComputeContext& ctx) const override {
    const Tensor& p = ctx.in(0);
    Tensor& y = ctx.out(0);
    const size_t esz = DataTypeSize(y.dtype());
    unsigned char zero[8] = {}, one[8] = {};
    if (!StoreAsDtype(y.dtype(), 0.0, zero) || !StoreAsDtype(y.dtype(), 1.0, one))
      return RunError(std::string("output dtype must be numeric or bool; got ") +
                      DataTypeName(y.dtype()));
    std::mt19937_64 eng = source_.Engine();
    auto* dst = static_cast<unsigned char*>(y.raw());
    for (int64_t i = 0; i < y.numel(); ++i) {
      const double pi = ReadScalarAsDouble(p, i);
      if (!(pi >= 0.0 && pi <= 1.0))
        return RunError("probabilities must be in [0, 1]; got " + std::to_string(pi) +
                        " at index " + std::to_string(i));
      std::memcpy(dst + i * esz, Uniform01(eng) < pi ? one : zero, esz);
    }
    return OkStatus();
  }

  const ir::OpAttrs* attributes() const override { return &a_; }

 private:
  BernoulliAttrs a_;
};
KILN_REGISTER_OP("Bernoulli", 15, ir::kMaxOpset, &BernoulliOp::Create);

// ---- Multinomial ----

struct MultinomialAttrs : ir::OpAttrs {
  DataType dtype = DataType::kInt32;
  int64_t sample_size = 1;
};

class MultinomialOp final : public RandomOpBase {
 public:
  static StatusOr<std::unique_ptr<ir::Op>> Create(const ir::Node& node) {
    auto op = std::make_unique<MultinomialOp>(node);
    const int64_t code = node.GetInt("dtype", static_cast<int64_t>(DataType::kInt32));
    if (code != static_cast<int64_t>(DataType::kInt32) &&
        code != static_cast<int64_t>(DataType::kInt64))
      return ir::AttrError(node,
                           "dtype must be int32 (6) or int64 (7); got " + std::to_string(code));
    op->a_.dtype = static_cast<DataType>(code);
    op->a_.sample_size = node.GetInt("sample_size", 1);
    if (op->a_.sample_size < 0)
      return ir::AttrError(node,
                           "sample_size must be >= 0; got " + std::to_string(op->a_.sample_size));
    return std::unique_ptr<ir::Op>(std::move(op));
  }
  explicit MultinomialOp(const ir::Node& node) : RandomOpBase(node) {}

  Status Infer(ir::InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(RealInput(ctx, "log-probabilities").status());
    if (ctx.rank(0) != 2)
      return ctx.Error("input must be 2-D [batch_size, class_size]; got shape " +
                       ShapeToString(ctx.shape(0)));
    if (ctx.shape(0)[1] < 1 && ctx.shape(0)[0] > 0 && a_.sample_size > 0)
      return ctx.Error("class_size must be >= 1; got shape " + ShapeToString(ctx.shape(0)));
    ctx.SetOutput(0, a_.dtype, {ctx.shape(0)[0], a_.sample_size});
    return OkStatus();
  }

  Status Compute(const ir::ComputeContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    Tensor& y = ctx.out(0);
    const int64_t batch = x.shape()[0], classes = x.shape()[1];
    std::vector<double> cum(static_cast<size_t>(classes));
    std::mt19937_64 eng = source_.Engine();
    for (int64_t b = 0; b < batch; ++b) {
      double mx = -std::numeric_limits<double>::infinity();
      for (int64_t c = 0; c < classes; ++c) {
        const double v = ReadScalarAsDouble(x, b * classes + c);
        if (std::isnan(v) || v == std::numeric_limits<double>::infinity())
          return RunError("log-probabilities must be finite or -inf; got " + std::to_string(v) +
                          " at [" + std::to_string(b) + ", " + std::to_string(c) + "]");
        mx = std::max(mx, v);
      }
      if (mx == -std::numeric_limits<double>::infinity() && a_.sample_size > 0)
        return RunError("every class of batch row " + std::to_string(b) +
                        " has log-probability -inf; got no class to draw");
      double total = 0.0;
      int64_t last = 0;  // the last class of positive weight
      for (int64_t c = 0; c < classes; ++c) {
        const double w = std::exp(ReadScalarAsDouble(x, b * classes + c) - mx);
        total += w;
        cum[c] = total;
        if (w > 0) last = c;
      }
      for (int64_t s = 0; s < a_.sample_size; ++s) {
        const double t = Uniform01(eng) * total;
        int64_t k = std::upper_bound(cum.begin(), cum.end(), t) - cum.begin();
        if (k > last) k = last;  // u * total rounded up to total
        if (a_.dtype == DataType::kInt64)
          y.data<int64_t>()[b * a_.sample_size + s] = k;
        else
          y.data<int32_t>()[b * a_.sample_size + s] = static_cast<int32_t>(k);
      }
    }
    return OkStatus();
  }

  const ir::OpAttrs* attributes() const override { return &a_; }

 private:
  MultinomialAttrs a_;
};
KILN_REGISTER_OP("Multinomial", 7, ir::kMaxOpset, &MultinomialOp::Create);

// ---- Reference cases (all seeded: the harness compares outputs) ----

std::vector<OpCase> RandomUniformCases() {
  return {OpCase("float32 [3,1,5] low -2 high 5 seed 3", 1)
              .Float("seed", 3.f)
              .Float("low", -2.f)
              .Float("high", 5.f)
              .Ints("shape", {3, 1, 5}),
          OpCase("float64 [7] seed 0.5", 22)
              .Float("seed", 0.5f)
              .Int("dtype", static_cast<int64_t>(DataType::kDouble))
              .Ints("shape", {7}),
          OpCase("float32 [1] low == high", 22)
              .Float("seed", 1.f)
              .Float("low", 2.f)
              .Float("high", 2.f)
              .Ints("shape", {1})};
}
KILN_REGISTER_OP_CASES("", "RandomUniform", &RandomUniformCases);

std::vector<OpCase> RandomNormalCases() {
  return {OpCase("float32 [2,3] mean 1 scale 0.5 seed 7", 1)
              .Float("seed", 7.f)
              .Float("mean", 1.f)
              .Float("scale", 0.5f)
              .Ints("shape", {2, 3}),
          OpCase("float64 [5,1] (odd count) seed 2", 22)
              .Float("seed", 2.f)
              .Int("dtype", static_cast<int64_t>(DataType::kDouble))
              .Ints("shape", {5, 1})};
}
KILN_REGISTER_OP_CASES("", "RandomNormal", &RandomNormalCases);

std::vector<OpCase> RandomUniformLikeCases() {
  return {OpCase("like int32 [2,1,3], dtype float32", 22)
              .Float("seed", 4.f)
              .Int("dtype", static_cast<int64_t>(DataType::kFloat))
              .In(CaseInts(DataType::kInt32, {2, 1, 3}, 71, 0, 9)),
          OpCase("like float32 [5], its dtype", 1).Float("seed", 5.f).In(CaseTensor({5}, 72))};
}
KILN_REGISTER_OP_CASES("", "RandomUniformLike", &RandomUniformLikeCases);

std::vector<OpCase> RandomNormalLikeCases() {
  return {OpCase("like float64 [3,3]", 22)
              .Float("seed", 6.f)
              .Float("scale", 3.f)
              .In(CastCopy(CaseTensor({3, 3}, 73), DataType::kDouble))};
}
KILN_REGISTER_OP_CASES("", "RandomNormalLike", &RandomNormalLikeCases);

std::vector<OpCase> BernoulliCases() {
  return {OpCase("float32 [4,3] with p 0 and 1", 15)
              .Float("seed", 8.f)
              .In(CaseFloats({0.f, 1.f, 0.5f, 0.1f, 0.9f, 0.3f, 1.f, 0.f, 0.7f, 0.2f, 0.6f, 0.4f},
                             {4, 3})),
          OpCase("float64 [1,5] as bool", 22)
              .Float("seed", 9.f)
              .Int("dtype", static_cast<int64_t>(DataType::kBool))
              .In(CastCopy(CaseTensor({1, 5}, 74, 0.f, 1.f), DataType::kDouble)),
          OpCase("float32 [7] as int64", 22)
              .Float("seed", 10.f)
              .Int("dtype", static_cast<int64_t>(DataType::kInt64))
              .In(CaseTensor({7}, 75, 0.f, 1.f))};
}
KILN_REGISTER_OP_CASES("", "Bernoulli", &BernoulliCases);

std::vector<OpCase> MultinomialCases() {
  const float ninf = -std::numeric_limits<float>::infinity();
  return {OpCase("float32 [3,5] with a -inf class, 7 samples int32", 7)
              .Float("seed", 11.f)
              .Int("sample_size", 7)
              .In(CaseFloats(
                  {0.f, 1.f, -1.f, 2.f, ninf, -3.f, 0.5f, 0.5f, 0.f, 4.f, 1.f, 1.f, 1.f, 1.f, 1.f},
                  {3, 5})),
          OpCase("float64 [1,1] int64", 22)
              .Float("seed", 12.f)
              .Int("dtype", static_cast<int64_t>(DataType::kInt64))
              .Int("sample_size", 3)
              .In(CastCopy(CaseTensor({1, 1}, 76), DataType::kDouble))};
}
KILN_REGISTER_OP_CASES("", "Multinomial", &MultinomialCases);

}  // namespace
}  // namespace kiln::ops
