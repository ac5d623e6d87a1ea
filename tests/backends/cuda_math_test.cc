// The CUDA kernels' arithmetic (activation_math.h, __host__ __device__) checked on the CPU
// against kiln's reference ops, so the math the GPU runs is tested on machines without one.
#include <gtest/gtest.h>

#include <cmath>

#include "backends/cuda/kernels/activation_math.h"

namespace kiln {
namespace {

using cuda_math::Activation;

TEST(CudaMathTest, MatchesOnnxDefinitions) {
  for (float x : {-8.f, -3.f, -1.f, -0.25f, 0.f, 0.5f, 2.f, 3.f, 7.f}) {
    EXPECT_EQ(cuda_math::Apply(Activation::kRelu, x, 0, 0), x > 0 ? x : 0.f);
    EXPECT_NEAR(cuda_math::Apply(Activation::kSigmoid, x, 0, 0), 1.0 / (1.0 + std::exp(-x)), 1e-6);
    double hs = x * std::min(1.0, std::max(0.0, x / 6.0 + 0.5));
    EXPECT_NEAR(cuda_math::Apply(Activation::kHardSwish, x, 0, 0), hs, 1e-6);
    EXPECT_NEAR(cuda_math::Apply(Activation::kSilu, x, 0, 0), x / (1.0 + std::exp(-x)), 1e-5);
    EXPECT_EQ(cuda_math::Apply(Activation::kClip, x, 0.f, 6.f), std::min(6.f, std::max(0.f, x)));
  }
}

}  // namespace
}  // namespace kiln
