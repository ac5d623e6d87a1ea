// The kernel harness (kiln/diagnostics.h, CheckKernels): every registered kernel of a backend on
// its op's own cases (ops/op_cases.h), against the op's reference kernel.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/half.h"
#include "ir/op.h"
#include "kiln/diagnostics.h"
#include "ops/common.h"
#include "ops/op_cases.h"
#include "runtime/body_planner.h"
#include "runtime/device.h"
#include "runtime/kernel.h"

namespace kiln {
namespace {

using runtime::KernelDef;
constexpr size_t kGuard = 64;               // guard bytes after every output and scratch buffer
constexpr unsigned char kGuardByte = 0x5A;  // what they hold
constexpr unsigned char kFillByte = 0xA5;   // non-float outputs are prefilled with it

std::string OpName(const KernelDef& d) {
  return d.domain.empty() ? d.op_type : d.domain + "." + d.op_type;
}

bool IsFloat(DataType t) {
  return t == DataType::kFloat || t == DataType::kFloat16 || t == DataType::kDouble ||
         t == DataType::kBFloat16;
}

// float32 inputs at `which` (or every non-constant float32 input for kAllInputs) as float16.
std::vector<ops::CaseInput> HalveInputs(const std::vector<ops::CaseInput>& in,
                                        const std::vector<int>& which) {
  std::vector<ops::CaseInput> out = in;
  for (size_t i = 0; i < in.size(); ++i) {
    const bool all = !which.empty() && which[0] == runtime::kAllInputs;
    bool listed = all && !in[i].constant;
    for (int w : which) listed = listed || w == static_cast<int>(i);
    if (!listed || in[i].value.dtype() != DataType::kFloat) continue;
    Tensor h = Tensor::Empty(DataType::kFloat16, in[i].value.shape());
    for (int64_t e = 0; e < h.numel(); ++e)
      h.data<uint16_t>()[e] = DoubleToHalf(in[i].value.data<float>()[e]);
    out[i].value = h;
  }
  return out;
}

// The reference kernel's view of (possibly float16) inputs: float16 read back as float32.
std::vector<ops::CaseInput> WidenInputs(const std::vector<ops::CaseInput>& in) {
  std::vector<ops::CaseInput> out = in;
  for (auto& x : out) {
    if (x.value.dtype() != DataType::kFloat16) continue;
    Tensor f = Tensor::Empty(DataType::kFloat, x.value.shape());
    for (int64_t e = 0; e < f.numel(); ++e)
      f.data<float>()[e] = HalfToFloat(x.value.data<uint16_t>()[e]);
    x.value = f;
  }
  return out;
}

// Host or device memory with guard bytes after `bytes`, prefilled.
struct Buffer {
  std::shared_ptr<void> mem;
  size_t bytes = 0;
};

StatusOr<Buffer> MakeBuffer(runtime::Device* device, size_t bytes, DataType fill_dtype,
                            const void* init) {
  std::vector<unsigned char> host(bytes + kGuard, kFillByte);
  if (init != nullptr) {
    if (bytes > 0) std::memcpy(host.data(), init, bytes);
  } else if (fill_dtype == DataType::kFloat) {
    const uint32_t nan = 0x7FC00000u;
    for (size_t i = 0; i + 4 <= bytes; i += 4) std::memcpy(host.data() + i, &nan, 4);
  } else if (fill_dtype == DataType::kFloat16) {
    const uint16_t nan = 0x7E00u;
    for (size_t i = 0; i + 2 <= bytes; i += 2) std::memcpy(host.data() + i, &nan, 2);
  }
  std::memset(host.data() + bytes, kGuardByte, kGuard);
  Buffer b;
  b.bytes = bytes;
  if (device == nullptr) {
    KILN_ASSIGN_OR_RETURN(b.mem, runtime::AlignedHostMemory(bytes + kGuard));
    std::memcpy(b.mem.get(), host.data(), host.size());
  } else {
    KILN_ASSIGN_OR_RETURN(b.mem, device->Allocate(bytes + kGuard));
    KILN_RETURN_IF_ERROR(device->CopyToDevice(b.mem.get(), host.data(), host.size()));
  }
  return b;
}

bool GuardIntact(const unsigned char* p, size_t bytes) {
  for (size_t i = 0; i < kGuard; ++i)
    if (p[bytes + i] != kGuardByte) return false;
  return true;
}

// Compares one output; appends to `why` and returns false on a mismatch.
bool CompareOutput(const Tensor& got, const Tensor& want, const ops::OpCase& c, bool half,
                   double* max_err, std::string* why, size_t o) {
  if (got.shape() != want.shape()) {
    *why += "output " + std::to_string(o) + " has another shape; ";
    return false;
  }
  const double atol = half ? std::max(c.atol, 1e-2) : c.atol;
  const double rtol = half ? std::max(c.rtol, 1e-2) : c.rtol;
  int64_t bad = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double g = ops::ReadScalarAsDouble(got, i), w = ops::ReadScalarAsDouble(want, i);
    bool ok;
    if (IsFloat(want.dtype()) || IsFloat(got.dtype())) {
      // Equal values (infinities included) match; NaN matches NaN.
      ok = std::isnan(w) ? std::isnan(g) : g == w || std::fabs(g - w) <= atol + rtol * std::fabs(w);
      if (!std::isnan(g) && !std::isnan(w) && g != w)
        *max_err = std::max(*max_err, std::fabs(g - w));
    } else {  // integers and bool: within atol (exact by default; quantized outputs may say 1)
      ok = std::fabs(g - w) <= c.atol;
      *max_err = std::max(*max_err, std::fabs(g - w));
    }
    if (!ok && bad++ < 3)
      *why += "output " + std::to_string(o) + "[" + std::to_string(i) + "]: " + std::to_string(g) +
              (std::isnan(g) ? " (never written)" : "") + " vs reference " + std::to_string(w) +
              "; ";
  }
  if (bad > 3)
    *why += std::to_string(bad) + " elements differ in output " + std::to_string(o) + "; ";
  return bad == 0;
}

struct KernelRun {
  std::vector<Tensor> outputs;  // plain host copies
  std::string variant;
};

// Input buffers (device copies or host copies), and a check that host inputs are unchanged.
StatusOr<std::vector<Buffer>> UploadInputs(runtime::Device* device,
                                           const std::vector<ops::CaseInput>& in) {
  std::vector<Buffer> bufs;
  for (const auto& x : in) {
    if (!x.value.defined()) {
      bufs.emplace_back();
      continue;
    }
    KILN_ASSIGN_OR_RETURN(Buffer b,
                          MakeBuffer(device, x.value.bytes(), x.value.dtype(), x.value.raw()));
    bufs.push_back(std::move(b));
  }
  return bufs;
}

struct Prepared {
  std::unique_ptr<runtime::Kernel> kernel;
  runtime::PrepareContext pc;
};

StatusOr<Prepared> PrepareKernel(const KernelDef& def, const ir::Node& node, const ir::Op& op,
                                 const std::vector<ops::CaseInput>& in, const ops::CaseOutputs& inf,
                                 runtime::Device* device) {
  Prepared p;
  p.kernel = def.create(node, op);
  if (p.kernel == nullptr) return Internal("create returned nothing");
  for (const auto& x : in) {
    p.pc.inputs.push_back({x.value.dtype(), x.value.shape(), nullptr});
    p.pc.constants.push_back(x.constant && x.value.defined() ? &x.value : nullptr);
  }
  for (size_t o = 0; o < inf.dtypes.size(); ++o)
    p.pc.outputs.push_back({inf.dtypes[o], inf.shapes[o], nullptr});
  p.pc.num_threads = 2;
  p.pc.device = device;
  // Control-flow kernels get their bodies planned as a session's planner would (two threads).
  static const std::unique_ptr<runtime::BodyPlanner> bodies = [] {
    SessionOptions options;
    options.num_threads = 2;
    return runtime::NewBodyPlanner(options);
  }();
  p.pc.bodies = bodies.get();
  KILN_RETURN_IF_ERROR(p.kernel->Prepare(&p.pc));
  return p;
}

// Runs a prepared kernel once on the case's inputs; fills `why` for guard and input damage.
StatusOr<KernelRun> RunKernel(const Prepared& p, const std::vector<ops::CaseInput>& in,
                              runtime::Device* device, std::string* why) {
  KILN_ASSIGN_OR_RETURN(std::vector<Buffer> in_bufs, UploadInputs(device, in));
  std::vector<Tensor> in_views(in.size()), out_views(p.pc.outputs.size());
  std::vector<Buffer> out_bufs;
  ir::ComputeContext ctx;
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i].value.defined())
      in_views[i] = Tensor::View(in[i].value.dtype(), in[i].value.shape(), in_bufs[i].mem.get());
    ctx.inputs.push_back(in[i].value.defined() ? &in_views[i] : nullptr);
  }
  for (size_t o = 0; o < p.pc.outputs.size(); ++o) {
    const runtime::TensorInfo& info = p.pc.outputs[o];
    if (info.dtype == DataType::kUndefined) {  // the kernel assigns it (control flow, NMS)
      if (device != nullptr) return Unsupported("self-shaped outputs on a device");
      out_bufs.emplace_back();
      ctx.outputs.push_back(&out_views[o]);
      continue;
    }
    const size_t bytes =
        info.layout ? info.layout->bytes()
                    : static_cast<size_t>(NumElements(info.shape)) * DataTypeSize(info.dtype);
    KILN_ASSIGN_OR_RETURN(Buffer b, MakeBuffer(device, bytes, info.dtype, nullptr));
    out_views[o] = Tensor::View(info.dtype, info.shape, b.mem.get());
    out_bufs.push_back(std::move(b));
    ctx.outputs.push_back(&out_views[o]);
  }
  const size_t scratch = p.kernel->ScratchBytes();
  std::unique_ptr<runtime::DeviceRun> run;
  Buffer scratch_buf;
  if (device != nullptr) {
    KILN_ASSIGN_OR_RETURN(run, device->NewRun(scratch + kGuard, 0, 0, false));
    KILN_RETURN_IF_ERROR(run->Begin());
    KILN_RETURN_IF_ERROR(run->StartCompute());  // the inputs were copied synchronously above
    ctx.stream = run->stream();
    ctx.scratch = scratch > 0 ? run->arena() : nullptr;
  } else if (scratch > 0) {
    KILN_ASSIGN_OR_RETURN(scratch_buf, MakeBuffer(nullptr, scratch, DataType::kUndefined, nullptr));
    ctx.scratch = scratch_buf.mem.get();
  }
  KILN_RETURN_IF_ERROR(p.kernel->Run(ctx));
  // Host copies of the outputs with their guards.
  std::vector<std::vector<unsigned char>> host(out_bufs.size());
  for (size_t o = 0; o < out_bufs.size(); ++o) {
    if (!out_bufs[o].mem) continue;
    host[o].resize(out_bufs[o].bytes + kGuard);
    if (device == nullptr)
      std::memcpy(host[o].data(), out_bufs[o].mem.get(), host[o].size());
    else
      KILN_RETURN_IF_ERROR(run->Download(out_bufs[o].mem.get(), host[o].data(), host[o].size()));
  }
  std::vector<std::vector<unsigned char>> inputs_after(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (!in[i].value.defined()) continue;
    inputs_after[i].resize(in[i].value.bytes());
    if (inputs_after[i].empty()) continue;  // an empty input (memcpy takes no null pointer)
    if (device == nullptr)
      std::memcpy(inputs_after[i].data(), in_bufs[i].mem.get(), inputs_after[i].size());
    else
      KILN_RETURN_IF_ERROR(
          run->Download(in_bufs[i].mem.get(), inputs_after[i].data(), inputs_after[i].size()));
  }
  if (run) KILN_RETURN_IF_ERROR(run->Finish());
  for (size_t i = 0; i < in.size(); ++i)
    if (in[i].value.defined() && in[i].value.bytes() > 0 &&
        std::memcmp(inputs_after[i].data(), in[i].value.raw(), in[i].value.bytes()) != 0)
      *why += "changed input " + std::to_string(i) + "; ";
  KernelRun r;
  r.variant = p.kernel->variant();
  for (size_t o = 0; o < host.size(); ++o) {
    if (!out_bufs[o].mem) {
      r.outputs.push_back(out_views[o].defined() ? out_views[o].Clone() : Tensor());
      continue;
    }
    if (!GuardIntact(host[o].data(), out_bufs[o].bytes))
      *why += "wrote past the end of output " + std::to_string(o) + "; ";
    const runtime::TensorInfo& info = p.pc.outputs[o];
    Tensor plain = Tensor::Empty(info.dtype, info.shape);
    if (info.layout)
      KILN_RETURN_IF_ERROR(info.layout->ToPlain(host[o].data(), plain.raw()));
    else if (plain.bytes() > 0)
      std::memcpy(plain.raw(), host[o].data(), plain.bytes());
    r.outputs.push_back(std::move(plain));
  }
  if (device == nullptr && scratch > 0 &&
      !GuardIntact(static_cast<unsigned char*>(scratch_buf.mem.get()), scratch))
    *why += "wrote past the end of its scratch; ";
  return r;
}

