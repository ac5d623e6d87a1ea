// The generator of kiln's random ops (random.cc, whose file comment states the scheme) and of
// training-mode Dropout: a std::mt19937_64 per Compute, seeded from the node's `seed` attribute
// (SplitMix64 of the float's bits: the same draws on every run and machine) or, without one, from
// per-op entropy mixed with an atomic run counter (new draws every run). Thread-safe: Engine() is
// const; the counter is atomic.
#pragma once

#include <atomic>
#include <bit>
#include <chrono>
#include <cstdint>
#include <optional>
#include <random>

#include "ir/graph.h"

namespace kiln::ops {

inline uint64_t SplitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

inline uint64_t EntropyBase(const void* salt) {
  uint64_t base = 0;
  try {
    std::random_device rd;
    base = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  } catch (...) {  // no entropy device: the clock and the op's address still differ per op
  }
  const auto ticks = std::chrono::steady_clock::now().time_since_epoch().count();
  return base ^ SplitMix64(static_cast<uint64_t>(ticks) ^ reinterpret_cast<uintptr_t>(salt));
}

// The seed attribute and, without one, the per-op entropy and run counter (see the file comment).
class RandomSource {
 public:
  explicit RandomSource(const ir::Node& node) {
    if (node.HasAttr("seed")) seed_bits_ = std::bit_cast<uint32_t>(node.GetFloat("seed", 0.f));
    if (!seed_bits_) base_ = EntropyBase(this);
  }
  bool seeded() const { return seed_bits_.has_value(); }
  std::mt19937_64 Engine() const {
    if (seed_bits_) return std::mt19937_64(SplitMix64(*seed_bits_));
    const uint64_t run = counter_.fetch_add(1, std::memory_order_relaxed);
    return std::mt19937_64(SplitMix64(base_ ^ SplitMix64(run)));
  }

 private:
  std::optional<uint32_t> seed_bits_;
  uint64_t base_ = 0;
  mutable std::atomic<uint64_t> counter_{0};
};

// Uniform in [0, 1) from the top 53 bits of one word.
inline double Uniform01(std::mt19937_64& eng) {
  return static_cast<double>(eng() >> 11) * 0x1.0p-53;
}

}  // namespace kiln::ops
