// Every allocation made while warm runs are in flight, attributed to the code that asked for it.
// malloc and friends are interposed in this test binary; each call is attributed by walking its
// stack (backtrace) to the first frame outside the C and C++ runtimes: libkiln.so's code, oneDNN's
// (libdnnl), the OpenMP runtime, or this test. Target: a warm Session::RunInto (outputs bound) of
// a model with static shapes makes no allocation from kiln's code. What oneDNN allocates inside its
// own calls (a memory object per argument in dnnl_memory_create, the execution context's argument
// map in dnnl_primitive_execute) is counted and printed, not asserted (docs/embedding.md).
#include <dlfcn.h>
#include <execinfo.h>
#include <gtest/gtest.h>
#include <link.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

#include "../kernels/blocked_layout_expectations.h"
#include "kiln/session.h"
#include "model_builder.h"

extern "C" {
void* __libc_malloc(size_t);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_memalign(size_t, size_t);
}

namespace {

enum Who { kKiln, kOneDnn, kOpenMp, kTest, kOther, kWhoCount };
const char* const kWhoNames[] = {"kiln (libkiln.so)", "oneDNN (libdnnl)", "OpenMP runtime",
                                 "this test", "other"};

struct Range {
  uintptr_t lo = 0, hi = 0;
  bool Has(uintptr_t a) const { return a >= lo && a < hi; }
};
// Text ranges of the objects allocations are attributed to (filled before counting).
Range g_kiln, g_dnnl, g_gomp, g_test, g_runtime[4];
int g_runtimes = 0;

std::atomic<bool> g_counting{false};
std::atomic<int> g_count[kWhoCount];
thread_local bool t_in_hook = false;
constexpr int kKept = 8;  // the stacks of the first kiln allocations, for the failure message
void* g_kiln_stacks[kKept][12];
int g_kiln_depth[kKept];
std::atomic<int> g_kiln_kept{0};

Range RangeOf(const char* name_part, bool main_program = false) {
  struct Find {
    const char* part;
    bool main;
    Range r;
  } find{name_part, main_program, {}};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto* f = static_cast<Find*>(data);
        const bool is_main = info->dlpi_name == nullptr || info->dlpi_name[0] == '\0';
        if (f->main ? !is_main : (is_main || !std::strstr(info->dlpi_name, f->part))) return 0;
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[i];
          if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X)) continue;
          f->r.lo = info->dlpi_addr + ph.p_vaddr;
          f->r.hi = f->r.lo + ph.p_memsz;
          return 1;
        }
        return 0;
      },
      &find);
  return find.r;
}

void Attribute() {
  if (!g_counting.load(std::memory_order_relaxed) || t_in_hook) return;
  t_in_hook = true;
  void* frames[32];
  const int n = backtrace(frames, 32);
  Who who = kOther;
  int i = 1;  // frames[0] is this function
  for (; i < n; ++i) {
    const auto a = reinterpret_cast<uintptr_t>(frames[i]);
    bool runtime = false;
    for (int r = 0; r < g_runtimes; ++r) runtime = runtime || g_runtime[r].Has(a);
    if (g_test.Has(a)) {
      // The interposed malloc and this function are in the test binary too: skip them.
      Dl_info info;
      if (dladdr(frames[i], &info) && info.dli_sname &&
          (!std::strcmp(info.dli_sname, "malloc") || !std::strcmp(info.dli_sname, "calloc") ||
           !std::strcmp(info.dli_sname, "realloc") || !std::strcmp(info.dli_sname, "memalign") ||
           !std::strcmp(info.dli_sname, "aligned_alloc") ||
           !std::strcmp(info.dli_sname, "posix_memalign") ||
           std::strstr(info.dli_sname, "Attribute")))
        continue;
      who = kTest;
      break;
    }
    if (runtime) continue;
    who = g_kiln.Has(a) ? kKiln : g_dnnl.Has(a) ? kOneDnn : g_gomp.Has(a) ? kOpenMp : kOther;
    break;
  }
  g_count[who].fetch_add(1);
  if (who == kKiln) {
    const int k = g_kiln_kept.fetch_add(1);
    if (k < kKept) {
      g_kiln_depth[k] = std::min(n, 12);
      for (int j = 0; j < g_kiln_depth[k]; ++j) g_kiln_stacks[k][j] = frames[j];
    }
  }
  t_in_hook = false;
}

}  // namespace

