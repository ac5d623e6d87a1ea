// The CUDA kernels' view of kiln's one activation type (ops/activation_math.h): the same enum and
// the same host/device math, so tests/backends/ check on the CPU exactly the arithmetic the GPU
// runs. Launchers take the kind as int.
#pragma once

#include "backends/cuda/kernels/hd.h"
#include "ops/activation_math.h"

namespace kiln::cuda_math {

using Activation = ops::ActivationKind;

KILN_HD float Apply(Activation a, float x, float alpha, float beta) {
  return ops::ActivationValue(a, x, alpha, beta);
}

}  // namespace kiln::cuda_math
