// cpu.quantizelinear.loop and cpu.dequantizelinear.loop: QuantizeLinear / DequantizeLinear with
// one (constant) scale and zero point, float32 <-> uint8/int8, as threaded loops
// the compiler vectorizes. Quantize computes x / scale in float32 and rounds half to even with
// the 1.5 * 2^23 addition trick after clamping (exact for |v| < 2^22, which the clamp to the
// integer range guarantees), so the results equal the reference kernel's bit for bit; NaN maps
// to the zero point as there. Quantize also reads float32 values that a oneDNN layout stores as
// bfloat16 (a float convolution's output under --precision bf16), widened exactly: the reference
// kernel's result on the same values. cpu.quantizelinear.channels: QuantizeLinear with one scale
// and zero point per channel (axis 1; what `kiln quantize --channel-activations` writes), the same
// loop per channel row; for an input in a oneDNN layout with zero points 0, a oneDNN reorder
// with output scales 1/scale[c] into the same layout: x * (1/scale) rounded to nearest even and
// saturated, which can land one step from the reference's x / scale for a value within float
// rounding of a midpoint, and NaN becomes oneDNN's conversion of it, not the zero point. Other
// per-axis and 16-bit cases run on the reference kernels. cpu.qadd.loop: kiln.QAdd (a residual Add
// between Q/DQ pairs), the same arithmetic in one pass over the 8-bit operands.
#include <algorithm>
#include <cstring>
#include <vector>

#include "backends/cpu/onednn_common.h"
#include "core/threading.h"
#include "ops/activation.h"
#include "ops/quant/quant_common.h"

