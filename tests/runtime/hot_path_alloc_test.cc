// The hot path allocates no buffers: after the first run of a shape signature, further runs take
// every activation and scratch buffer from the plan's arena. malloc and friends are interposed in
// this test binary and count allocations of at least kLarge bytes made while a run is in flight.
// (Small bookkeeping allocations, e.g. oneDNN's per-execute argument maps, are not counted: oneDNN
// allocates those inside every primitive execution.)
#include <gtest/gtest.h>
#include <malloc.h>

#include <atomic>
#include <cstdlib>

#include "kiln/session.h"
#include "model_builder.h"

extern "C" {
void* __libc_malloc(size_t);
void* __libc_memalign(size_t, size_t);
}

namespace {
constexpr size_t kLarge = 4096;
std::atomic<bool> g_counting{false};
std::atomic<int> g_large{0};
void Count(size_t n) {
  if (g_counting.load(std::memory_order_relaxed) && n >= kLarge) g_large.fetch_add(1);
}
}  // namespace

extern "C" {
void* malloc(size_t n) {
  Count(n);
  return __libc_malloc(n);
}
void* aligned_alloc(size_t align, size_t n) {
  Count(n);
  return __libc_memalign(align, n);
}
int posix_memalign(void** p, size_t align, size_t n) {
  Count(n);
  *p = __libc_memalign(align, n);
  return *p ? 0 : 12;
}
void* memalign(size_t align, size_t n) {
  Count(n);
  return __libc_memalign(align, n);
}
}

namespace kiln {
namespace {

using testing::ModelBuilder;
constexpr int kF32 = onnx::TensorProto::FLOAT;

TEST(HotPathAllocTest, WarmRunsAllocateNoBuffers) {
  // A small CNN whose activations are far above kLarge but whose output (the only buffer a run
  // must hand back to the caller) is below it.
  ModelBuilder mb;
  mb.Input("x", kF32, {1, 3, 32, 32}).Output("y", kF32, {1, 10});
  std::vector<float> w1(16 * 3 * 9, 0.01f), w2(32 * 16 * 9, 0.01f), fc(10 * 32, 0.1f), b(10, 0.f);
  mb.FloatInit("w1", {16, 3, 3, 3}, w1);
  mb.FloatInit("w2", {32, 16, 3, 3}, w2);
  mb.FloatInit("fc", {10, 32}, fc);
  mb.FloatInit("b", {10}, b);
  ModelBuilder::IntsAttr(mb.Node("Conv", {"x", "w1"}, {"c1"}), "pads", {1, 1, 1, 1});
  mb.Node("Relu", {"c1"}, {"r1"});
  ModelBuilder::IntsAttr(mb.Node("Conv", {"r1", "w2"}, {"c2"}), "pads", {1, 1, 1, 1});
  mb.Node("Relu", {"c2"}, {"r2"});
  mb.Node("GlobalAveragePool", {"r2"}, {"g"});
  mb.Node("Flatten", {"g"}, {"f"});
  ModelBuilder::IntAttr(mb.Node("Gemm", {"f", "fc", "b"}, {"y"}), "transB", 1);
  auto s = Session::LoadFromBytes(mb.Bytes());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  Tensor x = Tensor::Empty(DataType::kFloat, {1, 3, 32, 32});
  std::vector<NamedTensor> out;
  ASSERT_TRUE((*s)->Run({{"x", x}}, &out).ok());  // cold: plans, prepares, allocates the arena
  ASSERT_TRUE((*s)->Run({{"x", x}}, &out).ok());
  g_large = 0;
  g_counting = true;
  for (int i = 0; i < 10; ++i) ASSERT_TRUE((*s)->Run({{"x", x}}, &out).ok());
  g_counting = false;
  EXPECT_EQ(g_large.load(), 0) << "large allocations during 10 warm runs";
  // The counter works: a large allocation while counting is seen.
  g_counting = true;
  Tensor probe = Tensor::Empty(DataType::kFloat, {4096});
  g_counting = false;
  EXPECT_GE(g_large.load(), 1);
}

}  // namespace
}  // namespace kiln
