// com.microsoft MultiHeadAttention (opset 1), the attention ONNX Runtime's transformers optimizer
// and exporters write, and the scaled dot-product core it shares with com.microsoft Attention
// (attention.cc).
//
// Inputs: query [B, S, D]; key [B, L, D] and value [B, L, Dv], or key [B, N, L, H] and value
// [B, N, L, H] (already split into heads; ORT wants both of one shape); optional bias [D + D + Dv]
// (added to query, and to key and value in their 3-D form only, as ORT does); key_padding_mask
// int32 [B] (valid lengths: keys at or past the length are masked), [B, T] or [B, S, T] (0 masks);
// attention_bias [B or 1, N or 1, S, T]; past_key and past_value [B, N, P, H] (so Dv == D, as ORT
// requires), put before the new keys and values (T = P + L). Outputs: output [B, S, Dv];
// present_key [B, N, T, H] and present_value [B, N, T, Hv]. Attributes: num_heads (required), scale
// (1/sqrt(H)), mask_filter_value (-10000), unidirectional (0). H = D / N, Hv = Dv / N.
//
// Semantics measured against ONNX Runtime 1.32's CPU kernel (tests/models/contrib_ops_check.py):
//   logit[s, t] = scale * q_s . k_t + mask_filter_value (where the key padding mask masks t)
//                 + attention_bias[s, t] in float32 steps, in ORT's order: the scaled dot
//                 rounded to float32, plus the bias, plus the mask value (this matters in rows
//                 where every key is masked, whose logits sit near mask_filter_value);
//   unidirectional: for query rows s < S - 1, keys t > P + s are dropped from the softmax (ORT
//   gives them -inf; its last query row sees every key, which is causal when L == S);
//   output = softmax(logits) . v per head, heads concatenated.
// Refused with a Status: the packed QKV and packed KV forms (key omitted or 5-D query/key),
// past_sequence_length, cache_indirection and the output_qk output.
//
// Reference kernel: projections and sums in double, outputs rounded to float32. float32 only
// (float16 models are lowered to float32 by kiln).
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "ops/common.h"
#include "ops/contrib/attention_core.h"
#include "ops/op_cases.h"

