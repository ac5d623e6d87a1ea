// The float32 <-> float16 conversion the fp16 kernels and the weight prepacking share
// (src/backends/cuda/kernels/cast_math.h), checked on the CPU: every half value round-trips, known
// encodings, and for a million floats over the whole range the result is the nearest half with
// ties to even (checked against both neighbours), overflow to infinity at 65520.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "backends/cuda/kernels/cast_math.h"

namespace kiln {
namespace {

using cuda_math::FloatToHalf;
using cuda_math::HalfToFloat;

TEST(CudaCastMathTest, EveryHalfRoundTrips) {
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const float f = HalfToFloat(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(f)))) << h;
      continue;
    }
    EXPECT_EQ(FloatToHalf(f), h) << "half 0x" << std::hex << h << " = " << f;
  }
}

TEST(CudaCastMathTest, KnownEncodings) {
  EXPECT_EQ(HalfToFloat(0x3C00), 1.f);
  EXPECT_EQ(HalfToFloat(0xC000), -2.f);
  EXPECT_EQ(HalfToFloat(0x7BFF), 65504.f);
  EXPECT_EQ(HalfToFloat(0x0001), std::ldexp(1.f, -24));
  EXPECT_EQ(HalfToFloat(0x0400), std::ldexp(1.f, -14));
  EXPECT_EQ(FloatToHalf(65519.f), 0x7BFF);
  EXPECT_EQ(FloatToHalf(65520.f), 0x7C00);  // the tie above 65504 rounds to even: infinity
  EXPECT_EQ(FloatToHalf(-1e9f), 0xFC00);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.f, -25)), 0x0000);  // tie with zero: even
  EXPECT_EQ(FloatToHalf(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(FloatToHalf(1.f + std::ldexp(1.f, -11)), 0x3C00);      // tie: stays even
  EXPECT_EQ(FloatToHalf(1.f + 3 * std::ldexp(1.f, -11)), 0x3C02);  // tie: rounds up to even
  EXPECT_EQ(FloatToHalf(-0.f), 0x8000);
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(std::nanf("")))));
}

TEST(CudaCastMathTest, RoundsToNearestEvenOverTheWholeRange) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> mant(1.f, 2.f);
  std::uniform_int_distribution<int> exp(-27, 17);
  for (int i = 0; i < 1000000; ++i) {
    const float f = (i & 1 ? -1.f : 1.f) * std::ldexp(mant(rng), exp(rng));
    const uint16_t h = FloatToHalf(f);
    const float a = std::fabs(f);
    if (a >= 65520.f) {
      ASSERT_EQ(h & 0x7FFF, 0x7C00) << f;
      continue;
    }
    const uint16_t mag = h & 0x7FFF;
    ASSERT_LT(mag, 0x7C00) << f;
    const double got = std::fabs(static_cast<double>(HalfToFloat(mag)) - a);
    if (mag > 0) {
      const double below = std::fabs(static_cast<double>(HalfToFloat(mag - 1)) - a);
      ASSERT_TRUE(got < below || (got == below && (mag & 1) == 0)) << f;
    }
    if (mag < 0x7BFF) {
      const double above = std::fabs(static_cast<double>(HalfToFloat(mag + 1)) - a);
      ASSERT_TRUE(got < above || (got == above && (mag & 1) == 0)) << f;
    }
    ASSERT_EQ(h >> 15, f < 0 ? 1 : 0) << f;
  }
}

}  // namespace
}  // namespace kiln
