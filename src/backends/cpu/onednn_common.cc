#include "backends/cpu/onednn_common.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "ops/quant/quant_common.h"
#include "runtime/session_resources.h"

namespace kiln::backends::cpu {

dnnl::engine& Engine() {
  static dnnl::engine* e = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *e;
}

dnnl::stream& ThreadStream() {
  thread_local dnnl::stream s(Engine());
  return s;
}

dnnl::memory::desc ChannelsLastDesc(const Shape& shape, dnnl::memory::data_type dt) {
  static const dnnl::memory::format_tag tags[] = {dnnl::memory::format_tag::acb,
                                                  dnnl::memory::format_tag::acdb,
                                                  dnnl::memory::format_tag::acdeb};
  return dnnl::memory::desc(Dims(shape), dt, tags[shape.size() - 3]);
}

dnnl::memory::dims Dims(const Shape& shape) {
  return dnnl::memory::dims(shape.begin(), shape.end());
}

dnnl::reorder MakeReorder(const dnnl::memory::desc& from, const dnnl::memory::desc& to) {
  return dnnl::reorder(dnnl::reorder::primitive_desc(Engine(), from, Engine(), to));
}

dnnl::memory::desc PlainDesc(const Shape& shape, dnnl::memory::data_type dt) {
  dnnl::memory::dims dims = Dims(shape);
  dnnl::memory::dims strides(dims.size(), 1);
  for (int i = static_cast<int>(dims.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * std::max<int64_t>(dims[i + 1], 1);
  return dnnl::memory::desc(dims, dt, strides);
}

std::string OneDnnLayout::name() const {
  // oneDNN's format-tag letters: dims a, b, c, ... listed outermost first, then inner blocks
  // ("acdb" is NHWC, "aBcd16b" is nChw16c).
  const auto& d = desc_.data;
  if (d.format_kind != dnnl_blocked) return "onednn-opaque";
  const auto& b = d.format_desc.blocking;
  std::vector<int> order(d.ndims);
  for (int i = 0; i < d.ndims; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](int x, int y) { return b.strides[x] > b.strides[y]; });
  std::vector<bool> blocked(d.ndims, false);
  for (int i = 0; i < b.inner_nblks; ++i) blocked[b.inner_idxs[i]] = true;
  std::string s;
  for (int i : order) s += static_cast<char>((blocked[i] ? 'A' : 'a') + i);
  for (int i = 0; i < b.inner_nblks; ++i)
    s += std::to_string(b.inner_blks[i]) + static_cast<char>('a' + b.inner_idxs[i]);
  if (desc_.data_type() == dnnl::memory::data_type::bf16) s += ":bf16";
  return s;
}

void OneDnnLayout::PrepareToPlain() const {
  static const std::string kWhat = "reorder to plain";
  // Plain means the value's logical dtype: float32 for float storage (bf16 converts back here),
  // the integer type itself for uint8/int8 values (the int8 kernels' layouts). Made once, when
  // the plan adds the conversion (or else at the first conversion), and kept.
  std::call_once(to_plain_once_, [&] {
    to_plain_status_ = Guard(kWhat, [&] {
      const auto dt = desc_.data_type();
      const bool int8 = dt == dnnl::memory::data_type::u8 || dt == dnnl::memory::data_type::s8;
      plain_ = PlainDesc(shape_, int8 ? dt : dnnl::memory::data_type::f32);
      to_plain_ = MakeReorder(desc_, plain_);
    });
  });
}

Status OneDnnLayout::ToPlain(const void* src, void* dst) const {
  static const std::string kWhat = "reorder to plain";
  PrepareToPlain();
  if (!to_plain_status_.ok()) return to_plain_status_;
  return Guard(kWhat, [&] {
    RunMemory s(desc_, src), d(plain_, dst);
    Execute(to_plain_, {{DNNL_ARG_FROM, s.get()}, {DNNL_ARG_TO, d.get()}});
    ThreadStream().wait();
  });
}

dnnl::memory::desc InputDesc(const runtime::TensorInfo& info) {
  if (auto* l = dynamic_cast<const OneDnnLayout*>(info.layout.get())) return l->desc();
  return PlainDesc(info.shape, info.dtype == DataType::kUInt8  ? dnnl::memory::data_type::u8
                               : info.dtype == DataType::kInt8 ? dnnl::memory::data_type::s8
                                                               : dnnl::memory::data_type::f32);
}

std::shared_ptr<const runtime::Layout> LayoutFor(const dnnl::memory::desc& desc,
                                                 const Shape& shape) {
  if (desc.data_type() == dnnl::memory::data_type::f32 && desc == PlainDesc(shape)) return nullptr;
  return std::make_shared<OneDnnLayout>(desc, shape);
}

bool EltwiseOf(const ops::Activation& act, dnnl::algorithm* alg, float* alpha, float* beta) {
  using K = ops::ActivationKind;
  using A = dnnl::algorithm;
  *alpha = 0.f;
  *beta = 0.f;
  switch (act.kind) {
    case K::kRelu:
      *alg = A::eltwise_relu;
      return true;
    case K::kLeakyRelu:
      *alg = A::eltwise_relu;
      *alpha = act.alpha;
      return true;
    case K::kElu:
      *alg = A::eltwise_elu;
      *alpha = act.alpha;
      return true;
    case K::kClip:
      *alg = A::eltwise_clip_v2;
      *alpha = act.alpha;
      *beta = act.beta;
      return true;
    case K::kSigmoid:
      *alg = A::eltwise_logistic;
      return true;
    case K::kTanh:
      *alg = A::eltwise_tanh;
      return true;
    case K::kHardSwish:
      *alg = A::eltwise_hardswish;
      return true;
    case K::kSilu:
      *alg = A::eltwise_swish;
      *alpha = 1.f;
      return true;
    case K::kGelu:
      *alg = A::eltwise_gelu_erf;
      return true;
    case K::kGeluTanh:
      *alg = A::eltwise_gelu_tanh;
      return true;
    case K::kExp:
      *alg = A::eltwise_exp;
      return true;
    case K::kSqrt:
      *alg = A::eltwise_sqrt;
      return true;
    case K::kAbs:
      *alg = A::eltwise_abs;
      return true;
    default:
      return false;
  }
}

bool AppendActivation(const ops::Activation& act, dnnl::post_ops* ops) {
  if (act.kind == ops::ActivationKind::kNone) return true;
  if (act.kind == ops::ActivationKind::kHardSigmoid) {
    ops->append_eltwise(1.f, dnnl::algorithm::eltwise_linear, act.alpha, act.beta);
    ops->append_eltwise(1.f, dnnl::algorithm::eltwise_clip_v2, 0.f, 1.f);
    return true;
  }
  dnnl::algorithm alg;
  float alpha, beta;
  if (!EltwiseOf(act, &alg, &alpha, &beta)) return false;
  ops->append_eltwise(1.f, alg, alpha, beta);
  return true;
}

bool AppendActivationInUnits(const ops::Activation& act, float s, dnnl::post_ops* ops) {
  using K = ops::ActivationKind;
  switch (act.kind) {
    case K::kNone:
      return true;
    case K::kRelu:
    case K::kLeakyRelu:
      return AppendActivation(act, ops);
    case K::kSilu:
      ops->append_eltwise(1.f, dnnl::algorithm::eltwise_swish, s, 0.f);
      return true;
    default:
      return false;
  }
}

bool AppendScaledActivation(const ops::Activation& act, float scale, dnnl::post_ops* ops) {
  if (act.kind == ops::ActivationKind::kHardSigmoid) {
    ops->append_eltwise(1.f, dnnl::algorithm::eltwise_linear, act.alpha * scale, act.beta * scale);
    ops->append_eltwise(1.f, dnnl::algorithm::eltwise_clip_v2, 0.f, scale);
    return true;
  }
  if (!AppendActivation(act, ops)) return false;
  ops->append_eltwise(1.f, dnnl::algorithm::eltwise_linear, scale, 0.f);
  return true;
}

ConvGeometry ConvGeometryFor(const ops::nn::ConvParams& conv, const Shape& x, const Shape& ws) {
  ops::nn::Window win;
  std::vector<int64_t> in(x.begin() + 2, x.end()), kernel(ws.begin() + 2, ws.end());
  std::string rule = ops::nn::ForwardWindow(conv.window, in, kernel, false, &win);
  if (!rule.empty()) throw dnnl::error(dnnl_invalid_arguments, rule.c_str());
  ConvGeometry g;
  if (conv.group > 1) {
    g.wdims = {conv.group, ws[0] / conv.group, ws[1]};
    g.wdims.insert(g.wdims.end(), ws.begin() + 2, ws.end());
  } else {
    g.wdims = Dims(ws);
  }
  g.strides.assign(win.strides.begin(), win.strides.end());
  for (int64_t d : win.dilations) g.dilations.push_back(d - 1);
  g.pad_begin.assign(win.pad_begin.begin(), win.pad_begin.end());
  g.pad_end.assign(win.pad_end.begin(), win.pad_end.end());
  return g;
}

dnnl::memory::desc ConvGeometry::PlainWeights(const Shape& ws, int64_t group,
                                              dnnl::memory::data_type dt) const {
  if (group <= 1) return PlainDesc(ws, dt);
  return dnnl::memory::desc(wdims, dt,
                            ws.size() == 3   ? dnnl::memory::format_tag::goiw
                            : ws.size() == 4 ? dnnl::memory::format_tag::goihw
                                             : dnnl::memory::format_tag::goidhw);
}

void StageResidual(const Tensor& z, Tensor* out, const dnnl::memory::desc& z_desc,
                   const dnnl::memory::desc& dst, const dnnl::reorder& reorder) {
  if (z.raw() == out->raw()) return;  // planned in place: the sum post-op reads it there
  if (z_desc == dst) {
    std::memcpy(out->raw(), z.raw(), dst.get_size());
    return;
  }
  RunMemory zm(z_desc, z.raw()), zdst(dst, out->raw());
  Execute(reorder, {{DNNL_ARG_FROM, zm.get()}, {DNNL_ARG_TO, zdst.get()}});
}

bool Int8Vnni() {
  const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
  return isa == dnnl::cpu_isa::avx2_vnni || isa == dnnl::cpu_isa::avx512_core_vnni ||
         isa == dnnl::cpu_isa::avx512_core_bf16 || isa == dnnl::cpu_isa::avx512_core_amx;
}

SplitWeights::SplitWeights(const Tensor& w, const Tensor* zp,
                           const std::function<int64_t(int64_t)>& channel, int32_t limit)
    : centered(static_cast<size_t>(w.numel())) {
  int32_t widest = 0;
  for (int64_t i = 0; i < w.numel(); ++i) {
    const int32_t z =
        zp == nullptr ? 0 : ops::quant::ReadQuant(*zp, zp->numel() > 1 ? channel(i) : 0);
    centered[i] = ops::quant::ReadQuant(w, i) - z;
    widest = std::max(widest, std::abs(centered[i]));
  }
  parts = std::max(1, (widest + limit - 1) / limit);
}

int8_t SplitWeights::Part(int64_t i, int p) const {
  const int32_t v = centered[i], q = v / parts, r = v - q * parts;
  return static_cast<int8_t>(q + (p < std::abs(r) ? (r > 0 ? 1 : -1) : 0));
}

std::string SplitWeights::Variant(const std::string& kind, int parts, const Tensor* zp) {
  std::string variant = kind + "-" + std::to_string(parts);
  if (zp != nullptr)
    variant += "-z" + std::to_string(std::hash<std::string_view>{}(
                          std::string_view(static_cast<const char*>(zp->raw()), zp->bytes())));
  return variant;
}

Tensor HalvedInt8(const Tensor& w) {
  Tensor halved = Tensor::Empty(DataType::kInt8, w.shape());
  const int8_t* src = w.data<int8_t>();
  int8_t* dst = halved.data<int8_t>();
  for (int64_t i = 0; i < w.numel(); ++i)
    dst[i] = static_cast<int8_t>(std::nearbyint(static_cast<float>(src[i]) * 0.5f));
  return halved;
}

bool Bf16Supported() {
  const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
  return isa == dnnl::cpu_isa::avx512_core_bf16 || isa == dnnl::cpu_isa::avx512_core_amx;
}

dnnl::memory::data_type ComputeType(Precision precision) {
  return precision == Precision::kBf16 && Bf16Supported() ? dnnl::memory::data_type::bf16
                                                          : dnnl::memory::data_type::f32;
}

bool AllFloat(const std::vector<runtime::TensorInfo>& infos, std::initializer_list<size_t> idx) {
  for (size_t i : idx)
    if (i >= infos.size() || infos[i].dtype != DataType::kFloat) return false;
  return true;
}

size_t ReorderedBytes(const dnnl::reorder& reorder, const dnnl::memory::desc& want) {
  return reorder ? (want.get_size() + 63) / 64 * 64 : 0;
}

Status OneDnnError(const dnnl::error& e, const std::string& what) {
  const StatusCode code =
      e.status == dnnl_out_of_memory ? StatusCode::kOutOfMemory : StatusCode::kInternal;
  return Status(code, "oneDNN failed in " + what + ": " + e.what() + " (status " +
                          std::to_string(static_cast<int>(e.status)) + ")");
}

namespace {
// A memory object over `data` on the CPU engine, through the C API; throws dnnl::error.
dnnl_memory_t CreateMemory(const dnnl::memory::desc& desc, const void* data) {
  dnnl_memory_t memory = nullptr;
  const dnnl_status_t st =
      dnnl_memory_create(&memory, &desc.data, Engine().get(), const_cast<void*>(data));
  if (st != dnnl_success) throw dnnl::error(st, "could not create a memory object");
  return memory;
}
}  // namespace

RunMemory::RunMemory(const dnnl::memory::desc& desc, const void* data)
    : memory_(CreateMemory(desc, data)) {}

RunMemory::~RunMemory() {
  if (memory_ != nullptr) dnnl_memory_destroy(memory_);
}

RunMemoryList::~RunMemoryList() {
  for (size_t i = 0; i < count_; ++i) dnnl_memory_destroy(memories_[i]);
}

dnnl_memory_t RunMemoryList::Add(const dnnl::memory::desc& desc, const void* data) {
  if (count_ == kMax) throw dnnl::error(dnnl_invalid_arguments, "more than 64 memory objects");
  memories_[count_] = CreateMemory(desc, data);
  return memories_[count_++];
}

void Execute(const dnnl::primitive& prim, const ExecArg* args, size_t count) {
  constexpr size_t kMaxArgs = 64;
  if (count > kMaxArgs) throw dnnl::error(dnnl_invalid_arguments, "more than 64 arguments");
  dnnl_exec_arg_t list[kMaxArgs];
  int n = 0;
  for (size_t i = 0; i < count; ++i)
    if (args[i].memory != nullptr) list[n++] = {args[i].arg, args[i].memory};
  const dnnl_status_t st = dnnl_primitive_execute(prim.get(), ThreadStream().get(), n, list);
  if (st != dnnl_success) throw dnnl::error(st, "could not execute a primitive");
}

const void* Int8AsUint8(const void* src, size_t bytes, void* dst) {
  const uint8_t* from = static_cast<const uint8_t*>(src);
  uint8_t* to = static_cast<uint8_t*>(dst);
  for (size_t i = 0; i < bytes; ++i) to[i] = from[i] ^ 0x80u;
  return dst;
}

const void* InputAs(const dnnl::reorder& reorder, const dnnl::memory::desc& have,
                    const dnnl::memory::desc& want, const void* data, void* scratch) {
  if (!reorder) return data;
  RunMemory src(have, data), converted(want, scratch);
  Execute(reorder, {{DNNL_ARG_FROM, src.get()}, {DNNL_ARG_TO, converted.get()}});
  return scratch;
}

namespace {
// A memory descriptor's bytes (oneDNN 2.x: a plain C struct, zero-initialised by its
// constructors): equal layouts give equal keys.
std::string DescKey(const dnnl::memory::desc& d) {
  return std::string(reinterpret_cast<const char*>(&d.data), sizeof(d.data));
}
}  // namespace

dnnl::memory PackWeights(const dnnl::memory::desc& from, const Tensor& source,
                         const dnnl::memory::desc& to, Tensor* storage, runtime::WeightCache* cache,
                         const Tensor* transformed, const std::string& variant) {
  auto pack = [&]() -> StatusOr<Tensor> {
    Tensor t = Tensor::Empty(DataType::kUInt8, {static_cast<int64_t>(to.get_size())});
    dnnl::memory packed(to, Engine(), t.raw());
    const Tensor& data = transformed != nullptr ? *transformed : source;
    dnnl::memory src(from, Engine(), const_cast<void*>(data.raw()));
    dnnl::reorder(src, packed).execute(ThreadStream(), src, packed);
    ThreadStream().wait();
    return t;
  };
  StatusOr<Tensor> t =
      cache ? cache->GetOrPack(source, DescKey(from) + DescKey(to) + variant, pack) : pack();
  if (!t.ok()) throw dnnl::error(dnnl_runtime_error, t.status().message().c_str());
  *storage = *t;
  return dnnl::memory(to, Engine(), storage->raw());
}

void ExecuteWeighted(const dnnl::primitive& prim, const RunMemory& src, const dnnl::memory& weights,
                     const dnnl::memory& bias, const RunMemory& dst, const RunMemory& scratchpad) {
  Execute(prim, {{DNNL_ARG_SRC, src.get()},
                 {DNNL_ARG_WEIGHTS, weights.get(true)},
                 {DNNL_ARG_BIAS, bias.get(true)},
                 {DNNL_ARG_DST, dst.get()},
                 {DNNL_ARG_SCRATCHPAD, scratchpad.get()}});
  ThreadStream().wait();
}

std::string DenseFloatInput(const std::vector<runtime::TensorInfo>& in) {
  if (!AllFloat(in, {0})) return "needs float32 input";
  const Shape& xs = in[0].shape;
  if (xs.empty() || xs.size() > 12) return "rank must be 1..12";
  for (int64_t d : xs)
    if (d <= 0) return "empty input";
  return "";
}

Status ExecuteSrcDst(const ir::Node& node, const dnnl::primitive& prim,
                     const dnnl::memory::desc& scratchpad, const dnnl::memory::desc& src,
                     const dnnl::memory::desc& dst, const ir::ComputeContext& ctx) {
  return Guard(node, [&] {
    RunMemory s(src, ctx.in(0).raw()), d(dst, ctx.out(0).raw()), sp(scratchpad, ctx.scratch);
    Execute(prim,
            {{DNNL_ARG_SRC, s.get()}, {DNNL_ARG_DST, d.get()}, {DNNL_ARG_SCRATCHPAD, sp.get()}});
    ThreadStream().wait();
  });
}

__attribute__((target_clones("default", "avx2", "arch=x86-64-v4"))) void GatherTaps(
    const float* s, const int32_t* off, const float* wt, int taps, int64_t block, int64_t count,
    float* out) {
  for (int64_t p = 0; p < count; ++p) out[p] = wt[p] * s[off[p]];
  for (int t = 1; t < taps; ++t) {
    const int32_t* o = off + t * block;
    const float* w = wt + t * block;
    for (int64_t p = 0; p < count; ++p) out[p] += w[p] * s[o[p]];
  }
}

dnnl::memory::desc DstDescFor(const Shape& ys, dnnl::memory::data_type dt) {
  if (ys.size() >= 3 && ys[1] < 8) return PlainDesc(ys, dt);
  return dnnl::memory::desc(Dims(ys), dt, dnnl::memory::format_tag::any);
}

__attribute__((target_clones("default", "avx2", "arch=x86-64-v4"))) void BlendRows(
    const float* const* rows, const float* wt, int taps, int64_t n, float* out) {
  const float* r0 = rows[0];
  const float w0 = wt[0];
  for (int64_t j = 0; j < n; ++j) out[j] = w0 * r0[j];
  for (int t = 1; t < taps; ++t) {
    const float* r = rows[t];
    const float w = wt[t];
    for (int64_t j = 0; j < n; ++j) out[j] += w * r[j];
  }
}

}  // namespace kiln::backends::cpu
