// The device half of the execution plan, run on this CPU-only machine through fake devices whose
// "device memory" is host memory: the order of uploads, compute and downloads, constants
// uploaded once per plan, graph inputs placed in the arena, run contexts pooled (no allocation in
// a warm run), concurrent runs on separate contexts, and the all-at-once report of nodes a strict
// device has no kernel for. The CUDA device implements the same interface
// (src/backends/cuda/cuda_device.cc).
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <thread>

#include "core/half.h"
#include "core/test_backend.h"
#include "kiln/session.h"
#include "model_builder.h"
#include "onnx/onnx_loader.h"
#include "runtime/device.h"
#include "runtime/half_values.h"
#include "runtime/kernel.h"

namespace kiln {
namespace {

using runtime::Device;
using runtime::DeviceRun;
using testing::ModelBuilder;
constexpr int kF32 = onnx::TensorProto::FLOAT;

// The fake devices' backends (core/test_backend.h): values beyond kCpu and kCuda, named for
// kernel names and messages ("fakestrict.relu.test", "no fakestrict kernel supports it").
const Backend kFakeDev = TestBackend("fakedev");        // host-accessible: reference fallback
const Backend kFakeStrict = TestBackend("fakestrict");  // every node needs a kernel
const Backend kFakeGraph = TestBackend("fakegraph");    // strict, with graph capture
const Backend kFakeHalf = TestBackend("fakehalf");      // host-accessible, float16 kernels

// Shared by the fake devices of one test: what they did, in order.
struct FakeLog {
  std::mutex mu;
  std::vector<std::string> events;
  std::atomic<int> allocations{0}, runs{0};
  void Add(std::string e) {
    std::lock_guard<std::mutex> lock(mu);
    events.push_back(std::move(e));
  }
  std::vector<std::string> Take() {
    std::lock_guard<std::mutex> lock(mu);
    return std::exchange(events, {});
  }
};
FakeLog& Log() {
  static FakeLog log;
  return log;
}

std::shared_ptr<void> HostAlloc(size_t bytes) {
  ++Log().allocations;
  return std::shared_ptr<void>(::operator new(bytes), [](void* p) { ::operator delete(p); });
}

// The profiler ranges the steps opened (DeviceRun::BeginRange), and how many are open now.
struct RangeLog {
  std::mutex mu;  // concurrent runs open ranges too
  std::vector<std::string> names;
  int open = 0;
};
RangeLog& Ranges() {
  static RangeLog r;
  return r;
}

// Downloads land in the caller's tensors only at Finish(), as with a real asynchronous copy.
class FakeRun final : public DeviceRun {
 public:
  explicit FakeRun(size_t arena_bytes) : arena_(HostAlloc(arena_bytes)) {}
  Status Begin() override {
    pending_.clear();
    return OkStatus();
  }
  void* arena() override { return arena_.get(); }
  void* stream() override { return this; }
  Status Upload(const void* src, void* dst, size_t bytes) override {
    std::memcpy(dst, src, bytes);
    Log().Add("upload " + std::to_string(bytes));
    return OkStatus();
  }
  Status StartCompute() override {
    Log().Add("start");
    return OkStatus();
  }
  Status Download(const void* src, void* dst, size_t bytes) override {
    pending_.push_back({src, dst, bytes});
    Log().Add("download " + std::to_string(bytes));
    return OkStatus();
  }
  Status Finish() override {
    for (const auto& p : pending_) std::memcpy(p.dst, p.src, p.bytes);
    pending_.clear();
    Log().Add("finish");
    return OkStatus();
  }
  runtime::DeviceTimings LastTimings() const override { return {1, 2, 3}; }
  void BeginRange(const char* name) override {
    std::lock_guard<std::mutex> lock(Ranges().mu);
    Ranges().names.push_back(name);
    ++Ranges().open;
  }
  void EndRange() override {
    std::lock_guard<std::mutex> lock(Ranges().mu);
    --Ranges().open;
  }

  // Capture is recorded in the log; the fake cannot re-run recorded work, so Replay() only logs
  // (tests check the sequencing and that replayed runs launch no kernels).
  explicit FakeRun(size_t arena_bytes, bool capture) : FakeRun(arena_bytes) { capture_ = capture; }
  bool SupportsCapture() const override { return capture_; }
  bool captured() const override { return captured_; }
  Status BeginCapture() override {
    Log().Add("begin capture");
    return OkStatus();
  }
  Status EndCapture() override {
    captured_ = true;
    Log().Add("end capture");
    return OkStatus();
  }
  Status Replay() override {
    Log().Add("replay");
    return OkStatus();
  }

