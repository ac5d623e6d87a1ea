// Shared pieces of the oneDNN kernels: the CPU engine, a per-thread stream, memory descriptors for
// kiln tensors, the OneDnnLayout a kernel attaches to a blocked output (so the next oneDNN kernel
// reads it without a reorder and the planner converts it to plain only where needed), post-op
// construction for fused activations, and exception-to-Status conversion.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <type_traits>
#include <vector>

#include "ir/graph.h"
#include "kiln/status.h"
#include "ops/activation.h"
#include "ops/nn/conv.h"
#include "runtime/kernel.h"

namespace kiln::backends::cpu {

dnnl::engine& Engine();
// One stream per calling thread (oneDNN streams are not thread-safe).
dnnl::stream& ThreadStream();

// Channels-last descriptor ([N, C, spatial...] stored N, spatial..., C) for a rank-3..5 shape.
dnnl::memory::desc ChannelsLastDesc(const Shape& shape, dnnl::memory::data_type dt);
// Scratch sizes are kept in 64-byte multiples, so the next region starts cache-line aligned.
inline size_t Align64(size_t bytes) { return (bytes + 63) / 64 * 64; }

// Dense row-major descriptor for a shape.
dnnl::memory::desc PlainDesc(const Shape& shape,
                             dnnl::memory::data_type dt = dnnl::memory::data_type::f32);
dnnl::memory::dims Dims(const Shape& shape);
// A reorder primitive between two descriptors on the CPU engine.
dnnl::reorder MakeReorder(const dnnl::memory::desc& from, const dnnl::memory::desc& to);

// A value stored in a oneDNN-chosen layout (possibly as bf16; its logical dtype stays float32).
class OneDnnLayout final : public runtime::Layout {
 public:
  OneDnnLayout(dnnl::memory::desc desc, Shape shape) : desc_(desc), shape_(std::move(shape)) {}
  size_t bytes() const override { return desc_.get_size(); }
  std::string name() const override;
  Status ToPlain(const void* src, void* dst) const override;
  void PrepareToPlain() const override;
  const dnnl::memory::desc& desc() const { return desc_; }

 private:
  dnnl::memory::desc desc_;
  Shape shape_;
  mutable std::once_flag to_plain_once_;
  mutable dnnl::memory::desc plain_;
  mutable dnnl::reorder to_plain_;
  mutable Status to_plain_status_;
};

// The descriptor an input arrives in: its OneDnnLayout's, or plain (uint8/int8 values as u8/s8,
// everything else as f32).
dnnl::memory::desc InputDesc(const runtime::TensorInfo& info);
// The layout to record for an output a primitive writes with `desc` (nullptr when plain).
std::shared_ptr<const runtime::Layout> LayoutFor(const dnnl::memory::desc& desc,
                                                 const Shape& shape);

// Appends the eltwise post-op(s) computing `act` (kiln's one activation type,
// ops/activation.h); false when oneDNN has no equivalent. kNone appends nothing.
bool AppendActivation(const ops::Activation& act, dnnl::post_ops* ops);
// Appends act(x) * scale (scale > 0: a quantized output's 1 / y_scale) with at most one
// eltwise_linear in the chain: oneDNN 2.6's AVX2 int8 convolution gives a second eltwise_linear
// the first one's alpha and beta, so HardSigmoid's linear step takes the scale into itself
// (clip(a x + b, 0, 1) s = clip(a s x + b s, 0, s)). False as AppendActivation.
bool AppendScaledActivation(const ops::Activation& act, float scale, dnnl::post_ops* ops);
// Appends act(s v) / s, for v a value in units of s > 0 (a quantized tensor's scale): Relu and
// LeakyRelu as they are, SiLU as swish with alpha s (s v sigmoid(s v) / s = v sigmoid(s v)).
// False for the others (their parameters would need rescaling oneDNN 2.6 cannot express, or
// are not built). kNone appends nothing.
bool AppendActivationInUnits(const ops::Activation& act, float s, dnnl::post_ops* ops);
// The eltwise algorithm and parameters of a single-primitive activation; false when `act` needs
// more than one eltwise (HardSigmoid) or has none.
bool EltwiseOf(const ops::Activation& act, dnnl::algorithm* alg, float* alpha, float* beta);

// Runs `fn`, converting dnnl::error into a Status naming `what` (OutOfMemory for oneDNN's
// out-of-memory, else Internal). With a node, its description is made only on error.
Status OneDnnError(const dnnl::error& e, const std::string& what);
template <typename F>
Status Guard(const std::string& what, F&& fn) {
  try {
    fn();
  } catch (const dnnl::error& e) {
    return OneDnnError(e, what);
  }
  return OkStatus();
}
template <typename F>
Status Guard(const ir::Node& node, F&& fn) {
  try {
    fn();
  } catch (const dnnl::error& e) {
    return OneDnnError(e, node.Describe());
  }
  return OkStatus();
}

// The hot path's oneDNN calls, through the C API so that kiln's code allocates nothing in a run
// (dnnl::memory and primitive::execute's argument map allocate in the calling code):
// RunMemory wraps one buffer of this run for one call (dnnl_memory_create allocates its small
// object inside oneDNN), ExecArg names an argument, Execute runs a primitive on the calling
// thread's stream. Errors throw dnnl::error, as the C++ API does, for Guard to catch.
class RunMemory {
 public:
  RunMemory(const dnnl::memory::desc& desc, const void* data);
  ~RunMemory();
  RunMemory(const RunMemory&) = delete;
  RunMemory& operator=(const RunMemory&) = delete;
  dnnl_memory_t get() const { return memory_; }

