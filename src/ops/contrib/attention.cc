// com.microsoft Attention (opset 1), the BERT-style self-attention with its input projection, as
// ONNX Runtime's transformers optimizer writes it.
//
// Inputs: input [B, S, C]; weights [C, Dq + Dk + Dv]; optional bias [Dq + Dk + Dv]; mask_index
// int32 [B] (right padding: keys at or past the length are masked), [2B] (ends, then starts:
// keys before the start are masked too), [B, T] or [B, S, T] (0 masks); past [2, B, N, P, H]
// (keys then values, put before the new ones: T = P + S); attention_bias [B or 1, N or 1, S, T].
// Outputs: output [B, S, Dv]; present [2, B, N, T, H]. Attributes: num_heads (required),
// qkv_hidden_sizes ([Dq, Dk, Dv]; default the weights' columns in three equal parts, Dq == Dk),
// scale (1/sqrt(H)), mask_filter_value (-10000), unidirectional (0). H = Dq / N.
//
// q, k, v = input . weights + bias, split into heads, rounded to float32 (as ORT stores them),
// then the scaled dot-product core of multi_head_attention.cc (its header comment gives the mask,
// causal and rounding rules, measured against ONNX Runtime 1.32).
// Refused with a Status, as ORT 1.32's CPU kernel refuses them: the 4-D mask [B, 1, M, M], past
// together with attention_bias, past when Dv != Dk. Also refused: do_rotary,
// past_present_share_buffer and the past_sequence_length input.
//
// Reference kernel: projections and sums in double, float32 I/O.
#include <memory>
#include <string>
#include <vector>

#include "ops/common.h"
#include "ops/contrib/attention_core.h"
#include "ops/op_cases.h"

namespace kiln::ops {

namespace {

using attention_detail::AttentionCore;
using ir::ComputeContext;
using ir::InferContext;
using ir::Node;

constexpr int kInput = 0, kWeights = 1, kBias = 2, kMask = 3, kPast = 4, kAttnBias = 5;

class MsAttentionOp final : public ir::Op {
 public:
  static StatusOr<std::unique_ptr<ir::Op>> Create(const Node& node) {
    std::unique_ptr<MsAttentionOp> op(new MsAttentionOp(node));
    auto attrs = attention_detail::ParseAttentionAttrs(node);
    if (!attrs.ok()) return attrs.status();
    op->attrs_ = *attrs;
    op->sizes_ = node.GetInts("qkv_hidden_sizes");
    if (!op->sizes_.empty()) {
      if (op->sizes_.size() != 3 || op->sizes_[0] != op->sizes_[1])
        return ir::AttrError(node, "qkv_hidden_sizes must be 3 sizes with q's equal to k's");
      for (int64_t s : op->sizes_)
        if (s <= 0 || s % op->attrs_.heads != 0)
          return ir::AttrError(node, "qkv_hidden_sizes must be positive multiples of num_heads " +
                                         std::to_string(op->attrs_.heads) + "; got " +
                                         std::to_string(s));
    }
    for (const char* a : {"do_rotary", "past_present_share_buffer"})
      if (node.GetInt(a, 0) != 0)
        return ir::AttrError(
            node, std::string(a) + " is not supported; got " + std::to_string(node.GetInt(a, 0)));
    if (node.HasInput(6))
      return ir::AttrError(node, "the past_sequence_length input is not supported");
    return std::unique_ptr<ir::Op>(std::move(op));
  }