namespace kiln::ops {

namespace attention_detail {

// Whether key t is masked for batch b, query s.
static bool Masked(const AttentionCore& c, int64_t b, int64_t s, int64_t t) {
  switch (c.mask_kind) {
    case MaskKind::kNone:
      return false;
    case MaskKind::kEnds:
      return t >= c.mask[b];
    case MaskKind::kEndsStarts:
      return t >= c.mask[b] || t < c.mask[c.batch + b];
    case MaskKind::kKeys:
      return c.mask[b * c.total + t] == 0;
    case MaskKind::kQueryKeys:
      return c.mask[(b * c.seq + s) * c.total + t] == 0;
  }
  return false;
}

void RunAttentionCore(const AttentionCore& c) {
  const int64_t S = c.seq, T = c.total, H = c.head, Hv = c.v_head, N = c.heads;
  std::vector<double> logit(static_cast<size_t>(T)), acc(static_cast<size_t>(Hv));
  std::vector<bool> keep(static_cast<size_t>(T));
  for (int64_t b = 0; b < c.batch; ++b) {
    for (int64_t n = 0; n < N; ++n) {
      const float* qb = c.q + (b * N + n) * S * H;
      const float* kb = c.k + (b * N + n) * T * H;
      const float* vb = c.v + (b * N + n) * T * Hv;
      const float* bias = nullptr;
      if (c.bias != nullptr)
        bias = c.bias + ((c.bias_b == 1 ? 0 : b) * c.bias_n + (c.bias_n == 1 ? 0 : n)) * S * T;
      for (int64_t s = 0; s < S; ++s) {
        double top = -std::numeric_limits<double>::infinity();
        for (int64_t t = 0; t < T; ++t) {
          keep[t] = !(c.causal && s < S - 1 && t > c.past + s);
          if (!keep[t]) continue;
          double dot = 0.0;
          for (int64_t h = 0; h < H; ++h) dot += static_cast<double>(qb[s * H + h]) * kb[t * H + h];
          // float32 steps, as ORT's: the scaled dot, + bias, + mask value.
          float x = static_cast<float>(dot * c.scale);
          if (bias != nullptr) x += bias[s * T + t];
          if (Masked(c, b, s, t)) x += c.mask_filter_value;
          logit[t] = x;
          top = std::max(top, logit[t]);
        }
        double sum = 0.0;
        for (int64_t t = 0; t < T; ++t) {
          logit[t] = keep[t] ? std::exp(logit[t] - top) : 0.0;
          sum += logit[t];
        }
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t t = 0; t < T; ++t) {
          if (!keep[t]) continue;
          const double p = logit[t] / sum;
          for (int64_t h = 0; h < Hv; ++h) acc[h] += p * vb[t * Hv + h];
        }
        float* o = c.out + (b * S + s) * N * Hv + n * Hv;
        for (int64_t h = 0; h < Hv; ++h) o[h] = static_cast<float>(acc[h]);
      }
    }
  }
}

StatusOr<AttentionAttrs> ParseAttentionAttrs(const ir::Node& node) {
  AttentionAttrs a;
  a.heads = node.GetInt("num_heads", 0);
  if (!node.HasAttr("num_heads") || a.heads <= 0)
    return ir::AttrError(node,
                         "num_heads is required and must be > 0; got " + std::to_string(a.heads));
  a.scale = node.GetFloat("scale", 0.f);
  a.mask_filter_value = node.GetFloat("mask_filter_value", -10000.f);
  const int64_t uni = node.GetInt("unidirectional", 0);
  if (uni != 0 && uni != 1)
    return ir::AttrError(node, "unidirectional must be 0 or 1; got " + std::to_string(uni));
  a.causal = uni == 1;
  return a;
}

void RunWithInputs(AttentionCore& c, const AttentionAttrs& a, const ir::ComputeContext& ctx,
                   int mask_slot, int bias_slot) {
  c.scale = a.scale != 0.f ? a.scale : 1.0 / std::sqrt(static_cast<double>(c.head));
  c.mask_filter_value = a.mask_filter_value;
  c.causal = a.causal;
  if (ctx.has(mask_slot)) {
    const Shape& m = ctx.in(mask_slot).shape();
    if (m.size() == 1)
      c.mask_kind = m[0] == c.batch ? MaskKind::kEnds : MaskKind::kEndsStarts;
    else
      c.mask_kind = m.size() == 2 ? MaskKind::kKeys : MaskKind::kQueryKeys;
    c.mask = ctx.in(mask_slot).data<int32_t>();
  }
  if (ctx.has(bias_slot)) {
    c.bias = ctx.in(bias_slot).data<float>();
    c.bias_b = ctx.in(bias_slot).shape()[0], c.bias_n = ctx.in(bias_slot).shape()[1];
  }
  c.out = ctx.out(0).data<float>();
  RunAttentionCore(c);
}

void SplitHeads(const float* x, const float* bias, int64_t B, int64_t L, int64_t N, int64_t H,
                int64_t before, float* dst) {
  for (int64_t b = 0; b < B; ++b)
    for (int64_t l = 0; l < L; ++l)
      for (int64_t n = 0; n < N; ++n)
        for (int64_t h = 0; h < H; ++h) {
          float val = x[(b * L + l) * N * H + n * H + h];
          if (bias != nullptr) val += bias[n * H + h];
          dst[((b * N + n) * (before + L) + before + l) * H + h] = val;
        }
}

void CopyPast(const float* past, int64_t B, int64_t N, int64_t P, int64_t L, int64_t H,
              float* dst) {
  for (int64_t bn = 0; bn < B * N; ++bn)
    std::copy(past + bn * P * H, past + (bn + 1) * P * H, dst + bn * (P + L) * H);
}

StatusOr<MaskKind> CheckMaskAndBias(const ir::InferContext& ctx, int mask_slot, int bias_slot,
                                    int64_t B, int64_t N, int64_t S, int64_t T, bool ends_starts) {
  MaskKind kind = MaskKind::kNone;
  if (mask_slot >= 0 && ctx.has_input(mask_slot)) {
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(mask_slot, {DataType::kInt32}));
    const Shape& m = ctx.shape(mask_slot);
    if (m.size() == 1 && m[0] == B)
      kind = MaskKind::kEnds;
    else if (ends_starts && m.size() == 1 && m[0] == 2 * B)
      kind = MaskKind::kEndsStarts;
    else if (m.size() == 2 && m[0] == B && m[1] == T)
      kind = MaskKind::kKeys;
    else if (m.size() == 3 && m[0] == B && m[1] == S && m[2] == T)
      kind = MaskKind::kQueryKeys;
    else
      return ctx.Error(std::string("the mask must be int32 [B] (lengths)") +
                       (ends_starts ? ", [2B] (ends, starts)" : "") +
                       ", [B, T] or [B, S, T] with B " + std::to_string(B) + ", S " +
                       std::to_string(S) + ", T " + std::to_string(T) +
                       " (ONNX Runtime's CPU forms); got " + ShapeToString(m));
  }
  if (bias_slot >= 0 && ctx.has_input(bias_slot)) {
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(bias_slot, {DataType::kFloat}));
    const Shape& a = ctx.shape(bias_slot);
    if (a.size() != 4 || (a[0] != 1 && a[0] != B) || (a[1] != 1 && a[1] != N) || a[2] != S ||
        a[3] != T)
      return ctx.Error("attention_bias must be [B or 1, N or 1, S, T] = [" + std::to_string(B) +
                       " or 1, " + std::to_string(N) + " or 1, " + std::to_string(S) + ", " +
                       std::to_string(T) + "]; got " + ShapeToString(a));
  }
  return kind;
}

}  // namespace attention_detail

