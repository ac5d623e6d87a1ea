// Pooling kernels (pool_math.h). MaxPool2d / AveragePool2d: one thread per output element of
// [planes, out_h, out_w], grid-stride loop, window bounds from MaxPoolAt / AvgPoolAt. Global
// pools: one block of kReduceThreads threads per plane (grid-stride over planes), each thread
// folding a strided slice of the plane, then the block tree (kernel_util.cuh, reduce_math.h).
// Float32, NCHW dense; declared in launch.h.
#include <cuda_runtime.h>

#include "backends/cuda/kernels/kernel_util.cuh"
#include "backends/cuda/kernels/launch.h"
#include "backends/cuda/kernels/pool_math.h"
#include "backends/cuda/kernels/reduce_math.h"

namespace kiln::cuda_kernels {

template <bool kMax>
__global__ void Pool2dKernel(const float* __restrict__ src, float* __restrict__ dst, int64_t n,
                             cuda_math::Pool2dParams p) {
  const int64_t out_plane = p.out_h * p.out_w, in_plane = p.in_h * p.in_w;
  for (int64_t i = GridStart(); i < n; i += GridStep()) {
    const int64_t plane = i / out_plane, r = i - plane * out_plane;
    const int64_t oh = r / p.out_w, ow = r - oh * p.out_w;
    const float* x = src + plane * in_plane;
    dst[i] = kMax ? cuda_math::MaxPoolAt(x, p, oh, ow) : cuda_math::AvgPoolAt(x, p, oh, ow);
  }
}

__global__ void GlobalPoolKernel(const float* __restrict__ src, float* __restrict__ dst,
                                 int64_t planes, int64_t plane_size, bool max) {
  __shared__ float smem[cuda_math::kReduceThreads];
  const auto kind = max ? cuda_math::ReduceKind::kMax : cuda_math::ReduceKind::kSum;
  for (int64_t p = blockIdx.x; p < planes; p += gridDim.x) {
    const cuda_math::LoadRow load{src + p * plane_size, 1};
    const float v = BlockReduce(
        kind,
        cuda_math::ThreadPartial(kind, load, plane_size, threadIdx.x, cuda_math::kReduceThreads),
        smem);
    if (threadIdx.x == 0) dst[p] = cuda_math::GlobalPoolResult(v, plane_size, max);
  }
}

template <bool kMax>
cudaError_t LaunchPool2d(const float* src, float* dst, int64_t planes,
                         const cuda_math::Pool2dParams& params, cudaStream_t stream) {
  const int64_t n = planes * params.out_h * params.out_w;
  if (n <= 0) return cudaSuccess;
  Pool2dKernel<kMax><<<GridFor(n), kThreads, 0, stream>>>(src, dst, n, params);
  return cudaGetLastError();
}

cudaError_t LaunchMaxPool2d(const float* src, float* dst, int64_t planes,
                            const cuda_math::Pool2dParams& params, cudaStream_t stream) {
  return LaunchPool2d<true>(src, dst, planes, params, stream);
}

cudaError_t LaunchAveragePool2d(const float* src, float* dst, int64_t planes,
                                const cuda_math::Pool2dParams& params, cudaStream_t stream) {
  return LaunchPool2d<false>(src, dst, planes, params, stream);
}

cudaError_t LaunchGlobalPool(const float* src, float* dst, int64_t planes, int64_t plane_size,
                             bool max, cudaStream_t stream) {
  if (planes <= 0) return cudaSuccess;
  GlobalPoolKernel<<<GridFor(planes, 1), cuda_math::kReduceThreads, 0, stream>>>(src, dst, planes,
                                                                                 plane_size, max);
  return cudaGetLastError();
}

KILN_CUDA_MODULE(GlobalPoolKernel);

}  // namespace kiln::cuda_kernels
