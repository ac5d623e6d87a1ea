// Elementwise activation kernel: one thread per element, grid-stride loop, math from
// activation_math.h. The launch wrapper returns the cudaError_t of the launch; callers turn it into
// a Status naming the node (the backend issue wires this into execution).
#include <cuda_runtime.h>

#include "backends/cuda/kernels/activation_math.h"

namespace kiln::cuda_kernels {

__global__ void ActivationKernel(const float* __restrict__ src, float* __restrict__ dst, long n,
                                 int activation, float lo, float hi) {
  for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long>(gridDim.x) * blockDim.x)
    dst[i] = cuda_math::Apply(static_cast<cuda_math::Activation>(activation), src[i], lo, hi);
}

cudaError_t LaunchActivation(const float* src, float* dst, long n, int activation, float lo,
                             float hi, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  constexpr int kThreads = 256;
  long blocks = (n + kThreads - 1) / kThreads;
  if (blocks > 65535L * 16) blocks = 65535L * 16;
  ActivationKernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(src, dst, n, activation,
                                                                           lo, hi);
  return cudaGetLastError();
}

}  // namespace kiln::cuda_kernels