// Whether the kernel takes the case; `reason` says why not.
bool Accepts(const KernelDef& def, const ir::Node& node, const ir::Op& op,
             const std::vector<ops::CaseInput>& in, std::string* reason) {
  for (int i : def.constant_inputs)
    if (node.HasInput(i) && !in[i].constant) {
      *reason = "input " + std::to_string(i) + " must be constant";
      return false;
    }
  if (!def.supports) return true;
  std::vector<runtime::TensorInfo> infos;
  for (const auto& x : in) infos.push_back({x.value.dtype(), x.value.shape(), nullptr});
  runtime::KernelSupport s = def.supports(node, op, infos);
  *reason = s.reason;
  return s.ok || s.preference;  // a kernel passed over for speed here must still be right
}

// One kernel on one case (in float16 when `half`). Returns false when the kernel declines it.
bool CheckCase(const KernelDef& def, const ops::OpCase& c, bool half, runtime::Device* device,
               KernelCaseResult* r, std::string* declined) {
  r->kernel = def.name;
  r->op = OpName(def);
  r->case_name = c.name + (half ? " (float16)" : "");
  std::vector<ops::CaseInput> in = half ? HalveInputs(c.inputs, def.half_inputs) : c.inputs;
  const ir::Node node = ops::CaseNode(def.domain, def.op_type, c);
  const ir::OpDef* od = ir::OpRegistry::Global().Find(def.domain, def.op_type, c.opset);
  if (od == nullptr) {
    r->detail = "the case's opset has no op definition";
    return true;
  }
  auto op = od->create(node);
  if (!op.ok()) {
    r->detail = "the case is invalid: " + op.status().ToString();
    return true;
  }
  if (!Accepts(def, node, **op, in, declined)) return false;
  // The reference computes float32: a float16 run's inputs are read back as float32 for it.
  const std::vector<ops::CaseInput> ref_in = half ? WidenInputs(in) : in;
  auto inf = ops::InferCase(node, **op, ref_in);
  StatusOr<std::vector<Tensor>> want = inf.status();
  if (inf.ok()) want = ops::ReferenceOutputs(**op, ref_in, *inf);
  if (!want.ok()) {
    r->detail = "the reference fails on the case: " + want.status().ToString();
    return true;
  }
  auto kin = ops::InferCase(node, **op, in);
  if (!kin.ok()) {
    r->detail = "inference fails: " + kin.status().ToString();
    return true;
  }
  // As the float16 rewrite does (runtime/half_values.h): a node reading float16 data writes its
  // float outputs as float16, where the op's inference describes the float32 reference.
  bool any_half = false;
  for (const auto& x : in) any_half = any_half || x.value.dtype() == DataType::kFloat16;
  for (DataType& d : kin->dtypes)
    if (any_half && d == DataType::kFloat) d = DataType::kFloat16;
  auto prepared = PrepareKernel(def, node, **op, in, *kin, device);
  // Unsupported from Prepare is a decline (the planner then tries the next kernel): a kernel may
  // judge constants there (scales, sizes) that Supports() does not see.
  if (!prepared.ok() && prepared.status().code() == StatusCode::kUnsupported) {
    *declined = "Prepare: " + prepared.status().message();
    return false;
  }
  if (!prepared.ok()) {
    r->detail = "Prepare failed: " + prepared.status().ToString();
    return true;
  }
  std::string why;
  auto got = RunKernel(*prepared, in, device, &why);
  if (!got.ok()) {
    r->detail = "Run failed: " + got.status().ToString();
    return true;
  }
  if (!got->variant.empty()) r->kernel += "[" + got->variant + "]";
  bool ok = why.empty() && got->outputs.size() == want->size();
  for (size_t o = 0; o < want->size() && o < got->outputs.size(); ++o)
    ok = CompareOutput(got->outputs[o], (*want)[o], c, half, &r->max_err, &why, o) && ok;
  r->ok = ok;
  r->detail = why;
  return true;
}