  Status Infer(InferContext& ctx) const override {
    for (int i : {kInput, kWeights, kBias, kPast})
      if (ctx.has_input(i)) KILN_RETURN_IF_ERROR(ctx.ExpectDtype(i, {DataType::kFloat}));
    const Shape& x = ctx.shape(kInput);
    const Shape& w = ctx.shape(kWeights);
    if (x.size() != 3 || w.size() != 2 || w[0] != x[2])
      return ctx.Error("input must be [B, S, C] and weights [C, Dq + Dk + Dv]; got " +
                       ShapeToString(x) + " and " + ShapeToString(w));
    if (sizes_.empty() && w[1] % 3 != 0)
      return ctx.Error(
          "without qkv_hidden_sizes, weights' columns must split in three equal "
          "parts; got " +
          ShapeToString(w));
    const std::vector<int64_t> sz = Sizes(w[1]);
    const int64_t N = attrs_.heads;
    if (sz[0] + sz[1] + sz[2] != w[1] || sz[0] % N != 0 || sz[2] % N != 0 || sz[0] == 0)
      return ctx.Error(
          "weights' columns must be qkv_hidden_sizes' sum, each part a nonzero "
          "multiple of num_heads " +
          std::to_string(N) + "; got weights " + ShapeToString(w));
    if (ctx.has_input(kBias) && ctx.shape(kBias) != Shape{w[1]})
      return ctx.Error("bias must be [" + std::to_string(w[1]) + "]; got " +
                       ShapeToString(ctx.shape(kBias)));
    const int64_t B = x[0], S = x[1], H = sz[0] / N;
    int64_t P = 0;
    if (ctx.has_input(kPast)) {
      const Shape& p = ctx.shape(kPast);
      if (sz[2] != sz[1])
        return ctx.Error("past needs equal k and v hidden sizes; got qkv_hidden_sizes " +
                         std::to_string(sz[0]) + ", " + std::to_string(sz[1]) + ", " +
                         std::to_string(sz[2]));
      if (ctx.has_input(kAttnBias))
        return ctx.Error(
            "past together with attention_bias is not supported (ONNX Runtime "
            "refuses it too)");
      if (p.size() != 5 || p[0] != 2 || p[1] != B || p[2] != N || p[4] != H)
        return ctx.Error("past must be [2, B, N, P, H] = [2, " + std::to_string(B) + ", " +
                         std::to_string(N) + ", P, " + std::to_string(H) + "]; got " +
                         ShapeToString(p));
      P = p[3];
    }
    const int64_t T = P + S;
    if (ctx.has_input(kMask) && ctx.rank(kMask) == 4)
      return ctx.Error(
          "the 4-D mask_index [B, 1, M, M] is not supported (ONNX Runtime's CPU "
          "kernel refuses it too); got " +
          ShapeToString(ctx.shape(kMask)));
    auto kind = attention_detail::CheckMaskAndBias(ctx, kMask, kAttnBias, B, N, S, T, true);
    if (!kind.ok()) return kind.status();
    ctx.SetOutput(0, DataType::kFloat, {B, S, sz[2]});
    if (ctx.num_outputs() > 1) ctx.SetOutput(1, DataType::kFloat, {2, B, N, T, H});
    return OkStatus();
  }

  Status Compute(const ComputeContext& ctx) const override {
    const Shape& xs = ctx.in(kInput).shape();
    const int64_t B = xs[0], S = xs[1], C = xs[2], N = attrs_.heads;
    const int64_t W = ctx.in(kWeights).shape()[1];
    const std::vector<int64_t> sz = Sizes(W);
    // The projection [B * S, W] in double, rounded to float32.
    const float* x = ctx.in(kInput).data<float>();
    const float* w = ctx.in(kWeights).data<float>();
    const float* bias = ctx.has(kBias) ? ctx.in(kBias).data<float>() : nullptr;
    std::vector<float> proj(static_cast<size_t>(B * S * W));
    std::vector<double> row(static_cast<size_t>(W));
    for (int64_t r = 0; r < B * S; ++r) {
      for (int64_t j = 0; j < W; ++j) row[j] = bias != nullptr ? bias[j] : 0.0;
      for (int64_t c = 0; c < C; ++c) {
        const double xv = x[r * C + c];
        for (int64_t j = 0; j < W; ++j) row[j] += xv * w[c * W + j];
      }
      for (int64_t j = 0; j < W; ++j) proj[r * W + j] = static_cast<float>(row[j]);
    }
    AttentionCore c;
    c.batch = B, c.seq = S, c.heads = N, c.head = sz[0] / N, c.v_head = sz[2] / N;
    c.past = ctx.has(kPast) ? ctx.in(kPast).shape()[3] : 0;
    c.total = c.past + S;
    // Each of q, k, v as a contiguous [B, S, D] before the split.
    std::vector<float> part;
    auto split = [&](int64_t offset, int64_t d, int64_t head, int64_t before,
                     std::vector<float>& dst) {
      part.assign(static_cast<size_t>(B * S * d), 0.f);
      for (int64_t r = 0; r < B * S; ++r)
        std::copy(proj.begin() + r * W + offset, proj.begin() + r * W + offset + d,
                  part.begin() + r * d);
      dst.assign(static_cast<size_t>(B * N * (before + S) * head), 0.f);
      attention_detail::SplitHeads(part.data(), nullptr, B, S, N, head, before, dst.data());
    };
    std::vector<float> q, k, v;
    split(0, sz[0], c.head, 0, q);
    split(sz[0], sz[1], c.head, c.past, k);
    split(sz[0] + sz[1], sz[2], c.v_head, c.past, v);
    if (c.past > 0) {
      const float* past = ctx.in(kPast).data<float>();
      const int64_t half = B * N * c.past * c.head;
      attention_detail::CopyPast(past, B, N, c.past, S, c.head, k.data());
      attention_detail::CopyPast(past + half, B, N, c.past, S, c.head, v.data());
    }
    c.q = q.data(), c.k = k.data(), c.v = v.data();
    attention_detail::RunWithInputs(c, attrs_, ctx, kMask, kAttnBias);
    if (ctx.outputs.size() > 1 && ctx.outputs[1] != nullptr) {
      float* present = ctx.out(1).data<float>();
      std::copy(k.begin(), k.end(), present);
      std::copy(v.begin(), v.end(), present + k.size());
    }
    return OkStatus();
  }

