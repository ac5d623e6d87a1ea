// The hot path allocates no buffers: after the first run of a shape signature, further runs take
// every activation and scratch buffer from the plan's arena. malloc and friends are interposed in
// this test binary and count allocations of at least kLarge bytes made while a run is in flight.
// (Small bookkeeping allocations, e.g. oneDNN's per-execute argument maps, are not counted: oneDNN
// allocates those inside every primitive execution.)
#include <gtest/gtest.h>
#include <malloc.h>

#include <atomic>
#include <cstdlib>

#include "../kernels/blocked_layout_expectations.h"
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
  // must hand back to the caller) is below it, with one node for each kind of CPU kernel a
  // vision model meets: convolutions, a transposed one, a standalone BatchNormalization, a
  // squeeze-excite scale, Resize, MaxPool, Split, Concat, global pooling, Gemm and Softmax.
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
  auto s = Session::LoadFromBytes(mb.Bytes());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  Tensor x = Tensor::Empty(DataType::kFloat, {1, 3, 32, 32});
  std::vector<NamedTensor> out;
  auto plan = (*s)->DescribePlan({{"x", x}});
  ASSERT_TRUE(plan.ok());
  for (const char* k : {"cpu.batchnormalization.channels", "cpu.mul.channel_scale",
                        "cpu.resize.onednn", "cpu.convtranspose.onednn", "cpu.concat.onednn",
                        "cpu.softmax.onednn", "cpu.globalaveragepool.channels", "cpu.split.onednn"})
    if (!testing::KernelMayBeDeclinedForBlockedLayout(*plan, k)) {
      EXPECT_NE(plan->find(k), std::string::npos) << k << " not in the plan:\n" << *plan;
    }
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