 private:
  dnnl_memory_t memory_ = nullptr;
};
// A primitive's memory descriptors, queried once when it is made: dnnl.hpp's queries allocate,
// so Run reads these instead.
struct PdDescs {
  dnnl::memory::desc src, dst, scratchpad;
  PdDescs() = default;
  explicit PdDescs(const dnnl::primitive_desc_base& pd)
      : src(pd.src_desc()), dst(pd.dst_desc()), scratchpad(pd.scratchpad_desc()) {}
};

// Several RunMemory objects for one call (concat's inputs), up to kMax.
class RunMemoryList {
 public:
  static constexpr size_t kMax = 64;
  RunMemoryList() = default;
  ~RunMemoryList();
  RunMemoryList(const RunMemoryList&) = delete;
  RunMemoryList& operator=(const RunMemoryList&) = delete;
  dnnl_memory_t Add(const dnnl::memory::desc& desc, const void* data);

 private:
  dnnl_memory_t memories_[kMax] = {};
  size_t count_ = 0;
};
struct ExecArg {
  int arg;
  dnnl_memory_t memory;  // a RunMemory's, or a prepared dnnl::memory's .get(); null: left out
};
void Execute(const dnnl::primitive& prim, const ExecArg* args, size_t count);
inline void Execute(const dnnl::primitive& prim, std::initializer_list<ExecArg> args) {
  Execute(prim, args.begin(), args.size());
}

// An input a primitive wants in another layout than its producer's: scratch bytes for the
// converted copy (64-byte rounded; 0 without a reorder), and the input as the primitive wants it:
// the caller's buffer as is, or reordered into `scratch`.
size_t ReorderedBytes(const dnnl::reorder& reorder, const dnnl::memory::desc& want);
const void* InputAs(const dnnl::reorder& reorder, const dnnl::memory::desc& have,
                    const dnnl::memory::desc& want, const void* data, void* scratch);

// int8 values as uint8 (v + 128: the sign bit flipped, bytewise, so in any layout) into `dst`;
// returns dst. oneDNN 2.6's int8 kernels with a source zero point are fast only for uint8
// sources: an int8 source with zero point z goes in this way with zero point z + 128 (exact).
const void* Int8AsUint8(const void* src, size_t bytes, void* dst);

// Constant weights prepacked once per session: `source` (laid out as `from`) reordered into
// layout `to`, held in `*storage` (which must outlive the returned memory). With a cache (the
// session's, PrepareContext::weights) every plan asking for the same source in the same layout
// gets the one packed copy; without, a private one.
// `transformed` (with `variant` naming the transformation in the cache key), when given, is what
// is reordered instead of `source`, which still identifies the weights in the cache.
dnnl::memory PackWeights(const dnnl::memory::desc& from, const Tensor& source,
                         const dnnl::memory::desc& to, Tensor* storage, runtime::WeightCache* cache,
                         const Tensor* transformed = nullptr, const std::string& variant = "");
// Convolution geometry for oneDNN from kiln's Conv attributes and concrete X/W shapes: weight
// dims (with a leading group dim when grouped), strides, dilations (oneDNN counts from 0) and
// pads. Throws dnnl::error when the window does not fit (a rule of ops/nn/spatial.h).
struct ConvGeometry {
  dnnl::memory::dims wdims, strides, dilations, pad_begin, pad_end;
  // The plain layout of W (oi..., or goi... when grouped) in `dt`.
  dnnl::memory::desc PlainWeights(const Shape& w_shape, int64_t group,
                                  dnnl::memory::data_type dt) const;
};
ConvGeometry ConvGeometryFor(const ops::nn::ConvParams& conv, const Shape& x, const Shape& w);
// The residual summand Z of a convolution with a sum post-op, staged into the output buffer
// before the primitive runs: nothing when the planner placed Z there already, a copy when it
// has the output's layout, else `reorder` (from `z_desc` to `dst`).
void StageResidual(const Tensor& z, Tensor* out, const dnnl::memory::desc& z_desc,
                   const dnnl::memory::desc& dst, const dnnl::reorder& reorder);

// Whether oneDNN's int8 kernels have VNNI-class dot products here (AVX-VNNI, AVX512-VNNI,
// AMX); without them a uint8 x int8 product pair summed in 16 bits (vpmaddubsw) can saturate.
bool Int8Vnni();
// int8 weights halved for CPUs without VNNI: each value / 2 rounded to even (7 bits); the caller
// doubles their scales.
Tensor HalvedInt8(const Tensor& w);

// Exact integer products without VNNI (cpu.matmulinteger.onednn, cpu.convinteger.onednn): oneDNN
// sums pairs of uint8 x int8 products in 16 bits there, so weights W - zero point wider than 64
// are split into parts of at most 64 that sum to them, run as one product over a repeated input.
// SplitWeights holds W - zero point (per tensor, or zp[channel(i)] for element i) and the part
// count: 1 while the widest value fits `limit` (64 without VNNI; 127 with VNNI, or on oneDNN's
// depthwise int8 kernels, which widen to 32 bits).
struct SplitWeights {
  std::vector<int32_t> centered;
  int parts = 1;
  SplitWeights(const Tensor& w, const Tensor* zp, const std::function<int64_t(int64_t)>& channel,
               int32_t limit);
  // Part p of element i: its share q = v / parts (toward zero), plus one unit of the remainder
  // for the first |v - q parts| parts, so the parts sum to v and none exceeds ceil(|v| / parts).
  int8_t Part(int64_t i, int p) const;
  // The packed weights' cache variant: `kind`, the part count and a hash of the zero point.
  static std::string Variant(const std::string& kind, int parts, const Tensor* zp);
};

// Runs a primitive with src, prepacked weights, an optional bias (a null memory for none), dst
// and a scratchpad, on the calling thread's stream, and waits.
void ExecuteWeighted(const dnnl::primitive& prim, const RunMemory& src, const dnnl::memory& weights,
                     const dnnl::memory& bias, const RunMemory& dst, const RunMemory& scratchpad);

// Runs a one-input primitive (eltwise, softmax, pooling) on the calling thread's stream:
// `src`/`dst` describe the step's input and output buffers.
Status ExecuteSrcDst(const ir::Node& node, const dnnl::primitive& prim,
                     const dnnl::memory::desc& scratchpad, const dnnl::memory::desc& src,
                     const dnnl::memory::desc& dst, const ir::ComputeContext& ctx);

// Whether oneDNN can run bf16 convolutions/matmuls natively here (AVX512-BF16 or AMX).
bool Bf16Supported();
// The storage type for conv/matmul activations and weights under a session precision.
dnnl::memory::data_type ComputeType(Precision precision);

// KernelDef::create: kernels are constructed from the node, and from the op (whose typed
// attributes they copy) when they take one.
template <typename K>
std::unique_ptr<runtime::Kernel> CreateKernel(const ir::Node& node, const ir::Op& op) {
  if constexpr (std::is_constructible_v<K, const ir::Node&, const ir::Op&>)
    return std::make_unique<K>(node, op);
  else
    return std::make_unique<K>(node);
}

// Up to this many bytes, a copy on the calling thread beats a oneDNN call's fixed cost or a
// hand-off to the thread pool (Split and Concat of small plain tensors copy instead).
constexpr int64_t kSmallCopyBytes = 64 << 10;

// Input 0 is float32 with rank 1..12 (oneDNN's limit) and no empty dim; "" or the reason not.
std::string DenseFloatInput(const std::vector<runtime::TensorInfo>& in);

// The destination a convolution or deconvolution asks oneDNN for: its choice (format_tag::any),
// except with fewer output channels than the smallest block (8): then plain, because a blocked
// output pads every pixel to 8 or 16 channels for the step and every elementwise step after it
// (PP-OCRv4's one-channel map: ConvTranspose, Add and Sigmoid 11.6 -> 1.6 ms, AMD EPYC AVX2).
dnnl::memory::desc DstDescFor(const Shape& ys, dnnl::memory::data_type dt);

// out[p] = the sum over the taps t < `taps` of wt[t * block + p] * s[off[t * block + p]], for
// p < count: the taps of a block of positions stored side by side per tap, so that the loop is
// one vector gather per tap and 8 positions with AVX2 (GridSample, DeformConv's sampling).
void GatherTaps(const float* s, const int32_t* off, const float* wt, int taps, int64_t block,
                int64_t count, float* out);

// out[j] = the sum over the taps t < `taps` of wt[t] * rows[t][j], for j < n: a weighted sum of
// contiguous runs, vectorized along them (Resize's H pass; GridSample's and DeformConv's taps
// over channels-last pixels).
void BlendRows(const float* const* rows, const float* wt, int taps, int64_t n, float* out);

// True when every dim of every listed info is known and the dtype is float32.
bool AllFloat(const std::vector<runtime::TensorInfo>& infos, std::initializer_list<size_t> idx);

}  // namespace kiln::backends::cpu
