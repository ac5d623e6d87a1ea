// Attention (attention.h): validation, inference, the reference kernel and the kernel cases.
//
// Per batch b, query head h (reading key/value head h / (Hq / Hkv)) and query position i, over
// every key position j of the present cache (past_key then K, total T = P + Skv):
//   s[j]    = scale * dot(Q[b,h,i], Kall[b,kvh,j])        (scale: the attribute or 1 / sqrt(D))
//   bias[j] = mask[b,h,i,j]   (float: added; bool: 0 where true, -inf where false; a mask whose
//             last dim m is shorter than T counts as -inf for j >= m)
//           + -inf where is_causal and j - P > i (the upper-left causal band shifted past P)
//           + -inf where j >= nonpad_kv_seqlen[b] (opset 24)
//   x[j]    = s[j] + bias[j], then softcap * tanh(x / softcap) when softcap > 0
//   p       = softmax(x)   (numpy's arithmetic: a row with no finite maximum gives NaN)
//   Y[b,h,i] = sum_j p[j] * Vall[b,kvh,j]
// qk_matmul_output (output 3) holds s, s + bias, x or p (qk_matmul_output_mode 0..3). Dot products,
// the softmax and the weighted sums are in double. The mask broadcasts (right-aligned, rank 1 to
// 4) to [B, Hq, Sq, m]. is_causal with a mask follows the spec (both restrict, per query row)
// where ONNX's numpy reference (onnx/reference/ops/op_attention.py) does not: it turns a bool
// mask's true entries into NaN, and with a mask whose query dim is 1 it applies query row 0's
// causal band to every row. ONNX's node tests use neither. float32 only: float16 and bfloat16
// models reach it lowered to float32 (passes/lower_float16.h); integer masks are refused.
#include "ops/nn/attention.h"

#include <array>
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "ops/common.h"
#include "ops/op_cases.h"

