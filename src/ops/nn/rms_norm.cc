// RMSNormalization (opset 23): X viewed as rows [prod(X[:axis]), prod(X[axis:])]; each row is
// divided by its root mean square, sqrt(mean(x^2) + epsilon), then multiplied by Scale, which
// broadcasts unidirectionally to X (usually X[axis:], possibly with leading dims of X).
// Reference kernel: the mean of squares and the products in double; float32 (float16 and
// bfloat16 models reach it lowered to float32). stash_type 1 (float32) and 11 (double) are the
// statistics' precision the double arithmetic meets; the half types (10, 16) are refused.
#include <cmath>
#include <memory>
#include <vector>

#include "ops/common.h"
#include "ops/op_cases.h"

namespace kiln::ops {
namespace {

struct RmsNormAttrs : ir::OpAttrs {
  int64_t axis = -1;  // as written; Infer checks it against X's rank
  float epsilon = 1e-5f;
  int64_t stash_type = 1;
};

class RmsNormalizationOp final : public ir::Op {
 public:
  static StatusOr<std::unique_ptr<ir::Op>> Create(const ir::Node& node) {
    auto op = std::make_unique<RmsNormalizationOp>(node);
    op->a_.axis = node.GetInt("axis", -1);
    op->a_.epsilon = node.GetFloat("epsilon", 1e-5f);
    if (!(op->a_.epsilon >= 0.f))
      return ir::AttrError(node, "epsilon must be >= 0; got " + std::to_string(op->a_.epsilon));
    op->a_.stash_type = node.GetInt("stash_type", 1);
    if (op->a_.stash_type != 1 && op->a_.stash_type != 11)
      return Unsupported("failed to load " + node.Describe() +
                         ": stash_type must be 1 (float32) or 11 (double); got " +
                         std::to_string(op->a_.stash_type));
    return std::unique_ptr<ir::Op>(std::move(op));
  }
  explicit RmsNormalizationOp(const ir::Node& node) : Op(node) {}

  Status Infer(ir::InferContext& ctx) const override {
    if (!ctx.has_input(0) || !ctx.has_input(1)) return ctx.Error("inputs X and scale are required");
    for (size_t i = 0; i < 2; ++i) KILN_RETURN_IF_ERROR(ctx.ExpectDtype(i, {DataType::kFloat}));
    const Shape& x = ctx.shape(0);
    if (x.empty() || !NormalizeAxis(a_.axis, ctx.rank(0)).ok())
      return ctx.Error("axis must be in [-rank, rank) of X; got " + std::to_string(a_.axis) +
                       " for rank " + std::to_string(x.size()));
    auto b = BroadcastShapes({x, ctx.shape(1)});
    if (!b.ok() || *b != x)
      return ctx.Error("scale must broadcast to X " + ShapeToString(x) + "; got " +
                       ShapeToString(ctx.shape(1)));
    ctx.SetOutput(0, ctx.dtype(0), x);
    return OkStatus();
  }

  Status Compute(const ir::ComputeContext& ctx) const override {
    const Tensor& xt = ctx.in(0);
    const Shape& xs = xt.shape();
    auto axis = NormalizeAxis(a_.axis, xt.rank());
    if (!axis.ok()) return RunError(axis.status().message());
    int64_t inner = 1;
    for (size_t d = static_cast<size_t>(*axis); d < xs.size(); ++d) inner *= xs[d];
    const int64_t rows = inner > 0 ? xt.numel() / inner : 0;
    const float* x = xt.data<float>();
    const float* scale = ctx.in(1).data<float>();
    float* y = ctx.out(0).data<float>();
    std::vector<double> inv(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) {
      double sum = 0;
      for (int64_t i = 0; i < inner; ++i)
        sum += static_cast<double>(x[r * inner + i]) * x[r * inner + i];
      inv[r] = 1.0 / std::sqrt(sum / static_cast<double>(inner) + a_.epsilon);
    }
    ForEachBroadcast2(xs, xs, ctx.in(1).shape(), [&](int64_t i, int64_t, int64_t s) {
      y[i] = static_cast<float>(x[i] * inv[i / inner] * scale[s]);
    });
    return OkStatus();
  }

  const ir::OpAttrs* attributes() const override { return &a_; }

 private:
  RmsNormAttrs a_;
};
KILN_REGISTER_OP("RMSNormalization", 23, ir::kMaxOpset, &RmsNormalizationOp::Create);

// Kernel cases: axis -1 (the default), 0, 1 and negative; scale over exactly the normalized dims,
// broadcast inside them, and with one of X's leading dims; a size-1 dim; epsilon; stash_type 11.
std::vector<OpCase> RmsNormalizationCases() {
  struct Rms {
    Shape x, scale;
    int64_t axis;
  };
  const Rms shapes[] = {{{2, 3, 5}, {5}, -1},      {{2, 3, 5}, {3, 5}, 1},
                        {{3, 7}, {3, 7}, 0},       {{2, 1, 4, 3}, {1, 3}, -2},
                        {{2, 3, 5}, {2, 1, 1}, 2}, {{1, 1, 9}, {9}, -1}};
  std::vector<OpCase> cases;
  uint32_t seed = 960;
  auto next = [&seed] { return seed++; };  // one seed per tensor, in order
  for (const Rms& r : shapes)
    cases.push_back(OpCase(ShapeToString(r.x) + " axis " + std::to_string(r.axis) + " scale " +
                               ShapeToString(r.scale),
                           23)
                        .In(CaseTensor(r.x, next(), -3.f, 3.f))
                        .Const(CaseTensor(r.scale, next()))
                        .Int("axis", r.axis));
  cases.push_back(OpCase("[4,6] default axis, epsilon 0.1, stash_type 11", 23)
                      .In(CaseTensor({4, 6}, next(), -0.5f, 0.5f))
                      .Const(CaseTensor({6}, next()))
                      .Float("epsilon", 0.1f)
                      .Int("stash_type", 11));
  return cases;
}
KILN_REGISTER_OP_CASES("", "RMSNormalization", &RmsNormalizationCases);

}  // namespace
}  // namespace kiln::ops
