// float32 <-> float16 conversion kernels for --precision fp16 (cast_math.h): a grid-stride loop,
// one element per thread, identical bits to the host conversion. Declared in cast.h.
#include <cuda_runtime.h>

#include "backends/cuda/kernels/cast.h"
#include "backends/cuda/kernels/cast_math.h"
#include "backends/cuda/kernels/launch.h"
#include "backends/cuda/kernels/kernel_util.cuh"

namespace kiln::cuda_kernels {

__global__ void FloatToHalfKernel(const float* __restrict__ src, uint16_t* __restrict__ dst,
                                  int64_t n) {
  for (int64_t i = GridStart(); i < n; i += GridStep()) dst[i] = cuda_math::FloatToHalf(src[i]);
}

__global__ void HalfToFloatKernel(const uint16_t* __restrict__ src, float* __restrict__ dst,
                                  int64_t n) {
  for (int64_t i = GridStart(); i < n; i += GridStep()) dst[i] = cuda_math::HalfToFloat(src[i]);
}

cudaError_t LaunchFloatToHalf(const float* src, uint16_t* dst, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  FloatToHalfKernel<<<GridFor(n), kThreads, 0, stream>>>(src, dst, n);
  return cudaGetLastError();
}

cudaError_t LaunchHalfToFloat(const uint16_t* src, float* dst, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  HalfToFloatKernel<<<GridFor(n), kThreads, 0, stream>>>(src, dst, n);
  return cudaGetLastError();
}

KILN_CUDA_MODULE(FloatToHalfKernel);

}  // namespace kiln::cuda_kernels