namespace {

using attention_detail::AttentionCore;
using ir::ComputeContext;
using ir::InferContext;
using ir::Node;

// Input slots.
constexpr int kQuery = 0, kKey = 1, kValue = 2, kBias = 3, kMask = 4, kAttnBias = 5, kPastKey = 6,
              kPastValue = 7;

class MsMultiHeadAttentionOp final : public ir::Op {
 public:
  static StatusOr<std::unique_ptr<ir::Op>> Create(const Node& node) {
    std::unique_ptr<MsMultiHeadAttentionOp> op(new MsMultiHeadAttentionOp(node));
    auto attrs = attention_detail::ParseAttentionAttrs(node);
    if (!attrs.ok()) return attrs.status();
    op->attrs_ = *attrs;
    const size_t n = node.num_explicit_inputs();
    for (size_t i = 8; i < n; ++i)
      if (node.HasInput(i))
        return ir::AttrError(node,
                             "past_sequence_length and cache_indirection (inputs 8 and up) "
                             "are not supported; got input " +
                                 std::to_string(i));
    if (node.outputs.size() > 3)
      for (size_t i = 3; i < node.outputs.size(); ++i)
        if (node.outputs[i] >= 0)
          return ir::AttrError(node, "the output_qk output is not supported");
    return std::unique_ptr<ir::Op>(std::move(op));
  }

