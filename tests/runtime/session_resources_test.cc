// What a session's plans share (runtime/session_resources.h): packed weights made once per source
// and layout, arenas reused and grown rather than multiplied; and a session running several
// batch sizes holds one packed copy of its convolution weights and one arena.
#include "runtime/session_resources.h"

#include <gtest/gtest.h>

#include "kiln/session.h"
#include "model_builder.h"

namespace kiln::runtime {
namespace {

using testing::ModelBuilder;

TEST(WeightCacheTest, PacksOncePerSourceAndKey) {
  WeightCache cache;
  Tensor a = Tensor::Empty(DataType::kFloat, {16});
  Tensor b = Tensor::Empty(DataType::kFloat, {16});
  int packs = 0;
  auto pack = [&]() -> StatusOr<Tensor> {
    ++packs;
    return Tensor::Empty(DataType::kUInt8, {100});
  };
  auto p1 = cache.GetOrPack(a, "blocked16", pack);
  auto p2 = cache.GetOrPack(a, "blocked16", pack);
  ASSERT_TRUE(p1.ok() && p2.ok());
  EXPECT_EQ(p1->raw(), p2->raw());
  EXPECT_EQ(packs, 1);
  EXPECT_EQ(cache.hits(), 1u);
  ASSERT_TRUE(cache.GetOrPack(a, "blocked8", pack).ok());   // another layout: another copy
  ASSERT_TRUE(cache.GetOrPack(b, "blocked16", pack).ok());  // another source: another copy
  EXPECT_EQ(packs, 3);
  EXPECT_EQ(cache.entries(), 3u);
  EXPECT_EQ(cache.bytes(), 300u);
  // A failed pack is returned and not cached.
  auto bad = cache.GetOrPack(a, "broken", []() -> StatusOr<Tensor> { return Internal("no"); });
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(cache.entries(), 3u);
}

TEST(ArenaPoolTest, ReusesAndGrowsInsteadOfMultiplying) {
  ArenaPool pool;
  Tensor a = pool.Take(1000);
  EXPECT_GE(a.bytes(), 1000u);
  pool.Return(std::move(a));
  Tensor b = pool.Take(500);  // fits in the free one: reused
  EXPECT_GE(b.bytes(), 1000u);
  EXPECT_EQ(pool.count(), 1u);
  pool.Return(std::move(b));
  Tensor c = pool.Take(5000);  // the free one is too small: released, a bigger one made
  EXPECT_GE(c.bytes(), 5000u);
  EXPECT_EQ(pool.count(), 1u);
  EXPECT_EQ(pool.bytes(), c.bytes());
  Tensor d = pool.Take(10);  // none free while c is in use: a second arena
  EXPECT_EQ(pool.count(), 2u);
  pool.Return(std::move(c));
  pool.Return(std::move(d));
  EXPECT_EQ(pool.count(), 2u);
}

// x [N,8,16,16] -> Conv(16, 3x3) -> Relu -> Conv(16, 1x1) -> y
std::string TwoConvModel() {
  ModelBuilder m;
  m.Input("x", onnx::TensorProto::FLOAT, {-1, 8, 16, 16});
  m.Output("y", onnx::TensorProto::FLOAT, {-1, 16, 16, 16});
  std::vector<float> w1(16 * 8 * 9), w2(16 * 16);
  for (size_t i = 0; i < w1.size(); ++i) w1[i] = 0.01f * static_cast<float>(i % 17) - 0.08f;
  for (size_t i = 0; i < w2.size(); ++i) w2[i] = 0.02f * static_cast<float>(i % 13) - 0.12f;
  m.FloatInit("w1", {16, 8, 3, 3}, w1);
  m.FloatInit("w2", {16, 16, 1, 1}, w2);
  ModelBuilder::IntsAttr(m.Node("Conv", {"x", "w1"}, {"c1"}), "pads", {1, 1, 1, 1});
  m.Node("Relu", {"c1"}, {"r"});
  m.Node("Conv", {"r", "w2"}, {"y"});
  return m.Bytes();
}

TEST(SessionResourcesTest, SeveralBatchSizesShareWeightsAndOneArena) {
  auto s = Session::LoadFromBytes(TwoConvModel());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  std::vector<NamedTensor> ref;
  for (int64_t n : {1, 2, 4, 8}) {
    Tensor x = Tensor::Empty(DataType::kFloat, {n, 8, 16, 16});
    for (int64_t i = 0; i < x.numel(); ++i)
      x.data<float>()[i] = 0.001f * static_cast<float>(i % 97);
    std::vector<NamedTensor> out;
    ASSERT_TRUE((*s)->Run({{"x", x}}, &out).ok());
    // Sample 0 is the same input at every batch size: the same output, whichever plan ran.
    if (ref.empty()) ref = out;
    for (int64_t i = 0; i < ref[0].tensor.numel(); ++i)
      ASSERT_NEAR(out[0].tensor.data<float>()[i], ref[0].tensor.data<float>()[i], 1e-5) << n;
  }
  const SessionStats st = (*s)->stats();
  EXPECT_EQ(st.plans, 4u);
  EXPECT_EQ(st.arenas, 1u);  // sequential runs: one arena, grown to the largest plan's
  EXPECT_GE(st.arena_bytes, st.planned_arena_bytes_max);
  // Two convolutions; each layout packed once however many plans use it. oneDNN may pick another
  // weight layout for some batch size, so allow one extra copy per convolution, but the four
  // plans must have reused packed weights.
  EXPECT_GE(st.packed_weights, 2u);
  EXPECT_LE(st.packed_weights, 4u);
  EXPECT_GE(st.packed_weight_reuses, 4u);
  EXPECT_GT(st.packed_weight_bytes, 0u);
}

}  // namespace
}  // namespace kiln::runtime
