// Attention (opset 23, 24): scaled dot-product attention over Q, K, V with grouped-query heads,
// a boolean or additive mask, a causal mask, softcap, a key/value cache and the QK product as an
// optional output. attention.cc has the op and its reference kernel; this header has the typed
// attributes and the geometry resolved from the input shapes, for any fast kernel to share.
//
// Layouts: 4-D inputs are Q [B, Hq, Sq, D], K [B, Hkv, Skv, D], V [B, Hkv, Skv, Dv]; 3-D inputs
// are Q [B, Sq, Hq*D], K [B, Skv, Hkv*D], V [B, Skv, Hkv*Dv] with Hq and Hkv from the
// q_num_heads and kv_num_heads attributes (Y is then [B, Sq, Hq*Dv]). past_key/past_value are
// always 4-D [B, Hkv, P, D|Dv]; present_key/present_value are [B, Hkv, P + Skv, D|Dv]. Query head
// h reads key/value head h / (Hq / Hkv) (grouped-query attention; Hkv must divide Hq).
#pragma once

#include <cstdint>

#include "ir/op.h"

namespace kiln::ops {

struct AttentionAttrs : ir::OpAttrs {
  bool is_causal = false;
  int64_t q_num_heads = 0, kv_num_heads = 0;  // 0: absent (4-D inputs carry the heads)
  bool has_scale = false;
  float scale = 0.f;    // has_scale false: 1 / sqrt(D)
  float softcap = 0.f;  // > 0: scores become softcap * tanh(scores / softcap)
  // Which stage output 3 (qk_matmul_output) holds: 0 the scaled Q K^T, 1 plus the mask, 2 after
  // softcap, 3 after softmax.
  int64_t qk_matmul_output_mode = 0;
  // The ONNX dtype asked for the softmax (0: absent). Every float precision is accepted; the
  // reference computes the softmax in double.
  int64_t softmax_precision = 0;
};

// Offsets of element (b, h, s, 0) of a Q, K, V or Y tensor in either layout: b * batch +
// h * head + s * seq (the head dim is contiguous).
struct AttentionLayout {
  int64_t batch = 0, head = 0, seq = 0;
  int64_t At(int64_t b, int64_t h, int64_t s) const { return b * batch + h * head + s * seq; }
};

struct AttentionDims {
  bool three_d = false;
  int64_t batch = 0, q_heads = 0, kv_heads = 0;
  int64_t q_seq = 0, kv_seq = 0, past_seq = 0, total_seq = 0;
  int64_t head_size = 0, v_head_size = 0;
  // The layout of a tensor with `heads` heads of `size` elements over `seq` positions.
  AttentionLayout Layout(int64_t heads, int64_t seq, int64_t size) const {
    if (three_d) return {seq * heads * size, size, heads * size};
    return {heads * seq * size, seq * size, size};
  }
  // past/present caches are 4-D in both layouts.
  static AttentionLayout Cache(int64_t heads, int64_t seq, int64_t size) {
    return {heads * seq * size, seq * size, size};
  }
};

}  // namespace kiln::ops