namespace kiln::backends::cpu {
namespace {

using runtime::KernelSupport;
using runtime::TensorInfo;

constexpr int64_t kGrain = 1 << 14;

int32_t ZeroPoint(const Tensor* zp) {
  if (zp == nullptr) return 0;
  return zp->dtype() == DataType::kUInt8 ? zp->data<uint8_t>()[0] : zp->data<int8_t>()[0];
}

// x[i] as float32: itself, or a bfloat16 (stored as its 16 high bits) widened exactly.
inline float Load(const float* x, int64_t i) { return x[i]; }
inline float Load(const uint16_t* x, int64_t i) {
  const uint32_t bits = static_cast<uint32_t>(x[i]) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

template <typename X, typename Q>
inline __attribute__((always_inline)) void QuantizeRange(const X* x, Q* y, int64_t b, int64_t e,
                                                         float scale, float lo, float hi,
                                                         float zp) {
  constexpr float kMagic = 12582912.f;  // 1.5 * 2^23
  for (int64_t i = b; i < e; ++i) {
    float v = Load(x, i) / scale;
    v = v != v ? 0.f : v;  // NaN -> the zero point
    v = std::min(std::max(v, lo), hi);
    v = (v + kMagic) - kMagic;
    y[i] = static_cast<Q>(v + zp);
  }
}

// The uint8 and int8 loops over float32 or bfloat16 X (float32 values stored as bfloat16: a float
// convolution's output under --precision bf16), cloned for AVX2 and AVX-512 (chosen once at load;
// the baseline build targets plain x86-64, where the division runs four lanes at a time). No
// multiply is there to contract, so every clone gives the reference kernel's result.
__attribute__((target_clones("default", "avx2", "arch=x86-64-v4"))) void QuantizeRun(
    const void* x, bool bf16, void* y, bool u8, int64_t b, int64_t e, float scale, float lo,
    float hi, float zp) {
  const auto* xf = static_cast<const float*>(x);
  const auto* xh = static_cast<const uint16_t*>(x);
  auto* yu = static_cast<uint8_t*>(y);
  auto* ys = static_cast<int8_t*>(y);
  if (bf16 && u8) QuantizeRange(xh, yu, b, e, scale, lo, hi, zp);
  if (bf16 && !u8) QuantizeRange(xh, ys, b, e, scale, lo, hi, zp);
  if (!bf16 && u8) QuantizeRange(xf, yu, b, e, scale, lo, hi, zp);
  if (!bf16 && !u8) QuantizeRange(xf, ys, b, e, scale, lo, hi, zp);
}

// How a oneDNN layout stores a value of type t (float32 values may also be stored as bf16).
dnnl::memory::data_type StorageOf(DataType t) {
  return t == DataType::kUInt8  ? dnnl::memory::data_type::u8
         : t == DataType::kInt8 ? dnnl::memory::data_type::s8
                                : dnnl::memory::data_type::f32;
}

// What both loops prepare: the one scale and zero point, and, when the input arrives in a oneDNN
// layout, the same layout for the output in its own type (both are elementwise with one scale,
// so an int8 convolution after QuantizeLinear reads its input without a reorder).
class PerTensorLoop : public runtime::Kernel {
 public:
  explicit PerTensorLoop(const ir::Node& node) : node_(node) {}
  // QuantizeLinear also reads float32 values a oneDNN layout stores as bfloat16.
  bool AcceptsLayout(size_t input) const override { return input == 0; }
  Status Prepare(runtime::PrepareContext* ctx) override {
    scale_ = ctx->constants[1]->data<float>()[0];
    zp_ = ZeroPoint(ctx->constants.size() > 2 ? ctx->constants[2] : nullptr);
    in_ = ctx->inputs[0].dtype;
    out_ = ctx->outputs[0].dtype;
    const runtime::TensorInfo& x = ctx->inputs[0];
    n_ = NumElements(x.shape);
    bf16_in_ = false;
    if (auto* l = dynamic_cast<const OneDnnLayout*>(x.layout.get())) {
      bf16_in_ = in_ == DataType::kFloat && l->desc().data_type() == dnnl::memory::data_type::bf16;
      if (l->desc().data_type() != StorageOf(in_) && !(bf16_in_ && ReadsBf16()))
        return Unsupported("failed to run " + node_.Describe() + ": the input layout " + l->name() +
                           " does not store " + DataTypeName(in_));
      dnnl_memory_desc_t d = l->desc().data;
      d.data_type = static_cast<dnnl_data_type_t>(StorageOf(out_));
      // Elements in the buffer, padding included.
      n_ = static_cast<int64_t>(l->desc().get_size() / (bf16_in_ ? 2 : DataTypeSize(in_)));
      ctx->outputs[0].layout = LayoutFor(dnnl::memory::desc(d), x.shape);
    }
    return OkStatus();
  }

 protected:
  virtual bool ReadsBf16() const { return false; }
  ir::Node node_;
  bool bf16_in_ = false;  // X: float32 values stored as bfloat16
  float scale_ = 1.f;
  int32_t zp_ = 0;
  DataType in_ = DataType::kFloat, out_ = DataType::kFloat;
  int64_t n_ = 0;  // elements in the buffer (a blocked layout's padding included)
};

class QuantizeLoop final : public PerTensorLoop {
 public:
  using PerTensorLoop::PerTensorLoop;
  Status Run(const ir::ComputeContext& ctx) const override {
    const void* x = ctx.in(0).raw();
    void* y = ctx.out(0).raw();
    const float z = static_cast<float>(zp_);
    // The clamp bounds before adding the zero point.
    const float lo = (out_ == DataType::kUInt8 ? 0.f : -128.f) - z;
    const float hi = (out_ == DataType::kUInt8 ? 255.f : 127.f) - z;
    const float s = scale_;
    const bool u8 = out_ == DataType::kUInt8;
    const bool bf16 = bf16_in_;
    ParallelFor(n_, kGrain,
                [&](int64_t b, int64_t e) { QuantizeRun(x, bf16, y, u8, b, e, s, lo, hi, z); });
    return OkStatus();
  }

 private:
  bool ReadsBf16() const override { return true; }
};

template <typename Q>
inline __attribute__((always_inline)) void DequantizeRange(const Q* x, float* y, int64_t b,
                                                           int64_t e, float scale, int32_t zp) {
  for (int64_t i = b; i < e; ++i)
    y[i] = static_cast<float>(static_cast<int32_t>(x[i]) - zp) * scale;
}

// As QuantizeRun: (x - zp) * scale has nothing to contract either.
__attribute__((target_clones("default", "avx2", "arch=x86-64-v4"))) void DequantizeRun(
    const void* x, float* y, bool u8, int64_t b, int64_t e, float scale, int32_t zp) {
  if (u8)
    DequantizeRange(static_cast<const uint8_t*>(x), y, b, e, scale, zp);
  else
    DequantizeRange(static_cast<const int8_t*>(x), y, b, e, scale, zp);
}

class DequantizeLoop final : public PerTensorLoop {
 public:
  using PerTensorLoop::PerTensorLoop;
  Status Run(const ir::ComputeContext& ctx) const override {
    const void* x = ctx.in(0).raw();
    float* y = ctx.out(0).data<float>();
    const float s = scale_;
    const int32_t z = zp_;
    const bool u8 = in_ == DataType::kUInt8;
    ParallelFor(n_, kGrain, [&](int64_t b, int64_t e) { DequantizeRun(x, y, u8, b, e, s, z); });
    return OkStatus();
  }
};

using ops::quant::Is8Bit;

// Per channel (axis 1). Plain X: an exact loop (x / scale[c], as the reference kernel). X in a
// oneDNN layout with zero points 0: a reorder into the same layout with output scales
// 1/scale[c]. X in a oneDNN layout with other zero points: converted to plain, then the loop.
class QuantizeChannels final : public runtime::Kernel {
 public:
  explicit QuantizeChannels(const ir::Node& node) : node_(node) {}
  bool AcceptsLayout(size_t input) const override { return input == 0; }
  size_t ScratchBytes() const override { return to_plain_ ? plain_bytes_ : 0; }
  Status Prepare(runtime::PrepareContext* ctx) override {
    const TensorInfo& x = ctx->inputs[0];
    const Tensor& scale = *ctx->constants[1];
    const Tensor& zp = *ctx->constants[2];
    out_ = ctx->outputs[0].dtype;
    channels_ = x.shape[1];
    inner_ = NumElements(x.shape) / (x.shape[0] * channels_);
    rows_ = x.shape[0] * channels_;
    scales_.assign(scale.data<float>(), scale.data<float>() + channels_);
    zps_.resize(static_cast<size_t>(channels_));
    bool zero = true;
    for (int64_t c = 0; c < channels_; ++c) {
      zps_[c] = zp.dtype() == DataType::kUInt8 ? zp.data<uint8_t>()[c] : zp.data<int8_t>()[c];
      zero = zero && zps_[c] == 0;
    }
    layout_ = x.layout;
    use_reorder_ = x.layout != nullptr && zero;
    to_plain_ = x.layout != nullptr && !zero;
    plain_bytes_ = static_cast<size_t>(NumElements(x.shape)) * sizeof(float);
    if (!use_reorder_) return OkStatus();
    return Guard(node_, [&] {
      src_ = InputDesc(x);
      dnnl_memory_desc_t d = src_.data;
      d.data_type = static_cast<dnnl_data_type_t>(StorageOf(out_));
      dst_ = dnnl::memory::desc(d);
      std::vector<float> inv(static_cast<size_t>(channels_));
      for (int64_t c = 0; c < channels_; ++c) inv[c] = 1.f / scales_[c];
      dnnl::primitive_attr attr;
      attr.set_output_scales(1 << 1, inv);
      reorder_ = dnnl::reorder(dnnl::reorder::primitive_desc(Engine(), src_, Engine(), dst_, attr));
      ctx->outputs[0].layout = LayoutFor(dst_, x.shape);
    });
  }
  Status Run(const ir::ComputeContext& ctx) const override {
    if (use_reorder_)
      return Guard(node_, [&] {
        RunMemory s(src_, ctx.in(0).raw()), d(dst_, ctx.out(0).raw());
        Execute(reorder_, {{DNNL_ARG_FROM, s.get()}, {DNNL_ARG_TO, d.get()}});
        ThreadStream().wait();
      });
    const float* x = ctx.in(0).data<float>();
    if (to_plain_) {
      KILN_RETURN_IF_ERROR(layout_->ToPlain(x, ctx.scratch));
      x = static_cast<const float*>(ctx.scratch);
    }
    void* y = ctx.out(0).raw();
    const bool u8 = out_ == DataType::kUInt8;
    const int64_t rows_per = std::max<int64_t>(1, kGrain / std::max<int64_t>(1, inner_));
    ParallelFor(rows_, rows_per, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const int64_t c = r % channels_;
        const float z = static_cast<float>(zps_[c]);
        const float lo = (u8 ? 0.f : -128.f) - z, hi = (u8 ? 255.f : 127.f) - z;
        const int64_t at = r * inner_;
        QuantizeRun(x + at, false, static_cast<uint8_t*>(y) + at, u8, 0, inner_, scales_[c], lo, hi,
                    z);
      }
    });
    return OkStatus();
  }