 private:
  struct Pending {
    const void* src;
    void* dst;
    size_t bytes;
  };
  std::shared_ptr<void> arena_;
  std::vector<Pending> pending_;
  bool capture_ = false, captured_ = false;
};

class FakeDevice final : public Device {
 public:
  explicit FakeDevice(bool host_accessible, bool capture = false)
      : host_accessible_(host_accessible), capture_(capture) {}
  std::string Describe() const override { return "fake device"; }
  DeviceStartup Startup() const override {
    DeviceStartup s;
    s.context_ms = 1.5;
    s.modules = 3;
    return s;
  }
  bool host_accessible() const override { return host_accessible_; }
  StatusOr<std::shared_ptr<void>> Allocate(size_t bytes) override { return HostAlloc(bytes); }
  StatusOr<std::shared_ptr<void>> AllocateHost(size_t bytes) override {
    Log().Add("host alloc " + std::to_string(bytes));
    return HostAlloc(bytes);
  }
  Status CopyToDevice(void* dst, const void* src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
    Log().Add("constant " + std::to_string(bytes));
    return OkStatus();
  }
  StatusOr<std::unique_ptr<DeviceRun>> NewRun(size_t arena_bytes, size_t, size_t, bool) override {
    ++Log().runs;
    return std::unique_ptr<DeviceRun>(new FakeRun(arena_bytes, capture_));
  }

 private:
  bool host_accessible_, capture_;
};

StatusOr<std::shared_ptr<Device>> MakeLenient(int) {
  return std::shared_ptr<Device>(new FakeDevice(true));
}
StatusOr<std::shared_ptr<Device>> MakeStrict(int) {
  return std::shared_ptr<Device>(new FakeDevice(false));
}
runtime::DeviceRegistrar lenient(kFakeDev, &MakeLenient);
StatusOr<std::shared_ptr<Device>> MakeGraph(int) {
  return std::shared_ptr<Device>(new FakeDevice(false, true));
}
runtime::DeviceRegistrar strict(kFakeStrict, &MakeStrict);
runtime::DeviceRegistrar graph(kFakeGraph, &MakeGraph);

// A "fakestrict" Relu: runs on the fake device's host memory and records the stream it was given.
std::atomic<void*> relu_stream{nullptr};
std::atomic<int> relu_runs{0};
class StrictRelu final : public runtime::Kernel {
 public:
  Status Run(const ir::ComputeContext& ctx) const override {
    relu_stream = ctx.stream;
    ++relu_runs;
    const float* x = ctx.in(0).data<float>();
    float* y = ctx.out(0).data<float>();
    for (int64_t i = 0; i < ctx.in(0).numel(); ++i) y[i] = x[i] > 0 ? x[i] : 0;
    return OkStatus();
  }
};
KILN_REGISTER_KERNEL(runtime::KernelDef{
    "fakestrict.relu.test",
    "Relu",
    "",
    6,
    ir::kMaxOpset,
    kFakeStrict,
    1,
    nullptr,
    [](const ir::Node&, const ir::Op&) { return std::make_unique<StrictRelu>(); },
    {}});

// Kernels that accept every node in Supports() and refuse it in Prepare (as a kernel judging a
// constant there does): the planner passes them over for the next candidate.
class RefusesInPrepare final : public runtime::Kernel {
 public:
  Status Prepare(runtime::PrepareContext*) override { return Unsupported("not this node"); }
  Status Run(const ir::ComputeContext&) const override { return Internal("never runs"); }
};
KILN_REGISTER_KERNEL(runtime::KernelDef{
    "fakestrict.relu.refuses",
    "Relu",
    "",
    6,
    ir::kMaxOpset,
    kFakeStrict,
    5,
    nullptr,
    [](const ir::Node&, const ir::Op&) { return std::make_unique<RefusesInPrepare>(); },
    {}});
KILN_REGISTER_KERNEL(runtime::KernelDef{
    "fakestrict.mul.refuses",
    "Mul",
    "",
    7,
    ir::kMaxOpset,
    kFakeStrict,
    5,
    nullptr,
    [](const ir::Node&, const ir::Op&) { return std::make_unique<RefusesInPrepare>(); },
    {}});

KILN_REGISTER_KERNEL(runtime::KernelDef{
    "fakegraph.relu.test",
    "Relu",
    "",
    6,
    ir::kMaxOpset,
    kFakeGraph,
    1,
    nullptr,
    [](const ir::Node&, const ir::Op&) { return std::make_unique<StrictRelu>(); },
    {}});

// y = relu(x * w + b) over [N,4]; z = y + b; outputs y, z, the constant b and the input x.
std::string SmallModel() {
  ModelBuilder b;
  b.Input("x", kF32, {-1, 4}).Output("y", kF32, {-1, 4}).Output("z", kF32, {-1, 4});
  b.Output("b", kF32, {4}).Output("x", kF32, {-1, 4});
  b.FloatInit("w", {4}, {1.f, -2.f, 0.5f, 3.f});
  b.FloatInit("b", {4}, {0.25f, 0.5f, -1.f, 2.f});
  b.Node("Mul", {"x", "w"}, {"xw"});
  b.Node("Add", {"xw", "b"}, {"pre"});
  b.Node("Relu", {"pre"}, {"y"});
  b.Node("Add", {"y", "b"}, {"z"});
  return b.Bytes();
}

Tensor Input(int64_t n) {
  Tensor t = Tensor::Empty(DataType::kFloat, {n, 4});
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(i % 7) - 3.f;
  return t;
}

void ExpectSameOutputs(const std::vector<NamedTensor>& got, const std::vector<NamedTensor>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t o = 0; o < got.size(); ++o) {
    ASSERT_EQ(got[o].tensor.shape(), want[o].tensor.shape()) << got[o].name;
    EXPECT_EQ(0, std::memcmp(got[o].tensor.raw(), want[o].tensor.raw(), want[o].tensor.bytes()))
        << got[o].name;
  }
}

// SmallModel on the CPU's reference kernels and on the fake device.
std::pair<StatusOr<std::unique_ptr<Session>>, StatusOr<std::unique_ptr<Session>>> LoadPair() {
  SessionOptions cpu_opts;
  cpu_opts.reference_only = true;
  SessionOptions dev_opts;
  dev_opts.backend = kFakeDev;
  return {Session::LoadFromBytes(SmallModel(), cpu_opts),
          Session::LoadFromBytes(SmallModel(), dev_opts)};
}

TEST(DevicePlanTest, RunsUploadComputeDownloadInOrderAndReusesTheRunContext) {
  auto [cpu, dev] = LoadPair();
  ASSERT_TRUE(cpu.ok() && dev.ok()) << dev.status().ToString();
  EXPECT_EQ((*dev)->device_description(), "fake device");
  // The device's own startup figures come through; a backend linked in (no plugin) has no
  // plugin load time; the CPU has none of them.
  EXPECT_EQ((*dev)->device_startup().context_ms, 1.5);
  EXPECT_EQ((*dev)->device_startup().modules, 3);
  EXPECT_EQ((*dev)->device_startup().plugin_load_ms, -1);
  EXPECT_EQ((*cpu)->device_startup().context_ms, -1);
  EXPECT_EQ((*cpu)->device_startup().module_load_ms, -1);
  std::vector<NamedTensor> in{{"x", Input(3)}}, want, got;
  ASSERT_TRUE((*cpu)->Run(in, &want).ok());
  Log().Take();
  const int allocations_before = Log().allocations;
  RunTimings t;
  Status s = (*dev)->Run(in, &got, &t);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ExpectSameOutputs(got, want);
  EXPECT_TRUE(t.device);
  EXPECT_EQ(t.compute_ms, 2);
  // Plan creation uploads the two constants the steps read; the run uploads x (48 bytes), starts,
  // downloads y and z (the constant b and the input x are copied on the host), finishes.
  const std::vector<std::string> first = {"constant 16", "constant 16", "upload 48", "start",
                                          "download 48", "download 48", "finish"};
  EXPECT_EQ(Log().Take(), first);
  const int allocations_first = Log().allocations;
  EXPECT_EQ(allocations_first - allocations_before, 2);  // constants + one run's arena
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE((*dev)->Run(in, &got).ok());
    ExpectSameOutputs(got, want);
  }
  const std::vector<std::string> warm = {"upload 48", "start", "download 48", "download 48",
                                         "finish"};
  auto events = Log().Take();
  ASSERT_EQ(events.size(), 3 * warm.size());
  EXPECT_EQ(std::vector<std::string>(events.begin(), events.begin() + 5), warm);
  EXPECT_EQ(Log().allocations, allocations_first);  // warm runs allocate no device memory
}