void CheckOneKernel(const KernelDef& def, runtime::Device* device, KernelCheckReport* report) {
  if (!ops::HasCases(def.domain, def.op_type)) {
    report->without_cases.push_back(def.name + " (op " + OpName(def) + ")");
    return;
  }
  std::string declines;
  size_t ran = 0;
  for (const ops::OpCase& c : ops::CasesFor(def.domain, def.op_type)) {
    if (c.opset < def.since || c.opset > def.until) continue;
    for (bool half : {false, true}) {
      if (half && def.half_inputs.empty()) continue;
      KernelCaseResult r;
      std::string declined;
      if (!CheckCase(def, c, half, device, &r, &declined)) {
        if (!half) declines += "\n    " + c.name + ": " + declined;
        continue;
      }
      ++ran;
      report->results.push_back(std::move(r));
    }
  }
  if (ran == 0) report->never_ran.push_back(def.name + " declined every case:" + declines);
}

// A plugin backend's kernels register when it is opened (the CPU's are built in).
Status EnsureKernelsRegistered(Backend backend) {
  if (backend == Backend::kCpu || !runtime::KernelRegistry::Global().All(backend).empty())
    return OkStatus();
  return LoadBackend(backend);
}

}  // namespace

bool KernelCheckReport::ok() const {
  if (!without_cases.empty() || !never_ran.empty()) return false;
  for (const auto& r : results)
    if (!r.ok) return false;
  return true;
}

StatusOr<KernelCheckReport> CheckKernels(Backend backend, const std::vector<std::string>& only) {
  std::shared_ptr<runtime::Device> device;
  KILN_RETURN_IF_ERROR(EnsureKernelsRegistered(backend));
  if (backend != Backend::kCpu) {
    KILN_ASSIGN_OR_RETURN(device, runtime::OpenDevice(backend, 0));
  }
  KernelCheckReport report;
  const std::set<std::string> wanted(only.begin(), only.end());
  for (const KernelDef* def : runtime::KernelRegistry::Global().All(backend)) {
    if (!wanted.empty() && !wanted.count(def->name)) continue;
    ++report.kernels;
    if (device) KILN_RETURN_IF_ERROR(device->MakeCurrent());
    CheckOneKernel(*def, device.get(), &report);
  }
  return report;
}

StatusOr<std::vector<std::string>> KernelsWithoutCases(Backend backend) {
  KILN_RETURN_IF_ERROR(EnsureKernelsRegistered(backend));
  std::vector<std::string> out;
  for (const KernelDef* def : runtime::KernelRegistry::Global().All(backend))
    if (!ops::HasCases(def->domain, def->op_type)) out.push_back(def->name);
  return out;
}

}  // namespace kiln