 private:
  ir::Node node_;
  DataType out_ = DataType::kUInt8;
  int64_t channels_ = 1, inner_ = 1, rows_ = 0;
  std::vector<float> scales_;
  std::vector<int32_t> zps_;
  std::shared_ptr<const runtime::Layout> layout_;
  bool use_reorder_ = false, to_plain_ = false;
  size_t plain_bytes_ = 0;
  dnnl::memory::desc src_, dst_;
  dnnl::reorder reorder_;
};

KernelSupport SupportsQuantizeChannels(const ir::Node& node, const ir::Op&,
                                       const std::vector<TensorInfo>& in) {
  if (in[0].dtype != DataType::kFloat) return {false, "needs float32 X"};
  if (auto* l = dynamic_cast<const OneDnnLayout*>(in[0].layout.get()))
    if (l->desc().data_type() != dnnl::memory::data_type::f32)
      return {false, "needs X stored as float32; got layout " + l->name()};
  const Shape& x = in[0].shape;
  const int64_t rank = static_cast<int64_t>(x.size());
  const int64_t axis = node.GetInt("axis", 1);
  if (rank < 2 || rank > 12 || (axis != 1 && axis != 1 - rank)) return {false, "needs axis 1"};
  for (int64_t d : x)
    if (d <= 0) return {false, "needs a non-empty X"};
  if (in[1].dtype != DataType::kFloat || in[1].shape != Shape{x[1]})
    return {false, "needs one float32 scale per channel"};
  if (!node.HasInput(2) || !Is8Bit(in[2].dtype) || in[2].shape != Shape{x[1]})
    return {false, "needs uint8/int8 zero points, one per channel"};
  if (node.GetInt("block_size", 0) != 0) return {false, "blocked quantization"};
  return {true, ""};
}

// One scale (and zero point) element; an input layout storing X's own type (not bf16 storage of
// a float32 value, which the reference kernel then gets converted to plain).
// `bf16_ok`: float32 X may also be stored as bfloat16 (QuantizeLinear).
std::string PerTensor(const ir::Node& node, const std::vector<TensorInfo>& in,
                      bool bf16_ok = false) {
  if (auto* l = dynamic_cast<const OneDnnLayout*>(in[0].layout.get()))
    if (l->desc().data_type() != StorageOf(in[0].dtype) &&
        !(bf16_ok && l->desc().data_type() == dnnl::memory::data_type::bf16))
      return "needs X stored in its own type; got layout " + l->name();
  if (NumElements(in[1].shape) != 1 || in[1].dtype != DataType::kFloat)
    return "needs one float32 scale (per-axis scales run on the reference kernel)";
  if (node.HasInput(2) && NumElements(in[2].shape) != 1) return "needs one zero point";
  if (node.GetInt("block_size", 0) != 0) return "blocked quantization";
  return "";
}

KernelSupport SupportsQuantize(const ir::Node& node, const ir::Op&,
                               const std::vector<TensorInfo>& in) {
  if (in[0].dtype != DataType::kFloat) return {false, "needs float32 X"};
  std::string why = PerTensor(node, in, /*bf16_ok=*/true);
  if (!why.empty()) return {false, why};
  if (node.HasInput(2) ? !Is8Bit(in[2].dtype)
                       : node.GetInt("output_dtype", 0) > static_cast<int>(DataType::kInt8))
    return {false, "quantizes to uint8/int8 only (16-bit on the reference kernel)"};
  return {true, ""};
}

KernelSupport SupportsDequantize(const ir::Node& node, const ir::Op&,
                                 const std::vector<TensorInfo>& in) {
  if (!Is8Bit(in[0].dtype)) return {false, "needs uint8/int8 X"};
  std::string why = PerTensor(node, in);
  return {why.empty(), why};
}

// kiln.QAdd: dequantize both operands, add, Relu, quantize, element by element in float32 in the
// reference kernel's order of operations (bit for bit its result; the quantization as
// QuantizeRange). Both operands in one layout: A's (the output takes it, in Y's type); a B in
// another layout is reordered into A's first (scratch). The output may overwrite A.
template <typename A, typename B, typename Y>
inline __attribute__((always_inline)) void QAddRange(const A* a, const B* b, Y* y, int64_t begin,
                                                     int64_t end, const float* p, bool relu) {
  constexpr float kMagic = 12582912.f;  // 1.5 * 2^23
  const float sa = p[0], za = p[1], sb = p[2], zb = p[3], sy = p[4], zy = p[5], lo = p[6],
              hi = p[7];
  for (int64_t i = begin; i < end; ++i) {
    const float va = (static_cast<float>(a[i]) - za) * sa;
    const float vb = (static_cast<float>(b[i]) - zb) * sb;
    float v = va + vb;
    v = relu ? std::max(v, 0.f) : v;
    v = std::min(std::max(v / sy, lo), hi);
    v = (v + kMagic) - kMagic;
    y[i] = static_cast<Y>(static_cast<int32_t>(v + zy));
  }
}

// The eight operand/result type combinations (sel: 4 A uint8, 2 B uint8, 1 Y uint8), in one
// function GCC clones for AVX2 (chosen once at load; the baseline build targets plain x86-64).
// Not for AVX-512 (x86-64-v4) as channel_ops.cc does: that target has FMA, and a contracted
// va * sa + vb would no longer be the reference's arithmetic.
__attribute__((target_clones("default", "avx2"))) void QAddRun(const void* a, const void* b,
                                                               void* y, int sel, int64_t begin,
                                                               int64_t end, const float* p,
                                                               bool relu) {
  using U = uint8_t;
  using S = int8_t;
  switch (sel) {
#define KILN_QADD_CASE(N, TA, TB, TY)                                                           \
  case N:                                                                                       \
    QAddRange(static_cast<const TA*>(a), static_cast<const TB*>(b), static_cast<TY*>(y), begin, \
              end, p, relu);                                                                    \
    return;
    KILN_QADD_CASE(7, U, U, U)
    KILN_QADD_CASE(6, U, U, S)
    KILN_QADD_CASE(5, U, S, U)
    KILN_QADD_CASE(4, U, S, S)
    KILN_QADD_CASE(3, S, U, U)
    KILN_QADD_CASE(2, S, U, S)
    KILN_QADD_CASE(1, S, S, U)
    KILN_QADD_CASE(0, S, S, S)
#undef KILN_QADD_CASE
  }
}

class QAddLoop final : public runtime::Kernel {
 public:
  QAddLoop(const ir::Node& node, const ir::Op& op)
      : node_(node),
        relu_(runtime::AttrsOf<ops::ActivationAttrs>(op).act.kind == ops::ActivationKind::kRelu) {}
  bool AcceptsLayout(size_t input) const override { return input == 0 || input == 3; }
  int InPlaceInput() const override { return in_place_ ? 0 : -1; }
  size_t ScratchBytes() const override { return ReorderedBytes(b_reorder_, b_want_); }