  Status Infer(InferContext& ctx) const override {
    if (!ctx.has_input(kKey) || !ctx.has_input(kValue))
      return ctx.Error(
          "the packed QKV and packed KV forms (key or value omitted) are not "
          "supported; key and value are needed");
    for (int i : {kQuery, kKey, kValue, kBias, kPastKey, kPastValue})
      if (ctx.has_input(i)) KILN_RETURN_IF_ERROR(ctx.ExpectDtype(i, {DataType::kFloat}));
    const Shape& q = ctx.shape(kQuery);
    const Shape& k = ctx.shape(kKey);
    const Shape& v = ctx.shape(kValue);
    const int64_t N = attrs_.heads;
    if (q.size() != 3 || q[2] % N != 0)
      return ctx.Error("query must be [B, S, D] with D divisible by num_heads " +
                       std::to_string(N) + "; got " + ShapeToString(q));
    const int64_t B = q[0], S = q[1], D = q[2], H = D / N;
    int64_t L = 0, Dv = 0;
    if (k.size() == 3 && v.size() == 3) {
      if (k[0] != B || k[2] != D || v[0] != B || v[1] != k[1] || v[2] % N != 0)
        return ctx.Error(
            "key must be [B, L, D] and value [B, L, Dv] (Dv divisible by "
            "num_heads) for query " +
            ShapeToString(q) + "; got " + ShapeToString(k) + " and " + ShapeToString(v));
      L = k[1], Dv = v[2];
    } else if (k.size() == 4 && v.size() == 4) {
      if (k[0] != B || k[1] != N || k[3] != H || v != k)
        return ctx.Error("4-D key and value must both be [B, N, L, H] for query " +
                         ShapeToString(q) + " and num_heads " + std::to_string(N) + "; got " +
                         ShapeToString(k) + " and " + ShapeToString(v));
      L = k[2], Dv = v[3] * N;
    } else {
      return ctx.Error(
          "key and value must both be 3-D [B, L, D] or both 4-D [B, N, L, H] (the "
          "packed forms are not supported); got " +
          ShapeToString(k) + " and " + ShapeToString(v));
    }
    const int64_t Hv = Dv / N;
    if (ctx.has_input(kBias) && ctx.shape(kBias) != Shape{D + D + Dv})
      return ctx.Error("bias must be [D + D + Dv] = [" + std::to_string(D + D + Dv) + "]; got " +
                       ShapeToString(ctx.shape(kBias)));
    int64_t P = 0;
    if (ctx.has_input(kPastKey) != ctx.has_input(kPastValue))
      return ctx.Error("past_key and past_value must be given together");
    if (ctx.has_input(kPastKey)) {
      const Shape& pk = ctx.shape(kPastKey);
      const Shape& pv = ctx.shape(kPastValue);
      if (pk.size() != 4 || pk[0] != B || pk[1] != N || pk[3] != H || pv != pk || Hv != H)
        return ctx.Error("past_key and past_value must both be [B, N, P, H] = [" +
                         std::to_string(B) + ", " + std::to_string(N) + ", P, " +
                         std::to_string(H) + "], and value's head size key's (" +
                         std::to_string(Hv) + " here; ONNX Runtime requires it); got " +
                         ShapeToString(pk) + " and " + ShapeToString(pv));
      P = pk[2];
    }
    const int64_t T = P + L;
    auto kind = attention_detail::CheckMaskAndBias(ctx, kMask, kAttnBias, B, N, S, T, false);
    if (!kind.ok()) return kind.status();
    ctx.SetOutput(0, DataType::kFloat, {B, S, Dv});
    if (ctx.num_outputs() > 1) ctx.SetOutput(1, DataType::kFloat, {B, N, T, H});
    if (ctx.num_outputs() > 2) ctx.SetOutput(2, DataType::kFloat, {B, N, T, Hv});
    return OkStatus();
  }

  Status Compute(const ComputeContext& ctx) const override {
    const Shape& qs = ctx.in(kQuery).shape();
    const Shape& ks = ctx.in(kKey).shape();
    const Shape& vs = ctx.in(kValue).shape();
    const bool split = ks.size() == 4;
    AttentionCore c;
    c.batch = qs[0], c.seq = qs[1], c.heads = attrs_.heads;
    const int64_t D = qs[2], N = attrs_.heads, B = c.batch;
    c.head = D / N;
    const int64_t L = split ? ks[2] : ks[1];
    const int64_t Dv = split ? vs[3] * N : vs[2];
    c.v_head = Dv / N;
    c.past = ctx.has(kPastKey) ? ctx.in(kPastKey).shape()[2] : 0;
    c.total = c.past + L;
    const float* bias = ctx.has(kBias) ? ctx.in(kBias).data<float>() : nullptr;
    std::vector<float> q(static_cast<size_t>(B * c.seq * D));
    std::vector<float> k(static_cast<size_t>(B * N * c.total * c.head));
    std::vector<float> v(static_cast<size_t>(B * N * c.total * c.v_head));
    attention_detail::SplitHeads(ctx.in(kQuery).data<float>(), bias, B, c.seq, N, c.head, 0,
                                 q.data());
    if (split) {
      // Heads already split: no bias (ORT adds it to the query only).
      for (int64_t bn = 0; bn < B * N; ++bn) {
        const float* ksrc = ctx.in(kKey).data<float>() + bn * L * c.head;
        const float* vsrc = ctx.in(kValue).data<float>() + bn * L * c.v_head;
        std::copy(ksrc, ksrc + L * c.head, k.data() + (bn * c.total + c.past) * c.head);
        std::copy(vsrc, vsrc + L * c.v_head, v.data() + (bn * c.total + c.past) * c.v_head);
      }
    } else {
      attention_detail::SplitHeads(ctx.in(kKey).data<float>(), bias ? bias + D : nullptr, B, L, N,
                                   c.head, c.past, k.data());
      attention_detail::SplitHeads(ctx.in(kValue).data<float>(), bias ? bias + 2 * D : nullptr, B,
                                   L, N, c.v_head, c.past, v.data());
    }
    if (c.past > 0) {
      attention_detail::CopyPast(ctx.in(kPastKey).data<float>(), B, N, c.past, L, c.head, k.data());
      attention_detail::CopyPast(ctx.in(kPastValue).data<float>(), B, N, c.past, L, c.v_head,
                                 v.data());
    }
    c.q = q.data(), c.k = k.data(), c.v = v.data();
    attention_detail::RunWithInputs(c, attrs_, ctx, kMask, kAttnBias);
    auto present = [&](size_t o, const std::vector<float>& src) {
      if (o < ctx.outputs.size() && ctx.outputs[o] != nullptr)
        std::copy(src.begin(), src.end(), ctx.out(o).data<float>());
    };
    present(1, k);
    present(2, v);
    return OkStatus();
  }

