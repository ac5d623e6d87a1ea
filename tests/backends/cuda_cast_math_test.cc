// The float32 <-> float16 conversion the fp16 kernels and the weight prepacking share
// (src/backends/cuda/kernels/cast_math.h), checked on the CPU: every half value round-trips, known
// encodings, and for a million floats over the whole range the result is the nearest half with
// ties to even (checked against both neighbours), overflow to infinity at 65520.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backends/cuda/kernels/cast_math.h"
#include "backends/cuda/kernels/epilogue_math.h"
#include "backends/cuda/kernels/pool_math.h"
#include "backends/cuda/kernels/reduce_axes_math.h"
#include "backends/cuda/kernels/reduce_math.h"
#include "backends/cuda/kernels/resize_math.h"
#include "core/half.h"

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

// The session converts float16 constants on the host with core/half.h (DoubleToHalf); the device
// rounds activations with cast_math.h's FloatToHalf. Both must give the same bits.
TEST(CudaCastMathTest, HostConstantsAndDeviceStoresRoundAlike) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 1000000; ++i) {
    uint32_t u = bits(rng);
    float f;
    std::memcpy(&f, &u, 4);
    if (std::isnan(f)) continue;  // NaN payloads differ; both stay NaN
    cuda_math::Half h{};
    cuda_math::Store(&h, f);
    ASSERT_EQ(h.bits, DoubleToHalf(static_cast<double>(f))) << f;
    ASSERT_EQ(cuda_math::ToFloat(h), HalfToFloat(h.bits));
  }
}

// The kernels' arithmetic over float16 storage (precision fp16 between kernels) is their float32
// arithmetic on the widened values: the same bits as the float path fed the rounded inputs.
TEST(CudaCastMathTest, KernelMathOverHalfStorageEqualsFloatMathOnTheRoundedValues) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> dist(-4.f, 4.f);
  const int64_t n = 2 * 3 * 7 * 9;  // [2, 3, 7, 9]
  std::vector<cuda_math::Half> xh(n);
  std::vector<float> xf(n);
  for (int64_t i = 0; i < n; ++i) {
    cuda_math::Store(&xh[i], dist(rng));
    xf[i] = cuda_math::ToFloat(xh[i]);
  }
  auto same = [](float a, float b) { return std::memcmp(&a, &b, 4) == 0; };
  // Pools over one 7x9 plane.
  const cuda_math::Pool2dParams p{7, 9, 3, 4, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, false};
  for (int64_t oh = 0; oh < 3; ++oh)
    for (int64_t ow = 0; ow < 4; ++ow) {
      EXPECT_TRUE(same(cuda_math::MaxPoolAt(xh.data(), p, oh, ow),
                       cuda_math::MaxPoolAt(xf.data(), p, oh, ow)));
      EXPECT_TRUE(same(cuda_math::AvgPoolAt(xh.data(), p, oh, ow),
                       cuda_math::AvgPoolAt(xf.data(), p, oh, ow)));
    }
  // Row loads (global pools, softmax, layer norm).
  const auto k = cuda_math::ReduceKind::kSum;
  EXPECT_TRUE(same(cuda_math::ThreadPartial(k, cuda_math::LoadRow{xh.data(), 3}, 40, 1, 4),
                   cuda_math::ThreadPartial(k, cuda_math::LoadRow{xf.data(), 3}, 40, 1, 4)));
  EXPECT_TRUE(
      same(cuda_math::ThreadPartial(k, cuda_math::LoadExpShifted{xh.data(), 1, 0.5f}, 60, 0, 1),
           cuda_math::ThreadPartial(k, cuda_math::LoadExpShifted{xf.data(), 1, 0.5f}, 60, 0, 1)));
  EXPECT_TRUE(
      same(cuda_math::ThreadPartial(k, cuda_math::LoadSquaredDev{xh.data(), 0.25f}, 63, 2, 8),
           cuda_math::ThreadPartial(k, cuda_math::LoadSquaredDev{xf.data(), 0.25f}, 63, 2, 8)));
  // Reductions over axes 1 and 3.
  cuda_math::ReduceAxesShape rs{};
  ASSERT_TRUE(cuda_math::MakeReduceAxesShape({2, 3, 7, 9}, {1, 3}, &rs));
  for (auto op : {cuda_math::ReduceOp::kSum, cuda_math::ReduceOp::kMax, cuda_math::ReduceOp::kL2})
    for (int64_t o = 0; o < rs.outputs; ++o)
      EXPECT_TRUE(same(cuda_math::StridedReduceAt(op, xh.data(), rs, o),
                       cuda_math::StridedReduceAt(op, xf.data(), rs, o)));
  // Bilinear resize of the [6, 7, 9] planes to [6, 10, 5].
  cuda_math::Resize2dParams rp{};
  ASSERT_TRUE(cuda_math::MakeResize2dParams(
      {2, 3, 7, 9}, {2, 3, 10, 5}, {1.0, 1.0, 10.0 / 7.0, 5.0 / 9.0},
      cuda_math::ResizeMode::kLinear, cuda_math::ResizeCoord::kHalfPixel,
      cuda_math::ResizeNearest::kRoundPreferFloor, &rp));
  for (int64_t oh = 0; oh < 10; ++oh)
    for (int64_t ow = 0; ow < 5; ++ow)
      EXPECT_TRUE(same(cuda_math::ResizeAt(xh.data() + 63, rp, oh, ow),
                       cuda_math::ResizeAt(xf.data() + 63, rp, oh, ow)));
  // The convolution epilogue's residual.
  const float bias[3] = {0.5f, -1.f, 2.f};
  const cuda_math::EpilogueParams ep{cuda_math::Activation::kRelu, 0.f, 0.f};
  for (int64_t i = 0; i < n; i += 17)
    EXPECT_TRUE(same(cuda_math::ConvEpilogueAt(1.5f, bias, xh.data(), i, i % 3, ep),
                     cuda_math::ConvEpilogueAt(1.5f, bias, xf.data(), i, i % 3, ep)));
}

}  // namespace
}  // namespace kiln
