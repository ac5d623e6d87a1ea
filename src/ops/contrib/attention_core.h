// The scaled dot-product attention core shared by com.microsoft MultiHeadAttention and Attention
// (defined in multi_head_attention.cc, whose header comment gives the semantics measured against
// ONNX Runtime 1.32). Plain reference loops, no threads, no state: calls may run concurrently
// when their outputs differ.
#pragma once

#include <cstdint>

#include "ir/op.h"
#include "kiln/status.h"

namespace kiln::ops::attention_detail {

// The key mask forms of both ops (mask_index of Attention, key_padding_mask of
// MultiHeadAttention); int32 values: kEnds [B] lengths, kEndsStarts [2B] ends then starts,
// kKeys [B, T] and kQueryKeys [B, S, T] with 0 masking.
enum class MaskKind { kNone, kEnds, kEndsStarts, kKeys, kQueryKeys };

// One call's operands once the heads are split: q [B, N, S, H], k [B, N, T, H], v [B, N, T, Hv]
// (float32, T = past + new), output out [B, S, N * Hv]. Pointers are borrowed.
struct AttentionCore {
  int64_t batch = 0, heads = 0, seq = 0, total = 0, past = 0, head = 0, v_head = 0;
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  double scale = 1.0;
  float mask_filter_value = -10000.f;
  bool causal = false;
  MaskKind mask_kind = MaskKind::kNone;
  const int32_t* mask = nullptr;
  const float* bias = nullptr;     // attention_bias, 4-D
  int64_t bias_b = 0, bias_n = 0;  // its first two dims (1 broadcasts)
  float* out = nullptr;
};

void RunAttentionCore(const AttentionCore& c);

// The attributes both ops share: num_heads (required, > 0), scale (0: 1/sqrt(H)),
// mask_filter_value (-10000), unidirectional (0 or 1).
struct AttentionAttrs {
  int64_t heads = 1;
  float scale = 0.f, mask_filter_value = -10000.f;
  bool causal = false;
};
StatusOr<AttentionAttrs> ParseAttentionAttrs(const ir::Node& node);

// Sets c's scale, causal flag, mask (the int32 input at mask_slot: a 1-D mask of B elements is
// lengths, of 2B ends then starts) and attention bias (the input at bias_slot) from `a` and ctx,
// then runs the core into ctx.out(0). c's dims and q, k, v must be set.
void RunWithInputs(AttentionCore& c, const AttentionAttrs& a, const ir::ComputeContext& ctx,
                   int mask_slot, int bias_slot);

// x [B, L, N * H] (plus bias[0..N*H) when given) as [B, N, L, H], written at dst with room for
// `before` positions per head first (dst holds [B, N, before + L, H]).
void SplitHeads(const float* x, const float* bias, int64_t B, int64_t L, int64_t N, int64_t H,
                int64_t before, float* dst);

// past [B, N, P, H] copied into the first P positions of dst [B, N, P + L, H].
void CopyPast(const float* past, int64_t B, int64_t N, int64_t P, int64_t L, int64_t H, float* dst);

// Checks a key mask's shape (int32 [B], [2B] when `ends_starts`, [B, T], [B, S, T]) and an
// attention bias's ([B or 1, N or 1, S, T]); the kind of mask, or an error naming the form.
StatusOr<MaskKind> CheckMaskAndBias(const ir::InferContext& ctx, int mask_slot, int bias_slot,
                                    int64_t B, int64_t N, int64_t S, int64_t T, bool ends_starts);

}  // namespace kiln::ops::attention_detail