 private:
  explicit MsMultiHeadAttentionOp(const Node& node) : Op(node) {}
  attention_detail::AttentionAttrs attrs_;
};

StatusOr<std::unique_ptr<ir::Op>> CreateMsMultiHeadAttention(const Node& node) {
  return MsMultiHeadAttentionOp::Create(node);
}

KILN_REGISTER_OP_DOMAIN("com.microsoft", "MultiHeadAttention", 1, 1, &CreateMsMultiHeadAttention);

// Kernel cases: 3-D key/value with and without bias, Dv != D, the three key padding mask forms,
// attention_bias broadcast over batch and heads, causal with past and presents, 4-D key/value,
// size-1 batch, sequence and head dims.
std::vector<OpCase> MsMultiHeadAttentionCases() {
  auto qkv = [](const std::string& name, int64_t B, int64_t S, int64_t L, int64_t D, int64_t Dv,
                uint32_t seed) {
    return OpCase(name, 1)
        .In(CaseTensor({B, S, D}, seed))
        .In(CaseTensor({B, L, D}, seed + 1))
        .In(CaseTensor({B, L, Dv}, seed + 2));
  };
  return {qkv("[2,3,6] x [2,5,6], 2 heads", 2, 3, 5, 6, 6, 700).Int("num_heads", 2),
          qkv("bias, Dv 9, 3 heads, scale 0.3", 2, 3, 5, 6, 9, 703)
              .Const(CaseTensor({21}, 706))
              .Int("num_heads", 3)
              .Float("scale", 0.3f),
          qkv("key padding lengths [B]", 2, 3, 5, 4, 4, 707)
              .Omitted()
              .In(CaseInts(DataType::kInt32, {2}, 710, 1, 5))
              .Int("num_heads", 2),
          qkv("key padding [B,L], mask_filter_value -5", 3, 2, 5, 4, 4, 711)
              .Omitted()
              .In(CaseInts(DataType::kInt32, {3, 5}, 714, 0, 1))
              .Int("num_heads", 1)
              .Float("mask_filter_value", -5.f),
          qkv("mask [B,S,L] and attention_bias [1,N,S,L]", 2, 3, 4, 4, 4, 715)
              .Omitted()
              .In(CaseInts(DataType::kInt32, {2, 3, 4}, 718, 0, 1))
              .In(CaseTensor({1, 2, 3, 4}, 719, -2.f, 2.f))
              .Int("num_heads", 2),
          qkv("causal with past, presents", 2, 3, 3, 4, 4, 720)
              .Omitted()
              .Omitted()
              .In(CaseTensor({2, 1, 3, 5}, 723))
              .In(CaseTensor({2, 2, 2, 2}, 724))
              .In(CaseTensor({2, 2, 2, 2}, 725))
              .Int("num_heads", 2)
              .Int("unidirectional", 1)
              .Outputs(3),
          qkv("causal cross [1,3] x [1,5], 1 head", 1, 3, 5, 3, 2, 726)
              .Int("num_heads", 1)
              .Int("unidirectional", 1),
          OpCase("4-D key/value [2,2,5,3], bias", 1)
              .In(CaseTensor({2, 1, 6}, 730))
              .In(CaseTensor({2, 2, 5, 3}, 731))
              .In(CaseTensor({2, 2, 5, 3}, 732))
              .Const(CaseTensor({18}, 733))
              .Int("num_heads", 2)};
}
KILN_REGISTER_OP_CASES("com.microsoft", "MultiHeadAttention", &MsMultiHeadAttentionCases);

}  // namespace
}  // namespace kiln::ops
