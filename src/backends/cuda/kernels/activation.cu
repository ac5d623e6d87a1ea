// Elementwise unary kernel (activations and math, activation_math.h): one thread per element,
// grid-stride loop. In place is allowed (dst == src). float or Half storage (computed in float32),
// any length; declared in launch.h.
#include <cuda_runtime.h>

#include "backends/cuda/kernels/activation_math.h"
#include "backends/cuda/kernels/kernel_util.cuh"
#include "backends/cuda/kernels/launch.h"

namespace kiln::cuda_kernels {

template <typename T>
__global__ void ActivationKernel(const T* src, T* dst, int64_t n, int activation, float alpha,
                                 float beta) {
  const auto act = static_cast<cuda_math::Activation>(activation);
  for (int64_t i = GridStart(); i < n; i += GridStep())
    cuda_math::Store(&dst[i], cuda_math::Apply(act, cuda_math::ToFloat(src[i]), alpha, beta));
}

template <typename T>
cudaError_t LaunchActivation(const T* src, T* dst, int64_t n, int activation, float alpha,
                             float beta, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  ActivationKernel<T><<<GridFor(n), kThreads, 0, stream>>>(src, dst, n, activation, alpha, beta);
  return cudaGetLastError();
}

#define KILN_INSTANTIATE(T) \
  template cudaError_t LaunchActivation<T>(const T*, T*, int64_t, int, float, float, cudaStream_t);
KILN_FLOAT_STORAGE(KILN_INSTANTIATE)

KILN_CUDA_MODULE(ActivationKernel<float>);

}  // namespace kiln::cuda_kernels
