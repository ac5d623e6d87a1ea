// Elementwise unary kernel (activations and math, activation_math.h): one thread per element,
// grid-stride loop. In place is allowed (dst == src). Float32, any length; declared in launch.h.
#include <cuda_runtime.h>

#include "backends/cuda/kernels/activation_math.h"
#include "backends/cuda/kernels/kernel_util.cuh"
#include "backends/cuda/kernels/launch.h"

namespace kiln::cuda_kernels {

__global__ void ActivationKernel(const float* src, float* dst, int64_t n, int activation,
                                 float alpha, float beta) {
  const auto act = static_cast<cuda_math::Activation>(activation);
  for (int64_t i = GridStart(); i < n; i += GridStep())
    dst[i] = cuda_math::Apply(act, src[i], alpha, beta);
}

cudaError_t LaunchActivation(const float* src, float* dst, int64_t n, int activation, float alpha,
                             float beta, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  ActivationKernel<<<GridFor(n), kThreads, 0, stream>>>(src, dst, n, activation, alpha, beta);
  return cudaGetLastError();
}

KILN_CUDA_MODULE(ActivationKernel);

}  // namespace kiln::cuda_kernels
