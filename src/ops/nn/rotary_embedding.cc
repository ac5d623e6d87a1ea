// RotaryEmbedding (opset 23): rotates the first rotary_embedding_dim (R, default the head size
// D) elements of every head vector of X by the angles of its token's position; the rest are
// copied. X is [B, H, S, D], or [B, S, H*D] with H from num_heads. cos_cache and sin_cache are
// [max_position, R/2] indexed by position_ids [B, S] (int64, each in [0, max_position)), or,
// without position_ids, [B, S, R/2] per token. For k < R/2 with c, s the cache entries:
//   halves (interleaved 0):  x1 = x[k],  x2 = x[k + R/2]  ->  x1' = c x1 - s x2, x2' = s x1 + c x2
//   pairs  (interleaved 1):  x1 = x[2k], x2 = x[2k + 1]   ->  the same, written back in place.
// Reference kernel in double; float32 (float16 and bfloat16 models reach it lowered to float32).
// An out-of-range position id is a run-time InvalidArgument.
#include <memory>
#include <vector>

#include "ops/common.h"
#include "ops/op_cases.h"

namespace kiln::ops {
namespace {

struct RotaryEmbeddingAttrs : ir::OpAttrs {
  bool interleaved = false;
  int64_t rotary_embedding_dim = 0;  // 0: the head size
  int64_t num_heads = 0;             // 0: absent (4-D inputs carry the heads)
};

std::string Str(int64_t v) { return std::to_string(v); }

struct RotaryDims {
  int64_t batch, heads, seq, head_size, rotary;
  bool three_d;
};

class RotaryEmbeddingOp final : public ir::Op {
 public:
  static StatusOr<std::unique_ptr<ir::Op>> Create(const ir::Node& node) {
    auto op = std::make_unique<RotaryEmbeddingOp>(node);
    RotaryEmbeddingAttrs& a = op->a_;
    const int64_t interleaved = node.GetInt("interleaved", 0);
    if (interleaved != 0 && interleaved != 1)
      return ir::AttrError(node, "interleaved must be 0 or 1; got " + Str(interleaved));
    a.interleaved = interleaved == 1;
    a.rotary_embedding_dim = node.GetInt("rotary_embedding_dim", 0);
    if (a.rotary_embedding_dim < 0 || a.rotary_embedding_dim % 2 != 0)
      return ir::AttrError(
          node, "rotary_embedding_dim must be even and >= 0; got " + Str(a.rotary_embedding_dim));
    a.num_heads = node.GetInt("num_heads", 0);
    if (node.HasAttr("num_heads") && a.num_heads < 1)
      return ir::AttrError(node, "num_heads must be >= 1; got " + Str(a.num_heads));
    return std::unique_ptr<ir::Op>(std::move(op));
  }
  explicit RotaryEmbeddingOp(const ir::Node& node) : Op(node) {}

  Status Infer(ir::InferContext& ctx) const override {
    for (size_t i = 0; i < 3; ++i) {
      if (!ctx.has_input(i))
        return ctx.Error("X, cos_cache and sin_cache are required; input " + Str(i) +
                         " is missing");
      KILN_RETURN_IF_ERROR(ctx.ExpectDtype(i, {DataType::kFloat}));
    }
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(3, {DataType::kInt64}));
    RotaryDims d;
    const std::string rule = Resolve(ctx.shape(0), ctx.shape(1), ctx.shape(2),
                                     ctx.has_input(3) ? &ctx.shape(3) : nullptr, &d);
    if (!rule.empty()) return ctx.Error(rule);
    ctx.SetOutput(0, ctx.dtype(0), ctx.shape(0));
    return OkStatus();
  }

  Status Compute(const ir::ComputeContext& ctx) const override {
    RotaryDims d;
    const Tensor* ids = ctx.has(3) ? &ctx.in(3) : nullptr;
    const std::string rule = Resolve(ctx.in(0).shape(), ctx.in(1).shape(), ctx.in(2).shape(),
                                     ids ? &ids->shape() : nullptr, &d);
    if (!rule.empty()) return RunError(rule);
    const int64_t half = d.rotary / 2;
    const int64_t positions = ids ? ctx.in(1).shape()[0] : 0;
    const float* x = ctx.in(0).data<float>();
    const float* cos = ctx.in(1).data<float>();
    const float* sin = ctx.in(2).data<float>();
    float* y = ctx.out(0).data<float>();
    for (int64_t b = 0; b < d.batch; ++b)
      for (int64_t s = 0; s < d.seq; ++s) {
        // The cache row of token (b, s).
        int64_t row = b * d.seq + s;
        if (ids) {
          row = ids->data<int64_t>()[b * d.seq + s];
          if (row < 0 || row >= positions)
            return RunError("position_ids must be in [0, " + Str(positions) +
                            ") (cos_cache's rows); got " + Str(row));
        }
        const float* c = cos + row * half;
        const float* sn = sin + row * half;
        for (int64_t h = 0; h < d.heads; ++h) {
          const int64_t at = d.three_d ? ((b * d.seq + s) * d.heads + h) * d.head_size
                                       : ((b * d.heads + h) * d.seq + s) * d.head_size;
          const float* xv = x + at;
          float* yv = y + at;
          for (int64_t k = 0; k < half; ++k) {
            const int64_t i1 = a_.interleaved ? 2 * k : k;
            const int64_t i2 = a_.interleaved ? 2 * k + 1 : k + half;
            const double x1 = xv[i1], x2 = xv[i2];
            yv[i1] = static_cast<float>(c[k] * x1 - sn[k] * x2);
            yv[i2] = static_cast<float>(sn[k] * x1 + c[k] * x2);
          }
          for (int64_t e = d.rotary; e < d.head_size; ++e) yv[e] = xv[e];
        }
      }
    return OkStatus();
  }

