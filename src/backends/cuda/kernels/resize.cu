// 2-D Resize / Upsample (resize_math.h): one thread per output element of [planes, out_h, out_w],
// grid-stride loop, each computing its H and W taps (double coordinates) and reading one pixel
// (nearest) or up to four (bilinear). float or Half storage (computed in float32), NCHW dense;
// declared in launch.h.
#include <cuda_runtime.h>

#include "backends/cuda/kernels/kernel_util.cuh"
#include "backends/cuda/kernels/launch.h"
#include "backends/cuda/kernels/resize_math.h"

namespace kiln::cuda_kernels {

template <typename T>
__global__ void Resize2dKernel(const T* __restrict__ src, T* __restrict__ dst, int64_t n,
                               cuda_math::Resize2dParams p) {
  const int64_t out_plane = p.out_h * p.out_w, in_plane = p.in_h * p.in_w;
  for (int64_t i = GridStart(); i < n; i += GridStep()) {
    const int64_t plane = i / out_plane, r = i - plane * out_plane;
    const int64_t oh = r / p.out_w, ow = r - oh * p.out_w;
    cuda_math::Store(&dst[i], cuda_math::ResizeAt(src + plane * in_plane, p, oh, ow));
  }
}

template <typename T>
cudaError_t LaunchResize2d(const T* src, T* dst, int64_t planes,
                           const cuda_math::Resize2dParams& params, cudaStream_t stream) {
  const int64_t n = planes * params.out_h * params.out_w;
  if (n <= 0) return cudaSuccess;
  Resize2dKernel<T><<<GridFor(n), kThreads, 0, stream>>>(src, dst, n, params);
  return cudaGetLastError();
}

#define KILN_INSTANTIATE(T)                                                                       \
  template cudaError_t LaunchResize2d<T>(const T*, T*, int64_t, const cuda_math::Resize2dParams&, \
                                         cudaStream_t);
KILN_FLOAT_STORAGE(KILN_INSTANTIATE)

KILN_CUDA_MODULE(Resize2dKernel<float>);

}  // namespace kiln::cuda_kernels