namespace kiln::ops {
namespace {

enum Input { kQ, kK, kV, kMask, kPastKey, kPastValue, kNonpad, kNumInputs };
using InputShapes = std::array<const Shape*, kNumInputs>;  // nullptr: omitted

std::string Str(int64_t v) { return std::to_string(v); }

// Resolves the geometry from the input shapes; returns the rule they break ("" when they fit).
std::string ResolveDims(const AttentionAttrs& a, const InputShapes& in, AttentionDims* d) {
  const Shape &q = *in[kQ], &k = *in[kK], &v = *in[kV];
  const size_t rank = q.size();
  if ((rank != 3 && rank != 4) || k.size() != rank || v.size() != rank)
    return "Q, K and V must be all 3-D or all 4-D; got ranks " + Str(q.size()) + ", " +
           Str(k.size()) + ", " + Str(v.size());
  d->three_d = rank == 3;
  d->batch = q[0];
  if (k[0] != d->batch || v[0] != d->batch)
    return "Q, K and V must have the same batch size; got " + Str(q[0]) + ", " + Str(k[0]) + ", " +
           Str(v[0]);
  if (d->three_d) {
    if (a.q_num_heads < 1 || a.kv_num_heads < 1)
      return "3-D inputs need the q_num_heads and kv_num_heads attributes; got " +
             Str(a.q_num_heads) + " and " + Str(a.kv_num_heads) + " (0: absent)";
    d->q_heads = a.q_num_heads;
    d->kv_heads = a.kv_num_heads;
    d->q_seq = q[1];
    d->kv_seq = k[1];
    if (q[2] % d->q_heads != 0)
      return "Q's hidden size must be a multiple of q_num_heads = " + Str(d->q_heads) + "; got " +
             Str(q[2]);
    d->head_size = q[2] / d->q_heads;
    if (k[2] != d->kv_heads * d->head_size)
      return "K's hidden size must be kv_num_heads * head_size = " +
             Str(d->kv_heads * d->head_size) + "; got " + Str(k[2]);
    if (v[2] % d->kv_heads != 0)
      return "V's hidden size must be a multiple of kv_num_heads = " + Str(d->kv_heads) + "; got " +
             Str(v[2]);
    d->v_head_size = v[2] / d->kv_heads;
    if (v[1] != d->kv_seq)
      return "K and V must have the same sequence length; got " + Str(k[1]) + " and " + Str(v[1]);
  } else {
    d->q_heads = q[1];
    d->kv_heads = k[1];
    d->q_seq = q[2];
    d->kv_seq = k[2];
    d->head_size = q[3];
    d->v_head_size = v[3];
    if (v[1] != d->kv_heads || v[2] != d->kv_seq)
      return "V must have K's heads and sequence length " + ShapeToString(Shape{k[1], k[2]}) +
             "; got " + ShapeToString(Shape{v[1], v[2]});
    if (k[3] != d->head_size)
      return "K's head size must be Q's (" + Str(d->head_size) + "); got " + Str(k[3]);
    if ((a.q_num_heads != 0 && a.q_num_heads != d->q_heads) ||
        (a.kv_num_heads != 0 && a.kv_num_heads != d->kv_heads))
      return "q_num_heads and kv_num_heads must match 4-D inputs' heads " + Str(d->q_heads) +
             " and " + Str(d->kv_heads) + "; got " + Str(a.q_num_heads) + " and " +
             Str(a.kv_num_heads);
  }
  if (d->kv_heads < 1 || d->q_heads % d->kv_heads != 0)
    return "the key/value heads must divide the query heads; got " + Str(d->kv_heads) + " and " +
           Str(d->q_heads);
  if ((in[kPastKey] == nullptr) != (in[kPastValue] == nullptr))
    return "past_key and past_value must be given together; got only one";
  if (in[kPastKey] != nullptr) {
    const Shape &pk = *in[kPastKey], &pv = *in[kPastValue];
    d->past_seq = pk.size() == 4 ? pk[2] : 0;
    const Shape want_k{d->batch, d->kv_heads, d->past_seq, d->head_size};
    const Shape want_v{d->batch, d->kv_heads, d->past_seq, d->v_head_size};
    if (pk != want_k || pv != want_v)
      return "past_key and past_value must be [batch, kv_heads, past, head_size] " +
             ShapeToString(want_k) + " and " + ShapeToString(want_v) + "; got " +
             ShapeToString(pk) + " and " + ShapeToString(pv);
  }
  d->total_seq = d->past_seq + d->kv_seq;
  if (in[kMask] != nullptr) {
    const Shape& m = *in[kMask];
    if (m.empty() || m.size() > 4 || m.back() > d->total_seq)
      return "attn_mask must have rank 1 to 4 and a last dim of at most past + kv sequence = " +
             Str(d->total_seq) + "; got " + ShapeToString(m);
    const Shape lead{d->batch, d->q_heads, d->q_seq};
    for (size_t i = 1; i < m.size(); ++i) {
      const int64_t dim = m[m.size() - 1 - i], want = lead[3 - i];
      if (dim != 1 && dim != want)
        return "attn_mask must broadcast to [batch, q_heads, q_seq, total] " +
               ShapeToString(Shape{d->batch, d->q_heads, d->q_seq, d->total_seq}) + "; got " +
               ShapeToString(m);
    }
  }
  if (in[kNonpad] != nullptr) {
    if (in[kPastKey] != nullptr)
      return "nonpad_kv_seqlen cannot be used with past_key and past_value";
    if (*in[kNonpad] != Shape{d->batch})
      return "nonpad_kv_seqlen must be [batch] = [" + Str(d->batch) + "]; got " +
             ShapeToString(*in[kNonpad]);
  }
  return "";
}

// Copies past (4-D, may be null) then x (the input's layout) into dst [B, Hkv, T, size].
void ConcatCache(const float* past, const float* x, const AttentionLayout& xl,
                 const AttentionDims& d, int64_t size, float* dst) {
  for (int64_t b = 0; b < d.batch; ++b)
    for (int64_t h = 0; h < d.kv_heads; ++h)
      for (int64_t t = 0; t < d.total_seq; ++t) {
        const float* src = t < d.past_seq ? past + ((b * d.kv_heads + h) * d.past_seq + t) * size
                                          : x + xl.At(b, h, t - d.past_seq);
        float* out = dst + ((b * d.kv_heads + h) * d.total_seq + t) * size;
        for (int64_t e = 0; e < size; ++e) out[e] = src[e];
      }
}

// numpy's softmax of one row in place: exp(x - max) / sum, NaN when the maximum is NaN or
// not finite from below (an all -inf row).
void SoftmaxRow(std::vector<double>& x) {
  double max = -std::numeric_limits<double>::infinity();
  bool nan = false;
  for (double v : x) {
    nan = nan || std::isnan(v);
    max = v > max ? v : max;
  }
  if (nan) max = std::numeric_limits<double>::quiet_NaN();
  double sum = 0;
  for (double& v : x) {
    v = std::exp(v - max);
    sum += v;
  }
  for (double& v : x) v /= sum;
}

class AttentionOp final : public ir::Op {
 public:
  static StatusOr<std::unique_ptr<ir::Op>> Create(const ir::Node& node) {
    auto op = std::make_unique<AttentionOp>(node);
    AttentionAttrs& a = op->a_;
    const int64_t causal = node.GetInt("is_causal", 0);
    if (causal != 0 && causal != 1)
      return ir::AttrError(node, "is_causal must be 0 or 1; got " + Str(causal));
    a.is_causal = causal == 1;
    a.q_num_heads = node.GetInt("q_num_heads", 0);
    a.kv_num_heads = node.GetInt("kv_num_heads", 0);
    if ((node.HasAttr("q_num_heads") && a.q_num_heads < 1) ||
        (node.HasAttr("kv_num_heads") && a.kv_num_heads < 1))
      return ir::AttrError(node, "q_num_heads and kv_num_heads must be >= 1; got " +
                                     Str(a.q_num_heads) + " and " + Str(a.kv_num_heads));
    a.has_scale = node.HasAttr("scale");
    a.scale = node.GetFloat("scale", 0.f);
    a.softcap = node.GetFloat("softcap", 0.f);
    if (!(a.softcap >= 0.f))
      return ir::AttrError(node, "softcap must be >= 0; got " + std::to_string(a.softcap));
    a.qk_matmul_output_mode = node.GetInt("qk_matmul_output_mode", 0);
    if (a.qk_matmul_output_mode < 0 || a.qk_matmul_output_mode > 3)
      return ir::AttrError(
          node, "qk_matmul_output_mode must be 0, 1, 2 or 3; got " + Str(a.qk_matmul_output_mode));
    a.softmax_precision = node.GetInt("softmax_precision", 0);
    // ONNX dtypes FLOAT (1), FLOAT16 (10), DOUBLE (11), BFLOAT16 (16).
    const int64_t p = a.softmax_precision;
    if (node.HasAttr("softmax_precision") && p != 1 && p != 10 && p != 11 && p != 16)
      return ir::AttrError(
          node, "softmax_precision must be a float type (1, 10, 11 or 16); got " + Str(p));
    return std::unique_ptr<ir::Op>(std::move(op));
  }
  explicit AttentionOp(const ir::Node& node) : Op(node) {}

