// Data-movement kernels (layout_math.h): strided gather (Transpose, Slice), constant Pad and the
// Concat copy. One thread per output element (per source element for Concat), grid-stride loop,
// each thread computing its offset with the KILN_HD index function. Elements are float or Half
// (copied bit-for-bit, so any 4- or 2-byte type works); dense row-major; declared in launch.h.
#include <cuda_runtime.h>

#include "backends/cuda/kernels/kernel_util.cuh"
#include "backends/cuda/kernels/launch.h"
#include "backends/cuda/kernels/layout_math.h"

namespace kiln::cuda_kernels {

template <typename T>
__global__ void GatherKernel(const T* __restrict__ src, T* __restrict__ dst, int64_t n,
                             cuda_math::GatherIndex index) {
  for (int64_t i = GridStart(); i < n; i += GridStep())
    dst[i] = src[cuda_math::GatherOffset(index, i)];
}

template <typename T>
__global__ void PadConstantKernel(const T* __restrict__ src, T* __restrict__ dst, int64_t n,
                                  cuda_math::PadIndex index) {
  for (int64_t i = GridStart(); i < n; i += GridStep()) {
    const int64_t off = cuda_math::PadSourceOffset(index, i);
    if (off < 0)
      cuda_math::Store(&dst[i], index.value);
    else
      dst[i] = src[off];
  }
}

template <typename T>
__global__ void ConcatCopyKernel(const T* __restrict__ src, T* __restrict__ dst, int64_t n,
                                 cuda_math::ConcatIndex index) {
  for (int64_t i = GridStart(); i < n; i += GridStep())
    dst[cuda_math::ConcatDstOffset(index, i)] = src[i];
}

template <typename T>
cudaError_t LaunchStridedGather(const T* src, T* dst, const cuda_math::GatherIndex& index,
                                cudaStream_t stream) {
  const int64_t n = cuda_math::OutputElements(index);
  if (n <= 0) return cudaSuccess;
  GatherKernel<T><<<GridFor(n), kThreads, 0, stream>>>(src, dst, n, index);
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchPadConstant(const T* src, T* dst, const cuda_math::PadIndex& index,
                              cudaStream_t stream) {
  const int64_t n = cuda_math::OutputElements(index);
  if (n <= 0) return cudaSuccess;
  PadConstantKernel<T><<<GridFor(n), kThreads, 0, stream>>>(src, dst, n, index);
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchConcatCopy(const T* src, T* dst, const cuda_math::ConcatIndex& index,
                             cudaStream_t stream) {
  const int64_t n = index.rows * index.src_cols;
  if (n <= 0) return cudaSuccess;
  ConcatCopyKernel<T><<<GridFor(n), kThreads, 0, stream>>>(src, dst, n, index);
  return cudaGetLastError();
}

#define KILN_INSTANTIATE(T)                                                                \
  template cudaError_t LaunchStridedGather<T>(const T*, T*, const cuda_math::GatherIndex&, \
                                              cudaStream_t);                               \
  template cudaError_t LaunchPadConstant<T>(const T*, T*, const cuda_math::PadIndex&,      \
                                            cudaStream_t);                                 \
  template cudaError_t LaunchConcatCopy<T>(const T*, T*, const cuda_math::ConcatIndex&,    \
                                           cudaStream_t);
KILN_FLOAT_STORAGE(KILN_INSTANTIATE)

KILN_CUDA_MODULE(GatherKernel<float>);

}  // namespace kiln::cuda_kernels
