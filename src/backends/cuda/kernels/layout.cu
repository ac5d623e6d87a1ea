// Data-movement kernels (layout_math.h): strided gather (Transpose, Slice), constant Pad and the
// Concat copy. One thread per output element (per source element for Concat), grid-stride loop,
// each thread computing its offset with the KILN_HD index function. Elements are float32 (any
// 4-byte type works bit-for-bit); dense row-major; declared in launch.h.
#include <cuda_runtime.h>

#include "backends/cuda/kernels/kernel_util.cuh"
#include "backends/cuda/kernels/launch.h"
#include "backends/cuda/kernels/layout_math.h"

namespace kiln::cuda_kernels {

__global__ void GatherKernel(const float* __restrict__ src, float* __restrict__ dst, int64_t n,
                             cuda_math::GatherIndex index) {
  for (int64_t i = GridStart(); i < n; i += GridStep())
    dst[i] = src[cuda_math::GatherOffset(index, i)];
}

__global__ void PadConstantKernel(const float* __restrict__ src, float* __restrict__ dst, int64_t n,
                                  cuda_math::PadIndex index) {
  for (int64_t i = GridStart(); i < n; i += GridStep()) {
    const int64_t off = cuda_math::PadSourceOffset(index, i);
    dst[i] = off < 0 ? index.value : src[off];
  }
}

__global__ void ConcatCopyKernel(const float* __restrict__ src, float* __restrict__ dst, int64_t n,
                                 cuda_math::ConcatIndex index) {
  for (int64_t i = GridStart(); i < n; i += GridStep())
    dst[cuda_math::ConcatDstOffset(index, i)] = src[i];
}

cudaError_t LaunchStridedGather(const float* src, float* dst, const cuda_math::GatherIndex& index,
                                cudaStream_t stream) {
  const int64_t n = cuda_math::OutputElements(index);
  if (n <= 0) return cudaSuccess;
  GatherKernel<<<GridFor(n), kThreads, 0, stream>>>(src, dst, n, index);
  return cudaGetLastError();
}

cudaError_t LaunchPadConstant(const float* src, float* dst, const cuda_math::PadIndex& index,
                              cudaStream_t stream) {
  const int64_t n = cuda_math::OutputElements(index);
  if (n <= 0) return cudaSuccess;
  PadConstantKernel<<<GridFor(n), kThreads, 0, stream>>>(src, dst, n, index);
  return cudaGetLastError();
}

cudaError_t LaunchConcatCopy(const float* src, float* dst, const cuda_math::ConcatIndex& index,
                             cudaStream_t stream) {
  const int64_t n = index.rows * index.src_cols;
  if (n <= 0) return cudaSuccess;
  ConcatCopyKernel<<<GridFor(n), kThreads, 0, stream>>>(src, dst, n, index);
  return cudaGetLastError();
}

KILN_CUDA_MODULE(GatherKernel);

}  // namespace kiln::cuda_kernels