  Status Infer(ir::InferContext& ctx) const override {
    for (size_t i : {kQ, kK, kV})
      if (!ctx.has_input(i))
        return ctx.Error("Q, K and V are required; input " + Str(i) + " is missing");
    for (size_t i : {kQ, kK, kV, kPastKey, kPastValue})
      KILN_RETURN_IF_ERROR(ctx.ExpectDtype(i, {DataType::kFloat}));
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(kMask, {DataType::kFloat, DataType::kBool}));
    if (ctx.has_input(kNonpad) && opset() < 24)
      return ctx.Error("nonpad_kv_seqlen (input 6) needs opset 24; got opset " + Str(opset()));
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(kNonpad, {DataType::kInt64}));
    InputShapes shapes{};
    for (size_t i = 0; i < kNumInputs; ++i)
      shapes[i] = i < ctx.num_inputs() && ctx.has_input(i) ? &ctx.shape(i) : nullptr;
    AttentionDims d;
    const std::string rule = ResolveDims(a_, shapes, &d);
    if (!rule.empty()) return ctx.Error(rule);
    const DataType t = ctx.dtype(kQ);
    if (d.three_d)
      ctx.SetOutput(0, t, {d.batch, d.q_seq, d.q_heads * d.v_head_size});
    else
      ctx.SetOutput(0, t, {d.batch, d.q_heads, d.q_seq, d.v_head_size});
    ctx.SetOutput(1, t, {d.batch, d.kv_heads, d.total_seq, d.head_size});
    ctx.SetOutput(2, ctx.dtype(kV), {d.batch, d.kv_heads, d.total_seq, d.v_head_size});
    ctx.SetOutput(3, t, {d.batch, d.q_heads, d.q_seq, d.total_seq});
    return OkStatus();
  }