  Status Prepare(runtime::PrepareContext* ctx) override {
    return Guard(node_, [&] {
      const TensorInfo& a = ctx->inputs[0];
      const TensorInfo& b = ctx->inputs[3];
      const dnnl::memory::desc da = InputDesc(a);
      b_have_ = InputDesc(b);
      dnnl_memory_desc_t want = da.data;
      want.data_type = static_cast<dnnl_data_type_t>(StorageOf(b.dtype));
      b_want_ = dnnl::memory::desc(want);
      if (b_have_ != b_want_) b_reorder_ = MakeReorder(b_have_, b_want_);
      n_ = static_cast<int64_t>(da.get_size());  // one byte per element, padding included
      a_u8_ = a.dtype == DataType::kUInt8;
      b_u8_ = b.dtype == DataType::kUInt8;
      y_u8_ = ctx->outputs[0].dtype == DataType::kUInt8;
      const float za =
          static_cast<float>(ZeroPoint(node_.HasInput(2) ? ctx->constants[2] : nullptr));
      const float zb =
          static_cast<float>(ZeroPoint(node_.HasInput(5) ? ctx->constants[5] : nullptr));
      const float zy = static_cast<float>(ZeroPoint(ctx->constants[7]));
      params_[0] = ctx->constants[1]->data<float>()[0];
      params_[1] = za;
      params_[2] = ctx->constants[4]->data<float>()[0];
      params_[3] = zb;
      params_[4] = ctx->constants[6]->data<float>()[0];
      params_[5] = zy;
      params_[6] = (y_u8_ ? 0.f : -128.f) - zy;  // the clamp bounds before adding the zero point
      params_[7] = (y_u8_ ? 255.f : 127.f) - zy;
      in_place_ = a.dtype == ctx->outputs[0].dtype;
      if (a.layout != nullptr) {
        dnnl_memory_desc_t d = da.data;
        d.data_type = static_cast<dnnl_data_type_t>(StorageOf(ctx->outputs[0].dtype));
        ctx->outputs[0].layout = LayoutFor(dnnl::memory::desc(d), a.shape);
      }
    });
  }

