// Pooling kernels (pool_math.h). MaxPool2d / AveragePool2d: one thread per output element of
// [planes, out_h, out_w], grid-stride loop, window bounds from MaxPoolAt / AvgPoolAt. Global
// pools: one block of kReduceThreads threads per plane (grid-stride over planes), each thread
// folding a strided slice of the plane, then the block tree (kernel_util.cuh, reduce_math.h).
// float or Half storage (computed in float32), NCHW dense; declared in launch.h.
#include <cuda_runtime.h>

#include "backends/cuda/kernels/kernel_util.cuh"
#include "backends/cuda/kernels/launch.h"
#include "backends/cuda/kernels/pool_math.h"
#include "backends/cuda/kernels/reduce_math.h"

namespace kiln::cuda_kernels {

template <bool kMax, typename T>
__global__ void Pool2dKernel(const T* __restrict__ src, T* __restrict__ dst, int64_t n,
                             cuda_math::Pool2dParams p) {
  const int64_t out_plane = p.out_h * p.out_w, in_plane = p.in_h * p.in_w;
  for (int64_t i = GridStart(); i < n; i += GridStep()) {
    const int64_t plane = i / out_plane, r = i - plane * out_plane;
    const int64_t oh = r / p.out_w, ow = r - oh * p.out_w;
    const T* x = src + plane * in_plane;
    cuda_math::Store(
        &dst[i], kMax ? cuda_math::MaxPoolAt(x, p, oh, ow) : cuda_math::AvgPoolAt(x, p, oh, ow));
  }
}

template <typename T>
__global__ void GlobalPoolKernel(const T* __restrict__ src, T* __restrict__ dst, int64_t planes,
                                 int64_t plane_size, bool max) {
  __shared__ float smem[cuda_math::kReduceThreads];
  const auto kind = max ? cuda_math::ReduceKind::kMax : cuda_math::ReduceKind::kSum;
  for (int64_t p = blockIdx.x; p < planes; p += gridDim.x) {
    const cuda_math::LoadRow<T> load{src + p * plane_size, 1};
    const float v = BlockReduce(
        kind,
        cuda_math::ThreadPartial(kind, load, plane_size, threadIdx.x, cuda_math::kReduceThreads),
        smem);
    if (threadIdx.x == 0)
      cuda_math::Store(&dst[p], cuda_math::GlobalPoolResult(v, plane_size, max));
  }
}

template <bool kMax, typename T>
cudaError_t LaunchPool2d(const T* src, T* dst, int64_t planes,
                         const cuda_math::Pool2dParams& params, cudaStream_t stream) {
  const int64_t n = planes * params.out_h * params.out_w;
  if (n <= 0) return cudaSuccess;
  Pool2dKernel<kMax, T><<<GridFor(n), kThreads, 0, stream>>>(src, dst, n, params);
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchMaxPool2d(const T* src, T* dst, int64_t planes,
                            const cuda_math::Pool2dParams& params, cudaStream_t stream) {
  return LaunchPool2d<true, T>(src, dst, planes, params, stream);
}

template <typename T>
cudaError_t LaunchAveragePool2d(const T* src, T* dst, int64_t planes,
                                const cuda_math::Pool2dParams& params, cudaStream_t stream) {
  return LaunchPool2d<false, T>(src, dst, planes, params, stream);
}

template <typename T>
cudaError_t LaunchGlobalPool(const T* src, T* dst, int64_t planes, int64_t plane_size, bool max,
                             cudaStream_t stream) {
  if (planes <= 0) return cudaSuccess;
  GlobalPoolKernel<T><<<GridFor(planes, 1), cuda_math::kReduceThreads, 0, stream>>>(
      src, dst, planes, plane_size, max);
  return cudaGetLastError();
}

#define KILN_INSTANTIATE(T)                                                                      \
  template cudaError_t LaunchMaxPool2d<T>(const T*, T*, int64_t, const cuda_math::Pool2dParams&, \
                                          cudaStream_t);                                         \
  template cudaError_t LaunchAveragePool2d<T>(const T*, T*, int64_t,                             \
                                              const cuda_math::Pool2dParams&, cudaStream_t);     \
  template cudaError_t LaunchGlobalPool<T>(const T*, T*, int64_t, int64_t, bool, cudaStream_t);
KILN_FLOAT_STORAGE(KILN_INSTANTIATE)

KILN_CUDA_MODULE(GlobalPoolKernel<float>);

}  // namespace kiln::cuda_kernels