 private:
  explicit MsAttentionOp(const Node& node) : Op(node) {}
  // [Dq, Dk, Dv] for weights with `columns` columns.
  std::vector<int64_t> Sizes(int64_t columns) const {
    if (!sizes_.empty()) return sizes_;
    return {columns / 3, columns / 3, columns - 2 * (columns / 3)};
  }
  attention_detail::AttentionAttrs attrs_;
  std::vector<int64_t> sizes_;
};

StatusOr<std::unique_ptr<ir::Op>> CreateMsAttention(const Node& node) {
  return MsAttentionOp::Create(node);
}

KILN_REGISTER_OP_DOMAIN("com.microsoft", "Attention", 1, 1, &CreateMsAttention);

// Kernel cases: each mask form, causal with past and present, qkv_hidden_sizes with Dv != Dq,
// attention_bias, no bias, size-1 batch and sequence.
std::vector<OpCase> MsAttentionCases() {
  auto att = [](const std::string& name, int64_t B, int64_t S, int64_t C, int64_t W, uint32_t seed,
                bool bias = true) {
    OpCase c(name, 1);
    c.In(CaseTensor({B, S, C}, seed)).Const(CaseTensor({C, W}, seed + 1));
    if (bias)
      c.Const(CaseTensor({W}, seed + 2));
    else
      c.Omitted();
    return c;
  };
  return {att("[2,3,8] 2 heads", 2, 3, 8, 24, 800).Int("num_heads", 2),
          att("lengths [B], scale 0.25", 2, 3, 5, 12, 803)
              .In(CaseInts(DataType::kInt32, {2}, 806, 1, 3))
              .Int("num_heads", 2)
              .Float("scale", 0.25f),
          att("ends and starts [2B]", 2, 4, 5, 12, 807)
              .In(CaseInts(DataType::kInt32, {4}, 810, 0, 4))
              .Int("num_heads", 1),
          att("mask [B,S,T] causal, no bias", 2, 3, 6, 18, 811, false)
              .In(CaseInts(DataType::kInt32, {2, 3, 3}, 814, 0, 1))
              .Int("num_heads", 3)
              .Int("unidirectional", 1),
          att("past [2,B,N,2,H], mask [B,T], causal, present", 2, 3, 4, 12, 815)
              .In(CaseInts(DataType::kInt32, {2, 5}, 818, 0, 1))
              .In(CaseTensor({2, 2, 2, 2, 2}, 819))
              .Int("num_heads", 2)
              .Int("unidirectional", 1)
              .Outputs(2),
          att("qkv_hidden_sizes 4 4 6, attention_bias [B,1,S,S]", 2, 3, 5, 14, 820)
              .Omitted()
              .Omitted()
              .In(CaseTensor({2, 1, 3, 3}, 823, -2.f, 2.f))
              .Int("num_heads", 2)
              .Ints("qkv_hidden_sizes", {4, 4, 6}),
          att("[1,1,3] one token", 1, 1, 3, 9, 824).Int("num_heads", 3).Outputs(2)};
}
KILN_REGISTER_OP_CASES("com.microsoft", "Attention", &MsAttentionCases);

}  // namespace
}  // namespace kiln::ops
