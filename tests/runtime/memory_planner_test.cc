// MemoryPlanner: buffers alive at the same time never overlap; buffers with disjoint lifetimes
// share memory; the arena is no larger than the sum of sizes and no smaller than the peak of live
// bytes.
#include "runtime/memory_planner.h"

#include <gtest/gtest.h>

#include <random>

namespace kiln::runtime {
namespace {

TEST(MemoryPlannerTest, ChainReusesMemory) {
  // a -> b -> c -> d: each buffer lives from its producer to its consumer.
  std::vector<BufferRequest> r = {{1000, 0, 1}, {1000, 1, 2}, {1000, 2, 3}, {1000, 3, 4}};
  MemoryLayout m = PlanMemory(r);
  EXPECT_EQ(m.arena_bytes, 2 * 1024u);  // two 64-byte-aligned buffers alive at any time
  EXPECT_NE(m.offsets[0], m.offsets[1]);
  EXPECT_EQ(m.offsets[0], m.offsets[2]);
}

TEST(MemoryPlannerTest, RandomLifetimesNeverOverlap) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<BufferRequest> r(1 + rng() % 40);
    size_t total = 0;
    for (auto& b : r) {
      b.bytes = 1 + rng() % 5000;
      b.first_step = static_cast<int>(rng() % 30);
      b.last_step = b.first_step + static_cast<int>(rng() % 10);
      total += (b.bytes + 63) / 64 * 64;
    }
    MemoryLayout m = PlanMemory(r);
    size_t peak = 0;
    for (int step = 0; step < 40; ++step) {
      size_t live = 0;
      for (const auto& b : r)
        if (b.first_step <= step && step <= b.last_step) live += (b.bytes + 63) / 64 * 64;
      peak = std::max(peak, live);
    }
    EXPECT_LE(m.arena_bytes, total);
    EXPECT_GE(m.arena_bytes, peak);
    for (size_t i = 0; i < r.size(); ++i) {
      EXPECT_EQ(m.offsets[i] % 64, 0u);
      EXPECT_LE(m.offsets[i] + r[i].bytes, m.arena_bytes);
      for (size_t j = i + 1; j < r.size(); ++j) {
        bool live_together = r[i].first_step <= r[j].last_step && r[j].first_step <= r[i].last_step;
        bool disjoint =
            m.offsets[i] + r[i].bytes <= m.offsets[j] || m.offsets[j] + r[j].bytes <= m.offsets[i];
        if (live_together) {
          EXPECT_TRUE(disjoint) << "trial " << trial << " buffers " << i << "," << j;
        }
      }
    }
  }
}

}  // namespace
}  // namespace kiln::runtime