  Status Run(const ir::ComputeContext& ctx) const override {
    const void* b = ctx.in(3).raw();
    if (b_reorder_) {
      KILN_RETURN_IF_ERROR(
          Guard(node_, [&] { b = InputAs(b_reorder_, b_have_, b_want_, b, ctx.scratch); }));
      ThreadStream().wait();
    }
    const void* a = ctx.in(0).raw();
    void* y = ctx.out(0).raw();
    const float* p = params_;
    const bool relu = relu_;
    const int sel = (a_u8_ ? 4 : 0) + (b_u8_ ? 2 : 0) + (y_u8_ ? 1 : 0);
    ParallelFor(n_, kGrain,
                [&](int64_t begin, int64_t end) { QAddRun(a, b, y, sel, begin, end, p, relu); });
    return OkStatus();
  }

 private:
  ir::Node node_;
  bool relu_ = false, a_u8_ = true, b_u8_ = true, y_u8_ = true, in_place_ = false;
  float params_[8] = {};  // a_scale, a_zero, b_scale, b_zero, y_scale, y_zero, lo, hi
  int64_t n_ = 0;
  dnnl::memory::desc b_have_, b_want_;
  dnnl::reorder b_reorder_;
};

KernelSupport SupportsQAdd(const ir::Node&, const ir::Op&, const std::vector<TensorInfo>& in) {
  for (size_t i : {size_t{0}, size_t{3}}) {
    if (!Is8Bit(in[i].dtype)) return {false, "needs uint8/int8 operands"};
    if (auto* l = dynamic_cast<const OneDnnLayout*>(in[i].layout.get()))
      if (l->desc().data_type() != StorageOf(in[i].dtype))
        return {false, "needs operands stored in their own type; got layout " + l->name()};
  }
  if (in[0].shape != in[3].shape) return {false, "needs operands of one shape"};
  return {true, ""};
}

// cpu.dynamicquantizelinear.loop: DynamicQuantizeLinear (float32 -> uint8 with the scale and
// zero point of the input's range, 0 included): the range in threaded chunks (NaN skipped, as
// std::min/max do in the reference), the scale and zero point by the reference's own arithmetic,
// then QuantizeRange: bit for bit the reference kernel's result.
class DynamicQuantizeLoop final : public runtime::Kernel {
 public:
  explicit DynamicQuantizeLoop(const ir::Node&) {}
  Status Prepare(runtime::PrepareContext* ctx) override {
    chunks_ = (NumElements(ctx->inputs[0].shape) + kChunk - 1) / kChunk;
    return OkStatus();
  }
  // Scratch: each chunk's minimum, then each chunk's maximum (no allocation in a run).
  size_t ScratchBytes() const override { return 2 * static_cast<size_t>(chunks_) * sizeof(float); }
  Status Run(const ir::ComputeContext& ctx) const override {
    const Tensor& xt = ctx.in(0);
    const float* x = xt.data<float>();
    const int64_t n = xt.numel();
    const int64_t chunks = chunks_;
    float lo = 0.f, hi = 0.f;  // the range always includes 0
    float* los = static_cast<float*>(ctx.scratch);
    float* his = los + chunks;
    ParallelFor(chunks, 1, [&](int64_t b, int64_t e) {
      for (int64_t c = b; c < e; ++c) {
        float l = 0.f, h = 0.f;
        for (int64_t i = c * kChunk; i < std::min(n, (c + 1) * kChunk); ++i) {
          l = std::min(l, x[i]);
          h = std::max(h, x[i]);
        }
        los[c] = l;
        his[c] = h;
      }
    });
    for (int64_t c = 0; c < chunks; ++c) {
      lo = std::min(lo, los[c]);
      hi = std::max(hi, his[c]);
    }
    const float scale = (hi - lo) / 255.f;
    int32_t zp = 0;
    if (scale > 0.f) zp = ops::quant::QuantizeValue(0.f - lo, scale, 0, 0.f, 255.f);
    ctx.out(1).data<float>()[0] = scale;
    ctx.out(2).data<uint8_t>()[0] = static_cast<uint8_t>(zp);
    uint8_t* y = ctx.out(0).data<uint8_t>();
    if (!(scale > 0.f)) {
      std::fill(y, y + n, uint8_t{0});
      return OkStatus();
    }
    const float z = static_cast<float>(zp);
    ParallelFor(n, kGrain, [&](int64_t b, int64_t e) {
      QuantizeRun(x, false, y, true, b, e, scale, 0.f - z, 255.f - z, z);
    });
    return OkStatus();
  }