  const ir::OpAttrs* attributes() const override { return &a_; }

 private:
  // The geometry; returns the rule the shapes break ("" when they fit).
  std::string Resolve(const Shape& x, const Shape& cos, const Shape& sin, const Shape* ids,
                      RotaryDims* d) const {
    if (x.size() == 4) {
      *d = {x[0], x[1], x[2], x[3], 0, false};
    } else if (x.size() == 3) {
      if (a_.num_heads < 1) return "a 3-D X needs the num_heads attribute; got none";
      if (x[2] % a_.num_heads != 0)
        return "X's hidden size must be a multiple of num_heads = " + Str(a_.num_heads) + "; got " +
               Str(x[2]);
      *d = {x[0], a_.num_heads, x[1], x[2] / a_.num_heads, 0, true};
    } else {
      return "X must be 3-D [batch, seq, hidden] or 4-D [batch, heads, seq, head_size]; got " +
             ShapeToString(x);
    }
    d->rotary = a_.rotary_embedding_dim > 0 ? a_.rotary_embedding_dim : d->head_size;
    if (d->rotary > d->head_size || d->rotary % 2 != 0)
      return "the rotary dim must be even and at most the head size " + Str(d->head_size) +
             "; got " + Str(d->rotary);
    if (ids && *ids != Shape{d->batch, d->seq})
      return "position_ids must be [batch, seq] = " + ShapeToString(Shape{d->batch, d->seq}) +
             "; got " + ShapeToString(*ids);
    const int64_t half = d->rotary / 2;
    const bool ok = ids ? cos.size() == 2 && cos[1] == half : cos == Shape{d->batch, d->seq, half};
    if (!ok || sin != cos)
      return std::string("cos_cache and sin_cache must be ") +
             (ids ? "[max_position, " + Str(half) + "] with position_ids"
                  : ShapeToString(Shape{d->batch, d->seq, half}) + " without position_ids") +
             " (rotary dim / 2 = " + Str(half) + "); got " + ShapeToString(cos) + " and " +
             ShapeToString(sin);
    return "";
  }

  RotaryEmbeddingAttrs a_;
};
KILN_REGISTER_OP("RotaryEmbedding", 23, ir::kMaxOpset, &RotaryEmbeddingOp::Create);

// Kernel cases: 4-D and 3-D X, halves and interleaved pairs, full and partial rotary dim, caches
// indexed by position_ids (repeated and out-of-order positions) or per token, size-1 dims.
std::vector<OpCase> RotaryEmbeddingCases() {
  std::vector<OpCase> cases;
  uint32_t seed = 980;
  auto next = [&seed] { return seed++; };  // one seed per tensor, in order
  for (int64_t interleaved : {0, 1}) {
    const std::string how = interleaved ? "interleaved" : "halves";
    cases.push_back(OpCase("4-D [2,3,5,6] " + how + ", position_ids", 23)
                        .In(CaseTensor({2, 3, 5, 6}, next()))
                        .In(CaseTensor({7, 3}, next()))
                        .In(CaseTensor({7, 3}, next()))
                        .In(Tensor::FromVector<int64_t>({0, 1, 2, 3, 4, 6, 6, 0, 5, 2}, {2, 5}))
                        .Int("interleaved", interleaved));
    cases.push_back(OpCase("3-D [2,3,12] num_heads 2, rotary dim 4 " + how + ", per token", 23)
                        .In(CaseTensor({2, 3, 12}, next()))
                        .In(CaseTensor({2, 3, 2}, next()))
                        .In(CaseTensor({2, 3, 2}, next()))
                        .Int("interleaved", interleaved)
                        .Int("num_heads", 2)
                        .Int("rotary_embedding_dim", 4));
    cases.push_back(OpCase("4-D [1,1,1,2] " + how + ", position_ids", 23)
                        .In(CaseTensor({1, 1, 1, 2}, next()))
                        .In(CaseTensor({3, 1}, next()))
                        .In(CaseTensor({3, 1}, next()))
                        .In(Tensor::FromVector<int64_t>({2}, {1, 1}))
                        .Int("interleaved", interleaved));
    cases.push_back(OpCase("4-D [1,2,3,10] rotary dim 6 " + how + ", position_ids", 23)
                        .In(CaseTensor({1, 2, 3, 10}, next()))
                        .In(CaseTensor({4, 3}, next()))
                        .In(CaseTensor({4, 3}, next()))
                        .In(Tensor::FromVector<int64_t>({3, 0, 1}, {1, 3}))
                        .Int("interleaved", interleaved)
                        .Int("rotary_embedding_dim", 6));
  }
  return cases;
}
KILN_REGISTER_OP_CASES("", "RotaryEmbedding", &RotaryEmbeddingCases);

}  // namespace
}  // namespace kiln::ops