  Status Compute(const ir::ComputeContext& ctx) const override {
    InputShapes shapes{};
    for (size_t i = 0; i < kNumInputs; ++i) shapes[i] = ctx.has(i) ? &ctx.in(i).shape() : nullptr;
    AttentionDims d;
    const std::string rule = ResolveDims(a_, shapes, &d);
    if (!rule.empty()) return RunError(rule);
    auto output = [&](size_t i) -> float* {
      return i < ctx.outputs.size() && ctx.outputs[i] ? ctx.outputs[i]->data<float>() : nullptr;
    };
    // The present caches (outputs 1 and 2, or local buffers) are the keys and values read.
    std::vector<float> key_buf, value_buf;
    float* keys = output(1);
    float* values = output(2);
    if (keys == nullptr) {
      key_buf.resize(static_cast<size_t>(d.batch * d.kv_heads * d.total_seq * d.head_size));
      keys = key_buf.data();
    }
    if (values == nullptr) {
      value_buf.resize(static_cast<size_t>(d.batch * d.kv_heads * d.total_seq * d.v_head_size));
      values = value_buf.data();
    }
    auto in = [&](size_t i) { return ctx.has(i) ? ctx.in(i).data<float>() : nullptr; };
    ConcatCache(in(kPastKey), in(kK), d.Layout(d.kv_heads, d.kv_seq, d.head_size), d, d.head_size,
                keys);
    ConcatCache(in(kPastValue), in(kV), d.Layout(d.kv_heads, d.kv_seq, d.v_head_size), d,
                d.v_head_size, values);
    const AttentionLayout ql = d.Layout(d.q_heads, d.q_seq, d.head_size);
    const AttentionLayout yl = d.Layout(d.q_heads, d.q_seq, d.v_head_size);
    const AttentionLayout kl = AttentionDims::Cache(d.kv_heads, d.total_seq, d.head_size);
    const AttentionLayout vl = AttentionDims::Cache(d.kv_heads, d.total_seq, d.v_head_size);
    const double scale =
        a_.has_scale ? a_.scale : 1.0 / std::sqrt(static_cast<double>(d.head_size));
    const double inf = std::numeric_limits<double>::infinity();
    // The mask, viewed as [B, Hq, Sq, m] through broadcast strides.
    const Tensor* mask = ctx.has(kMask) ? &ctx.in(kMask) : nullptr;
    const int64_t m = mask ? mask->shape().back() : 0;
    const std::vector<int64_t> ms =
        mask ? BroadcastStrides(mask->shape(), {d.batch, d.q_heads, d.q_seq, m})
             : std::vector<int64_t>(4, 0);
    const int64_t* nonpad = ctx.has(kNonpad) ? ctx.in(kNonpad).data<int64_t>() : nullptr;
    const float* q = in(kQ);
    float* y = output(0);
    float* qk = output(3);
    const int64_t group = d.q_heads / d.kv_heads;
    std::vector<double> row(static_cast<size_t>(d.total_seq));
    for (int64_t b = 0; b < d.batch; ++b)
      for (int64_t h = 0; h < d.q_heads; ++h)
        for (int64_t i = 0; i < d.q_seq; ++i) {
          const float* qv = q + ql.At(b, h, i);
          float* qk_row = qk ? qk + ((b * d.q_heads + h) * d.q_seq + i) * d.total_seq : nullptr;
          for (int64_t j = 0; j < d.total_seq; ++j) {
            const float* kv = keys + kl.At(b, h / group, j);
            double s = 0;
            for (int64_t e = 0; e < d.head_size; ++e) s += static_cast<double>(qv[e]) * kv[e];
            s *= scale;
            double bias = 0;
            if (mask != nullptr) {
              const int64_t at = b * ms[0] + h * ms[1] + i * ms[2] + j * ms[3];
              if (j >= m)
                bias = -inf;
              else if (mask->dtype() == DataType::kBool)
                bias = mask->data<bool>()[at] ? 0.0 : -inf;
              else
                bias = mask->data<float>()[at];
            }
            if (a_.is_causal && j - d.past_seq > i) bias += -inf;
            if (nonpad != nullptr && j >= nonpad[b]) bias += -inf;
            double x = s + bias;
            if (qk_row && a_.qk_matmul_output_mode <= 1)
              qk_row[j] = static_cast<float>(a_.qk_matmul_output_mode == 0 ? s : x);
            if (a_.softcap > 0.f) x = a_.softcap * std::tanh(x / a_.softcap);
            if (qk_row && a_.qk_matmul_output_mode == 2) qk_row[j] = static_cast<float>(x);
            row[j] = x;
          }
          SoftmaxRow(row);
          if (qk_row && a_.qk_matmul_output_mode == 3)
            for (int64_t j = 0; j < d.total_seq; ++j) qk_row[j] = static_cast<float>(row[j]);
          float* yv = y + yl.At(b, h, i);
          for (int64_t e = 0; e < d.v_head_size; ++e) {
            double acc = 0;
            for (int64_t j = 0; j < d.total_seq; ++j)
              acc += row[j] * values[vl.At(b, h / group, j) + e];
            yv[e] = static_cast<float>(acc);
          }
        }
    return OkStatus();
  }

