// ONNX Gather (gather_math.h): one thread per output element of [outer, count, inner], grid-stride
// loop, each thread reading its int64 index and copying one element (zero for an out-of-range
// index). The element is copied as an unsigned integer of elem_bytes (1, 2, 4 or 8), so float32,
// int64 and any other fixed-size dtype gather bit-for-bit. Declared in launch.h.
#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/kernels/gather_math.h"
#include "backends/cuda/kernels/kernel_util.cuh"
#include "backends/cuda/kernels/launch.h"

namespace kiln::cuda_kernels {

template <typename T>
__global__ void GatherAxisKernel(const T* __restrict__ src, const int64_t* __restrict__ indices,
                                 T* __restrict__ dst, int64_t n, cuda_math::GatherAxisShape s) {
  for (int64_t i = GridStart(); i < n; i += GridStep()) {
    const int64_t off = cuda_math::GatherAxisSourceOffset(s, indices, i);
    dst[i] = off < 0 ? T{0} : src[off];
  }
}

template <typename T>
cudaError_t LaunchGatherAxisTyped(const void* src, const int64_t* indices, void* dst, int64_t n,
                                  const cuda_math::GatherAxisShape& shape, cudaStream_t stream) {
  GatherAxisKernel<T><<<GridFor(n), kThreads, 0, stream>>>(static_cast<const T*>(src), indices,
                                                           static_cast<T*>(dst), n, shape);
  return cudaGetLastError();
}

cudaError_t LaunchGatherAxis(const void* src, const int64_t* indices, void* dst,
                             const cuda_math::GatherAxisShape& shape, int64_t elem_bytes,
                             cudaStream_t stream) {
  const int64_t n = cuda_math::GatherAxisOutputs(shape);
  if (n <= 0) return cudaSuccess;
  switch (elem_bytes) {
    case 1:
      return LaunchGatherAxisTyped<uint8_t>(src, indices, dst, n, shape, stream);
    case 2:
      return LaunchGatherAxisTyped<uint16_t>(src, indices, dst, n, shape, stream);
    case 4:
      return LaunchGatherAxisTyped<uint32_t>(src, indices, dst, n, shape, stream);
    case 8:
      return LaunchGatherAxisTyped<uint64_t>(src, indices, dst, n, shape, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

KILN_CUDA_MODULE(GatherAxisKernel<float>);

}  // namespace kiln::cuda_kernels