// Each step runs inside a profiler range named "Op node" (NVTX on CUDA), closed after it.
TEST(DevicePlanTest, EachStepRunsInsideANamedProfilerRange) {
  auto [cpu, dev] = LoadPair();
  ASSERT_TRUE(dev.ok()) << dev.status().ToString();
  std::vector<NamedTensor> in{{"x", Input(3)}}, got;
  {
    std::lock_guard<std::mutex> lock(Ranges().mu);
    Ranges().names.clear();
    Ranges().open = 0;
  }
  ASSERT_TRUE((*dev)->Run(in, &got).ok());
  RangeLog& ranges = Ranges();
  std::lock_guard<std::mutex> lock(ranges.mu);
  EXPECT_EQ(ranges.open, 0);
  ASSERT_FALSE(ranges.names.empty());
  const auto summary = (*dev)->DescribePlanSummary(in);
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ(ranges.names.size(), summary->steps.size());
  for (size_t i = 0; i < ranges.names.size(); ++i)
    EXPECT_EQ(ranges.names[i], summary->steps[i].op_type + " " + summary->steps[i].node)
        << "step " << i;
}

// A second input shape makes a second plan; the model's weights are already on the device and
// are not uploaded (or allocated) again. Bound outputs are downloaded straight into the caller's
// buffers.
TEST(DevicePlanTest, PlansShareTheWeightsAndBoundOutputsTakeTheDownload) {
  auto [cpu, dev] = LoadPair();
  ASSERT_TRUE(cpu.ok() && dev.ok()) << dev.status().ToString();
  std::vector<NamedTensor> got;
  ASSERT_TRUE((*dev)->Run({{"x", Input(3)}}, &got).ok());
  EXPECT_EQ((*dev)->stats().device_constant_bytes, 32u);  // w and b
  Log().Take();
  const int allocations = Log().allocations;
  std::vector<NamedTensor> in{{"x", Input(5)}}, want;
  ASSERT_TRUE((*cpu)->Run(in, &want).ok());
  ASSERT_TRUE((*dev)->Run(in, &got).ok());
  ExpectSameOutputs(got, want);
  const std::vector<std::string> second = {"upload 80", "start", "download 80", "download 80",
                                           "finish"};
  EXPECT_EQ(Log().Take(), second);                // no "constant" upload for the new plan
  EXPECT_EQ(Log().allocations - allocations, 1);  // the new plan's run arena only
  EXPECT_EQ((*dev)->stats().plans, 2u);
  EXPECT_EQ((*dev)->stats().device_constant_bytes, 32u);

  std::vector<float> y(20, -1.f), z(20, -1.f);
  std::vector<NamedTensor> bound{{"z", Tensor::View(DataType::kFloat, {5, 4}, z.data())},
                                 {"y", Tensor::View(DataType::kFloat, {5, 4}, y.data())}};
  ASSERT_TRUE((*dev)->RunInto(in, &bound).ok());
  EXPECT_EQ(Log().Take(), second);
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(y[i], want[0].tensor.data<float>()[i]) << i;
    EXPECT_EQ(z[i], want[1].tensor.data<float>()[i]) << i;
  }
}