extern "C" {
void* malloc(size_t n) {
  Attribute();
  return __libc_malloc(n);
}
void* calloc(size_t n, size_t size) {
  Attribute();
  return __libc_calloc(n, size);
}
void* realloc(void* p, size_t n) {
  Attribute();
  return __libc_realloc(p, n);
}
void* aligned_alloc(size_t align, size_t n) {
  Attribute();
  return __libc_memalign(align, n);
}
int posix_memalign(void** p, size_t align, size_t n) {
  Attribute();
  *p = __libc_memalign(align, n);
  return *p ? 0 : 12;
}
void* memalign(size_t align, size_t n) {
  Attribute();
  return __libc_memalign(align, n);
}
}

namespace kiln {
namespace {

using testing::ModelBuilder;
constexpr int kF32 = onnx::TensorProto::FLOAT;

struct Counts {
  int by[kWhoCount] = {};
  std::string Describe() const {
    std::string s;
    for (int w = 0; w < kWhoCount; ++w)
      s += std::string(w ? ", " : "") + kWhoNames[w] + ": " + std::to_string(by[w]);
    return s;
  }
};

void FindRanges() {
  g_kiln = RangeOf("libkiln.so");
  g_dnnl = RangeOf("libdnnl.so");
  g_gomp = RangeOf("libgomp.so");
  g_test = RangeOf("", true);
  g_runtimes = 0;  // called by more than one test: fill the table afresh
  for (const char* lib : {"libc.so", "libstdc++.so", "libgcc_s.so", "ld-linux"})
    g_runtime[g_runtimes++] = RangeOf(lib);
  void* warm[4];
  backtrace(warm, 4);  // loads the unwinder before any counting
}

template <typename F>
Counts Count(F&& fn) {
  for (auto& c : g_count) c = 0;
  g_kiln_kept = 0;
  g_counting = true;
  fn();
  g_counting = false;
  Counts c;
  for (int w = 0; w < kWhoCount; ++w) c.by[w] = g_count[w].load();
  return c;
}

std::string KilnStacks() {
  std::string s;
  for (int k = 0; k < std::min(g_kiln_kept.load(), kKept); ++k) {
    s += "\n  allocation " + std::to_string(k + 1) + ":";
    for (int j = 1; j < g_kiln_depth[k]; ++j) {
      Dl_info info;
      if (dladdr(g_kiln_stacks[k][j], &info) && info.dli_sname) {
        char off[32];
        std::snprintf(off, sizeof(off), "+0x%lx",
                      static_cast<unsigned long>(reinterpret_cast<uintptr_t>(g_kiln_stacks[k][j]) -
                                                 reinterpret_cast<uintptr_t>(info.dli_saddr)));
        s += std::string(" <- ") + info.dli_sname + off;
      }
    }
  }
  return s;
}

// Two RunInto calls to warm up, then the allocations of 10 more, which must have none from
// kiln's code.
Counts WarmRunIntoCounts(Session& s, const std::vector<NamedTensor>& inputs,
                         std::vector<NamedTensor>* bound) {
  Status st = s.RunInto(inputs, bound);
  if (st.ok()) st = s.RunInto(inputs, bound);
  EXPECT_TRUE(st.ok()) << st.ToString();
  const Counts warm = Count([&] {
    for (int i = 0; i < 10 && st.ok(); ++i) st = s.RunInto(inputs, bound);
  });
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(warm.by[kKiln], 0) << "allocations from kiln's code in 10 warm RunInto calls ("
                               << warm.Describe() << "); first stacks:" << KilnStacks();
  return warm;
}

// A small CNN with one node for each kind of CPU kernel a vision model meets: convolutions, a
// transposed one, a standalone BatchNormalization, a squeeze-excite scale, Resize, MaxPool,
// AveragePool, Split, Concat, global pooling, Gemm and Softmax.
std::string TestModel() {
  ModelBuilder mb;
  mb.Input("x", kF32, {1, 3, 32, 32}).Output("y", kF32, {1, 10});
  std::vector<float> w1(16 * 3 * 9, 0.01f), w2(32 * 16 * 9, 0.01f), fc(10 * 64, 0.1f), b(10, 0.f);
  mb.FloatInit("w1", {16, 3, 3, 3}, w1);
  mb.FloatInit("w2", {32, 16, 3, 3}, w2);
  mb.FloatInit("wt", {32, 32, 2, 2}, std::vector<float>(32 * 32 * 4, 0.01f));
  mb.FloatInit("fc", {10, 64}, fc);
  mb.FloatInit("b", {10}, b);
  mb.FloatInit("bn_s", {32}, std::vector<float>(32, 1.f));
  mb.FloatInit("bn_b", {32}, std::vector<float>(32, 0.1f));
  mb.FloatInit("bn_m", {32}, std::vector<float>(32, 0.f));
  mb.FloatInit("bn_v", {32}, std::vector<float>(32, 1.f));
  mb.FloatInit("roi", {0}, {});
  mb.FloatInit("scales", {4}, {1, 1, 2, 2});
  ModelBuilder::IntsAttr(mb.Node("Conv", {"x", "w1"}, {"c1"}), "pads", {1, 1, 1, 1});
  mb.Node("Relu", {"c1"}, {"r1"});
  ModelBuilder::IntsAttr(mb.Node("Conv", {"r1", "w2"}, {"c2"}), "pads", {1, 1, 1, 1});
  mb.Node("Relu", {"c2"}, {"r2"});
  mb.Node("BatchNormalization", {"r2", "bn_s", "bn_b", "bn_m", "bn_v"}, {"bn"});
  mb.Node("GlobalAveragePool", {"bn"}, {"se"});
  mb.Node("Mul", {"bn", "se"}, {"m"});
  auto& rs = mb.Node("Resize", {"m", "roi", "scales"}, {"up"});
  ModelBuilder::StringAttr(rs, "coordinate_transformation_mode", "asymmetric");
  ModelBuilder::StringAttr(rs, "nearest_mode", "floor");
  auto& mp = mb.Node("MaxPool", {"up"}, {"down"});
  ModelBuilder::IntsAttr(mp, "kernel_shape", {2, 2});
  ModelBuilder::IntsAttr(mp, "strides", {2, 2});
  ModelBuilder::IntsAttr(mb.Node("ConvTranspose", {"down", "wt"}, {"ct"}), "strides", {2, 2});
  auto& ap = mb.Node("AveragePool", {"ct"}, {"ctd"});
  ModelBuilder::IntsAttr(ap, "kernel_shape", {2, 2});
  ModelBuilder::IntsAttr(ap, "strides", {2, 2});
  ModelBuilder::IntAttr(mb.Node("Split", {"bn"}, {"h1", "h2"}), "axis", 1);
  ModelBuilder::IntAttr(mb.Node("Concat", {"ctd", "h2", "h1"}, {"cat"}), "axis", 1);
  mb.Node("GlobalAveragePool", {"cat"}, {"g"});
  mb.Node("Flatten", {"g"}, {"f"});
  ModelBuilder::IntAttr(mb.Node("Gemm", {"f", "fc", "b"}, {"logits"}), "transB", 1);
  mb.Node("Softmax", {"logits"}, {"y"});
  return mb.Bytes();
}

TEST(HotPathAllocTest, WarmRunIntoMakesNoKilnAllocation) {
  FindRanges();
  ASSERT_NE(g_kiln.hi, 0u) << "libkiln.so is not loaded: the test must link it";
  auto s = Session::LoadFromBytes(TestModel());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  Tensor x = Tensor::Empty(DataType::kFloat, {1, 3, 32, 32});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = static_cast<float>(i % 17) / 17.f;
  auto plan = (*s)->DescribePlan({{"x", x}});
  ASSERT_TRUE(plan.ok());
  if (std::getenv("KILN_TEST_PRINT_PLAN")) std::printf("%s\n", plan->c_str());
  for (const char* k : {"cpu.batchnormalization.channels", "cpu.mul.channel_scale",
                        "cpu.resize.onednn", "cpu.convtranspose.onednn", "cpu.concat.onednn",
                        "cpu.softmax.onednn", "cpu.globalaveragepool.channels", "cpu.split.onednn"})
    if (!testing::KernelMayBeDeclinedForBlockedLayout(*plan, k)) {
      EXPECT_NE(plan->find(k), std::string::npos) << k << " not in the plan:\n" << *plan;
    }
  std::vector<NamedTensor> fresh;
  ASSERT_TRUE((*s)->Run({{"x", x}}, &fresh).ok());  // cold: plans, prepares, allocates the arena
  const std::vector<NamedTensor> inputs = {{"x", x}};
  std::vector<NamedTensor> bound = {{"y", Tensor::Empty(DataType::kFloat, {1, 10})}};
  const Counts warm = WarmRunIntoCounts(**s, inputs, &bound);
  Status st = OkStatus();
  std::printf("10 warm RunInto calls: %s\n", warm.Describe().c_str());
  ::testing::Test::RecordProperty("onednn_allocations_per_run", warm.by[kOneDnn] / 10);

  // The bound output holds what an ordinary Run returns.
  ASSERT_EQ(fresh.size(), 1u);
  for (int64_t i = 0; i < 10; ++i)
    EXPECT_EQ(bound[0].tensor.data<float>()[i], fresh[0].tensor.data<float>()[i]) << i;

  // An ordinary Run allocates its output and names it: the counter sees kiln's allocations.
  const Counts unbound = Count([&] { st = (*s)->Run(inputs, &fresh); });
  ASSERT_TRUE(st.ok());
  EXPECT_GE(unbound.by[kKiln], 1) << unbound.Describe();
  std::printf("1 warm Run (outputs returned): %s\n", unbound.Describe().c_str());
  // And this test's own.
  const Counts own = Count([] {
    volatile void* p = std::malloc(64);
    std::free(const_cast<void*>(p));
  });
  EXPECT_EQ(own.by[kTest], 1) << own.Describe();
}

// A sequence model: Slices (one of contiguous runs, one strided) feeding a bidirectional LSTM
// with sequence_lens, a GRU and an RNN (the CPU's recurrent loops and cpu.slice.copy).
std::string SequenceModel() {
  ModelBuilder mb(14);
  mb.Input("x", kF32, {6, 2, 24}).Input("lens", onnx::TensorProto::INT32, {2});
  mb.Output("y", kF32, {6, 1, 2, 8}).Output("ly", kF32, {6, 2, 2, 8});
  mb.Int64Init("s", {1}, {0});
  mb.Int64Init("e", {1}, {16});
  mb.Int64Init("a", {1}, {2});
  mb.Int64Init("st", {1}, {2});
  mb.Node("Slice", {"x", "s", "e", "a"}, {"x16"});       // [6,2,16]: runs of 16 floats
  mb.Node("Slice", {"x", "s", "e", "a", "st"}, {"x8"});  // [6,2,8]: every other float
  mb.FloatInit("lw", {2, 32, 16}, std::vector<float>(2 * 32 * 16, 0.05f));
  mb.FloatInit("lr", {2, 32, 8}, std::vector<float>(2 * 32 * 8, 0.05f));
  mb.FloatInit("gw", {1, 24, 8}, std::vector<float>(24 * 8, 0.05f));
  mb.FloatInit("gr", {1, 24, 8}, std::vector<float>(24 * 8, 0.05f));
  mb.FloatInit("rw", {1, 8, 8}, std::vector<float>(8 * 8, 0.05f));
  mb.FloatInit("rr", {1, 8, 8}, std::vector<float>(8 * 8, 0.05f));
  auto& lstm = mb.Node("LSTM", {"x16", "lw", "lr", "", "lens"}, {"ly"});
  ModelBuilder::StringAttr(lstm, "direction", "bidirectional");
  ModelBuilder::IntAttr(lstm, "hidden_size", 8);
  ModelBuilder::IntAttr(mb.Node("GRU", {"x8", "gw", "gr"}, {"gy"}), "hidden_size", 8);
  ModelBuilder::IntAttr(mb.Node("RNN", {"x8", "rw", "rr"}, {"ry"}), "hidden_size", 8);
  mb.Node("Add", {"gy", "ry"}, {"y"});
  return mb.Bytes();
}

TEST(HotPathAllocTest, WarmRunIntoOfASequenceModelMakesNoKilnAllocation) {
  FindRanges();
  auto s = Session::LoadFromBytes(SequenceModel());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  Tensor x = Tensor::Empty(DataType::kFloat, {6, 2, 24});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = static_cast<float>(i % 13) / 13.f;
  const std::vector<NamedTensor> inputs = {{"x", x},
                                           {"lens", Tensor::FromVector<int32_t>({6, 3}, {2})}};
  auto plan = (*s)->DescribePlan(inputs);
  ASSERT_TRUE(plan.ok());
  for (const char* k : {"cpu.slice.copy", "cpu.lstm.loop", "cpu.gru.loop", "cpu.rnn.loop"})
    EXPECT_NE(plan->find(k), std::string::npos) << k << " not in the plan:\n" << *plan;
  std::vector<NamedTensor> bound = {{"y", Tensor::Empty(DataType::kFloat, {6, 1, 2, 8})},
                                    {"ly", Tensor::Empty(DataType::kFloat, {6, 2, 2, 8})}};
  WarmRunIntoCounts(**s, inputs, &bound);
}

TEST(HotPathAllocTest, AfterPrepareTheFirstRunIntoMakesNoKilnAllocation) {
  FindRanges();
  const std::vector<NamedTensor> inputs = {{"x", Tensor::Empty(DataType::kFloat, {1, 3, 32, 32})}};
  std::vector<NamedTensor> bound = {{"y", Tensor::Empty(DataType::kFloat, {1, 10})}};
  {
    // This thread's first run of any session grows two small pointer tables (session.cc); a
    // session of its own does that here.
    auto other = Session::LoadFromBytes(TestModel());
    ASSERT_TRUE(other.ok());
    ASSERT_TRUE((*other)->RunInto(inputs, &bound).ok());
  }
  auto s = Session::LoadFromBytes(TestModel());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_TRUE((*s)->Prepare({{"x", {1, 3, 32, 32}}}).ok());
  Status st = OkStatus();
  const Counts first = Count([&] { st = (*s)->RunInto(inputs, &bound); });
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(first.by[kKiln], 0) << "the first RunInto after Prepare (" << first.Describe()
                                << "); first stacks:" << KilnStacks();
  EXPECT_EQ((*s)->stats().plans, 1u);
}

TEST(HotPathAllocTest, RunIntoChecksTheBinding) {
  auto s = Session::LoadFromBytes(TestModel());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  const std::vector<NamedTensor> inputs = {{"x", Tensor::Empty(DataType::kFloat, {1, 3, 32, 32})}};
  auto expect = [&](std::vector<NamedTensor> outs, const std::string& text) {
    Status st = (*s)->RunInto(inputs, &outs);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
    EXPECT_NE(st.message().find(text), std::string::npos) << st.message();
  };
  expect({{"z", Tensor::Empty(DataType::kFloat, {1, 10})}}, "unknown output 'z'");
  expect({{"y", Tensor::Empty(DataType::kFloat, {1, 10})},
          {"y", Tensor::Empty(DataType::kFloat, {1, 10})}},
         "bound more than once");
  expect({{"y", Tensor::Empty(DataType::kInt64, {1, 10})}}, "expected float32");
  expect({{"y", Tensor::Empty(DataType::kFloat, {1, 11})}}, "this run computes [1,10]");
  expect({{"y", Tensor::View(DataType::kFloat, {1, 10}, nullptr)}}, "has no storage");
  // Nothing bound: the model runs, every output is dropped.
  std::vector<NamedTensor> none;
  EXPECT_TRUE((*s)->RunInto(inputs, &none).ok());
  EXPECT_EQ((*s)->RunInto(inputs, nullptr).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kiln
