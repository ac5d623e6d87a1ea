// Unary elementwise arithmetic shared by the CUDA kernels and their CPU unit tests: each function
// is __host__ __device__ (hd.h), so tests/backends/ check on the CPU exactly the code the GPU
// runs. Float32 in, float32 out; formulas follow kiln's reference ops (ops/elementwise/unary.cc,
// ops/fused/activation.cc), in float except Gelu, whose reference is double (erff differs from the
// double erf by a few ulp). Two float parameters carry the attributes: Clip (alpha = min,
// beta = max), LeakyRelu (alpha), HardSigmoid (alpha, beta); the others ignore them.
// Enum values are stable: launchers take them as int.
#pragma once

#include <cmath>

#include "backends/cuda/kernels/hd.h"

namespace kiln::cuda_math {

enum class Activation : int {
  kRelu = 0,
  kSigmoid,
  kHardSwish,
  kSilu,
  kClip,
  kLeakyRelu,
  kHardSigmoid,
  kTanh,
  kGelu,
  kErf,
  kExp,
  kLog,
  kSqrt,
  kNeg,
  kAbs,
  kReciprocal,
  kIdentity,
};

KILN_HD float Relu(float x) { return x > 0.f ? x : 0.f; }
KILN_HD float Sigmoid(float x) { return 1.f / (1.f + expf(-x)); }
KILN_HD float HardSwish(float x) { return x * fminf(1.f, fmaxf(0.f, x / 6.f + 0.5f)); }
KILN_HD float Silu(float x) { return x * Sigmoid(x); }
KILN_HD float Clip(float x, float lo, float hi) { return fminf(hi, fmaxf(lo, x)); }
KILN_HD float LeakyRelu(float x, float alpha) { return x >= 0.f ? x : alpha * x; }
KILN_HD float HardSigmoid(float x, float alpha, float beta) {
  return fmaxf(0.f, fminf(1.f, alpha * x + beta));
}
KILN_HD float Gelu(float x) { return 0.5f * x * (1.f + erff(x * 0.70710678118654752440f)); }

KILN_HD float Apply(Activation a, float x, float alpha, float beta) {
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
      return Clip(x, alpha, beta);
    case Activation::kLeakyRelu:
      return LeakyRelu(x, alpha);
    case Activation::kHardSigmoid:
      return HardSigmoid(x, alpha, beta);
    case Activation::kTanh:
      return tanhf(x);
    case Activation::kGelu:
      return Gelu(x);
    case Activation::kErf:
      return erff(x);
    case Activation::kExp:
      return expf(x);
    case Activation::kLog:
      return logf(x);
    case Activation::kSqrt:
      return sqrtf(x);
    case Activation::kNeg:
      return -x;
    case Activation::kAbs:
      return x < 0.f ? -x : x;
    case Activation::kReciprocal:
      return 1.f / x;
    case Activation::kIdentity:
      return x;
  }
  return x;
}

}  // namespace kiln::cuda_math