TEST(DevicePlanTest, ConcurrentRunsUseSeparateContexts) {
  SessionOptions opts;
  opts.backend = kFakeDev;
  auto dev = Session::LoadFromBytes(SmallModel(), opts);
  ASSERT_TRUE(dev.ok());
  std::vector<NamedTensor> want;
  ASSERT_TRUE((*dev)->Run({{"x", Input(64)}}, &want).ok());
  const int runs_before = Log().runs;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k)
    threads.emplace_back([&] {
      for (int i = 0; i < 50; ++i) {
        std::vector<NamedTensor> got;
        if (!(*dev)->Run({{"x", Input(64)}}, &got).ok() ||
            std::memcmp(got[1].tensor.raw(), want[1].tensor.raw(), want[1].tensor.bytes()) != 0)
          ++failures;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures, 0);
  EXPECT_LE(Log().runs - runs_before, 4);  // at most one new context per concurrent run
}

TEST(DevicePlanTest, StrictDeviceReportsEveryNodeWithoutAKernel) {
  SessionOptions opts;
  opts.backend = kFakeStrict;
  auto dev = Session::LoadFromBytes(SmallModel(), opts);
  ASSERT_TRUE(dev.ok());
  std::vector<NamedTensor> got;
  Status s = (*dev)->Run({{"x", Input(2)}}, &got);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  const std::string m = s.ToString();
  EXPECT_NE(m.find("3 unsupported nodes"), std::string::npos) << m;  // Mul and two Adds
  EXPECT_NE(m.find("'Mul1' Mul"), std::string::npos) << m;
  EXPECT_NE(m.find("'Add4' Add"), std::string::npos) << m;
  EXPECT_NE(m.find("no fakestrict kernel supports it"), std::string::npos) << m;
  // Mul's only kernel refused it in Prepare: the reason says so.
  EXPECT_NE(m.find("fakestrict.mul.refuses: its Prepare refused: not this node"), std::string::npos)
      << m;
  EXPECT_EQ(m.find("Relu"), std::string::npos) << m;  // it has a kernel
}

TEST(DevicePlanTest, StrictDeviceKernelRunsOnTheRunsStream) {
  ModelBuilder b;
  b.Input("x", kF32, {2, 4}).Output("y", kF32, {2, 4});
  b.Node("Relu", {"x"}, {"y"});
  SessionOptions opts;
  opts.backend = kFakeStrict;
  auto dev = Session::LoadFromBytes(b.Bytes(), opts);
  ASSERT_TRUE(dev.ok());
  std::vector<NamedTensor> got;
  Status s = (*dev)->Run({{"x", Input(2)}}, &got);
  ASSERT_TRUE(s.ok()) << s.ToString();
  // fakestrict.relu.refuses (priority 5) refused the node in Prepare; the next kernel took it.
  auto plan = (*dev)->DescribePlan({{"x", Input(2)}});
  ASSERT_TRUE(plan.ok());
  EXPECT_NE(plan->find("fakestrict.relu.test"), std::string::npos) << *plan;
  EXPECT_EQ(plan->find("refuses"), std::string::npos) << *plan;
  EXPECT_NE(relu_stream.load(), nullptr);
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(got[0].tensor.data<float>()[i], std::max(0.f, static_cast<float>(i % 7) - 3.f));
}

TEST(DevicePlanTest, GraphCaptureRecordsTheSecondRunAndReplaysAfterwards) {
  ModelBuilder b;
  b.Input("x", kF32, {2, 4}).Output("y", kF32, {2, 4});
  b.Node("Relu", {"x"}, {"y"});
  SessionOptions opts;
  opts.backend = kFakeGraph;
  opts.cuda_graph = true;
  auto dev = Session::LoadFromBytes(b.Bytes(), opts);
  ASSERT_TRUE(dev.ok());
  std::vector<NamedTensor> got;
  Log().Take();
  const int before = relu_runs;
  // Run 1 runs the kernels directly (it creates handles and warms caches); run 2 captures them
  // and replays the capture; runs 3 and 4 only replay: no kernel is launched from the host.
  for (int i = 0; i < 4; ++i) ASSERT_TRUE((*dev)->Run({{"x", Input(2)}}, &got).ok());
  EXPECT_EQ(relu_runs - before, 2);
  const std::vector<std::string> want = {
      "upload 32",   "start",  "download 32", "finish", "upload 32", "start",       "begin capture",
      "end capture", "replay", "download 32", "finish", "upload 32", "start",       "replay",
      "download 32", "finish", "upload 32",   "start",  "replay",    "download 32", "finish"};
  EXPECT_EQ(Log().Take(), want);
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(got[0].tensor.data<float>()[i], std::max(0.f, static_cast<float>(i % 7) - 3.f));

  opts.cuda_graph = false;  // without the option the same device never captures
  auto plain = Session::LoadFromBytes(b.Bytes(), opts);
  ASSERT_TRUE(plain.ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE((*plain)->Run({{"x", Input(2)}}, &got).ok());
  for (const std::string& e : Log().Take()) EXPECT_EQ(e.find("capture"), std::string::npos);
}

TEST(DevicePlanTest, HostBuffersComeFromTheDevice) {
  SessionOptions opts;
  opts.backend = kFakeDev;
  auto dev = Session::LoadFromBytes(SmallModel(), opts);
  auto cpu = Session::LoadFromBytes(SmallModel());
  ASSERT_TRUE(dev.ok() && cpu.ok());
  Log().Take();
  auto d = (*dev)->AllocateHostBuffer(100);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(Log().Take(), std::vector<std::string>{"host alloc 100"});
  auto c = (*cpu)->AllocateHostBuffer(100);  // no device: aligned ordinary memory
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(c->get()) % 64, 0u);
  EXPECT_TRUE(Log().Take().empty());
  // A run whose input lives in such a buffer works like any other.
  Tensor x = Tensor::View(DataType::kFloat, {3, 4}, d->get());
  std::memcpy(x.raw(), Input(3).raw(), x.bytes());
  std::vector<NamedTensor> got, want;
  ASSERT_TRUE((*dev)->Run({{"x", x}}, &got).ok());
  ASSERT_TRUE((*cpu)->Run({{"x", Input(3)}}, &want).ok());
  ExpectSameOutputs(got, want);
}

// "fakehalf": a host-memory device whose Relu and Add take float16 (KernelDef::half_inputs) and
// count the float16 runs; everything else runs on the reference kernels (Mul in float32, the
// inserted Casts). Under precision fp16 the session keeps activations float16 between them.
std::atomic<int> half_runs{0};
float ReadAsFloat(const Tensor& t, int64_t i) {
  return t.dtype() == DataType::kFloat16 ? HalfToFloat(static_cast<const uint16_t*>(t.raw())[i])
                                         : t.data<float>()[i];
}
void WriteFromFloat(Tensor& t, int64_t i, float v) {
  if (t.dtype() == DataType::kFloat16)
    static_cast<uint16_t*>(t.raw())[i] = DoubleToHalf(v);
  else
    t.data<float>()[i] = v;
}
// Relu, or Add with B of A's shape or broadcast along the last dim.
class HalfOrFloat final : public runtime::Kernel {
 public:
  explicit HalfOrFloat(bool add) : add_(add) {}
  Status Run(const ir::ComputeContext& ctx) const override {
    const Tensor& a = ctx.in(0);
    Tensor& y = ctx.out(0);
    if (a.dtype() != y.dtype()) return Internal("input and output dtypes differ");
    if (a.dtype() == DataType::kFloat16) ++half_runs;
    for (int64_t i = 0; i < a.numel(); ++i) {
      float v = ReadAsFloat(a, i);
      if (add_) {
        const Tensor& b = ctx.in(1);
        if (b.dtype() != a.dtype()) return Internal("A and B dtypes differ");
        v += ReadAsFloat(b, b.numel() == a.numel() ? i : i % b.numel());
      }
      WriteFromFloat(y, i, add_ || v > 0 ? v : 0.f);
    }
    return OkStatus();
  }

 private:
  bool add_;
};
runtime::DeviceRegistrar half_device(kFakeHalf, &MakeLenient);
runtime::PrecisionCheckRegistrar half_precision(kFakeHalf, [](Precision p) {
  return p == Precision::kFp32 || p == Precision::kFp16 ? OkStatus() : Unsupported("fp32 or fp16");
});
KILN_REGISTER_KERNEL(runtime::KernelDef{
    "fakehalf.relu.test",
    "Relu",
    "",
    6,
    ir::kMaxOpset,
    kFakeHalf,
    1,
    nullptr,
    [](const ir::Node&, const ir::Op&) { return std::make_unique<HalfOrFloat>(false); },
    {},
    {0}});
KILN_REGISTER_KERNEL(runtime::KernelDef{
    "fakehalf.add.test",
    "Add",
    "",
    7,
    ir::kMaxOpset,
    kFakeHalf,
    1,
    nullptr,
    [](const ir::Node&, const ir::Op&) { return std::make_unique<HalfOrFloat>(true); },
    {},
    {runtime::kAllInputs}});

// GlobalAveragePool in float16 or float32 (its input's dtype; the output must match): its op's
// inference says float, as for Conv, Gemm and the pools, whatever the input.
class HalfOrFloatMean final : public runtime::Kernel {
 public:
  Status Run(const ir::ComputeContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    Tensor& y = ctx.out(0);
    if (x.dtype() != y.dtype())
      return Internal(std::string("input ") + DataTypeName(x.dtype()) + ", output " +
                      DataTypeName(y.dtype()));
    if (x.dtype() == DataType::kFloat16) ++half_runs;
    const int64_t planes = y.numel(), area = x.numel() / std::max<int64_t>(planes, 1);
    for (int64_t p = 0; p < planes; ++p) {
      float sum = 0;
      for (int64_t i = 0; i < area; ++i) sum += ReadAsFloat(x, p * area + i);
      WriteFromFloat(y, p, sum / static_cast<float>(area));
    }
    return OkStatus();
  }
};
KILN_REGISTER_KERNEL(runtime::KernelDef{
    "fakehalf.globalaveragepool.test",
    "GlobalAveragePool",
    "",
    1,
    ir::kMaxOpset,
    kFakeHalf,
    1,
    nullptr,
    [](const ir::Node&, const ir::Op&) { return std::make_unique<HalfOrFloatMean>(); },
    {},
    {0}});

// a = x + b; r = relu(a); m = r * w (no float16 kernel); y = relu(m); z = r + big, whose constant
// is beyond float16's range. Outputs y, z and r.
std::string HalfModel() {
  ModelBuilder b;
  b.Input("x", kF32, {-1, 4}).Output("y", kF32, {-1, 4}).Output("z", kF32, {-1, 4});
  b.Output("r", kF32, {-1, 4});
  b.FloatInit("b", {4}, {0.25f, 0.5f, -1.f, 2.f});
  b.FloatInit("w", {4}, {1.f, -2.f, 0.5f, 3.f});
  b.FloatInit("big", {4}, {1e5f, 0.f, 0.f, 0.f});
  b.Node("Add", {"x", "b"}, {"a"});
  b.Node("Relu", {"a"}, {"r"});
  b.Node("Mul", {"r", "w"}, {"m"});
  b.Node("Relu", {"m"}, {"y"});
  b.Node("Add", {"r", "big"}, {"z"});
  return b.Bytes();
}

TEST(DevicePlanTest, Fp16KeepsActivationsHalfBetweenKernelsThatTakeIt) {
  SessionOptions opts;
  opts.backend = kFakeHalf;
  opts.precision = Precision::kFp16;
  auto dev = Session::LoadFromBytes(HalfModel(), opts);
  ASSERT_TRUE(dev.ok()) << dev.status().ToString();
  std::string log;
  for (const auto& line : (*dev)->optimization_log()) log += line + "\n";
  // Add a, Relu r and Relu y run in float16; z's Add keeps float32 for its constant 1e5.
  EXPECT_NE(log.find("half_values: float16 between kernels: 3 of 5 nodes, 3 values float16, 2 "
                     "casts to float16, 2 back to float32, 1 constants converted, 1 nodes kept "
                     "float32 (a constant beyond float16's range)"),
            std::string::npos)
      << log;
  // The graph's inputs and outputs keep their names and float32.
  for (const auto& spec : (*dev)->outputs()) EXPECT_EQ(spec.dtype, DataType::kFloat) << spec.name;
  EXPECT_EQ((*dev)->inputs()[0].dtype, DataType::kFloat);
  // The plan: x cast once, Add -> Relu in float16, r cast back once for Mul, z's Add and the
  // output; m cast to float16 for the second Relu, whose y is cast back.
  auto plan = (*dev)->DescribePlan({{"x", Input(3)}});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  for (const char* step : {"Cast 'x_to_float16' -> fakehalf.cast.ref float16[3,4]",
                           "Add 'Add1' -> fakehalf.add.test float16[3,4]",
                           "Relu 'Relu2' -> fakehalf.relu.test float16[3,4]",
                           "Cast 'r_to_float32' -> fakehalf.cast.ref float32[3,4]",
                           "Mul 'Mul3' -> fakehalf.mul.ref float32[3,4]",
                           "Add 'Add5' -> fakehalf.add.test float32[3,4]",
                           "Cast 'm_to_float16' -> fakehalf.cast.ref float16[3,4]",
                           "Relu 'Relu4' -> fakehalf.relu.test float16[3,4]",
                           "Cast 'y_to_float32' -> fakehalf.cast.ref float32[3,4]"})
    EXPECT_NE(plan->find(step), std::string::npos) << step << "\n" << *plan;
  EXPECT_NE(plan->find("9 steps"), std::string::npos) << *plan;

  SessionOptions ref_opts;
  ref_opts.reference_only = true;
  auto cpu = Session::LoadFromBytes(HalfModel(), ref_opts);
  ASSERT_TRUE(cpu.ok());
  Tensor x = Tensor::Empty(DataType::kFloat, {3, 4});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = 0.3f * static_cast<float>(i) - 1.7f;
  std::vector<NamedTensor> got, want;
  half_runs = 0;
  Status s = (*dev)->Run({{"x", x}}, &got);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(half_runs, 3);  // the two Relus and the first Add, each once
  ASSERT_TRUE((*cpu)->Run({{"x", x}}, &want).ok());
  ASSERT_EQ(got.size(), want.size());
  for (size_t o = 0; o < got.size(); ++o) {
    ASSERT_EQ(got[o].name, want[o].name);
    ASSERT_EQ(got[o].tensor.dtype(), DataType::kFloat) << got[o].name;
    for (int64_t i = 0; i < want[o].tensor.numel(); ++i) {
      const float g = got[o].tensor.data<float>()[i], w = want[o].tensor.data<float>()[i];
      // float16 keeps 11 significant bits: each rounding is within 2^-11 relative.
      EXPECT_NEAR(g, w, 2e-3f * std::fabs(w) + 1e-6f) << got[o].name << "[" << i << "]";
    }
  }
  // Rounding did happen: x + b stored as float16 is not the float32 sum everywhere.
  bool any_rounded = false;
  for (int64_t i = 0; i < want[2].tensor.numel(); ++i)
    any_rounded = any_rounded || got[2].tensor.data<float>()[i] != want[2].tensor.data<float>()[i];
  EXPECT_TRUE(any_rounded);

  // fp32 on the same backend: nothing is float16.
  opts.precision = Precision::kFp32;
  auto f32 = Session::LoadFromBytes(HalfModel(), opts);
  ASSERT_TRUE(f32.ok());
  for (const auto& line : (*f32)->optimization_log())
    EXPECT_EQ(line.find("half_values"), std::string::npos) << line;
  half_runs = 0;
  got.clear();
  ASSERT_TRUE((*f32)->Run({{"x", x}}, &got).ok());
  EXPECT_EQ(half_runs, 0);
  ExpectSameOutputs(got, want);
}

// A node whose op's inference says float whatever its input (GlobalAveragePool, like Conv and
// Gemm) writes float16 when the rewrite runs it in float16: the plan gives its output float16, so
// the float16 kernel after it is chosen. The first H200 run found the plan giving it float32, and
// Gemm after Flatten refused (float32 A, float16 B) under --precision fp16.
TEST(DevicePlanTest, Fp16OutputsOfOpsInferredAsFloatAreFloat16InThePlan) {
  ModelBuilder b;
  b.Input("x", kF32, {2, 3, 4, 4}).Output("y", kF32, {2, 3, 1, 1});
  b.FloatInit("c", {1}, {0.5f});
  b.Node("Relu", {"x"}, {"r"});
  b.Node("GlobalAveragePool", {"r"}, {"g"});
  b.Node("Add", {"g", "c"}, {"y"});
  SessionOptions opts;
  opts.backend = kFakeHalf;
  opts.precision = Precision::kFp16;
  auto dev = Session::LoadFromBytes(b.Bytes(), opts);
  ASSERT_TRUE(dev.ok()) << dev.status().ToString();
  Tensor x = Tensor::Empty(DataType::kFloat, {2, 3, 4, 4});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = 0.05f * static_cast<float>(i) - 1.f;
  auto plan = (*dev)->DescribePlan({{"x", x}});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  for (const char* step : {"fakehalf.globalaveragepool.test float16[2,3,1,1]",
                           "Add 'Add3' -> fakehalf.add.test float16[2,3,1,1]"})
    EXPECT_NE(plan->find(step), std::string::npos) << step << "\n" << *plan;
  half_runs = 0;
  std::vector<NamedTensor> got;
  Status s = (*dev)->Run({{"x", x}}, &got);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(half_runs, 3);  // Relu, the pool and Add, all in float16
  ASSERT_EQ(got.size(), 1u);
  ASSERT_EQ(got[0].tensor.dtype(), DataType::kFloat);
  for (int64_t p = 0; p < 6; ++p) {
    float want = 0;
    for (int64_t i = 0; i < 16; ++i) want += std::max(x.data<float>()[p * 16 + i], 0.f);
    want = want / 16 + 0.5f;
    EXPECT_NEAR(got[0].tensor.data<float>()[p], want, 2e-3f * std::fabs(want) + 1e-3f) << p;
  }
}

// A body may declare an intermediate float16 (value_info) that its op computes in float32, and
// the lowering of float16 models does not retype bodies: the plan keeps the inferred float32, so
// the Relu does not write 64 floats into a buffer sized for 64 float16s. (Bodies run on the CPU:
// device backends refuse control flow.)
TEST(DevicePlanTest, DeclaredFloat16InABodyDoesNotShrinkAFloat32Output) {
  ModelBuilder l;
  ModelBuilder::Subgraph then_b, else_b;
  then_b.Output("t", kF32, {64});
  then_b.Node("Relu", {"x"}, {"u"});
  then_b.Node("Neg", {"u"}, {"t"});
  else_b.Output("e", kF32, {64}).Node("Neg", {"x"}, {"e"});
  l.Input("x", kF32, {64}).Input("p", onnx::TensorProto::BOOL, {}).Output("y", kF32, {64});
  auto& branch = l.Node("If", {"p"}, {"y"});
  ModelBuilder::GraphAttr(branch, "then_branch", then_b);
  ModelBuilder::GraphAttr(branch, "else_branch", else_b);
  onnx::ModelProto m;
  ASSERT_TRUE(m.ParseFromString(l.Bytes()));
  for (auto& a : *m.mutable_graph()->mutable_node(0)->mutable_attribute())
    if (a.name() == "then_branch") {
      onnx::ValueInfoProto* v = a.mutable_g()->add_value_info();
      v->set_name("u");
      v->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT16);
      v->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(64);
    }
  Tensor x = Tensor::Empty(DataType::kFloat, {64});
  for (int64_t i = 0; i < 64; ++i) x.data<float>()[i] = 0.25f * static_cast<float>(i) - 8.f;
  Tensor p = Tensor::Empty(DataType::kBool, {});
  *static_cast<bool*>(p.raw()) = true;
  {
    auto s = Session::LoadFromBytes(m.SerializeAsString(), SessionOptions{});
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    std::vector<NamedTensor> got;
    Status st = (*s)->Run({{"x", x}, {"p", p}}, &got);
    ASSERT_TRUE(st.ok()) << st.ToString();
    ASSERT_EQ(got.size(), 1u);
    ASSERT_EQ(got[0].tensor.dtype(), DataType::kFloat);
    for (int64_t i = 0; i < 64; ++i)
      EXPECT_EQ(got[0].tensor.data<float>()[i], -std::max(x.data<float>()[i], 0.f)) << i;
  }
}