  const ir::OpAttrs* attributes() const override { return &a_; }

 private:
  AttentionAttrs a_;
};
KILN_REGISTER_OP("Attention", 23, ir::kMaxOpset, &AttentionOp::Create);

// A seeded bool mask whose first key column is true, so that no row is wholly masked.
Tensor BoolMask(const Shape& shape, uint32_t seed) {
  Tensor t = CaseInts(DataType::kBool, shape, seed, 0, 1);
  for (int64_t i = 0; i < t.numel(); i += shape.back()) t.data<bool>()[i] = true;
  return t;
}

// Kernel cases: 4-D and 3-D layouts, multi-head, grouped-query and multi-query heads, a V head
// size unlike Q's; bool and float masks of rank 2 to 4 (broadcast, and shorter than the keys);
// is_causal alone, with a mask and with a key/value cache; softcap, scale, each
// qk_matmul_output_mode; nonpad_kv_seqlen (opset 24); size-1 batch, sequence and head dims.
std::vector<OpCase> AttentionCases() {
  std::vector<OpCase> cases;
  uint32_t seed = 900;
  auto next = [&seed] { return seed++; };  // one seed per tensor, in order
  auto qkv = [&](OpCase c, const Shape& q, const Shape& k, const Shape& v) {
    return c.In(CaseTensor(q, next())).In(CaseTensor(k, next())).In(CaseTensor(v, next()));
  };
  cases.push_back(
      qkv(OpCase("4-D [2,3,4,8] x [2,3,5,8]", 23), {2, 3, 4, 8}, {2, 3, 5, 8}, {2, 3, 5, 8}));
  cases.push_back(
      qkv(OpCase("3-D grouped heads 6/2, V head 3", 23), {2, 3, 24}, {2, 5, 8}, {2, 5, 6})
          .Int("q_num_heads", 6)
          .Int("kv_num_heads", 2));
  cases.push_back(qkv(OpCase("3-D one query, multi-query heads 3/1, head 1", 23), {1, 1, 3},
                      {1, 4, 1}, {1, 4, 1})
                      .Int("q_num_heads", 3)
                      .Int("kv_num_heads", 1));
  cases.push_back(qkv(OpCase("4-D bool mask [3,5]", 23), {2, 3, 3, 4}, {2, 3, 5, 4}, {2, 3, 5, 7})
                      .In(BoolMask({3, 5}, next())));
  cases.push_back(qkv(OpCase("4-D bool mask [2,3,3,5], grouped heads 3/1", 23), {2, 3, 3, 4},
                      {2, 1, 5, 4}, {2, 1, 5, 4})
                      .In(BoolMask({2, 3, 3, 5}, next())));
  cases.push_back(qkv(OpCase("4-D float mask [2,1,4,5] and is_causal", 23), {2, 3, 4, 8},
                      {2, 3, 5, 8}, {2, 3, 5, 8})
                      .In(CaseTensor({2, 1, 4, 5}, next(), -2.f, 0.f))
                      .Int("is_causal", 1));
  cases.push_back(qkv(OpCase("3-D is_causal", 23), {2, 5, 6}, {2, 5, 6}, {2, 5, 6})
                      .Int("is_causal", 1)
                      .Int("q_num_heads", 2)
                      .Int("kv_num_heads", 2));
  for (int64_t mode : {0, 1, 2, 3}) {
    OpCase c =
        qkv(OpCase("4-D past 4 + 3, causal, mask [3,1,7], softcap 1.5, qk mode " + Str(mode), 23),
            {1, 3, 3, 4}, {1, 3, 3, 4}, {1, 3, 3, 5});
    c.In(CaseTensor({3, 1, 7}, next(), -1.f, 0.f))
        .In(CaseTensor({1, 3, 4, 4}, next()))
        .In(CaseTensor({1, 3, 4, 5}, next()))
        .Int("is_causal", 1)
        .Float("softcap", 1.5f)
        .Int("qk_matmul_output_mode", mode)
        .Outputs(4);
    cases.push_back(std::move(c));
  }
  cases.push_back(qkv(OpCase("3-D past 2 + 3, grouped heads 4/2, scale 0.3, qk output", 23),
                      {2, 3, 12}, {2, 3, 6}, {2, 3, 4})
                      .Omitted()
                      .In(CaseTensor({2, 2, 2, 3}, next()))
                      .In(CaseTensor({2, 2, 2, 2}, next()))
                      .Int("q_num_heads", 4)
                      .Int("kv_num_heads", 2)
                      .Float("scale", 0.3f)
                      .Int("softmax_precision", 1)
                      .Outputs(4));
  cases.push_back(qkv(OpCase("opset 24 nonpad_kv_seqlen {6, 2}, float mask [4,3]", 24),
                      {2, 2, 4, 4}, {2, 2, 6, 4}, {2, 2, 6, 3})
                      .In(CaseTensor({4, 3}, next()))
                      .Omitted()
                      .Omitted()
                      .In(CaseInt64s({6, 2})));
  return cases;
}
KILN_REGISTER_OP_CASES("", "Attention", &AttentionCases);

}  // namespace
}  // namespace kiln::ops