 private:
  static constexpr int64_t kChunk = 1 << 15;
  int64_t chunks_ = 0;
};

KernelSupport SupportsDynamicQuantize(const ir::Node&, const ir::Op&,
                                      const std::vector<TensorInfo>& in) {
  if (in[0].dtype != DataType::kFloat) return {false, "needs float32 input"};
  return {true, ""};
}

KILN_REGISTER_KERNEL(runtime::KernelDef{"cpu.dynamicquantizelinear.loop",
                                        "DynamicQuantizeLinear",
                                        "",
                                        11,
                                        ir::kMaxOpset,
                                        Backend::kCpu,
                                        10,
                                        SupportsDynamicQuantize,
                                        CreateKernel<DynamicQuantizeLoop>,
                                        {}});
KILN_REGISTER_KERNEL(runtime::KernelDef{"cpu.quantizelinear.loop",
                                        "QuantizeLinear",
                                        "",
                                        10,
                                        ir::kMaxOpset,
                                        Backend::kCpu,
                                        10,
                                        SupportsQuantize,
                                        CreateKernel<QuantizeLoop>,
                                        {1, 2}});
KILN_REGISTER_KERNEL(runtime::KernelDef{"cpu.quantizelinear.channels",
                                        "QuantizeLinear",
                                        "",
                                        13,
                                        ir::kMaxOpset,
                                        Backend::kCpu,
                                        10,
                                        SupportsQuantizeChannels,
                                        CreateKernel<QuantizeChannels>,
                                        {1, 2}});
KILN_REGISTER_KERNEL(runtime::KernelDef{"cpu.dequantizelinear.loop",
                                        "DequantizeLinear",
                                        "",
                                        10,
                                        ir::kMaxOpset,
                                        Backend::kCpu,
                                        10,
                                        SupportsDequantize,
                                        CreateKernel<DequantizeLoop>,
                                        {1, 2}});
// The scales and zero points must be constant.
KILN_REGISTER_KERNEL(runtime::KernelDef{"cpu.qadd.loop",
                                        "QAdd",
                                        "kiln",
                                        1,
                                        1,
                                        Backend::kCpu,
                                        10,
                                        SupportsQAdd,
                                        CreateKernel<QAddLoop>,
                                        {1, 2, 4, 5, 6, 7}});

}  // namespace
}  // namespace kiln::backends::cpu