// What the float16 rewrite leaves alone: a node computed from constants only (the plan folds
// it in float32 on the host) and any graph with a subgraph, whose body may read outer values.
TEST(DevicePlanTest, Fp16LeavesConstantNodesAndControlFlowInFloat32) {
  ModelBuilder b;
  b.Input("x", kF32, {2, 4}).Output("y", kF32, {2, 4});
  b.FloatInit("c", {4}, {1.f, -2.f, 3.f, -4.f});
  b.Node("Relu", {"c"}, {"rc"});  // from constants alone
  b.Node("Add", {"x", "rc"}, {"y"});
  auto g = onnxio::LoadModelFromBytes(b.Bytes(), "");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  std::string what;
  ASSERT_TRUE(runtime::StoreHalfBetweenKernels(**g, kFakeHalf, &what).ok());
  EXPECT_NE(what.find("1 of 2 nodes"), std::string::npos) << what;  // the Add only
  for (const ir::Node& n : (*g)->nodes)
    if (n.op_type == "Relu") {
      EXPECT_EQ((*g)->values[n.outputs[0]].name, "rc");
    }

  ModelBuilder l;
  ModelBuilder::Subgraph then_b, else_b;
  then_b.Output("t", kF32, {2, 4}).Node("Relu", {"x"}, {"t"});
  else_b.Output("e", kF32, {2, 4}).Node("Add", {"x", "x"}, {"e"});
  l.Input("x", kF32, {2, 4}).Input("p", onnx::TensorProto::BOOL, {}).Output("y", kF32, {2, 4});
  l.Node("Relu", {"x"}, {"r"});
  auto& branch = l.Node("If", {"p"}, {"y"});
  ModelBuilder::GraphAttr(branch, "then_branch", then_b);
  ModelBuilder::GraphAttr(branch, "else_branch", else_b);
  auto lg = onnxio::LoadModelFromBytes(l.Bytes(), "");
  ASSERT_TRUE(lg.ok()) << lg.status().ToString();
  const size_t nodes = (*lg)->nodes.size();
  what.clear();
  ASSERT_TRUE(runtime::StoreHalfBetweenKernels(**lg, kFakeHalf, &what).ok());
  EXPECT_TRUE(what.empty()) << what;
  EXPECT_EQ((*lg)->nodes.size(), nodes);
}

// A backend with no device registered and no plugin to load: Unavailable, naming the plugin
// file looked for. A name the user gives is parsed first: only cpu and cuda are backends.
TEST(DevicePlanTest, BackendWithoutDeviceOrPluginIsUnavailable) {
  SessionOptions opts;
  opts.backend = TestBackend("tpu");
  auto s = Session::LoadFromBytes(SmallModel(), opts);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kUnavailable) << s.status().ToString();
  EXPECT_NE(s.status().message().find("backend 'tpu' is not available"), std::string::npos)
      << s.status().ToString();
  EXPECT_NE(s.status().message().find("libkiln_tpu.so not found"), std::string::npos)
      << s.status().ToString();
  auto parsed = ParseBackend("tpu");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(parsed.status().message().find("backend must be cpu or cuda; got 'tpu'"),
            std::string::npos)
      << parsed.status().ToString();
  EXPECT_EQ(*ParseBackend("cuda"), Backend::kCuda);
  EXPECT_EQ(*ParseBackend(BackendName(Backend::kCpu)), Backend::kCpu);
  EXPECT_STREQ(BackendName(kFakeHalf), "fakehalf");
}

}  // namespace
}  // namespace kiln
