// Activation arithmetic shared by the CUDA kernels and their CPU unit tests: each function is
// __host__ __device__, so tests/backends/cuda_math_test.cc checks on the CPU exactly the code the
// GPU runs. Float32 in, float32 out; formulas follow the ONNX operator definitions.
#pragma once

#include <cmath>

#if defined(__CUDACC__)
#define KILN_HD __host__ __device__ __forceinline__
#else
#define KILN_HD inline
#endif

namespace kiln::cuda_math {

enum class Activation : int { kRelu = 0, kSigmoid, kHardSwish, kSilu, kClip };

KILN_HD float Relu(float x) { return x > 0.f ? x : 0.f; }
KILN_HD float Sigmoid(float x) { return 1.f / (1.f + expf(-x)); }
KILN_HD float HardSwish(float x) { return x * fminf(1.f, fmaxf(0.f, x / 6.f + 0.5f)); }
KILN_HD float Silu(float x) { return x * Sigmoid(x); }
KILN_HD float Clip(float x, float lo, float hi) { return fminf(hi, fmaxf(lo, x)); }

KILN_HD float Apply(Activation a, float x, float lo, float hi) {
  switch (a) {
    case Activation::kRelu:
      return Relu(x);
    case Activation::kSigmoid:
      return Sigmoid(x);
    case Activation::kHardSwish:
      return HardSwish(x);
    case Activation::kSilu:
      return Silu(x);
    case Activation::kClip:
      return Clip(x, lo, hi);
  }
  return x;
}

}  // namespace kiln::cuda_math
